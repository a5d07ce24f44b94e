//! The rows a run owns in the store's child tables, written in the run's transaction.

use rusqlite::{Transaction, params};

use crate::model::{HostPart, NicDelta, SeriesPoint};
use crate::params::ParamValue;
use nsperf_core::report::CpuInterval;

/// Each of the run's parameters: its value, template, kind and number.
pub(super) fn params(
    tx: &Transaction<'_>,
    run_id: i64,
    params: &[(String, ParamValue)],
) -> rusqlite::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT INTO run_params (run_id, name, value, template, kind, number)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (name, v) in params {
        st.execute(params![
            run_id,
            name,
            v.value,
            v.template,
            v.kind.as_str(),
            v.number
        ])?;
    }
    Ok(())
}

/// The run's time series.
pub(super) fn intervals(
    tx: &Transaction<'_>,
    run_id: i64,
    series: &[SeriesPoint],
) -> rusqlite::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT INTO intervals (run_id, start_s, length_s, value) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for p in series {
        st.execute(params![run_id, p.start_s, p.length_s, p.value])?;
    }
    Ok(())
}

/// Each core's use per interval.
pub(super) fn cpu(tx: &Transaction<'_>, run_id: i64, cpu: &[CpuInterval]) -> rusqlite::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT INTO cpu (run_id, start_s, length_s, core, busy_pct, user_pct, sys_pct,
             softirq_pct) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for c in cpu {
        for k in &c.cpu.per_core {
            st.execute(params![
                run_id,
                c.start_s,
                c.length_s,
                k.core,
                k.busy_pct,
                k.user_pct,
                k.sys_pct,
                k.softirq_pct
            ])?;
        }
    }
    Ok(())
}

/// Each host's part of a run on many hosts.
pub(super) fn hosts(tx: &Transaction<'_>, run_id: i64, hosts: &[HostPart]) -> rusqlite::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT INTO run_hosts (run_id, host, role, error, metric, value, payload_bytes,
             started_unix_ns, clock_offset_ns, clock_error_ns, metrics_json, report_json,
             series_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    for h in hosts {
        st.execute(params![
            run_id,
            h.host,
            h.role.as_str(),
            h.error,
            h.metric,
            h.value,
            h.payload_bytes.map(|b| b as i64),
            h.started_unix_ns as i64,
            h.clock_offset_ns,
            h.clock_error_ns as i64,
            serde_json::to_string(&h.metrics).unwrap_or_default(),
            h.report_json,
            (!h.series.is_empty()).then(|| serde_json::to_string(&h.series).unwrap_or_default()),
        ])?;
    }
    Ok(())
}

/// Each interface's counter growth.
pub(super) fn nic(tx: &Transaction<'_>, run_id: i64, nic: &[NicDelta]) -> rusqlite::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT INTO nic (run_id, site, iface, rx_bytes, tx_bytes, rx_packets,
             tx_packets, rx_dropped, tx_dropped) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    for NicDelta { site, counters: c } in nic {
        st.execute(params![
            run_id,
            site,
            c.name,
            c.rx_bytes as i64,
            c.tx_bytes as i64,
            c.rx_packets as i64,
            c.tx_packets as i64,
            c.rx_dropped as i64,
            c.tx_dropped as i64
        ])?;
    }
    Ok(())
}
