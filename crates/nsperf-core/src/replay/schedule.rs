//! The issue rule of one connection, as a pure state machine: time is an input. Given when
//! each request was sent and when its reply arrived, it says which request is due next and
//! from when. The requests go in call order, each
//!
//! - no earlier than its trigger allows: [`Trigger::Start`] at the connection's start,
//!   [`Trigger::Call`] when the request it names was sent plus the delay,
//!   [`Trigger::Reply`] when that request's reply arrived plus the delay;
//! - and only while fewer requests are outstanding than the connection's captured most in
//!   flight (or, when the server allows fewer, an NFSv4.1 session's slots:
//!   [`Scheduler::capped`]).
//!
//! These are the rules `nsperf replay`'s model applies to the same triggers (docs/replay.md),
//! and the rules of every protocol's replay (NFS in `nsperf_nfs::replay`, SMB2 in
//! `nsperf_smb::replay`): the scheduler knows only each request's [`Trigger`].

use super::{Trigger, Triggered};

/// Not known yet (a request not sent, a reply not arrived).
const NONE: u64 = u64::MAX;

/// What the connection does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Request `index` is due now: send it.
    Issue(usize),
    /// The next request is due at this time (ns from the barrier); nothing to send before.
    At(u64),
    /// The next request waits for a reply (its trigger's, or one that frees a slot).
    Reply,
    /// Every request was sent.
    Done,
}

/// The issue rule of one connection (see the module's doc). Allocates at creation only.
#[derive(Debug, Clone)]
pub struct Scheduler<'a, T> {
    calls: &'a [T],
    start_ns: u64,
    next: usize,
    outstanding: u32,
    /// Most requests outstanding at once.
    cap: u32,
    sent: Vec<u64>,
    arrived: Vec<u64>,
}

impl<'a, T: Triggered> Scheduler<'a, T> {
    /// The rule of a connection whose requests are `calls` (in call order), the first
    /// allowed at `start_ns`, at most `in_flight_max` outstanding (0 is taken as 1); nothing
    /// sent yet.
    pub fn new(start_ns: u64, in_flight_max: u32, calls: &'a [T]) -> Scheduler<'a, T> {
        let n = calls.len();
        Scheduler {
            calls,
            start_ns,
            next: 0,
            outstanding: 0,
            cap: in_flight_max.max(1),
            sent: vec![NONE; n],
            arrived: vec![NONE; n],
        }
    }

    /// At most `slots` requests outstanding (at least one), when fewer than captured.
    pub fn capped(mut self, slots: u32) -> Scheduler<'a, T> {
        self.cap = self.cap.min(slots.max(1));
        self
    }

    /// What is due at `now_ns` (ns from the barrier).
    pub fn next(&self, now_ns: u64) -> Next {
        let Some(call) = self.calls.get(self.next) else {
            return Next::Done;
        };
        if self.outstanding >= self.cap {
            return Next::Reply;
        }
        let known = |t: u64, d: u64| (t != NONE).then(|| t.saturating_add(d));
        let from = match call.trigger() {
            Trigger::Start => Some(self.start_ns),
            Trigger::Call { index, delay_ns } => self
                .sent
                .get(index)
                .and_then(|&t| known(t, delay_ns))
                // A trigger naming no earlier request: at the connection's start.
                .or(Some(self.start_ns).filter(|_| index >= self.next)),
            Trigger::Reply { index, delay_ns } => {
                match self.arrived.get(index).filter(|_| index < self.next) {
                    Some(&t) => known(t, delay_ns),
                    None => Some(self.start_ns),
                }
            }
        };
        match from {
            None => Next::Reply,
            Some(t) if t <= now_ns => Next::Issue(self.next),
            Some(t) => Next::At(t),
        }
    }

    /// Request `index` (the one [`Scheduler::next`] gave) was sent at `t_ns`.
    pub fn sent(&mut self, index: usize, t_ns: u64) {
        if index == self.next {
            self.sent[index] = t_ns;
            self.next += 1;
            self.outstanding += 1;
        }
    }

    /// The reply of request `index` arrived at `t_ns`; false when it was not outstanding.
    pub fn arrived(&mut self, index: usize, t_ns: u64) -> bool {
        let outstanding = index < self.next && self.arrived.get(index) == Some(&NONE);
        if outstanding {
            self.arrived[index] = t_ns;
            self.outstanding -= 1;
        }
        outstanding
    }

    /// Requests sent whose reply has not arrived.
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// True once every request was sent and answered.
    pub fn finished(&self) -> bool {
        self.next == self.calls.len() && self.outstanding == 0
    }

