//! The runs of a bonnie step (`type = "bonnie"`) side by side, as bonnie++ lays out its
//! results: a column per test figure (sequential output per char, block and rewrite,
//! sequential input per char and block, random seeks, each with its %CP; then the metadata
//! test's files per second per phase), a line per experiment, and the ratio B/A per column
//! (the HA-cluster builder's native against replicated table).
//!
//! A bonnie run stores each figure as a metric named `TEST.FIELD` ([`metric_key`]:
//! `block_output.throughput_bytes_per_s`, `random_seeks.ops_per_s`,
//! `metadata.create_seq.files_per_s`); the planner writes them, this module reads them.

use serde::Serialize;

use crate::Metric;
use crate::store::RunRecord;

/// The bonnie tests with a throughput, in bonnie++'s order: (key, bonnie++'s group, column).
pub const THROUGHPUT_TESTS: [(&str, &str, &str); 5] = [
    ("per_char_output", "Sequential Output", "Per Chr"),
    ("block_output", "Sequential Output", "Block"),
    ("rewrite", "Sequential Output", "Rewrite"),
    ("per_char_input", "Sequential Input", "Per Chr"),
    ("block_input", "Sequential Input", "Block"),
];

/// The metadata phases, in bonnie++'s order (sequential, then random).
pub const META_PHASES: [&str; 8] = [
    "create_seq",
    "stat_seq",
    "read_seq",
    "delete_seq",
    "create_random",
    "stat_random",
    "read_random",
    "delete_random",
];

/// The metric name of one figure of a bonnie test: `block output` and `cpu_process_pct` give
/// `block_output.cpu_process_pct`.
pub fn metric_key(test: &str, field: &str) -> Metric {
    Metric::new(format!("{}.{field}", test_key(test)))
}

/// A bonnie test's name as a key: `per-char output` is `per_char_output`.
pub fn test_key(test: &str) -> String {
    test.replace(['-', ' '], "_")
}

/// What a column's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnUnit {
    /// Bytes per second (shown as bonnie++'s K/sec, KiB per second).
    BytesPerS,
    /// Operations (seeks, files) per second.
    PerS,
    /// This process's CPU, % of one core (bonnie++'s %CP).
    CpuPct,
}

/// One column of the table: a figure of one test in both experiments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BonnieColumn {
    /// bonnie++'s group (`Sequential Output`, `Random`, `Sequential Create`, …).
    pub group: String,
    /// The test (`Block`, `Seeks`, `Create`, …).
    pub test: String,
    /// Its unit.
    pub unit: ColumnUnit,
    /// The stored metric.
    pub metric: Metric,
    /// Mean over experiment A's repetitions; `None` when A did not run that test.
    pub a: Option<f64>,
    /// Mean over experiment B's repetitions.
    pub b: Option<f64>,
    /// B / A; `None` when either is missing or A's is 0.
    pub ratio: Option<f64>,
}

/// The columns a bonnie run has, in bonnie++'s order.
fn columns() -> Vec<(String, String, ColumnUnit, Metric)> {
    let mut v = Vec::new();
    for (key, group, test) in THROUGHPUT_TESTS {
        v.push((
            group.to_string(),
            test.to_string(),
            ColumnUnit::BytesPerS,
            Metric::new(format!("{key}.{}", Metric::THROUGHPUT_BYTES_PER_S)),
        ));
        v.push((
            group.to_string(),
            test.to_string(),
            ColumnUnit::CpuPct,
            Metric::new(format!("{key}.{}", Metric::CPU_PROCESS_PCT)),
        ));
    }
    for unit in [ColumnUnit::PerS, ColumnUnit::CpuPct] {
        let field = match unit {
            ColumnUnit::PerS => Metric::OPS_PER_S,
            _ => Metric::CPU_PROCESS_PCT,
        };
        v.push((
            "Random".into(),
            "Seeks".into(),
            unit,
            Metric::new(format!("random_seeks.{field}")),
        ));
    }
    for phase in META_PHASES {
        let (op, order) = phase.split_once('_').unwrap_or((phase, ""));
        let group = if order == "seq" {
            "Sequential Create"
        } else {
            "Random Create"
        };
        let mut test = op.to_string();
        test[..1].make_ascii_uppercase();
        v.push((
            group.into(),
            test,
            ColumnUnit::PerS,
            Metric::new(format!("metadata.{phase}.{}", Metric::FILES_PER_S)),
        ));
    }
    v
}

/// Mean of `metric` over the runs that have it.
fn mean_of(runs: &[&RunRecord], metric: &Metric) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.metrics.get(metric).copied())
        .collect();
    nsperf_core::stats::mean(&v)
}

/// The bonnie table of two groups of runs (one step, parameters and phase in each
/// experiment): every column either has, with the ratio B/A.
pub fn compare(a: &[&RunRecord], b: &[&RunRecord]) -> Vec<BonnieColumn> {
    columns()
        .into_iter()
        .filter_map(|(group, test, unit, metric)| {
            let (ma, mb) = (mean_of(a, &metric), mean_of(b, &metric));
            if ma.is_none() && mb.is_none() {
                return None;
            }
            let ratio = match (ma, mb) {
                (Some(x), Some(y)) if x > 0.0 => Some(y / x),
                _ => None,
            };
            Some(BonnieColumn {
                group,
                test,
                unit,
                metric,
                a: ma,
                b: mb,
                ratio,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn run(id: i64, figures: &[(&str, f64)]) -> RunRecord {
        RunRecord {
            id,
            experiment_id: 1,
            cell: "-".into(),
            params: Default::default(),
            step: "disk".into(),
            kind: crate::StepKind::Bonnie,
            phase: crate::Phase::None,
            repetition: 1,
            status: crate::RunStatus::Ok,
            error: None,
            started_unix_ns: 0,
            duration_ns: 0,
            metric: Some(Metric::THROUGHPUT_BYTES_PER_S),
            value: Some(1.0),
            payload_bytes: None,
            wire_bytes: None,
            metrics: figures
                .iter()
                .map(|(k, v)| (Metric::new(*k), *v))
                .collect::<BTreeMap<_, _>>(),
            spec: BTreeMap::new(),
            conditions: None,
            lab: None,
            findings: Vec::new(),
            capture_path: None,
        }
    }

    #[test]
    fn native_against_replicated_per_column() {
        assert_eq!(
            metric_key("per-char output", "cpu_process_pct"),
            "per_char_output.cpu_process_pct"
        );
        let native = [
            run(1, &[("block_output.throughput_bytes_per_s", 90e6)]),
            run(2, &[("block_output.throughput_bytes_per_s", 110e6)]),
        ];
        let replicated = [run(
            3,
            &[
                ("block_output.throughput_bytes_per_s", 33e6),
                ("metadata.create_seq.files_per_s", 500.0),
            ],
        )];
        let a: Vec<&RunRecord> = native.iter().collect();
        let b: Vec<&RunRecord> = replicated.iter().collect();
        let t = compare(&a, &b);
        assert_eq!(t.len(), 2, "{t:?}");
        let block = &t[0];
        assert_eq!(
            (block.group.as_str(), block.test.as_str()),
            ("Sequential Output", "Block")
        );
        assert_eq!(block.a, Some(100e6));
        assert!((block.ratio.unwrap() - 0.33).abs() < 1e-9);
        // A column only B has: its value, no ratio.
        let create = &t[1];
        assert_eq!(
            (
                create.group.as_str(),
                create.test.as_str(),
                create.a,
                create.ratio
            ),
            ("Sequential Create", "Create", None, None)
        );
    }
}
