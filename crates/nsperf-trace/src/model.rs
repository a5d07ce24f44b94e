//! The result of `nsperf trace`: what `--json` prints inside the report envelope's `summary`
//! and `intervals`. Every field is documented in `docs/schema.md` (section `trace`).

use serde::{Deserialize, Serialize};

pub use crate::kinds::{Direction, Limit, Vantage};
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
    /// The interface captured live (`-i`), if any (`file` is then `-i IFACE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// The idle timeout (`--idle-timeout`), seconds; 0: none.
    #[serde(default)]
    pub idle_timeout_s: f64,
}

/// Totals of the whole capture. `C` holds the connections: a `Vec` in memory, or a
/// [`crate::ConnectionSpool`] on disk when the capture may hold more than memory should.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceSummary<C = Vec<TcpConnection>> {
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
    /// TCP frames captured twice (same IP ID, sequence, length, flags, window and timestamp,
    /// up to 200 ms apart):
    /// counted here and in each direction's `duplicated_frames`, and left out of the analysis.
    pub duplicated_frames: u64,
    /// Number of TCP connections.
    pub connection_count: u64,
    /// TCP connections summarised and released because no packet of theirs came for the
    /// idle timeout (capture time; `--idle-timeout`, default 5 min): counted in
    /// `connection_count`, each marked `aged_out`. A later packet of the same addresses and
    /// ports starts a new connection.
    pub connections_aged_out: u64,
    /// TCP connections, in order of their first packet.
    pub connections: C,
    /// UDP flows, in order of their first packet.
    pub udp_flows: Vec<UdpFlow>,
    /// The throughput series' bins, when one was asked for (`--bin`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<SeriesBins>,
}

/// The width of the throughput series' bins: the one asked, and the one used (wider, by
/// doubling, when the asked width would need more bins than the series may hold).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesBins {
    /// Width asked (`--bin`), seconds.
    pub asked_s: f64,
    /// Width of the bins in `intervals`, seconds.
    pub used_s: f64,
}

/// One TCP connection. Side `a` sent the first packet seen (the client when the SYN was
/// captured).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Summarised and released after no packet for the idle timeout (absent when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub aged_out: bool,
    /// Window scaling is known (both SYNs captured); when false every window figure is the
    /// raw field and the real window may be up to 2^14 times larger.
    pub window_scale_known: bool,
    /// Figures for data sent by a.
    pub a_to_b: DirectionStats,
    /// Figures for data sent by b.
    pub b_to_a: DirectionStats,
    /// What limited the direction that carried most data.
    pub diagnosis: Diagnosis,
    /// The storage protocol decoded from the connection's bytes (NFS over ONC RPC, SMB2/3),
    /// when it carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolStats>,
}

/// The storage protocol a connection carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppProtocol {
    /// ONC RPC: NFS, MOUNT, the portmapper.
    #[default]
    OncRpc,
    /// SMB2/3 over TCP (NetBIOS session framing, port 445).
    Smb2,
}

/// What the protocol layer read from one connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProtocolStats {
    /// The protocol.
    pub protocol: AppProtocol,
    /// NFS versions seen in calls.
    pub nfs_versions: Vec<u32>,
    /// The side that sent the calls (`a` or `b`): the client.
    pub client: String,
    /// Per operation, ordered by program, version, procedure.
    pub ops: Vec<OpSummary>,
    /// Most requests in flight at once (calls sent, reply not yet seen).
    pub in_flight_max: u32,
    /// Requests in flight, time-weighted mean from the first call to the last reply.
    pub in_flight_mean: f64,
    /// Requests in flight, time-weighted mean over the time at least one was in flight.
    pub in_flight_busy_mean: f64,
    /// Time with at least one request in flight, seconds.
    pub busy_s: f64,
    /// From the first call to the last reply, seconds.
    pub span_s: f64,
    /// Requests in flight over time, at most 500 bins (absent before this field existed,
    /// and when no call was seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_series: Option<InFlightSeries>,
    /// Calls never answered in the capture (still waiting at its end, or given up).
    pub unanswered_calls: u64,
    /// Replies whose call was not captured.
    pub unmatched_replies: u64,
    /// Records neither a well-formed call nor a reply.
    pub malformed_records: u64,
    /// Payload bytes the capture did not hold (lost before it, or cut by the snapshot
    /// length): the decoder skipped them.
    pub missing_bytes: u64,
    /// Times the decoder lost its place at a gap and found the next record again.
    pub resyncs: u64,
    /// NFSv4: the operations inside the COMPOUND calls, by operation number, as tshark
    /// counts them (each operation of each call, retransmissions included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compound_ops: Vec<CompoundOp>,
    /// NFSv4: COMPOUND calls whose operations were not all counted (after a WRITE's data
    /// with more than the record's last 256 bytes after it, or after an operation not
    /// walked).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compound_calls_cut: u64,
    /// What set the protocol's pace, with the figures (absent before this field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<ProtocolDiagnosis>,
    /// SMB2/3: what could and could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smb: Option<SmbStats>,
}

