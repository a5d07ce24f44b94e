//! Statistics over repetitions and over a run's time series.
//!
//! - mean, median, sample standard deviation: `nsperf_core::stats`;
//! - 95 % confidence interval of the mean with Student's t (Student 1908), `n − 1` degrees of
//!   freedom;
//! - outliers by Tukey's fences, 1.5 × IQR beyond the quartiles (Tukey 1977, *Exploratory Data
//!   Analysis*);
//! - steady state of a series by MSER (White 1997, "An effective truncation heuristic for
//!   bias reduction in simulation output"): the truncation point that minimises the standard
//!   error of the remaining mean, searched over the first half;
//! - comparison of two sets as a ratio of means with a 95 % interval by the delta method on
//!   the log ratio and Welch–Satterthwaite degrees of freedom (Welch 1947).

use std::collections::BTreeMap;

use nsperf_core::stats::{mean, median, percentile, stddev};
use serde::Serialize;

use crate::exec::SeriesPoint;
use crate::store::{RunRecord, RunStatus};

/// Two-sided 97.5 % quantile of Student's t for `df` degrees of freedom (table for 1..=30,
/// interpolated in 1/df beyond, 1.96 at infinity).
pub fn t975(df: f64) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if !df.is_finite() || df <= 0.0 {
        return f64::NAN;
    }
    if df <= 30.0 {
        let lo = df.floor().max(1.0);
        let hi = df.ceil().min(30.0);
        let (a, b) = (T[lo as usize - 1], T[hi as usize - 1]);
        if hi == lo {
            return a;
        }
        return a + (b - a) * (df - lo) / (hi - lo);
    }
    // Beyond 30: linear in 1/df between the known points.
    let pts = [(30.0, 2.042), (40.0, 2.021), (60.0, 2.000), (120.0, 1.980)];
    for w in pts.windows(2) {
        let ((d0, t0), (d1, t1)) = (w[0], w[1]);
        if df <= d1 {
            let x = (1.0 / df - 1.0 / d0) / (1.0 / d1 - 1.0 / d0);
            return t0 + (t1 - t0) * x;
        }
    }
    let x = (1.0 / df) / (1.0 / 120.0);
    1.960 + (1.980 - 1.960) * x
}

/// Summary of a set of repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Sample standard deviation (0 with one value).
    pub stddev: f64,
    /// Lower end of the 95 % confidence interval of the mean (`mean` with one value).
    pub ci95_lo: f64,
    /// Upper end.
    pub ci95_hi: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Indices of values beyond Tukey's fences.
    pub outliers: Vec<usize>,
}

/// Summarises values; `None` for none.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    let m = mean(xs)?;
    let sd = stddev(xs).unwrap_or(0.0);
    let half = if xs.len() > 1 {
        t975((xs.len() - 1) as f64) * sd / (xs.len() as f64).sqrt()
    } else {
        0.0
    };
    Some(Summary {
        n: xs.len(),
        mean: m,
        median: median(xs)?,
        stddev: sd,
        ci95_lo: m - half,
        ci95_hi: m + half,
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        outliers: tukey_outliers(xs),
    })
}

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

/// A ratio of means `b / a` with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ratio {
    /// mean(b) / mean(a).
    pub ratio: f64,
    /// Lower end of the 95 % interval.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

/// Compares two sets of positive values; `None` when a set is empty or a mean is not
/// positive. With one value on both sides the interval is the ratio itself.
pub fn compare(a: &[f64], b: &[f64]) -> Option<Ratio> {
    let (ma, mb) = (mean(a)?, mean(b)?);
    if ma <= 0.0 || mb <= 0.0 {
        return None;
    }
    let ratio = mb / ma;
    let va = stddev(a)
        .map(|s| s * s / (a.len() as f64 * ma * ma))
        .unwrap_or(0.0);
    let vb = stddev(b)
        .map(|s| s * s / (b.len() as f64 * mb * mb))
        .unwrap_or(0.0);
    let var = va + vb;
    if var <= 0.0 {
        return Some(Ratio {
            ratio,
            lo: ratio,
            hi: ratio,
        });
    }
    let df_part = |v: f64, n: usize| if n > 1 { v * v / (n - 1) as f64 } else { 0.0 };
    let den = df_part(va, a.len()) + df_part(vb, b.len());
    let df = if den > 0.0 { var * var / den } else { 1.0 };
    let half = t975(df.max(1.0)) * var.sqrt();
    Some(Ratio {
        ratio,
        lo: ratio * (-half).exp(),
        hi: ratio * half.exp(),
    })
}

/// The statistics of one (step, cell, phase) over its repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupStats {
    /// Step name.
    pub step: String,
    /// Step type.
    pub kind: String,
    /// Cell key.
    pub cell: String,
    /// The parameters the step depends on.
    pub params: BTreeMap<String, String>,
    /// Cache phase.
    pub phase: String,
    /// Headline metric.
    pub metric: String,
    /// Summary of the headline over measured repetitions.
    pub summary: Summary,
    /// Repetition numbers flagged as outliers.
    pub outlier_repetitions: Vec<u32>,
    /// Highest interval value over all repetitions.
    pub peak_interval: Option<f64>,
    /// Mean over repetitions of each one's sustained (steady-state) mean.
    pub sustained_mean: Option<f64>,
    /// Mean steady-state start over repetitions, s.
    pub steady_start_s: Option<f64>,
    /// Mean payload bytes per repetition.
    pub payload_bytes: Option<f64>,
    /// Mean wire bytes per repetition.
    pub wire_bytes: Option<f64>,
    /// Run ids of the repetitions, in repetition order.
    pub run_ids: Vec<i64>,
    /// Repetitions skipped or failed.
    pub not_measured: usize,
}

