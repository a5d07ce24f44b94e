//! The report's charts, built from an experiment: what goes on which axis, in which unit, with
//! which labels. Drawing is `svg`'s; this decides the content.
//!
//! - one unit family per chart: a chart per (step, headline metric), values shown in the unit
//!   of the metric's family that fits them (`throughput, Mbit/s`);
//! - parameters as their resolved, typed values: a duration on a linear axis in ms, a size on a
//!   log-2 axis, a word as categories in typed order; a series whose parameter is a template
//!   (`{bdp}`) is one series, labelled with the range of values it took.

use std::collections::BTreeMap;
use std::fmt::Write;

use nsperf_results::stats::{GroupStats, series_stats};
use nsperf_results::{ParamKind, ParamValue, Phase, RunConditions, RunStatus, params_label};

use crate::ExperimentData;
use crate::svg::{self, HLine, Line, Marker, Plot, XAxis, esc};
use nsperf_results::{Metric, Unit};

mod clients;
mod groups;

pub(crate) use clients::clients;
pub(crate) use groups::{cpu, heatmaps, latency};

/// Appends a chart in its `<figure>`.
pub(crate) fn figure(out: &mut String, kind: &str, svg: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure class=\"chart\" data-chart=\"{kind}\">{svg}<figcaption>{}</figcaption></figure>",
        esc(caption)
    );
}

fn ms(v: f64) -> String {
    format!("{} ms", svg::short(v))
}

fn bytes(v: f64) -> String {
    nsperf_core::Bytes(v.max(0.0).round() as u64).to_string()
}

/// Formats an x value for a tick.
type TickFormat = fn(f64) -> String;

/// How a parameter goes on the x axis: its axis, its title, and the x of a value.
struct XParam {
    name: String,
    kind: ParamKind,
    cats: Vec<ParamValue>,
}

impl XParam {
    fn pick(groups: &[&GroupStats], names: &[String]) -> Option<XParam> {
        let typed = names.iter().find(|n| {
            groups
                .iter()
                .all(|g| g.params.get(*n).is_some_and(|v| v.number.is_some()))
        });
        let name = typed.or(names.first())?.clone();
        let mut cats: Vec<ParamValue> = groups
            .iter()
            .filter_map(|g| g.params.get(&name).cloned())
            .collect();
        cats.sort();
        cats.dedup();
        let kind = match typed {
            Some(_) => cats.first().map(|v| v.kind).unwrap_or(ParamKind::Text),
            None => ParamKind::Text,
        };
        Some(XParam { name, kind, cats })
    }

    fn x(&self, v: &ParamValue) -> f64 {
        match (self.kind, v.number) {
            (ParamKind::Duration, Some(s)) => s * 1e3,
            (ParamKind::Text, _) | (_, None) => {
                self.cats.iter().position(|c| c == v).unwrap_or(0) as f64
            }
            (_, Some(n)) => n,
        }
    }

    /// The title of a column of its values in their base unit (sizes in bytes, durations
    /// in ms, rates in bit/s), for a spreadsheet.
    fn table_label(&self) -> String {
        match self.kind {
            ParamKind::Duration => format!("{}, ms", self.name),
            ParamKind::Size => format!("{}, bytes", self.name),
            ParamKind::Rate => format!("{}, bit/s", self.name),
            ParamKind::Number | ParamKind::Text => self.name.clone(),
        }
    }

    fn axis(&self) -> (XAxis, Option<TickFormat>, String) {
        match self.kind {
            ParamKind::Duration => (XAxis::Linear, Some(ms), format!("{}, ms", self.name)),
            ParamKind::Size if self.cats.len() > 1 => (
                XAxis::Log2,
                Some(bytes),
                format!("{} (log scale)", self.name),
            ),
            ParamKind::Size => (XAxis::Linear, Some(bytes), self.name.clone()),
            ParamKind::Rate => (XAxis::Linear, None, format!("{}, bit/s", self.name)),
            ParamKind::Number => (XAxis::Linear, None, self.name.clone()),
            ParamKind::Text => (
                XAxis::Categories(self.cats.iter().map(|c| c.label()).collect()),
                None,
                self.name.clone(),
            ),
        }
    }
}

