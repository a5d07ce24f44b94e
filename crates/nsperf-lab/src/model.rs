//! The link model: one direction of an emulated link as a pure state machine. Time (`now_ns`)
//! and randomness (an [`Rng`]) are inputs, it holds no packets and does no I/O, so tests drive
//! it with a virtual clock and a seed; the forwarder is a thin driver around it.
//!
//! Order of the stages, as in netem: link state, random loss, the bottleneck (drop-tail
//! queue in front of a serializer at the link rate), then delay and jitter, reorder,
//! duplicate, corrupt. A packet offered here is one wire packet or an offloaded
//! super-packet of `segments` wire packets; rate and queue count wire packets and wire bytes.
//!
//! Invariants: without `jitter_reorder` and reorder probability, delivery times never go
//! backwards (jitter cannot reorder); the queue never holds more than its limit.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::config::{JitterDist, LinkParams, LossModel, QueueLimit};
use crate::rng::Rng;

/// A packet as the model sees it: its size on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WirePacket {
    /// Wire bytes, framing included, summed over all segments.
    pub bytes: u64,
    /// Wire packets it stands for (1, or the segment count of a super-packet).
    pub segments: u32,
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The bottleneck queue was full.
    Queue,
    /// The random loss model.
    Loss,
    /// The link was down (a partition).
    LinkDown,
}

/// What happens to an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Dropped on entry.
    Drop(DropReason),
    /// Delivered at `at_ns` (and maybe twice, maybe corrupted).
    Deliver(Delivery),
}

/// When and how a packet leaves the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// Delivery time, same clock as `now_ns`.
    pub at_ns: u64,
    /// Deliver a second copy at the same time.
    pub duplicate: bool,
    /// Flip one random bit before delivery.
    pub corrupt: bool,
    /// This packet skipped the delay (reorder).
    pub reordered: bool,
}

/// Counters of one direction, in wire packets and wire bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectionCounters {
    /// Packets offered to the link.
    pub offered_packets: u64,
    /// Packets delivered to the far side (duplicates included).
    pub forwarded_packets: u64,
    /// Bytes delivered to the far side.
    pub forwarded_bytes: u64,
    /// Dropped because the queue was full.
    pub dropped_queue_packets: u64,
    /// Dropped by the loss model.
    pub dropped_loss_packets: u64,
    /// Dropped because the link was down, on entry or while in flight.
    pub dropped_link_down_packets: u64,
    /// Extra copies delivered.
    pub duplicated_packets: u64,
    /// Packets delivered with a flipped bit.
    pub corrupted_packets: u64,
    /// Packets that skipped the delay.
    pub reordered_packets: u64,
    /// Most packets ever queued at the bottleneck.
    pub queue_max_packets: u64,
    /// Most bytes ever queued at the bottleneck.
    pub queue_max_bytes: u64,
}

/// One direction of a link.
#[derive(Debug, Clone)]
pub struct LinkModel {
    params: LinkParams,
    /// Packets at the bottleneck: (serialization end, bytes, segments), oldest first.
    queue: VecDeque<(u64, u64, u32)>,
    queued_packets: u64,
    queued_bytes: u64,
    busy_until_ns: u64,
    last_delivery_ns: u64,
    ge_bad: bool,
    counters: DirectionCounters,
}

impl LinkModel {
    /// A link with these parameters, idle.
    pub fn new(params: LinkParams) -> Self {
        LinkModel {
            params,
            queue: VecDeque::with_capacity(1024),
            queued_packets: 0,
            queued_bytes: 0,
            busy_until_ns: 0,
            last_delivery_ns: 0,
            ge_bad: false,
            counters: DirectionCounters::default(),
        }
    }

    /// The current parameters.
    pub fn params(&self) -> &LinkParams {
        &self.params
    }

    /// Changes the parameters; packets already queued or in flight keep their times.
    pub fn set_params(&mut self, params: LinkParams) {
        if params.rate_bps.is_none() {
            self.busy_until_ns = 0;
        }
        self.params = params;
    }

    /// The counters so far.
    pub fn counters(&self) -> &DirectionCounters {
        &self.counters
    }

    fn drain(&mut self, now_ns: u64) {
        while let Some(&(end, bytes, segs)) = self.queue.front() {
            if end > now_ns {
                break;
            }
            self.queue.pop_front();
            self.queued_packets -= u64::from(segs);
            self.queued_bytes -= bytes;
        }
    }

