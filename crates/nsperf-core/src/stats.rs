//! Statistics shared by every engine: summaries of interval series (mean, sustained mean after
//! warm-up, peak), order statistics, and latency histograms.
//!
//! Percentiles of small samples use the nearest-rank method (Hyndman & Fan 1996, definition 1),
//! which always returns an observed value; latency distributions use an HDR histogram
//! (Tene, HdrHistogram: 3 significant digits over 1 ns .. 1 h), so recording one sample is
//! constant time and allocation-free.

use serde::{Deserialize, Serialize};

/// Arithmetic mean; `None` for an empty slice.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        None
    } else {
        Some(xs.iter().sum::<f64>() / xs.len() as f64)
    }
}

/// Sample standard deviation (n − 1 denominator); `None` with fewer than two values.
pub fn stddev(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64;
    Some(var.sqrt())
}

/// Nearest-rank percentile (`p` in 0..=100) of unsorted values (Hyndman & Fan definition 1).
pub fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p.clamp(0.0, 100.0) / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.saturating_sub(1).min(v.len() - 1)])
}

/// Median (nearest rank, lower middle for even counts).
pub fn median(xs: &[f64]) -> Option<f64> {
    percentile(xs, 50.0)
}

/// Summary of a per-interval rate series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesSummary {
    /// Mean over all intervals, weighted by interval length.
    pub mean: f64,
    /// Mean over the intervals that start at or after the warm-up.
    pub sustained_mean: f64,
    /// The highest interval value.
    pub peak: f64,
    /// The lowest interval value after warm-up.
    pub min: f64,
    /// Number of intervals summarised (after warm-up).
    pub intervals: usize,
}

/// Summarises a series of `(start_s, length_s, value)` intervals, ignoring for the sustained
/// figures those that start before `warmup_s`.
pub fn summarize_series(series: &[(f64, f64, f64)], warmup_s: f64) -> SeriesSummary {
    let weighted = |it: &mut dyn Iterator<Item = &(f64, f64, f64)>| {
        let (mut num, mut den) = (0.0, 0.0);
        for &(_, len, v) in it {
            num += v * len;
            den += len;
        }
        if den > 0.0 { num / den } else { 0.0 }
    };
    let steady: Vec<&(f64, f64, f64)> = series
        .iter()
        .filter(|(start, _, _)| *start + 1e-9 >= warmup_s)
        .collect();
    SeriesSummary {
        mean: weighted(&mut series.iter()),
        sustained_mean: weighted(&mut steady.iter().copied()),
        peak: series.iter().map(|s| s.2).fold(0.0, f64::max),
        min: if steady.is_empty() {
            0.0
        } else {
            steady.iter().map(|s| s.2).fold(f64::INFINITY, f64::min)
        },
        intervals: steady.len(),
    }
}

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest sample.
    pub max_ns: u64,
}

/// A latency histogram: constant-time, allocation-free recording after creation.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    h: hdrhistogram::Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// Tracks 1 ns .. 1 hour with 3 significant digits.
    pub fn new() -> Self {
        let h = hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
            .expect("constant bounds are valid");
        LatencyHistogram { h }
    }

    /// Records one latency; values beyond the range are clamped to it.
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
    }

    /// Adds another histogram's samples to this one.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Both have the same bounds, so adding cannot fail.
        let _ = self.h.add(&other.h);
    }

    /// Number of samples recorded.
    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// Forgets all samples, keeping the allocation.
    pub fn reset(&mut self) {
        self.h.reset();
    }

    /// The percentile summary.
    pub fn summary(&self) -> LatencySummary {
        if self.h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.h.len(),
            min_ns: self.h.min(),
            mean_ns: self.h.mean(),
            p50_ns: self.h.value_at_quantile(0.50),
            p90_ns: self.h.value_at_quantile(0.90),
            p99_ns: self.h.value_at_quantile(0.99),
            p999_ns: self.h.value_at_quantile(0.999),
            max_ns: self.h.max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_statistics() {
        let xs = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(mean(&xs), Some(3.0));
        assert_eq!(median(&xs), Some(3.0));
        assert_eq!(percentile(&xs, 100.0), Some(5.0));
        assert_eq!(percentile(&xs, 0.0), Some(1.0));
        assert_eq!(percentile(&xs, 90.0), Some(5.0));
        assert!((stddev(&xs).unwrap() - 1.5811388).abs() < 1e-6);
        assert_eq!(mean(&[]), None);
        assert_eq!(stddev(&[1.0]), None);
    }

    #[test]
    fn series_warmup_excluded() {
        // 1 s intervals: slow start then steady 10.
        let s = [
            (0.0, 1.0, 2.0),
            (1.0, 1.0, 10.0),
            (2.0, 1.0, 10.0),
            (3.0, 0.5, 12.0),
        ];
        let x = summarize_series(&s, 1.0);
        assert!((x.mean - (2.0 + 10.0 + 10.0 + 6.0) / 3.5).abs() < 1e-9);
        assert!((x.sustained_mean - (10.0 + 10.0 + 6.0) / 2.5).abs() < 1e-9);
        assert_eq!(x.peak, 12.0);
        assert_eq!(x.min, 10.0);
        assert_eq!(x.intervals, 3);
        assert_eq!(summarize_series(&[], 0.0), SeriesSummary::default());
    }

    #[test]
    fn latency_percentiles() {
        let mut h = LatencyHistogram::new();
        for i in 1..=1000u64 {
            h.record_ns(i * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50_ns as f64 - 500_000.0).abs() / 500_000.0 < 0.002);
        assert!((s.p99_ns as f64 - 990_000.0).abs() / 990_000.0 < 0.002);
        assert!(s.max_ns >= 999_000);
        h.record_ns(u64::MAX);
        assert_eq!(h.count(), 1001);
    }
}
