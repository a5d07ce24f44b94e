//! The analysis driver: decodes each packet, finds its flow, and feeds the TCP state
//! machines. Packets and their times are inputs; nothing here reads a clock.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

use std::collections::VecDeque;

use crate::decode::{Decoded, TcpSegment, decode};
use crate::filter::Filter;
use crate::model::{
    LiveConnection, LiveInterval, SeriesBins, TcpConnection, TraceInterval, TraceSummary, UdpFlow,
};
use crate::proto::ProtoState;
use crate::proto::requests::{RequestConn, RequestLog, RequestStream};
use crate::reader::{RawPacket, ReadStats};
use crate::series::{Bins, Cell, Series};
use crate::store::ConnectionStore;
use crate::tcp::TcpConn;

/// A finished connection is kept this long (capture time) for late packets of it (a
/// retransmitted last ACK) before it is summarised and released.
const LINGER_NS: i64 = 2_000_000_000;

/// The idle timeout `nsperf trace` uses unless told otherwise: a connection without a packet
/// for 5 minutes of capture time is summarised and released (Zeek's TCP inactivity timeout;
/// Linux's NFS client also closes a transport idle for 5 minutes).
pub const DEFAULT_IDLE_NS: i64 = 300_000_000_000;
/// Idle connections are looked for at most this often (capture time).
const IDLE_SWEEP_NS: i64 = 1_000_000_000;

/// Parameters of an analysis.
#[derive(Debug, Clone, Default)]
pub struct TraceConfig {
    /// Keep only packets matching this filter.
    pub filter: Filter,
    /// Width of the throughput-series bins in ns; 0 for no series.
    pub bin_ns: i64,
    /// Connections with a series of their own: the largest ones (0: only the aggregate).
    pub series_connections: usize,
    /// A connection without a packet for this long (capture time, ns) is summarised and
    /// released, marked `aged_out`; a later packet of its addresses starts a new connection.
    /// 0: never (the library's default; the CLI's is [`DEFAULT_IDLE_NS`]).
    pub idle_ns: i64,
}

/// A flow key: the two endpoints, lower one first, so both directions find the same flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FlowKey {
    lo: (IpAddr, u16),
    hi: (IpAddr, u16),
}

impl FlowKey {
    /// The key and whether (src, dst) is in (lo, hi) order.
    fn new(src: (IpAddr, u16), dst: (IpAddr, u16)) -> (FlowKey, bool) {
        if src <= dst {
            (FlowKey { lo: src, hi: dst }, true)
        } else {
            (FlowKey { lo: dst, hi: src }, false)
        }
    }
}

/// FNV-1a: fast for the short keys of the flow table (no untrusted-key DoS concern that
/// matters for an offline file analyser bounded by the file's size).
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf29ce484222325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100000001b3);
        }
        self.0 = h;
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

struct Live {
    /// True when side a is the key's `lo`.
    a_is_lo: bool,
    conn: TcpConn,
    bins: Bins,
    wire_bytes: u64,
    /// The storage protocol the connection carries, decoded.
    proto: ProtoState,
    /// Its counters when the last live interval ended.
    mark: Counters,
}

/// Packets, wire bytes, unique bytes and retransmitted segments: what a live interval
/// counts, for the whole capture and per connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counters {
    packets: u64,
    wire_bytes: u64,
    unique_bytes: u64,
    rexmit: u64,
}

impl Counters {
    fn since(self, mark: Counters) -> Counters {
        Counters {
            packets: self.packets - mark.packets,
            wire_bytes: self.wire_bytes - mark.wire_bytes,
            unique_bytes: self.unique_bytes - mark.unique_bytes,
            rexmit: self.rexmit - mark.rexmit,
        }
    }
}

/// What the live view counts between two intervals.
#[derive(Debug, Clone, Copy, Default)]
struct IntervalCounts {
    packets: u64,
    tcp: Counters,
    new: u64,
    closed: u64,
    aged_out: u64,
}

