//! The model: a workload's duration at a given RTT, link rate and TCP window, without
//! replaying it (issue 25 item 3). Each request, taken in call order, is started by what
//! started it in the capture ([`Trigger`]): the connection's start, the previous call plus
//! the same call-to-call delay, or the arrival of a reply plus the client's same think
//! time; and it waits until fewer requests are outstanding than the most the capture had in
//! flight on the connection (the captured concurrency bounds it). Then
//!
//! ```text
//! call sent      = room(max(start, calls' direction free)) + pass(call bytes)
//! reply ready    = call sent + RTT + service time (as captured)
//! reply received = room(max(reply ready, replies' direction free)) + pass(reply bytes)
//! pass(n bytes)  = wire bytes × 8 / rate  (the captured passing time without a rate),
//!                  and for n beyond the window: k round trips more, a window each (the
//!                  window growing in slow start), the rest at the rate:
//!                  max(that, k × RTT + pass(the last round's bytes))
//! window         = min(receive window, congestion window)
//! room(t)        = the first time from t when the message's bytes fit the window beside
//!                  those of the direction that arrived within the last RTT; for a
//!                  message larger than the window, when any byte fits: its first round
//!                  is the room left (a byte stream: back-to-back replies share rounds)
//! ```
//!
//! where the wire bytes add a TCP/IPv4/Ethernet header (66 bytes with timestamps) per
//! 1448-byte segment. The congestion window of each direction is that of a loss-free
//! standard TCP (Reno, CUBIC before a loss): 10 segments at the connection's start (RFC
//! 6928), growing by the bytes acknowledged while the bytes in flight fill at least half of
//! it (slow start), halved per retransmission timeout of idleness down to 10 segments. The
//! captured times hold the capture's own slow start: [`table`] takes out what the model
//! computes for it at the capture's conditions, and models none below the capture's RTT. The duration is the last reply received. A dependency chain (requests
//! each waiting for the previous reply) thus costs per request the think time, the
//! serialisation, the RTT and the service time; concurrent requests overlap, bounded by the
//! captured requests in flight and by the windows (bytes in flight ≤ window), and share the
//! link's rate in order of their calls. Not modelled: losses, pacing (BBR), a server whose
//! service time changes with the load, replies overtaking each other (they leave in call
//! order), and a connection waiting for another (each is predicted alone).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;

use serde::Serialize;

use super::{Step, Trigger, Workload};

/// Payload bytes per TCP segment assumed with a rate (Ethernet MSS with timestamps).
const MSS: u64 = 1448;
/// Header bytes per segment on the wire: Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12.
const HEADER: u64 = 66;

/// The link the model predicts over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conditions {
    /// The path's round trip, ns.
    pub rtt_ns: i64,
    /// The link's rate each way, bit/s; None: each transfer takes what it took at the
    /// capture.
    pub rate_bps: Option<f64>,
    /// The window bounding the calls' bytes in flight (the server's receive window), bytes;
    /// None: no bound.
    pub call_window: Option<u64>,
    /// The window bounding the replies' bytes in flight (the client's receive window).
    pub reply_window: Option<u64>,
    /// The congestion window each direction starts with, growing in slow start (see
    /// [`INITIAL_WINDOW`]), bytes; None: the receive windows alone bound.
    pub initial_window: Option<u64>,
}

/// The initial congestion window of Linux and RFC 6928: 10 segments.
pub const INITIAL_WINDOW: u64 = 10 * MSS;

impl Conditions {
    /// The capture's own: its RTT, its transfers, its windows, and no slow start (the
    /// captured transfers and service times hold the capture's).
    pub fn captured(w: &Workload) -> Conditions {
        let win = [w.conn.window_a_bytes, w.conn.window_b_bytes];
        Conditions {
            rtt_ns: w.captured_rtt_ns(),
            rate_bps: None,
            call_window: win[1 - w.client],
            reply_window: win[w.client],
            // the captured times hold the capture's own slow start already
            initial_window: None,
        }
    }
}