/// Requests in flight over time on one connection: bins of one width from its first call
/// (docs/trace.md#the-storage-protocol). The width is 1 µs doubled until the exchange fits
/// in 500 bins, so a long exchange is seen whole at a coarser grain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InFlightSeries {
    /// Capture time of the first call, where bin 0 starts.
    pub first_unix_ns: i64,
    /// Width of each bin, seconds.
    pub bin_s: f64,
    /// Per bin: requests in flight, time-weighted mean over the bin (the last bin over its
    /// part up to the last reply).
    pub mean: Vec<f64>,
    /// Per bin: most requests in flight at once within it.
    pub max: Vec<u32>,
}

/// What could and could not be read of an SMB2/3 connection: SMB2 headers (signed or not)
/// are read in full; messages behind an SMB3 transform header (encrypted) only by their
/// sizes and times.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SmbStats {
    /// The dialect the server chose (`3.1.1`), when its NEGOTIATE response was captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
    /// SMB2 headers read (each command of a compound chain counts).
    pub headers: u64,
    /// Of those, signed (the signature is not checked: the headers and bodies are readable).
    pub signed: u64,
    /// Messages behind an SMB3 transform header (encrypted): their commands, statuses and
    /// times of service cannot be read; they are in no per-command figure.
    pub encrypted_messages: u64,
    /// Bytes of those messages (transform header included, NetBIOS header excluded).
    pub encrypted_bytes: u64,
    /// Compressed messages (SMB 3.1.1 compression transform), not read.
    pub compressed_messages: u64,
    /// SMB1 messages (a client's first multi-protocol NEGOTIATE), not read.
    pub smb1_messages: u64,
    /// Request messages holding a compound chain (more than one command).
    pub compound_requests: u64,
    /// Commands of compound chains not read (beyond the 4 KiB kept of a message).
    pub chain_commands_cut: u64,
    /// Interim responses (STATUS_PENDING, async): the final response ends the request.
    pub interim_responses: u64,
    /// Credits the client requested, summed over its requests.
    pub credits_requested: u64,
    /// Credits the server granted, summed over its responses.
    pub credits_granted: u64,
}

/// What set the pace of a request/response protocol on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtocolLimit {
    /// Protocol-bound: the requests the client kept in flight, each waiting out the path
    /// RTT (requests in flight × size / RTT is the ceiling).
    RequestsInFlight,
    /// The server's response time beyond the path RTT.
    Server,
    /// The client's think time between a reply and its next request.
    Client,
    /// Moving the data: the network (the TCP verdict says what in it).
    Transfer,
    /// Too few requests answered to judge.
    #[default]
    TooShort,
}

impl ProtocolLimit {
    /// Every limit.
    pub const ALL: [ProtocolLimit; 5] = [
        ProtocolLimit::RequestsInFlight,
        ProtocolLimit::Server,
        ProtocolLimit::Client,
        ProtocolLimit::Transfer,
        ProtocolLimit::TooShort,
    ];
}

/// The stable name (serde's, as in JSON); pads to a width.
impl std::fmt::Display for ProtocolLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            ProtocolLimit::RequestsInFlight => "requests_in_flight",
            ProtocolLimit::Server => "server",
            ProtocolLimit::Client => "client",
            ProtocolLimit::Transfer => "transfer",
            ProtocolLimit::TooShort => "too_short",
        })
    }
}

impl std::str::FromStr for ProtocolLimit {
    type Err = String;
    fn from_str(s: &str) -> Result<ProtocolLimit, String> {
        ProtocolLimit::ALL
            .into_iter()
            .find(|l| l.to_string() == s)
            .ok_or_else(|| format!("unknown protocol limit '{s}'"))
    }
}

/// The requests a protocol diagnosis is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestScope {
    /// The data operations (READ, WRITE).
    #[default]
    Data,
    /// Every request (a connection with too few data operations).
    All,
}

