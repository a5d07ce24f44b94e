//! Charts of a step run on several hosts or lab sites at one instant: each client's rate
//! over time beside the aggregate and the shared port's ceiling, and each client's rate and
//! share as bars with the slowest marked and Jain's index in the title.
//!
//! Every figure drawn is a stored one: each client's intervals as the runner placed them on
//! the run's clock (`run_hosts.series_json`), the aggregate series (the run's intervals),
//! `peak_interval`, `sustained_mean`, `steady_start_s`, `fairness_jain`, each host's
//! `window_rate` and `share_pct`, and `port.payload_ceiling`/`port.rate_bps`/
//! `port.payload_pct`. Nothing is recomputed here, so nothing can disagree with the tables.
//!
//! One line per client, not a stack: the clients' intervals are on their own grids (each
//! starts at its own measured start) and their first and last intervals lie outside the
//! window every client measured (a ramp, a drain of the port's queue after the deadline), so
//! a stack of them would top out above the stored aggregate — the "370 MiB/s through a
//! 114 MiB/s port" picture the aggregate over the common window exists to avoid.

use std::collections::BTreeSet;

use nsperf_results::{HostPart, HostRole, RunRecord, RunStatus, SeriesPoint};

use super::figure;
use crate::ExperimentData;
use crate::svg::{self, Bars, HLine, Line, Marker, Plot};
use nsperf_results::{Metric, Unit};

/// One run on several clients, with what the charts need of it.
struct ManyRun<'a> {
    run: &'a RunRecord,
    metric: &'a Metric,
    /// The clients that measured, in the order stored.
    clients: Vec<&'a HostPart>,
    /// The aggregate series (the run's intervals).
    aggregate: &'a [SeriesPoint],
}

impl<'a> ManyRun<'a> {
    fn of(d: &'a ExperimentData, run: &'a RunRecord) -> Option<ManyRun<'a>> {
        let clients: Vec<&HostPart> = d
            .hosts
            .get(&run.id)?
            .iter()
            .filter(|h| h.role != HostRole::Server && h.error.is_none() && !h.series.is_empty())
            .collect();
        if clients.len() < 2 || run.status != RunStatus::Ok {
            return None;
        }
        Some(ManyRun {
            run,
            metric: run.metric.as_ref()?,
            clients,
            aggregate: d.series.get(&run.id).map(Vec::as_slice).unwrap_or(&[]),
        })
    }

    fn metric(&self, k: &Metric) -> Option<f64> {
        self.run.metrics.get(k).copied()
    }

    fn fmt(&self, v: f64) -> String {
        self.metric.format(v)
    }

    /// A client's rate as the aggregate and its share counted it: over the common window
    /// when there was one, else over its own pass.
    fn rate(h: &HostPart) -> f64 {
        h.metrics
            .get(&Metric::WINDOW_RATE)
            .copied()
            .unwrap_or(h.value)
    }

    /// The slowest client (the first of equals, as the runner's `host_shares` finding).
    fn slowest(&self) -> Option<usize> {
        (0..self.clients.len())
            .min_by(|&a, &b| Self::rate(self.clients[a]).total_cmp(&Self::rate(self.clients[b])))
    }

    /// The shared port's TCP payload rate with its label, when the run went through one.
    fn ceiling(&self) -> Option<(f64, String)> {
        let c = self.metric(&Metric::PORT_PAYLOAD_CEILING)?;
        let rate = self.metric(&Metric::PORT_RATE_BPS)?;
        let pct = self.metric(&Metric::PORT_PAYLOAD_PCT).unwrap_or(f64::NAN);
        Some((
            c,
            format!(
                "ceiling: the shared {} port's TCP payload rate, {} ({pct:.1} % used)",
                nsperf_core::BitRate(rate),
                self.fmt(c)
            ),
        ))
    }

    /// The peak interval and the sustained mean, as stored, in one sentence.
    fn peak_vs_sustained(&self) -> Option<String> {
        let peak = self.metric(&Metric::PEAK_INTERVAL)?;
        let sustained = self.metric(&Metric::SUSTAINED_MEAN)?;
        let from = self.metric(&Metric::STEADY_START_S).unwrap_or(0.0);
        Some(format!(
            "aggregate: peak interval {}, sustained mean {} (from {from:.1} s)",
            self.fmt(peak),
            self.fmt(sustained)
        ))
    }

    fn title_params(&self) -> String {
        let p = nsperf_results::params_label(&self.run.params, "");
        let phase = match self.run.phase {
            nsperf_results::Phase::None => String::new(),
            ph => format!(", {ph}"),
        };
        format!("{p}{phase}, repetition {}", self.run.repetition)
    }
}