/// What most of a predicted duration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// The server's service time.
    Server,
    /// The client: its think time and the transfers at the captured speed.
    Client,
    /// The link's rate or the window at no RTT.
    Link,
    /// The round trips.
    Latency,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bound::Server => "server",
            Bound::Client => "client",
            Bound::Link => "link",
            Bound::Latency => "latency",
        })
    }
}

/// A predicted duration split into what it is made of (each part the difference the
/// model shows when that part is taken away, in the order latency, link, server; the client
/// part is what is left).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    /// The RTT, ms.
    pub rtt_ms: f64,
    /// Predicted duration, s.
    pub duration_s: f64,
    /// Data moved (read + written) over the duration, bit/s.
    pub throughput_bps: f64,
    /// The round trips' part, s.
    pub latency_s: f64,
    /// The link's rate and window at no RTT, s.
    pub link_s: f64,
    /// The server's service times, s.
    pub server_s: f64,
    /// The client's think time and the captured transfers, s.
    pub client_s: f64,
    /// The largest part.
    pub bound: Bound,
}

/// The duration of the workload under `c`, ns (first call sent to last reply received).
pub fn predict(steps: &[Step], c: &Conditions) -> i64 {
    simulate(steps, c, true)
}

/// One direction of the connection (the calls' or the replies'): the messages passing in
/// order, their bytes in flight bounded by the receive window and by the sender's
/// congestion window. Each message holds its bytes from its arrival until one RTT after it
/// (its ACKs on their way back; the times are the receiver's, so the window holds what
/// arrived within the last RTT). The congestion window starts at the initial window and, in
/// slow start as a loss-free standard TCP (RFC 5681, Linux's `tcp_slow_start`) grows it,
/// takes in the bytes of each message once acknowledged when the bytes in flight filled at
/// least half of it at its sending (Linux's `tcp_is_cwnd_limited`); idle for a
/// retransmission timeout (RTT + 200 ms), it is halved per timeout down to the initial
/// window (`tcp_cwnd_restart`, `tcp_slow_start_after_idle`).
#[derive(Debug)]
struct Direction {
    /// Messages that arrived within the last RTT: arrival, bytes, whether their ACKs grow
    /// the congestion window.
    held: VecDeque<(i64, u64, bool)>,
    /// Their bytes.
    sum: u64,
    /// When the last message has passed (the direction is free from then).
    free: i64,
    /// The congestion window, bytes (None: none).
    cwnd: Option<u64>,
    /// The receive window, bytes (None: no bound).
    rwnd: Option<u64>,
}

/// Linux's least retransmission timeout (`TCP_RTO_MIN`): a path's timeout is about its RTT
/// plus this.
const RTO_MIN_NS: i64 = 200_000_000;

impl Direction {
    fn new(rwnd: Option<u64>, initial: Option<u64>) -> Direction {
        Direction {
            held: VecDeque::new(),
            sum: 0,
            free: i64::MIN,
            cwnd: initial.filter(|w| *w > 0),
            rwnd: rwnd.filter(|w| *w > 0),
        }
    }

    /// The window bounding the bytes in flight now.
    fn window(&self) -> Option<u64> {
        match (self.cwnd, self.rwnd) {
            (Some(c), Some(r)) => Some(c.min(r)),
            (c, r) => c.or(r),
        }
    }

    /// The messages acknowledged by `t` leave the window, growing the congestion window.
    fn acked(&mut self, t: i64, rtt: i64) {
        while let Some(&(a, b, grows)) = self.held.front() {
            if a + rtt > t {
                break;
            }
            self.held.pop_front();
            self.sum -= b;
            if grows {
                self.cwnd = self.cwnd.map(|c| c.saturating_add(b));
            }
        }
    }