/// What set a protocol's pace, request by request, from the client's side
/// (docs/trace.md#what-set-the-protocols-pace).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProtocolDiagnosis {
    /// What set the pace.
    pub limit: ProtocolLimit,
    /// The requests judged.
    pub scope: RequestScope,
    /// The operation most of them were (`READ`, `WRITE`, …).
    pub op: String,
    /// Requests answered in the scope.
    pub requests: u64,
    /// From the first call's first byte to the last reply's last byte, seconds.
    pub span_s: f64,
    /// Data moved by them (READ returned, WRITE sent), bytes.
    pub data_bytes: u64,
    /// Mean data per request, bytes (0 for the scope `all`).
    pub size_mean_bytes: f64,
    /// Requests the client had in flight on average, from its side (the sum of the
    /// requests' slot times over the span: Little's law).
    pub in_flight: f64,
    /// `in_flight` is a lower bound: the rate measured needs at least that many (each
    /// request costs a round trip and its own transfer), more than the capture point saw
    /// (requests queued in the client's socket before they reached it are not seen).
    pub in_flight_at_least: bool,
    /// The path RTT used, ns (the TCP diagnosis's smallest path RTT).
    pub path_rtt_ns: u64,
    /// Per request, mean: its bytes moving or queued (behind other records, or in the
    /// network's queues beyond the capture point), ns.
    pub transfer_ns: f64,
    /// Per request, mean: its own bytes passing the capture point (the call's first to last
    /// byte, and the reply's), ns.
    pub moving_ns: f64,
    /// Per request, mean: the path RTT it waited out, ns.
    pub rtt_ns: f64,
    /// Per request, mean: the server's time beyond the path RTT, ns.
    pub server_ns: f64,
    /// Per request that followed a reply, mean: the client's think time before it, ns.
    pub client_ns: f64,
    /// Shares of the requests' slot time, %: transfer, RTT, server, client.
    pub transfer_pct: f64,
    /// Share waiting out the path RTT, %.
    pub rtt_pct: f64,
    /// Share at the server, %.
    pub server_pct: f64,
    /// Share in the client's think time, %.
    pub client_pct: f64,
    /// Requests answered per second over the span.
    pub measured_per_s: f64,
    /// Ceiling of the requests in flight: in flight / (path RTT + `moving_ns`), requests
    /// per second (a bound, not a measurement: each request costs at least a round trip and
    /// the time its own bytes take to cross).
    pub ceiling_per_s: Option<f64>,
    /// Data moved per second over the span, bit/s.
    pub measured_bps: f64,
    /// Ceiling of the requests in flight: in flight × size / (path RTT + `moving_ns`),
    /// bit/s (scope `data` only).
    pub ceiling_bps: Option<f64>,
    /// The TCP verdict of the connection it was judged beside.
    pub tcp_limit: Limit,
    /// The sentence shown to the user.
    pub message: String,
}

/// One NFSv4 operation counted inside COMPOUND calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompoundOp {
    /// Operation number.
    pub opcode: u32,
    /// Its name (`PUTFH`, `READ`, …).
    pub op: String,
    /// Times it appeared in calls.
    pub calls: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One operation (RPC procedure) of a connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpSummary {
    /// RPC program (`nfs`, `mount`, `portmap`, …).
    pub program: String,
    /// Program version.
    pub version: u32,
    /// Procedure number.
    pub procedure: u32,
    /// Procedure name (`READ`, `WRITE`, `COMPOUND`, …).
    pub op: String,
    /// Calls seen.
    pub calls: u64,
    /// Replies matched to their call by XID.
    pub replies: u64,
    /// Bytes of the call records (RPC header, arguments, data).
    pub call_bytes: u64,
    /// Bytes of the reply records.
    pub reply_bytes: u64,
    /// Data moved: READ bytes returned, WRITE bytes sent.
    pub data_bytes: u64,
    /// Smallest data size of one operation, bytes.
    pub size_min: Option<u32>,
    /// Largest data size of one operation, bytes.
    pub size_max: Option<u32>,
    /// Service response time at the capture point: last byte of the call to last byte of
    /// the reply (as tshark's `-z rpc,srt` times it).
    pub srt: SrtSummary,
    /// Replies with an error status, by status.
    pub errors: Vec<OpError>,
    /// Replies refused at the RPC level (denied, garbage arguments, …).
    pub rpc_errors: u64,
}

/// Service response times of one operation (log-linear histogram past 32 samples: median
/// and p99 within 4.4 %; min, max and mean exact).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SrtSummary {
    /// Replies timed.
    pub samples: u64,
    /// Smallest, ns.
    pub min_ns: u64,
    /// Median, ns.
    pub median_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
    /// Mean, ns.
    pub mean_ns: u64,
}

