//! What `nsperf replay CAPTURE` reports (the `spec` and `summary` of its `--json` document,
//! docs/schema.md): per client connection the workload extracted and the model's
//! predictions over an RTT axis.

use serde::Serialize;

use super::model::{self, Conditions, Prediction};
use super::{FileUse, OpUse, Workload};
use crate::model::TraceSummary;
use crate::proto::requests::RequestStream;

/// What is not built yet, said in every report.
pub const NOT_BUILT: &str = "the replay of SMB captures in a plan's replay step is not \
     built yet: the durations over the RTT axis are the model's predictions (--lab replays \
     the workload through a lab at each asked RTT, NFSv4 with --server ganesha, SMB2 against \
     smbd with --server samba, --check at the capture's own RTT \
     first; --against replays an NFS or SMB2 workload against a server over the path as it \
     is; a plan's replay step through the plan's lab, NFSv4 against a ganesha service)";

/// What was asked.
#[derive(Debug, Clone, Serialize)]
pub struct ReplaySpec {
    /// The capture read.
    pub capture: String,
    /// The RTT axis of the predictions, ms.
    pub rtt_axis_ms: Vec<f64>,
    /// The link's rate asked, bit/s (null: each transfer as long as captured).
    pub rate_bps: Option<f64>,
    /// The TCP window asked, bytes (null: each connection's captured windows).
    pub window_bytes: Option<u64>,
    /// The client connections asked (`--conn`), by id; empty: every one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<u32>,
}

/// What the capture lacks of its storage connections' exchanges. A call without its reply, or
/// a reply without its call, is not in the workload: the replay and the model see the matched
/// requests only, and a capture that missed packets (a loaded capturing host, a snapshot
/// length, a capture started or stopped mid-exchange) describes less than the client did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CaptureGaps {
    /// Calls the capture holds no reply to.
    pub unanswered_calls: u64,
    /// Replies the capture holds no call of.
    pub replies_without_call: u64,
    /// Bytes of the storage connections' streams the capture lacks (TCP sequence holes).
    pub missing_bytes: u64,
}

impl CaptureGaps {
    /// The gaps of every connection that carried a storage protocol in `trace`.
    pub fn of(trace: &TraceSummary) -> CaptureGaps {
        trace
            .connections
            .iter()
            .filter_map(|c| c.protocol.as_ref())
            .fold(CaptureGaps::default(), |g, p| CaptureGaps {
                unanswered_calls: g.unanswered_calls + p.unanswered_calls,
                replies_without_call: g.replies_without_call + p.unmatched_replies,
                missing_bytes: g.missing_bytes + p.missing_bytes,
            })
    }

    /// True when the capture lacks any of it.
    pub fn any(&self) -> bool {
        *self != CaptureGaps::default()
    }
}

/// What was found and predicted.
#[derive(Debug, Clone, Serialize)]
pub struct ReplaySummary {
    /// Storage requests matched to their replies in the capture.
    pub requests: u64,
    /// What the capture lacks (requests without both ends are not replayed).
    pub capture_gaps: CaptureGaps,
    /// The clients, one per connection.
    pub clients: Vec<ClientReport>,
    /// The replay against a server (`--against`), beside the capture; absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<super::against::AgainstReport>,
    /// The replay through a lab at each asked RTT (`--lab`, `--check`); absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lab: Option<super::against::LabReport>,
    /// What is not built yet.
    pub not_built: &'static str,
}

