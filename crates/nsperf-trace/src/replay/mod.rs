//! The workload a capture holds, per client connection, derived from the request stream
//! ([`crate::proto::requests`]): the requests in call order, how many were outstanding
//! together, which waited for a reply (dependencies, as FEUT defines them), the client's
//! think time, the files and how far into them the requests went, and the server's service
//! time per operation as seen at the capture point. [`model`] predicts the workload's
//! duration at another RTT, link rate and TCP window from it. Pure: no I/O, no clock.
//!
//! Where the capture was taken matters: times are those at the capture point, which sits
//! `d_c` (round trip) from the client and `d_s` from the server (the TCP layer measures both
//! from data to ACK). A service time is the reply's first byte minus the call's last minus
//! `d_s` (clamped at 0): exact at the client (`d_c` = 0, `d_s` the path RTT) and at the
//! server (`d_s` = 0) alike, as long as the round trips were measured. A think time is the
//! gap from the reply to the next call minus `d_c`.

pub mod against;
pub mod model;
pub mod report;
pub mod script;

use std::collections::{BTreeMap, BinaryHeap};

use serde::Serialize;

use crate::proto::requests::{Op, OpKind, Outcome, Request, RequestConn};

/// Files listed per client at most (the largest extents); the rest are counted.
pub const MAX_FILES_LISTED: usize = 100;

/// What started a request's call, as the capture shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The connection's first request.
    Start,
    /// The previous call (index in call order) was the last event before it: the call
    /// follows it by `delay_ns` (both at the capture point).
    Call {
        /// The previous request.
        index: usize,
        /// Call to call, ns.
        delay_ns: i64,
    },
    /// Replies came in since the previous call: the call follows the arrival at the client
    /// of the first of them (request `index`, the one that freed a slot) by `delay_ns` (the
    /// gap at the capture point minus `d_c`, at least 0). `dependent` when nothing else was
    /// outstanding at the call: the request waited for the replies (FEUT's dependency).
    Reply {
        /// The request whose reply came last.
        index: usize,
        /// The client's time from the reply to the call, ns.
        delay_ns: i64,
        /// Nothing else outstanding at the call.
        dependent: bool,
    },
}

/// One request as the model sees it; times in ns from the connection's first call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// The operation.
    pub op: Op,
    /// First byte of the call at the capture point.
    pub call_ns: i64,
    /// Last byte of the reply at the capture point.
    pub reply_ns: i64,
    /// The call's bytes passing the capture point (first to last byte).
    pub call_pass_ns: i64,
    /// The reply's bytes passing the capture point.
    pub reply_pass_ns: i64,
    /// Bytes of the call record.
    pub call_bytes: u64,
    /// Bytes of the reply record.
    pub reply_bytes: u64,
    /// The server's time: reply's first byte − call's last byte − `d_s`, at least 0 (with
    /// several requests in flight it holds the time the reply waited behind earlier ones).
    pub service_ns: i64,
    /// Requests outstanding at its call, itself included.
    pub in_flight: u32,
    /// A dependent request's think time: from the last reply before it to its call, minus
    /// `d_c`, at least 0.
    pub think_ns: Option<i64>,
    /// What started it.
    pub trigger: Trigger,
    /// The file's hash (0: none), as in its [`Request`].
    pub file: u64,
    /// Offset of a READ, WRITE or COMMIT.
    pub offset: u64,
    /// Bytes a READ returned, a WRITE sent, a COMMIT covered.
    pub count: u32,
    /// An NFSv3 WRITE's `stable_how`.
    pub stable: Option<nsperf_nfs::Stable>,
}

/// A file one client touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileUse {
    /// The file's identity: the hash of its handle or FileId, in hex.
    pub file: String,
    /// Requests naming it.
    pub requests: u64,
    /// Largest offset + count of a READ, WRITE or COMMIT of it: the size replay needs.
    pub extent_bytes: u64,
    /// Bytes read from it.
    pub read_bytes: u64,
    /// Bytes written to it.
    pub written_bytes: u64,
}

/// The figures of one operation of one client.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpUse {
    /// `PROTOCOL:NAME` (`nfs3:READ`).
    pub op: String,
    /// What it does.
    pub kind: OpKind,
    /// Requests matched to a reply.
    pub requests: u64,
    /// Of them, with an error status (or refused).
    pub errors: u64,
    /// Data moved (READ returned, WRITE sent), bytes.
    pub data_bytes: u64,
    /// Bytes of the call records.
    pub call_bytes: u64,
    /// Bytes of the reply records.
    pub reply_bytes: u64,
    /// Mean service time at the capture point, ms (see the module's doc).
    pub service_mean_ms: f64,
    /// Largest, ms.
    pub service_max_ms: f64,
}