/// The legend text of a series: its parameters other than the x one, a template named with
/// the range of values it took (`window=bdp (64 KiB … 550 KiB)`), and the phase; with
/// neither, the group's step (`nfs-write`).
fn series_label(groups: &[&GroupStats], skip: &str, phase: Phase) -> String {
    let mut parts: Vec<String> = Vec::new();
    let Some(first) = groups.first() else {
        return String::new();
    };
    for (k, v) in first.params.iter().filter(|(k, _)| k.as_str() != skip) {
        let mut vals: Vec<&ParamValue> = groups.iter().filter_map(|g| g.params.get(k)).collect();
        vals.sort();
        vals.dedup();
        let text = match (&v.template, vals.as_slice()) {
            (Some(t), [a, .., b]) => format!(
                "{} ({} … {})",
                t.trim_matches(|c| c == '{' || c == '}'),
                a.label(),
                b.label()
            ),
            _ => v.label(),
        };
        parts.push(format!("{k}={text}"));
    }
    match (parts.is_empty(), phase) {
        (true, Phase::None) => first.step.clone(),
        // No other parameter: the phase names the series (`cold`, not `all (cold)`).
        (true, phase) => phase.to_string(),
        (false, Phase::None) => parts.join(", "),
        (false, phase) => format!("{} ({phase})", parts.join(", ")),
    }
}

/// The measured values of a group's repetitions.
fn samples(d: &ExperimentData, g: &GroupStats) -> Vec<f64> {
    d.runs
        .iter()
        .filter(|r| g.run_ids.contains(&r.id) && r.status == RunStatus::Ok)
        .filter_map(|r| r.value)
        .collect()
}

/// Throughput (or the step's headline) against its first typed parameter, one chart per
/// metric of the step.
pub(crate) fn throughput_vs_parameter(d: &ExperimentData, step: &str, out: &mut String) {
    let all: Vec<(usize, &GroupStats)> = d
        .stats
        .iter()
        .enumerate()
        .filter(|(_, g)| g.step == step)
        .collect();
    let mut metrics: Vec<&Metric> = Vec::new();
    for (_, g) in &all {
        if !metrics.contains(&&g.metric) {
            metrics.push(&g.metric);
        }
    }
    for metric in metrics {
        let groups: Vec<(usize, &GroupStats)> = all
            .iter()
            .copied()
            .filter(|(_, g)| g.metric == *metric)
            .collect();
        if groups.iter().all(|(_, g)| g.params.is_empty()) {
            continue;
        }
        versus_chart(d, step, metric, &groups, out);
    }
}

/// A step's groups of one metric split into series (the other parameters' values, a
/// template's key rather than its value, and the phase) against the x parameter.
type Series<'a> = Vec<(String, Vec<(usize, &'a GroupStats)>)>;

