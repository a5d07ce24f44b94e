//! Reading experiments, runs and their series back from the store.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};

use super::{CpuRow, ExperimentRecord, RunRecord, Store, u};
use crate::Metric;
use crate::error::StoreError;
use crate::model::{HostPart, NicDelta, SeriesPoint};
use crate::params::{ParamValue, Params};

impl Store {
    fn experiment_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ExperimentRecord> {
        Ok(ExperimentRecord {
            id: r.get(0)?,
            plan_name: r.get(1)?,
            description: r.get(2)?,
            fingerprint: r.get(3)?,
            plan_toml: r.get(4)?,
            status: r.get::<_, String>(5)?.parse().map_err(|e: String| {
                rusqlite::Error::FromSqlConversionFailure(5, rusqlite::types::Type::Text, e.into())
            })?,
            started_unix_ns: u(r.get(6)?),
            finished_unix_ns: r.get::<_, Option<i64>>(7)?.map(u),
            total_runs: u(r.get(8)?),
            nsperf_version: r.get(9)?,
            host_json: r.get(10)?,
            notes: r.get(11)?,
            label: r.get(12)?,
        })
    }

    const EXP_COLS: &'static str = "id, plan_name, description, fingerprint, plan_toml, status,
        started_unix_ns, finished_unix_ns, total_runs, nsperf_version, host_json, notes,
        label";

