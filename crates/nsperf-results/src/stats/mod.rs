//! Statistics over repetitions and over a run's time series.
//!
//! - mean, median, sample standard deviation: `nsperf_core::stats`;
//! - the 95 % interval of the mean, the noise of a set and the ratio of two sets:
//!   [`interval`] (sources cited there);
//! - outliers (Tukey) and the steady state of a series (MSER): [`series`].

pub mod bonnie;
mod interval;
mod series;

use std::collections::BTreeMap;

use nsperf_core::stats::mean;
use serde::Serialize;

use crate::model::{Phase, RunStatus, SeriesPoint};
use crate::params::Params;
use crate::store::RunRecord;
use crate::{Metric, StepKind};

pub use interval::{
    CiMethod, NOISY_HALF_WIDTH, Ratio, Summary, TARGET_HALF_WIDTH, compare, summarize, t975,
};
pub use series::{SeriesStats, series_stats, steady_state_start, tukey_outliers};

/// The statistics of one (step, cell, phase) over its repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupStats {
    /// Step name.
    pub step: String,
    /// Step type.
    pub kind: StepKind,
    /// Cell key.
    pub cell: String,
    /// The parameters the step depends on, resolved and typed.
    pub params: Params,
    /// Cache phase.
    pub phase: Phase,
    /// Headline metric.
    pub metric: Metric,
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

/// Groups runs by (step, cell, phase) and summarises each group: steps in first-seen order,
/// the groups of a step by their typed parameters (`50ms` before `100ms`, `64k` before `1m`),
/// then phase. `series_of(run_id)` gives a run's time series.
pub fn group_stats(
    runs: &[RunRecord],
    series_of: &dyn Fn(i64) -> Vec<SeriesPoint>,
) -> Vec<GroupStats> {
    let mut order: Vec<(String, String, Phase)> = Vec::new();
    let mut groups: BTreeMap<(String, String, Phase), Vec<&RunRecord>> = BTreeMap::new();
    for r in runs {
        let k = (r.step.clone(), r.cell.clone(), r.phase);
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
            kind: first.kind,
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
    let mut steps: Vec<String> = Vec::new();
    for r in runs {
        if !steps.contains(&r.step) {
            steps.push(r.step.clone());
        }
    }
    out.sort_by(|a, b| {
        let at = |g: &GroupStats| steps.iter().position(|s| *s == g.step);
        at(a)
            .cmp(&at(b))
            .then_with(|| a.params.values().cmp(b.params.values()))
            .then_with(|| a.phase.cmp(&b.phase))
    });
    out
}

/// One (step, parameters, phase, metric) two experiments share, and the ratio of their means.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Step name.
    pub step: String,
    /// The parameters (resolved, typed).
    pub params: Params,
    /// Cache phase.
    pub phase: Phase,
    /// Headline metric.
    pub metric: Metric,
    /// Mean in experiment A.
    pub mean_a: f64,
    /// Mean in experiment B.
    pub mean_b: f64,
    /// mean B / mean A with its 95 % interval; `None` when a mean is not positive (no ratio
    /// can be formed), the row is kept so that nothing shared is dropped without a word.
    pub ratio: Option<Ratio>,
}

/// The groups of experiment B that match one of experiment A by step, resolved parameters,
/// phase and metric, each with the ratio of means B/A ([`compare`], absent when a mean is
/// not positive); in A's order.
pub fn compare_groups(
    (runs_a, a): (&[RunRecord], &[GroupStats]),
    (runs_b, b): (&[RunRecord], &[GroupStats]),
) -> Vec<Comparison> {
    let values = |rs: &[RunRecord], ids: &[i64]| -> Vec<f64> {
        rs.iter()
            .filter(|r| ids.contains(&r.id))
            .filter_map(|r| r.value)
            .collect()
    };
    let mut out = Vec::new();
    for x in a {
        let Some(y) = b.iter().find(|y| {
            y.step == x.step && y.params == x.params && y.phase == x.phase && y.metric == x.metric
        }) else {
            continue;
        };
        let ratio = compare(&values(runs_a, &x.run_ids), &values(runs_b, &y.run_ids));
        out.push(Comparison {
            step: x.step.clone(),
            params: x.params.clone(),
            phase: x.phase,
            metric: x.metric.clone(),
            mean_a: x.summary.mean,
            mean_b: y.summary.mean,
            ratio,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, metric: Metric, value: f64) -> RunRecord {
        RunRecord {
            id,
            experiment_id: 1,
            cell: "c".into(),
            params: Params::default(),
            step: "meta".into(),
            kind: crate::StepKind::Io,
            phase: Phase::None,
            repetition: id as u32,
            status: RunStatus::Ok,
            error: None,
            started_unix_ns: 0,
            duration_ns: 0,
            metric: Some(metric),
            value: Some(value),
            payload_bytes: None,
            wire_bytes: None,
            metrics: BTreeMap::new(),
            spec: BTreeMap::new(),
            conditions: None,
            lab: None,
            findings: Vec::new(),
            capture_path: None,
        }
    }

    /// Issue 20 item 3: a group whose mean is 0 (a metadata run stored as 0 bytes/s) was
    /// dropped from the comparison without a word; it stays, without a ratio.
    #[test]
    fn a_shared_group_without_a_ratio_is_kept() {
        let none = |_| Vec::new();
        let (ra, rb) = (
            vec![run(1, Metric::THROUGHPUT_BYTES_PER_S, 0.0)],
            vec![run(2, Metric::THROUGHPUT_BYTES_PER_S, 0.0)],
        );
        let (ga, gb) = (group_stats(&ra, &none), group_stats(&rb, &none));
        let rows = compare_groups((&ra, &ga), (&rb, &gb));
        assert_eq!(rows.len(), 1);
        assert!(rows[0].ratio.is_none());
        let (ra, rb) = (
            vec![run(1, Metric::FILES_PER_S, 2000.0)],
            vec![run(2, Metric::FILES_PER_S, 1000.0)],
        );
        let (ga, gb) = (group_stats(&ra, &none), group_stats(&rb, &none));
        let rows = compare_groups((&ra, &ga), (&rb, &gb));
        assert_eq!(rows[0].ratio.map(|r| r.ratio), Some(0.5));
    }
}
