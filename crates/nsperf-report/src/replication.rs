//! Mirrored io runs beside their native runs in the HTML report (`replicate` with
//! `compare`): per step, parameters and phase, the native and the mirrored figures side by
//! side with mirrored / native per column, in bonnie's table shape (the HA-cluster builder's
//! comparison of a replicated device with the native one), and the mirror's own round trip
//! and peer write time beside them; under each, the copies' check and the finding that named
//! what limited the mirror (from the stored report).
//!
//! A mirrored run stores its native run's figures as `replication.native.FIELD` metrics and
//! its own as `FIELD` (`throughput_bytes_per_s`, `iops`, `lat_mean_ns`, …); both are means
//! over the group's measured repetitions here.

use std::fmt::Write;

use nsperf_results::{Metric, RunRecord, RunStatus, params_label};

use crate::ExperimentData;
use crate::data::MirrorFacts;
use crate::svg::esc;

/// What a column's values are.
#[derive(Clone, Copy)]
enum Unit {
    BytesPerS,
    PerS,
    Ns,
}

/// The compared columns: (heading, the run's own metric, its unit).
const COLUMNS: [(&str, &str, Unit); 6] = [
    ("throughput", "throughput_bytes_per_s", Unit::BytesPerS),
    ("IOPS", "iops", Unit::PerS),
    ("latency mean", "lat_mean_ns", Unit::Ns),
    ("p50", "lat_p50_ns", Unit::Ns),
    ("p99", "lat_p99_ns", Unit::Ns),
    ("max", "lat_max_ns", Unit::Ns),
];

/// One (step, parameters, phase) with its mirrored runs.
struct Group<'a> {
    step: &'a str,
    params: String,
    phase: String,
    runs: Vec<&'a RunRecord>,
}

/// The mean of `metric` over `runs` that have it.
fn mean(runs: &[&RunRecord], metric: &str) -> Option<f64> {
    let m = Metric::new(metric);
    let v: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.metrics.get(&m).copied())
        .collect();
    nsperf_core::stats::mean(&v)
}

fn figure(v: Option<f64>, unit: Unit) -> String {
    let Some(x) = v else {
        return String::new();
    };
    match unit {
        Unit::Ns if x >= 1e6 => format!("{:.2} ms", x / 1e6),
        Unit::Ns => format!("{:.1} µs", x / 1e3),
        Unit::BytesPerS => format!("{}/s", nsperf_core::Bytes(x as u64)),
        Unit::PerS => format!("{x:.0}"),
    }
}

/// A ratio with three significant digits (a mirror may cost a factor of a thousand).
fn ratio(r: f64) -> String {
    let digits = if r > 0.0 {
        (2 - r.log10().floor() as i32).clamp(0, 6) as usize
    } else {
        2
    };
    format!("{r:.digits$}")
}

/// The copies' check over the group's runs, and the last run's finding.
fn notes(facts: &[&MirrorFacts]) -> String {
    let checked: Vec<bool> = facts.iter().filter_map(|f| f.copies_equal).collect();
    let check = match (checked.len(), checked.iter().filter(|e| !**e).count()) {
        (0, _) => "copies not checked".to_string(),
        (n, 0) => format!("copies equal to their originals ({n} of {n} runs checked)"),
        (n, bad) => format!("copies DIFFER from their originals in {bad} of {n} runs"),
    };
    match facts.iter().rev().find_map(|f| f.finding.as_deref()) {
        Some(f) => format!("{check}; last run: {f}"),
        None => check,
    }
}

/// The load the group's runs shared their path with (a step's `load`): its mean rate over
/// the runs' windows and the last run's finding on the shared link.
fn load_note(runs: &[&RunRecord]) -> Option<String> {
    let bps = mean(runs, "load.throughput_bps")?;
    let rate = nsperf_core::units::BitRate(bps);
    let last = runs
        .iter()
        .rev()
        .find_map(|r| r.findings.iter().find(|f| f.id.starts_with("load_")));
    Some(match last {
        Some(f) => format!(
            "load beside the mirror: {rate} (mean); last run: {}",
            f.message
        ),
        None => format!("load beside the mirror: {rate} (mean)"),
    })
}

