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
//! - `heatmap`: per io workload, file size × record size (the iozone surface);
//! - `latency`: p50 / p99 / p99.9 per group, where the engine reported them;
//! - `cpu`: mean busy % per core for each step.
//!
//! After the run table, every run that took a packet capture gets its analysis: the trace
//! findings and the diagnosed limit of its busiest connections (`capture.rs`).
//!
//! A small inline script counts the drawn shapes of each chart on load and writes the count
//! into `data-drawn` (used by the browser test; the report is complete without it).

use std::collections::BTreeMap;
use std::fmt::Write;

use nsperf_results::stats::{format_metric, series_stats};
use nsperf_results::{ParamKind, ParamValue, Phase, RunStatus, params_label};

use crate::svg::{self, Bars, HLine, Heatmap, Line, Marker, Plot, esc};
use crate::{ExperimentData, Exporter, ReportError};

/// HTML exporter.
#[derive(Debug, Clone, Copy, Default)]
pub struct HtmlExporter;

fn unit_label(metric: &str) -> &'static str {
    if metric.ends_with("_bps") {
        "bit/s"
    } else if metric.ends_with("_bytes_per_s") {
        "bytes/s"
    } else if metric.ends_with("per_s") {
        "per second"
    } else if metric.ends_with("_s") {
        "seconds"
    } else {
        ""
    }
}

fn figure(out: &mut String, kind: &str, svg: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure class=\"chart\" data-chart=\"{kind}\">{svg}<figcaption>{}</figcaption></figure>",
        esc(caption)
    );
}

fn throughput_vs_parameter(d: &ExperimentData, step: &str, out: &mut String) {
    let groups: Vec<(usize, &nsperf_results::stats::GroupStats)> = d
        .stats
        .iter()
        .enumerate()
        .filter(|(_, g)| g.step == step)
        .collect();
    if groups.is_empty() || groups.iter().all(|(_, g)| g.params.is_empty()) {
        return;
    }
    let mut names: Vec<String> = d.param_names(step);
    names.sort_by_key(|n| n != "rtt");
    let numeric_param = names.iter().find(|n| {
        groups
            .iter()
            .all(|(_, g)| g.params.get(*n).is_some_and(|v| v.number.is_some()))
    });
    let xname = numeric_param.unwrap_or(&names[0]).clone();
    let categorical = numeric_param.is_none();
    let mut cats: Vec<&ParamValue> = Vec::new();
    for (_, g) in &groups {
        if let Some(v) = g.params.get(&xname)
            && !cats.contains(&v)
        {
            cats.push(v);
        }
    }
    cats.sort();
    let xval = |v: &ParamValue| -> f64 {
        match v.number {
            Some(n) if !categorical && v.kind == ParamKind::Duration => n * 1e3,
            Some(n) if !categorical => n,
            _ => cats.iter().position(|c| *c == v).unwrap_or(0) as f64,
        }
    };
    let metric = groups[0].1.metric.clone();
    // Series: other parameters + phase.
    type Point<'a> = (f64, f64, (f64, f64), &'a nsperf_results::RunConditions);
    let mut series: BTreeMap<String, Vec<Point<'_>>> = BTreeMap::new();
    for (i, g) in &groups {
        if g.metric != metric {
            continue;
        }
        let Some(v) = g.params.get(&xname) else {
            continue;
        };
        let mut name = params_label(&g.params, &xname);
        if g.phase != Phase::None {
            name = format!("{name} {}", g.phase);
        }
        series.entry(name).or_default().push((
            xval(v),
            g.summary.mean,
            (g.summary.ci95_lo, g.summary.ci95_hi),
            &d.context[*i],
        ));
    }
    let mut plot = Plot {
        title: format!("{step}: {metric} vs {xname}"),
        x_label: if !categorical && xname == "rtt" {
            "rtt (ms)".into()
        } else {
            xname.clone()
        },
        y_label: format!("{metric} ({}), mean and 95 % CI", unit_label(&metric)),
        x_ticks: if categorical {
            cats.iter()
                .enumerate()
                .map(|(i, c)| (i as f64, c.label()))
                .collect()
        } else {
            Vec::new()
        },
        ..Default::default()
    };
    let scale = if metric.ends_with("_bps") {
        Some(1.0)
    } else if metric.ends_with("_bytes_per_s") {
        Some(1.0 / 8.0)
    } else {
        None
    };
    let mut rate_drawn = false;
    for (si, (name, mut pts)) in series.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Ceiling: window / RTT where the window was set explicitly.
        if let Some(k) = scale {
            let curve: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|(x, _, _, c)| {
                    let w = c.window_bytes? as f64;
                    let rtt = c.rtt_s.filter(|r| *r > 0.0)?;
                    Some((*x, w * 8.0 / rtt * k))
                })
                .collect();
            if curve.len() >= 2 {
                plot.lines.push(Line {
                    name: format!("window/RTT {name}"),
                    points: curve,
                    dashed: true,
                    color: si,
                    ..Default::default()
                });
            }
            if !rate_drawn && let Some(r) = pts.iter().find_map(|p| p.3.link_rate_bps) {
                plot.hlines.push(HLine {
                    y: r * k,
                    label: format!("ceiling: link rate {}", nsperf_core::BitRate(r)),
                    color: "#555".into(),
                });
                rate_drawn = true;
            }
        }
        plot.lines.push(Line {
            name,
            points: pts.iter().map(|p| (p.0, p.1)).collect(),
            errors: pts.iter().map(|p| p.2).collect(),
            dashed: false,
            color: si,
        });
    }
    figure(
        out,
        "throughput-vs-parameter",
        &svg::plot(&plot),
        &format!(
            "{step}: mean of the repetitions with its 95 % confidence interval; dashed lines are theoretical ceilings, labelled"
        ),
    );
}