    /// Packets and bytes at the bottleneck at `now_ns` (the one being sent included).
    pub fn queue_occupancy(&mut self, now_ns: u64) -> (u64, u64) {
        self.drain(now_ns);
        (self.queued_packets, self.queued_bytes)
    }

    fn lost(&mut self, rng: &mut Rng) -> bool {
        match self.params.loss {
            LossModel::None => false,
            LossModel::Bernoulli { p } => rng.chance(p),
            LossModel::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
            } => {
                let lost = rng.chance(if self.ge_bad { bad_loss } else { good_loss });
                if self.ge_bad {
                    if rng.chance(r) {
                        self.ge_bad = false;
                    }
                } else if rng.chance(p) {
                    self.ge_bad = true;
                }
                lost
            }
        }
    }

    fn jitter(&self, rng: &mut Rng) -> i64 {
        let j = self.params.jitter_ns as f64;
        if j == 0.0 {
            return 0;
        }
        let x = match self.params.jitter_dist {
            JitterDist::Uniform => (2.0 * rng.unit() - 1.0) * j,
            JitterDist::Normal => rng.normal() * j,
            // Pareto(3) has mean 1.5 and standard deviation sqrt(3)/2.
            JitterDist::Pareto => (rng.pareto(3.0) - 1.5) / (3f64.sqrt() / 2.0) * j,
        };
        x as i64
    }

    /// Offers a packet arriving at `now_ns`: drop it or say when it is delivered.
    pub fn offer(&mut self, now_ns: u64, pkt: WirePacket, rng: &mut Rng) -> Verdict {
        self.drain(now_ns);
        let segs = u64::from(pkt.segments);
        self.counters.offered_packets += segs;
        if !self.params.up {
            self.counters.dropped_link_down_packets += segs;
            return Verdict::Drop(DropReason::LinkDown);
        }
        if self.lost(rng) {
            self.counters.dropped_loss_packets += segs;
            return Verdict::Drop(DropReason::Loss);
        }
        let sent_ns = match self.params.rate_bps {
            Some(rate) if rate > 0.0 => {
                let fits = match self.params.queue {
                    QueueLimit::Packets(n) => self.queued_packets + segs <= n,
                    QueueLimit::Bytes(b) => self.queued_bytes + pkt.bytes <= b,
                };
                if !fits {
                    self.counters.dropped_queue_packets += segs;
                    return Verdict::Drop(DropReason::Queue);
                }
                let start = now_ns.max(self.busy_until_ns);
                let tx_ns = (pkt.bytes as f64 * 8e9 / rate).ceil() as u64;
                let end = start + tx_ns;
                self.busy_until_ns = end;
                self.queue.push_back((end, pkt.bytes, pkt.segments));
                self.queued_packets += segs;
                self.queued_bytes += pkt.bytes;
                self.counters.queue_max_packets =
                    self.counters.queue_max_packets.max(self.queued_packets);
                self.counters.queue_max_bytes =
                    self.counters.queue_max_bytes.max(self.queued_bytes);
                end
            }
            _ => now_ns,
        };
        let p = self.params;
        let mut reordered = false;
        let at_ns = if p.delay_ns > 0 && rng.chance(p.reorder) {
            reordered = true;
            self.counters.reordered_packets += segs;
            sent_ns
        } else {
            let delay = (p.delay_ns as i64 + self.jitter(rng)).max(0) as u64;
            let mut at = sent_ns + delay;
            if !p.jitter_reorder {
                at = at.max(self.last_delivery_ns);
                self.last_delivery_ns = at;
            }
            at
        };
        let duplicate = rng.chance(p.duplicate);
        let corrupt = rng.chance(p.corrupt);
        Verdict::Deliver(Delivery {
            at_ns,
            duplicate,
            corrupt,
            reordered,
        })
    }

    /// Called when a delivered packet's time comes: false (and counted as dropped) when the
    /// link went down meanwhile, true (and counted as forwarded) otherwise.
    pub fn release(&mut self, pkt: WirePacket, delivery: &Delivery) -> bool {
        let segs = u64::from(pkt.segments);
        if !self.params.up {
            self.counters.dropped_link_down_packets += segs;
            return false;
        }
        let copies = if delivery.duplicate { 2 } else { 1 };
        self.counters.forwarded_packets += segs * copies;
        self.counters.forwarded_bytes += pkt.bytes * copies;
        if delivery.duplicate {
            self.counters.duplicated_packets += segs;
        }
        if delivery.corrupt {
            self.counters.corrupted_packets += segs;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LinkChange;

    const PKT: WirePacket = WirePacket {
        bytes: 1514,
        segments: 1,
    };

    fn params(flags: &[(&str, &str)]) -> LinkParams {
        let mut c = LinkChange::default();
        for (f, v) in flags {
            c.set_flag(f, Some(v)).unwrap();
        }
        let mut p = LinkParams::default();
        c.apply(&mut p);
        p
    }

    fn at(v: Verdict) -> u64 {
        match v {
            Verdict::Deliver(d) => d.at_ns,
            Verdict::Drop(r) => panic!("dropped: {r:?}"),
        }
    }

    #[test]
    fn unlimited_link_adds_exactly_the_delay() {
        let mut m = LinkModel::new(params(&[("rtt", "50ms")]));
        let mut rng = Rng::seeded(1);
        assert_eq!(at(m.offer(1_000, PKT, &mut rng)), 1_000 + 25_000_000);
        assert_eq!(m.queue_occupancy(1_000), (0, 0));
    }

    #[test]
    fn rate_serializes_back_to_back() {
        // 45 Mbit/s: a 1514-byte frame takes 269.2 µs.
        let mut m = LinkModel::new(params(&[("rate", "45mbit"), ("queue", "2000")]));
        let mut rng = Rng::seeded(1);
        let mut last = 0;
        for _ in 0..1000 {
            last = at(m.offer(0, PKT, &mut rng));
        }
        let expect = 1000.0 * 1514.0 * 8.0 / 45e6 * 1e9;
        assert!((last as f64 - expect).abs() < 1000.0, "{last} vs {expect}");
        assert_eq!(m.queue_occupancy(0), (1000, 1_514_000));
        assert_eq!(m.queue_occupancy(last), (0, 0));
        assert_eq!(m.counters().queue_max_packets, 1000);
    }

    #[test]
    fn drop_tail_at_the_packet_and_byte_limits() {
        let mut m = LinkModel::new(params(&[("rate", "10mbit"), ("queue", "10")]));
        let mut rng = Rng::seeded(1);
        let v: Vec<Verdict> = (0..15).map(|_| m.offer(0, PKT, &mut rng)).collect();
        assert!(v[..10].iter().all(|v| matches!(v, Verdict::Deliver(_))));
        assert!(
            v[10..]
                .iter()
                .all(|v| *v == Verdict::Drop(DropReason::Queue))
        );
        assert_eq!(m.counters().dropped_queue_packets, 5);
        // A super-packet of 4 segments counts 4 against the limit.
        let mut m = LinkModel::new(params(&[("rate", "10mbit"), ("queue", "5")]));
        let sp = WirePacket {
            bytes: 4 * 1514,
            segments: 4,
        };
        assert!(matches!(m.offer(0, sp, &mut rng), Verdict::Deliver(_)));
        assert!(matches!(m.offer(0, sp, &mut rng), Verdict::Drop(_)));
        assert!(matches!(m.offer(0, PKT, &mut rng), Verdict::Deliver(_)));
        let mut m = LinkModel::new(params(&[("rate", "10mbit"), ("queue", "3000b")]));
        assert!(matches!(m.offer(0, PKT, &mut rng), Verdict::Deliver(_)));
        assert!(matches!(m.offer(0, PKT, &mut rng), Verdict::Drop(_)));
    }

    #[test]
    fn queue_drains_with_virtual_time() {
        let mut m = LinkModel::new(params(&[("rate", "8mbit"), ("queue", "3")]));
        let mut rng = Rng::seeded(1);
        let p = WirePacket {
            bytes: 1000,
            segments: 1,
        }; // 1 ms each at 8 Mbit/s
        for _ in 0..3 {
            m.offer(0, p, &mut rng);
        }
        assert_eq!(m.queue_occupancy(0).0, 3);
        assert_eq!(m.queue_occupancy(1_000_000).0, 2);
        assert_eq!(m.queue_occupancy(2_500_000).0, 1);
        assert!(matches!(
            m.offer(2_500_000, p, &mut rng),
            Verdict::Deliver(_)
        ));
        assert_eq!(at(m.offer(2_500_000, p, &mut rng)), 5_000_000);
    }

    #[test]
    fn jitter_without_reorder_never_goes_backwards() {
        for dist in ["uniform", "normal", "pareto"] {
            let mut m = LinkModel::new(params(&[
                ("delay", "10ms"),
                ("jitter", "5ms"),
                ("jitter-dist", dist),
            ]));
            let mut rng = Rng::seeded(3);
            let mut last = 0;
            let mut spread = Vec::new();
            // Packets 2 ms apart: the no-reorder rule binds often, yet jitter stays visible.
            for i in 0..10_000u64 {
                let t = at(m.offer(i * 2_000_000, PKT, &mut rng));
                assert!(t >= last, "{dist}: reordered at {i}");
                spread.push(t - i * 2_000_000);
                last = t;
            }
            let min = *spread.iter().min().unwrap();
            let max = *spread.iter().max().unwrap();
            assert!(
                max - min > 4_000_000,
                "{dist}: jitter too small {min}..{max}"
            );
        }
    }

    #[test]
    fn jitter_reorder_when_asked() {
        let mut p = params(&[("delay", "10ms"), ("jitter", "5ms")]);
        p.jitter_reorder = true;
        let mut m = LinkModel::new(p);
        let mut rng = Rng::seeded(3);
        let times: Vec<u64> = (0..1000u64)
            .map(|i| at(m.offer(i * 100_000, PKT, &mut rng)))
            .collect();
        assert!(times.windows(2).any(|w| w[1] < w[0]));
    }

    #[test]
    fn bernoulli_loss_rate_within_binomial_interval() {
        let mut m = LinkModel::new(params(&[("loss", "1%")]));
        let mut rng = Rng::seeded(42);
        let n = 100_000;
        for i in 0..n {
            m.offer(i, PKT, &mut rng);
        }
        let lost = m.counters().dropped_loss_packets as f64;
        // 99 % interval of Binomial(n, 0.01): n p ± 2.576 sqrt(n p (1-p)).
        let sd = (n as f64 * 0.01 * 0.99).sqrt();
        assert!((lost - 1000.0).abs() < 2.576 * sd, "{lost}");
    }

    #[test]
    fn gilbert_elliott_mean_and_bursts() {
        // p = 1 %, r = 25 %: stationary bad share p/(p+r) = 1/26, all lost there.
        let mut m = LinkModel::new(params(&[("loss", "ge:1%,25%")]));
        let mut rng = Rng::seeded(9);
        let n = 200_000u64;
        let mut lost = Vec::new();
        for i in 0..n {
            lost.push(matches!(m.offer(i, PKT, &mut rng), Verdict::Drop(_)));
        }
        let rate = lost.iter().filter(|&&l| l).count() as f64 / n as f64;
        assert!((rate - 1.0 / 26.0).abs() < 0.004, "{rate}");
        // Bursty: mean run of losses is 1/r = 4 packets.
        let runs = lost.windows(2).filter(|w| w[0] && !w[1]).count() as f64;
        let mean_run = lost.iter().filter(|&&l| l).count() as f64 / runs;
        assert!((mean_run - 4.0).abs() < 0.5, "{mean_run}");
    }

    #[test]
    fn link_down_drops_on_entry_and_in_flight() {
        let mut m = LinkModel::new(params(&[("delay", "10ms")]));
        let mut rng = Rng::seeded(1);
        let d = match m.offer(0, PKT, &mut rng) {
            Verdict::Deliver(d) => d,
            v => panic!("{v:?}"),
        };
        let mut p = *m.params();
        p.up = false;
        m.set_params(p);
        assert_eq!(
            m.offer(1, PKT, &mut rng),
            Verdict::Drop(DropReason::LinkDown)
        );
        assert!(!m.release(PKT, &d));
        assert_eq!(m.counters().dropped_link_down_packets, 2);
        p.up = true;
        m.set_params(p);
        assert!(m.release(PKT, &d));
        assert_eq!(m.counters().forwarded_packets, 1);
    }

    #[test]
    fn reorder_duplicate_corrupt_rates() {
        let mut m = LinkModel::new(params(&[
            ("delay", "10ms"),
            ("reorder", "10%"),
            ("duplicate", "5%"),
            ("corrupt", "2%"),
        ]));
        let mut rng = Rng::seeded(5);
        let (mut r, mut d, mut c) = (0, 0, 0);
        for i in 0..100_000u64 {
            if let Verdict::Deliver(x) = m.offer(i * 1000, PKT, &mut rng) {
                r += u32::from(x.reordered);
                d += u32::from(x.duplicate);
                c += u32::from(x.corrupt);
                if x.reordered {
                    assert_eq!(x.at_ns, i * 1000);
                }
            }
        }
        assert!((9_500..10_500).contains(&r), "{r}");
        assert!((4_600..5_400).contains(&d), "{d}");
        assert!((1_750..2_250).contains(&c), "{c}");
    }
}
