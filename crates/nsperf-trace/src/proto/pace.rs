//! Where a request/response protocol's time went on one connection, request by request,
//! from the client's side: the protocol-agnostic half of the verdict (the other half,
//! [`super::verdict`], names what set the pace).
//!
//! A client keeps some requests in flight; each occupies a slot from the moment the client
//! sends it until the reply is in, and the slot is then idle until the client sends the next
//! request (its think time). Seen at the capture point, request *i* holds its slot for
//! `reply_last − call_first + d_c` (the call left the client `c1` earlier, the reply reaches
//! it `c2` later; `d_c = c1 + c2` is the round trip from the capture point to the client and
//! back), and that time is split without remainder into
//!
//! - **transfer**: the call's and the reply's bytes passing the capture point, the time the
//!   reply queued behind other records of its direction (that direction moving bytes between
//!   the call's end and the reply's start), and the network's queue beyond the capture point
//!   in the direction that carries the data (the RTT of now above the smallest);
//! - **RTT**: `d_c`, plus the part of the rest of the wait up to `d_s` (the round trip from
//!   the capture point to the server and back);
//! - **server**: what is left of the wait.
//!
//! Then comes the gap to the client's next call, which cannot pass the capture point before
//! `d_c` after the reply did (the reply's way to the client and the call's way back): a call
//! paired with the oldest reply at least that far behind it. The gap is transfer while the
//! call's direction was moving other bytes (a call queued in the client's socket behind
//! earlier ones), the client's round trip `d_c` (already in the slot: it is taken out of the
//! RTT where the transfer covered it), the network's queue toward the client, and the rest is
//! the client's think time. The round trips are inputs (the TCP layer's data → ACK times each
//! way); no clock is read, and the state is a few counters, the pending calls' marks and a
//! bounded queue of replies.

use std::collections::VecDeque;

/// Replies remembered while they wait for the client's next call, at most.
const MAX_RELEASED: usize = 4096;

/// The round trips from the capture point to each side and back, as the TCP layer has
/// measured them so far (0: not yet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundTrips {
    /// The smallest, per side.
    pub min_ns: [u64; 2],
    /// The smallest of the last few, per side: above the smallest by the queue the network
    /// holds now.
    pub recent_ns: [u64; 2],
}

impl RoundTrips {
    /// The round trip to side `side` and back, smallest, ns.
    pub fn to(&self, side: usize) -> i64 {
        self.min_ns[side] as i64
    }

    /// The network's queue now on the way to side `side` and back, ns.
    pub fn queue_to(&self, side: usize) -> i64 {
        self.recent_ns[side].saturating_sub(self.min_ns[side]) as i64
    }
}

/// What a call left for its reply: when it passed the capture point, and how much its
/// reply's direction had moved by then.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallMark {
    /// First byte of the call at the capture point, ns.
    pub first_ns: i64,
    /// Last byte of the call, ns.
    pub last_ns: i64,
    /// The reply direction's moving time when the call's last byte passed, ns.
    reply_dir_moved_ns: i64,
}

/// A reply waiting for the client's next call.
#[derive(Debug, Clone, Copy)]
struct Released {
    /// The client (the side the reply went to).
    client: usize,
    /// Last byte of the reply, ns.
    last_ns: i64,
    /// The client's direction's moving time then, ns.
    client_dir_moved_ns: i64,
}

/// Sums over the requests of one scope (the data operations, or all).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CycleSums {
    /// Requests answered.
    pub requests: u64,
    /// Data bytes they moved (READ returned, WRITE sent).
    pub data_bytes: u64,
    /// First byte of the first call, ns.
    pub first_ns: Option<i64>,
    /// Last byte of the last reply, ns.
    pub last_ns: i64,
    /// Bytes moving, or queued behind other records or in the network, ns.
    pub transfer_ns: i64,
    /// Of `transfer_ns`: each request's own bytes passing the capture point (its call's
    /// first to last byte and its reply's), ns.
    pub moving_ns: i64,
    /// Round trips: the path RTT, ns.
    pub rtt_ns: i64,
    /// The server's time beyond the round trip, ns.
    pub server_ns: i64,
    /// The client's think time, ns.
    pub client_ns: i64,
    /// Calls whose think time before them was measured (paired with an earlier reply).
    pub think_samples: u64,
}

impl CycleSums {
    /// Slot time of all requests: their transfer, RTT, server and client parts, ns.
    pub fn cycle_ns(&self) -> i64 {
        self.transfer_ns + self.rtt_ns + self.server_ns + self.client_ns
    }

