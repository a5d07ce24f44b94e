//! What one end of a test measured, in the same shape on both ends: the server sends its
//! [`SideResults`] to the client, which merges both into the report.

use nsperf_core::cpu::CpuSample;
use nsperf_core::stats::LatencySummary;
use serde::{Deserialize, Serialize};

use crate::tcpinfo::TcpInfoSample;

/// UDP receive counters of one stream (cumulative at the sample time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpCounters {
    /// Distinct datagrams received.
    pub datagrams: u64,
    /// Highest sequence number seen plus one (what the sender had sent by then, as far as
    /// the receiver knows).
    pub expected: u64,
    /// Datagrams that arrived after a later one.
    pub out_of_order: u64,
    /// Datagrams received twice.
    pub duplicates: u64,
    /// RFC 3550 interarrival jitter, ns.
    pub jitter_ns: f64,
    /// Datagrams the kernel dropped on this socket for want of receive buffer
    /// (`SO_RXQ_OVFL`; counts offloaded batches as one).
    pub kernel_drops: u64,
}

/// One sample of one stream at the end of an interval (cumulative counters).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSample {
    /// Payload bytes this end moved on the stream so far.
    pub bytes: u64,
    /// Messages so far: datagrams sent (UDP sender) or transactions completed
    /// (request/response client).
    pub messages: u64,
    /// `TCP_INFO` of this end's socket.
    pub tcp: Option<TcpInfoSample>,
    /// UDP receive counters (receiver only).
    pub udp: Option<UdpCounters>,
    /// Request/response client: latency of the transactions completed in this interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
}

/// One stream as seen by one end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamRecord {
    /// Stream index within the test.
    pub id: u32,
    /// True when this end sends on the stream.
    pub sending: bool,
    /// Send buffer the kernel granted (`getsockopt(SO_SNDBUF)`, which reports double the
    /// request because the kernel counts its bookkeeping).
    pub sndbuf_bytes: u64,
    /// Receive buffer the kernel granted (`SO_RCVBUF`, likewise doubled).
    pub rcvbuf_bytes: u64,
    /// Congestion control in use on this end's socket.
    pub congestion: Option<String>,
    /// Maximum segment size of this end's socket.
    pub mss: Option<u32>,
    /// Cumulative samples at each interval end, in interval order.
    pub samples: Vec<StreamSample>,
    /// Error that ended the stream early, if any.
    pub error: Option<String>,
}

impl StreamRecord {
    /// Bytes moved in interval `i` (the growth of the cumulative count), 0 when unknown.
    pub(crate) fn bytes_in(&self, i: usize) -> u64 {
        let cur = self.samples.get(i).map(|s| s.bytes);
        let prev = if i == 0 {
            Some(0)
        } else {
            self.samples.get(i - 1).map(|s| s.bytes)
        };
        match (cur, prev) {
            (Some(c), Some(p)) => c.saturating_sub(p),
            _ => 0,
        }
    }

    /// TCP retransmissions in interval `i`, 0 when unknown.
    pub(crate) fn retransmits_in(&self, i: usize) -> u64 {
        let r = |j: usize| {
            self.samples
                .get(j)
                .and_then(|s| s.tcp)
                .map(|t| t.total_retrans as u64)
        };
        match (r(i), if i == 0 { Some(0) } else { r(i - 1) }) {
            (Some(c), Some(p)) => c.saturating_sub(p),
            _ => 0,
        }
    }
}

/// One reporting interval of one end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalMark {
    /// Seconds since this end's start.
    pub start_s: f64,
    /// Length in seconds.
    pub length_s: f64,
}

/// One message size of a sweep (`--sweep`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Message size.
    pub size_bytes: u32,
    /// Timed round trips done (the warm-up round trip not counted).
    pub round_trips: u64,
    /// Median round-trip time, ns.
    pub rtt_p50_ns: u64,
    /// Mean round-trip time, ns.
    pub rtt_mean_ns: f64,
    /// Mean round trip of the best of the trials, ns (NetPIPE's figure).
    #[serde(default)]
    pub rtt_best_ns: f64,
    /// One-way throughput `size / (rtt_best / 2)`: each message crossed whole before the
    /// reply started, so half the round trip is one message's one-way time (NetPIPE's figure).
    pub throughput_bps: f64,
}

