//! What a step measured, from the engines' typed reports: the headline figure, the summary
//! flattened, the aggregate time series, payload bytes; and the NIC counters of the lab's
//! sites and the analysis of a capture, read in this process through the libraries.

use std::collections::BTreeMap;
use std::path::Path;

use nsperf_core::nic::{NicCounters, parse_proc_net_dev};
use nsperf_io::bonnie::BonnieReport;
use nsperf_io::{Headline, IoReport};
use nsperf_net::{Mode, NetReport};
use nsperf_results::{Measurement, Metric, NicDelta, SeriesPoint};
use serde::Serialize;

use super::Lab;
use crate::error::ExecError;

/// Flattens the numbers of a serialized value: `{"a": {"b": 1}}` gives `a.b = 1`.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<Metric, f64>) {
    match v {
        serde_json::Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.insert(Metric::new(prefix), x);
            }
        }
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        _ => {}
    }
}

/// Every number of a summary, by its field path.
fn summary_metrics(summary: &impl Serialize) -> BTreeMap<Metric, f64> {
    let mut out = BTreeMap::new();
    if let Ok(v) = serde_json::to_value(summary) {
        flatten("", &v, &mut out);
    }
    out
}

/// Sums `(start_s, length_s, value)` points that share a start: the aggregate series.
fn series(points: impl Iterator<Item = (f64, f64, f64)>) -> Vec<SeriesPoint> {
    let mut by_start: BTreeMap<u64, SeriesPoint> = BTreeMap::new();
    for (s, l, v) in points {
        let p = by_start.entry((s * 1e6) as u64).or_insert(SeriesPoint {
            start_s: s,
            length_s: l,
            value: 0.0,
        });
        p.value += v;
    }
    by_start.into_values().collect()
}

/// A network step's measurement: throughput (stream, sweep) or transactions per second
/// (request/response).
pub(super) fn from_net(r: &NetReport) -> Measurement {
    let s = &r.summary;
    let (metric, value) = match (r.spec.params.mode, s.transactions_per_s) {
        (Mode::Rr { .. }, Some(t)) => (Metric::TRANSACTIONS_PER_S, t),
        _ => (Metric::THROUGHPUT_BPS, s.throughput_bps),
    };
    // The aggregate entries (no stream); a run that reports per stream only is summed.
    let aggregate = r.intervals.iter().any(|i| i.stream.is_none());
    let points = r
        .intervals
        .iter()
        .filter(|i| !aggregate || i.stream.is_none())
        .map(|i| (i.start_s, i.length_s, i.throughput_bps));
    Measurement {
        metric,
        value,
        metrics: summary_metrics(s),
        series: series(points),
        payload_bytes: Some(s.received_bytes),
        duration_ns: r.duration_ns,
        started_unix_ns: Some(r.measured_unix_ns.unwrap_or(r.started_unix_ns)),
        report_json: serde_json::to_string(r).ok(),
        ..Default::default()
    }
}

/// The store's name of an io run's headline.
pub(crate) fn headline_metric(h: Headline) -> Metric {
    match h {
        Headline::Throughput => Metric::THROUGHPUT_BYTES_PER_S,
        Headline::Files => Metric::FILES_PER_S,
        Headline::Seeks => Metric::SEEKS_PER_S,
    }
}

/// An io step's measurement: the measured pass's headline in its workload's unit (bytes,
/// files or seeks per second: [`Headline`]).
pub(super) fn from_io(r: &IoReport) -> Measurement {
    let s = &r.summary;
    let h = Headline::of(r.spec.workload);
    let aggregate = r.intervals.iter().any(|i| i.job.is_none());
    let points = r
        .intervals
        .iter()
        .filter(|i| !aggregate || i.job.is_none())
        .map(|i| (i.start_s, i.length_s, h.interval_value(i)));
    Measurement {
        metric: headline_metric(h),
        value: h.value(s),
        metrics: summary_metrics(s),
        series: series(points),
        payload_bytes: Some(s.bytes),
        duration_ns: r.duration_ns,
        started_unix_ns: Some(r.measured_unix_ns.unwrap_or(r.started_unix_ns)),
        report_json: serde_json::to_string(r).ok(),
        ..Default::default()
    }
}

/// The headline metric of a bonnie step: the block output test's throughput (a replicated
/// device's cost shows first in its writes); every figure of every test is in `metrics`
/// ([`nsperf_results::stats::bonnie`]).
pub(crate) const BONNIE_HEADLINE: Metric = Metric::THROUGHPUT_BYTES_PER_S;