/// Replies of one operation with one error status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpError {
    /// The protocol's status number.
    pub status: u32,
    /// Its name (`NFS3ERR_NOENT`, …).
    pub name: String,
    /// Replies with it.
    pub count: u64,
}

/// Figures for one direction of a TCP connection (what one side sent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// Segments sent (frames captured twice included, as tshark counts them).
    pub packets: u64,
    /// Bytes on the wire (frame lengths as captured on the link, headers included).
    pub wire_bytes: u64,
    /// Segments carrying payload.
    pub data_packets: u64,
    /// Payload bytes, retransmissions included.
    pub data_bytes: u64,
    /// Payload bytes sent for the first time (goodput bytes).
    pub unique_bytes: u64,
    /// Frames captured twice (a copy of a frame seen before: same IP ID, sequence,
    /// length and flags, up to 200 ms apart); counted in `packets` and `wire_bytes` only.
    pub duplicated_frames: u64,
    /// Segments that repeated sequence space already sent (SYN/FIN included; zero-window
    /// probes and duplicated frames excluded).
    pub retransmitted_packets: u64,
    /// Bytes of those, counted from the first repeated byte to the segment's end (tcptrace).
    pub retransmitted_bytes: u64,
    /// Retransmissions after three or more duplicate ACKs (the count restarts when new data
    /// is acknowledged and after a timeout).
    pub fast_retransmissions: u64,
    /// Retransmissions after a silence of at least one RTO estimate without fresh duplicate
    /// ACKs.
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
    /// Segments sent while the peer advertised a zero window (persist probes, as tcptrace
    /// counts them); never retransmissions.
    pub zero_window_probes: u64,
    /// Payload bytes of those probes.
    pub zero_window_probe_bytes: u64,
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
    /// a TSval to the first peer segment echoing it. Empty without the timestamps option;
    /// samples shorter than one tick of this side's timestamp clock are left out.
    pub rtt_timestamps: RttSummary,
    /// Tick of this side's timestamp clock, ns, measured from its TSvals against capture
    /// time (Linux: 1 ms; old BSD stacks: 500 ms); null without timestamps or too few.
    pub timestamp_tick_ns: Option<u64>,
    /// Unique payload bits per second between this side's first and last data segment.
    pub goodput_bps: f64,
    /// Wire bits per second over the connection's duration.
    pub wire_bps: f64,
}

/// Why a connection went no faster, with the figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The direction diagnosed (the one with most unique bytes).
    pub direction: Direction,
    /// What limited it: the largest share of the sending time, or why nothing is said.
    pub limit: Limit,
    /// Where the capture was taken, judged from the two halves of the path RTT.
    pub vantage: Vantage,
    /// Share of the sending time the receiver window was full or zero, %.
    pub receiver_window_pct: f64,
    /// Share of the time spent recovering from loss, %.
    pub loss_pct: f64,
    /// Share of the time with room in the receiver window, data outstanding, and the sender
    /// sending as ACKs arrived: the congestion window (the path), %.
    pub congestion_pct: f64,
    /// Share of the time the sender had room and did not send: the application (or a
    /// shaper or CPU on the sending host), %.
    pub application_pct: f64,
    /// Share of the time the window could have been full if it was scaled (scale unknown), %.
    pub window_unknown_pct: f64,
    /// Measured goodput of the direction, bit/s.
    pub goodput_bps: f64,
    /// Round-trip time of the whole path, from many samples (below).
    pub path_rtt: PathRtt,
    /// Ceiling largest receiver window / smallest path RTT, bit/s: a bound, not a
    /// measurement. Null when the window scale is unknown (see `window_ceiling_at_least_bps`).
    pub window_ceiling_bps: Option<f64>,
    /// Window scale unknown: the smallest shift that the bytes seen in flight prove.
    pub window_scale_at_least: Option<u8>,
    /// Window scale unknown: largest raw window shifted by `window_scale_at_least`, over the
    /// smallest path RTT. The real ceiling is at least this, bit/s.
    pub window_ceiling_at_least_bps: Option<f64>,
    /// Mathis et al. 1997 loss model: MSS/RTT × 1.22/√p with the smallest path RTT and p the
    /// lost share of data segments, bit/s. A model of a Reno sender, not a ceiling: CUBIC
    /// and BBR exceed it. Null without loss.
    pub mathis_model_bps: Option<f64>,
    /// Lost segments / data segments: retransmissions seen, plus holes filled later whose
    /// original never passed the capture point.
    pub loss_rate: f64,
    /// The sentence shown to the user.
    pub message: String,
}

