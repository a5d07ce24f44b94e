//! The mean of a set of repetitions with a 95 % interval that respects the quantity, how noisy
//! the set is, and the ratio of two sets.
//!
//! Every headline metric of nsperf (a rate, a latency, an elapsed time) is non-negative, and
//! repetitions of a rate are skewed (a stall makes one value small, nothing makes one twice
//! the link rate). Student's t on the raw values gives intervals reaching below zero
//! ("-4696 MiB/s .. 18164 MiB/s") with three noisy repetitions, so the interval is chosen by
//! what the values allow:
//! - all positive: the mean of a log-normal population, modified Cox method with t quantiles
//!   (Olsson 2005, "Confidence intervals for the mean of a log-normal distribution", J. Stat.
//!   Education 13(1)); its lower end is always above zero;
//! - some zero, none negative: bootstrap percentile interval of the mean, 4000 resamples from
//!   a fixed seed so a report is reproducible (Efron & Tibshirani 1993, *An Introduction to
//!   the Bootstrap*, ch. 13); it stays within [min, max];
//! - any negative (a signed quantity): Student's t (Student 1908), `n − 1` degrees of freedom.
//!
//! Noise is named in plain words from the coefficient of variation: the relative half-width
//! of the t interval, `t(n−1) · CV / √n`, tells whether two configurations can be told apart,
//! and how many repetitions would bring it to ±5 %.

use std::fmt;

use nsperf_core::stats::{mean, median, stddev};
use serde::Serialize;

use super::series::tukey_outliers;

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

/// How the 95 % interval of a [`Summary`] was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CiMethod {
    /// One value: no interval (both ends are the value).
    None,
    /// Log-normal mean, modified Cox method (all values positive).
    LogT,
    /// Bootstrap percentile (some values zero, none negative).
    Bootstrap,
    /// Student's t on the values (some value negative).
    T,
}

impl fmt::Display for CiMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CiMethod::None => "none",
            CiMethod::LogT => "log-t",
            CiMethod::Bootstrap => "bootstrap",
            CiMethod::T => "t",
        })
    }
}

/// Relative half-width of the interval above which two configurations cannot be told apart.
pub const NOISY_HALF_WIDTH: f64 = 0.20;

/// The precision repetitions are counted towards: ±5 % of the mean.
pub const TARGET_HALF_WIDTH: f64 = 0.05;

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
    /// Lower end of the 95 % interval of the mean (`mean` with one value); never below zero
    /// for non-negative values.
    pub ci95_lo: f64,
    /// Upper end.
    pub ci95_hi: f64,
    /// How the interval was computed.
    pub ci_method: CiMethod,
    /// Coefficient of variation, stddev / mean (`None` with one value or a mean ≤ 0).
    pub cv: Option<f64>,
    /// True when the interval is wider than ±20 % of the mean: the set cannot tell two
    /// configurations apart.
    pub too_noisy: bool,
    /// About how many repetitions bring the interval to ±5 % of the mean (`None` when it is
    /// already there or cannot be told).
    pub repetitions_for_5pct: Option<u64>,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Indices of values beyond Tukey's fences.
    pub outliers: Vec<usize>,
}

impl Summary {
    /// The noise of the set in plain words when it matters: `n = 3, CV 80 %: too noisy to
    /// compare; about 983 repetitions needed for ±5 %`, `n = 3, CV 4 %: ±10 %; about 12
    /// repetitions needed for ±5 %`, or `n = 1: no interval; repeat to know the noise`.
    pub fn noise_note(&self) -> Option<String> {
        if self.n < 2 {
            return Some(format!(
                "n = {}: no interval; repeat to know the noise",
                self.n
            ));
        }
        let cv = self.cv?;
        let head = format!("n = {}, CV {}", self.n, percent(cv));
        let need = self
            .repetitions_for_5pct
            .map(|r| format!("; about {r} repetitions needed for ±5 %"))
            .unwrap_or_default();
        if self.too_noisy {
            Some(format!("{head}: too noisy to compare{need}"))
        } else if self.repetitions_for_5pct.is_some() {
            Some(format!(
                "{head}: ±{}{need}",
                percent(half_width(self.n, cv))
            ))
        } else {
            None
        }
    }
}

/// A share as a percentage with sensible digits: `80 %`, `4.2 %`, `0.31 %`.
fn percent(x: f64) -> String {
    let p = x * 100.0;
    if p >= 10.0 {
        format!("{p:.0} %")
    } else if p >= 1.0 {
        format!("{p:.1} %")
    } else {
        format!("{p:.2} %")
    }
}