/// A bonnie step's measurement: each test's figures as `TEST.FIELD` metrics (its throughput,
/// operations per second, p99 latency and %CP; the metadata test's files per second per
/// phase), block output's throughput the headline.
pub(super) fn from_bonnie(r: &BonnieReport) -> Measurement {
    use nsperf_results::stats::bonnie::metric_key;
    let mut metrics = BTreeMap::new();
    let mut value = 0.0;
    for row in &r.summary.rows {
        let key = |field: &Metric| metric_key(&row.test, field.as_str());
        if row.throughput_bytes_per_s > 0.0 {
            metrics.insert(
                key(&Metric::THROUGHPUT_BYTES_PER_S),
                row.throughput_bytes_per_s,
            );
        }
        if row.test == "block output" {
            value = row.throughput_bytes_per_s;
        }
        metrics.insert(key(&Metric::OPS_PER_S), row.ops_per_s);
        metrics.insert(key(&Metric::CPU_PROCESS_PCT), row.cpu_process_pct);
        metrics.insert(key(&Metric::LAT_P99_NS), row.lat_p99_ns as f64);
        metrics.insert(key(&Metric::ELAPSED_S), row.elapsed_s);
        for p in &row.phases {
            let field = format!("{}.{}", p.name, Metric::FILES_PER_S);
            metrics.insert(metric_key(&row.test, &field), p.ops_per_s);
        }
    }
    Measurement {
        metric: BONNIE_HEADLINE,
        value,
        metrics,
        duration_ns: r.duration_ns,
        started_unix_ns: Some(r.started_unix_ns),
        report_json: serde_json::to_string(r).ok(),
        ..Default::default()
    }
}

/// An external command's measurement: payload bytes per second when the payload is known,
/// else the elapsed time.
pub(super) fn from_exec(elapsed_s: f64, payload: Option<u64>) -> Measurement {
    let mut m = Measurement::default();
    m.metrics.insert(Metric::ELAPSED_S, elapsed_s);
    m.payload_bytes = payload;
    match payload {
        Some(b) if elapsed_s > 0.0 => {
            m.metric = Metric::THROUGHPUT_BYTES_PER_S;
            m.value = b as f64 / elapsed_s;
            m.metrics.insert(Metric::PAYLOAD_BYTES, b as f64);
        }
        _ => {
            m.metric = Metric::ELAPSED_S;
            m.value = elapsed_s;
        }
    }
    m
}

/// A replay step's measurement: the replayed duration (first call to last reply of every
/// connection) the headline, beside it the captured duration, the model's at the cell's link,
/// the replay's error against both, the path's RTT, the data moved, and per captured
/// operation its requests, errors and latency (`op.NAME.latency_*_ms`).
pub(super) fn from_replay(r: &nsperf_trace::replay::against::LabRun) -> Measurement {
    let mut metrics = BTreeMap::new();
    let a = &r.replay;
    for (k, v) in [
        ("captured_duration_s", r.captured_duration_s),
        ("model_duration_s", r.model_duration_s),
        ("replay_vs_model_pct", r.replay_vs_model_pct),
        ("replay_vs_captured_pct", r.replay_vs_captured_pct),
        ("path_rtt_ms", a.path_rtt_ms),
        ("throughput_bps", a.replayed_throughput_bps),
        ("read_bytes", a.read_bytes as f64),
        ("written_bytes", a.written_bytes as f64),
        ("connections", r.clients.len() as f64),
    ] {
        metrics.insert(Metric::new(k), v);
    }
    for o in &a.ops {
        // `nfs3:READ`, `nfs4:READ`: one version per capture.
        let op = o.op.split_once(':').map_or(o.op.as_str(), |(_, name)| name);
        for (k, v) in [
            ("requests", o.replayed_requests as f64),
            ("errors", o.replayed_errors as f64),
            ("latency_mean_ms", o.replayed_latency_mean_ms),
            ("latency_p50_ms", o.replayed_latency_p50_ms),
            ("latency_p99_ms", o.replayed_latency_p99_ms),
            ("latency_max_ms", o.replayed_latency_max_ms),
            ("captured_latency_mean_ms", o.captured_latency_mean_ms),
        ] {
            metrics.insert(Metric::new(format!("op.{op}.{k}")), v);
        }
    }
    Measurement {
        metric: Metric::ELAPSED_S,
        value: r.replayed_duration_s,
        metrics,
        payload_bytes: Some(a.read_bytes + a.written_bytes),
        duration_ns: (r.replayed_duration_s * 1e9) as u64,
        report_json: serde_json::to_string(r).ok(),
        ..Default::default()
    }
}