/// The workload of one client connection.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The connection.
    pub conn: RequestConn,
    /// The client's side (0 = a).
    pub client: usize,
    /// Its first call's first byte, capture time (ns).
    pub start_ns: i64,
    /// The requests, in call order.
    pub steps: Vec<Step>,
    /// Round trip from the capture point to the client and back, ns.
    pub rtt_client_ns: i64,
    /// Round trip to the server and back, ns.
    pub rtt_server_ns: i64,
    /// The figures per operation.
    pub ops: Vec<OpUse>,
    /// The files, largest extent first, at most [`MAX_FILES_LISTED`].
    pub files: Vec<FileUse>,
    /// Files touched in all.
    pub file_count: u64,
}

impl Workload {
    /// First call to last reply at the capture point, plus `d_c` (the first call left the
    /// client `d_c`/2 before, the last reply reached it `d_c`/2 after): the duration the
    /// client saw, ns.
    pub fn captured_ns(&self) -> i64 {
        let end = self.steps.iter().map(|s| s.reply_ns).max().unwrap_or(0);
        end + self.rtt_client_ns
    }

    /// The path's round trip at the capture: `d_c + d_s`, ns.
    pub fn captured_rtt_ns(&self) -> i64 {
        self.rtt_client_ns + self.rtt_server_ns
    }

    /// Most requests outstanding at once.
    pub fn in_flight_max(&self) -> u32 {
        self.steps.iter().map(|s| s.in_flight).max().unwrap_or(0)
    }

    /// Requests outstanding at each call (itself included), mean.
    pub fn in_flight_mean(&self) -> f64 {
        let n = self.steps.len().max(1) as f64;
        self.steps
            .iter()
            .map(|s| f64::from(s.in_flight))
            .sum::<f64>()
            / n
    }

    /// Requests that waited for a reply with nothing else outstanding.
    pub fn dependent(&self) -> u64 {
        self.steps
            .iter()
            .filter(|s| {
                matches!(
                    s.trigger,
                    Trigger::Reply {
                        dependent: true,
                        ..
                    }
                )
            })
            .count() as u64
    }

    /// Mean think time of the dependent requests (reply to next call, `d_c` taken out), ns.
    pub fn think_mean_ns(&self) -> f64 {
        let (n, sum) = self
            .steps
            .iter()
            .fold((0u64, 0i64), |(n, s), x| match x.trigger {
                Trigger::Reply {
                    dependent: true,
                    delay_ns,
                    ..
                } => (n + 1, s + delay_ns),
                _ => (n, s),
            });
        if n == 0 { 0.0 } else { sum as f64 / n as f64 }
    }

    /// Data bytes read and written.
    pub fn data_bytes(&self) -> (u64, u64) {
        let of = |k| {
            self.ops
                .iter()
                .filter(|o| o.kind == k)
                .map(|o| o.data_bytes)
                .sum()
        };
        (of(OpKind::Read), of(OpKind::Write))
    }
}

/// The workloads of a capture's request stream: one per connection with requests, by
/// connection id. A connection's client is the side that sent its calls.
pub fn workloads(requests: &[Request], conns: &[RequestConn]) -> Vec<Workload> {
    let mut by_conn: BTreeMap<u32, Vec<&Request>> = BTreeMap::new();
    for r in requests {
        by_conn.entry(r.conn).or_default().push(r);
    }
    by_conn
        .into_iter()
        .map(|(id, mut rs)| {
            rs.sort_by_key(|r| (r.call_first_ns, r.call_last_ns));
            let conn = conns
                .iter()
                .find(|c| c.id == id)
                .cloned()
                .unwrap_or_else(|| RequestConn {
                    id,
                    a: String::new(),
                    b: String::new(),
                    rtt_a_ns: 0,
                    rtt_b_ns: 0,
                    window_a_bytes: None,
                    window_b_bytes: None,
                });
            workload(conn, &rs)
        })
        .collect()
}

/// The workload of one connection's requests, in call order.
fn workload(conn: RequestConn, rs: &[&Request]) -> Workload {
    let client = usize::from(rs.first().map_or(0, |r| r.client) & 1);
    let rtt = [conn.rtt_a_ns as i64, conn.rtt_b_ns as i64];
    let (d_c, d_s) = (rtt[client], rtt[1 - client]);
    let t0 = rs.first().map_or(0, |r| r.call_first_ns);
    let steps = steps(rs, t0, d_c, d_s);
    let (ops, files, file_count) = uses(rs, &steps);
    Workload {
        conn,
        client,
        start_ns: t0,
        steps,
        rtt_client_ns: d_c,
        rtt_server_ns: d_s,
        ops,
        files,
        file_count,
    }
}

