//! What `nsperf replay CAPTURE --against URL` reports: the replayed duration, throughput and
//! per-operation latency beside the captured ones and beside the model at the path's
//! measured round trip (the `against` object of the `--json` summary, docs/schema.md).

use std::collections::BTreeMap;

use nsperf_core::stats::LatencyHistogram;
use nsperf_nfs::replay::{ConnResult, OpResult, Replayed};
use serde::{Deserialize, Serialize};

use super::Workload;
use super::model;
use crate::proto::requests::{Op, Protocol};

/// The replay against a server, beside the capture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgainstReport {
    /// The server replayed against.
    pub url: String,
    /// The replay's directory under the URL's (removed afterwards unless kept).
    pub directory: String,
    /// The path's round trip: the mean of the NULL calls (NFS) or ECHOs (SMB2) at set-up, ms.
    pub path_rtt_ms: f64,
    /// First call to last reply of all connections, captured, s.
    pub captured_duration_s: f64,
    /// The same, replayed, s.
    pub replayed_duration_s: f64,
    /// (replayed − captured) / captured, %.
    pub duration_error_pct: f64,
    /// Data read and written per second of the capture, bit/s.
    pub captured_throughput_bps: f64,
    /// The same, replayed.
    pub replayed_throughput_bps: f64,
    /// Data read in the replay, bytes.
    pub read_bytes: u64,
    /// Data written in the replay, bytes.
    pub written_bytes: u64,
    /// Per operation, all connections.
    pub ops: Vec<OpAgainst>,
    /// Per client connection, in the order of the summary's clients.
    pub clients: Vec<ClientAgainst>,
}

/// One client connection replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientAgainst {
    /// The captured connection's id.
    pub connection: u32,
    /// Its first call, s after the capture's first (the replay starts it as late).
    pub start_s: f64,
    /// First call to last reply as the client saw it, captured, s.
    pub captured_duration_s: f64,
    /// First call sent to last reply received, replayed, s.
    pub replayed_duration_s: f64,
    /// (replayed − captured) / captured, %.
    pub duration_error_pct: f64,
    /// The model at the path's measured round trip (transfers and windows as captured), s.
    pub model_at_path_rtt_s: f64,
    /// Data per second, captured, bit/s.
    pub captured_throughput_bps: f64,
    /// Data per second, replayed, bit/s.
    pub replayed_throughput_bps: f64,
    /// Most requests outstanding, captured.
    pub captured_in_flight_max: u32,
    /// Most requests outstanding, replayed.
    pub replayed_in_flight_max: u32,
    /// NFSv4.1: the slots the server granted the replay's session, when fewer than the
    /// requests captured in flight (they bound the replayed requests in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_slots: Option<u32>,
    /// Data read in the replay, bytes.
    pub read_bytes: u64,
    /// Data written in the replay, bytes.
    pub written_bytes: u64,
    /// Per operation.
    pub ops: Vec<OpAgainst>,
}

/// One operation, captured and replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpAgainst {
    /// `nfs3:NAME`, `nfs4:NAME` or `smb2:NAME`, the captured operation.
    pub op: String,
    /// Replayed by a stand-in at least once (the replay does not make it): a GETATTR in NFS,
    /// an ECHO in SMB2.
    pub replayed_as_getattr: bool,
    /// Requests captured.
    pub captured_requests: u64,
    /// Of them with an error status.
    pub captured_errors: u64,
    /// Mean service time captured (docs/replay.md), ms.
    pub captured_service_mean_ms: f64,
    /// Captured latency: call's first byte to reply's last at the capture point plus the
    /// capture point's round trip to the client, mean, ms.
    pub captured_latency_mean_ms: f64,
    /// Its 99th percentile, ms.
    pub captured_latency_p99_ms: f64,
    /// Requests replayed.
    pub replayed_requests: u64,
    /// Of them answered with an error.
    pub replayed_errors: u64,
    /// The replay's errors by status name.
    pub replayed_error_statuses: BTreeMap<String, u64>,
    /// Replayed latency (call handed to the socket to the reply's last byte), mean, ms.
    pub replayed_latency_mean_ms: f64,
    /// Median, ms.
    pub replayed_latency_p50_ms: f64,
    /// 99th percentile, ms.
    pub replayed_latency_p99_ms: f64,
    /// Largest, ms.
    pub replayed_latency_max_ms: f64,
}

fn pct(got: f64, want: f64) -> f64 {
    if want > 0.0 {
        (got - want) * 100.0 / want
    } else {
        0.0
    }
}

fn bps(bytes: u64, s: f64) -> f64 {
    if s > 0.0 { bytes as f64 * 8.0 / s } else { 0.0 }
}

