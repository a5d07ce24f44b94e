//! What a replay measured: per connection and in all, the duration, the bytes moved and
//! per captured operation the requests, errors and latency.

use std::collections::BTreeMap;

use nsperf_core::stats::{LatencyHistogram, LatencySummary};
use serde::Serialize;

use super::OPS;
use crate::error::NfsError;
use crate::proto::NfsStat;
use crate::rpc::RpcError;

/// How a replayed request ended, when not OK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failed {
    /// An NFSv3 status.
    Nfs(u32),
    /// An NFSv4 status.
    Nfs4(u32),
    /// Refused below NFS (the RPC's accept status or a denial).
    Rpc(&'static str),
}

impl Failed {
    pub(super) fn of_rpc(e: &RpcError) -> Option<Failed> {
        Some(Failed::Rpc(match e {
            RpcError::ProgramUnavailable(_) => "PROG_UNAVAIL",
            RpcError::VersionMismatch { .. } => "PROG_MISMATCH",
            RpcError::ProcedureUnavailable(_) => "PROC_UNAVAIL",
            RpcError::GarbageArgs => "GARBAGE_ARGS",
            RpcError::SystemError => "SYSTEM_ERR",
            RpcError::Denied(_) => "MSG_DENIED",
            _ => return None,
        }))
    }

    pub(crate) fn name(self) -> String {
        match self {
            Failed::Nfs(st) => NfsStat(st)
                .name(3)
                .map_or_else(|| format!("NFS status {st}"), str::to_string),
            Failed::Nfs4(st) => NfsStat(st)
                .name(4)
                .map_or_else(|| format!("NFS4 status {st}"), str::to_string),
            Failed::Rpc(n) => n.to_string(),
        }
    }
}

/// One captured operation's figures while running (allocates at creation only, and once
/// per new error status).
#[derive(Debug, Clone)]
pub(super) struct OpStats {
    pub requests: u64,
    pub as_getattr: bool,
    pub errors: Vec<(Failed, u64)>,
    pub latency: LatencyHistogram,
}

impl OpStats {
    pub(super) fn new(as_getattr: bool) -> OpStats {
        OpStats {
            requests: 0,
            as_getattr,
            errors: Vec::new(),
            latency: LatencyHistogram::new(),
        }
    }

    pub(super) fn record(&mut self, latency_ns: u64, failed: Option<Failed>) {
        self.requests += 1;
        self.latency.record_ns(latency_ns);
        if let Some(f) = failed {
            match self.errors.iter_mut().find(|(g, _)| *g == f) {
                Some((_, n)) => *n += 1,
                None => self.errors.push((f, 1)),
            }
        }
    }

    fn merge(&mut self, o: &OpStats) {
        self.requests += o.requests;
        self.as_getattr |= o.as_getattr;
        self.latency.merge(&o.latency);
        for &(f, n) in &o.errors {
            match self.errors.iter_mut().find(|(g, _)| *g == f) {
                Some((_, m)) => *m += n,
                None => self.errors.push((f, n)),
            }
        }
    }
}

/// One captured operation as replayed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpResult {
    /// The captured NFSv3 procedure's number.
    pub proc_: u32,
    /// Replayed as a GETATTR (the replay does not make this procedure).
    pub replayed_as_getattr: bool,
    /// Requests replayed.
    pub requests: u64,
    /// Of them, answered with an error.
    pub errors: u64,
    /// The errors by status name (`NFS3ERR_NOENT`, `PROC_UNAVAIL`).
    pub error_statuses: BTreeMap<String, u64>,
    /// Call handed to the socket to the reply's last byte.
    pub latency: LatencySummary,
}

/// One connection as replayed.
#[derive(Debug, Clone, Serialize)]
pub struct ConnResult {
    /// Its index in the script.
    pub index: usize,
    /// First call sent, ns after the common start.
    pub first_sent_ns: u64,
    /// Last reply received, ns after the common start.
    pub last_received_ns: u64,
    /// From the first call sent to the last reply received, ns.
    pub duration_ns: u64,
    /// Data bytes READs returned.
    pub read_bytes: u64,
    /// Data bytes WRITEs' replies said were written.
    pub written_bytes: u64,
    /// Most requests outstanding at once.
    pub in_flight_max: u32,
    /// NFSv4.1: the slots of the connection's session, which bound the requests outstanding
    /// (the server may grant fewer than the capture had in flight); none in NFSv3 and 4.0.
    pub session_slots: Option<u32>,
    /// Per captured operation.
    pub ops: Vec<OpResult>,
    #[serde(skip)]
    pub(super) stats: Vec<Option<OpStats>>,
}

