//! `nsperf results compare A B -o FILE`: the chart of the ratios B/A with their 95 %
//! intervals (one point per step, parameters and phase the two experiments share, the line
//! B/A = 1 for "no difference"), alone as SVG or in a self-contained HTML page with its table.

use std::fmt::Write;

use nsperf_results::ExperimentRecord;
use nsperf_results::stats::Comparison;

use crate::svg::{self, Forest, esc};

/// `experiment 4 "native" (wan-window)`.
fn name(e: &ExperimentRecord) -> String {
    match &e.label {
        Some(l) => format!("experiment {} “{l}” ({})", e.id, e.plan_name),
        None => format!("experiment {} ({})", e.id, e.plan_name),
    }
}

/// A comparison's category: `tcp: rtt=50 ms, window=64 KiB (cold)`.
fn category(c: &Comparison) -> String {
    let mut s = format!(
        "{}: {}",
        c.step,
        nsperf_results::params_label(&c.params, "")
    );
    if c.phase != nsperf_results::Phase::None {
        s = format!("{s} ({})", c.phase);
    }
    s
}

/// The chart (SVG) of the ratios B/A: a forest plot, a row per shared group.
pub fn compare_svg(a: &ExperimentRecord, b: &ExperimentRecord, rows: &[Comparison]) -> String {
    let differ = rows
        .iter()
        .filter(|r| r.ratio.is_some_and(|x| x.differs()))
        .count();
    let with_ratio: Vec<(&Comparison, nsperf_results::stats::Ratio)> =
        rows.iter().filter_map(|r| Some((r, r.ratio?))).collect();
    let without: Vec<String> = rows
        .iter()
        .filter(|r| r.ratio.is_none())
        .map(category)
        .collect();
    svg::forest(&Forest {
        title: format!("{} against {}", name(b), name(a)),
        x_label: "ratio of means B/A, with its 95 % interval".into(),
        rows: with_ratio.iter().map(|(r, _)| category(r)).collect(),
        values: with_ratio
            .iter()
            .map(|(_, x)| (x.ratio, x.lo, x.hi))
            .collect(),
        reference: (1.0, "B/A = 1: no difference".into()),
        names: (
            format!("B/A differs beyond the noise ({differ} of {})", rows.len()),
            "B/A within the noise (its interval holds 1)".into(),
        ),
        notes: {
            let mut n = vec![format!("A: {}", name(a)), format!("B: {}", name(b))];
            if rows.is_empty() {
                n.push("the two share no step, parameters and phase: nothing to compare".into());
            }
            if !without.is_empty() {
                n.push(format!("no ratio (a mean is 0): {}", without.join("; ")));
            }
            n
        },
    })
}

/// A self-contained HTML page: the chart and the table of the ratios.
pub fn compare_html(a: &ExperimentRecord, b: &ExperimentRecord, rows: &[Comparison]) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>nsperf: {} against {}</title><style>{}</style></head><body>\n<h1>{} against {}</h1>\n",
        esc(&name(b)),
        esc(&name(a)),
        crate::html::STYLE,
        esc(&name(b)),
        esc(&name(a))
    );
    crate::charts::figure(
        &mut o,
        "compare",
        &compare_svg(a, b, rows),
        "ratio of the means B/A per step, parameters and phase the two experiments share, with its 95 % interval (delta method on the log ratio, Welch–Satterthwaite degrees of freedom)",
    );
    o.push_str("<table><tr><th class=\"t\">step</th><th class=\"t\">parameters</th><th class=\"t\">phase</th><th>mean A</th><th>mean B</th><th>B/A</th><th>95 % interval</th></tr>\n");
    for r in rows {
        let _ = writeln!(
            o,
            "<tr><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.step),
            esc(&nsperf_results::params_label(&r.params, "")),
            r.phase,
            esc(&r.metric.format(r.mean_a)),
            esc(&r.metric.format(r.mean_b)),
            r.ratio
                .map(|x| format!("{:.3}", x.ratio))
                .unwrap_or_else(|| "none".into()),
            r.ratio
                .map(|x| format!("{:.3} .. {:.3}", x.lo, x.hi))
                .unwrap_or_else(|| "a mean is 0".into()),
        );
    }
    o.push_str("</table>\n");
    o.push_str(crate::html::CHECK_SCRIPT);
    o.push_str("\n</body></html>\n");
    o
}