/// The steps: each request's times, what started it and what was outstanding.
fn steps(rs: &[&Request], t0: i64, d_c: i64, d_s: i64) -> Vec<Step> {
    // Outstanding requests by the time their reply ends: (−reply_last, index).
    let mut outstanding: BinaryHeap<(std::cmp::Reverse<i64>, usize)> = BinaryHeap::new();
    // The replies since the previous call: the first and the last (end, index).
    let mut since: Option<((i64, usize), (i64, usize))> = None;
    let mut out = Vec::with_capacity(rs.len());
    for (i, r) in rs.iter().enumerate() {
        while let Some(&(std::cmp::Reverse(end), j)) = outstanding.peek() {
            if end > r.call_first_ns {
                break;
            }
            outstanding.pop();
            // Popped in order of their end: the first since the previous call, the last.
            since = Some((since.map_or((end, j), |s| s.0), (end, j)));
        }
        let prev_call = i.checked_sub(1).map(|p| (rs[p].call_first_ns, p));
        let dependent = i > 0 && since.is_some() && outstanding.is_empty();
        let think_ns = since
            .filter(|_| dependent)
            .map(|(_, (t, _))| (r.call_first_ns - t - d_c).max(0));
        let trigger = match (prev_call, since.take()) {
            (None, _) => Trigger::Start,
            (Some(_), Some(((t, j), _))) => Trigger::Reply {
                index: j,
                delay_ns: (r.call_first_ns - t - d_c).max(0),
                dependent,
            },
            (Some((c, p)), _) => Trigger::Call {
                index: p,
                delay_ns: r.call_first_ns - c,
            },
        };
        let wait = r.reply_first_ns - r.call_last_ns - d_s;
        out.push(Step {
            op: r.op,
            call_ns: r.call_first_ns - t0,
            reply_ns: r.reply_last_ns - t0,
            call_pass_ns: (r.call_last_ns - r.call_first_ns).max(0),
            reply_pass_ns: (r.reply_last_ns - r.reply_first_ns).max(0),
            call_bytes: r.call_bytes,
            reply_bytes: r.reply_bytes,
            service_ns: wait.max(0),
            in_flight: outstanding.len() as u32 + 1,
            think_ns,
            trigger,
            file: r.file,
            offset: r.offset,
            count: r.count,
            stable: r.stable,
        });
        outstanding.push((std::cmp::Reverse(r.reply_last_ns), i));
    }
    out
}

/// The figures per operation and the files.
fn uses(rs: &[&Request], steps: &[Step]) -> (Vec<OpUse>, Vec<FileUse>, u64) {
    let mut ops: BTreeMap<Op, (OpUse, f64)> = BTreeMap::new();
    let mut files: BTreeMap<u64, FileUse> = BTreeMap::new();
    for (r, s) in rs.iter().zip(steps) {
        let kind = r.op.kind();
        let (o, sum) = ops.entry(r.op).or_insert_with(|| {
            (
                OpUse {
                    op: r.op.qualified(),
                    kind,
                    requests: 0,
                    errors: 0,
                    data_bytes: 0,
                    call_bytes: 0,
                    reply_bytes: 0,
                    service_mean_ms: 0.0,
                    service_max_ms: 0.0,
                },
                0.0,
            )
        });
        let ok = r.outcome == Outcome::Ok;
        let data = if ok && matches!(kind, OpKind::Read | OpKind::Write) {
            u64::from(r.count)
        } else {
            0
        };
        o.requests += 1;
        o.errors += u64::from(!ok);
        o.data_bytes += data;
        o.call_bytes += r.call_bytes;
        o.reply_bytes += r.reply_bytes;
        let ms = s.service_ns as f64 / 1e6;
        *sum += ms;
        o.service_max_ms = o.service_max_ms.max(ms);
        if r.file != 0 {
            let f = files.entry(r.file).or_insert_with(|| FileUse {
                file: format!("{:016x}", r.file),
                requests: 0,
                extent_bytes: 0,
                read_bytes: 0,
                written_bytes: 0,
            });
            f.requests += 1;
            if kind != OpKind::Meta {
                f.extent_bytes = f
                    .extent_bytes
                    .max(r.offset.saturating_add(u64::from(r.count)));
            }
            match kind {
                OpKind::Read => f.read_bytes += data,
                OpKind::Write => f.written_bytes += data,
                _ => {}
            }
        }
    }
    let ops = ops
        .into_values()
        .map(|(mut o, sum)| {
            o.service_mean_ms = sum / o.requests.max(1) as f64;
            o
        })
        .collect();
    let file_count = files.len() as u64;
    let mut files: Vec<FileUse> = files.into_values().collect();
    files.sort_by(|a, b| {
        b.extent_bytes
            .cmp(&a.extent_bytes)
            .then(b.requests.cmp(&a.requests))
    });
    files.truncate(MAX_FILES_LISTED);
    (ops, files, file_count)
}

#[cfg(test)]
pub(crate) mod tests;
