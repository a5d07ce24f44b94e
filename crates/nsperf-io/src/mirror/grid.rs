//! The mirror's figures over the run's own intervals: per interval, the writes the peer
//! acknowledged, their bytes (the link's share of the mirror), the wait from a write's send
//! to its ack (the round trip plus, for C, the peer's write), and the peer's write time from
//! its acks (its disk). An ack counts in the interval in which it arrived, on the grid of the
//! job's clock (the same start and length as the run's intervals), so the two tables line up
//! row by row. Acks before the measured start (the warm-up) are not counted.
//!
//! One cell per interval, grown as the run reaches a new interval (preallocated from the
//! deadline when there is one): no allocation per write.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The mirror in one interval of the run, summed over its jobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MirrorInterval {
    /// Interval start, seconds since the measured pass started.
    pub start_s: f64,
    /// Interval length, s (the run's interval's).
    pub length_s: f64,
    /// Writes the peer acknowledged in the interval.
    pub acked_writes: u64,
    /// Their data bytes.
    pub acked_bytes: u64,
    /// `acked_bytes` over the interval, bytes per second: the mirror's rate on the link.
    pub link_bytes_per_s: f64,
    /// From a write's send to its ack, mean, ns.
    pub ack_wait_mean_ns: f64,
    /// The peer's time to write one (protocol C, from its acks; 0 otherwise), mean, ns.
    pub peer_write_mean_ns: f64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Cell {
    writes: u64,
    bytes: u64,
    wait_ns: u64,
    peer_ns: u64,
}

/// One job's acks on the run's interval grid.
#[derive(Debug)]
pub(crate) struct AckGrid {
    measure: Instant,
    interval: Duration,
    cells: Vec<Cell>,
}

impl AckGrid {
    /// A grid starting at `measure`, `interval` long each, with room up to `deadline`.
    pub(crate) fn new(measure: Instant, interval: Duration, deadline: Option<Instant>) -> Self {
        let interval = interval.max(Duration::from_millis(1));
        let expect = deadline.map_or(64, |d| {
            (d.saturating_duration_since(measure).as_nanos() / interval.as_nanos()) as usize + 2
        });
        AckGrid {
            measure,
            interval,
            cells: Vec::with_capacity(expect.min(1 << 20)),
        }
    }

    /// An ack at `now` of a write of `bytes` sent at `sent_at`, which the peer took
    /// `peer_ns` to write.
    #[inline]
    pub(crate) fn ack(&mut self, now: Instant, sent_at: Instant, bytes: u64, peer_ns: u64) {
        let Some(since) = now.checked_duration_since(self.measure) else {
            return;
        };
        let i = (since.as_nanos() / self.interval.as_nanos()) as usize;
        if i >= self.cells.len() {
            self.cells.resize(i + 1, Cell::default());
        }
        let c = &mut self.cells[i];
        c.writes += 1;
        c.bytes += bytes;
        c.wait_ns += now.saturating_duration_since(sent_at).as_nanos() as u64;
        c.peer_ns += peer_ns;
    }

    /// Adds this job's cells to the run's intervals, index by index (every job has the
    /// same grid).
    pub(crate) fn add_to(&self, out: &mut Vec<MirrorInterval>) {
        let len = self.interval.as_secs_f64();
        if out.len() < self.cells.len() {
            let from = out.len();
            out.extend((from..self.cells.len()).map(|i| MirrorInterval {
                start_s: i as f64 * len,
                length_s: len,
                ..MirrorInterval::default()
            }));
        }
        for (o, c) in out.iter_mut().zip(&self.cells) {
            let n = o.acked_writes + c.writes;
            if n > 0 {
                let mean =
                    |old: f64, sum: u64| (old * o.acked_writes as f64 + sum as f64) / n as f64;
                o.ack_wait_mean_ns = mean(o.ack_wait_mean_ns, c.wait_ns);
                o.peer_write_mean_ns = mean(o.peer_write_mean_ns, c.peer_ns);
            }
            o.acked_writes = n;
            o.acked_bytes += c.bytes;
            o.link_bytes_per_s = o.acked_bytes as f64 / o.length_s;
        }
    }
}

