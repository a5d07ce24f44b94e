//! Rate limiting of one job (fio `rate`, `rate_iops`): each direction has a schedule that
//! starts when the job starts; an op may begin once the bytes and ops already done in its
//! direction are due. Late ops are not made up by bursts beyond the schedule, and early ones
//! wait. No allocation, two multiplications per op.

use std::time::{Duration, Instant};

use crate::config::RateLimit;
use nsperf_core::data_path::DataOp;

#[derive(Debug, Clone, Copy, Default)]
struct Lane {
    ns_per_byte: f64,
    ns_per_op: f64,
    bytes: u64,
    ops: u64,
}

impl Lane {
    fn new(bytes_per_s: Option<u64>, iops: Option<u64>) -> Self {
        Lane {
            ns_per_byte: bytes_per_s.map_or(0.0, |r| 1e9 / r as f64),
            ns_per_op: iops.map_or(0.0, |r| 1e9 / r as f64),
            bytes: 0,
            ops: 0,
        }
    }

    #[inline]
    fn due_ns(&self) -> f64 {
        (self.bytes as f64 * self.ns_per_byte).max(self.ops as f64 * self.ns_per_op)
    }
}

/// The schedule of one job.
#[derive(Debug, Clone)]
pub struct Pacer {
    start: Instant,
    read: Lane,
    write: Lane,
}

impl Pacer {
    /// A pacer starting now, or `None` when nothing is limited.
    pub fn new(limit: &RateLimit, start: Instant) -> Option<Self> {
        if limit.is_unlimited() {
            return None;
        }
        Some(Pacer {
            start,
            read: Lane::new(limit.read_bytes_per_s, limit.read_iops),
            write: Lane::new(limit.write_bytes_per_s, limit.write_iops),
        })
    }

    fn lane(&mut self, kind: DataOp) -> &mut Lane {
        match kind {
            DataOp::Read => &mut self.read,
            DataOp::Write => &mut self.write,
        }
    }

    /// When the next op of `kind` may start.
    #[inline]
    pub fn due(&mut self, kind: DataOp) -> Instant {
        self.start + Duration::from_nanos(self.lane(kind).due_ns() as u64)
    }

    /// Sleeps until the next op of `kind` may start (returns at once when it is due).
    /// Returns false, without waiting, when that is after `deadline`, and false when Ctrl-C
    /// arrives while waiting (the wait is cut in slices of at most 50 ms to notice it).
    #[inline]
    pub fn wait(&mut self, kind: DataOp, deadline: Option<Instant>) -> bool {
        let due = self.due(kind);
        if deadline.is_some_and(|d| due > d) {
            return false;
        }
        loop {
            let now = Instant::now();
            if due <= now {
                return true;
            }
            if nsperf_core::signal::interrupted() {
                return false;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(50)));
        }
    }

    /// Counts an op of `kind` that moved `bytes`.
    #[inline]
    pub fn done(&mut self, kind: DataOp, bytes: u64) {
        let l = self.lane(kind);
        l.bytes += bytes;
        l.ops += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_per_direction() {
        let t0 = Instant::now();
        let lim = RateLimit {
            read_bytes_per_s: Some(1_000_000),
            write_iops: Some(100),
            ..Default::default()
        };
        let mut p = Pacer::new(&lim, t0).unwrap();
        assert_eq!(p.due(DataOp::Read), t0);
        p.done(DataOp::Read, 500_000);
        assert_eq!(p.due(DataOp::Read), t0 + Duration::from_millis(500));
        p.done(DataOp::Write, 1 << 20);
        p.done(DataOp::Write, 1 << 20);
        // Writes are limited by ops only: 2 ops at 100/s are due at 20 ms.
        assert_eq!(p.due(DataOp::Write), t0 + Duration::from_millis(20));
        assert!(Pacer::new(&RateLimit::default(), t0).is_none());
        // Not due before the deadline: no wait.
        let w = Instant::now();
        assert!(!p.wait(DataOp::Read, Some(t0 + Duration::from_millis(100))));
        assert!(w.elapsed() < Duration::from_millis(50));
    }
}