/// The clients' charts of every step run on several clients: for each cell and phase of the
/// step, its first repetition that has them.
pub(crate) fn clients(d: &ExperimentData, step: &str, out: &mut String) {
    let mut seen = BTreeSet::new();
    for r in d.runs.iter().filter(|r| r.step == step) {
        let Some(m) = ManyRun::of(d, r) else { continue };
        if !seen.insert((r.cell.as_str(), r.phase)) {
            continue;
        }
        over_time(&m, out);
        shares(&m, out);
    }
}

/// True when the step's runs are drawn by [`clients`] (the single-series chart over time
/// would repeat the aggregate without its clients).
pub(crate) fn has_clients(d: &ExperimentData, step: &str) -> bool {
    d.runs
        .iter()
        .filter(|r| r.step == step)
        .any(|r| ManyRun::of(d, r).is_some())
}

/// Each client's intervals, the aggregate's, its peak and sustained mean, and the port's
/// ceiling.
fn over_time(m: &ManyRun<'_>, out: &mut String) {
    let ceiling = m.ceiling();
    let max = m
        .clients
        .iter()
        .flat_map(|h| h.series.iter())
        .chain(m.aggregate)
        .map(|p| p.value)
        .chain(ceiling.as_ref().map(|c| c.0))
        .fold(0.0, f64::max);
    let unit = m.metric.unit_for(max);
    let points = |s: &[SeriesPoint], u: Unit| -> Vec<(f64, f64)> {
        s.iter()
            .map(|p| (p.start_s + p.length_s / 2.0, p.value * u.factor))
            .collect()
    };
    let mut plot = Plot {
        title: format!(
            "{}: each client's {} over time, and their aggregate ({})",
            m.run.step,
            m.metric.quantity(),
            m.title_params()
        ),
        x_label: "time from the start barrier, s".into(),
        y_label: m.metric.label(unit),
        y_unit: unit.name.into(),
        ..Default::default()
    };
    if !m.aggregate.is_empty() {
        plot.lines.push(Line {
            name: format!("aggregate of the {} clients", m.clients.len()),
            points: points(m.aggregate, unit),
            color: 0,
            ..Default::default()
        });
    }
    for (i, h) in m.clients.iter().enumerate() {
        plot.lines.push(Line {
            name: h.host.clone(),
            points: points(&h.series, unit),
            // Colour 0 is the aggregate's.
            color: 1 + i % (svg::PALETTE.len() - 1),
            ..Default::default()
        });
    }
    if let Some((c, label)) = ceiling {
        plot.hlines.push(HLine {
            y: c * unit.factor,
            label,
            color: "#555".into(),
        });
    }
    let stated = m.peak_vs_sustained();
    if let (Some(peak), Some(sustained)) = (
        m.metric(&Metric::PEAK_INTERVAL),
        m.metric(&Metric::SUSTAINED_MEAN),
    ) {
        let from = m.metric(&Metric::STEADY_START_S).unwrap_or(0.0);
        plot.hlines.push(HLine {
            y: sustained * unit.factor,
            label: format!(
                "sustained mean of the aggregate {} (from {from:.1} s)",
                m.fmt(sustained)
            ),
            color: "#2ca02c".into(),
        });
        // The stored peak is one of the aggregate's intervals: mark it there.
        if let Some(p) = m.aggregate.iter().find(|p| p.value == peak) {
            plot.markers.push(Marker {
                x: p.start_s + p.length_s / 2.0,
                y: peak * unit.factor,
                label: format!("peak interval of the aggregate {}", m.fmt(peak)),
            });
        }
    }
    if let (Some(s), Some(len)) = (
        m.metric(&Metric::COMMON_WINDOW_START_S),
        m.metric(&Metric::COMMON_WINDOW_S),
    ) {
        plot.notes.push(format!(
            "every client measured from {s:.2} s to {:.2} s: the aggregate is over that window",
            s + len
        ));
    }
    let caption = format!(
        "{}: one line per client (its own intervals, placed at its measured start; not stacked, as their intervals neither share a grid nor all lie in the window every client measured) and the aggregate over the common window, as stored{}{}",
        m.run.step,
        stated.map(|s| format!("; {s}")).unwrap_or_default(),
        m.ceiling()
            .map(|c| format!("; dashed: {}", c.1))
            .unwrap_or_default()
    );
    figure(out, "clients-over-time", &svg::plot(&plot), &caption);
}

