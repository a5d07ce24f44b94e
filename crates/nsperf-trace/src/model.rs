//! The result of `nsperf trace`: what `--json` prints inside the report envelope's `summary`
//! and `intervals`. Every field is documented in `docs/schema.md` (section `trace`).

use serde::Serialize;

pub use crate::reader::ReadStats;
pub use crate::tcp::rtt::RttSummary;

/// Parameters of one analysis.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceSpec {
    /// The capture file (`-` for standard input).
    pub file: String,
    /// The filter given with `--filter`, if any.
    pub filter: Option<String>,
    /// Width of the throughput series bins in seconds (0: no series).
    pub bin_s: f64,
    /// How many connections get a detailed section in the human output.
    pub top: usize,
}

/// Totals of the whole capture.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceSummary {
    /// What the reader saw, damage included.
    pub capture: ReadStats,
    /// Time of the first packet, ns since the Unix epoch (0 when none).
    pub first_packet_unix_ns: i64,
    /// Time between the first and last packet, ns.
    pub capture_duration_ns: i64,
    /// Packets read.
    pub packets: u64,
    /// TCP segments analysed.
    pub tcp_packets: u64,
    /// UDP datagrams counted.
    pub udp_packets: u64,
    /// IP packets of other protocols (and non-first fragments).
    pub other_ip_packets: u64,
    /// Frames that are not IP.
    pub non_ip_packets: u64,
    /// Frames whose headers were cut by the snapshot length or malformed.
    pub unusable_packets: u64,
    /// Packets dropped by `--filter`.
    pub filtered_packets: u64,
    /// TCP connections, in order of their first packet.
    pub connections: Vec<TcpConnection>,
    /// UDP flows, in order of their first packet.
    pub udp_flows: Vec<UdpFlow>,
}

/// One TCP connection. Side `a` sent the first packet seen (the client when the SYN was
/// captured).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TcpConnection {
    /// 1-based number, in order of the first packet.
    pub id: u32,
    /// `address:port` of side a (IPv6 in brackets).
    pub a: String,
    /// `address:port` of side b.
    pub b: String,
    /// First packet, ns since the Unix epoch.
    pub first_unix_ns: i64,
    /// Last packet, ns since the Unix epoch.
    pub last_unix_ns: i64,
    /// Last minus first, seconds.
    pub duration_s: f64,
    /// Both SYNs were captured.
    pub handshake_seen: bool,
    /// Both FINs were captured.
    pub closed: bool,
    /// A RST was captured.
    pub reset: bool,
    /// Window scaling is known (both SYNs captured); when false every window figure is the
    /// raw field and the real window may be up to 2^14 times larger.
    pub window_scale_known: bool,
    /// Figures for data sent by a.
    pub a_to_b: DirectionStats,
    /// Figures for data sent by b.
    pub b_to_a: DirectionStats,
    /// What limited the direction that carried most data.
    pub diagnosis: Diagnosis,
}

/// Figures for one direction of a TCP connection (what one side sent).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DirectionStats {
    /// Segments sent.
    pub packets: u64,
    /// Bytes on the wire (frame lengths as captured on the link, headers included).
    pub wire_bytes: u64,
    /// Segments carrying payload.
    pub data_packets: u64,
    /// Payload bytes, retransmissions included.
    pub data_bytes: u64,
    /// Payload bytes sent for the first time (goodput bytes).
    pub unique_bytes: u64,
    /// Segments that repeated sequence space already sent (SYN/FIN included).
    pub retransmitted_packets: u64,
    /// Bytes of those, counted from the first repeated byte to the segment's end (tcptrace).
    pub retransmitted_bytes: u64,
    /// Retransmissions after three or more duplicate ACKs.
    pub fast_retransmissions: u64,
    /// Retransmissions after a silence of at least one RTO estimate (no dup ACKs).
    pub timeout_retransmissions: u64,
    /// Retransmissions of data the receiver had already acknowledged.
    pub spurious_retransmissions: u64,
    /// Segments that arrived before data already seen.
    pub out_of_order_packets: u64,
    /// ACKs without data.
    pub pure_acks: u64,
    /// Duplicate ACKs sent (Wireshark's definition).
    pub duplicate_acks: u64,
    /// ACKs carrying SACK blocks.
    pub sack_packets: u64,
    /// ACKs carrying a D-SACK block (RFC 2883).
    pub dsack_packets: u64,
    /// Most SACK blocks in one ACK.
    pub max_sack_blocks: u8,
    /// Window advertisements of zero.
    pub zero_window_adverts: u64,
    /// One-byte probes sent into the peer's zero window.
    pub zero_window_probes: u64,
    /// Data segments that filled the peer's advertised window.
    pub window_full_events: u64,
    /// SYN segments sent.
    pub syn: u64,
    /// FIN segments sent.
    pub fin: u64,
    /// RST segments sent.
    pub rst: u64,
    /// MSS option of the SYN.
    pub mss: Option<u16>,
    /// Window scale option of the SYN.
    pub window_scale_option: Option<u8>,
    /// Shift applied to this side's windows (null when unknown).
    pub window_scale: Option<u8>,
    /// SACK permitted in the SYN.
    pub sack_permitted: bool,
    /// Timestamps option in the SYN.
    pub timestamps: bool,
    /// Smallest non-zero window advertised, bytes (scaled when the scale is known, else raw;
    /// SYN windows count only when window scaling is not in use, as in tcptrace).
    pub window_min_bytes: u64,
    /// Largest window advertised, bytes (scaled when the scale is known, else raw).
    pub window_max_bytes: u64,
    /// Most bytes sent and not yet acknowledged.
    pub in_flight_max_bytes: u64,
    /// RTT of this side's data: from a segment to the ACK that covers it (Karn: not for
    /// retransmitted segments).
    pub rtt: RttSummary,
    /// RTT of this side from TCP timestamp echoes (RFC 7323): from the first segment carrying
    /// a TSval to the first peer segment echoing it. Empty without the timestamps option.
    pub rtt_timestamps: RttSummary,
    /// Unique payload bits per second between this side's first and last data segment.
    pub goodput_bps: f64,
    /// Wire bits per second over the connection's duration.
    pub wire_bps: f64,
}

