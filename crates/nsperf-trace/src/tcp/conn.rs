//! The state of one TCP connection, fed one segment at a time.

use std::collections::VecDeque;

use crate::decode::TcpSegment;
use crate::model::{DirectionStats, TcpConnection};
use crate::tcp::limits::{LimitAccount, SendState};
use crate::tcp::rtt::RttHistogram;
use crate::tcp::seqset::SeqSet;
use crate::wire::tcp::flags;

/// Segments remembered per direction for RTT sampling; older ones are dropped.
const MAX_OUTSTANDING: usize = 16 * 1024;
/// Largest window shift RFC 7323 allows.
const MAX_WINDOW_SHIFT: u8 = 14;
/// Sequence numbers are unwrapped into 64 bits starting here, so data seen before the first
/// captured segment (a first segment out of order) stays positive.
const SEQ_ORIGIN: u64 = 1 << 40;
/// Silence after which a retransmission without duplicate ACKs counts as timeout-based when
/// no RTT was measured yet (RFC 6298 minimum RTO is 1 s; Linux uses 200 ms).
const DEFAULT_MIN_RTO_NS: i64 = 200_000_000;

/// One side of a connection: what it sent, and what it acknowledged of the other side.
#[derive(Debug, Default)]
pub(crate) struct Half {
    pub s: DirectionStats,
    // Sequence unwrapping of what this side sends.
    seq_known: bool,
    last_raw: u32,
    last_abs: u64,
    covered: SeqSet,
    /// Highest seq + len sent, raw (Wireshark's "next expected sequence").
    next_seq_raw: Option<u32>,
    /// Highest cumulative ACK the peer sent for this side's data (unwrapped).
    acked_abs: Option<u64>,
    /// Data segments awaiting their ACK: (end, send time, retransmitted).
    outstanding: VecDeque<(u64, i64, bool)>,
    rtt: RttHistogram,
    /// TSvals this side sent, awaiting their first echo: (TSval, send time).
    tsvals: VecDeque<(u32, i64)>,
    /// RTT of this side from timestamp echoes (RFC 7323 RTTM).
    rtt_ts: RttHistogram,
    // What this side acknowledges (for duplicate ACKs).
    last_ack_raw: Option<u32>,
    last_window_raw: Option<u16>,
    /// Duplicate ACKs this side sent since the last ACK that advanced.
    dupacks_run: u32,
    syn_seen: bool,
    /// Window of this side's SYN (unscaled).
    syn_window: Option<u64>,
    last_send_ns: Option<i64>,
    last_rexmit_ns: Option<i64>,
    first_data_ns: Option<i64>,
    last_data_ns: Option<i64>,
    pub limits: LimitAccount,
}

impl Half {
    fn unwrap_seq(&mut self, raw: u32) -> u64 {
        if !self.seq_known {
            self.seq_known = true;
            self.last_raw = raw;
            self.last_abs = SEQ_ORIGIN;
            return SEQ_ORIGIN;
        }
        let delta = raw.wrapping_sub(self.last_raw) as i32 as i64;
        let abs = (self.last_abs as i64 + delta).max(0) as u64;
        if delta > 0 {
            self.last_raw = raw;
            self.last_abs = abs;
        }
        abs
    }

    /// Unwraps a sequence number of this side's space without moving the reference.
    fn peek_seq(&self, raw: u32) -> Option<u64> {
        self.seq_known.then(|| {
            let delta = raw.wrapping_sub(self.last_raw) as i32 as i64;
            (self.last_abs as i64 + delta).max(0) as u64
        })
    }

    fn in_flight(&self) -> u64 {
        match (self.covered.max_end(), self.acked_abs) {
            (Some(end), Some(acked)) => end.saturating_sub(acked),
            (Some(end), None) => end.saturating_sub(self.covered_start()),
            _ => 0,
        }
    }

    fn covered_start(&self) -> u64 {
        SEQ_ORIGIN
    }

