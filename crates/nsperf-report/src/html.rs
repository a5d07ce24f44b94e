//! The HTML report: one self-contained file (inline CSS and SVG, no fetch of anything) with
//! the charts a spreadsheet user would draw, and the tables.
//!
//! Charts (each a `<figure class="chart" data-chart="KIND">`), drawn when the experiment has
//! the data for them:
//! - `throughput-vs-parameter`: per step, mean with its 95 % interval against the first
//!   numeric parameter (RTT first), one series per other parameters; the theoretical ceilings
//!   are drawn dashed and labelled: the link rate, and window/RTT where the window is known;
//! - `throughput-over-time`: per step, one repetition's interval series with its peak marked
//!   and its sustained (steady-state) mean drawn;
//! - `clients-over-time` and `client-shares`: per step run on several hosts or lab sites at
//!   once, each client's intervals beside the aggregate with its stored peak and sustained
//!   mean and the shared port's ceiling, and each client's rate and share as bars, the
//!   slowest marked, Jain's index in the title (`charts/clients.rs`);
//! - `heatmap`: per io workload, file size × record size (the iozone surface);
//! - `latency`: p50 / p99 / p99.9 per group, where the engine reported them;
//! - `cpu`: mean busy % per core for each step.
//!
//! After the run table, the mirrored io runs beside their native runs (`replication.rs`), and
//! every run that took a packet capture gets its analysis: the trace
//! findings and the diagnosed limit of its busiest connections (`capture.rs`).
//!
//! A small inline script counts the drawn shapes of each chart on load and writes the count
//! into `data-drawn` (used by the browser test; the report is complete without it).

use std::fmt::Write;

use nsperf_results::{RunStatus, params_label};

use crate::charts;
use crate::svg::esc;
use crate::{ExperimentData, Exporter, ReportError};

/// HTML exporter.
#[derive(Debug, Clone, Copy, Default)]
pub struct HtmlExporter;

pub(crate) const STYLE: &str =
    "body{font-family:system-ui,sans-serif;margin:24px;max-width:1100px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}
