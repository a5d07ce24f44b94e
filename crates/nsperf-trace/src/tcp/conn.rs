//! The state of one TCP connection, fed one segment at a time.

use crate::decode::TcpSegment;
use crate::model::{PathRtt, RttSource, TcpConnection};
use crate::proto::pace::RoundTrips;
use crate::tcp::frames::FrameKey;
use crate::tcp::half::{Half, Sent};

use crate::kinds::Direction;
use crate::tcp::limits::{self, Evidence};
use crate::tcp::rtt::RttHistogram;
use crate::tcp::view::AckRecord;
use crate::wire::tcp::flags;

/// Largest window shift RFC 7323 allows.
const MAX_WINDOW_SHIFT: u8 = 14;
/// Samples a part of the path RTT needs before it outranks the handshake.
const MIN_RTT_SAMPLES: u64 = 4;

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
    /// Closed by a RST, or by FINs both ways and the last one acknowledged: a new SYN on the
    /// same ports starts a new connection, and the state can be released.
    pub(crate) finished: bool,
    isn: Option<u32>,
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

    /// The round trip from the capture point to each side and back, as measured so far: the
    /// smallest time from a segment of the other side (SYN or data) to this side's ACK of it
    /// (0: not measured yet), and the smallest of the last few (the RTT of now).
    pub(crate) fn round_trips(&self) -> RoundTrips {
        let of = |h: &Half| (h.rtt.min().unwrap_or(0), h.recent_rtt().unwrap_or(0));
        let (a, b) = (of(&self.half[1]), of(&self.half[0]));
        RoundTrips {
            min_ns: [a.0, b.0],
            recent_ns: [a.1, b.1],
        }
    }

    /// True once the connection is closed and its last FIN acknowledged, or reset.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Feeds one segment sent by side `dir` (0 = a, 1 = b). Returns what the segment did to
    /// the sequence space (unique bytes and whether it was a retransmission), or `None` when
    /// it was a copy of a frame seen before (captured twice).
    pub(crate) fn segment(
        &mut self,
        dir: usize,
        seg: &TcpSegment,
        ts_ns: i64,
        wire_len: u32,
    ) -> Option<Sent> {
        self.last_ns = self.last_ns.max(ts_ns);
        let scale_known = self.scale_known;
        let me = &mut self.half[dir];
        me.s.packets += 1;
        me.s.wire_bytes += u64::from(wire_len);
        if let Some(ip_id) = seg.ip_id {
            let key = FrameKey {
                ip_id,
                seq: seg.seq,
                ack: seg.ack,
                flags: seg.flags,
                window: seg.window,
                len: seg.payload_len,
                tsval: seg.options.timestamps.map_or(0, |t| t.0),
            };
            if me.frames.is_copy(key, ts_ns) {
                me.s.duplicated_frames += 1;
                return None;
            }
        }
        let f = seg.flags;
        let (syn, fin, rst, ack) = (
            f & flags::SYN != 0,
            f & flags::FIN != 0,
            f & flags::RST != 0,
            f & flags::ACK != 0,
        );
        if syn && self.handshake(dir, seg, ts_ns) {
            self.scale_known = true;
        }
        let (me, peer) = {
            let (x, y) = self.half.split_at_mut(1);
            if dir == 0 {
                (&mut x[0], &mut y[0])
            } else {
                (&mut y[0], &mut x[0])
            }
        };
        if fin {
            me.s.fin += 1;
        }
        if rst {
            me.s.rst += 1;
            self.finished = true;
        }
        let sent = send(me, peer, seg, ts_ns, scale_known);
        if ack {
            acknowledge(me, peer, seg, ts_ns);
        }
        if let Some((tsval, tsecr)) = seg.options.timestamps {
            me.note_tsval(tsval, ts_ns);
            if ack && tsecr != 0 {
                if let Some(up) = peer.echoed(tsecr, ts_ns) {
                    // The peer's TSval came back in this side's segment: one upstream sample
                    // for this side as a sender.
                    me.upstream.record(up);
                    me.upstream_from_timestamps = true;
                    peer.acks.upstream_sample(up);
                }
            }
        }
        window(me, seg, syn, rst);
        // The ACK this side sends, as the peer (a sender) will see it.
        if ack && !rst {
            if let Some(ack_abs) = peer.peek_seq(seg.ack) {
                let window = u64::from(seg.window) << me.s.window_scale.unwrap_or(0);
                me.acks.push(AckRecord {
                    t: ts_ns,
                    ack: ack_abs,
                    window: if syn { u64::from(seg.window) } else { window },
                    window_raw: seg.window,
                    tsval: seg.options.timestamps.map(|t| t.0),
                    recovering: me.hole_until.is_some(),
                });
            }
        }
        let closed = |h: &Half| {
            h.fin_end
                .is_some_and(|e| h.acked_abs.is_some_and(|a| a >= e))
        };
        if closed(&self.half[0]) && closed(&self.half[1]) {
            self.finished = true;
        }
        if self.finished {
            // Memory follows the live connections: a closed one keeps only its figures.
            for h in &mut self.half {
                h.flush_timestamp_rtt();
                h.release();
            }
        }
        sent
    }

    /// A SYN from side `dir`: options, and the window scale once both SYNs are in. True
    /// when the scale became known.
    fn handshake(&mut self, dir: usize, seg: &TcpSegment, ts_ns: i64) -> bool {
        if seg.flags & flags::ACK == 0 && self.isn.is_none() {
            self.isn = Some(seg.seq);
        }
        let me = &mut self.half[dir];
        me.s.syn += 1;
        me.syn_seen = true;
        me.syn_ns.get_or_insert(ts_ns);
        let o = &seg.options;
        if o.mss.is_some() {
            me.s.mss = o.mss;
        }
        if o.window_scale.is_some() {
            me.s.window_scale_option = o.window_scale;
        }
        me.s.sack_permitted |= o.sack_permitted;
        me.s.timestamps |= o.timestamps.is_some();
        if !(self.half[0].syn_seen && self.half[1].syn_seen) || self.scale_known {
            return false;
        }
        let both = self.half.iter().all(|h| h.s.window_scale_option.is_some());
        for h in &mut self.half {
            h.s.window_scale = Some(if both {
                h.s.window_scale_option.unwrap_or(0).min(MAX_WINDOW_SHIFT)
            } else {
                0
            });
        }
        true
    }

    /// The connection's figures so far (the state is left as it is: a live view of an open
    /// connection gives what its final summary would give at this point).
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
            let mut s = h.s.clone();
            if let (false, Some(w)) = (scaling, h.syn_window) {
                s.window_max_bytes = s.window_max_bytes.max(w);
                if w > 0 && (s.window_min_bytes == 0 || w < s.window_min_bytes) {
                    s.window_min_bytes = w;
                }
            }
            s.rtt = h.rtt.summary();
            s.rtt_timestamps = h.timestamp_rtt_summary();
            s.timestamp_tick_ns = h.ts_clock.tick_ns();
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
        let direction = if out.b_to_a.unique_bytes > out.a_to_b.unique_bytes {
            Direction::BToA
        } else {
            Direction::AToB
        };
        let d = direction.index();
        let (sender, receiver) = (&self.half[d], &self.half[1 - d]);
        let (s_stats, r_stats) = if d == 0 {
            (&out.a_to_b, &out.b_to_a)
        } else {
            (&out.b_to_a, &out.a_to_b)
        };
        out.diagnosis = limits::diagnose(&Evidence {
            direction,
            account: sender.limits,
            sender: Some(s_stats),
            receiver: Some(r_stats),
            scale_known: self.scale_known,
            receiver_window_raw_max: receiver.window_raw_max,
            lost_segments: sender.lost_segments,
            path: self.path_rtt(sender, receiver),
            data_span_ns: match (sender.first_data_ns, sender.last_data_ns) {
                (Some(f), Some(l)) => l - f,
                _ => 0,
            },
        });
        out
    }

    /// The path RTT of data sent by `sender`: its data → ACK time (beyond the capture point)
    /// plus the ACK → data time behind it, each from many samples.
    fn path_rtt(&self, sender: &Half, receiver: &Half) -> PathRtt {
        let down = &sender.rtt;
        // Behind the capture point: timestamp echoes or the other direction's data, when
        // they have enough samples; the handshake alone otherwise.
        let handshake = match (sender.syn_ns, receiver.syn_ns) {
            // The sender answered the receiver's SYN: SYN → SYN/ACK is behind the capture.
            (Some(s), Some(r)) if s > r => Some((s - r) as u64),
            _ => None,
        };
        let (up, source): (Option<&RttHistogram>, RttSource) =
            if sender.upstream_from_timestamps && sender.upstream.count() >= MIN_RTT_SAMPLES {
                (Some(&sender.upstream), RttSource::Timestamps)
            } else if receiver.rtt.count() >= MIN_RTT_SAMPLES {
                (Some(&receiver.rtt), RttSource::ReverseData)
            } else {
                (None, RttSource::None)
            };
        let (up_min, up_median, up_n, source) = match (up, handshake, receiver.rtt.min()) {
            (Some(h), _, _) => {
                let s = h.summary();
                // Timestamp echoes: the third smallest, so one or two stray echoes cannot
                // pull the path RTT down.
                let low = if source == RttSource::Timestamps && s.samples >= 20 {
                    h.quantile(3.0 / s.samples as f64)
                } else {
                    s.min_ns
                };
                (low, s.median_ns, s.samples, source)
            }
            (None, Some(hs), _) => (hs, hs, 1, RttSource::Handshake),
            // The sender opened: its ACK of the SYN/ACK is the one sample behind the capture.
            (None, None, Some(r)) => (r, r, receiver.rtt.count(), RttSource::Handshake),
            _ => (0, 0, 0, RttSource::None),
        };
        let d = down.summary();
        if d.samples == 0 && up_n == 0 {
            return PathRtt::default();
        }
        PathRtt {
            min_ns: d.min_ns + up_min,
            median_ns: d.median_ns + up_median,
            downstream_samples: d.samples,
            downstream_min_ns: d.min_ns,
            upstream_samples: up_n,
            upstream_min_ns: up_min,
            upstream_source: source,
        }
    }
}

