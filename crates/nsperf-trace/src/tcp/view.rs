//! What the sender knew: the receiver's ACKs as they passed the capture point, so that each
//! data segment can be matched with the last ACK its sender had received when it sent it.
//!
//! A capture taken anywhere on the path sees the ACKs before or after the sender does. An ACK
//! that passes the capture point at time `t` reaches the sender and the data it releases passes
//! the capture point at `t + upstream`, where `upstream` is the part of the round trip behind
//! the capture point (0 next to the sender, the whole RTT next to the receiver). The sender's
//! view when a segment passed at `t` is therefore the last ACK seen before `t - upstream`;
//! with TCP timestamps (RFC 7323) it is also bounded by the TSval the segment echoes, since a
//! sender echoes the newest ACK it has. From the view come the sender's own bytes in flight
//! and its receiver window, whatever the vantage point (the idea of T-RAT, Zhang et al. 2002:
//! infer the sender's state from a passive trace).

use std::collections::VecDeque;

/// ACKs remembered per direction; older ones are dropped (a sender never waits that long).
const MAX_ACKS: usize = 16 * 1024;
/// How far back (capture time) the echoed TSval may move a sender's view.
const ECHO_BOUND_NS: i64 = 5_000_000;
/// Upstream samples kept for the recent minimum.
const RECENT: usize = 16;

/// One ACK as it passed the capture point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckRecord {
    /// Capture time, ns.
    pub t: i64,
    /// Cumulative ACK, unwrapped in the sender's sequence space.
    pub ack: u64,
    /// Window in bytes (scaled when the scale is known, raw otherwise).
    pub window: u64,
    /// Raw window field.
    pub window_raw: u16,
    /// The ACK's TSval, when it carried timestamps.
    pub tsval: Option<u32>,
    /// The receiver was signalling a hole (duplicate ACKs or SACK blocks) or the sender was
    /// repairing one when this ACK passed.
    pub recovering: bool,
}

impl AckRecord {
    /// Right edge of the window this ACK offers.
    pub fn edge(&self) -> u64 {
        self.ack + self.window
    }
}

/// The ACKs of one receiver, oldest first, and the estimate of the upstream time.
#[derive(Debug, Default)]
pub struct AckLog {
    acks: VecDeque<AckRecord>,
    /// Recent upstream samples (ns), newest last.
    recent: VecDeque<u64>,
    /// Smallest upstream sample seen.
    min_upstream: Option<u64>,
}

/// `a` is at or before `b` in 32-bit serial arithmetic (RFC 1982).
fn serial_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

impl AckLog {
    /// Records an ACK. Records that change nothing the sender could use are not kept.
    pub fn push(&mut self, r: AckRecord) {
        if let Some(last) = self.acks.back_mut() {
            if last.ack == r.ack
                && last.window == r.window
                && last.tsval == r.tsval
                && last.recovering == r.recovering
            {
                return;
            }
        }
        if self.acks.len() >= MAX_ACKS {
            self.acks.pop_front();
        }
        self.acks.push_back(r);
    }

    /// Records one sample of the upstream time (capture point → sender → capture point).
    pub fn upstream_sample(&mut self, ns: u64) {
        if self.recent.len() >= RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(ns);
        self.min_upstream = Some(self.min_upstream.map_or(ns, |m| m.min(ns)));
    }

    /// The upstream time to shift by now: the smallest of the recent samples (it follows a
    /// queue that grows or drains), else `fallback`.
    pub fn upstream_now(&self, fallback: Option<u64>) -> u64 {
        self.recent.iter().copied().min().or(fallback).unwrap_or(0)
    }

    /// The sender's view for a segment that passed at `t` echoing `tsecr`: the last ACK seen
    /// before `t - upstream` (and not newer than the echoed TSval), and whether any ACK since
    /// the previous view closed the window. ACKs older than the view are released: later
    /// segments can only have seen the same or newer ones.
    pub fn view(&mut self, t: i64, upstream: u64, tsecr: Option<u32>) -> (Option<AckRecord>, bool) {
        let cutoff = t.saturating_sub(upstream as i64);
        let Some(by_time) = self.acks.partition_point(|r| r.t <= cutoff).checked_sub(1) else {
            return (None, false);
        };
        // The echoed TSval can only pull the view back a little (the ACKs of one clock
        // tick); a stale echo must not pin it to an old ACK.
        let newest = self.acks[by_time].t;
        let chosen = match tsecr {
            Some(echo) => self
                .acks
                .iter()
                .take(by_time + 1)
                .rposition(|r| {
                    newest - r.t > ECHO_BOUND_NS || r.tsval.is_none_or(|v| serial_le(v, echo))
                })
                .filter(|&i| newest - self.acks[i].t <= ECHO_BOUND_NS)
                .or(Some(by_time)),
            None => Some(by_time),
        };
        let Some(i) = chosen else {
            return (None, false);
        };
        let closed = self.acks.iter().take(i + 1).any(|r| r.window == 0);
        self.acks.drain(..i);
        (self.acks.front().copied(), closed)
    }

    /// Forgets everything (the connection is finished).
    pub fn clear(&mut self) {
        self.acks = VecDeque::new();
        self.recent = VecDeque::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(t: i64, ack: u64, window: u64, tsval: Option<u32>) -> AckRecord {
        AckRecord {
            t,
            ack,
            window,
            window_raw: window as u16,
            tsval,
            recovering: false,
        }
    }

    #[test]
    fn view_is_shifted_by_upstream_and_bounded_by_the_echo() {
        let mut l = AckLog::default();
        for i in 0..10 {
            l.push(rec(i * 10, i as u64 * 100, 1000, Some(i as u32)));
        }
        let ack = |v: (Option<AckRecord>, bool)| v.0.unwrap().ack;
        // next to the sender: the last ACK before t
        assert_eq!(ack(l.view(45, 0, None)), 400);
        // 20 ns upstream: the ACK seen before t - 20
        assert_eq!(ack(l.view(75, 20, None)), 500);
        // the echo says the sender had only seen TSval 5
        assert_eq!(ack(l.view(95, 0, Some(5))), 500);
        // nothing older than the view is kept
        assert_eq!(l.view(0, 0, None), (None, false));
        // a zero window between two views is reported once
        l.push(AckRecord {
            window: 0,
            ..rec(100, 1000, 0, Some(10))
        });
        l.push(rec(110, 1000, 500, Some(11)));
        assert!(l.view(200, 0, None).1);
        assert!(!l.view(210, 0, None).1);
    }

    #[test]
    fn repeated_acks_are_not_kept_and_memory_is_bounded() {
        let mut l = AckLog::default();
        for i in 0..(MAX_ACKS as i64 + 100) {
            l.push(rec(i, 7, 10, None));
            l.push(rec(i, i as u64, 10, None));
        }
        assert!(l.acks.len() <= MAX_ACKS);
        for s in [5, 3, 9] {
            l.upstream_sample(s);
        }
        assert_eq!(l.upstream_now(None), 3);
        assert_eq!(l.min_upstream, Some(3));
    }
}