/// The captured latencies of `w`'s steps per operation (NFSv3 procedure or NFSv4 operation).
fn captured_latency(ws: &[&Workload]) -> BTreeMap<u16, LatencyHistogram> {
    let mut h: BTreeMap<u16, LatencyHistogram> = BTreeMap::new();
    for w in ws {
        for s in &w.steps {
            let ns = s.reply_ns - s.call_ns + w.rtt_client_ns;
            h.entry(s.op.code).or_default().record_ns(ns.max(0) as u64);
        }
    }
    h
}

/// Captured and replayed side by side, per operation.
fn ops(ws: &[&Workload], replayed: &[OpResult]) -> Vec<OpAgainst> {
    let lat = captured_latency(ws);
    let ms = |ns: f64| ns / 1e6;
    let protocol = ws
        .iter()
        .flat_map(|w| w.steps.first())
        .next()
        .map_or(Protocol::Nfs3, |s| s.op.protocol);
    lat.iter()
        .map(|(&code, h)| {
            let op = Op { protocol, code };
            let uses: Vec<_> = ws
                .iter()
                .flat_map(|w| w.ops.iter())
                .filter(|o| o.op == op.qualified())
                .collect();
            let n: u64 = uses.iter().map(|o| o.requests).sum();
            let service = uses
                .iter()
                .map(|o| o.service_mean_ms * o.requests as f64)
                .sum::<f64>()
                / n.max(1) as f64;
            let r = replayed.iter().find(|r| r.proc_ == u32::from(code));
            let c = h.summary();
            OpAgainst {
                op: op.qualified(),
                replayed_as_getattr: r.is_some_and(|r| r.replayed_as_getattr),
                captured_requests: n,
                captured_errors: uses.iter().map(|o| o.errors).sum(),
                captured_service_mean_ms: service,
                captured_latency_mean_ms: ms(c.mean_ns),
                captured_latency_p99_ms: ms(c.p99_ns as f64),
                replayed_requests: r.map_or(0, |r| r.requests),
                replayed_errors: r.map_or(0, |r| r.errors),
                replayed_error_statuses: r.map(|r| r.error_statuses.clone()).unwrap_or_default(),
                replayed_latency_mean_ms: r.map_or(0.0, |r| ms(r.latency.mean_ns)),
                replayed_latency_p50_ms: r.map_or(0.0, |r| ms(r.latency.p50_ns as f64)),
                replayed_latency_p99_ms: r.map_or(0.0, |r| ms(r.latency.p99_ns as f64)),
                replayed_latency_max_ms: r.map_or(0.0, |r| ms(r.latency.max_ns as f64)),
            }
        })
        .collect()
}

fn client(w: &Workload, r: &ConnResult, t0: i64, path_rtt_ms: f64) -> ClientAgainst {
    let captured = w.captured_ns() as f64 / 1e9;
    let replayed = r.duration_ns as f64 / 1e9;
    let (read, written) = w.data_bytes();
    let model = model::table(w, &[path_rtt_ms], None, None);
    ClientAgainst {
        connection: w.conn.id,
        start_s: (w.start_ns - t0) as f64 / 1e9,
        captured_duration_s: captured,
        replayed_duration_s: replayed,
        duration_error_pct: pct(replayed, captured),
        model_at_path_rtt_s: model.first().map_or(0.0, |p| p.duration_s),
        captured_throughput_bps: bps(read + written, captured),
        replayed_throughput_bps: r.throughput_bps(),
        captured_in_flight_max: w.in_flight_max(),
        replayed_in_flight_max: r.in_flight_max,
        session_slots: r.session_slots.filter(|&s| s < w.in_flight_max()),
        read_bytes: r.read_bytes,
        written_bytes: r.written_bytes,
        ops: ops(&[w], &r.ops),
    }
}

/// The report of `replayed` (the script of `workloads`, in their order) against `url`.
pub fn against(url: &str, workloads: &[Workload], replayed: &Replayed) -> AgainstReport {
    let t0 = workloads.iter().map(|w| w.start_ns).min().unwrap_or(0);
    let end = workloads
        .iter()
        .map(|w| w.start_ns - t0 + w.captured_ns())
        .max()
        .unwrap_or(0);
    let captured = end as f64 / 1e9;
    let got = replayed.duration_ns as f64 / 1e9;
    let path_rtt_ms = replayed.null_rtt_ns as f64 / 1e6;
    let (read, written) = workloads.iter().fold((0, 0), |(r, w), x| {
        let (a, b) = x.data_bytes();
        (r + a, w + b)
    });
    let all: Vec<&Workload> = workloads.iter().collect();
    AgainstReport {
        url: url.to_string(),
        directory: replayed.directory.clone(),
        path_rtt_ms,
        captured_duration_s: captured,
        replayed_duration_s: got,
        duration_error_pct: pct(got, captured),
        captured_throughput_bps: bps(read + written, captured),
        replayed_throughput_bps: replayed.throughput_bps(),
        read_bytes: replayed.read_bytes,
        written_bytes: replayed.written_bytes,
        ops: ops(&all, &replayed.ops),
        clients: workloads
            .iter()
            .zip(&replayed.conns)
            .map(|(w, r)| client(w, r, t0, path_rtt_ms))
            .collect(),
    }
}

