//! Outliers among repetitions and the steady state of a run's time series.
//!
//! - outliers by Tukey's fences, 1.5 × IQR beyond the quartiles (Tukey 1977, *Exploratory Data
//!   Analysis*);
//! - steady state of a series by MSER (White 1997, "An effective truncation heuristic for
//!   bias reduction in simulation output"): the truncation point that minimises the standard
//!   error of the remaining mean, searched over the first half.

use nsperf_core::stats::percentile;
use serde::Serialize;

use crate::model::SeriesPoint;

/// Indices of the values outside `[Q1 − 1.5 IQR, Q3 + 1.5 IQR]` (needs at least 4 values).
pub fn tukey_outliers(xs: &[f64]) -> Vec<usize> {
    if xs.len() < 4 {
        return Vec::new();
    }
    let (Some(q1), Some(q3)) = (percentile(xs, 25.0), percentile(xs, 75.0)) else {
        return Vec::new();
    };
    let iqr = q3 - q1;
    let (lo, hi) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
    xs.iter()
        .enumerate()
        .filter(|(_, x)| **x < lo || **x > hi)
        .map(|(i, _)| i)
        .collect()
}

/// MSER truncation point: the index where the steady state starts.
pub fn steady_state_start(xs: &[f64]) -> usize {
    let n = xs.len();
    if n < 3 {
        return 0;
    }
    let mut best = (f64::MAX, 0);
    for d in 0..=n / 2 {
        let rest = &xs[d..];
        let m = rest.iter().sum::<f64>() / rest.len() as f64;
        let ss: f64 = rest.iter().map(|x| (x - m) * (x - m)).sum();
        let score = ss / (rest.len() as f64 * rest.len() as f64);
        if d == 0 || score < best.0 * (1.0 - 1e-9) {
            best = (score, d);
        }
    }
    best.1
}

/// Peak interval, sustained mean (time-weighted, after the steady-state start) and the
/// steady-state start time of a series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SeriesStats {
    /// Highest interval value.
    pub peak: f64,
    /// Time-weighted mean from the steady-state start on.
    pub sustained_mean: f64,
    /// Start of the steady state, seconds since the run started.
    pub steady_start_s: f64,
}

/// Peak vs sustained mean of one series; `None` when empty.
pub fn series_stats(series: &[SeriesPoint]) -> Option<SeriesStats> {
    if series.is_empty() {
        return None;
    }
    let vals: Vec<f64> = series.iter().map(|p| p.value).collect();
    let d = steady_state_start(&vals);
    let (mut num, mut den) = (0.0, 0.0);
    for p in &series[d..] {
        num += p.value * p.length_s;
        den += p.length_s;
    }
    Some(SeriesStats {
        peak: vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        sustained_mean: if den > 0.0 { num / den } else { vals[d] },
        steady_start_s: series[d].start_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tukey_flags_the_odd_one() {
        let xs = [10.0, 10.5, 9.8, 10.1, 10.2, 30.0];
        assert_eq!(tukey_outliers(&xs), vec![5]);
        assert!(tukey_outliers(&[1.0, 2.0, 3.0]).is_empty());
    }

    #[test]
    fn mser_finds_the_ramp() {
        let xs = [1.0, 5.0, 9.0, 10.0, 10.1, 9.9, 10.0, 10.0, 9.95, 10.05];
        assert_eq!(steady_state_start(&xs), 3);
        assert_eq!(steady_state_start(&[4.0, 4.0, 4.0, 4.0]), 0);
        let series: Vec<SeriesPoint> = xs
            .iter()
            .enumerate()
            .map(|(i, &v)| SeriesPoint {
                start_s: i as f64,
                length_s: 1.0,
                value: v,
            })
            .collect();
        let s = series_stats(&series).unwrap();
        assert_eq!(s.peak, 10.1);
        assert_eq!(s.steady_start_s, 3.0);
        assert!((s.sustained_mean - 10.0).abs() < 1e-9);
    }
}