    /// When request `index` was sent, ns from the barrier.
    pub fn sent_at(&self, index: usize) -> Option<u64> {
        self.sent.get(index).copied().filter(|&t| t != NONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Conn(u64, u32, Vec<Trigger>);

    fn conn(start: u64, max: u32, triggers: &[Trigger]) -> Conn {
        Conn(start, max, triggers.to_vec())
    }

    impl Conn {
        fn sched(&self) -> Scheduler<'_, Trigger> {
            Scheduler::new(self.0, self.1, &self.2)
        }
    }

    #[test]
    fn start_and_call_delays() {
        let c = conn(
            100,
            4,
            &[
                Trigger::Start,
                Trigger::Call {
                    index: 0,
                    delay_ns: 50,
                },
            ],
        );
        let mut s = c.sched();
        assert_eq!(s.next(0), Next::At(100));
        assert_eq!(s.next(100), Next::Issue(0));
        s.sent(0, 120);
        // the second follows the first's send by 50 ns, not the start
        assert_eq!(s.next(121), Next::At(170));
        assert_eq!(s.next(170), Next::Issue(1));
        s.sent(1, 170);
        assert_eq!(s.next(500), Next::Done);
        assert!(!s.finished());
        assert!(s.arrived(1, 300));
        assert!(!s.arrived(1, 301), "a reply counts once");
        assert!(s.arrived(0, 310));
        assert!(s.finished());
        assert_eq!(s.sent_at(0), Some(120));
    }

    #[test]
    fn a_reply_trigger_waits_for_the_reply_plus_the_think_time() {
        let c = conn(
            0,
            4,
            &[
                Trigger::Start,
                Trigger::Start,
                Trigger::Reply {
                    index: 1,
                    delay_ns: 30,
                },
            ],
        );
        let mut s = c.sched();
        s.sent(0, 0);
        s.sent(1, 0);
        assert_eq!(s.next(1_000), Next::Reply, "request 1's reply not in");
        // request 0's reply frees nothing the trigger names
        s.arrived(0, 10);
        assert_eq!(s.next(1_000), Next::Reply);
        s.arrived(1, 200);
        assert_eq!(s.next(200), Next::At(230));
        assert_eq!(s.next(230), Next::Issue(2));
    }

    /// Six requests, each due when the one before was sent; most in flight: the capture's
    /// `max`, or `slots` when fewer.
    fn six_in_a_row(max: u32, slots: Option<u32>) -> (u32, Vec<usize>, Vec<Option<u64>>) {
        let t: Vec<Trigger> = (0..6)
            .map(|i| match i {
                0 => Trigger::Start,
                i => Trigger::Call {
                    index: i - 1,
                    delay_ns: 0,
                },
            })
            .collect();
        let c = conn(0, max, &t);
        let mut s = c.sched();
        if let Some(n) = slots {
            s = s.capped(n);
        }
        let mut now = 0;
        let mut max = 0;
        let mut order = Vec::new();
        while !s.finished() {
            match s.next(now) {
                Next::Issue(i) => {
                    s.sent(i, now);
                    order.push(i);
                }
                Next::At(t) => now = t,
                Next::Reply | Next::Done => {
                    // the oldest outstanding reply comes back 10 ns later
                    now += 10;
                    let i = (0..6).find(|&i| s.sent_at(i).is_some() && s.arrived(i, now));
                    assert!(i.is_some());
                }
            }
            max = max.max(s.outstanding());
        }
        (max, order, (0..6).map(|i| s.sent_at(i)).collect())
    }

    #[test]
    fn never_more_in_flight_than_the_capture_had() {
        let (max, order, sent) = six_in_a_row(2, None);
        assert_eq!(max, 2);
        assert_eq!(order, [0, 1, 2, 3, 4, 5]);
        // two at a time, each reply (every 10 ns) frees a slot: the sixth leaves at 40
        assert_eq!(sent[2], Some(10));
        assert_eq!(sent[5], Some(40));
        // more session slots than captured in flight change nothing
        assert_eq!(six_in_a_row(2, Some(8)), (max, order, sent));
    }

    #[test]
    fn fewer_session_slots_than_captured_in_flight_bound_the_replay() {
        let (max, order, sent) = six_in_a_row(4, Some(1));
        assert_eq!(max, 1);
        assert_eq!(order, [0, 1, 2, 3, 4, 5]);
        // one at a time: each leaves when the reply before it came back
        assert_eq!(sent[1], Some(10));
        assert_eq!(sent[5], Some(50));
        assert_eq!(six_in_a_row(4, Some(0)).0, 1, "a slot at least");
    }

    #[test]
    fn a_zero_maximum_still_lets_one_through() {
        let c = conn(0, 0, &[Trigger::Start]);
        let s = c.sched();
        assert_eq!(s.next(0), Next::Issue(0));
    }
}
