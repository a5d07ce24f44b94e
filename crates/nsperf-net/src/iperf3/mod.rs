//! iperf3's protocol, both ways: `nsperf net` against an iperf3 server and `nsperf server`
//! serving iperf3 clients (3.9–3.17), with nsperf's data paths and meters on the data
//! connections.
//!
//! - `wire`: the bytes (states, cookie, length-prefixed JSON, parameters and results);
//! - `session`: both ends as pure state machines, tested in memory and fuzzed;
//! - `params`: nsperf's test parameters to iperf3's and back;
//! - `ctrl`: the control connection's socket shell, shared by both ends;
//! - `client`: the socket shell of `nsperf net` (the serving shell is `server/iperf3.rs`, beside
//!   the nsperf server it shares a port with);
//! - `report`: the `net` report of a run against an iperf3 server, and the iperf3-shaped
//!   document of `--json-compat iperf3`.

pub(crate) mod client;
pub(crate) mod compat;
pub(crate) mod ctrl;
pub(crate) mod params;
pub(crate) mod report;
pub(crate) mod session;
pub(crate) mod wire;

use std::time::Duration;

use nsperf_core::cpu::ProcessTimes;

use crate::config::{Protocol, TestParams};
use crate::results::{SideResults, StreamRecord, StreamSample};
pub use wire::{Results, StreamResult};

/// What the two ends of an iperf3 test told each other after it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Iperf3Shared {
    /// The iperf3 peer's results.
    pub server: Results,
    /// The results nsperf sent.
    pub client: Results,
}

/// This end's sample at the end of the omitted seconds (iperf3 counts from there), `None`
/// when there were none.
fn at_warmup<'a>(
    side: &SideResults,
    rec: &'a StreamRecord,
    warmup_s: f64,
) -> Option<&'a StreamSample> {
    if warmup_s <= 0.0 {
        return None;
    }
    side.intervals
        .iter()
        .zip(&rec.samples)
        // The tick closing the omitted seconds may come a little late.
        .rfind(|(m, _)| m.start_s + m.length_s <= warmup_s + 0.25)
        .map(|(_, s)| s)
}

/// Bytes a stream moved after the omitted seconds.
pub(crate) fn bytes_after_warmup(side: &SideResults, rec: &StreamRecord, warmup_s: f64) -> u64 {
    let last = rec.samples.last().map_or(0, |s| s.bytes);
    let base = at_warmup(side, rec, warmup_s).map_or(0, |s| s.bytes);
    last.saturating_sub(base)
}

/// This end's results in iperf3's form (`send_results`): per stream the bytes after the
/// omitted seconds, TCP retransmissions of a sender, a UDP receiver's loss and jitter; the
/// process CPU over the test.
pub(crate) fn local_results(
    side: &SideResults,
    p: &TestParams,
    cpu0: Option<ProcessTimes>,
    elapsed: Duration,
) -> Results {
    let warm = p.warmup_ns as f64 / 1e9;
    let total: f64 = side.intervals.iter().map(|m| m.length_s).sum();
    let tcp = p.protocol == Protocol::Tcp;
    let mut streams: Vec<&StreamRecord> = side.streams.iter().collect();
    streams.sort_by_key(|r| r.id);
    let mut out = Results {
        sender_has_retransmits: if streams.iter().any(|r| r.sending) {
            i64::from(tcp)
        } else {
            -1
        },
        congestion_used: streams.iter().find_map(|r| r.congestion.clone()),
        ..Results::default()
    };
    for rec in streams {
        let last = rec.samples.last().cloned().unwrap_or_default();
        let base = at_warmup(side, rec, warm).cloned().unwrap_or_default();
        let mut s = StreamResult {
            id: wire::stream_id(rec.id),
            bytes: last.bytes.saturating_sub(base.bytes) as i64,
            retransmits: -1,
            end_time: (total - warm).max(0.0),
            ..StreamResult::default()
        };
        if rec.sending {
            if let (true, Some(t)) = (tcp, last.tcp) {
                let before = base.tcp.map_or(0, |b| b.total_retrans);
                s.retransmits = t.total_retrans.saturating_sub(before) as i64;
            }
            if !tcp {
                s.packets = last.messages as i64;
                s.omitted_packets = Some(base.messages as i64);
            }
        } else if let Some(u) = last.udp {
            let b = base.udp.unwrap_or_default();
            s.packets = u.expected as i64;
            s.errors = u.expected.saturating_sub(u.datagrams) as i64;
            s.omitted_packets = Some(b.expected as i64);
            s.omitted_errors = Some(b.expected.saturating_sub(b.datagrams) as i64);
            s.jitter = u.jitter_ns / 1e9;
        }
        out.streams.push(s);
    }
    if let (Some(a), Some(b)) = (cpu0, nsperf_core::cpu::process_times()) {
        let secs = elapsed.as_secs_f64().max(1e-9);
        out.cpu_util_user = 100.0 * (b.user_s - a.user_s).max(0.0) / secs;
        out.cpu_util_system = 100.0 * (b.sys_s - a.sys_s).max(0.0) / secs;
        out.cpu_util_total = out.cpu_util_user + out.cpu_util_system;
    }
    out
}