/// One client connection: its workload and its predictions.
#[derive(Debug, Clone, Serialize)]
pub struct ClientReport {
    /// The connection's id (as `nsperf trace` numbers them).
    pub connection: u32,
    /// The client's address and port.
    pub client: String,
    /// The server's.
    pub server: String,
    /// Requests matched to their replies.
    pub requests: u64,
    /// Per operation.
    pub ops: Vec<OpUse>,
    /// Bytes read (READ data).
    pub read_bytes: u64,
    /// Bytes written (WRITE data).
    pub written_bytes: u64,
    /// Most requests outstanding at once.
    pub in_flight_max: u32,
    /// Requests outstanding at each call (itself included), mean.
    pub in_flight_mean: f64,
    /// Requests that waited for a reply with nothing else outstanding.
    pub dependent: u64,
    /// Their share of the requests.
    pub dependent_fraction: f64,
    /// Mean think time of the dependent requests (reply to call, the client's round trip
    /// from the capture point taken out), ms.
    pub think_mean_ms: f64,
    /// First call to last reply as the client saw it, s.
    pub captured_duration_s: f64,
    /// The path's RTT at the capture (`rtt_client_ms + rtt_server_ms`), ms.
    pub captured_rtt_ms: f64,
    /// Round trip from the capture point to the client and back, ms.
    pub rtt_client_ms: f64,
    /// Round trip from the capture point to the server and back, ms.
    pub rtt_server_ms: f64,
    /// Largest receive window the client advertised, bytes (null: window scale unknown).
    pub window_client_bytes: Option<u64>,
    /// Largest receive window the server advertised, bytes.
    pub window_server_bytes: Option<u64>,
    /// Files touched.
    pub file_count: u64,
    /// The files, largest extent first (at most 100).
    pub files: Vec<FileUse>,
    /// The model at the capture's own RTT, transfers and windows, s.
    pub model_at_capture_s: f64,
    /// Its error against the captured duration, %.
    pub model_error_pct: f64,
    /// The model over the RTT axis.
    pub predictions: Vec<Prediction>,
    /// The first RTT of the axis where the round trips are the largest part, ms.
    pub latency_bound_from_ms: Option<f64>,
}

/// The report of a capture's request stream: the workloads and the model over the spec's
/// RTT axis with its rate and window (None: as captured), and what the capture lacks.
pub fn summary(spec: &ReplaySpec, stream: &RequestStream, gaps: CaptureGaps) -> ReplaySummary {
    let clients = super::workloads(&stream.requests, &stream.connections)
        .iter()
        .map(|w| client(w, &spec.rtt_axis_ms, spec.rate_bps, spec.window_bytes))
        .collect();
    ReplaySummary {
        requests: stream.requests.len() as u64,
        capture_gaps: gaps,
        clients,
        against: None,
        lab: None,
        not_built: NOT_BUILT,
    }
}

fn client(
    w: &Workload,
    rtts_ms: &[f64],
    rate_bps: Option<f64>,
    window: Option<u64>,
) -> ClientReport {
    let ms = |ns: i64| ns as f64 / 1e6;
    let n = w.steps.len() as u64;
    let (read, written) = w.data_bytes();
    let captured = w.captured_ns();
    let at_capture = model::predict(&w.steps, &Conditions::captured(w));
    let predictions = model::table(w, rtts_ms, rate_bps, window);
    let sides = [&w.conn.a, &w.conn.b];
    let windows = [w.conn.window_a_bytes, w.conn.window_b_bytes];
    ClientReport {
        connection: w.conn.id,
        client: sides[w.client].clone(),
        server: sides[1 - w.client].clone(),
        requests: n,
        ops: w.ops.clone(),
        read_bytes: read,
        written_bytes: written,
        in_flight_max: w.in_flight_max(),
        in_flight_mean: w.in_flight_mean(),
        dependent: w.dependent(),
        dependent_fraction: w.dependent() as f64 / n.max(1) as f64,
        think_mean_ms: w.think_mean_ns() / 1e6,
        captured_duration_s: captured as f64 / 1e9,
        captured_rtt_ms: ms(w.captured_rtt_ns()),
        rtt_client_ms: ms(w.rtt_client_ns),
        rtt_server_ms: ms(w.rtt_server_ns),
        window_client_bytes: windows[w.client],
        window_server_bytes: windows[1 - w.client],
        file_count: w.file_count,
        files: w.files.clone(),
        model_at_capture_s: at_capture as f64 / 1e9,
        model_error_pct: if captured > 0 {
            (at_capture - captured) as f64 * 100.0 / captured as f64
        } else {
            0.0
        },
        latency_bound_from_ms: model::latency_bound_from(&predictions),
        predictions,
    }
}
