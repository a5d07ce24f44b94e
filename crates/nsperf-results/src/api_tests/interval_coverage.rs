//! The 95 % intervals of `results show` and the report, checked against the truth they are
//! meant to cover (issue 11, statistics): sets of repetitions drawn (seeded) from populations
//! whose mean is known in closed form, and the share of sets whose interval holds that mean.
//! A 95 % interval should hold it in about 95 % of the sets. Run with `--nocapture` for the
//! table that docs/accuracy.md (## statistics) shows.

use crate::stats::{CiMethod, summarize, t975};

/// SplitMix64, a seeded generator independent of the one inside the bootstrap.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// Sets of repetitions drawn from each population.
const SETS: usize = 4000;

/// The share of `SETS` sets of `n` values from `draw` whose interval holds `truth`, counting
/// only the sets whose interval `method` computed (the method follows the values: a set of a
/// signed quantity that happens to be all positive gets the log-normal interval).
fn coverage(
    n: usize,
    truth: f64,
    seed: u64,
    method: CiMethod,
    draw: impl Fn(&mut Rng) -> f64,
) -> f64 {
    let mut rng = Rng(seed);
    let (mut held, mut sets) = (0, 0);
    while sets < SETS {
        let xs: Vec<f64> = (0..n).map(|_| draw(&mut rng)).collect();
        let s = summarize(&xs).unwrap();
        if s.ci_method != method {
            continue;
        }
        sets += 1;
        held += usize::from(s.ci95_lo <= truth && truth <= s.ci95_hi);
    }
    held as f64 / SETS as f64
}

#[test]
fn intervals_hold_the_true_mean_about_95_percent_of_the_time() {
    let mut rows = Vec::new();
    let mut bad = Vec::new();
    let mut check = |what: &str, n: usize, method: CiMethod, cov: f64, band: (f64, f64)| {
        rows.push(format!(
            "| {what} | {n} | {method} | {:.1} % | {:.0}-{:.1} % |",
            cov * 100.0,
            band.0 * 100.0,
            band.1 * 100.0
        ));
        if cov < band.0 || cov > band.1 {
            bad.push(format!("{what}, n = {n}: {:.1} %", cov * 100.0));
        }
    };
    // Positive rates, log-normal: mean exp(μ + σ²/2) (modified Cox, Olsson 2005).
    for (sigma, what) in [
        (0.05, "log-normal, σ = 0.05 (CV 5 %)"),
        (0.3, "log-normal, σ = 0.3 (CV 31 %)"),
        (1.0, "log-normal, σ = 1 (CV 131 %)"),
    ] {
        let truth = (sigma * sigma / 2.0f64).exp() * 1000.0;
        for n in [3, 5, 10, 30] {
            let draw = |r: &mut Rng| 1000.0 * (sigma * r.normal()).exp();
            let c = coverage(n, truth, 11 + n as u64, CiMethod::LogT, draw);
            check(what, n, CiMethod::LogT, c, (0.93, 0.975));
        }
    }
    // Signed values, normal: Student's t is exact here. The population lies below zero
    // (mean -10, sd 3), so every set takes t and none is left out.
    for n in [3, 5, 10] {
        let c = coverage(n, -10.0, 29 + n as u64, CiMethod::T, |r| {
            -10.0 + 3.0 * r.normal()
        });
        check(
            "normal, signed (mean -10, sd 3)",
            n,
            CiMethod::T,
            c,
            (0.93, 0.97),
        );
    }
    // Runs that sometimes moved nothing: 0 with probability 0.2, else log-normal (σ = 0.3);
    // mean 0.8 · 1000 · exp(0.045). Only sets holding a zero use the bootstrap. The bootstrap
    // percentile interval runs short for few values (Efron & Tibshirani 1993, ch. 13), so its
    // band is wider.
    let truth = 0.8 * 1000.0 * (0.3f64 * 0.3 / 2.0).exp();
    let zeros = |r: &mut Rng| {
        if r.uniform() < 0.2 {
            0.0
        } else {
            1000.0 * (0.3 * r.normal()).exp()
        }
    };
    for n in [5, 10, 30] {
        let c = coverage(n, truth, 47 + n as u64, CiMethod::Bootstrap, zeros);
        check(
            "20 % zeros, else log-normal",
            n,
            CiMethod::Bootstrap,
            c,
            (0.88, 0.98),
        );
    }
    // What Student's t on the raw values (the interval before) does with the same skewed
    // rates: short of 95 %, and below zero for a share of the sets.
    let mut contrast = Vec::new();
    for n in [3, 5, 10] {
        let truth = 0.5f64.exp() * 1000.0;
        let mut rng = Rng(11 + n as u64);
        let (mut held, mut negative) = (0, 0);
        for _ in 0..SETS {
            let xs: Vec<f64> = (0..n).map(|_| 1000.0 * rng.normal().exp()).collect();
            let m = xs.iter().sum::<f64>() / n as f64;
            let sd = (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64).sqrt();
            let half = t975((n - 1) as f64) * sd / (n as f64).sqrt();
            held += usize::from(m - half <= truth && truth <= m + half);
            negative += usize::from(m - half < 0.0);
        }
        let (cov, neg) = (held as f64 / SETS as f64, negative as f64 / SETS as f64);
        contrast.push(format!(
            "| log-normal, σ = 1, Student's t on the values | {n} | {:.1} % | {:.1} % below zero |",
            cov * 100.0,
            neg * 100.0
        ));
        if n == 3 {
            assert!(neg > 0.0, "t on skewed rates reaches below zero");
        }
    }
    eprintln!("| population | n | method | coverage | band |\n|---|---|---|---|---|");
    for r in &rows {
        eprintln!("{r}");
    }
    for r in &contrast {
        eprintln!("{r}");
    }
    assert!(bad.is_empty(), "coverage outside its band: {bad:?}");
}
