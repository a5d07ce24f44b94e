//! A compact log-linear histogram of RTT samples: 16 sub-buckets per power of two (at most
//! 4.4 % relative error), 1 µs to ~18 min, 2.5 KiB per direction. The layout is the HDR
//! histogram's idea (Gil Tene, HdrHistogram) at a fixed precision. The first
//! [`EXACT_SAMPLES`] samples are kept exactly and the histogram is allocated only past them,
//! so the many short connections of a busy capture cost a few hundred bytes each.

use serde::{Deserialize, Serialize};

const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Values below 2^MIN_EXP ns share the first buckets linearly.
const MIN_EXP: u32 = 10;
const MAX_EXP: u32 = 50;
const BUCKETS: usize = ((MAX_EXP - MIN_EXP + 1) as usize) * SUB;
/// Samples kept exactly before the histogram is allocated.
pub const EXACT_SAMPLES: usize = 32;

/// RTT statistics of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RttSummary {
    /// Number of samples.
    pub samples: u64,
    /// Smallest sample, ns (exact).
    pub min_ns: u64,
    /// Median, ns (within 4.4 %).
    pub median_ns: u64,
    /// 95th percentile, ns (within 4.4 %).
    pub p95_ns: u64,
    /// Largest sample, ns (exact).
    pub max_ns: u64,
    /// Mean, ns (exact).
    pub mean_ns: u64,
}

/// Recorder of RTT samples.
#[derive(Debug, Clone, Default)]
pub struct RttHistogram {
    exact: Vec<u64>,
    counts: Option<Box<[u32; BUCKETS]>>,
    n: u64,
    min: u64,
    max: u64,
    sum: u128,
}

fn bucket(v: u64) -> usize {
    let v = v.max(1);
    let exp = 63 - v.leading_zeros();
    if exp < MIN_EXP {
        return (v >> (MIN_EXP - SUB_BITS)) as usize;
    }
    let exp = exp.min(MAX_EXP);
    let sub = ((v >> (exp - SUB_BITS)) as usize) & (SUB - 1);
    ((exp - MIN_EXP) as usize) * SUB + sub
}

fn bucket_value(i: usize) -> u64 {
    let exp = (i / SUB) as u32 + MIN_EXP;
    let sub = (i % SUB) as u64;
    // middle of the bucket
    let lo = (1u64 << exp) + (sub << (exp - SUB_BITS));
    lo + (1u64 << (exp - SUB_BITS)) / 2
}

impl RttHistogram {
    /// Records one sample in nanoseconds.
    pub fn record(&mut self, ns: u64) {
        if self.counts.is_none() && self.exact.len() < EXACT_SAMPLES {
            self.exact.push(ns);
        } else {
            let c = self.counts.get_or_insert_with(|| Box::new([0; BUCKETS]));
            for v in self.exact.drain(..).chain([ns]) {
                let b = bucket(v).min(BUCKETS - 1);
                c[b] = c[b].saturating_add(1);
            }
            self.exact = Vec::new();
        }
        if self.n == 0 || ns < self.min {
            self.min = ns;
        }
        self.max = self.max.max(ns);
        self.n += 1;
        self.sum += u128::from(ns);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Smallest sample.
    pub fn min(&self) -> Option<u64> {
        (self.n > 0).then_some(self.min)
    }

    /// The `q` quantile (0..1), ns.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.counts.is_none() {
            let mut v = self.exact.clone();
            v.sort_unstable();
            let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
            return v.get(rank - 1).copied().unwrap_or(0);
        }
        let Some(c) = &self.counts else { return 0 };
        let total: u64 = c.iter().map(|&x| u64::from(x)).sum();
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &x) in c.iter().enumerate() {
            seen += u64::from(x);
            if seen >= rank {
                return bucket_value(i).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// The summary.
    pub fn summary(&self) -> RttSummary {
        if self.n == 0 {
            return RttSummary::default();
        }
        RttSummary {
            samples: self.n,
            min_ns: self.min,
            median_ns: self.quantile(0.5),
            p95_ns: self.quantile(0.95),
            max_ns: self.max,
            mean_ns: (self.sum / u128::from(self.n)) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_within_precision() {
        let mut h = RttHistogram::default();
        for i in 1..=1000u64 {
            h.record(i * 100_000); // 0.1 .. 100 ms
        }
        let s = h.summary();
        assert_eq!(s.samples, 1000);
        assert_eq!(s.min_ns, 100_000);
        assert_eq!(s.max_ns, 100_000_000);
        let rel = |a: u64, b: f64| (a as f64 - b).abs() / b;
        assert!(rel(s.median_ns, 50_000_000.0) < 0.045, "{}", s.median_ns);
        assert!(rel(s.p95_ns, 95_000_000.0) < 0.045, "{}", s.p95_ns);
        assert_eq!(RttHistogram::default().summary(), RttSummary::default());
        h.record(0);
        h.record(u64::MAX);
        assert_eq!(h.summary().max_ns, u64::MAX);
        // few samples: exact
        let mut h = RttHistogram::default();
        for v in [5, 1, 4, 2, 3] {
            h.record(v * 1_000_000);
        }
        let s = h.summary();
        assert_eq!(
            (s.median_ns, s.p95_ns, s.min_ns),
            (3_000_000, 5_000_000, 1_000_000)
        );
    }
}