/// The round-trip time of a path, from a capture point anywhere along it: the time from a
/// data segment to its ACK (the part beyond the capture point, `downstream`) plus the time
/// from an ACK to the data it lets the sender send (the part behind it, `upstream`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PathRtt {
    /// Smallest path RTT, ns (0 when unmeasured).
    pub min_ns: u64,
    /// Median path RTT, ns.
    pub median_ns: u64,
    /// Samples behind the downstream part.
    pub downstream_samples: u64,
    /// Smallest downstream part (capture point → receiver → capture point), ns.
    pub downstream_min_ns: u64,
    /// Samples behind the upstream part.
    pub upstream_samples: u64,
    /// Smallest upstream part (capture point → sender → capture point), ns.
    pub upstream_min_ns: u64,
    /// Where the upstream part came from.
    pub upstream_source: RttSource,
}

/// Where a part of the path RTT was measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RttSource {
    /// Not measured.
    #[default]
    None,
    /// Timestamp echoes of the receiver's ACKs in the sender's data (RFC 7323).
    Timestamps,
    /// Data the other way and its ACKs.
    ReverseData,
    /// From an ACK to the data it released at the edge of the receiver window.
    WindowEdge,
    /// The handshake alone (one sample).
    Handshake,
}

/// One UDP flow (both directions).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// What a live analysis saw between two calls of [`crate::Analyzer::interval`] (`nsperf
/// trace -i`, or a capture read from a pipe): the packets of the interval and the connections
/// most active in it, each with the verdict its figures so far give.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LiveInterval {
    /// Packets read in the interval (every kind).
    pub packets: u64,
    /// Wire bytes (frame lengths) of the TCP packets of the interval.
    pub wire_bytes: u64,
    /// Payload bytes sent for the first time (goodput) in the interval.
    pub unique_bytes: u64,
    /// Retransmitted TCP segments in the interval.
    pub retransmitted_packets: u64,
    /// Connections held in memory at the end of the interval.
    pub live_connections: u64,
    /// Connections that had a packet in the interval.
    pub active_connections: u64,
    /// Connections that started in the interval.
    pub new_connections: u64,
    /// Connections summarised and released in the interval: closed (FIN or RST, 2 s after).
    pub closed_connections: u64,
    /// Connections summarised and released in the interval after the idle timeout.
    pub aged_out_connections: u64,
    /// Capture time of the last packet read so far, ns since the Unix epoch (0: none yet).
    pub last_packet_unix_ns: i64,
    /// The connections with the most wire bytes in the interval, largest first.
    pub connections: Vec<LiveConnection>,
}

/// One connection in a [`LiveInterval`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LiveConnection {
    /// The connection's id (as in the final summary).
    pub id: u32,
    /// `address:port` of side a.
    pub a: String,
    /// `address:port` of side b.
    pub b: String,
    /// Packets of the interval, both directions.
    pub packets: u64,
    /// Wire bytes of the interval, both directions.
    pub wire_bytes: u64,
    /// Bytes sent for the first time in the interval, both directions.
    pub unique_bytes: u64,
    /// Retransmitted segments in the interval, both directions.
    pub retransmitted_packets: u64,
    /// The smallest path RTT measured so far, ns (0: not yet).
    pub path_rtt_ns: u64,
    /// The verdict of the connection's figures so far.
    pub limit: Limit,
    /// Its sentence.
    pub diagnosis: String,
    /// What set the storage protocol's pace so far, when one is decoded and judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_limit: Option<ProtocolLimit>,
    /// Its sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

#[cfg(test)]
mod protocol_limit_tests {
    use super::*;

    #[test]
    fn protocol_limit_names_match_display_and_from_str() {
        let names = [
            (ProtocolLimit::RequestsInFlight, "requests_in_flight"),
            (ProtocolLimit::Server, "server"),
            (ProtocolLimit::Client, "client"),
            (ProtocolLimit::Transfer, "transfer"),
            (ProtocolLimit::TooShort, "too_short"),
        ];
        assert_eq!(names.map(|(l, _)| l), ProtocolLimit::ALL);
        for (l, name) in names {
            assert_eq!(l.to_string(), name);
            assert_eq!(name.parse::<ProtocolLimit>(), Ok(l));
            assert_eq!(serde_json::to_string(&l).unwrap(), format!("\"{name}\""));
            assert_eq!(
                format!("{l:>20}|{l:<20}|"),
                format!("{name:>20}|{name:<20}|")
            );
        }
        assert_eq!(
            "disk".parse::<ProtocolLimit>().unwrap_err().to_string(),
            "unknown protocol limit 'disk'"
        );
    }
}