/// The workload replayed through a lab `nsperf replay --lab` built: at the capture's own
/// conditions first with `--check`, then at each asked RTT.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabReport {
    /// The lab's name (removed afterwards).
    pub lab: String,
    /// The server in site b: `embedded` (nsperf's NFSv3 server) or `ganesha` (nfs-ganesha).
    #[serde(default)]
    pub server: String,
    /// `--check`: the replay at the capture's own RTT and rate, its error against the
    /// captured duration (`replay_vs_captured_pct`) the replay's own; absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<LabRun>,
    /// One replay per asked RTT, in the order asked.
    pub runs: Vec<LabRun>,
}

/// One replay through the lab, beside the capture and the model at the lab's conditions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabRun {
    /// The lab's round trip, ms.
    pub rtt_ms: f64,
    /// The lab's rate each way, bit/s; null: not limited (the model: transfers as captured).
    pub rate_bps: Option<f64>,
    /// The lab's loss as given (`1%`); null: none.
    pub loss: Option<String>,
    /// The TCP window of the replay's connections (their socket buffers), bytes, which the
    /// model is given too; null: the kernel's autotuning (the model: the captured windows).
    pub window_bytes: Option<u64>,
    /// First call to last reply of all connections, captured, s.
    pub captured_duration_s: f64,
    /// The same, replayed through the lab, s.
    pub replayed_duration_s: f64,
    /// The model at the lab's RTT and rate: the latest of each connection's captured start
    /// plus its predicted duration, s.
    pub model_duration_s: f64,
    /// (replayed − model) / model, %.
    pub replay_vs_model_pct: f64,
    /// (replayed − captured) / captured, %.
    pub replay_vs_captured_pct: f64,
    /// Per connection: captured, replayed and predicted.
    pub clients: Vec<LabClient>,
    /// The replay in full, per connection and operation, beside the capture.
    pub replay: AgainstReport,
}

/// One connection of a [`LabRun`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabClient {
    /// The captured connection's id.
    pub connection: u32,
    /// Its first call, s after the capture's first.
    pub start_s: f64,
    /// Captured duration, s.
    pub captured_duration_s: f64,
    /// Replayed through the lab, s.
    pub replayed_duration_s: f64,
    /// The model at the lab's RTT and rate, s.
    pub model_s: f64,
}

/// The link a replay ran through: what the model is given beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct LabLink {
    /// Round trip, ms.
    pub rtt_ms: f64,
    /// Rate each way, bit/s; None: not limited.
    pub rate_bps: Option<f64>,
    /// Loss as given (`1%`).
    pub loss: Option<String>,
    /// The replay connections' TCP window, bytes; None: autotuned.
    pub window_bytes: Option<u64>,
}

/// The run of `replayed` (the script of `workloads`) through a lab's `link`.
pub fn lab_run(url: &str, workloads: &[Workload], replayed: &Replayed, link: LabLink) -> LabRun {
    let LabLink {
        rtt_ms,
        rate_bps,
        loss,
        window_bytes,
    } = link;
    let replay = against(url, workloads, replayed);
    let t0 = workloads.iter().map(|w| w.start_ns).min().unwrap_or(0);
    let clients: Vec<LabClient> = workloads
        .iter()
        .zip(&replay.clients)
        .map(|(w, c)| LabClient {
            connection: c.connection,
            start_s: (w.start_ns - t0) as f64 / 1e9,
            captured_duration_s: c.captured_duration_s,
            replayed_duration_s: c.replayed_duration_s,
            model_s: model::table(w, &[rtt_ms], rate_bps, window_bytes)
                .first()
                .map_or(0.0, |p| p.duration_s),
        })
        .collect();
    let model_s = clients
        .iter()
        .map(|c| c.start_s + c.model_s)
        .fold(0.0, f64::max);
    LabRun {
        rtt_ms,
        rate_bps,
        loss,
        window_bytes,
        captured_duration_s: replay.captured_duration_s,
        replayed_duration_s: replay.replayed_duration_s,
        model_duration_s: model_s,
        replay_vs_model_pct: pct(replay.replayed_duration_s, model_s),
        replay_vs_captured_pct: pct(replay.replayed_duration_s, replay.captured_duration_s),
        clients,
        replay,
    }
}