fn split_series<'a>(
    d: &'a ExperimentData,
    step: &str,
    groups: &[(usize, &'a GroupStats)],
) -> Option<(XParam, Series<'a>)> {
    let mut names: Vec<String> = d.param_names(step);
    names.sort_by_key(|n| n != "rtt");
    let gs: Vec<&GroupStats> = groups.iter().map(|(_, g)| *g).collect();
    let xp = XParam::pick(&gs, &names)?;
    type Key = (Vec<String>, Phase);
    let mut series: BTreeMap<Key, Vec<(usize, &GroupStats)>> = BTreeMap::new();
    for &(i, g) in groups {
        if !g.params.contains_key(&xp.name) {
            continue;
        }
        let key: Vec<String> = g
            .params
            .iter()
            .filter(|(k, _)| **k != xp.name)
            .map(|(_, v)| v.series_key().to_string())
            .collect();
        series.entry((key, g.phase)).or_default().push((i, g));
    }
    let named = series
        .into_iter()
        .map(|((_, phase), members)| {
            let gs: Vec<&GroupStats> = members.iter().map(|(_, g)| *g).collect();
            (series_label(&gs, &xp.name, phase), members)
        })
        .collect();
    Some((xp, named))
}

/// The means of a step's headline against its x parameter, a column per series, for a
/// spreadsheet chart (values in the metric's base unit; `None` where a series has no point).
pub(crate) struct MeansTable {
    /// The x parameter's name.
    pub(crate) x_name: String,
    /// The x parameter's title, with the unit of `xs`.
    pub(crate) x_label: String,
    /// Sizes: a log-2 axis.
    pub(crate) log2: bool,
    /// The metric.
    pub(crate) metric: Metric,
    /// x values (ms for durations, bytes for sizes), ascending.
    pub(crate) xs: Vec<f64>,
    /// Series names.
    pub(crate) series: Vec<String>,
    /// `means[x][series]`.
    pub(crate) means: Vec<Vec<Option<f64>>>,
}

/// The means table of a step's first metric, when its x parameter is typed.
pub(crate) fn means_table(d: &ExperimentData, step: &str) -> Option<MeansTable> {
    let groups: Vec<(usize, &GroupStats)> = d
        .stats
        .iter()
        .enumerate()
        .filter(|(_, g)| g.step == step)
        .collect();
    let metric = groups.first()?.1.metric.clone();
    let groups: Vec<_> = groups
        .into_iter()
        .filter(|(_, g)| g.metric == metric)
        .collect();
    let (xp, series) = split_series(d, step, &groups)?;
    if xp.kind == ParamKind::Text {
        return None;
    }
    let mut xs: Vec<f64> = series
        .iter()
        .flat_map(|(_, m)| m.iter().map(|(_, g)| xp.x(&g.params[&xp.name])))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let means = xs
        .iter()
        .map(|x| {
            series
                .iter()
                .map(|(_, m)| {
                    m.iter()
                        .find(|(_, g)| xp.x(&g.params[&xp.name]) == *x)
                        .map(|(_, g)| g.summary.mean)
                })
                .collect()
        })
        .collect();
    Some(MeansTable {
        x_label: xp.table_label(),
        x_name: xp.name.clone(),
        log2: matches!(xp.axis().0, XAxis::Log2),
        metric,
        xs,
        series: series.into_iter().map(|(n, _)| n).collect(),
        means,
    })
}

fn versus_chart(
    d: &ExperimentData,
    step: &str,
    metric: &Metric,
    groups: &[(usize, &GroupStats)],
    out: &mut String,
) {
    let Some((xp, series)) = split_series(d, step, groups) else {
        return;
    };
    let max = groups
        .iter()
        .flat_map(|(_, g)| [g.summary.mean].into_iter().chain(samples(d, g)))
        .fold(0.0, f64::max);
    let unit = metric.unit_for(max);
    let (x_axis, x_format, x_label) = xp.axis();
    let mut plot = Plot {
        title: format!("{step}: {} vs {}", metric.quantity(), xp.name),
        x_label,
        y_label: format!("{}, mean and 95 % interval", metric.label(unit)),
        y_unit: unit.name.into(),
        x_axis,
        x_format,
        ..Default::default()
    };
    // A ceiling in bit/s, in the metric's unit.
    let rate_scale = metric.bits_per_unit().map(|b| 1.0 / b);
    let mut rate_drawn = false;
    for (si, (name, members)) in series.into_iter().enumerate() {
        let mut pts: Vec<(f64, &GroupStats, &RunConditions)> = members
            .iter()
            .map(|(i, g)| (xp.x(&g.params[&xp.name]), *g, &d.context[*i]))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if let Some(k) = rate_scale {
            ceilings(d, &mut plot, &pts, (k, unit), (si, &name), &mut rate_drawn);
        }
        plot.lines.push(Line {
            name,
            points: pts
                .iter()
                .map(|p| (p.0, p.1.summary.mean * unit.factor))
                .collect(),
            errors: pts
                .iter()
                .map(|p| {
                    (
                        p.1.summary.ci95_lo * unit.factor,
                        p.1.summary.ci95_hi * unit.factor,
                    )
                })
                .collect(),
            samples: pts
                .iter()
                .flat_map(|p| samples(d, p.1).into_iter().map(|v| (p.0, v * unit.factor)))
                .collect(),
            color: si,
            ..Default::default()
        });
    }
    let window = plot.lines.iter().any(|l| l.dashed);
    let ceilings = match (window, !plot.hlines.is_empty()) {
        (true, _) => {
            "; dashed lines are theoretical ceilings, named in the legend (window/RTT with the window the receiver advertised, mean of the repetitions, where the socket buffer was set)"
        }
        (false, true) => "; the dashed line is the link rate, a theoretical ceiling",
        (false, false) => "",
    };
    figure(
        out,
        "throughput-vs-parameter",
        &svg::plot(&plot),
        &format!(
            "{step}: mean of the repetitions (dots) with its 95 % confidence interval (bar) and each repetition (rings){ceilings}; an interval or value beyond the axis is drawn to its top with an arrow and named"
        ),
    );
}

/// The mean window the receivers of these runs advertised, where their engine reported it
/// (`peer_window_bytes`, per direction for net). Linux grants twice a requested socket buffer
/// and advertises part of it, so a 64 KiB request advertises about 84 KiB: window/RTT with
/// the request is no ceiling (a run measured 11.9 Mbit/s under a "ceiling" of 10.5 at
/// 50 ms), with the advertised window it is.
fn advertised_window<'a>(metrics: impl Iterator<Item = &'a BTreeMap<Metric, f64>>) -> Option<f64> {
    const KEYS: [&str; 3] = [
        "peer_window_bytes",
        "up.peer_window_bytes",
        "down.peer_window_bytes",
    ];
    let w: Vec<f64> = metrics
        .filter_map(|m| KEYS.iter().find_map(|k| m.get(*k).copied()))
        .filter(|w| *w > 0.0)
        .collect();
    nsperf_core::stats::mean(&w)
}