    /// From the first call to the last reply, ns.
    pub fn span_ns(&self) -> i64 {
        self.first_ns.map_or(0, |f| (self.last_ns - f).max(0))
    }
}

/// The pace of one connection.
#[derive(Debug, Default)]
pub struct Pace {
    /// Per direction: time records spent passing the capture point (records of one
    /// direction follow each other, so this is the time the direction was moving bytes).
    moved_ns: [i64; 2],
    /// Per direction: since when the record now passing has been passing.
    open_since: [Option<i64>; 2],
    /// Per direction: bytes of the records.
    bytes: [u64; 2],
    released: VecDeque<Released>,
    /// The data operations (READ, WRITE).
    pub data: CycleSums,
    /// Every request.
    pub all: CycleSums,
    /// The round trips, as last given.
    pub rtt: RoundTrips,
}

impl Pace {
    /// How long direction `dir` had been moving bytes at `t`.
    fn moved_at(&self, dir: usize, t: i64) -> i64 {
        self.moved_ns[dir] + self.open_since[dir].map_or(0, |s| (t - s).max(0))
    }

    /// The network's queue on the way to side `side` and back, when the data goes that
    /// way (the other way, the RTT of now also holds the peer's delayed ACKs).
    fn queue_to(&self, side: usize) -> i64 {
        let data_dir = usize::from(self.bytes[1] > self.bytes[0]);
        // Data sent by side `data_dir` queues on its way to the other side.
        if side != data_dir {
            self.rtt.queue_to(side)
        } else {
            0
        }
    }

    /// After each segment: whether a record of `dir` is passing, and since when.
    pub fn open(&mut self, dir: usize, since: Option<i64>) {
        self.open_since[dir] = since;
    }

    /// A complete record of `dir`, `len` bytes, passed from `first_ns` to `last_ns`; returns
    /// how long the direction had been moving bytes when it started.
    pub fn record(&mut self, dir: usize, len: u64, first_ns: i64, last_ns: i64) -> i64 {
        let before = self.moved_at(dir, first_ns);
        self.moved_ns[dir] = before + (last_ns - first_ns).max(0);
        self.open_since[dir] = None;
        self.bytes[dir] += len;
        before
    }

    /// A call from side `from` (already given to [`Pace::record`], which returned
    /// `moved_before`); `data` when it is a data operation. Returns the mark its reply needs.
    pub fn call(
        &mut self,
        from: usize,
        first_ns: i64,
        last_ns: i64,
        moved_before: i64,
        data: bool,
    ) -> CallMark {
        // The gap since the reply this call answers: the oldest reply to this client that
        // passed at least the client's round trip before it (a call sent earlier could not
        // have been a response to it); slack for the round trip's own jitter.
        let d_c = self.rtt.to(from);
        let earliest = first_ns - (d_c - d_c / 8);
        if let Some(i) = self
            .released
            .iter()
            .position(|r| r.client == from && r.last_ns <= earliest)
        {
            if let Some(r) = self.released.remove(i) {
                let gap = first_ns - r.last_ns;
                let queued = (moved_before - r.client_dir_moved_ns).clamp(0, gap);
                let idle = gap - queued;
                // The client's round trip, already in the slot: where the transfer covered
                // it, it was no wait.
                let hidden = d_c - d_c.min(idle);
                let rest = idle - d_c.min(idle);
                let network = rest.min(self.queue_to(from));
                let think = rest - network;
                for s in self.scopes(data) {
                    s.transfer_ns += queued + network;
                    s.rtt_ns -= hidden;
                    s.client_ns += think;
                    s.think_samples += 1;
                }
            }
        }
        for s in self.scopes(data) {
            s.first_ns.get_or_insert(first_ns);
        }
        CallMark {
            first_ns,
            last_ns,
            reply_dir_moved_ns: self.moved_at(1 - from, last_ns),
        }
    }