    /// Records an advertised window: largest, and smallest non-zero (zero windows are
    /// counted apart), as tcptrace reports them.
    fn note_window(&mut self, w: u64) {
        self.s.window_max_bytes = self.s.window_max_bytes.max(w);
        if w > 0 && (self.s.window_min_bytes == 0 || w < self.s.window_min_bytes) {
            self.s.window_min_bytes = w;
        }
    }

    fn scale(&self) -> Option<u8> {
        self.s.window_scale
    }
}

/// One TCP connection.
#[derive(Debug)]
pub struct TcpConn {
    pub(crate) id: u32,
    pub(crate) a: String,
    pub(crate) b: String,
    pub(crate) first_ns: i64,
    pub(crate) last_ns: i64,
    pub(crate) half: [Half; 2],
    scale_known: bool,
    /// Closed by FINs both ways or a RST: a new SYN on the same ports starts a new one.
    pub(crate) finished: bool,
    isn: Option<u32>,
    /// Per-bin counters when a series was asked for: (wire bytes, unique bytes, rexmits).
    pub(crate) bins: Vec<(u64, u64, u64)>,
}

impl TcpConn {
    /// A connection whose first packet came from side a at `ts_ns`.
    pub fn new(id: u32, a: String, b: String, ts_ns: i64) -> TcpConn {
        TcpConn {
            id,
            a,
            b,
            first_ns: ts_ns,
            last_ns: ts_ns,
            half: [Half::default(), Half::default()],
            scale_known: false,
            finished: false,
            isn: None,
            bins: Vec::new(),
        }
    }

    /// True when this segment starts a new connection on the same addresses and ports: a
    /// SYN with another initial sequence number than the one seen (as Wireshark and tcptrace
    /// split streams), or any SYN after the connection was closed.
    pub fn is_reuse(&self, seg: &TcpSegment) -> bool {
        seg.flags & (flags::SYN | flags::ACK) == flags::SYN
            && match self.isn {
                Some(isn) => isn != seg.seq,
                None => self.finished,
            }
    }