impl ConnResult {
    pub(super) fn new(index: usize, stats: Vec<Option<OpStats>>) -> ConnResult {
        ConnResult {
            index,
            first_sent_ns: u64::MAX,
            last_received_ns: 0,
            duration_ns: 0,
            read_bytes: 0,
            written_bytes: 0,
            in_flight_max: 0,
            session_slots: None,
            ops: Vec::new(),
            stats,
        }
    }

    /// Fills the summaries once the connection is done.
    pub(super) fn finish(&mut self) {
        if self.first_sent_ns == u64::MAX {
            self.first_sent_ns = 0;
        }
        self.duration_ns = self.last_received_ns.saturating_sub(self.first_sent_ns);
        self.ops = summaries(&self.stats);
    }
}

fn summaries(stats: &[Option<OpStats>]) -> Vec<OpResult> {
    stats
        .iter()
        .enumerate()
        .filter_map(|(p, s)| s.as_ref().map(|s| (p, s)))
        .map(|(p, s)| OpResult {
            proc_: p as u32,
            replayed_as_getattr: s.as_getattr,
            requests: s.requests,
            errors: s.errors.iter().map(|e| e.1).sum(),
            error_statuses: s.errors.iter().map(|&(f, n)| (f.name(), n)).collect(),
            latency: s.latency.summary(),
        })
        .collect()
}

/// A whole replay.
#[derive(Debug, Clone, Serialize)]
pub struct Replayed {
    /// The replay's directory (removed afterwards), under the URL's.
    pub directory: String,
    /// Mean round trip of the NULL calls at set-up, ns.
    pub null_rtt_ns: u64,
    /// From the first call sent to the last reply received, all connections, ns.
    pub duration_ns: u64,
    /// Data bytes read, all connections.
    pub read_bytes: u64,
    /// Data bytes written.
    pub written_bytes: u64,
    /// Per captured operation, all connections.
    pub ops: Vec<OpResult>,
    /// The connections, in the script's order.
    pub conns: Vec<ConnResult>,
}

impl Replayed {
    pub(super) fn new(directory: String, null_rtt_ns: u64, conns: Vec<ConnResult>) -> Replayed {
        let mut all: Vec<Option<OpStats>> = vec![None; OPS];
        for c in &conns {
            for (p, s) in c.stats.iter().enumerate() {
                if let Some(s) = s {
                    match &mut all[p] {
                        Some(a) => a.merge(s),
                        a @ None => *a = Some(s.clone()),
                    }
                }
            }
        }
        let busy = conns.iter().filter(|c| c.last_received_ns > 0);
        let first = busy.clone().map(|c| c.first_sent_ns).min().unwrap_or(0);
        let last = busy.map(|c| c.last_received_ns).max().unwrap_or(0);
        Replayed {
            directory,
            null_rtt_ns,
            duration_ns: last.saturating_sub(first),
            read_bytes: conns.iter().map(|c| c.read_bytes).sum(),
            written_bytes: conns.iter().map(|c| c.written_bytes).sum(),
            ops: summaries(&all),
            conns,
        }
    }

    /// Data read and written per second of the replay, bit/s.
    pub fn throughput_bps(&self) -> f64 {
        throughput(self.read_bytes + self.written_bytes, self.duration_ns)
    }
}

impl ConnResult {
    /// Bytes read and written per second of the connection's replay, bit/s.
    pub fn throughput_bps(&self) -> f64 {
        throughput(self.read_bytes + self.written_bytes, self.duration_ns)
    }
}

fn throughput(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 * 1e9 / ns as f64
    }
}

/// A reply parsed, finished once its last byte is in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    pub(crate) index: usize,
    pub(crate) failed: Option<Failed>,
    pub(crate) read: u64,
    pub(crate) written: u64,
    /// NFSv4.1: the server took the SEQUENCE (the slot's sequence moves on).
    pub(crate) seq_ok: bool,
}

impl Done {
    /// A reply to request `index` that succeeded and moved no data (so far).
    pub(crate) fn of(index: usize) -> Done {
        Done {
            index,
            failed: None,
            read: 0,
            written: 0,
            seq_ok: false,
        }
    }
}

/// A reply that did not decode, as the replay's error.
pub(super) fn xe(e: crate::xdr::XdrError) -> NfsError {
    NfsError::Rpc {
        what: "replay",
        source: RpcError::Xdr(e),
    }
}

/// A reply that decoded but does not answer the call, as the replay's error.
pub(super) fn bad(why: &'static str) -> NfsError {
    NfsError::Rpc {
        what: "replay",
        source: RpcError::Bad(why),
    }
}
