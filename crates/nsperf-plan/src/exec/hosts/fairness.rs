//! How evenly the hosts shared the aggregate: Jain's fairness index and the slowest host.

use nsperf_results::Metric;

/// How evenly the hosts shared the aggregate.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fairness {
    /// Jain's fairness index: 1 when every host had the same rate, 1/n when one had it all.
    pub(super) jain: f64,
    /// The slowest host and its rate.
    slowest: (String, f64),
    /// The sum of the rates.
    sum: f64,
}

/// Jain's index of the hosts' rates (Jain, Chiu and Hawe, DEC-TR-301, 1984:
/// (Σx)² / (n·Σx²)) and the slowest host; `None` for fewer than two hosts or no rate.
pub(super) fn fairness(rates: &[(&str, f64)]) -> Option<Fairness> {
    if rates.len() < 2 {
        return None;
    }
    let sum: f64 = rates.iter().map(|r| r.1).sum();
    let squares: f64 = rates.iter().map(|r| r.1 * r.1).sum();
    if squares <= 0.0 {
        return None;
    }
    let slowest = rates.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(Fairness {
        jain: sum * sum / (rates.len() as f64 * squares),
        slowest: (slowest.0.to_string(), slowest.1),
        sum,
    })
}

impl Fairness {
    /// The finding that names the slowest host beside the fairness index.
    pub(super) fn finding(&self, metric: &Metric, n: usize) -> nsperf_core::Finding {
        let share = self.slowest.1 / self.sum * 100.0;
        let fmt = |v: f64| metric.format(v);
        nsperf_core::Finding::new(
            "host_shares",
            nsperf_core::report::Severity::Info,
            format!(
                "{n} hosts shared {}: Jain's fairness index {:.3} (1 = equal shares); the slowest, {}, had {} ({share:.1} % of the aggregate, an equal share being {:.1} %)",
                fmt(self.sum),
                self.jain,
                self.slowest.0,
                fmt(self.slowest.1),
                100.0 / n as f64
            ),
        )
        .with("fairness_jain", self.jain)
        .with("slowest_share_pct", share)
        .with("equal_share_pct", 100.0 / n as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jains_index_and_the_slowest_host() {
        let f = fairness(&[("c1", 10.0), ("c2", 10.0), ("c3", 10.0)]).unwrap();
        assert!((f.jain - 1.0).abs() < 1e-12);
        // One host with everything: 1/n.
        let f = fairness(&[("c1", 0.0), ("c2", 30.0), ("c3", 0.0)]).unwrap();
        assert!((f.jain - 1.0 / 3.0).abs() < 1e-12);
        // 1, 2, 3: 36 / (3 * 14).
        let f = fairness(&[("c1", 2.0), ("c2", 1.0), ("c3", 3.0)]).unwrap();
        assert!((f.jain - 36.0 / 42.0).abs() < 1e-12);
        assert_eq!(f.slowest, ("c2".to_string(), 1.0));
        let msg = f.finding(&Metric::THROUGHPUT_BPS, 3).message;
        assert!(
            msg.contains("the slowest, c2") && msg.contains("16.7 %"),
            "{msg}"
        );
        assert_eq!(fairness(&[("c1", 5.0)]), None);
        assert_eq!(fairness(&[("c1", 0.0), ("c2", 0.0)]), None);
    }
}
