//! One side of a connection: what it sent (sequence space, retransmissions, probes, RTT of its
//! data, the sender's view and what limited it) and what it acknowledged of the other side.

use std::collections::VecDeque;

use crate::model::DirectionStats;
use crate::tcp::limits::{Gap, LimitAccount};
use crate::tcp::rtt::RttHistogram;
use crate::tcp::seqset::SeqSet;
use crate::tcp::view::{AckLog, AckRecord};

/// Segments remembered per direction for RTT sampling; older ones are dropped.
const MAX_OUTSTANDING: usize = 16 * 1024;
/// Sequence numbers are unwrapped into 64 bits starting here, so data seen before the first
/// captured segment (a first segment out of order) stays positive.
pub(crate) const SEQ_ORIGIN: u64 = 1 << 40;
/// Silence after which a retransmission without fresh duplicate ACKs counts as timeout-based
/// when no RTT was measured yet (RFC 6298 minimum RTO is 1 s; Linux uses 200 ms).
pub(crate) const DEFAULT_MIN_RTO_NS: i64 = 200_000_000;
/// A segment sent within this time (or an eighth of the path RTT) of the ACK reaching the
/// sender was sent because of it.
const ACK_CLOCK_SLACK_NS: i64 = 2_000_000;
/// Timestamp RTT samples held back until the clock's tick is known.
const MAX_PENDING_TS: usize = 64;
/// Slack added to the bottleneck's pace when judging two segments back to back.
const BUSY_SLACK_NS: i64 = 20_000;
/// A hole filled this long after it opened was a loss before the capture point (not a
/// reordering), unless the RTT says otherwise.
const MIN_LATE_FILL_NS: i64 = 1_000_000;
/// Retransmissions counted as losses, remembered until the receiver's D-SACK can say they
/// were spurious.
const REMEMBERED_REXMITS: usize = 16;

/// A data segment awaiting its ACK.
#[derive(Debug, Clone, Copy)]
struct Outstanding {
    end: u64,
    sent: i64,
    retransmitted: bool,
}

/// The timestamp clock of one side, from its TSvals against capture time.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TsClock {
    first: Option<(u32, i64)>,
    last: Option<(u32, i64)>,
}

impl TsClock {
    fn note(&mut self, tsval: u32, t: i64) {
        let first = *self.first.get_or_insert((tsval, t));
        if (tsval.wrapping_sub(first.0) as i32) > 0 {
            self.last = Some((tsval, t));
        }
    }

    /// Nanoseconds per tick, once at least 8 ticks and 100 ms have passed.
    pub fn tick_ns(&self) -> Option<u64> {
        let ((v0, t0), (v1, t1)) = (self.first?, self.last?);
        let ticks = u64::from(v1.wrapping_sub(v0));
        let span = t1 - t0;
        (ticks >= 8 && span >= 100_000_000).then(|| span as u64 / ticks)
    }
}

/// Data → ACK samples behind the RTT of now: the smallest of the last few (a delayed ACK
/// cannot raise it; a queue that builds up does).
const RECENT_RTT: usize = 16;

/// The previous data segment of a sender, for the gap before the next one.
#[derive(Debug, Clone, Copy)]
struct Previous {
    t: i64,
    /// The sender's view then, and the largest right edge it had seen.
    view: Option<AckRecord>,
    edge: Option<u64>,
    /// State of the gap before it (a burst continues in the same state).
    gap: Gap,
}

