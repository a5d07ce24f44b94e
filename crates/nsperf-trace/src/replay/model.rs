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
//!                  and for n > window: k = ⌈n / window⌉ − 1 round trips more, the rest at
//!                  the rate: max(that, k × RTT + pass(n − k × window))
//! room(t)        = the first time from t when the message's bytes fit the window beside
//!                  those of the direction that arrived within the last RTT
//! ```
//!
//! where the wire bytes add a TCP/IPv4/Ethernet header (66 bytes with timestamps) per
//! 1448-byte segment. The duration is the last reply received. A dependency chain (requests
//! each waiting for the previous reply) thus costs per request the think time, the
//! serialisation, the RTT and the service time; concurrent requests overlap, bounded by the
//! captured requests in flight and by the window (bytes in flight ≤ window), and share the
//! link's rate in order of their calls. Not modelled: TCP slow start and losses, a server whose service time
//! changes with the load, and replies overtaking each other (they leave in call order).

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
}

impl Conditions {
    /// The capture's own: its RTT, its transfers, its windows.
    pub fn captured(w: &Workload) -> Conditions {
        let win = [w.conn.window_a_bytes, w.conn.window_b_bytes];
        Conditions {
            rtt_ns: w.captured_rtt_ns(),
            rate_bps: None,
            call_window: win[1 - w.client],
            reply_window: win[w.client],
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

/// The bytes one direction has in flight, bounded by a window: each message holds its bytes
/// (at most the window) from its arrival until one RTT after it (its ACKs on their way back;
/// the times are the receiver's, so the window holds what arrived within the last RTT).
#[derive(Debug, Default)]
struct InFlightBytes {
    held: VecDeque<(i64, u64)>,
    sum: u64,
}

impl InFlightBytes {
    /// The earliest time from `t` on when a message of `n` bytes fits the window `w` with
    /// the path's round trip `rtt`.
    fn room(&mut self, mut t: i64, n: u64, w: Option<u64>, rtt: i64) -> i64 {
        let Some(w) = w.filter(|w| *w > 0 && rtt > 0) else {
            return t;
        };
        let n = n.min(w);
        loop {
            while let Some(&(a, b)) = self.held.front() {
                if a + rtt > t {
                    break;
                }
                self.held.pop_front();
                self.sum -= b;
            }
            match self.held.front() {
                Some(&(a, _)) if self.sum + n > w => t = a + rtt,
                _ => return t,
            }
        }
    }

    /// A message of `n` bytes arrived at `t`.
    fn arrived(&mut self, t: i64, n: u64, w: Option<u64>) {
        if let Some(w) = w.filter(|w| *w > 0) {
            let n = n.min(w);
            self.held.push_back((t, n));
            self.sum += n;
        }
    }
}

/// [`predict`], the servers' service times counted or not.
fn simulate(steps: &[Step], c: &Conditions, service: bool) -> i64 {
    let n = steps.len();
    let mut start = vec![0i64; n];
    let mut received = vec![0i64; n];
    let mut outstanding: BinaryHeap<Reverse<i64>> = BinaryHeap::new();
    let (mut calls_free, mut replies_free) = (i64::MIN, i64::MIN);
    let (mut calls_held, mut replies_held) = (InFlightBytes::default(), InFlightBytes::default());
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
        let go = calls_held.room(t.max(calls_free), s.call_bytes, c.call_window, rtt);
        let sent = go + pass(s.call_bytes, s.call_pass_ns, c, c.call_window);
        calls_free = sent;
        calls_held.arrived(sent, s.call_bytes, c.call_window);
        let ready = sent + rtt + if service { s.service_ns } else { 0 };
        let go = replies_held.room(ready.max(replies_free), s.reply_bytes, c.reply_window, rtt);
        let got = go + pass(s.reply_bytes, s.reply_pass_ns, c, c.reply_window);
        replies_free = got;
        replies_held.arrived(got, s.reply_bytes, c.reply_window);
        start[i] = t;
        received[i] = got;
        outstanding.push(Reverse(got));
        end = end.max(got);
    }
    end
}

/// The time one message of `n` bytes takes to pass (`captured_ns` at the capture): its
/// serialisation at the rate, and when it is larger than the window a round trip per
/// window beyond the first.
fn pass(n: u64, captured_ns: i64, c: &Conditions, window: Option<u64>) -> i64 {
    let at_rate = |bytes: u64| match c.rate_bps {
        Some(r) if r > 0.0 => {
            let wire = bytes + bytes.div_ceil(MSS) * HEADER;
            (wire as f64 * 8.0 / r * 1e9).round() as i64
        }
        _ => (captured_ns as f64 * bytes as f64 / n.max(1) as f64).round() as i64,
    };
    let whole = at_rate(n);
    match window {
        Some(w) if w > 0 && c.rtt_ns > 0 && n > w => {
            let extra = (n - 1) / w;
            whole.max(extra as i64 * c.rtt_ns + at_rate(n - extra * w))
        }
        _ => whole,
    }
}

/// The predictions over an RTT axis (ms), with the link's `rate_bps` and the windows of
/// `window` (None: the captured ones), each split into its parts.
pub fn table(
    w: &Workload,
    rtts_ms: &[f64],
    rate_bps: Option<f64>,
    window: Option<u64>,
) -> Vec<Prediction> {
    let cap = Conditions::captured(w);
    let at = |rtt_ms: f64| Conditions {
        rtt_ns: (rtt_ms * 1e6).round() as i64,
        rate_bps,
        call_window: window.or(cap.call_window),
        reply_window: window.or(cap.reply_window),
    };
    let bare = Conditions {
        rtt_ns: 0,
        rate_bps: None,
        call_window: None,
        reply_window: None,
    };
    let steps = &w.steps;
    let no_rtt = predict(steps, &at(0.0));
    let captured = predict(steps, &bare);
    let client = simulate(steps, &bare, false);
    let (read, written) = w.data_bytes();
    rtts_ms
        .iter()
        .map(|&rtt_ms| {
            let d = predict(steps, &at(rtt_ms));
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