    /// Every experiment, oldest first.
    pub fn experiments(&self) -> Result<Vec<ExperimentRecord>, StoreError> {
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT {} FROM experiments ORDER BY id",
                Self::EXP_COLS
            ))
            .map_err(self.err())?;
        let rows = st
            .query_map([], Self::experiment_from_row)
            .map_err(self.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.err())
    }

    /// One experiment by id, the latest for `latest`, or the latest with that label
    /// (`nsperf run --label`).
    pub fn experiment(&self, which: &str) -> Result<ExperimentRecord, StoreError> {
        let (filter, arg) = if which == "latest" {
            ("1 = 1 OR ?1 IS NULL", None)
        } else if let Ok(id) = which.parse::<i64>() {
            ("id = ?1", Some(rusqlite::types::Value::Integer(id)))
        } else {
            (
                "label = ?1",
                Some(rusqlite::types::Value::Text(which.to_string())),
            )
        };
        let r = self
            .conn
            .query_row(
                &format!(
                    "SELECT {} FROM experiments WHERE {filter} ORDER BY id DESC LIMIT 1",
                    Self::EXP_COLS
                ),
                params![arg],
                Self::experiment_from_row,
            )
            .optional();
        r.map_err(self.err())?.ok_or_else(|| {
            StoreError::NoExperiment(if arg.is_some() && which.parse::<i64>().is_err() {
                format!("labelled \"{which}\" (give an id, latest or a label)")
            } else {
                which.to_string()
            })
        })
    }

    /// Counts of an experiment's runs by status: (ok, skipped, failed), partial runs (some
    /// hosts failed) counted as failed.
    pub fn counts(&self, id: i64) -> Result<(u64, u64, u64), StoreError> {
        self.conn
            .query_row(
                "SELECT COALESCE(SUM(status = 'ok'), 0), COALESCE(SUM(status = 'skipped'), 0),
                 COALESCE(SUM(status IN ('failed', 'partial')), 0) FROM runs WHERE experiment_id = ?1",
                params![id],
                |r| Ok((u(r.get(0)?), u(r.get(1)?), u(r.get(2)?))),
            )
            .map_err(self.err())
    }

    /// The runs of an experiment, in the order they were written.
    pub fn runs(&self, id: i64) -> Result<Vec<RunRecord>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT id, experiment_id, cell, params_json, step, kind, phase, repetition,
                 status, error, started_unix_ns, duration_ns, metric, value, payload_bytes,
                 wire_bytes, metrics_json, spec_json, conditions_json, lab_json,
                 findings_json, capture_path FROM runs
                 WHERE experiment_id = ?1 ORDER BY id",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, String>(8)?,
                    r.get::<_, Option<String>>(9)?,
                    r.get::<_, i64>(10)?,
                    r.get::<_, i64>(11)?,
                    r.get::<_, Option<Metric>>(12)?,
                    r.get::<_, Option<f64>>(13)?,
                    (
                        r.get::<_, Option<i64>>(14)?,
                        r.get::<_, Option<i64>>(15)?,
                        r.get::<_, String>(16)?,
                        r.get::<_, String>(17)?,
                        r.get::<_, Option<String>>(18)?,
                        r.get::<_, Option<String>>(19)?,
                        r.get::<_, Option<String>>(20)?,
                        r.get::<_, Option<String>>(21)?,
                    ),
                ))
            })
            .map_err(self.err())?;
        let mut typed = self.params_of(id)?;
        let mut v = Vec::new();
        for row in rows {
            let (
                id,
                exp,
                cell,
                pj,
                step,
                kind,
                phase,
                rep,
                status,
                error,
                st,
                dur,
                metric,
                value,
                rest,
            ) = row.map_err(self.err())?;
            let (payload, wire, mj, sj, cj, lj, fj, capture_path) = rest;
            let bad = |what: &str, e: serde_json::Error| {
                StoreError::Corrupt(format!("{what} of run {id}: {e}"))
            };
            v.push(RunRecord {
                id,
                experiment_id: exp,
                cell,
                params: match typed.remove(&id) {
                    Some(p) => p,
                    None => serde_json::from_str::<BTreeMap<String, String>>(&pj)
                        .map_err(|e| bad("params", e))?
                        .into_iter()
                        .map(|(k, v)| (k, ParamValue::inferred(&v, None)))
                        .collect(),
                },
                step,
                kind: kind
                    .parse()
                    .map_err(|e| StoreError::Corrupt(format!("{e} in run {id}")))?,
                phase: phase
                    .parse()
                    .map_err(|e| StoreError::Corrupt(format!("{e} in run {id}")))?,
                repetition: rep.max(0) as u32,
                status: status.parse().map_err(StoreError::Corrupt)?,
                error,
                started_unix_ns: u(st),
                duration_ns: u(dur),
                metric,
                value,
                payload_bytes: payload.map(u),
                wire_bytes: wire.map(u),
                metrics: serde_json::from_str(&mj).map_err(|e| bad("metrics", e))?,
                spec: serde_json::from_str(&sj).map_err(|e| bad("spec", e))?,
                conditions: cj
                    .map(|c| serde_json::from_str(&c).map_err(|e| bad("conditions", e)))
                    .transpose()?,
                lab: lj
                    .map(|c| serde_json::from_str(&c).map_err(|e| bad("lab", e)))
                    .transpose()?,
                findings: fj
                    .map(|c| serde_json::from_str(&c).map_err(|e| bad("findings", e)))
                    .transpose()?
                    .unwrap_or_default(),
                capture_path,
            });
        }
        Ok(v)
    }

    /// The typed parameters of every run of an experiment, per run id.
    fn params_of(&self, experiment: i64) -> Result<BTreeMap<i64, Params>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT p.run_id, p.name, p.value, p.template, p.kind, p.number
                 FROM run_params p JOIN runs r ON r.id = p.run_id WHERE r.experiment_id = ?1",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![experiment], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<f64>>(5)?,
                ))
            })
            .map_err(self.err())?;
        let mut out: BTreeMap<i64, Params> = BTreeMap::new();
        for row in rows {
            let (run, name, value, template, kind, number) = row.map_err(self.err())?;
            let kind = kind
                .parse()
                .map_err(|e| StoreError::Corrupt(format!("parameter {name} of run {run}: {e}")))?;
            out.entry(run).or_default().insert(
                name,
                ParamValue {
                    value,
                    template,
                    kind,
                    number,
                },
            );
        }
        Ok(out)
    }

    /// The per-host parts of one run (empty for a run on one host), in the order written.
    pub fn hosts(&self, run_id: i64) -> Result<Vec<HostPart>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT host, role, error, metric, value, payload_bytes, started_unix_ns,
                 clock_offset_ns, clock_error_ns, metrics_json, report_json, series_json
                 FROM run_hosts WHERE run_id = ?1 ORDER BY rowid",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok((
                    HostPart {
                        host: r.get(0)?,
                        role: r.get::<_, String>(1)?.parse().map_err(
                            |e: crate::UnknownHostRole| {
                                rusqlite::Error::FromSqlConversionFailure(
                                    1,
                                    rusqlite::types::Type::Text,
                                    e.into(),
                                )
                            },
                        )?,
                        error: r.get(2)?,
                        metric: r.get(3)?,
                        value: r.get(4)?,
                        payload_bytes: r.get::<_, Option<i64>>(5)?.map(u),
                        started_unix_ns: u(r.get(6)?),
                        clock_offset_ns: r.get(7)?,
                        clock_error_ns: u(r.get(8)?),
                        metrics: BTreeMap::new(),
                        report_json: r.get(10)?,
                        series: Vec::new(),
                    },
                    r.get::<_, String>(9)?,
                    r.get::<_, Option<String>>(11)?,
                ))
            })
            .map_err(self.err())?;
        let mut v = Vec::new();
        for row in rows {
            let (mut h, mj, sj) = row.map_err(self.err())?;
            h.metrics = serde_json::from_str(&mj).map_err(|e| {
                StoreError::Corrupt(format!("metrics of host {} of run {run_id}: {e}", h.host))
            })?;
            if let Some(sj) = sj {
                h.series = serde_json::from_str(&sj).map_err(|e| {
                    StoreError::Corrupt(format!("series of host {} of run {run_id}: {e}", h.host))
                })?;
            }
            v.push(h);
        }
        Ok(v)
    }

    /// The time series of one run.
    pub fn series(&self, run_id: i64) -> Result<Vec<SeriesPoint>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT start_s, length_s, value FROM intervals WHERE run_id = ?1 ORDER BY start_s",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok(SeriesPoint {
                    start_s: r.get(0)?,
                    length_s: r.get(1)?,
                    value: r.get(2)?,
                })
            })
            .map_err(self.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.err())
    }

    /// The CPU rows of one run.
    pub fn cpu(&self, run_id: i64) -> Result<Vec<CpuRow>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT run_id, start_s, length_s, core, busy_pct, user_pct, sys_pct, softirq_pct
                 FROM cpu WHERE run_id = ?1 ORDER BY start_s, core",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok(CpuRow {
                    run_id: r.get(0)?,
                    start_s: r.get(1)?,
                    length_s: r.get(2)?,
                    core: r.get::<_, i64>(3)?.max(0) as u32,
                    busy_pct: r.get(4)?,
                    user_pct: r.get(5)?,
                    sys_pct: r.get(6)?,
                    softirq_pct: r.get(7)?,
                })
            })
            .map_err(self.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.err())
    }

    /// The NIC deltas of one run.
    pub fn nic(&self, run_id: i64) -> Result<Vec<NicDelta>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT site, iface, rx_bytes, tx_bytes, rx_packets, tx_packets, rx_dropped,
                 tx_dropped FROM nic WHERE run_id = ?1",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok(NicDelta {
                    site: r.get(0)?,
                    counters: nsperf_core::nic::NicCounters {
                        name: r.get(1)?,
                        rx_bytes: u(r.get(2)?),
                        tx_bytes: u(r.get(3)?),
                        rx_packets: u(r.get(4)?),
                        tx_packets: u(r.get(5)?),
                        rx_dropped: u(r.get(6)?),
                        tx_dropped: u(r.get(7)?),
                        ..Default::default()
                    },
                })
            })
            .map_err(self.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.err())
    }

    /// The stored report of the engine and of the capture analysis of one run.
    pub fn raw_json(&self, run_id: i64) -> Result<(Option<String>, Option<String>), StoreError> {
        self.conn
            .query_row(
                "SELECT report_json, trace_json FROM runs WHERE id = ?1",
                params![run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(self.err())
    }
}