/// What a segment sends: sequence space, probes, retransmissions, and the sender's limit.
fn send(
    me: &mut Half,
    peer: &mut Half,
    seg: &TcpSegment,
    t: i64,
    scale_known: bool,
) -> Option<Sent> {
    let f = seg.flags;
    let (syn, fin) = (f & flags::SYN != 0, f & flags::FIN != 0);
    let payload = u64::from(seg.payload_len);
    let seq_len = payload + u64::from(syn) + u64::from(fin);
    let start = me.unwrap_seq(seg.seq);
    let end = start + seq_len;
    if payload > 0 {
        me.s.data_packets += 1;
        me.s.data_bytes += payload;
        me.first_data_ns.get_or_insert(t);
        me.last_data_ns = Some(t);
    }
    if fin {
        me.fin_end = Some(end);
    }
    let mut sent = Sent::default();
    let seen = (payload > 0).then(|| {
        if me.upstream_fallback.is_none() {
            me.upstream_fallback = upstream_without_timestamps(me, peer);
        }
        let tsecr = seg
            .options
            .timestamps
            .map(|t| t.1)
            .filter(|&e| e != 0 && me.s.timestamps && peer.s.timestamps);
        me.sender_view(peer, t, tsecr)
    });
    // tcptrace: a segment sent while the peer advertises a zero window is a persist probe,
    // never a retransmission, and its bytes are not unique. The window is the one the
    // sender had (its view), so a probe crossing a window update is one wherever captured.
    let sender_saw_zero = seen.is_some_and(|v| v.view.is_some_and(|r| r.window == 0));
    let probe = seq_len > 0
        && !syn
        && peer.s.packets > 0
        && (peer.last_window_raw == Some(0) || (sender_saw_zero && payload <= 1));
    let max_end_before = me.covered.max_end();
    if probe {
        me.s.zero_window_probes += 1;
        me.s.zero_window_probe_bytes += payload;
    } else if seq_len > 0 {
        // Which control slots (SYN first, FIN last) are new, to count payload alone.
        let ctl = u64::from(syn && !me.covered.contains(start))
            + u64::from(fin && !me.covered.contains(end - 1));
        sent = me.cover(start, end, payload, ctl, t);
        me.s.unique_bytes += sent.unique;
        if sent.rexmit {
            me.classify_retransmission(peer, t);
        }
    }
    let seq_end_raw = seg.seq.wrapping_add(seq_len as u32);
    if me
        .next_seq_raw
        .is_none_or(|n| (seq_end_raw.wrapping_sub(n) as i32) > 0)
    {
        me.next_seq_raw = Some(seq_end_raw);
    }
    if let Some(seen) = seen {
        let mss = u64::from(peer.s.mss.or(me.s.mss).unwrap_or(536))
            .max(me.s.data_bytes / me.s.data_packets.max(1))
            .max(1);
        let scale = if scale_known {
            peer.s.window_scale
        } else {
            None
        };
        me.account(t, end, max_end_before, sent, probe, mss, scale, seen);
    }
    me.last_send_ns = Some(t);
    Some(sent)
}