/// Why a connection was released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// Closed, reset, replaced by a new SYN, or open at the end of the capture.
    Done,
    /// No packet for the idle timeout.
    Idle,
}

impl Live {
    fn counters(&self) -> Counters {
        let h = &self.conn.half;
        Counters {
            packets: h[0].s.packets + h[1].s.packets,
            wire_bytes: self.wire_bytes,
            unique_bytes: h[0].s.unique_bytes + h[1].s.unique_bytes,
            rexmit: h[0].s.retransmitted_packets + h[1].s.retransmitted_packets,
        }
    }

    /// The connection's figures so far, the protocol's verdict beside TCP's.
    fn summary(&self) -> TcpConnection {
        let mut c = self.conn.summary();
        c.protocol = self.proto.summary(&c.diagnosis);
        if let Some(d) = c.protocol.as_ref().and_then(|p| p.diagnosis.as_ref()) {
            crate::proto::verdict::amend_tcp(&mut c.diagnosis, d);
        }
        c
    }
}

struct UdpState {
    flow: UdpFlow,
    last_ns: i64,
}

/// The analysis of one capture, fed packet by packet. Finished connections are summarised
/// into the store `S` and released, so memory follows the live connections.
pub struct Analyzer<S: ConnectionStore = Vec<TcpConnection>> {
    cfg: TraceConfig,
    live: FastMap<FlowKey, Live>,
    /// Finished connections awaiting release: (key, id, capture time it finished).
    finished: VecDeque<(FlowKey, u32, i64)>,
    next_id: u32,
    store: S,
    udp_index: FastMap<FlowKey, usize>,
    udp: Vec<(bool, UdpState)>,
    summary: TraceSummary<()>,
    first_ns: Option<i64>,
    last_ns: i64,
    /// The aggregate series and the bins' width.
    series: Series,
    /// Series of the largest released connections: (wire bytes, id, bins).
    kept_series: Vec<(u64, u32, Bins)>,
    /// Capture time of the next look for idle connections.
    next_idle_sweep_ns: i64,
    /// Keys of idle connections found by a sweep (kept to reuse its allocation).
    idle_keys: Vec<FlowKey>,
    /// What happened since the last live interval.
    interval: IntervalCounts,
    /// The requests matched, when asked for ([`Analyzer::log_requests`]).
    requests: RequestLog,
    /// The connections released that carried a storage protocol, when requests are logged.
    request_conns: Vec<RequestConn>,
}

