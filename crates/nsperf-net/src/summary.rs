//! The result model of a `net` run: the report's spec, interval rows and summary (the JSON
//! schema of `nsperf net --json`, documented in docs/schema.md).

use nsperf_core::report::Report;
use nsperf_core::stats::LatencySummary;
use serde::{Deserialize, Serialize};

use crate::config::{LocalEnd, TestParams};
use crate::results::{StopReason, SweepPoint};
use crate::tcpinfo::TcpInfoSample;

/// The `spec` of a `net` report: the target and every test parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetSpec {
    /// Host name or address given.
    pub target: String,
    /// Control port.
    pub port: u16,
    /// True for `--loopback` (in-process server).
    pub loopback: bool,
    /// What the server speaks: `nsperf`, or `iperf3` (which shares only its totals).
    #[serde(default)]
    pub peer: Peer,
    /// The client's own end as asked (`-B`, `--cport`, `-4`/`-6`, `-A`); absent when none
    /// was.
    #[serde(default, skip_serializing_if = "LocalEnd::is_default")]
    pub local: LocalEnd,
    /// The test parameters.
    #[serde(flatten)]
    pub params: TestParams,
}

/// One entry of the `intervals` series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetInterval {
    /// Interval start, seconds since the test started (receiver's clock).
    pub start_s: f64,
    /// Interval length, seconds.
    pub length_s: f64,
    /// Stream index; `null` for the aggregate of all streams of the direction.
    pub stream: Option<u32>,
    /// `up` (client to server) or `down`.
    pub direction: StreamDirection,
    /// Payload bytes the sender wrote in the interval; `null` when the sender is an iperf3
    /// peer (it shares only its totals).
    pub sent_bytes: Option<u64>,
    /// Payload bytes the receiver read in the interval; `null` when the receiver is an
    /// iperf3 peer.
    pub received_bytes: Option<u64>,
    /// Receiver payload bit rate over the interval (the sender's when the receiver is an
    /// iperf3 peer).
    pub throughput_bps: f64,
    /// Segments retransmitted by the sender in the interval (TCP).
    pub retransmits: Option<u64>,
    /// Transactions (`--rr`) or datagrams received (UDP) in the interval.
    pub messages: Option<u64>,
    /// Sender's `TCP_INFO` at the interval end (per stream only).
    pub sender_tcp: Option<TcpInfoSample>,
    /// Receiver's `TCP_INFO` at the interval end (per stream only).
    pub receiver_tcp: Option<TcpInfoSample>,
    /// UDP: datagrams lost in the interval (by sequence numbers).
    pub lost: Option<u64>,
    /// UDP: RFC 3550 jitter at the interval end, ns.
    pub jitter_ns: Option<f64>,
    /// Request/response: latency of the transactions completed in the interval (client's
    /// clock; all streams in the aggregate row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
}

/// The way the data of an interval row flows. A `--bidir` test has rows of both; request/
/// response and the sweep count their transactions on the responses, `down`.
///
/// The variants are declared in the order of their names, so rows sorted by direction keep
/// the order they had when the field was a string (`down` before `up`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum StreamDirection {
    /// Server to client.
    Down,
    /// Client to server.
    #[default]
    Up,
}

impl StreamDirection {
    /// The direction of a stream seen from the client: one it sends on goes up, one it
    /// reads comes down.
    pub fn of_client(sending: bool) -> Self {
        if sending {
            StreamDirection::Up
        } else {
            StreamDirection::Down
        }
    }
}

impl std::fmt::Display for StreamDirection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            StreamDirection::Down => "down",
            StreamDirection::Up => "up",
        })
    }
}