/// One side of a connection.
#[derive(Debug, Default)]
pub(crate) struct Half {
    pub s: DirectionStats,
    seq_known: bool,
    last_raw: u32,
    last_abs: u64,
    pub covered: SeqSet,
    /// Highest seq + len sent, raw (Wireshark's "next expected sequence").
    pub next_seq_raw: Option<u32>,
    /// Highest cumulative ACK the peer sent for this side's data (unwrapped).
    pub acked_abs: Option<u64>,
    outstanding: VecDeque<Outstanding>,
    /// Data → ACK: the part of the path beyond the capture point.
    pub rtt: RttHistogram,
    /// The last data → ACK samples (a ring), for the RTT of now.
    recent_rtt: [u64; RECENT_RTT],
    recent_rtt_n: usize,
    tsvals: VecDeque<(u32, i64)>,
    /// This side's TSvals → the peer's echoes.
    pub rtt_ts: RttHistogram,
    /// Echo samples taken before this side's clock tick was known.
    pending_ts: Vec<u64>,
    pub ts_clock: TsClock,
    /// ACK → the data it let this side send: the part of the path behind the capture point,
    /// when this side sends data.
    pub upstream: RttHistogram,
    pub upstream_from_timestamps: bool,
    pub last_ack_raw: Option<u32>,
    pub last_window_raw: Option<u16>,
    /// Duplicate ACKs this side sent since new data was acknowledged or the peer timed out.
    pub dupacks_run: u32,
    pub last_dupack_ns: Option<i64>,
    /// This side (as receiver) is signalling a hole until its ACK reaches this point.
    pub hole_until: Option<u64>,
    pub syn_seen: bool,
    pub syn_ns: Option<i64>,
    pub syn_window: Option<u64>,
    pub fin_end: Option<u64>,
    pub last_send_ns: Option<i64>,
    /// Repairing (retransmitting) until the peer acknowledges this point.
    repair_until: Option<u64>,
    /// When the current holes in the covered space opened.
    hole_opened_ns: Option<i64>,
    pub first_data_ns: Option<i64>,
    pub last_data_ns: Option<i64>,
    /// Segments lost: retransmissions seen plus holes filled late (original not captured),
    /// less the retransmissions found spurious (already acknowledged, or D-SACKed).
    pub lost_segments: u64,
    /// The last retransmissions counted as losses, `[start, end)`, for the D-SACK check.
    rexmits: [Option<(u64, u64)>; REMEMBERED_REXMITS],
    next_rexmit: usize,
    /// Largest raw window this side advertised (for the scale bound).
    pub window_raw_max: u16,
    pub frames: crate::tcp::frames::RecentFrames,
    /// The ACKs this side sent, for the view of the peer as a sender.
    pub acks: AckLog,
    prev: Option<Previous>,
    /// Smallest gap between two data segments seen: the bottleneck's pace when the capture
    /// is behind it.
    min_gap_ns: Option<i64>,
    /// The part of the path behind the capture point from the handshake or the other
    /// direction's data, when timestamps do not give it.
    pub upstream_fallback: Option<u64>,
    pub limits: LimitAccount,
}

/// The sender's view of the receiver's ACKs for one segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SenderView {
    /// The last ACK the sender had.
    pub view: Option<AckRecord>,
    /// An ACK since its previous view closed the window.
    pub closed: bool,
    /// The upstream time the view was shifted by, ns.
    pub upstream: u64,
}

/// What one data segment did to the sequence space.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sent {
    pub rexmit: bool,
    pub unique: u64,
    /// The segment repaired a loss (a retransmission, or a late fill of a hole).
    pub repair: bool,
}