/// Relative half-width of the t interval of `n` values with coefficient of variation `cv`.
fn half_width(n: usize, cv: f64) -> f64 {
    t975((n - 1) as f64) * cv / (n as f64).sqrt()
}

/// The repetitions that bring the relative half-width to [`TARGET_HALF_WIDTH`]: the smallest
/// `n` with `t(n−1) · cv / √n ≤ 0.05`, searched from the normal approximation.
fn repetitions_for(cv: f64) -> Option<u64> {
    if !cv.is_finite() || cv <= 0.0 {
        return None;
    }
    let z = (1.96 * cv / TARGET_HALF_WIDTH).powi(2);
    let mut n = (z.ceil() as u64).max(2);
    const CAP: u64 = 10_000_000;
    while n < CAP && half_width(n as usize, cv) > TARGET_HALF_WIDTH {
        n += 1;
    }
    Some(n.min(CAP))
}

/// Summarises values; `None` for none.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    let m = mean(xs)?;
    let sd = stddev(xs).unwrap_or(0.0);
    let n = xs.len();
    let (lo, hi, method) = if n < 2 {
        (m, m, CiMethod::None)
    } else if xs.iter().all(|x| *x > 0.0) {
        let (lo, hi) = lognormal_mean_interval(xs);
        (lo, hi, CiMethod::LogT)
    } else if xs.iter().all(|x| *x >= 0.0) {
        let (lo, hi) = bootstrap_interval(xs);
        (lo, hi, CiMethod::Bootstrap)
    } else {
        let half = t975((n - 1) as f64) * sd / (n as f64).sqrt();
        (m - half, m + half, CiMethod::T)
    };
    let cv = (n >= 2 && m > 0.0).then(|| sd / m);
    let (too_noisy, repetitions_for_5pct) = match cv {
        Some(cv) => {
            let h = half_width(n, cv);
            (
                h > NOISY_HALF_WIDTH,
                if h > TARGET_HALF_WIDTH {
                    repetitions_for(cv)
                } else {
                    None
                },
            )
        }
        None => (false, None),
    };
    Some(Summary {
        n,
        mean: m,
        median: median(xs)?,
        stddev: sd,
        ci95_lo: lo,
        ci95_hi: hi,
        ci_method: method,
        cv,
        too_noisy,
        repetitions_for_5pct,
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        outliers: tukey_outliers(xs),
    })
}

/// 95 % interval of the mean of positive values taken as log-normal: with `y = ln x`, mean
/// `ȳ` and variance `s²`, `exp(ȳ + s²/2 ± t(n−1) · √(s²/n + s⁴/(2(n−1))))` (modified Cox
/// method, Olsson 2005). The interval always contains the arithmetic mean, which it widens
/// to if the log-normal centre falls beside it (values far from log-normal).
fn lognormal_mean_interval(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let ys: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
    let my = ys.iter().sum::<f64>() / n;
    let s2 = ys.iter().map(|y| (y - my) * (y - my)).sum::<f64>() / (n - 1.0);
    let centre = my + s2 / 2.0;
    let se = (s2 / n + s2 * s2 / (2.0 * (n - 1.0))).sqrt();
    let half = t975(n - 1.0) * se;
    let m = xs.iter().sum::<f64>() / n;
    ((centre - half).exp().min(m), (centre + half).exp().max(m))
}

/// SplitMix64 (Steele, Lea & Flood 2014): the bootstrap's seeded generator.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An index below `n` (Lemire's multiply-shift; the bias is below 2⁻³² for small `n`).
    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }
}

/// Resamples of the bootstrap.
const RESAMPLES: usize = 4000;

/// Seed of the bootstrap: fixed, so the same values give the same interval.
const SEED: u64 = 0x6e73_7065_7266_0001;

/// Bootstrap percentile 95 % interval of the mean (2.5th and 97.5th percentiles of the means
/// of [`RESAMPLES`] resamples with replacement).
fn bootstrap_interval(xs: &[f64]) -> (f64, f64) {
    let mut rng = SplitMix64(SEED);
    let n = xs.len();
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| (0..n).map(|_| xs[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * RESAMPLES as f64) as usize).min(RESAMPLES - 1)];
    (at(0.025), at(0.975))
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

impl Ratio {
    /// Whether the interval excludes 1: the two sets differ beyond their noise.
    pub fn differs(&self) -> bool {
        self.lo > 1.0 || self.hi < 1.0
    }
}