/// What a replay step's capture lacks, stored with its run as `nsperf replay` reports it:
/// the three counts as metrics (`capture_unanswered_calls`, `capture_replies_without_call`,
/// `capture_missing_bytes`, zero included), and a `capture_gaps` warning when any is not zero
/// (the report shows it beside the run).
pub(super) fn attach_capture_gaps(
    m: &mut Measurement,
    g: nsperf_trace::replay::report::CaptureGaps,
) {
    for (k, v) in [
        ("capture_unanswered_calls", g.unanswered_calls),
        ("capture_replies_without_call", g.replies_without_call),
        ("capture_missing_bytes", g.missing_bytes),
    ] {
        m.metrics.insert(Metric::new(k), v as f64);
    }
    if g.any() {
        m.findings.push(
            nsperf_core::Finding::new(
                "capture_gaps",
                nsperf_core::report::Severity::Warning,
                format!(
                    "the capture lacks part of the exchanges: {} call(s) without their reply, {} reply(ies) without their call, {} of the streams missing; those requests are not in the workload, so the model and the replay describe less than the client did",
                    g.unanswered_calls,
                    g.replies_without_call,
                    nsperf_core::Bytes(g.missing_bytes)
                ),
            )
            .with("unanswered_calls", g.unanswered_calls as f64)
            .with("replies_without_call", g.replies_without_call as f64)
            .with("missing_bytes", g.missing_bytes as f64),
        );
    }
}

/// NIC counters of every site of the lab (each read inside its namespace), or of this host.
pub(super) fn read_nic(lab: Option<&Lab>) -> Vec<(String, Vec<NicCounters>)> {
    match lab {
        None => vec![("local".into(), nsperf_core::nic::read_nic_counters())],
        Some(l) => l
            .sites
            .iter()
            .map(|s| {
                let ns = nsperf_lab::lab::netns_name(&l.name, s);
                // /proc/thread-self: the namespace of the reading thread, not the process's.
                let text = nsperf_lab::netns::run_in(&ns, || {
                    Ok(std::fs::read_to_string("/proc/thread-self/net/dev").unwrap_or_default())
                })
                .unwrap_or_default();
                (s.clone(), parse_proc_net_dev(&text))
            })
            .collect(),
    }
}

/// Adds the NIC counters' growth since `before` (loopback excluded) and the wire bytes (the
/// largest transmit growth of any interface).
pub(super) fn attach_nic(
    m: &mut Measurement,
    before: &[(String, Vec<NicCounters>)],
    lab: Option<&Lab>,
) {
    let after = read_nic(lab);
    let mut wire = 0u64;
    for (site, now) in &after {
        let Some((_, prev)) = before.iter().find(|(s, _)| s == site) else {
            continue;
        };
        for c in now.iter().filter(|c| c.name != "lo") {
            if let Some(p) = prev.iter().find(|p| p.name == c.name) {
                let d = c.since(p);
                wire = wire.max(d.tx_bytes);
                m.nic.push(NicDelta {
                    site: site.clone(),
                    counters: d,
                });
            }
        }
    }
    if !m.nic.is_empty() {
        m.wire_bytes = Some(wire);
    }
}

