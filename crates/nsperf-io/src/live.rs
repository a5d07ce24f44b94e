//! The totals a job publishes while it runs, for a live progress line and a metrics
//! endpoint: bytes and ops, and each direction's latency in 14 buckets a factor of 4 apart.
//! The job is the only writer (relaxed stores), the reader loads them relaxed; nothing here
//! is on the job's path unless someone reads it.

use nsperf_core::data_path::DataOp;
use std::sync::atomic::{AtomicU64, Ordering};

/// Totals of one job published while it runs, for a live progress line and a metrics
/// endpoint (relaxed stores by the job, the only writer; relaxed loads by the reader; the
/// totals on a cache line of their own).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct LiveJob {
    /// Measured bytes read so far.
    pub read_bytes: AtomicU64,
    /// Measured bytes written so far.
    pub write_bytes: AtomicU64,
    /// Measured ops so far.
    pub ops: AtomicU64,
    /// Measured read ops so far.
    pub read_ops: AtomicU64,
    /// Publish each op's latency too (in `latency`): only when someone reads it.
    pub with_latency: bool,
    /// Latency of the measured reads, then writes.
    pub latency: [LiveLatency; 2],
}

/// Number of live latency buckets: upper bounds of 4^k µs-ish powers of two
/// ([`LIVE_LATENCY_BOUNDS_NS`]) and one without bound.
pub const LIVE_LATENCY_BUCKETS: usize = 14;

/// Upper bounds of the live latency buckets, ns: 2^10 (1.02 µs), 2^12, … 2^34 (17.2 s),
/// a factor of 4 apart, so the bucket of a latency is found from its bit length.
pub const LIVE_LATENCY_BOUNDS_NS: [u64; LIVE_LATENCY_BUCKETS - 1] = {
    let mut b = [0u64; LIVE_LATENCY_BUCKETS - 1];
    let mut i = 0;
    while i < b.len() {
        b[i] = 1 << (10 + 2 * i);
        i += 1;
    }
    b
};

/// The live bucket of a latency: the first whose bound is at least `ns`.
#[inline]
pub fn live_latency_bucket(ns: u64) -> usize {
    // ceil(log2(ns)): bucket k holds 2^(10+2k-2) < ns <= 2^(10+2k).
    let bits = (64 - ns.saturating_sub(1).leading_zeros()) as usize;
    if bits <= 10 {
        0
    } else {
        ((bits - 9) / 2).min(LIVE_LATENCY_BUCKETS - 1)
    }
}

/// One direction's latency as the job publishes it.
#[derive(Debug, Default)]
pub struct LiveLatency {
    /// Sum of the latencies, ns.
    pub sum_ns: AtomicU64,
    /// Ops per bucket (not cumulative).
    pub buckets: [AtomicU64; LIVE_LATENCY_BUCKETS],
}

/// A copy of one direction's live latency.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyBuckets {
    /// Sum of the latencies, ns.
    pub sum_ns: u64,
    /// Ops per bucket (not cumulative), bounds [`LIVE_LATENCY_BOUNDS_NS`] and one unbounded.
    pub counts: [u64; LIVE_LATENCY_BUCKETS],
}

impl LatencyBuckets {
    /// Ops counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    #[inline]
    pub(crate) fn add(&mut self, bucket: usize, ns: u64) {
        self.sum_ns += ns;
        self.counts[bucket] += 1;
    }
}

impl LiveLatency {
    /// What was published so far.
    pub fn load(&self) -> LatencyBuckets {
        let mut b = LatencyBuckets {
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
            ..LatencyBuckets::default()
        };
        for (c, a) in b.counts.iter_mut().zip(&self.buckets) {
            *c = a.load(Ordering::Relaxed);
        }
        b
    }
}

impl LiveJob {
    /// A job's live totals, with the latency of each op when `with_latency`.
    pub fn new(with_latency: bool) -> Self {
        LiveJob {
            with_latency,
            ..LiveJob::default()
        }
    }

    /// Publishes the one bucket (and the sum) that an op of `kind` changed in `local`.
    #[inline]
    pub(crate) fn publish_latency(&self, kind: DataOp, bucket: usize, local: &LatencyBuckets) {
        let l = &self.latency[kind as usize];
        l.sum_ns.store(local.sum_ns, Ordering::Relaxed);
        l.buckets[bucket].store(local.counts[bucket], Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_lands_in_the_first_bucket_whose_bound_holds_it() {
        let bucket_by_search = |ns: u64| {
            LIVE_LATENCY_BOUNDS_NS
                .iter()
                .position(|&b| ns <= b)
                .unwrap_or(LIVE_LATENCY_BUCKETS - 1)
        };
        assert_eq!(LIVE_LATENCY_BOUNDS_NS[0], 1024);
        assert_eq!(LIVE_LATENCY_BOUNDS_NS[12], 1 << 34);
        let mut ns = 0u64;
        while ns < 1 << 40 {
            for x in [ns, ns + 1, ns.saturating_sub(1), ns * 3 / 2] {
                assert_eq!(live_latency_bucket(x), bucket_by_search(x), "{x} ns");
            }
            ns = if ns == 0 { 1 } else { ns * 2 };
        }
        assert_eq!(live_latency_bucket(u64::MAX), LIVE_LATENCY_BUCKETS - 1);
    }

    #[test]
    fn published_latency_adds_up() {
        let live = LiveJob::new(true);
        let mut local = LatencyBuckets::default();
        for ns in [500, 3000, 3000, 1 << 36] {
            let b = live_latency_bucket(ns);
            local.add(b, ns);
            live.publish_latency(DataOp::Write, b, &local);
        }
        let w = live.latency[DataOp::Write as usize].load();
        assert_eq!(w, local);
        assert_eq!(w.count(), 4);
        assert_eq!(w.counts[0], 1);
        assert_eq!(w.counts[1], 2);
        assert_eq!(w.counts[LIVE_LATENCY_BUCKETS - 1], 1);
        assert_eq!(live.latency[DataOp::Read as usize].load().count(), 0);
    }
}