/// The runs with a native run beside them, grouped in the order they ran.
fn groups(d: &ExperimentData) -> Vec<Group<'_>> {
    let native = Metric::new("replication.native.throughput_bytes_per_s");
    let mut out: Vec<Group<'_>> = Vec::new();
    for r in &d.runs {
        if r.status != RunStatus::Ok || !r.metrics.contains_key(&native) {
            continue;
        }
        let (params, phase) = (params_label(&r.params, ""), r.phase.to_string());
        match out
            .iter_mut()
            .find(|g| g.step == r.step && g.params == params && g.phase == phase)
        {
            Some(g) => g.runs.push(r),
            None => out.push(Group {
                step: &r.step,
                params,
                phase,
                runs: vec![r],
            }),
        }
    }
    out
}

/// The Replication section, when some run was mirrored with `compare`.
pub(crate) fn section(d: &ExperimentData, o: &mut String) {
    let groups = groups(d);
    if groups.is_empty() {
        return;
    }
    o.push_str("<h2>Replication: native against mirrored</h2>\n<p>Each mirrored run ran the same workload without the mirror first; means over the measured repetitions. The ceiling of protocol C with one write in flight is bs / (RTT + the peer's write).</p>\n<table class=\"replication\"><tr><th class=\"t\">step</th><th class=\"t\">parameters</th><th class=\"t\">phase</th><th>n</th><th class=\"t\"></th>");
    for (h, _, _) in COLUMNS {
        let _ = write!(o, "<th>{h}</th>");
    }
    o.push_str("<th>mirror RTT</th><th>peer write</th></tr>\n");
    for g in &groups {
        let own: Vec<Option<f64>> = COLUMNS.iter().map(|c| mean(&g.runs, c.1)).collect();
        let native: Vec<Option<f64>> = COLUMNS
            .iter()
            .map(|c| mean(&g.runs, &format!("replication.native.{}", c.1)))
            .collect();
        let lead = format!(
            "<td class=\"t\" rowspan=\"4\">{}</td><td class=\"t\" rowspan=\"4\">{}</td><td class=\"t\" rowspan=\"4\">{}</td><td rowspan=\"4\">{}</td>",
            esc(g.step),
            esc(&g.params),
            esc(&g.phase),
            g.runs.len()
        );
        let facts: Vec<&MirrorFacts> = g.runs.iter().filter_map(|r| d.mirrors.get(&r.id)).collect();
        let protocol = facts.first().map(|f| f.protocol.as_str()).unwrap_or("");
        let rtt = mean(&g.runs, "replication.rtt_us").map(|u| format!("{:.2} ms", u / 1e3));
        let peer = mean(&g.runs, "replication.peer_write_mean_ns");
        for (i, (side, vals)) in [("native", &native), ("mirrored", &own)]
            .into_iter()
            .enumerate()
        {
            let label = match i {
                0 => side.to_string(),
                _ => format!("{side}, protocol {}", esc(protocol)),
            };
            let _ = write!(
                o,
                "<tr class=\"{side}\">{}<td class=\"t\">{label}</td>",
                if i == 0 { lead.as_str() } else { "" }
            );
            for (v, c) in vals.iter().zip(COLUMNS) {
                let _ = write!(o, "<td>{}</td>", figure(*v, c.2));
            }
            if i == 0 {
                o.push_str("<td></td><td></td></tr>\n");
            } else {
                let _ = writeln!(
                    o,
                    "<td>{}</td><td>{}</td></tr>",
                    rtt.clone().unwrap_or_default(),
                    figure(peer, Unit::Ns)
                );
            }
        }
        o.push_str("<tr class=\"ratio\"><td class=\"t\">mirrored / native</td>");
        for (a, b) in native.iter().zip(&own) {
            let r = match (a, b) {
                (Some(a), Some(b)) if *a > 0.0 => ratio(b / a),
                _ => String::new(),
            };
            let _ = write!(o, "<td>{r}</td>");
        }
        o.push_str("<td></td><td></td></tr>\n");
        let _ = writeln!(
            o,
            "<tr class=\"finding\"><td class=\"t\" colspan=\"{}\">{}</td></tr>",
            COLUMNS.len() + 3,
            esc(&notes(&facts))
        );
        if let Some(load) = load_note(&g.runs) {
            let _ = writeln!(
                o,
                "<tr class=\"finding load\"><td class=\"t\" colspan=\"{}\">{}</td></tr>",
                COLUMNS.len() + 3,
                esc(&load)
            );
        }
    }
    o.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    #[test]
    fn ratios_keep_three_significant_digits() {
        assert_eq!(super::ratio(0.000237), "0.000237");
        assert_eq!(super::ratio(0.0712), "0.0712");
        assert_eq!(super::ratio(0.33), "0.330");
        assert_eq!(super::ratio(4855.0), "4855");
        assert_eq!(super::ratio(0.0), "0.00");
    }
}