/// The analysis of a capture file by the trace library, as the JSON document that
/// `nsperf trace --json` prints (findings included); with `link`, the emulator's summary of
/// a capture on the link beside it (`link_capture`).
pub(super) fn analyse_capture(
    file: &Path,
    link: Option<&nsperf_lab::capture::CaptureSummary>,
) -> Result<String, ExecError> {
    let cfg = nsperf_trace::TraceConfig {
        filter: nsperf_trace::Filter::default(),
        bin_ns: 1_000_000_000,
        series_connections: 3,
        idle_ns: nsperf_trace::DEFAULT_IDLE_NS,
    };
    let t0 = std::time::Instant::now();
    let (summary, intervals) = nsperf_trace::analyze_file(file, cfg)?;
    let spec = nsperf_trace::TraceSpec {
        file: file.display().to_string(),
        filter: None,
        bin_s: 1.0,
        top: 3,
        interface: None,
        idle_timeout_s: nsperf_trace::DEFAULT_IDLE_NS as f64 / 1e9,
    };
    let findings =
        nsperf_trace::findings::findings(&summary, spec.top).map_err(ExecError::CaptureFindings)?;
    let mut report = nsperf_core::Report::new(nsperf_core::report::Command::Trace, spec, summary);
    report.duration_ns = t0.elapsed().as_nanos() as u64;
    report.intervals = intervals;
    report.findings = findings;
    let bad = ExecError::CaptureJson;
    let mut doc = serde_json::to_value(&report).map_err(bad)?;
    if let Some(l) = link {
        doc["link_capture"] = serde_json::to_value(l).map_err(bad)?;
    }
    serde_json::to_string(&doc).map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25: a replay step's run carries what its capture lacks, a warning when any.
    #[test]
    fn a_replay_run_carries_its_captures_gaps() {
        use nsperf_trace::replay::report::CaptureGaps;
        let mut m = Measurement::default();
        attach_capture_gaps(&mut m, CaptureGaps::default());
        assert_eq!(m.metrics[&Metric::new("capture_unanswered_calls")], 0.0);
        assert_eq!(m.metrics[&Metric::new("capture_missing_bytes")], 0.0);
        assert!(m.findings.is_empty(), "{:?}", m.findings);
        let g = CaptureGaps {
            unanswered_calls: 1,
            replies_without_call: 2,
            missing_bytes: 2048,
        };
        attach_capture_gaps(&mut m, g);
        assert_eq!(m.metrics[&Metric::new("capture_unanswered_calls")], 1.0);
        assert_eq!(m.metrics[&Metric::new("capture_replies_without_call")], 2.0);
        assert_eq!(m.metrics[&Metric::new("capture_missing_bytes")], 2048.0);
        let [f] = &m.findings[..] else {
            panic!("{:?}", m.findings)
        };
        assert_eq!(f.id, "capture_gaps");
        assert_eq!(f.evidence["replies_without_call"], 2.0);
        assert!(
            f.message
                .contains("1 call(s) without their reply, 2 reply(ies) without their call, 2 KiB"),
            "{}",
            f.message
        );
    }

    #[test]
    fn aggregate_series_and_flattened_summary() {
        let pts = [(0.0, 1.0, 1.0), (0.0, 1.0, 2.0), (1.0, 1.0, 4.0)];
        let s = series(pts.into_iter());
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].value, 3.0);
        let mut out = BTreeMap::new();
        flatten(
            "",
            &serde_json::json!({"a": {"b": 7}, "c": 1.5, "d": "x"}),
            &mut out,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(out["a.b"], 7.0);
    }

    /// Issue 20 item 3: a metadata run stored "0.0 KiB/s"; its headline is files per second.
    #[test]
    fn io_headline_is_in_the_workloads_unit() {
        use nsperf_io::{IoInterval, IoSummary, RunConfig, Target, Workload};
        let report = |w: Workload| {
            let cfg = RunConfig::new(Target::Dir { path: "/x".into() }, w, 1 << 20, 4096);
            let mut r = IoReport::new(
                nsperf_core::report::Command::Io,
                cfg,
                IoSummary {
                    throughput_bytes_per_s: if w == Workload::Meta { 0.0 } else { 5e6 },
                    iops: 2500.0,
                    ..Default::default()
                },
            );
            r.intervals = vec![IoInterval {
                job: None,
                start_s: 0.0,
                length_s: 1.0,
                bytes: 0,
                ops: 2400,
                throughput_bytes_per_s: 0.0,
                iops: 2400.0,
            }];
            from_io(&r)
        };
        let m = report(Workload::Meta);
        assert_eq!((m.metric.as_str(), m.value), ("files_per_s", 2500.0));
        assert_eq!(m.series[0].value, 2400.0);
        let m = report(Workload::Seeks);
        assert_eq!((m.metric.as_str(), m.value), ("seeks_per_s", 2500.0));
        let m = report(Workload::SeqRead);
        assert_eq!(
            (m.metric.as_str(), m.value),
            ("throughput_bytes_per_s", 5e6)
        );
    }

    #[test]
    fn exec_headline_is_payload_rate_or_time() {
        let m = from_exec(2.0, Some(1000));
        assert_eq!(
            (m.metric.as_str(), m.value),
            ("throughput_bytes_per_s", 500.0)
        );
        let m = from_exec(2.0, None);
        assert_eq!((m.metric.as_str(), m.value), ("elapsed_s", 2.0));
    }
}