/// Groups runs by (step, cell, phase) in first-seen order and summarises each group.
/// `series_of(run_id)` gives a run's time series.
pub fn group_stats(
    runs: &[RunRecord],
    series_of: &dyn Fn(i64) -> Vec<SeriesPoint>,
) -> Vec<GroupStats> {
    let mut order: Vec<(String, String, String)> = Vec::new();
    let mut groups: BTreeMap<(String, String, String), Vec<&RunRecord>> = BTreeMap::new();
    for r in runs {
        let k = (r.step.clone(), r.cell.clone(), r.phase.clone());
        if !groups.contains_key(&k) {
            order.push(k.clone());
        }
        groups.entry(k).or_default().push(r);
    }
    let mut out = Vec::new();
    for k in order {
        let mut rs = groups.remove(&k).unwrap_or_default();
        rs.sort_by_key(|r| r.repetition);
        let ok: Vec<&&RunRecord> = rs
            .iter()
            .filter(|r| r.status == RunStatus::Ok && r.value.is_some())
            .collect();
        let not_measured = rs.len() - ok.len();
        let vals: Vec<f64> = ok.iter().filter_map(|r| r.value).collect();
        let Some(summary) = summarize(&vals) else {
            continue;
        };
        let first = ok[0];
        let sers: Vec<SeriesStats> = ok
            .iter()
            .filter_map(|r| series_stats(&series_of(r.id)))
            .collect();
        let mean_of = |f: &dyn Fn(&SeriesStats) -> f64| -> Option<f64> {
            mean(&sers.iter().map(f).collect::<Vec<_>>())
        };
        let opt_mean = |xs: Vec<f64>| mean(&xs);
        out.push(GroupStats {
            step: k.0,
            kind: first.kind.clone(),
            cell: k.1,
            params: first.params.clone(),
            phase: k.2,
            metric: first.metric.clone().unwrap_or_default(),
            outlier_repetitions: summary.outliers.iter().map(|&i| ok[i].repetition).collect(),
            summary,
            peak_interval: sers
                .iter()
                .map(|s| s.peak)
                .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x)))),
            sustained_mean: mean_of(&|s| s.sustained_mean),
            steady_start_s: mean_of(&|s| s.steady_start_s),
            payload_bytes: opt_mean(
                ok.iter()
                    .filter_map(|r| r.payload_bytes.map(|b| b as f64))
                    .collect(),
            ),
            wire_bytes: opt_mean(
                ok.iter()
                    .filter_map(|r| r.wire_bytes.map(|b| b as f64))
                    .collect(),
            ),
            run_ids: ok.iter().map(|r| r.id).collect(),
            not_measured,
        });
    }
    out
}

/// A metric value for people: rates with their units, elapsed seconds, plain numbers.
pub fn format_metric(metric: &str, v: f64) -> String {
    if metric.ends_with("_bps") {
        nsperf_core::BitRate(v).to_string()
    } else if metric.ends_with("_bytes_per_s") {
        let mib = v / (1024.0 * 1024.0);
        if v < 0.0 {
            format!("-{}", format_metric(metric, -v))
        } else if mib >= 100.0 {
            format!("{mib:.0} MiB/s")
        } else if mib >= 1.0 {
            format!("{mib:.1} MiB/s")
        } else {
            format!("{:.1} KiB/s", v / 1024.0)
        }
    } else if metric.ends_with("per_s") {
        format!("{v:.1}/s")
    } else if metric.ends_with("_s") {
        format!("{v:.3} s")
    } else if metric.ends_with("_ns") {
        nsperf_core::units::format_duration(std::time::Duration::from_nanos(v.max(0.0) as u64))
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_table() {
        assert_eq!(t975(1.0), 12.706);
        assert_eq!(t975(2.0), 4.303);
        assert!((t975(2.5) - (4.303 + 3.182) / 2.0).abs() < 1e-9);
        assert_eq!(t975(30.0), 2.042);
        assert!((t975(60.0) - 2.0).abs() < 1e-9);
        assert!(t975(1e9) > 1.959 && t975(1e9) < 1.961);
        assert!(t975(0.0).is_nan());
    }

    #[test]
    fn summary_of_three() {
        let s = summarize(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!(s.mean, 12.0);
        assert_eq!(s.median, 12.0);
        assert_eq!(s.stddev, 2.0);
        // t(2) = 4.303; half = 4.303 * 2 / sqrt(3)
        let half = 4.303 * 2.0 / 3f64.sqrt();
        assert!((s.ci95_lo - (12.0 - half)).abs() < 1e-9);
        assert!((s.ci95_hi - (12.0 + half)).abs() < 1e-9);
        assert!(s.outliers.is_empty());
        let one = summarize(&[5.0]).unwrap();
        assert_eq!((one.ci95_lo, one.ci95_hi, one.stddev), (5.0, 5.0, 0.0));
        assert!(summarize(&[]).is_none());
    }

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

    #[test]
    fn ratio_with_interval() {
        let a = [100.0, 102.0, 98.0];
        let b = [300.0, 306.0, 294.0];
        let r = compare(&a, &b).unwrap();
        assert!((r.ratio - 3.0).abs() < 1e-12);
        assert!(r.lo < 3.0 && r.hi > 3.0);
        assert!(r.lo > 2.8 && r.hi < 3.2, "{r:?}");
        let exact = compare(&[2.0], &[3.0]).unwrap();
        assert_eq!((exact.lo, exact.hi), (1.5, 1.5));
        assert!(compare(&[], &[1.0]).is_none());
        assert!(compare(&[0.0], &[1.0]).is_none());
    }
}