/// The part of the path behind the capture point for data sent by `me`, from the handshake
/// or the peer's data: SYN/ACK → ACK when `me` opened, SYN → SYN/ACK when the peer did.
fn upstream_without_timestamps(me: &Half, peer: &Half) -> Option<u64> {
    match (me.syn_ns, peer.syn_ns) {
        (Some(m), Some(p)) if m > p => Some((m - p) as u64),
        _ => peer.rtt.min(),
    }
}

/// What a segment acknowledges: RTT of the peer's data, duplicate ACKs, SACK and D-SACK.
fn acknowledge(me: &mut Half, peer: &mut Half, seg: &TcpSegment, t: i64) {
    let f = seg.flags;
    let pure = seg.payload_len == 0 && f & (flags::SYN | flags::FIN | flags::RST) == 0;
    let mut dup = false;
    if pure {
        me.s.pure_acks += 1;
        // Wireshark: same ACK, same non-zero window, at the next expected sequence.
        if seg.window != 0
            && me.last_window_raw == Some(seg.window)
            && me.last_ack_raw == Some(seg.ack)
            && me.next_seq_raw == Some(seg.seq)
        {
            me.s.duplicate_acks += 1;
            me.dupacks_run += 1;
            me.last_dupack_ns = Some(t);
            dup = true;
        }
    }
    if let Some(ack_abs) = peer.peek_seq(seg.ack) {
        if peer.acknowledged(ack_abs, t) {
            me.dupacks_run = 0;
        }
        if me.hole_until.is_some_and(|h| ack_abs >= h) {
            me.hole_until = None;
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
            if let (Some(l), Some(r)) = (peer.peek_seq(l), peer.peek_seq(r)) {
                peer.dsacked(l, r);
            }
        } else {
            dup = true;
        }
    }
    if dup && me.hole_until.is_none() {
        // The receiver signals a hole: recovery lasts until its ACK passes what was sent.
        me.hole_until = peer.covered.max_end();
    }
    me.last_ack_raw = Some(seg.ack);
}

/// The window this side advertises.
fn window(me: &mut Half, seg: &TcpSegment, syn: bool, rst: bool) {
    if !rst {
        if seg.window == 0 && !syn {
            me.s.zero_window_adverts += 1;
        }
        if syn {
            // Never scaled; counted (as tcptrace does) only when scaling is not in use.
            me.syn_window = Some(u64::from(seg.window));
        } else {
            let w = u64::from(seg.window) << me.s.window_scale.unwrap_or(0);
            me.note_window(w);
            me.window_raw_max = me.window_raw_max.max(seg.window);
        }
    }
    me.last_window_raw = Some(seg.window);
}
