//! The analysis driver: decodes each packet, finds its flow, and feeds the TCP state
//! machines. Packets and their times are inputs; nothing here reads a clock.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

use crate::decode::{Decoded, decode};
use crate::filter::Filter;
use crate::model::{TraceInterval, TraceSummary, UdpFlow};
use crate::reader::{RawPacket, ReadStats};
use crate::tcp::TcpConn;

/// Series bins kept per connection at most; later packets are left out of the series.
const MAX_BINS: usize = 1_000_000;

/// Parameters of an analysis.
#[derive(Debug, Clone, Default)]
pub struct TraceConfig {
    /// Keep only packets matching this filter.
    pub filter: Filter,
    /// Width of the throughput-series bins in ns; 0 for no series.
    pub bin_ns: i64,
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

struct Flow<T> {
    /// True when side a is the key's `lo`.
    a_is_lo: bool,
    state: T,
}

struct UdpState {
    flow: UdpFlow,
    last_ns: i64,
}

/// The analysis of one capture, fed packet by packet.
pub struct Analyzer {
    cfg: TraceConfig,
    tcp_index: FastMap<FlowKey, usize>,
    tcp: Vec<Flow<TcpConn>>,
    udp_index: FastMap<FlowKey, usize>,
    udp: Vec<Flow<UdpState>>,
    summary: TraceSummary,
    first_ns: Option<i64>,
    last_ns: i64,
}

fn endpoint(addr: IpAddr, port: u16) -> String {
    match addr {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}

impl Analyzer {
    /// An analyzer with this configuration.
    pub fn new(cfg: TraceConfig) -> Analyzer {
        Analyzer {
            cfg,
            tcp_index: FastMap::default(),
            tcp: Vec::new(),
            udp_index: FastMap::default(),
            udp: Vec::new(),
            summary: TraceSummary::default(),
            first_ns: None,
            last_ns: 0,
        }
    }

    /// Number of TCP connections so far.
    pub fn connections(&self) -> usize {
        self.tcp.len()
    }

    /// Feeds one captured packet.
    pub fn packet(&mut self, p: &RawPacket<'_>) {
        self.summary.packets += 1;
        let first = *self.first_ns.get_or_insert(p.ts_ns);
        self.last_ns = self.last_ns.max(p.ts_ns);
        let bin = (self.cfg.bin_ns > 0 && p.ts_ns >= first)
            .then(|| ((p.ts_ns - first) / self.cfg.bin_ns) as usize)
            .filter(|&b| b < MAX_BINS);
        match decode(p.link, p.data) {
            Decoded::Tcp(seg) => {
                if !self
                    .cfg
                    .filter
                    .matches(seg.src, seg.src_port, seg.dst, seg.dst_port)
                {
                    self.summary.filtered_packets += 1;
                    return;
                }
                self.summary.tcp_packets += 1;
                let (key, fwd) = FlowKey::new((seg.src, seg.src_port), (seg.dst, seg.dst_port));
                let idx = match self.tcp_index.get(&key) {
                    Some(&i) if !self.tcp[i].state.is_reuse(&seg) => i,
                    _ => {
                        let id = self.tcp.len() as u32 + 1;
                        let conn = TcpConn::new(
                            id,
                            endpoint(seg.src, seg.src_port),
                            endpoint(seg.dst, seg.dst_port),
                            p.ts_ns,
                        );
                        self.tcp.push(Flow {
                            a_is_lo: fwd,
                            state: conn,
                        });
                        self.tcp_index.insert(key, self.tcp.len() - 1);
                        self.tcp.len() - 1
                    }
                };
                let flow = &mut self.tcp[idx];
                let dir = if fwd == flow.a_is_lo { 0 } else { 1 };
                flow.state.segment(dir, &seg, p.ts_ns, p.orig_len, bin);
            }
            Decoded::Udp(d) => {
                if !self
                    .cfg
                    .filter
                    .matches(d.src, d.src_port, d.dst, d.dst_port)
                {
                    self.summary.filtered_packets += 1;
                    return;
                }
                self.summary.udp_packets += 1;
                let (key, fwd) = FlowKey::new((d.src, d.src_port), (d.dst, d.dst_port));
                let idx = *self.udp_index.entry(key).or_insert_with(|| {
                    self.udp.push(Flow {
                        a_is_lo: fwd,
                        state: UdpState {
                            flow: UdpFlow {
                                id: self.udp.len() as u32 + 1,
                                a: endpoint(d.src, d.src_port),
                                b: endpoint(d.dst, d.dst_port),
                                first_unix_ns: p.ts_ns,
                                ..UdpFlow::default()
                            },
                            last_ns: p.ts_ns,
                        },
                    });
                    self.udp.len() - 1
                });
                let f = &mut self.udp[idx];
                let u = &mut f.state;
                u.last_ns = u.last_ns.max(p.ts_ns);
                if fwd == f.a_is_lo {
                    u.flow.a_to_b_packets += 1;
                    u.flow.a_to_b_bytes += u64::from(p.orig_len);
                } else {
                    u.flow.b_to_a_packets += 1;
                    u.flow.b_to_a_bytes += u64::from(p.orig_len);
                }
            }
            Decoded::OtherIp => {
                if self.cfg.filter.is_empty() {
                    self.summary.other_ip_packets += 1;
                } else {
                    self.summary.filtered_packets += 1;
                }
            }
            Decoded::NotIp => {
                if self.cfg.filter.is_empty() {
                    self.summary.non_ip_packets += 1;
                } else {
                    self.summary.filtered_packets += 1;
                }
            }
            Decoded::Unusable => self.summary.unusable_packets += 1,
        }
    }

    /// The summary and the throughput series.
    pub fn finish(mut self, capture: ReadStats) -> (TraceSummary, Vec<TraceInterval>) {
        let first = self.first_ns.unwrap_or(0);
        self.summary.capture = capture;
        self.summary.first_packet_unix_ns = first;
        self.summary.capture_duration_ns = (self.last_ns - first).max(0);
        self.summary.connections = self.tcp.iter().map(|f| f.state.summary()).collect();
        self.summary.udp_flows = self
            .udp
            .iter()
            .map(|f| {
                let mut u = f.state.flow.clone();
                let dur = (f.state.last_ns - u.first_unix_ns).max(0);
                u.duration_s = dur as f64 / 1e9;
                if dur > 0 {
                    u.rate_bps = (u.a_to_b_bytes + u.b_to_a_bytes) as f64 * 8.0 / u.duration_s;
                }
                u
            })
            .collect();
        let mut series = Vec::new();
        if self.cfg.bin_ns > 0 {
            let len_s = self.cfg.bin_ns as f64 / 1e9;
            let nbins = self
                .tcp
                .iter()
                .map(|f| f.state.bins.len())
                .max()
                .unwrap_or(0);
            let mut total = vec![(0u64, 0u64, 0u64); nbins];
            for f in &self.tcp {
                for (i, &(w, g, r)) in f.state.bins.iter().enumerate() {
                    total[i].0 += w;
                    total[i].1 += g;
                    total[i].2 += r;
                }
            }
            let row = |i: usize, stream: Option<u32>, (w, g, r): (u64, u64, u64)| TraceInterval {
                start_s: i as f64 * len_s,
                length_s: len_s,
                stream,
                throughput_bps: w as f64 * 8.0 / len_s,
                goodput_bps: g as f64 * 8.0 / len_s,
                retransmissions: r,
            };
            for (i, &t) in total.iter().enumerate() {
                series.push(row(i, None, t));
                for f in &self.tcp {
                    if let Some(&c) = f.state.bins.get(i) {
                        if c.0 > 0 {
                            series.push(row(i, Some(f.state.id), c));
                        }
                    }
                }
            }
        }
        (self.summary, series)
    }
}