/// Why a connection went no faster, with the figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Diagnosis {
    /// `a_to_b` or `b_to_a`: the direction diagnosed (the one with most unique bytes).
    pub direction: String,
    /// `receiver_window`, `congestion`, `loss`, `application`, `sender`, `window_unknown` or
    /// `none`.
    pub limit: String,
    /// Share of the sending time the receiver window was full, %.
    pub receiver_window_pct: f64,
    /// Share of the time spent recovering from loss, %.
    pub loss_pct: f64,
    /// Share of the time with room in the receiver window but not sent: congestion window, %.
    pub congestion_pct: f64,
    /// Share of the time the sender had nothing outstanding and sent nothing: application, %.
    pub application_pct: f64,
    /// Share of the time everything was acknowledged yet the sender sent back-to-back (its
    /// link, shaper, CPU or application set the pace), %.
    pub sender_pct: f64,
    /// Share of the time the window could have been full if it was scaled (scale unknown), %.
    pub window_unknown_pct: f64,
    /// Measured goodput of the direction, bit/s.
    pub goodput_bps: f64,
    /// Ceiling largest receiver window / median path RTT (the two directions' data->ACK
    /// medians added, so it holds wherever the capture was taken), bit/s (a bound, not a
    /// measurement).
    pub window_ceiling_bps: Option<f64>,
    /// Ceiling of Mathis et al. 1997: MSS/RTT × 1.22/√p with the median path RTT and p the
    /// retransmitted share of data segments, bit/s (a bound, not a measurement).
    pub mathis_ceiling_bps: Option<f64>,
    /// Retransmitted / data segments.
    pub loss_rate: f64,
    /// The sentence shown to the user.
    pub message: String,
}

/// One UDP flow (both directions).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UdpFlow {
    /// 1-based number.
    pub id: u32,
    /// `address:port` of the side that sent first.
    pub a: String,
    /// `address:port` of the other side.
    pub b: String,
    /// Datagrams a → b.
    pub a_to_b_packets: u64,
    /// Wire bytes a → b.
    pub a_to_b_bytes: u64,
    /// Datagrams b → a.
    pub b_to_a_packets: u64,
    /// Wire bytes b → a.
    pub b_to_a_bytes: u64,
    /// First packet, ns since the Unix epoch.
    pub first_unix_ns: i64,
    /// Last minus first, seconds.
    pub duration_s: f64,
    /// Wire bits per second over the duration (both directions).
    pub rate_bps: f64,
}

/// One bin of the throughput series (`--bin`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceInterval {
    /// Bin start, seconds since the first packet of the capture.
    pub start_s: f64,
    /// Bin length, seconds.
    pub length_s: f64,
    /// Connection id; `null` for the aggregate of all connections.
    pub stream: Option<u32>,
    /// Wire bits per second (both directions).
    pub throughput_bps: f64,
    /// Unique payload bits per second (both directions).
    pub goodput_bps: f64,
    /// Retransmitted segments in the bin.
    pub retransmissions: u64,
}