    /// Feeds one segment sent by side `dir` (0 = a, 1 = b). `bin` is the series bin index.
    pub fn segment(
        &mut self,
        dir: usize,
        seg: &TcpSegment,
        ts_ns: i64,
        wire_len: u32,
        bin: Option<usize>,
    ) {
        self.last_ns = self.last_ns.max(ts_ns);
        let (me, peer) = if dir == 0 {
            let (x, y) = self.half.split_at_mut(1);
            (&mut x[0], &mut y[0])
        } else {
            let (x, y) = self.half.split_at_mut(1);
            (&mut y[0], &mut x[0])
        };
        let f = seg.flags;
        let syn = f & flags::SYN != 0;
        let fin = f & flags::FIN != 0;
        let rst = f & flags::RST != 0;
        let ack = f & flags::ACK != 0;
        me.s.packets += 1;
        me.s.wire_bytes += u64::from(wire_len);

        if syn {
            me.s.syn += 1;
            me.syn_seen = true;
            if f & flags::ACK == 0 && self.isn.is_none() {
                self.isn = Some(seg.seq);
            }
            let o = &seg.options;
            if o.mss.is_some() {
                me.s.mss = o.mss;
            }
            if o.window_scale.is_some() {
                me.s.window_scale_option = o.window_scale;
            }
            me.s.sack_permitted |= o.sack_permitted;
            me.s.timestamps |= o.timestamps.is_some();
            if me.syn_seen && peer.syn_seen && !self.scale_known {
                self.scale_known = true;
                let both =
                    me.s.window_scale_option.is_some() && peer.s.window_scale_option.is_some();
                for h in [&mut *me, &mut *peer] {
                    h.s.window_scale = Some(if both {
                        h.s.window_scale_option.unwrap_or(0).min(MAX_WINDOW_SHIFT)
                    } else {
                        0
                    });
                }
            }
        }
        if fin {
            me.s.fin += 1;
        }
        if rst {
            me.s.rst += 1;
            self.finished = true;
        }

        // --- what this segment sends
        let payload = u64::from(seg.payload_len);
        let seq_len = payload + u64::from(syn) + u64::from(fin);
        let start = me.unwrap_seq(seg.seq);
        let end = start + seq_len;
        let acked_before = me.acked_abs;
        let max_end_before = me.covered.max_end();
        let mut rexmit = false;
        if payload > 0 {
            me.s.data_packets += 1;
            me.s.data_bytes += payload;
            me.first_data_ns.get_or_insert(ts_ns);
            me.last_data_ns = Some(ts_ns);
        }
        if seq_len > 0 {
            // Which control slots (SYN first, FIN last) are new, to count payload alone.
            let ctl = u64::from(syn && !me.covered.contains(start))
                + u64::from(fin && !me.covered.contains(end - 1));
            let cov = me.covered.insert(start, end);
            if cov.out_of_order {
                me.s.out_of_order_packets += 1;
            }
            // Unique payload: new bytes, less the new SYN/FIN sequence slots.
            me.s.unique_bytes += cov.new.saturating_sub(ctl).min(payload);
            if cov.retransmitted > 0 {
                rexmit = true;
                me.s.retransmitted_packets += 1;
                me.s.retransmitted_bytes += cov.retransmitted;
                me.last_rexmit_ns = Some(ts_ns);
                if peer.dupacks_run >= 3 {
                    me.s.fast_retransmissions += 1;
                } else {
                    let rto = me
                        .rtt
                        .min()
                        .map(|r| (2 * r as i64).max(DEFAULT_MIN_RTO_NS))
                        .unwrap_or(DEFAULT_MIN_RTO_NS);
                    if me.last_send_ns.is_some_and(|t| ts_ns - t >= rto) {
                        me.s.timeout_retransmissions += 1;
                    }
                }
                if acked_before.is_some_and(|a| end <= a) {
                    me.s.spurious_retransmissions += 1;
                }
                for o in me.outstanding.iter_mut() {
                    if o.0 > start {
                        o.2 = true;
                    }
                }
            } else {
                if me.outstanding.len() >= MAX_OUTSTANDING {
                    me.outstanding.pop_front();
                }
                me.outstanding.push_back((end, ts_ns, false));
            }
            if let Some(b) = bin {
                let cell = bin_cell(&mut self.bins, b);
                cell.1 += cov.new.saturating_sub(ctl).min(payload);
                cell.2 += u64::from(rexmit);
            }
        }
        if let Some(b) = bin {
            bin_cell(&mut self.bins, b).0 += u64::from(wire_len);
        }
        // Zero-window probe: one byte at the next sequence into a closed window.
        if payload == 1 && me.next_seq_raw == Some(seg.seq) && peer.last_window_raw == Some(0) {
            me.s.zero_window_probes += 1;
        }

        // --- what this segment acknowledges
        let mut dup_ack = false;
        if ack {
            if payload == 0 && !syn && !fin && !rst {
                me.s.pure_acks += 1;
                // Wireshark: same ACK, same non-zero window, at the next expected sequence.
                if seg.window != 0
                    && me.last_window_raw == Some(seg.window)
                    && me.last_ack_raw == Some(seg.ack)
                    && me.next_seq_raw == Some(seg.seq)
                {
                    me.s.duplicate_acks += 1;
                    me.dupacks_run += 1;
                    dup_ack = true;
                }
            }
            if let Some(ack_abs) = peer.peek_seq(seg.ack) {
                if peer.acked_abs.is_none_or(|a| ack_abs > a) {
                    peer.acked_abs = Some(ack_abs);
                    me.dupacks_run = 0;
                    // RTT: the newest segment this ACK covers, unless retransmitted (Karn).
                    let mut sample = None;
                    while let Some(&(e, t, r)) = peer.outstanding.front() {
                        if e > ack_abs {
                            break;
                        }
                        peer.outstanding.pop_front();
                        sample = Some((t, r));
                    }
                    if let Some((t, false)) = sample {
                        if ts_ns >= t {
                            peer.rtt.record((ts_ns - t) as u64);
                        }
                    }
                }
            }
            let n = seg.options.sack_blocks as usize;
            if n > 0 {
                me.s.sack_packets += 1;
                me.s.max_sack_blocks = me.s.max_sack_blocks.max(n as u8);
                let (l, r) = seg.options.sack[0];
                // RFC 2883: the first block is below the ACK, or inside the second block.
                let below = (seg.ack.wrapping_sub(r) as i32) >= 0;
                let inside = n > 1 && {
                    let (l2, r2) = seg.options.sack[1];
                    (l.wrapping_sub(l2) as i32) >= 0 && (r2.wrapping_sub(r) as i32) >= 0
                };
                if below || inside {
                    me.s.dsack_packets += 1;
                }
            }
            me.last_ack_raw = Some(seg.ack);
        }
        let _ = dup_ack;

        // --- timestamps (RFC 7323): remember new TSvals, match the peer's echoes
        if let Some((tsval, tsecr)) = seg.options.timestamps {
            if me
                .tsvals
                .back()
                .is_none_or(|&(v, _)| (tsval.wrapping_sub(v) as i32) > 0)
            {
                if me.tsvals.len() >= MAX_OUTSTANDING {
                    me.tsvals.pop_front();
                }
                me.tsvals.push_back((tsval, ts_ns));
            }
            if ack && tsecr != 0 {
                while let Some(&(v, t)) = peer.tsvals.front() {
                    let d = tsecr.wrapping_sub(v) as i32;
                    if d < 0 {
                        break;
                    }
                    peer.tsvals.pop_front();
                    if d == 0 && ts_ns >= t {
                        peer.rtt_ts.record((ts_ns - t) as u64);
                    }
                }
            }
        }

        // --- the window this side advertises
        if !rst {
            if seg.window == 0 && !syn {
                me.s.zero_window_adverts += 1;
            }
            if syn {
                // Never scaled; counted (as tcptrace does) only when scaling is not in use.
                me.syn_window = Some(u64::from(seg.window));
            } else {
                let w = u64::from(seg.window) << me.scale().unwrap_or(0);
                me.note_window(w);
            }
        }
        me.last_window_raw = Some(seg.window);

        // --- next expected sequence, in flight, and the diagnosis
        let seq_end_raw = seg.seq.wrapping_add(seq_len as u32);
        if me
            .next_seq_raw
            .is_none_or(|n| (seq_end_raw.wrapping_sub(n) as i32) > 0)
        {
            me.next_seq_raw = Some(seq_end_raw);
        }
        if payload > 0 {
            let in_flight = me.in_flight();
            me.s.in_flight_max_bytes = me.s.in_flight_max_bytes.max(in_flight);
            let rwnd_raw = peer.last_window_raw.map(u64::from);
            let rwnd = rwnd_raw.map(|w| w << peer.scale().unwrap_or(0));
            let mss = u64::from(peer.s.mss.or(me.s.mss).unwrap_or(536))
                .max(me.s.data_bytes / me.s.data_packets.max(1))
                .max(1);
            if let Some(w) = rwnd {
                if self.scale_known && w > 0 && in_flight + mss > w {
                    me.s.window_full_events += 1;
                }
            }
            // Idle: everything sent before was acknowledged, and nothing new is outstanding.
            let idle = match (max_end_before, acked_before) {
                (Some(e), Some(a)) => a >= e,
                _ => false,
            };
            // Path RTT: each direction's data->ACK time runs from the capture point to the far
            // end of that direction and back, so the two add up to the whole round trip
            // wherever the capture was taken.
            let rtt = match (me.rtt.min(), peer.rtt.min()) {
                (None, None) => None,
                (x, y) => Some((x.unwrap_or(0) + y.unwrap_or(0)) as i64),
            };
            let recovering = peer.dupacks_run > 0
                || me
                    .last_rexmit_ns
                    .is_some_and(|t| ts_ns - t <= 2 * rtt.unwrap_or(DEFAULT_MIN_RTO_NS));
            let state = if recovering {
                SendState::Loss
            } else {
                match rwnd {
                    Some(w) if self.scale_known => {
                        if in_flight + mss > w {
                            SendState::ReceiverWindow
                        } else {
                            SendState::Congestion
                        }
                    }
                    Some(w) => {
                        // Raw window: the real one is at least this big.
                        if in_flight + mss > w {
                            SendState::WindowUnknown
                        } else {
                            SendState::Congestion
                        }
                    }
                    None => SendState::WindowUnknown,
                }
            };
            me.limits.on_data(ts_ns, idle, state, rtt);
        }
        me.last_send_ns = Some(ts_ns);
        if self.half[0].s.fin > 0 && self.half[1].s.fin > 0 {
            self.finished = true;
        }
        if self.finished {
            // Memory follows the live connections: a closed one keeps only its figures.
            for h in &mut self.half {
                h.outstanding = VecDeque::new();
                h.tsvals = VecDeque::new();
            }
        }
    }