fn throughput_over_time(d: &ExperimentData, step: &str, out: &mut String) {
    // The group with the highest mean that has a series; its first repetition.
    let best = d
        .stats
        .iter()
        .filter(|g| g.step == step)
        .filter_map(|g| {
            let id = g
                .run_ids
                .iter()
                .find(|id| d.series.get(id).is_some_and(|s| s.len() >= 2))?;
            Some((g, *id))
        })
        .max_by(|a, b| a.0.summary.mean.total_cmp(&b.0.summary.mean));
    let Some((g, id)) = best else { return };
    series_chart(d, g, id, out);
    // Every other run of the step that a link event overlapped gets its own chart, so the
    // outage it crossed is seen.
    for (rid, _) in d.events.iter().filter(|(rid, _)| **rid != id) {
        let group = d
            .stats
            .iter()
            .find(|g| g.step == step && g.run_ids.contains(rid));
        if let Some(g) = group
            && d.series.get(rid).is_some_and(|s| s.len() >= 2)
        {
            series_chart(d, g, *rid, out);
        }
    }
}

/// The time-series chart of run `id` of group `g`, with the link events it overlapped.
fn series_chart(
    d: &ExperimentData,
    g: &nsperf_results::stats::GroupStats,
    id: i64,
    out: &mut String,
) {
    let step = &g.step;
    let series = &d.series[&id];
    let Some(st) = series_stats(series) else {
        return;
    };
    let rep = d
        .runs
        .iter()
        .find(|r| r.id == id)
        .map(|r| r.repetition)
        .unwrap_or(1);
    let peak_at = series
        .iter()
        .max_by(|a, b| a.value.total_cmp(&b.value))
        .map(|p| p.start_s + p.length_s / 2.0)
        .unwrap_or(0.0);
    let plot = Plot {
        title: format!(
            "{step}: {} over time ({}, repetition {rep})",
            g.metric,
            params_label(&g.params, "")
        ),
        x_label: "time (s)".into(),
        y_label: format!("{} ({})", g.metric, unit_label(&g.metric)),
        lines: vec![Line {
            name: "per interval".into(),
            points: series
                .iter()
                .map(|p| (p.start_s + p.length_s / 2.0, p.value))
                .collect(),
            ..Default::default()
        }],
        hlines: vec![HLine {
            y: st.sustained_mean,
            label: format!(
                "sustained mean {} (from {:.1} s)",
                format_metric(&g.metric, st.sustained_mean),
                st.steady_start_s
            ),
            color: "#2ca02c".into(),
        }],
        markers: vec![Marker {
            x: peak_at,
            y: st.peak,
            label: format!("peak {}", format_metric(&g.metric, st.peak)),
        }],
        events: crate::events::chart_events(d, id),
        ..Default::default()
    };
    figure(
        out,
        "throughput-over-time",
        &svg::plot(&plot),
        &format!(
            "{step}: the interval series of one repetition, its peak interval and its sustained mean after the steady state (MSER) begins; link outages shaded, link changes marked"
        ),
    );
}

