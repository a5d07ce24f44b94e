//! The lab's link events in the HTML report: an outage shaded and a change marked on the
//! time-series chart of every run they overlapped, and per run the events and the runner's
//! findings (a link outage the run crossed, with the figures of its own intervals).

use std::fmt::Write;

use nsperf_results::RunEventKind;

use crate::ExperimentData;
use crate::svg::{XEvent, esc};

/// The events of run `id` for its time-series chart: each outage (a down until its up, or
/// the run's end) as a shaded span, each other change as a marked instant. Ups that end an
/// outage drawn here are not drawn again.
pub(crate) fn chart_events(d: &ExperimentData, id: i64) -> Vec<XEvent> {
    let Some(events) = d.events.get(&id) else {
        return Vec::new();
    };
    let run_end_s = d
        .runs
        .iter()
        .find(|r| r.id == id)
        .map_or(f64::MAX, |r| r.duration_ns as f64 / 1e9);
    let ends: Vec<f64> = events.iter().filter_map(|e| e.until_s).collect();
    events
        .iter()
        .filter(|e| e.kind != RunEventKind::Up || !ends.iter().any(|u| (u - e.at_s).abs() < 1e-9))
        .map(|e| match e.kind {
            RunEventKind::Down => XEvent {
                from: e.at_s,
                to: Some(e.until_s.unwrap_or(run_end_s)),
                label: format!("down: {}", e.text),
            },
            _ => XEvent {
                from: e.at_s,
                to: None,
                label: e.text.clone(),
            },
        })
        .collect()
}

/// The section "Link events and findings": per run that overlapped link events or has
/// findings of the runner, the events with their times and the findings.
pub(crate) fn section(d: &ExperimentData, out: &mut String) {
    let runs: Vec<_> = d
        .runs
        .iter()
        .filter(|r| d.events.contains_key(&r.id) || !r.findings.is_empty())
        .collect();
    if runs.is_empty() {
        return;
    }
    out.push_str("<h2>Link events and findings</h2>\n");
    for r in runs {
        let _ = writeln!(
            out,
            "<h3>run {} ({} repetition {})</h3>",
            r.id,
            esc(&r.step),
            r.repetition
        );
        if !r.findings.is_empty() {
            out.push_str("<ul class=\"findings\">\n");
            for f in &r.findings {
                let _ = writeln!(
                    out,
                    "<li data-finding=\"{}\">{}</li>",
                    esc(&f.id),
                    esc(&f.message)
                );
            }
            out.push_str("</ul>\n");
        }
        let Some(events) = d.events.get(&r.id) else {
            continue;
        };
        out.push_str("<table><tr><th>at</th><th class=\"t\">what</th><th class=\"t\">by</th><th class=\"t\">change</th><th class=\"t\">directions</th></tr>\n");
        for e in events {
            let what = match (e.kind, e.until_s) {
                (RunEventKind::Down, Some(u)) => format!("down until {u:.3} s"),
                (RunEventKind::Down, None) => "down until the end".into(),
                (k, _) => k.to_string(),
            };
            let _ = writeln!(
                out,
                "<tr><td>{:.3} s</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td></tr>",
                e.at_s,
                esc(&what),
                esc(&e.source.to_string()),
                esc(&e.text),
                esc(&e.directions.join(", "))
            );
        }
        out.push_str("</table>\n");
    }
}