/// Gives the mirror's intervals the lengths of the run's own (`lengths`: the aggregate
/// intervals' `length_s`, the last one cut at the run's end) and their rates over them; a
/// mirror interval past the run's last (acks of writes that completed as the run stopped)
/// joins the last.
pub(crate) fn align(mirror: &mut Vec<MirrorInterval>, lengths: &[f64]) {
    if lengths.is_empty() {
        return;
    }
    while mirror.len() > lengths.len() {
        let extra = mirror.pop().expect("longer than lengths");
        let last = mirror.last_mut().expect("lengths is not empty");
        let n = last.acked_writes + extra.acked_writes;
        if n > 0 {
            let mean = |a: f64, b: f64| {
                (a * last.acked_writes as f64 + b * extra.acked_writes as f64) / n as f64
            };
            last.ack_wait_mean_ns = mean(last.ack_wait_mean_ns, extra.ack_wait_mean_ns);
            last.peer_write_mean_ns = mean(last.peer_write_mean_ns, extra.peer_write_mean_ns);
        }
        last.acked_writes = n;
        last.acked_bytes += extra.acked_bytes;
    }
    for (m, &len) in mirror.iter_mut().zip(lengths) {
        m.length_s = len;
        m.link_bytes_per_s = if len > 0.0 {
            m.acked_bytes as f64 / len
        } else {
            0.0
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn acks_land_in_their_interval_and_two_jobs_add_up() {
        let t = Instant::now();
        let mut a = AckGrid::new(t, 100 * MS, Some(t + 300 * MS));
        // Before the measured start: not counted.
        a.ack(t - MS, t - 5 * MS, 4096, 10);
        a.ack(t + 10 * MS, t + 8 * MS, 4096, 1000);
        a.ack(t + 20 * MS, t + 16 * MS, 4096, 3000);
        a.ack(t + 250 * MS, t + 249 * MS, 8192, 0);
        let mut b = AckGrid::new(t, 100 * MS, None);
        b.ack(t + 50 * MS, t + 44 * MS, 4096, 5000);
        let mut out = Vec::new();
        a.add_to(&mut out);
        b.add_to(&mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].acked_writes, 3);
        assert_eq!(out[0].acked_bytes, 3 * 4096);
        // waits 2, 4 and 6 ms; peer writes 1, 3 and 5 µs
        assert!((out[0].ack_wait_mean_ns - 4e6).abs() < 1.0, "{:?}", out[0]);
        assert!((out[0].peer_write_mean_ns - 3000.0).abs() < 1e-9);
        assert!((out[0].link_bytes_per_s - 3.0 * 4096.0 / 0.1).abs() < 1e-6);
        assert_eq!(out[1].acked_writes, 0);
        assert_eq!(out[1].link_bytes_per_s, 0.0);
        assert_eq!(out[2].acked_bytes, 8192);
        assert!((out[2].start_s - 0.2).abs() < 1e-12);
    }

    #[test]
    fn aligned_to_the_runs_intervals_the_tail_joins_the_last() {
        let t = Instant::now();
        let mut g = AckGrid::new(t, 100 * MS, None);
        g.ack(t + 10 * MS, t, 1000, 0);
        g.ack(t + 150 * MS, t + 140 * MS, 1000, 0);
        // Acked just after the run's end (0.15 s): its last interval is 0.05 s long.
        g.ack(t + 210 * MS, t + 190 * MS, 1000, 0);
        let mut out = Vec::new();
        g.add_to(&mut out);
        align(&mut out, &[0.1, 0.05]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].acked_writes, 2);
        assert!((out[1].ack_wait_mean_ns - 15e6).abs() < 1.0, "{:?}", out[1]);
        assert!((out[1].link_bytes_per_s - 2000.0 / 0.05).abs() < 1e-6);
        assert!((out[0].link_bytes_per_s - 1000.0 / 0.1).abs() < 1e-6);
    }
}