/// The theoretical ceilings of a series: window/RTT where its window was set (the window its
/// receivers advertised when known, else the one requested), and once per chart the lab's
/// link rate.
fn ceilings(
    d: &ExperimentData,
    plot: &mut Plot,
    pts: &[(f64, &GroupStats, &RunConditions)],
    (k, unit): (f64, Unit),
    (si, name): (usize, &str),
    rate_drawn: &mut bool,
) {
    let mut advertised = false;
    let curve: Vec<(f64, f64)> = pts
        .iter()
        .filter_map(|(x, g, c)| {
            let requested = c.window_bytes? as f64;
            let rtt = c.rtt_s.filter(|r| *r > 0.0)?;
            let runs = d
                .runs
                .iter()
                .filter(|r| g.run_ids.contains(&r.id) && r.status == RunStatus::Ok);
            let w = match advertised_window(runs.map(|r| &r.metrics)) {
                Some(w) => {
                    advertised = true;
                    w
                }
                None => requested,
            };
            Some((*x, w * 8.0 / rtt * k * unit.factor))
        })
        .collect();
    // One point is a ceiling too (RTTs of 0 and 50 ms: window/RTT exists at 50 ms only).
    if !curve.is_empty() {
        plot.lines.push(Line {
            name: if advertised {
                format!("window/RTT, the window advertised: {name}")
            } else {
                format!("window/RTT {name}")
            },
            points: curve,
            dashed: true,
            color: si,
            ..Default::default()
        });
    }
    if !*rate_drawn && let Some(r) = pts.iter().find_map(|p| p.2.link_rate_bps) {
        plot.hlines.push(HLine {
            y: r * k * unit.factor,
            label: format!("ceiling: link rate {}", nsperf_core::BitRate(r)),
            color: "#555".into(),
        });
        *rate_drawn = true;
    }
}

/// One repetition's interval series, its peak and its sustained mean; every other run of
/// the step that a link event overlapped gets its own chart, so the outage it crossed is seen.
pub(crate) fn throughput_over_time(d: &ExperimentData, step: &str, out: &mut String) {
    // A step on several clients: their chart shows the aggregate among them.
    if clients::has_clients(d, step) {
        return;
    }
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
fn series_chart(d: &ExperimentData, g: &GroupStats, id: i64, out: &mut String) {
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
    let unit = g.metric.unit_for(st.peak);
    let plot = Plot {
        title: format!(
            "{step}: {} over time ({}, repetition {rep})",
            g.metric.quantity(),
            params_label(&g.params, "")
        ),
        x_label: "time, s".into(),
        y_label: g.metric.label(unit),
        y_unit: unit.name.into(),
        lines: vec![Line {
            name: "per interval".into(),
            points: series
                .iter()
                .map(|p| (p.start_s + p.length_s / 2.0, p.value * unit.factor))
                .collect(),
            ..Default::default()
        }],
        hlines: vec![HLine {
            y: st.sustained_mean * unit.factor,
            label: format!(
                "sustained mean {} (from {:.1} s)",
                g.metric.format(st.sustained_mean),
                st.steady_start_s
            ),
            color: "#2ca02c".into(),
        }],
        markers: vec![Marker {
            x: peak_at,
            y: st.peak * unit.factor,
            label: format!("peak {}", g.metric.format(st.peak)),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #14: a 64 KiB socket buffer measured 11.9 Mbit/s at 50 ms, above its
    /// window/RTT "ceiling" of 10.5 Mbit/s: Linux advertised 84 KiB. The ceiling takes the
    /// advertised window.
    #[test]
    fn the_window_ceiling_is_the_advertised_window() {
        let run = |w: f64| BTreeMap::from([(Metric::new("up.peer_window_bytes"), w)]);
        let runs = [run(86016.0), run(86016.0), run(85504.0), BTreeMap::new()];
        let w = advertised_window(runs.iter()).unwrap();
        assert!((w - 85845.33).abs() < 0.01, "{w}");
        assert!(
            w * 8.0 / 0.05 > 11.91e6,
            "the measured 11.91 Mbit/s is under it"
        );
        assert_eq!(advertised_window([BTreeMap::new()].iter()), None);
    }
}