    /// The connection's figures.
    pub fn summary(&self) -> TcpConnection {
        let dur_ns = (self.last_ns - self.first_ns).max(0);
        let mut out = TcpConnection {
            id: self.id,
            a: self.a.clone(),
            b: self.b.clone(),
            first_unix_ns: self.first_ns,
            last_unix_ns: self.last_ns,
            duration_s: dur_ns as f64 / 1e9,
            handshake_seen: self.half[0].syn_seen && self.half[1].syn_seen,
            closed: self.half[0].s.fin > 0 && self.half[1].s.fin > 0,
            reset: self.half[0].s.rst + self.half[1].s.rst > 0,
            window_scale_known: self.scale_known,
            ..TcpConnection::default()
        };
        let scaling = self.scale_known
            && self.half[0].s.window_scale_option.is_some()
            && self.half[1].s.window_scale_option.is_some();
        let dir = |h: &Half| {
            let mut h2 = Half {
                s: h.s.clone(),
                ..Half::default()
            };
            if let (false, Some(w)) = (scaling, h.syn_window) {
                h2.note_window(w);
            }
            let mut s = h2.s;
            s.rtt = h.rtt.summary();
            s.rtt_timestamps = h.rtt_ts.summary();
            if let (Some(f), Some(l)) = (h.first_data_ns, h.last_data_ns) {
                if l > f {
                    s.goodput_bps = s.unique_bytes as f64 * 8.0 / ((l - f) as f64 / 1e9);
                }
            }
            if dur_ns > 0 {
                s.wire_bps = s.wire_bytes as f64 * 8.0 / (dur_ns as f64 / 1e9);
            }
            s
        };
        out.a_to_b = dir(&self.half[0]);
        out.b_to_a = dir(&self.half[1]);
        let d = if out.b_to_a.unique_bytes > out.a_to_b.unique_bytes {
            1
        } else {
            0
        };
        out.diagnosis = crate::tcp::limits::diagnose(
            if d == 0 { "a_to_b" } else { "b_to_a" },
            &self.half[d].limits,
            if d == 0 { &out.a_to_b } else { &out.b_to_a },
            if d == 0 { &out.b_to_a } else { &out.a_to_b },
            self.scale_known,
        );
        out
    }
}

fn bin_cell(bins: &mut Vec<(u64, u64, u64)>, b: usize) -> &mut (u64, u64, u64) {
    if bins.len() <= b {
        bins.resize(b + 1, (0, 0, 0));
    }
    &mut bins[b]
}