/// Totals of one direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionSummary {
    /// Receiver payload bit rate after warm-up.
    pub throughput_bps: f64,
    /// Receiver payload bit rate over the whole test, warm-up included.
    pub mean_bps: f64,
    /// Highest interval rate.
    pub peak_interval_bps: f64,
    /// Payload bytes written by the sender.
    pub sent_bytes: u64,
    /// Payload bytes read by the receiver.
    pub received_bytes: u64,
    /// Retransmitted segments (TCP).
    pub retransmits: u64,
    /// Mean smoothed RTT the sender saw, µs (TCP).
    pub rtt_mean_us: Option<f64>,
    /// Lowest RTT the sender saw (`tcpi_min_rtt`), µs: the path's base RTT without queueing.
    #[serde(default)]
    pub rtt_min_us: Option<f64>,
    /// Send buffer granted on the sender (kernel's figure, doubled).
    pub sender_sndbuf_bytes: u64,
    /// Receive buffer granted on the receiver (kernel's figure, doubled).
    pub receiver_rcvbuf_bytes: u64,
    /// Mean receive window the receiver advertised, as the sender saw it (`TCP_INFO`
    /// `snd_wnd`, kernel 5.4+).
    pub peer_window_bytes: Option<u64>,
    /// Share of busy time the sender was limited by the receive window, % (kernel 4.9+).
    pub rwnd_limited_pct: Option<f64>,
    /// Share of busy time the sender was limited by its send buffer, %.
    pub sndbuf_limited_pct: Option<f64>,
    /// With several TCP streams (`-P`): each stream's own window figures. A window limits one
    /// connection, so `window_limited` judges each stream's rate against its own
    /// window / RTT. Empty with one stream (the direction's figures are that stream's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamWindow>,
}

/// The window figures of one TCP stream of a direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamWindow {
    /// Stream index.
    pub stream: u32,
    /// Receiver payload bit rate of this stream after warm-up.
    pub throughput_bps: f64,
    /// Mean smoothed RTT the sender of this stream saw, µs.
    pub rtt_mean_us: Option<f64>,
    /// Lowest RTT the sender of this stream saw (`tcpi_min_rtt`), µs.
    pub rtt_min_us: Option<f64>,
    /// Mean receive window advertised to this stream's sender (`snd_wnd`).
    pub peer_window_bytes: Option<u64>,
    /// Share of this stream's busy time limited by the receive window, %.
    pub rwnd_limited_pct: Option<f64>,
}

/// The `summary` of a `net` report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetSummary {
    /// The headline: receiver payload bit rate after warm-up (both directions summed).
    pub throughput_bps: f64,
    /// Receiver payload bit rate over the whole test, warm-up included.
    pub mean_bps: f64,
    /// Highest aggregate interval rate.
    pub peak_interval_bps: f64,
    /// Payload bytes written by the senders.
    pub sent_bytes: u64,
    /// Payload bytes read by the receivers.
    pub received_bytes: u64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Client to server, when that direction carried data.
    pub up: Option<DirectionSummary>,
    /// Server to client, when that direction carried data.
    pub down: Option<DirectionSummary>,
    /// Busiest core of the client, mean busy % over the test.
    pub client_busiest_core_pct: f64,
    /// Busiest core of the server, mean busy % over the test.
    pub server_busiest_core_pct: f64,
    /// Both ends ran on one host (same kernel boot id, or `--loopback`): their cores are the
    /// same cores.
    #[serde(default)]
    pub one_host: bool,
    /// The client held its CPUs out of deep idle (`--awake`).
    #[serde(default)]
    pub client_cpu_awake: bool,
    /// The server held its CPUs out of deep idle (`--awake`).
    #[serde(default)]
    pub server_cpu_awake: bool,
    /// Request/response: transactions per second after warm-up.
    pub transactions_per_s: Option<f64>,
    /// Request/response: transactions the client completed (sent, answered, timed) over the
    /// whole test, warm-up included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions: Option<u64>,
    /// Request/response: requests the server answered over the whole test. Equal to
    /// `transactions`: the client waits for every answer in flight before it closes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_transactions: Option<u64>,
    /// Request/response latency percentiles, ns.
    pub lat_p50_ns: Option<u64>,
    /// 90th percentile, ns.
    pub lat_p90_ns: Option<u64>,
    /// 99th percentile, ns.
    pub lat_p99_ns: Option<u64>,
    /// 99.9th percentile, ns.
    pub lat_p999_ns: Option<u64>,
    /// Mean latency, ns.
    pub lat_mean_ns: Option<f64>,
    /// Largest latency, ns.
    pub lat_max_ns: Option<u64>,
    /// Message-size sweep points.
    pub sweep: Vec<SweepPoint>,
    /// UDP totals, when UDP.
    pub udp: Option<UdpSummary>,
    /// Why the client ended the test (`time`, `bytes`, `streams`, `stalled`, `interrupted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StopReason>,
    /// Against an iperf3 server: the results it sent, as it sent them (per stream bytes,
    /// retransmissions, UDP loss and jitter; its process CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iperf3_server: Option<crate::iperf3::Results>,
}