figure.chart{margin:16px 0;border:1px solid #ddd;padding:8px;background:#fff}
figure.chart svg{width:100%;height:auto;max-width:900px;display:block}
figcaption{font-size:12px;color:#555}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3}
td.t,th.t{text-align:left}pre{background:#f7f7f7;padding:8px;font-size:12px;overflow:auto}
.skip{color:#a60}h3{font-size:14px;margin:16px 0 4px}ul.findings{font-size:13px}";

pub(crate) const CHECK_SCRIPT: &str = "<script>
window.addEventListener('load',function(){var figs=document.querySelectorAll('figure.chart');
var ok=0;figs.forEach(function(f){var n=0;f.querySelectorAll('svg circle,svg polyline,svg rect.bar,svg rect.cell').forEach(function(e){var b=e.getBBox();if(b.width>0||b.height>0)n++;});
f.setAttribute('data-drawn',String(n));if(n>0)ok++;});
document.body.setAttribute('data-charts',String(figs.length));document.body.setAttribute('data-charts-drawn',String(ok));});
</script>";

impl Exporter for HtmlExporter {
    fn name(&self) -> &'static str {
        "html"
    }

    fn extension(&self) -> &'static str {
        "html"
    }

    fn export(&self, d: &ExperimentData) -> Result<Vec<u8>, ReportError> {
        let e = &d.experiment;
        let mut o = String::new();
        let _ = write!(
            o,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>nsperf experiment {} — {}</title><style>{STYLE}</style></head><body>\n",
            e.id,
            esc(&e.plan_name)
        );
        let ok = d.runs.iter().filter(|r| r.status == RunStatus::Ok).count();
        let skipped = d
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Skipped)
            .count();
        let failed = d
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Failed)
            .count();
        let partial = d
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Partial)
            .count();
        let partial = if partial > 0 {
            format!(", {partial} partial (some hosts failed)")
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "<h1>nsperf experiment {}{}: {}</h1><p>{}</p><p>status <b>{}</b>; {ok} of {} runs measured, {skipped} skipped, {failed} failed{partial}; nsperf {}</p>",
            e.id,
            e.label
                .as_deref()
                .map(|l| format!(" <span class=\"label\">“{}”</span>", esc(l)))
                .unwrap_or_default(),
            esc(&e.plan_name),
            esc(e.description.as_deref().unwrap_or("")),
            e.status,
            e.total_runs,
            esc(&e.nsperf_version)
        );
        for n in e.notes.lines() {
            let _ = writeln!(o, "<p class=\"skip\">skipped: {}</p>", esc(n));
        }
        o.push_str("<h2>Charts</h2>\n");
        for step in d.steps() {
            charts::throughput_vs_parameter(d, &step, &mut o);
            charts::throughput_over_time(d, &step, &mut o);
            charts::clients(d, &step, &mut o);
        }
        charts::heatmaps(d, &mut o);
        charts::latency(d, &mut o);
        charts::cpu(d, &mut o);
        o.push_str("<h2>Statistics over repetitions</h2>\n<table><tr><th class=\"t\">step</th><th class=\"t\">parameters</th><th class=\"t\">phase</th><th>n</th><th>mean</th><th>95 % CI</th><th>median</th><th>stddev</th><th>peak interval</th><th>sustained</th><th>payload</th><th>wire</th><th class=\"t\">outliers</th><th class=\"t\">noise</th></tr>\n");
        for g in &d.stats {
            let f = |v: f64| g.metric.format(v);
            let _ = writeln!(
                o,
                "<tr><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{} .. {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td></tr>",
                esc(&g.step),
                esc(&params_label(&g.params, "")),
                g.phase,
                g.summary.n,
                f(g.summary.mean),
                f(g.summary.ci95_lo),
                f(g.summary.ci95_hi),
                f(g.summary.median),
                f(g.summary.stddev),
                g.peak_interval.map(f).unwrap_or_default(),
                g.sustained_mean.map(f).unwrap_or_default(),
                g.payload_bytes
                    .map(|b| nsperf_core::Bytes(b as u64).to_string())
                    .unwrap_or_default(),
                g.wire_bytes
                    .map(|b| nsperf_core::Bytes(b as u64).to_string())
                    .unwrap_or_default(),
                g.outlier_repetitions
                    .iter()
                    .map(|r| format!("#{r}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                esc(&g.summary.noise_note().unwrap_or_default())
            );
        }
        o.push_str("</table>\n<h2>Runs</h2>\n<table><tr><th>run</th><th class=\"t\">step</th><th class=\"t\">parameters</th><th class=\"t\">phase</th><th>rep</th><th class=\"t\">status</th><th>value</th><th>duration</th><th class=\"t\">note</th></tr>\n");
        for r in &d.runs {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}</td><td class=\"t\">{}</td><td>{}</td><td>{:.2} s</td><td class=\"t\">{}</td></tr>",
                r.id,
                esc(&r.step),
                esc(&params_label(&r.params, "")),
                r.phase,
                r.repetition,
                r.status,
                match (&r.metric, r.value) {
                    (Some(m), Some(v)) => esc(&m.format(v)),
                    _ => String::new(),
                },
                r.duration_ns as f64 / 1e9,
                esc(r.error.as_deref().unwrap_or(""))
            );
        }
        o.push_str("</table>\n");
        crate::replication::section(d, &mut o);
        crate::events::section(d, &mut o);
        crate::capture::section(d, &mut o);
        o.push_str("<h2>Host</h2>\n");
        let host: serde_json::Value =
            serde_json::from_str(&e.host_json).unwrap_or(serde_json::Value::Null);
        let _ = writeln!(
            o,
            "<pre>{}</pre>",
            esc(&serde_json::to_string_pretty(&host).unwrap_or_default())
        );
        let _ = writeln!(o, "<h2>Plan</h2>\n<pre>{}</pre>", esc(&e.plan_toml));
        o.push_str(CHECK_SCRIPT);
        o.push_str("\n</body></html>\n");
        Ok(o.into_bytes())
    }
}