fn endpoint(addr: IpAddr, port: u16) -> String {
    match addr {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}

impl<S: ConnectionStore> Analyzer<S> {
    /// An analyzer with this configuration, storing finished connections in `store`.
    pub fn new(cfg: TraceConfig, store: S) -> Analyzer<S> {
        let cfg_bin_ns = cfg.bin_ns;
        Analyzer {
            cfg,
            live: FastMap::default(),
            finished: VecDeque::new(),
            next_id: 0,
            store,
            udp_index: FastMap::default(),
            udp: Vec::new(),
            summary: TraceSummary::default(),
            first_ns: None,
            last_ns: 0,
            series: Series::new(cfg_bin_ns),
            kept_series: Vec::new(),
            next_idle_sweep_ns: i64::MIN,
            idle_keys: Vec::new(),
            interval: IntervalCounts::default(),
            requests: RequestLog::default(),
            request_conns: Vec::new(),
        }
    }

    /// Keeps each storage request matched to its reply (at most `cap`; past it they are
    /// counted as dropped), for [`Analyzer::finish_with_requests`]. Off unless asked: the
    /// analysis then allocates nothing for it.
    pub fn log_requests(&mut self, cap: usize) {
        self.requests = RequestLog::new(cap);
    }

    /// Number of TCP connections so far.
    pub fn connections(&self) -> usize {
        self.next_id as usize
    }

    /// Connections held in memory now (live, or finished within the last two seconds).
    pub fn live_connections(&self) -> usize {
        self.live.len()
    }

    /// Feeds one captured packet.
    pub fn packet(&mut self, p: &RawPacket<'_>) {
        self.summary.packets += 1;
        self.interval.packets += 1;
        let first = *self.first_ns.get_or_insert(p.ts_ns);
        self.last_ns = self.last_ns.max(p.ts_ns);
        let bin = self.series_bin(p.ts_ns - first);
        let filter = &self.cfg.filter;
        match decode(p.link, p.data) {
            Decoded::Tcp(seg) => {
                if !filter.matches(seg.src, seg.src_port, seg.dst, seg.dst_port) {
                    self.summary.filtered_packets += 1;
                    return;
                }
                self.summary.tcp_packets += 1;
                self.tcp(&seg, p, bin);
            }
            Decoded::Udp(d) => {
                if !filter.matches(d.src, d.src_port, d.dst, d.dst_port) {
                    self.summary.filtered_packets += 1;
                    return;
                }
                self.summary.udp_packets += 1;
                self.udp(&d, p);
            }
            Decoded::OtherIp if filter.is_empty() => self.summary.other_ip_packets += 1,
            Decoded::NotIp if filter.is_empty() => self.summary.non_ip_packets += 1,
            Decoded::OtherIp | Decoded::NotIp => self.summary.filtered_packets += 1,
            Decoded::Unusable => self.summary.unusable_packets += 1,
        }
        self.release_finished(p.ts_ns);
        self.release_idle(p.ts_ns);
    }

    fn tcp(&mut self, seg: &TcpSegment, p: &RawPacket<'_>, bin: Option<usize>) {
        let (key, fwd) = FlowKey::new((seg.src, seg.src_port), (seg.dst, seg.dst_port));
        let idle_ns = self.cfg.idle_ns;
        let idle = |l: &Live| idle_ns > 0 && p.ts_ns - l.conn.last_ns > idle_ns;
        match self.live.get(&key) {
            Some(l) if idle(l) => {
                if let Some(old) = self.live.remove(&key) {
                    self.release(old, Release::Idle);
                }
            }
            Some(l) if l.conn.is_reuse(seg) => {
                if let Some(old) = self.live.remove(&key) {
                    self.release(old, Release::Done);
                }
            }
            _ => {}
        }
        let next_id = &mut self.next_id;
        let new = &mut self.interval.new;
        let flow = self.live.entry(key).or_insert_with(|| {
            *next_id += 1;
            *new += 1;
            Live {
                a_is_lo: fwd,
                conn: TcpConn::new(
                    *next_id,
                    endpoint(seg.src, seg.src_port),
                    endpoint(seg.dst, seg.dst_port),
                    p.ts_ns,
                ),
                bins: Bins::default(),
                wire_bytes: 0,
                proto: ProtoState::default(),
                mark: Counters::default(),
            }
        });
        let dir = if fwd == flow.a_is_lo { 0 } else { 1 };
        let was_finished = flow.conn.is_finished();
        let sent = flow.conn.segment(dir, seg, p.ts_ns, p.orig_len);
        flow.wire_bytes += u64::from(p.orig_len);
        if sent.is_none() {
            self.summary.duplicated_frames += 1;
        } else {
            let rtt = flow.conn.round_trips();
            self.requests.conn = flow.conn.id;
            flow.proto.segment(
                dir,
                seg,
                seg.payload(p.data),
                (p.ts_ns, rtt),
                &mut self.requests,
            );
        }
        let (unique, rexmit) = sent.map_or((0, 0), |s| (s.unique, u64::from(s.rexmit)));
        let t = &mut self.interval.tcp;
        t.packets += 1;
        t.wire_bytes += u64::from(p.orig_len);
        t.unique_bytes += unique;
        t.rexmit += rexmit;
        if let Some(b) = bin {
            let add = |c: &mut Cell| {
                c.0 += u64::from(p.orig_len);
                c.1 += unique;
                c.2 += rexmit;
            };
            if self.cfg.series_connections > 0 {
                let (c, added) = flow.bins.cell(b);
                add(c);
                self.series.held_cells += added;
            }
            add(self.series.total.cell(b).0);
        }
        if !was_finished && flow.conn.is_finished() {
            self.finished.push_back((key, flow.conn.id, p.ts_ns));
        }
        if bin.is_some()
            && self
                .series
                .too_big(0, self.live.len() + self.kept_series.len())
        {
            self.widen_series();
        }
    }

    /// The series bin of a packet `since_first_ns` after the first one, the bins widened
    /// first when the series would pass its bounds.
    fn series_bin(&mut self, since_first_ns: i64) -> Option<usize> {
        loop {
            let bin = self.series.bin(since_first_ns)?;
            if !self
                .series
                .too_big(bin, self.live.len() + self.kept_series.len())
            {
                return Some(bin);
            }
            self.widen_series();
        }
    }

    /// Doubles the width of every bin: the aggregate's and each connection's.
    fn widen_series(&mut self) {
        self.series.widen();
        let mut held = 0;
        for l in self.live.values_mut() {
            l.bins.widen();
            held += l.bins.len();
        }
        for (_, _, b) in &mut self.kept_series {
            b.widen();
            held += b.len();
        }
        self.series.held_cells = held;
    }

    fn udp(&mut self, d: &crate::decode::UdpDatagram, p: &RawPacket<'_>) {
        let (key, fwd) = FlowKey::new((d.src, d.src_port), (d.dst, d.dst_port));
        let idx = *self.udp_index.entry(key).or_insert_with(|| {
            self.udp.push((
                fwd,
                UdpState {
                    flow: UdpFlow {
                        id: self.udp.len() as u32 + 1,
                        a: endpoint(d.src, d.src_port),
                        b: endpoint(d.dst, d.dst_port),
                        first_unix_ns: p.ts_ns,
                        ..UdpFlow::default()
                    },
                    last_ns: p.ts_ns,
                },
            ));
            self.udp.len() - 1
        });
        let (a_is_lo, u) = &mut self.udp[idx];
        u.last_ns = u.last_ns.max(p.ts_ns);
        if fwd == *a_is_lo {
            u.flow.a_to_b_packets += 1;
            u.flow.a_to_b_bytes += u64::from(p.orig_len);
        } else {
            u.flow.b_to_a_packets += 1;
            u.flow.b_to_a_bytes += u64::from(p.orig_len);
        }
    }

    /// Summarises and releases connections that finished more than [`LINGER_NS`] ago.
    fn release_finished(&mut self, now: i64) {
        while let Some(&(key, id, t)) = self.finished.front() {
            if now - t < LINGER_NS {
                break;
            }
            self.finished.pop_front();
            if self.live.get(&key).is_some_and(|l| l.conn.id == id) {
                if let Some(l) = self.live.remove(&key) {
                    self.release(l, Release::Done);
                }
            }
        }
    }

    /// Summarises and releases the connections without a packet for the idle timeout,
    /// looking at most once a second of capture time.
    fn release_idle(&mut self, now: i64) {
        let idle_ns = self.cfg.idle_ns;
        if idle_ns <= 0 || now < self.next_idle_sweep_ns {
            return;
        }
        self.next_idle_sweep_ns = now.saturating_add(IDLE_SWEEP_NS.min(idle_ns));
        let mut keys = std::mem::take(&mut self.idle_keys);
        keys.clear();
        keys.extend(
            self.live
                .iter()
                .filter(|(_, l)| now - l.conn.last_ns > idle_ns)
                .map(|(k, _)| *k),
        );
        // In order of id, so that the store and the series see the same order whatever the
        // hash map's.
        keys.sort_by_key(|k| self.live.get(k).map_or(0, |l| l.conn.id));
        for k in &keys {
            if let Some(l) = self.live.remove(k) {
                self.release(l, Release::Idle);
            }
        }
        self.idle_keys = keys;
    }

    fn release(&mut self, l: Live, why: Release) {
        let mut c = l.summary();
        if self.requests.on() && c.protocol.is_some() {
            let rtt = l.conn.round_trips();
            self.request_conns.push(RequestConn {
                id: c.id,
                a: c.a.clone(),
                b: c.b.clone(),
                rtt_a_ns: rtt.min_ns[0],
                rtt_b_ns: rtt.min_ns[1],
                window_a_bytes: c.window_scale_known.then_some(c.a_to_b.window_max_bytes),
                window_b_bytes: c.window_scale_known.then_some(c.b_to_a.window_max_bytes),
            });
        }
        match why {
            Release::Idle => {
                c.aged_out = true;
                self.summary.connections_aged_out += 1;
                self.interval.aged_out += 1;
            }
            Release::Done => self.interval.closed += 1,
        }
        self.store.push(c);
        let n = self.cfg.series_connections;
        if n > 0 && l.bins.len() > 0 {
            self.kept_series.push((l.wire_bytes, l.conn.id, l.bins));
            if self.kept_series.len() > n {
                // Drop the smallest: the series kept are those of the largest connections.
                if let Some((i, _)) = self
                    .kept_series
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, k)| (k.0, std::cmp::Reverse(k.1)))
                {
                    let dropped = self.kept_series.swap_remove(i);
                    self.series.held_cells = self.series.held_cells.saturating_sub(dropped.2.len());
                }
            }
        } else {
            self.series.held_cells = self.series.held_cells.saturating_sub(l.bins.len());
        }
    }

    /// What happened since the last call (or the start): the live view of a capture being
    /// read, with the `rows` connections most active in the interval (by wire bytes), each
    /// with the verdict of its figures so far. Reads no clock: the caller decides when an
    /// interval ends.
    pub fn interval(&mut self, rows: usize) -> LiveInterval {
        let n = std::mem::take(&mut self.interval);
        let mut active = 0;
        let mut top: Vec<(u64, u32, FlowKey)> = Vec::with_capacity(rows + 1);
        for (k, l) in &self.live {
            let d = l.counters().since(l.mark);
            if d.packets == 0 {
                continue;
            }
            active += 1;
            if rows > 0 {
                top.push((d.wire_bytes, l.conn.id, *k));
                top.sort_by_key(|t| (std::cmp::Reverse(t.0), t.1));
                top.truncate(rows);
            }
        }
        let connections = top
            .iter()
            .filter_map(|(_, _, k)| self.live.get(k))
            .map(|l| {
                let d = l.counters().since(l.mark);
                let c = l.summary();
                let pd = c.protocol.and_then(|p| p.diagnosis);
                LiveConnection {
                    id: c.id,
                    a: c.a,
                    b: c.b,
                    packets: d.packets,
                    wire_bytes: d.wire_bytes,
                    unique_bytes: d.unique_bytes,
                    retransmitted_packets: d.rexmit,
                    path_rtt_ns: c.diagnosis.path_rtt.min_ns,
                    limit: c.diagnosis.limit,
                    diagnosis: c.diagnosis.message,
                    protocol_limit: pd.as_ref().map(|d| d.limit),
                    protocol: pd.map(|d| d.message),
                }
            })
            .collect();
        for l in self.live.values_mut() {
            l.mark = l.counters();
        }
        LiveInterval {
            packets: n.packets,
            wire_bytes: n.tcp.wire_bytes,
            unique_bytes: n.tcp.unique_bytes,
            retransmitted_packets: n.tcp.rexmit,
            live_connections: self.live.len() as u64,
            active_connections: active,
            new_connections: n.new,
            closed_connections: n.closed,
            aged_out_connections: n.aged_out,
            last_packet_unix_ns: if self.first_ns.is_some() {
                self.last_ns
            } else {
                0
            },
            connections,
        }
    }

    /// Releases every connection still live, in order of id.
    fn release_rest(&mut self) {
        let mut rest: Vec<Live> = self.live.drain().map(|(_, l)| l).collect();
        rest.sort_by_key(|l| l.conn.id);
        for l in rest {
            self.release(l, Release::Done);
        }
    }

    /// [`Analyzer::finish`], and the requests logged ([`Analyzer::log_requests`]).
    pub fn finish_with_requests(
        mut self,
        capture: ReadStats,
    ) -> (TraceSummary<S>, Vec<TraceInterval>, RequestStream) {
        self.release_rest();
        let mut connections = std::mem::take(&mut self.request_conns);
        connections.sort_by_key(|c| c.id);
        let log = std::mem::take(&mut self.requests);
        let stream = RequestStream {
            requests: log.requests,
            dropped: log.dropped,
            connections,
        };
        let (s, i) = self.finish(capture);
        (s, i, stream)
    }

    /// The summary (connections in the store) and the throughput series.
    pub fn finish(mut self, capture: ReadStats) -> (TraceSummary<S>, Vec<TraceInterval>) {
        self.release_rest();
        if let Err(e) = self.store.seal() {
            let why = format!("connections lost: {e}");
            self.summary.capture.stopped_early.get_or_insert(why);
        }
        let first = self.first_ns.unwrap_or(0);
        let s = self.summary;
        let mut summary = TraceSummary {
            capture,
            first_packet_unix_ns: first,
            capture_duration_ns: (self.last_ns - first).max(0),
            packets: s.packets,
            tcp_packets: s.tcp_packets,
            udp_packets: s.udp_packets,
            other_ip_packets: s.other_ip_packets,
            non_ip_packets: s.non_ip_packets,
            unusable_packets: s.unusable_packets,
            filtered_packets: s.filtered_packets,
            duplicated_frames: s.duplicated_frames,
            connection_count: self.store.count(),
            connections_aged_out: s.connections_aged_out,
            connections: self.store,
            udp_flows: Vec::new(),
            series: None,
        };
        if let Some(why) = s.capture.stopped_early {
            summary.capture.stopped_early.get_or_insert(why);
        }
        summary.udp_flows = self
            .udp
            .into_iter()
            .map(|(_, st)| {
                let mut u = st.flow;
                let dur = (st.last_ns - u.first_unix_ns).max(0);
                u.duration_s = dur as f64 / 1e9;
                if dur > 0 {
                    u.rate_bps = (u.a_to_b_bytes + u.b_to_a_bytes) as f64 * 8.0 / u.duration_s;
                }
                u
            })
            .collect();
        let mut series = Vec::new();
        if self.series.on() {
            summary.series = Some(SeriesBins {
                asked_s: self.series.asked_ns as f64 / 1e9,
                used_s: self.series.width_ns as f64 / 1e9,
            });
            let len_s = self.series.width_ns as f64 / 1e9;
            let row = |i: usize, stream: Option<u32>, (w, g, r): Cell| TraceInterval {
                start_s: i as f64 * len_s,
                length_s: len_s,
                stream,
                throughput_bps: w as f64 * 8.0 / len_s,
                goodput_bps: g as f64 * 8.0 / len_s,
                retransmissions: r,
            };
            self.kept_series.sort_by_key(|k| k.1);
            for (i, t) in self.series.total.iter() {
                series.push(row(i, None, t));
                for (_, id, b) in &self.kept_series {
                    if let Some(c) = b.get(i).filter(|c| c.0 > 0) {
                        series.push(row(i, Some(*id), c));
                    }
                }
            }
        }
        (summary, series)
    }
}
