//! What a replay measured: per connection and in all, the duration, the bytes moved and
//! per captured operation the requests, errors and latency. Protocol-neutral: a driver
//! counts its requests in [`OpStats`] under its own error type ([`ErrorStatus`]), and hands
//! them to [`ConnResult::finish`] once the connection is done.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::stats::{LatencyHistogram, LatencySummary};

/// How a replayed request ended when not OK (an NFS status, an NT status, an RPC refusal).
pub trait ErrorStatus: Copy + Eq {
    /// Its name as the report prints it (`NFS3ERR_NOENT`, `STATUS_END_OF_FILE`).
    fn name(self) -> String;
}

/// One captured operation's figures while running (allocates at creation only, and once
/// per new error status).
#[derive(Debug, Clone)]
pub struct OpStats<F> {
    requests: u64,
    stand_in: bool,
    errors: Vec<(F, u64)>,
    latency: LatencyHistogram,
}

impl<F: ErrorStatus> OpStats<F> {
    /// Nothing counted; `stand_in`: the replay makes another operation in its place.
    pub fn new(stand_in: bool) -> OpStats<F> {
        OpStats {
            requests: 0,
            stand_in,
            errors: Vec::new(),
            latency: LatencyHistogram::new(),
        }
    }

    /// One request answered after `latency_ns`, with `failed` when not OK.
    pub fn record(&mut self, latency_ns: u64, failed: Option<F>) {
        self.requests += 1;
        self.latency.record_ns(latency_ns);
        if let Some(f) = failed {
            match self.errors.iter_mut().find(|(g, _)| *g == f) {
                Some((_, n)) => *n += 1,
                None => self.errors.push((f, 1)),
            }
        }
    }

    /// Marks the operation as replayed by a stand-in (at least once).
    pub fn set_stand_in(&mut self) {
        self.stand_in = true;
    }

    fn tally(&self) -> Tally {
        let mut errors = BTreeMap::new();
        for &(f, n) in &self.errors {
            *errors.entry(f.name()).or_insert(0) += n;
        }
        Tally {
            requests: self.requests,
            stand_in: self.stand_in,
            errors,
            latency: self.latency.clone(),
        }
    }
}

/// One operation's figures once the connection is done, errors by name.
#[derive(Debug, Clone)]
struct Tally {
    requests: u64,
    stand_in: bool,
    errors: BTreeMap<String, u64>,
    latency: LatencyHistogram,
}

impl Tally {
    fn merge(&mut self, o: &Tally) {
        self.requests += o.requests;
        self.stand_in |= o.stand_in;
        self.latency.merge(&o.latency);
        for (f, n) in &o.errors {
            *self.errors.entry(f.clone()).or_insert(0) += n;
        }
    }

    fn result(&self, op: u32) -> OpResult {
        OpResult {
            proc_: op,
            replayed_as_getattr: self.stand_in,
            requests: self.requests,
            errors: self.errors.values().sum(),
            error_statuses: self.errors.clone(),
            latency: self.latency.summary(),
        }
    }
}

/// One captured operation as replayed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpResult {
    /// The captured operation's number: the NFSv3 procedure's, the NFSv4 operation's, the
    /// SMB2 command's.
    pub proc_: u32,
    /// Replayed by a stand-in (the replay does not make this operation): a GETATTR in NFS,
    /// an ECHO in SMB2.
    pub replayed_as_getattr: bool,
    /// Requests replayed.
    pub requests: u64,
    /// Of them, answered with an error.
    pub errors: u64,
    /// The errors by status name (`NFS3ERR_NOENT`, `PROC_UNAVAIL`, `STATUS_END_OF_FILE`).
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
    /// (the server may grant fewer than the capture had in flight); none otherwise.
    pub session_slots: Option<u32>,
    /// Per captured operation.
    pub ops: Vec<OpResult>,
    #[serde(skip)]
    tallies: Vec<(u32, Tally)>,
}

impl ConnResult {
    /// Connection `index`, nothing measured yet.
    pub fn new(index: usize) -> ConnResult {
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
            tallies: Vec::new(),
        }
    }

    /// Fills the summaries once the connection is done: `stats[op]` counted the requests
    /// of the captured operation `op`.
    pub fn finish<F: ErrorStatus>(&mut self, stats: &[Option<OpStats<F>>]) {
        if self.first_sent_ns == u64::MAX {
            self.first_sent_ns = 0;
        }
        self.duration_ns = self.last_received_ns.saturating_sub(self.first_sent_ns);
        self.tallies = stats
            .iter()
            .enumerate()
            .filter_map(|(p, s)| s.as_ref().map(|s| (p as u32, s.tally())))
            .collect();
        self.ops = self.tallies.iter().map(|(p, t)| t.result(*p)).collect();
    }

    /// Bytes read and written per second of the connection's replay, bit/s.
    pub fn throughput_bps(&self) -> f64 {
        throughput(self.read_bytes + self.written_bytes, self.duration_ns)
    }
}

/// A whole replay.
#[derive(Debug, Clone, Serialize)]
pub struct Replayed {
    /// The replay's directory (removed afterwards), under the URL's.
    pub directory: String,
    /// Mean round trip of the no-op calls at set-up (NFS NULL, SMB2 ECHO), ns.
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
    /// The replay of `conns` (each finished) in `directory`, the path's round trip
    /// `null_rtt_ns`.
    pub fn new(directory: String, null_rtt_ns: u64, conns: Vec<ConnResult>) -> Replayed {
        let mut all: BTreeMap<u32, Tally> = BTreeMap::new();
        for c in &conns {
            for (p, t) in &c.tallies {
                match all.get_mut(p) {
                    Some(a) => a.merge(t),
                    None => {
                        all.insert(*p, t.clone());
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
            ops: all.iter().map(|(p, t)| t.result(*p)).collect(),
            conns,
        }
    }

    /// Data read and written per second of the replay, bit/s.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct E(u32);

    impl ErrorStatus for E {
        fn name(self) -> String {
            format!("E{}", self.0)
        }
    }

    #[test]
    fn connections_merge_per_operation_and_errors_by_name() {
        let conn = |index, first, last, errs: &[u32]| {
            let mut s: Vec<Option<OpStats<E>>> = vec![None; 10];
            let o = s[8].get_or_insert_with(|| OpStats::new(false));
            o.record(1_000, None);
            for &e in errs {
                o.record(2_000, Some(E(e)));
            }
            s[3].get_or_insert_with(|| OpStats::new(true))
                .record(500, None);
            let mut c = ConnResult::new(index);
            c.first_sent_ns = first;
            c.last_received_ns = last;
            c.read_bytes = 100;
            c.finish(&s);
            c
        };
        let a = conn(0, 10, 110, &[2, 2]);
        assert_eq!(a.duration_ns, 100);
        assert_eq!(a.ops.len(), 2);
        assert_eq!(a.ops[1].proc_, 8);
        assert_eq!(a.ops[1].errors, 2);
        let r = Replayed::new("d".into(), 7, vec![a, conn(1, 50, 300, &[5])]);
        assert_eq!(r.duration_ns, 290);
        assert_eq!(r.read_bytes, 200);
        let read = &r.ops[1];
        assert_eq!((read.proc_, read.requests, read.errors), (8, 5, 3));
        assert_eq!(read.error_statuses["E2"], 2);
        assert_eq!(read.error_statuses["E5"], 1);
        assert!(r.ops[0].replayed_as_getattr && !read.replayed_as_getattr);
        assert!((r.throughput_bps() - 200.0 * 8.0 * 1e9 / 290.0).abs() < 1e-6);
    }
}