impl Half {
    pub fn unwrap_seq(&mut self, raw: u32) -> u64 {
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
    pub fn peek_seq(&self, raw: u32) -> Option<u64> {
        self.seq_known.then(|| {
            let delta = raw.wrapping_sub(self.last_raw) as i32 as i64;
            (self.last_abs as i64 + delta).max(0) as u64
        })
    }

    /// Records an advertised window: largest, and smallest non-zero (zero windows are
    /// counted apart), as tcptrace reports them.
    pub fn note_window(&mut self, w: u64) {
        self.s.window_max_bytes = self.s.window_max_bytes.max(w);
        if w > 0 && (self.s.window_min_bytes == 0 || w < self.s.window_min_bytes) {
            self.s.window_min_bytes = w;
        }
    }

    pub fn note_tsval(&mut self, tsval: u32, t: i64) {
        self.ts_clock.note(tsval, t);
        if self
            .tsvals
            .back()
            .is_none_or(|&(v, _)| (tsval.wrapping_sub(v) as i32) > 0)
        {
            if self.tsvals.len() >= MAX_OUTSTANDING {
                self.tsvals.pop_front();
            }
            self.tsvals.push_back((tsval, t));
        }
    }

    /// The peer echoed `tsecr` at `t`: one RTT sample of this side's timestamps (never below
    /// one tick of its clock), returned for the peer's upstream estimate (any length).
    pub fn echoed(&mut self, tsecr: u32, t: i64) -> Option<u64> {
        let mut sample = None;
        while let Some(&(v, sent)) = self.tsvals.front() {
            let d = tsecr.wrapping_sub(v) as i32;
            if d < 0 {
                break;
            }
            self.tsvals.pop_front();
            if d == 0 && t >= sent {
                sample = Some((t - sent) as u64);
            }
        }
        if let Some(ns) = sample {
            self.timestamp_rtt(ns);
        }
        sample
    }

    fn timestamp_rtt(&mut self, ns: u64) {
        match self.ts_clock.tick_ns() {
            Some(tick) => {
                for p in std::mem::take(&mut self.pending_ts) {
                    if p >= tick {
                        self.rtt_ts.record(p);
                    }
                }
                if ns >= tick {
                    self.rtt_ts.record(ns);
                }
            }
            None if self.pending_ts.len() < MAX_PENDING_TS => self.pending_ts.push(ns),
            None => self.rtt_ts.record(ns),
        }
    }

    /// Timestamp RTT samples kept while the clock's tick is unknown, flushed (those above
    /// one tick) when it is.
    pub fn flush_timestamp_rtt(&mut self) {
        if let Some(tick) = self.ts_clock.tick_ns() {
            self.pending_ts.retain(|&p| p >= tick);
        }
        for p in std::mem::take(&mut self.pending_ts) {
            self.rtt_ts.record(p);
        }
    }

    /// The timestamp RTT figures, with the samples held back (while the clock's tick is
    /// unknown) counted as [`Half::flush_timestamp_rtt`] would, without changing the state:
    /// a live view of a connection gives the figures its final summary would give now.
    pub fn timestamp_rtt_summary(&self) -> crate::model::RttSummary {
        if self.pending_ts.is_empty() {
            return self.rtt_ts.summary();
        }
        let tick = self.ts_clock.tick_ns();
        let mut h = self.rtt_ts.clone();
        for &p in &self.pending_ts {
            if tick.is_none_or(|t| p >= t) {
                h.record(p);
            }
        }
        h.summary()
    }

    /// The data → ACK time of now: the smallest of the last samples (None before any).
    pub fn recent_rtt(&self) -> Option<u64> {
        let n = self.recent_rtt_n.min(RECENT_RTT);
        self.recent_rtt[..n].iter().copied().min()
    }

    /// The peer acknowledged up to `ack_abs` at `t`: RTT of the newest segment it covers
    /// (Karn: not a retransmitted one). True when new data was acknowledged.
    pub fn acknowledged(&mut self, ack_abs: u64, t: i64) -> bool {
        if self.acked_abs.is_some_and(|a| ack_abs <= a) {
            return false;
        }
        self.acked_abs = Some(ack_abs);
        if self.repair_until.is_some_and(|r| ack_abs >= r) {
            self.repair_until = None;
        }
        let mut sample = None;
        while let Some(&o) = self.outstanding.front() {
            if o.end > ack_abs {
                break;
            }
            self.outstanding.pop_front();
            sample = Some(o);
        }
        if let Some(o) = sample {
            if !o.retransmitted && t >= o.sent {
                let ns = (t - o.sent) as u64;
                self.rtt.record(ns);
                self.recent_rtt[self.recent_rtt_n % RECENT_RTT] = ns;
                self.recent_rtt_n += 1;
            }
        }
        true
    }

    /// Adds `[start, end)` sent at `t` (a segment carrying `payload` bytes and `ctl` new
    /// SYN/FIN slots) to the covered space: unique bytes, retransmissions, out-of-order. A
    /// retransmission of data the peer had already acknowledged is spurious: no loss, no
    /// repair (Wireshark's "spurious retransmission").
    pub fn cover(&mut self, start: u64, end: u64, payload: u64, ctl: u64, t: i64) -> Sent {
        let had_holes = self.covered.len() > 1;
        let cov = self.covered.insert(start, end);
        let mut out = Sent {
            unique: cov.new.saturating_sub(ctl).min(payload),
            ..Sent::default()
        };
        if cov.out_of_order {
            self.s.out_of_order_packets += 1;
            // A hole filled long after it opened: the original was lost before the capture
            // point and this is its retransmission.
            let late = self
                .upstream
                .min()
                .map_or(MIN_LATE_FILL_NS, |u| (u as i64 / 2).max(MIN_LATE_FILL_NS));
            if cov.new > 0
                && cov.retransmitted == 0
                && self.hole_opened_ns.is_some_and(|o| t - o >= late)
            {
                out.repair = true;
                self.lost_segments += 1;
            }
        }
        if cov.retransmitted > 0 {
            out.rexmit = true;
            self.s.retransmitted_packets += 1;
            self.s.retransmitted_bytes += cov.retransmitted;
            if self.acked_abs.is_some_and(|a| end <= a) {
                self.s.spurious_retransmissions += 1;
            } else {
                out.repair = true;
                self.lost_segments += 1;
                self.rexmits[self.next_rexmit] = Some((start, end));
                self.next_rexmit = (self.next_rexmit + 1) % REMEMBERED_REXMITS;
            }
        } else if !cov.out_of_order {
            if self.outstanding.len() >= MAX_OUTSTANDING {
                self.outstanding.pop_front();
            }
            self.outstanding.push_back(Outstanding {
                end,
                sent: t,
                retransmitted: false,
            });
        }
        if out.rexmit {
            for o in self.outstanding.iter_mut() {
                if o.end > start {
                    o.retransmitted = true;
                }
            }
        }
        match (had_holes, self.covered.len() > 1) {
            (false, true) => self.hole_opened_ns = Some(t),
            (_, false) => self.hole_opened_ns = None,
            _ => {}
        }
        if out.repair {
            self.repair_until = self.covered.max_end();
        }
        out
    }

    /// The peer reported `[left, right)` of this side's data as received twice (a D-SACK,
    /// RFC 2883): a retransmission counted as a loss inside it was spurious — the original
    /// arrived (RFC 3708) — and is a loss no more.
    pub fn dsacked(&mut self, left: u64, right: u64) {
        let hit = self
            .rexmits
            .iter_mut()
            .find(|r| r.is_some_and(|(s, e)| s >= left && e <= right));
        if let Some(r) = hit {
            *r = None;
            self.lost_segments = self.lost_segments.saturating_sub(1);
            self.s.spurious_retransmissions += 1;
        }
    }

    /// Classifies a retransmission sent at `t`: fast after three fresh duplicate ACKs,
    /// timeout after a silence of one RTO estimate. A timeout restarts the peer's count.
    pub fn classify_retransmission(&mut self, peer: &mut Half, t: i64) {
        let rto = self
            .rtt
            .min()
            .map(|r| (2 * r as i64).max(DEFAULT_MIN_RTO_NS))
            .unwrap_or(DEFAULT_MIN_RTO_NS);
        let fresh = peer.last_dupack_ns.is_some_and(|d| t - d < rto);
        if peer.dupacks_run >= 3 && fresh {
            self.s.fast_retransmissions += 1;
        } else if self.last_send_ns.is_some_and(|s| t - s >= rto) {
            self.s.timeout_retransmissions += 1;
            peer.dupacks_run = 0;
        }
    }

    /// The upstream time to shift the peer's ACKs by for this sender's view now.
    fn upstream_now(&self, peer: &Half) -> u64 {
        let fallback = self.upstream.min().or(self.upstream_fallback);
        if self.upstream_from_timestamps {
            peer.acks.upstream_now(fallback)
        } else {
            fallback.unwrap_or(0)
        }
    }

    /// What this side, as a sender, knew of the peer's ACKs when it sent a segment that
    /// passed at `t` echoing `tsecr`.
    pub fn sender_view(&self, peer: &mut Half, t: i64, tsecr: Option<u32>) -> SenderView {
        let upstream = self.upstream_now(peer);
        let (view, closed) = peer.acks.view(t, upstream, tsecr);
        SenderView {
            view,
            closed,
            upstream,
        }
    }

    /// Accounts the gap before a data segment (or zero-window probe) that passed at `t`:
    /// what held the sender back, judged from its own view of the receiver's ACKs.
    #[allow(clippy::too_many_arguments)]
    pub fn account(
        &mut self,
        t: i64,
        end: u64,
        max_end_before: Option<u64>,
        sent: Sent,
        probe: bool,
        mss: u64,
        scale: Option<u8>,
        seen: SenderView,
    ) {
        let SenderView {
            view,
            closed,
            upstream,
        } = seen;
        // The window was full after this segment, in the sender's view.
        let mut full = false;
        if let Some(v) = view {
            let flight = self.covered.max_end().unwrap_or(end).saturating_sub(v.ack);
            self.s.in_flight_max_bytes = self.s.in_flight_max_bytes.max(flight);
            full = v.window > 0 && flight + mss > v.window;
            if scale.is_some() && full {
                self.s.window_full_events += 1;
            }
        }
        let gap = self.prev.map(|p| {
            let g = self.judge(
                &p,
                t,
                end,
                max_end_before,
                view,
                sent,
                probe || closed,
                scale,
                upstream,
                full,
                mss,
            );
            (p, g)
        });
        let edge = match (self.prev.and_then(|p| p.edge), view) {
            (Some(e), Some(v)) => Some(e.max(v.edge())),
            (e, v) => e.or(v.map(|v| v.edge())),
        };
        if let Some((p, g)) = gap {
            self.limits.add(g, t - p.t);
            if !sent.repair && !probe && t > p.t {
                self.min_gap_ns = Some(self.min_gap_ns.map_or(t - p.t, |m| m.min(t - p.t)));
            }
        }
        self.prev = Some(Previous {
            t,
            view: view.or(self.prev.and_then(|p| p.view)),
            edge,
            gap: gap.map_or(Gap::Congestion, |x| x.1),
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn judge(
        &self,
        p: &Previous,
        t: i64,
        end: u64,
        max_end_before: Option<u64>,
        view: Option<AckRecord>,
        sent: Sent,
        probe: bool,
        scale: Option<u8>,
        upstream: u64,
        full: bool,
        mss: u64,
    ) -> Gap {
        let window_gap = if scale.is_some() {
            Gap::ReceiverWindow
        } else {
            Gap::WindowUnknown
        };
        // A zero window since the previous segment (or a persist probe into one).
        if probe || p.view.is_some_and(|v| v.window == 0) {
            return Gap::ReceiverWindow;
        }
        if sent.repair && (view.is_some_and(|v| v.recovering) || t - p.t > ACK_CLOCK_SLACK_NS) {
            return Gap::Loss;
        }
        // The segment did not fit in the window the sender had when it sent the previous
        // one, or that window had less than a segment of room left (senders do not send
        // silly small segments, RFC 1122): it waited for the receiver to open it.
        let room = |e: u64| e.saturating_sub(max_end_before.unwrap_or(e));
        if p.edge.is_some_and(|e| end > e || room(e) < mss) {
            return window_gap;
        }
        if view.is_some_and(|v| v.recovering) || self.repair_until.is_some() {
            return Gap::Loss;
        }
        let Some(v) = view else {
            return p.gap;
        };
        // Back to back at the pace of the bottleneck: the link was busy with this sender's
        // data (behind a queue the ACK clock cannot be seen; the path set the pace).
        let busy = self
            .min_gap_ns
            .is_some_and(|m| t - p.t <= m + m / 2 + BUSY_SLACK_NS);
        // Everything the sender had sent was acknowledged, and it had room: it had nothing
        // to send.
        if max_end_before.is_some_and(|m| v.ack >= m) {
            return Gap::Application;
        }
        if busy {
            return match p.gap {
                Gap::Application => Gap::Congestion,
                g => g,
            };
        }
        let advanced = p
            .view
            .is_none_or(|pv| v.ack > pv.ack || v.edge() > pv.edge());
        if advanced {
            // A slow or busy sending host answers an ACK later: the slack grows with the RTT.
            let path = self.rtt.min().unwrap_or(0) + upstream;
            let slack = ACK_CLOCK_SLACK_NS.max(path as i64 / 8);
            if t - v.t - upstream as i64 <= slack {
                // Sent as the ACK came, and the window full again after it: the ACK opened
                // the receiver window (the sender waits on it), else the congestion window.
                if full { window_gap } else { Gap::Congestion }
            } else {
                Gap::Application
            }
        } else {
            p.gap
        }
    }

    /// Releases the per-segment state of a finished connection.
    pub fn release(&mut self) {
        self.outstanding = VecDeque::new();
        self.tsvals = VecDeque::new();
        self.acks.clear();
    }
}