    /// A message of `n` bytes ready at `t` (`captured_ns` its passing time at the capture):
    /// when its last byte arrives.
    fn send(&mut self, t: i64, n: u64, captured_ns: i64, c: &Conditions) -> i64 {
        let rtt = c.rtt_ns.max(0);
        let mut t = t.max(self.free);
        if rtt == 0 {
            let got = t + pass(n, captured_ns, c, 0, 0);
            self.free = got;
            return got;
        }
        // idle for a timeout or more: the congestion window restarts
        self.acked(t, rtt);
        if let (Some(cw), Some(initial)) = (self.cwnd, c.initial_window)
            && self.held.is_empty()
            && self.free != i64::MIN
        {
            let timeouts = (t - self.free) / (rtt + RTO_MIN_NS);
            let halved = cw.checked_shr(timeouts.clamp(0, 63) as u32).unwrap_or(0);
            self.cwnd = Some(halved.max(initial.min(cw)));
        }
        // room in the window: a message within a window waits until it fits whole; a larger
        // one, a byte stream's part of it, starts in the room left (TCP does not wait for
        // the window to empty between back-to-back messages)
        loop {
            self.acked(t, rtt);
            let Some(w) = self.window() else { break };
            let need = if n > w { 1 } else { n };
            match self.held.front() {
                Some(&(a, _, _)) if self.sum + need > w => t = a + rtt,
                _ => break,
            }
        }
        // the rounds it takes: a window's worth each, the congestion window growing by the
        // bytes acknowledged of the earlier rounds
        let (mut rounds, mut last, mut left) = (0u64, n, n);
        let mut cwnd = self.cwnd;
        if let Some(w) = self.window() {
            let mut room = w - self.sum;
            loop {
                last = left.min(room);
                left -= last;
                if left == 0 {
                    break;
                }
                rounds += 1;
                cwnd = cwnd.map(|cw| cw.saturating_add(last));
                room = match (cwnd, self.rwnd) {
                    (Some(cw), Some(r)) => cw.min(r),
                    (Some(cw), None) => cw,
                    (None, r) => r.unwrap_or(u64::MAX),
                };
                if cwnd.is_none_or(|cw| self.rwnd.is_some_and(|r| cw >= r)) {
                    // the window no longer grows: the rest in whole windows
                    let more = (left - 1) / room;
                    rounds += more;
                    left -= more * room;
                    last = left;
                    break;
                }
            }
        }
        let grows = rounds > 0 || cwnd.is_some_and(|cw| 2 * (self.sum + n) >= cw);
        let got = t + pass(n, captured_ns, c, rounds, last);
        self.cwnd = cwnd;
        self.free = got;
        if self.window().is_some() {
            self.held.push_back((got, last, grows));
            self.sum += last;
        }
        got
    }
}

/// [`predict`], the servers' service times counted or not.
fn simulate(steps: &[Step], c: &Conditions, service: bool) -> i64 {
    let n = steps.len();
    let mut start = vec![0i64; n];
    let mut received = vec![0i64; n];
    let mut outstanding: BinaryHeap<Reverse<i64>> = BinaryHeap::new();
    let mut calls = Direction::new(c.call_window, c.initial_window);
    let mut replies = Direction::new(c.reply_window, c.initial_window);
    let slots = steps.iter().map(|s| s.in_flight).max().unwrap_or(1).max(1) as usize;
    let rtt = c.rtt_ns.max(0);
    let mut end = 0;
    for (i, s) in steps.iter().enumerate() {
        let mut t = match s.trigger {
            Trigger::Start => 0,
            Trigger::Call { index, delay_ns } => start[index] + delay_ns,
            Trigger::Reply {
                index, delay_ns, ..
            } => received[index] + delay_ns,
        };
        // The captured concurrency: wait for a slot.
        loop {
            while outstanding.peek().is_some_and(|r| r.0 <= t) {
                outstanding.pop();
            }
            if outstanding.len() < slots {
                break;
            }
            if let Some(Reverse(r)) = outstanding.pop() {
                t = t.max(r);
            }
        }
        let sent = calls.send(t, s.call_bytes, s.call_pass_ns, c);
        let ready = sent + rtt + if service { s.service_ns } else { 0 };
        let got = replies.send(ready, s.reply_bytes, s.reply_pass_ns, c);
        start[i] = t;
        received[i] = got;
        outstanding.push(Reverse(got));
        end = end.max(got);
    }
    end
}

