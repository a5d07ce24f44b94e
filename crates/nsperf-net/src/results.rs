//! What one end of a test measured, in the same shape on both ends: the server sends its
//! [`SideResults`] to the client, which merges both into the report.

use nsperf_core::cpu::CpuSample;
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

/// One reporting interval of one end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalMark {
    /// Seconds since this end's start.
    pub start_s: f64,
    /// Length in seconds.
    pub length_s: f64,
}

/// Latency measurements of request/response or sweep tests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Message size.
    pub size_bytes: u32,
    /// Round trips done.
    pub round_trips: u64,
    /// Median round-trip time, ns.
    pub rtt_p50_ns: u64,
    /// Mean round-trip time, ns.
    pub rtt_mean_ns: f64,
    /// One-way throughput `size / (rtt / 2)` from the median round trip (NetPIPE's figure).
    pub throughput_bps: f64,
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
}