/// A byte-count test (`-n` without `-t`) that moves no data for this long stops and says so.
pub const STALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Why the client ended the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The planned time (`-t`) ran out.
    Time,
    /// This end sent every byte asked for (`-n`).
    Bytes,
    /// Every data stream ended by itself: the peer's senders finished (`-R -n`), the sweep
    /// is done, or the streams failed (their errors are in the stream records).
    Streams,
    /// No data moved on any stream for [`STALL_TIMEOUT`] (`-n` without `-t`).
    Stalled,
    /// Ctrl-C (or SIGTERM).
    Interrupted,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Time => "the time limit (-t) came first",
            StopReason::Bytes => "every byte was sent",
            StopReason::Streams => "the data streams ended",
            StopReason::Stalled => {
                return write!(f, "no data moved for {} s", STALL_TIMEOUT.as_secs());
            }
            StopReason::Interrupted => "interrupted",
        })
    }
}

/// An end's CPU quota and its throttling during the test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuLimitUse {
    /// The quota: cgroup, cores, interface.
    pub quota: nsperf_core::cgroup::CpuQuota,
    /// Share of the scheduler periods of the test in which the cgroup ran out of quota, %.
    pub throttled_pct: Option<f64>,
}

/// Everything one end measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideResults {
    /// `client` or `server`.
    pub role: String,
    /// The intervals, in order.
    pub intervals: Vec<IntervalMark>,
    /// CPU use per interval.
    pub cpu: Vec<CpuSample>,
    /// The streams.
    pub streams: Vec<StreamRecord>,
    /// Request/response client: latency of all streams' transactions per interval (one
    /// entry per interval, `None` for an interval without any); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<Option<LatencySummary>>,
    /// This end held its CPUs out of deep idle during the test (`--awake`, needs root).
    #[serde(default)]
    pub cpu_awake: bool,
    /// Why this end ended the test before its peer asked (the server's `--max-time`, a
    /// silent client); `None` when the test ended as planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_early: Option<String>,
    /// UDP tests: how much this end's host UDP error counters grew during the test
    /// (`/proc/net/snmp` of its network namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_host: Option<crate::snmp::UdpHostCounters>,
    /// This end's CPU quota (cgroup) and how it was throttled during the test, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<CpuLimitUse>,
}

impl SideResults {
    /// The mean busy percentage of this end's busiest core over the test (0 without CPU
    /// samples).
    pub(crate) fn busiest_core_mean_pct(&self) -> f64 {
        let cores: std::collections::BTreeSet<u32> = self
            .cpu
            .iter()
            .flat_map(|s| s.per_core.iter().map(|c| c.core))
            .collect();
        cores
            .into_iter()
            .map(|core| {
                let v: Vec<f64> = self
                    .cpu
                    .iter()
                    .filter_map(|s| {
                        s.per_core
                            .iter()
                            .find(|c| c.core == core)
                            .map(|c| c.busy_pct)
                    })
                    .collect();
                nsperf_core::stats::mean(&v).unwrap_or(0.0)
            })
            .fold(0.0, f64::max)
    }
}

/// Folds the latency of a short last interval into the one before: counts and the mean add
/// up, the largest sample is the larger one, and the percentiles stay those of the longer
/// interval (a summary cannot be merged; the tail is a sliver of the drain).
pub fn fold_latency(
    before: Option<LatencySummary>,
    tail: Option<LatencySummary>,
) -> Option<LatencySummary> {
    match (before, tail) {
        (Some(b), Some(t)) if t.count > 0 => {
            let count = b.count + t.count;
            let mut f = if t.count > b.count { t } else { b };
            f.count = count;
            f.mean_ns = (b.mean_ns * b.count as f64 + t.mean_ns * t.count as f64) / count as f64;
            f.min_ns = if b.count == 0 {
                t.min_ns
            } else {
                b.min_ns.min(t.min_ns)
            };
            f.max_ns = b.max_ns.max(t.max_ns);
            Some(f)
        }
        (Some(b), _) => Some(b),
        (None, t) => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_a_tail_adds_counts_and_keeps_extremes() {
        let b = LatencySummary {
            count: 900,
            min_ns: 50,
            mean_ns: 100.0,
            p50_ns: 90,
            p90_ns: 150,
            p99_ns: 300,
            p999_ns: 400,
            max_ns: 500,
        };
        let t = LatencySummary {
            count: 100,
            min_ns: 40,
            mean_ns: 200.0,
            p50_ns: 190,
            p90_ns: 250,
            p99_ns: 900,
            p999_ns: 950,
            max_ns: 1000,
        };
        let f = fold_latency(Some(b), Some(t)).unwrap();
        assert_eq!(f.count, 1000);
        assert_eq!((f.min_ns, f.max_ns), (40, 1000));
        assert!((f.mean_ns - 110.0).abs() < 1e-9);
        assert_eq!((f.p50_ns, f.p99_ns), (90, 300));
        assert_eq!(fold_latency(None, Some(t)), Some(t));
        assert_eq!(fold_latency(Some(b), None), Some(b));
        assert_eq!(fold_latency(None, None), None);
    }
}