/// The time one message of `n` bytes takes to pass (`captured_ns` at the capture): its
/// serialisation at the rate, and when it takes `rounds` round trips more than one (a
/// window each), those round trips and its `last` bytes after them.
fn pass(n: u64, captured_ns: i64, c: &Conditions, rounds: u64, last: u64) -> i64 {
    let at_rate = |bytes: u64| match c.rate_bps {
        Some(r) if r > 0.0 => {
            let wire = bytes + bytes.div_ceil(MSS) * HEADER;
            (wire as f64 * 8.0 / r * 1e9).round() as i64
        }
        _ => (captured_ns as f64 * bytes as f64 / n.max(1) as f64).round() as i64,
    };
    let whole = at_rate(n);
    if rounds == 0 || c.rtt_ns <= 0 {
        return whole;
    }
    whole.max((rounds as i64).saturating_mul(c.rtt_ns) + at_rate(last))
}

/// The predictions over an RTT axis (ms), with the link's `rate_bps` and the windows of
/// `window` (None: the captured ones), each split into its parts. At RTTs from the
/// capture's on, slow start is modelled, less what it costs at the capture's own conditions
/// (the captured times hold that already: the prediction at the capture's RTT stays the
/// captured duration); below the capture's RTT it is not (its cost there is smaller than
/// what the captured times hold).
pub fn table(
    w: &Workload,
    rtts_ms: &[f64],
    rate_bps: Option<f64>,
    window: Option<u64>,
) -> Vec<Prediction> {
    let cap = Conditions::captured(w);
    let slow = |c: &Conditions| Conditions {
        initial_window: Some(INITIAL_WINDOW),
        ..*c
    };
    let at = |rtt_ms: f64| Conditions {
        rtt_ns: (rtt_ms * 1e6).round() as i64,
        rate_bps,
        call_window: window.or(cap.call_window),
        reply_window: window.or(cap.reply_window),
        initial_window: None,
    };
    let bare = Conditions {
        rtt_ns: 0,
        rate_bps: None,
        call_window: None,
        reply_window: None,
        initial_window: None,
    };
    let steps = &w.steps;
    let no_rtt = predict(steps, &at(0.0));
    let captured = predict(steps, &bare);
    let client = simulate(steps, &bare, false);
    let (read, written) = w.data_bytes();
    // slow start at the capture's own conditions, in the captured times already
    let held = (predict(steps, &slow(&cap)) - predict(steps, &cap)).max(0);
    rtts_ms
        .iter()
        .map(|&rtt_ms| {
            let c = at(rtt_ms);
            let d = if c.rtt_ns >= cap.rtt_ns {
                (predict(steps, &slow(&c)) - held).max(no_rtt)
            } else {
                predict(steps, &c)
            };
            let s = |ns: i64| ns.max(0) as f64 / 1e9;
            let parts = [
                (Bound::Latency, s(d - no_rtt)),
                (Bound::Link, s(no_rtt - captured)),
                (Bound::Server, s(captured - client)),
                (Bound::Client, s(client)),
            ];
            let bound = parts
                .iter()
                .fold(parts[0], |m, p| if p.1 > m.1 { *p } else { m })
                .0;
            Prediction {
                rtt_ms,
                duration_s: s(d),
                throughput_bps: if d > 0 {
                    (read + written) as f64 * 8.0 / s(d)
                } else {
                    0.0
                },
                latency_s: parts[0].1,
                link_s: parts[1].1,
                server_s: parts[2].1,
                client_s: parts[3].1,
                bound,
            }
        })
        .collect()
}

/// The first RTT of the table where the round trips are the largest part, ms.
pub fn latency_bound_from(table: &[Prediction]) -> Option<f64> {
    table
        .iter()
        .find(|p| p.bound == Bound::Latency)
        .map(|p| p.rtt_ms)
}