/// Each client's rate as a bar labelled with its share, the slowest marked, Jain's index in
/// the title.
fn shares(m: &ManyRun<'_>, out: &mut String) {
    let rates: Vec<f64> = m.clients.iter().map(|h| ManyRun::rate(h)).collect();
    let unit = m.metric.unit_for(rates.iter().copied().fold(0.0, f64::max));
    let share = |h: &HostPart| {
        h.metrics
            .get(&Metric::SHARE_PCT)
            .map(|s| format!(" ({s:.1} %)"))
            .unwrap_or_default()
    };
    let jain = m
        .metric(&Metric::FAIRNESS_JAIN)
        .map(|j| format!(", Jain's fairness index {j:.3}"))
        .unwrap_or_default();
    let windowed = m
        .clients
        .iter()
        .all(|h| h.metrics.contains_key(&Metric::WINDOW_RATE));
    let over = if windowed {
        "over the window every client measured"
    } else {
        "over its own pass"
    };
    let slowest = m.slowest();
    let marked = slowest.map(|i| {
        let h = m.clients[i];
        (
            i,
            format!(
                "slowest: {}, {}{}",
                h.host,
                m.fmt(rates[i]),
                share(h).replace(" %)", " % of the aggregate)")
            ),
        )
    });
    let b = Bars {
        title: format!(
            "{}: each client's {} and share{jain} ({})",
            m.run.step,
            m.metric.quantity(),
            m.title_params()
        ),
        y_label: m.metric.label(unit),
        categories: m
            .clients
            .iter()
            .map(|h| format!("{}{}", h.host, share(h)))
            .collect(),
        series: vec![format!("{} {over}", m.metric.quantity())],
        values: rates.iter().map(|r| vec![r * unit.factor]).collect(),
        label: None,
        marked,
    };
    let caption = format!(
        "{}: each client's {} {over} with its share of the aggregate ({}){jain} (1 = equal shares, 1/{} = one client had it all); the slowest drawn in red",
        m.run.step,
        m.metric.quantity(),
        m.fmt(m.run.value.unwrap_or(0.0)),
        m.clients.len()
    );
    figure(out, "client-shares", &svg::bars(&b), &caption);
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_results::{Measurement, NewExperiment, Phase, RunHeader, RunKey, Store};

    fn pts(start: f64, vals: &[f64]) -> Vec<SeriesPoint> {
        vals.iter()
            .enumerate()
            .map(|(i, &v)| SeriesPoint {
                start_s: start + i as f64,
                length_s: 1.0,
                value: v,
            })
            .collect()
    }

    /// Three clients through a 200 Mbit/s port, stored as the runner stores them; the report
    /// read back from the store.
    fn stored_run(dir: &std::path::Path) -> ExperimentData {
        let mut store = Store::open(&dir.join("r.db")).unwrap();
        let id = store
            .create_experiment(&NewExperiment {
                plan_name: "many",
                description: None,
                fingerprint: "f",
                plan_toml: "",
                total_runs: 1,
                host_json: "{}",
                label: None,
            })
            .unwrap();
        let client = |name: &str, start: f64, vals: &[f64], rate: f64, share: f64| HostPart {
            host: name.into(),
            role: HostRole::Client,
            metric: Metric::THROUGHPUT_BYTES_PER_S,
            value: rate * 1.1,
            series: pts(start, vals),
            metrics: [(Metric::WINDOW_RATE, rate), (Metric::SHARE_PCT, share)]
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let metrics = [
            (Metric::PEAK_INTERVAL, 23.5e6),
            (Metric::SUSTAINED_MEAN, 22.25e6),
            (Metric::STEADY_START_S, 1.1),
            (Metric::FAIRNESS_JAIN, 0.654),
            (Metric::PORT_PAYLOAD_CEILING, 23.91e6),
            (Metric::PORT_RATE_BPS, 200e6),
            (Metric::PORT_PAYLOAD_PCT, 94.1),
            (Metric::COMMON_WINDOW_START_S, 0.1),
            (Metric::COMMON_WINDOW_S, 3.0),
        ];
        let m = Measurement {
            metric: Metric::THROUGHPUT_BYTES_PER_S,
            value: 22.5e6,
            metrics: metrics.into_iter().collect(),
            series: pts(0.1, &[21e6, 23.5e6, 22.25e6]),
            hosts: vec![
                client("c1", 0.0, &[11e6, 12e6, 11e6, 9e6], 11.2e6, 49.8),
                client("c2", 0.05, &[10e6, 10.5e6, 10e6], 10.3e6, 45.8),
                client("c3", 0.1, &[1e6, 1e6, 1e6], 1.0e6, 4.4),
                HostPart {
                    host: "nas".into(),
                    role: HostRole::Server,
                    metric: Metric::THROUGHPUT_BYTES_PER_S,
                    value: 22.4e6,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let key = RunKey {
            cell: "-".into(),
            step: "write".into(),
            phase: Phase::None,
            repetition: 1,
        };
        let header = RunHeader {
            key: &key,
            kind: nsperf_results::StepKind::Io,
            params: &[],
            started_unix_ns: 1,
            conditions: None,
        };
        store.write_run(id, &header, Ok(&m)).unwrap();
        ExperimentData::load(&store, "latest").unwrap()
    }

    /// The texts of a chart's side column, joined with spaces (its lines are wrapped).
    fn legend(chart: &str) -> String {
        let g = chart.split("<g class=\"legend\">").nth(1).unwrap_or("");
        let g = g.split("</g>").next().unwrap_or("");
        g.split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>')?.1.split_once("</text>").map(|x| x.0))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The caption of the first figure of `html`.
    fn caption(html: &str) -> &str {
        let c = html.split("<figcaption>").nth(1).unwrap_or("");
        c.split("</figcaption>").next().unwrap_or("")
    }

    /// Issue 21 item 3: a step on three clients gets a line per client beside the aggregate
    /// with the port's ceiling dashed and labelled, the stored peak and sustained mean stated
    /// beside it, and bars of the clients' rates with their shares, the slowest marked and
    /// Jain's index in the title — each figure the stored one.
    #[test]
    fn a_step_on_many_clients_draws_their_lines_the_ceiling_and_their_shares() {
        let dir = tempfile::tempdir().unwrap();
        let d = stored_run(dir.path());
        assert!(has_clients(&d, "write"));
        let mut out = String::new();
        clients(&d, "write", &mut out);
        let f = |v: f64| Metric::THROUGHPUT_BYTES_PER_S.format(v);
        let (time, bars) = out.split_once("data-chart=\"client-shares\"").unwrap();
        assert!(time.contains("data-chart=\"clients-over-time\""), "{out}");
        // A line per client and the aggregate (4 polylines), the server not among them.
        assert_eq!(time.matches("<polyline").count(), 4, "{time}");
        for name in ["c1", "c2", "c3", "aggregate of the 3 clients"] {
            assert!(time.contains(&format!(">{name}</text>")), "{name}: {time}");
        }
        assert!(!time.contains(">nas</text>"));
        // The port's ceiling, dashed, named in the legend; the stored peak and sustained
        // mean marked there and stated in the caption.
        let side = legend(time);
        assert!(time.contains("class=\"ceiling\""));
        for text in [
            format!(
                "ceiling: the shared 200 Mbit/s port's TCP payload rate, {} (94.1 % used)",
                f(23.91e6)
            ),
            format!(
                "sustained mean of the aggregate {} (from 1.1 s)",
                f(22.25e6)
            ),
            format!("peak interval of the aggregate {}", f(23.5e6)),
        ] {
            assert!(side.contains(&text), "{text}: {side}");
        }
        let stated = format!(
            "aggregate: peak interval {}, sustained mean {} (from 1.1 s)",
            f(23.5e6),
            f(22.25e6)
        );
        assert!(caption(time).contains(&stated), "{time}");
        // Bars: three clients with their stored shares, the slowest marked, Jain's index.
        assert!(bars.contains("Jain's fairness index 0.654"), "{bars}");
        assert_eq!(bars.matches("class=\"bar\"").count(), 3, "{bars}");
        assert!(bars.contains("c3 (4.4 %)"), "{bars}");
        let slowest = format!("slowest: c3, {} (4.4 % of the aggregate)", f(1.0e6));
        assert!(legend(bars).contains(&slowest), "{bars}");
        assert_eq!(
            bars.matches(svg::MARKED).count(),
            2,
            "the bar and its swatch: {bars}"
        );
        // A run on one host has none of these.
        let mut one = d.clone();
        one.hosts.values_mut().for_each(|h| h.truncate(1));
        assert!(!has_clients(&one, "write"));
        let mut out = String::new();
        clients(&one, "write", &mut out);
        assert!(out.is_empty());
    }
}