fn heatmaps(d: &ExperimentData, out: &mut String) {
    type Key = (String, String, Phase);
    let mut by: BTreeMap<Key, Vec<(u64, u64, f64)>> = BTreeMap::new();
    for (i, g) in d.stats.iter().enumerate() {
        if let Some(io) = &d.context[i].io {
            by.entry((g.step.clone(), io.workload.clone(), g.phase))
                .or_default()
                .push((io.size_bytes, io.bs_bytes, g.summary.mean));
        }
    }
    for ((step, workload, phase), cells) in by {
        let mut sizes: Vec<u64> = cells.iter().map(|c| c.0).collect();
        let mut bss: Vec<u64> = cells.iter().map(|c| c.1).collect();
        sizes.sort_unstable();
        sizes.dedup();
        bss.sort_unstable();
        bss.dedup();
        let values = sizes
            .iter()
            .map(|s| {
                bss.iter()
                    .map(|b| cells.iter().find(|c| c.0 == *s && c.1 == *b).map(|c| c.2))
                    .collect()
            })
            .collect();
        let phase = if phase == Phase::None {
            String::new()
        } else {
            format!(" ({phase})")
        };
        let h = Heatmap {
            title: format!("{step}: {workload}{phase}, file size × record size"),
            row_label: "file size".into(),
            col_label: "record size".into(),
            rows: sizes
                .iter()
                .map(|s| nsperf_core::Bytes(*s).to_string())
                .collect(),
            cols: bss
                .iter()
                .map(|s| nsperf_core::Bytes(*s).to_string())
                .collect(),
            values,
            label: Some(|v| format_metric("throughput_bytes_per_s", v)),
        };
        figure(
            out,
            "heatmap",
            &svg::heatmap(&h),
            &format!(
                "{step} {workload}: mean throughput per file size and record size (darker is faster)"
            ),
        );
    }
}

fn latency(d: &ExperimentData, out: &mut String) {
    const P: [(&str, &str); 3] = [
        ("lat_p50_ns", "p50"),
        ("lat_p99_ns", "p99"),
        ("lat_p999_ns", "p99.9"),
    ];
    for step in d.steps() {
        let mut cats = Vec::new();
        let mut values = Vec::new();
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
                        .filter_map(|r| r.metrics.get(*k).copied())
                        .collect();
                    nsperf_core::stats::mean(&v)
                        .map(|x| x / 1e3)
                        .unwrap_or(f64::NAN)
                })
                .collect();
            if row.iter().any(|v| v.is_finite()) {
                let mut c = params_label(&g.params, "");
                if g.phase != Phase::None {
                    c = format!("{c} {}", g.phase);
                }
                cats.push(c);
                values.push(row);
            }
        }
        if cats.is_empty() {
            continue;
        }
        let b = Bars {
            title: format!("{step}: latency percentiles"),
            y_label: "latency (µs)".into(),
            categories: cats,
            series: P.iter().map(|p| p.1.to_string()).collect(),
            values,
            label: Some(|v| format!("{v:.1} µs")),
        };
        figure(
            out,
            "latency",
            &svg::bars(&b),
            &format!("{step}: latency percentiles reported by the engine, mean over repetitions"),
        );
    }
}

fn cpu(d: &ExperimentData, out: &mut String) {
    let steps = d.steps();
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
    let steps: Vec<String> = steps
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
        y_label: "busy % of the core".into(),
        categories: steps,
        series: cores.iter().map(|c| format!("cpu{c}")).collect(),
        values,
        label: Some(|v| format!("{v:.1} %")),
    };
    figure(
        out,
        "cpu",
        &svg::bars(&b),
        "mean busy % of each core while each step ran (one saturated core shows here where an average would hide it)",
    );
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:24px;max-width:1100px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}
figure.chart{margin:16px 0;border:1px solid #ddd;padding:8px;background:#fff}
figure.chart svg{width:100%;height:auto;max-width:900px;display:block}
figcaption{font-size:12px;color:#555}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3}
td.t,th.t{text-align:left}pre{background:#f7f7f7;padding:8px;font-size:12px;overflow:auto}
.skip{color:#a60}h3{font-size:14px;margin:16px 0 4px}ul.findings{font-size:13px}";

const CHECK_SCRIPT: &str = "<script>
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
            throughput_vs_parameter(d, &step, &mut o);
            throughput_over_time(d, &step, &mut o);
        }
        heatmaps(d, &mut o);
        latency(d, &mut o);
        cpu(d, &mut o);
        o.push_str("<h2>Statistics over repetitions</h2>\n<table><tr><th class=\"t\">step</th><th class=\"t\">parameters</th><th class=\"t\">phase</th><th>n</th><th>mean</th><th>95 % CI</th><th>median</th><th>stddev</th><th>peak interval</th><th>sustained</th><th>payload</th><th>wire</th><th class=\"t\">outliers</th><th class=\"t\">noise</th></tr>\n");
        for g in &d.stats {
            let f = |v: f64| format_metric(&g.metric, v);
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
                    (Some(m), Some(v)) => esc(&format_metric(m, v)),
                    _ => String::new(),
                },
                r.duration_ns as f64 / 1e9,
                esc(r.error.as_deref().unwrap_or(""))
            );
        }
        o.push_str("</table>\n");
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
