//! Charts over groups rather than along an axis: the iozone file size × record size
//! heatmaps, latency percentiles and CPU busy per core.

use std::collections::BTreeMap;

use nsperf_results::Phase;
use nsperf_results::params_label;

use super::{bytes, figure};
use crate::ExperimentData;
use crate::svg::{self, Bars, Heatmap};
use nsperf_results::Metric;

/// Per io workload and phase: file size × record size, the iozone surface from above.
pub(crate) fn heatmaps(d: &ExperimentData, out: &mut String) {
    for m in crate::data::io_matrices(d) {
        let unit = m.metric.unit_for(m.max());
        let phase = if m.phase == Phase::None {
            String::new()
        } else {
            format!(" ({})", m.phase)
        };
        let h = Heatmap {
            title: format!("{}: {}{phase}, file size × record size", m.step, m.workload),
            row_label: "file size".into(),
            col_label: "record size".into(),
            value_label: m.metric.label(unit),
            rows: m.sizes.iter().map(|s| bytes(*s as f64)).collect(),
            cols: m.records.iter().map(|s| bytes(*s as f64)).collect(),
            values: m
                .values
                .iter()
                .map(|r| r.iter().map(|v| v.map(|v| v * unit.factor)).collect())
                .collect(),
        };
        figure(
            out,
            "heatmap",
            &svg::heatmap(&h),
            &format!(
                "{} {}: mean {} per file size and record size (darker is faster)",
                m.step,
                m.workload,
                m.metric.quantity()
            ),
        );
    }
}

/// p50 / p99 / p99.9 per group, where the engine reported them.
pub(crate) fn latency(d: &ExperimentData, out: &mut String) {
    const P: [(Metric, &str); 3] = [
        (Metric::LAT_P50_NS, "p50"),
        (Metric::LAT_P99_NS, "p99"),
        (Metric::LAT_P999_NS, "p99.9"),
    ];
    for step in d.steps() {
        let mut cats = Vec::new();
        let mut values: Vec<Vec<f64>> = Vec::new();
        for g in d.stats.iter().filter(|g| g.step == step) {
            let runs: Vec<_> = d
                .runs
                .iter()
                .filter(|r| g.run_ids.contains(&r.id))
                .collect();
            let row: Vec<f64> = P
                .iter()
                .map(|(k, _)| {
                    let v: Vec<f64> = runs
                        .iter()
                        .filter_map(|r| r.metrics.get(k).copied())
                        .collect();
                    nsperf_core::stats::mean(&v).unwrap_or(f64::NAN)
                })
                .collect();
            if row.iter().any(|v| v.is_finite()) {
                let mut c = params_label(&g.params, "");
                if g.phase != Phase::None {
                    c = format!("{c} ({})", g.phase);
                }
                cats.push(c);
                values.push(row);
            }
        }
        if cats.is_empty() {
            continue;
        }
        let max = values
            .iter()
            .flatten()
            .copied()
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let unit = Metric::LAT_P99_NS.unit_for(max);
        // A percentile no run reported has no bar and no legend entry.
        let shown: Vec<usize> = (0..P.len())
            .filter(|&k| values.iter().any(|r| r[k].is_finite()))
            .collect();
        let b = Bars {
            title: format!("{step}: latency percentiles"),
            y_label: format!("latency, {}", unit.name),
            categories: cats,
            series: shown.iter().map(|&k| P[k].1.to_string()).collect(),
            values: values
                .iter()
                .map(|r| shown.iter().map(|&k| r[k] * unit.factor).collect())
                .collect(),
            label: None,
            marked: None,
        };
        figure(
            out,
            "latency",
            &svg::bars(&b),
            &format!("{step}: latency percentiles reported by the engine, mean over repetitions"),
        );
    }
}

/// Mean busy % of each core while each step ran.
pub(crate) fn cpu(d: &ExperimentData, out: &mut String) {
    let mut cores: Vec<u32> = Vec::new();
    let mut sums: BTreeMap<(String, u32), (f64, f64)> = BTreeMap::new();
    for r in &d.runs {
        for c in d.cpu.get(&r.id).into_iter().flatten() {
            if !cores.contains(&c.core) {
                cores.push(c.core);
            }
            let e = sums.entry((r.step.clone(), c.core)).or_insert((0.0, 0.0));
            e.0 += c.busy_pct * c.length_s;
            e.1 += c.length_s;
        }
    }
    if sums.is_empty() {
        return;
    }
    cores.sort_unstable();
    let steps: Vec<String> = d
        .steps()
        .into_iter()
        .filter(|s| sums.keys().any(|k| &k.0 == s))
        .collect();
    let values = steps
        .iter()
        .map(|s| {
            cores
                .iter()
                .map(|c| {
                    sums.get(&(s.clone(), *c))
                        .map(|(a, b)| if *b > 0.0 { a / b } else { 0.0 })
                        .unwrap_or(0.0)
                })
                .collect()
        })
        .collect();
    let b = Bars {
        title: "CPU busy per core, by step".into(),
        y_label: "busy, % of the core".into(),
        categories: steps,
        series: cores.iter().map(|c| format!("cpu{c}")).collect(),
        values,
        label: Some(|v| format!("{v:.1} %")),
        marked: None,
    };
    figure(
        out,
        "cpu",
        &svg::bars(&b),
        "mean busy % of each core while each step ran (one saturated core shows here where an average would hide it)",
    );
}