/// Compares two sets of positive values: the ratio of means with a 95 % interval by the delta
/// method on the log ratio and Welch–Satterthwaite degrees of freedom (Welch 1947); positive
/// by construction. `None` when a set is empty or a mean is not positive. With one value on
/// both sides the interval is the ratio itself.
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
        assert_eq!(s.ci_method, CiMethod::LogT);
        // ln: 2.302585, 2.484907, 2.639057; mean 2.475516, s² 0.028370.
        // centre 2.489701, se √(0.028370/3 + 0.028370²/4) = 0.098274, t(2) = 4.303.
        assert!((s.ci95_lo - 7.8997).abs() < 1e-3, "{s:?}");
        assert!((s.ci95_hi - 18.4041).abs() < 1e-3, "{s:?}");
        assert!(s.outliers.is_empty());
        let one = summarize(&[5.0]).unwrap();
        assert_eq!((one.ci95_lo, one.ci95_hi, one.stddev), (5.0, 5.0, 0.0));
        assert_eq!(one.ci_method, CiMethod::None);
        assert_eq!(
            one.noise_note().unwrap(),
            "n = 1: no interval; repeat to know the noise"
        );
        assert!(summarize(&[]).is_none());
    }

    /// The docs' example of three dd repetitions: Student's t said -4696 .. 18164 MiB/s.
    #[test]
    fn interval_of_a_rate_never_goes_below_zero() {
        let xs = [3974.0, 4182.0, 12045.0];
        let s = summarize(&xs).unwrap();
        assert!(
            s.ci95_lo > 0.0 && s.ci95_lo < s.mean && s.ci95_hi > s.mean,
            "{s:?}"
        );
        assert!(s.too_noisy);
        let cv = s.cv.unwrap();
        assert!((cv - 0.6828).abs() < 1e-3, "{cv}");
        let note = s.noise_note().unwrap();
        assert!(
            note.starts_with("n = 3, CV 68 %: too noisy to compare; about "),
            "{note}"
        );
        // (1.96 · 0.683 / 0.05)² = 717; t pushes it a little further.
        let r = s.repetitions_for_5pct.unwrap();
        assert!((717..=725).contains(&r), "{r}");
        assert!(note.ends_with(&format!("about {r} repetitions needed for ±5 %")));
        // Zeros (a run that moved nothing): bootstrap, inside [min, max].
        let z = summarize(&[0.0, 10.0, 12.0, 11.0]).unwrap();
        assert_eq!(z.ci_method, CiMethod::Bootstrap);
        assert!(z.ci95_lo >= 0.0 && z.ci95_hi <= 12.0 && z.ci95_lo < z.mean);
        assert_eq!(summarize(&[0.0, 10.0, 12.0, 11.0]).unwrap(), z, "seeded");
        // A signed quantity keeps Student's t.
        let t = summarize(&[-1.0, 1.0, 3.0]).unwrap();
        assert_eq!(t.ci_method, CiMethod::T);
        assert!((t.ci95_lo - (1.0 - 4.303 * 2.0 / 3f64.sqrt())).abs() < 1e-9);
    }

    #[test]
    fn quiet_sets_say_nothing_or_their_precision() {
        let quiet = summarize(&[100.0, 100.5, 99.5, 100.2, 99.8]).unwrap();
        assert!(!quiet.too_noisy);
        assert_eq!(quiet.repetitions_for_5pct, None);
        assert_eq!(quiet.noise_note(), None);
        let some = summarize(&[100.0, 104.0, 96.0]).unwrap();
        assert!(!some.too_noisy);
        let note = some.noise_note().unwrap();
        assert!(
            note.starts_with("n = 3, CV 4.0 %: ±9.9 %; about "),
            "{note}"
        );
        // n = 5: t(4) · 0.04 / √5 = 0.0497.
        assert_eq!(repetitions_for(0.04), Some(5));
    }

    #[test]
    fn ratio_with_interval() {
        let a = [100.0, 102.0, 98.0];
        let b = [300.0, 306.0, 294.0];
        let r = compare(&a, &b).unwrap();
        assert!((r.ratio - 3.0).abs() < 1e-12);
        assert!(r.lo < 3.0 && r.hi > 3.0);
        assert!(r.lo > 2.8 && r.hi < 3.2, "{r:?}");
        assert!(r.differs());
        let exact = compare(&[2.0], &[3.0]).unwrap();
        assert_eq!((exact.lo, exact.hi), (1.5, 1.5));
        assert!(compare(&[], &[1.0]).is_none());
        assert!(compare(&[0.0], &[1.0]).is_none());
        let same = compare(&[10.0, 12.0, 8.0], &[11.0, 9.0, 10.0]).unwrap();
        assert!(!same.differs());
    }
}