    /// The reply to `call`, sent by side `from` (the server), already given to
    /// [`Pace::record`], which returned `moved_before`; `data_bytes` it moved when a data
    /// operation.
    pub fn reply(
        &mut self,
        from: usize,
        call: &CallMark,
        first_ns: i64,
        last_ns: i64,
        moved_before: i64,
        data_bytes: Option<u64>,
    ) {
        let client = 1 - from;
        let (d_s, d_c) = (self.rtt.to(from), self.rtt.to(client));
        let wait = (first_ns - call.last_ns).max(0);
        let queued = (moved_before - call.reply_dir_moved_ns).clamp(0, wait);
        let idle = wait - queued;
        let beyond = d_s.min(idle);
        let network = (idle - beyond).min(self.queue_to(from));
        let moving = (call.last_ns - call.first_ns).max(0) + (last_ns - first_ns).max(0);
        for s in self.scopes(data_bytes.is_some()) {
            s.requests += 1;
            s.data_bytes += data_bytes.unwrap_or(0);
            s.last_ns = s.last_ns.max(last_ns);
            s.transfer_ns += moving + queued + network;
            s.moving_ns += moving;
            s.rtt_ns += d_c + beyond;
            s.server_ns += idle - beyond - network;
        }
        if self.released.len() >= MAX_RELEASED {
            self.released.pop_front();
        }
        let client_dir_moved_ns = self.moved_at(client, last_ns);
        self.released.push_back(Released {
            client,
            last_ns,
            client_dir_moved_ns,
        });
    }

    /// The sums a request adds to: every request's, and the data operations' too.
    fn scopes(&mut self, data: bool) -> impl Iterator<Item = &mut CycleSums> {
        let Pace { data: d, all, .. } = self;
        std::iter::once(all).chain(data.then_some(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// One request in flight, captured in the middle of a 100 ms path (40 ms to the server
    /// and back, 60 ms to the client and back): each cycle's parts come out as made.
    #[test]
    fn one_in_flight_split_without_remainder() {
        let mut p = Pace::default();
        p.rtt.min_ns = [60 * MS as u64, 40 * MS as u64];
        p.rtt.recent_ns = p.rtt.min_ns;
        // client a (0), server b (1); server 2 ms, reply passes in 5 ms, client thinks 3 ms
        let mut t = 0;
        for _ in 0..10 {
            let m = p.record(0, 100, t, t);
            let mark = p.call(0, t, t, m, true);
            let rf = t + 40 * MS + 2 * MS;
            let rl = rf + 5 * MS;
            let m = p.record(1, 65600, rf, rl);
            p.reply(1, &mark, rf, rl, m, Some(65536));
            t = rl + 60 * MS + 3 * MS;
        }
        let s = p.data;
        assert_eq!(s.requests, 10);
        assert_eq!(s.data_bytes, 655_360);
        assert_eq!(s.transfer_ns, 10 * 5 * MS);
        assert_eq!(s.rtt_ns, 10 * 100 * MS);
        assert_eq!(s.server_ns, 10 * 2 * MS);
        assert_eq!((s.client_ns, s.think_samples), (9 * 3 * MS, 9));
        assert_eq!(p.all, s);
        // one slot: the cycle sums to the span, less the last think and the last d_c
        assert_eq!(s.cycle_ns(), s.span_ns() + 60 * MS);
    }

    /// Replies queued behind each other in their direction: the wait is transfer, not
    /// server; calls queued in the client's socket: transfer, not think.
    #[test]
    fn queueing_behind_other_records_is_transfer() {
        let mut p = Pace::default();
        // four calls at once, replies back to back 10 ms each, server instantaneous
        let mut marks = Vec::new();
        for i in 0..4 {
            let m = p.record(0, 100, i, i);
            marks.push(p.call(0, i, i, m, true));
        }
        for (i, mark) in marks.iter().enumerate() {
            let rf = 10 + 10 * MS * i as i64;
            let m = p.record(1, 100, rf, rf + 10 * MS);
            p.reply(1, mark, rf, rf + 10 * MS, m, Some(1));
        }
        // the server part is what is left once the reply's turn came: 10, 9, 8, 7 ns
        assert_eq!(p.data.server_ns, 34);
        assert_eq!(p.data.transfer_ns, 4 * 10 * MS + (10 + 20 + 30) * MS);
        // a write passing for 30 ms while the client sends the next call into its socket
        // right after a reply: the call leaves when the write is through
        let mut p = Pace::default();
        let m = p.record(0, 100, 0, 0);
        let a = p.call(0, 0, 0, m, false);
        let m = p.record(1, 100, 5, 5);
        p.reply(1, &a, 5, 5, m, None);
        p.open(0, Some(0));
        let m = p.record(0, 100, 30 * MS, 30 * MS);
        assert_eq!(m, 30 * MS);
        p.call(0, 30 * MS, 30 * MS, m, false);
        assert_eq!(p.all.client_ns, 0);
        assert_eq!(p.all.transfer_ns, 30 * MS - 5);
    }
}