/// UDP totals over all streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpSummary {
    /// Datagrams the senders sent.
    pub sent_datagrams: u64,
    /// Distinct datagrams received.
    pub received_datagrams: u64,
    /// Datagrams received per second after warm-up.
    pub received_datagrams_per_s: f64,
    /// Sent minus received (distinct).
    pub lost_datagrams: u64,
    /// Lost, % of sent.
    pub loss_pct: f64,
    /// Arrivals after a later datagram.
    pub out_of_order: u64,
    /// Datagrams received twice.
    pub duplicates: u64,
    /// Mean RFC 3550 jitter at the end of each stream, ns.
    pub jitter_ns: f64,
    /// Drops the receiving kernel counted on the sockets (`SO_RXQ_OVFL`; with receive
    /// offload one drop may be a batch of datagrams).
    pub kernel_drops: u64,
    /// Growth of the receiving host's `Udp RcvbufErrors` during the test (all sockets of its
    /// network namespace), when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_rcvbuf_errors: Option<u64>,
    /// Growth of the sending host's `Udp SndbufErrors` during the test: datagrams the sending
    /// host accepted but could not queue (all sockets of its network namespace), when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_sndbuf_errors: Option<u64>,
    /// Where the lost datagrams were lost, when any were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_at: Option<LossSite>,
}

/// Where lost UDP datagrams were lost, from the kernels' counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossSite {
    /// The receiving socket's buffer overflowed (`SO_RXQ_OVFL`, `RcvbufErrors`).
    ReceiverBuffer,
    /// The sending host dropped them before they left (`SndbufErrors`).
    Sender,
    /// Both hosts dropped some.
    BothHosts,
    /// Neither host's kernel dropped any: the network lost them.
    Network,
    /// The counters could not be read.
    Unknown,
}

impl LossSite {
    /// Places a loss from the receiving socket's drops and both hosts' counter growth.
    pub fn place(socket_drops: u64, rcvbuf: Option<u64>, sndbuf: Option<u64>) -> LossSite {
        let rx = socket_drops.max(rcvbuf.unwrap_or(0)) > 0;
        let tx = sndbuf.unwrap_or(0) > 0;
        match (rx, tx) {
            (true, true) => LossSite::BothHosts,
            (true, false) => LossSite::ReceiverBuffer,
            (false, true) => LossSite::Sender,
            (false, false) if rcvbuf.is_some() && sndbuf.is_some() => LossSite::Network,
            (false, false) => LossSite::Unknown,
        }
    }
}

/// The software at the other end of a `net` test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Peer {
    /// An `nsperf server`: both ends measure everything.
    #[default]
    Nsperf,
    /// An iperf3 server: it shares only its totals per stream and its CPU.
    Iperf3,
}

/// The `net` report.
pub type NetReport = Report<NetSpec, NetInterval, NetSummary>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_direction_json_is_the_old_string_and_unknown_is_refused() {
        for (d, text) in [(StreamDirection::Up, "up"), (StreamDirection::Down, "down")] {
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{text}\""));
            assert_eq!(d.to_string(), text);
            let back: StreamDirection = serde_json::from_str(&format!("\"{text}\"")).unwrap();
            assert_eq!(back, d);
        }
        let row = NetInterval {
            stream: Some(1),
            direction: StreamDirection::Down,
            ..NetInterval::default()
        };
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["direction"], "down");
        let mut bad = json.clone();
        bad["direction"] = "both".into();
        let e = serde_json::from_value::<NetInterval>(bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `both`"), "{e}");
    }

    #[test]
    fn stream_direction_of_the_client_and_padded_as_the_rows_were() {
        assert_eq!(StreamDirection::of_client(true), StreamDirection::Up);
        assert_eq!(StreamDirection::of_client(false), StreamDirection::Down);
        // The live rows pad the name to their column, as they padded "up" and "down".
        assert_eq!(format!("[{:<6}]", StreamDirection::Up), "[up    ]");
        assert_eq!(format!("[{:<6}]", StreamDirection::Down), "[down  ]");
    }

    #[test]
    fn stream_direction_sorts_as_its_names_did() {
        let rows = [
            (1, StreamDirection::Up),
            (0, StreamDirection::Up),
            (1, StreamDirection::Down),
            (0, StreamDirection::Down),
        ];
        let mut typed = rows.to_vec();
        typed.sort();
        let mut named: Vec<(u32, String)> = rows.iter().map(|(i, d)| (*i, d.to_string())).collect();
        named.sort();
        let typed: Vec<(u32, String)> = typed.iter().map(|(i, d)| (*i, d.to_string())).collect();
        assert_eq!(typed, named);
    }
}
