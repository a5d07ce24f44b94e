//! x-y plots: series with error bars and their repetitions, dashed theoretical curves,
//! reference lines, markers; linear, log-2 (sizes) or categorical x axes; a y axis clamped to
//! the data's robust range with what lies beyond marked.

use std::fmt::Write;

use super::marks::{HLine, Line, Marker, XEvent};
use super::{
    Frame, PALETTE, Side, Swatch, arrow, draw_axes, draw_x_ticks, fit_ticks, frame, nice_ticks,
    open, short, title_lines,
};

/// The x axis of a plot.
#[derive(Debug, Clone, Default)]
pub enum XAxis {
    /// Linear, automatic ticks.
    #[default]
    Linear,
    /// Base-2 logarithmic (sizes): ticks at powers of two; x values must be positive.
    Log2,
    /// Categories at x = 0, 1, 2, … with these labels.
    Categories(Vec<String>),
}

/// An x-y plot.
#[derive(Debug, Clone, Default)]
pub struct Plot {
    /// Title.
    pub title: String,
    /// x-axis title.
    pub x_label: String,
    /// y-axis title, with its unit (`throughput, Mbit/s`).
    pub y_label: String,
    /// The y unit, for the notes on clipped values (`Mbit/s`).
    pub y_unit: String,
    /// The x axis.
    pub x_axis: XAxis,
    /// Formats an x value for a tick or a note (default: a short number).
    pub x_format: Option<fn(f64) -> String>,
    /// Series.
    pub lines: Vec<Line>,
    /// Reference lines.
    pub hlines: Vec<HLine>,
    /// Markers.
    pub markers: Vec<Marker>,
    /// Notes under the legend.
    pub notes: Vec<String>,
    /// Events on the x axis, drawn behind the series (clipped to the axis).
    pub events: Vec<XEvent>,
}

impl Plot {
    fn x_text(&self, x: f64) -> String {
        match &self.x_axis {
            XAxis::Categories(c) => c
                .get(x.round().max(0.0) as usize)
                .cloned()
                .unwrap_or_default(),
            _ => self.x_format.map(|f| f(x)).unwrap_or_else(|| short(x)),
        }
    }
}

/// The top of the y axis: the largest of `values` within Tukey's far-out fence (Q3 + 3 IQR;
/// Tukey 1977, *Exploratory Data Analysis*) when there are 4 values or more, else the largest,
/// and every one of `always` (reference lines); with 8 % headroom, rounded to a nice tick.
pub(super) fn y_top(values: &[f64], always: &[f64]) -> f64 {
    let mut v: Vec<f64> = values
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .collect();
    v.sort_by(f64::total_cmp);
    let max = v.last().copied().unwrap_or(0.0);
    let top = if v.len() >= 4 {
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        let fence = q(0.75) + 3.0 * (q(0.75) - q(0.25));
        v.iter()
            .copied()
            .filter(|x| *x <= fence)
            .fold(0.0, f64::max)
    } else {
        max
    };
    let top = always
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(top, f64::max);
    let top = if top > 0.0 { top * 1.08 } else { 1.0 };
    super::nice_ceiling(top)
}

/// The x range and scale of a plot.
struct XScale {
    lo: f64,
    hi: f64,
    log: bool,
}

impl XScale {
    fn of(p: &Plot) -> Option<XScale> {
        if let XAxis::Categories(c) = &p.x_axis {
            return Some(XScale {
                lo: -0.5,
                hi: c.len().max(1) as f64 - 0.5,
                log: false,
            });
        }
        let log = matches!(p.x_axis, XAxis::Log2);
        let xs: Vec<f64> = p
            .lines
            .iter()
            .flat_map(|l| l.points.iter().chain(&l.samples).map(|q| q.0))
            .chain(p.markers.iter().map(|m| m.x))
            .filter(|x| x.is_finite() && (!log || *x > 0.0))
            .map(|x| if log { x.log2() } else { x })
            .collect();
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !lo.is_finite() {
            return None;
        }
        let (lo, hi) = if hi - lo < 1e-12 {
            (lo - 1.0, hi + 1.0)
        } else {
            let pad = (hi - lo) * 0.04;
            (lo - pad, hi + pad)
        };
        Some(XScale { lo, hi, log })
    }

    fn pos(&self, x: f64) -> Option<f64> {
        let x = if self.log {
            (x > 0.0).then(|| x.log2())?
        } else {
            x
        };
        x.is_finite().then_some((x - self.lo) / (self.hi - self.lo))
    }

    fn ticks(&self, p: &Plot) -> Vec<f64> {
        match &p.x_axis {
            XAxis::Categories(c) => (0..c.len()).map(|i| i as f64).collect(),
            XAxis::Log2 => {
                let (a, b) = (self.lo.ceil() as i32, self.hi.floor() as i32);
                let step = ((b - a) / 8 + 1).max(1);
                (a..=b)
                    .filter(|k| (k - a) % step == 0)
                    .map(|k| 2f64.powi(k))
                    .collect()
            }
            XAxis::Linear => nice_ticks(self.lo, self.hi, 6)
                .into_iter()
                .filter(|t| *t >= self.lo && *t <= self.hi)
                .collect(),
        }
    }
}

/// What lies beyond the axis top, to mark with an arrow and name in the legend: (x, colour,
/// note).
fn beyond_top(p: &Plot, ymax: f64) -> Vec<(f64, usize, String)> {
    let mut beyond: Vec<(f64, usize, String)> = Vec::new();
    for l in p.lines.iter().filter(|l| !l.dashed) {
        for (i, q) in l.points.iter().enumerate() {
            let note = if q.1 > ymax {
                format!(
                    "{} at {}: {} {} (off the axis)",
                    l.name,
                    p.x_text(q.0),
                    short(q.1),
                    p.y_unit
                )
            } else if let Some(e) = l.errors.get(i).filter(|e| e.1 > ymax) {
                format!(
                    "{} at {}: 95 % interval up to {} {}",
                    l.name,
                    p.x_text(q.0),
                    short(e.1),
                    p.y_unit
                )
            } else {
                continue;
            };
            beyond.push((q.0, l.color, note));
        }
        for q in l.samples.iter().filter(|q| q.1 > ymax) {
            beyond.push((
                q.0,
                l.color,
                format!(
                    "{}: a repetition at {} {} (at {}, off the axis)",
                    l.name,
                    short(q.1),
                    p.y_unit,
                    p.x_text(q.0)
                ),
            ));
        }
    }
    beyond
}

/// The side column of a plot: its series, reference lines, markers, what lies beyond the
/// axis top, its events and its notes.
fn legend(p: &Plot, beyond: &[(f64, usize, String)], ymax: f64) -> Side {
    let mut side = Side::default();
    let mut samples_shown = false;
    for l in &p.lines {
        // A dashed curve wholly above the axis top is not drawn: its entry says so.
        let above = l.dashed && !l.points.is_empty() && l.points.iter().all(|q| q.1 > ymax);
        let name = if above {
            format!("{} (above the axis)", l.name)
        } else {
            l.name.clone()
        };
        side.add(
            Swatch::Line(PALETTE[l.color % PALETTE.len()].into(), l.dashed),
            &name,
        );
        if !l.samples.is_empty() && !samples_shown {
            side.add(Swatch::Dots("#555".into()), "single repetitions");
            samples_shown = true;
        }
    }
    for h in &p.hlines {
        side.add(Swatch::Line(h.color.clone(), true), &h.label);
    }
    for m in &p.markers {
        side.add(Swatch::Ring, &m.label);
    }
    for (_, _, n) in beyond {
        side.add(Swatch::Arrow, n);
    }
    for e in &p.events {
        let sw = match e.to {
            Some(_) => Swatch::Box(super::marks::OUTAGE.into()),
            None => Swatch::Line(super::marks::CHANGE.into(), true),
        };
        side.add(sw, &e.label);
    }
    for n in &p.notes {
        side.add(Swatch::None, n);
    }
    side
}

/// The x ticks of a plot in the frame `f` (x in px, label), and the px between two.
fn x_ticks(p: &Plot, xs: &XScale, f: &Frame) -> (Vec<(f64, String)>, f64) {
    let px = |x: f64| xs.pos(x).map(|t| f.x0 + t * (f.x1 - f.x0));
    let ticks: Vec<(f64, String)> = xs
        .ticks(p)
        .into_iter()
        .filter_map(|t| Some((px(t)?, p.x_text(t))))
        .collect();
    let slot = match (&p.x_axis, ticks.as_slice()) {
        (XAxis::Categories(_), _) => (f.x1 - f.x0) / (xs.hi - xs.lo),
        (_, [a, b, ..]) => b.0 - a.0,
        _ => f.x1 - f.x0,
    };
    (ticks, slot.abs().max(1.0))
}

/// Renders a plot. A plot without any point still renders, with a "no data" note.
pub fn plot(p: &Plot) -> String {
    let title = title_lines(&p.title);
    let mut out = String::new();
    let Some(xs) = XScale::of(p) else {
        let f = frame(title.len(), 20.0, false, 0.0);
        open(&mut out, &p.title, &title, "plot", f.height);
        let _ = write!(
            out,
            r##"<text x="{:.0}" y="{:.0}" text-anchor="middle" font-size="13" fill="#777">no data</text></svg>"##,
            (f.x0 + f.x1) / 2.0,
            (f.y0 + f.y1) / 2.0
        );
        return out;
    };
    let range: Vec<f64> = p
        .lines
        .iter()
        .filter(|l| !l.dashed)
        .flat_map(|l| l.points.iter().chain(&l.samples).map(|q| q.1))
        .chain(p.markers.iter().map(|m| m.y))
        .collect();
    let refs: Vec<f64> = p.hlines.iter().map(|h| h.y).collect();
    let ymax = y_top(&range, &refs);
    let beyond = beyond_top(p, ymax);
    let side = legend(p, &beyond, ymax);
    // The x extent of the frame does not depend on its height: ticks are placed once.
    let probe = frame(title.len(), 0.0, true, side.height());
    let (xt, slot) = x_ticks(p, &xs, &probe);
    let lay = fit_ticks(&xt, slot, matches!(p.x_axis, XAxis::Categories(_)));
    let f = frame(
        title.len(),
        lay.height,
        !p.x_label.is_empty(),
        side.height(),
    );
    let sx = |x: f64| xs.pos(x).map(|t| f.x0 + t * (f.x1 - f.x0));
    let sy = |y: f64| f.y1 - (y.clamp(0.0, ymax) / ymax) * (f.y1 - f.y0);
    open(&mut out, &p.title, &title, "plot", f.height);
    let y_ticks: Vec<(f64, String)> = nice_ticks(0.0, ymax, 5)
        .into_iter()
        .filter(|t| *t <= ymax * (1.0 + 1e-9))
        .map(|t| (sy(t), short(t)))
        .collect();
    draw_axes(&mut out, &f, &y_ticks, &p.x_label, &p.y_label, lay.height);
    draw_x_ticks(&mut out, &xt, f.y1, &lay);
    super::marks::draw_events(&mut out, &f, &p.events, &|x| {
        xs.pos(x).map(|t| f.x0 + t.clamp(0.0, 1.0) * (f.x1 - f.x0))
    });
    super::marks::draw_hlines(&mut out, &f, &p.hlines, &sy);
    for l in &p.lines {
        super::marks::draw_line(&mut out, &f, l, &sx, ymax);
    }
    for m in &p.markers {
        if let Some(x) = sx(m.x) {
            let _ = write!(
                out,
                r##"<g class="marker"><circle cx="{x:.1}" cy="{y:.1}" r="5" fill="none" stroke="#000" stroke-width="1.5"/></g>"##,
                y = sy(m.y)
            );
        }
    }
    for (x, c, _) in &beyond {
        if let Some(x) = sx(*x) {
            arrow(&mut out, x, f.y0 + 9.0, PALETTE[c % PALETTE.len()]);
        }
    }
    side.draw(&mut out, &f);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_draws_points_lines_and_legend() {
        let p = Plot {
            title: "t <&>".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            lines: vec![Line {
                name: "a".into(),
                points: vec![(0.0, 1.0), (1.0, 2.0)],
                errors: vec![(0.5, 1.5), (1.5, 2.5)],
                ..Default::default()
            }],
            hlines: vec![HLine {
                y: 3.0,
                label: "link rate".into(),
                color: "#000".into(),
            }],
            ..Default::default()
        };
        let s = plot(&p);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("t &lt;&amp;&gt;"));
        assert_eq!(s.matches("<circle").count(), 2);
        assert!(s.contains(">link rate</text>"));
        assert!(plot(&Plot::default()).contains("no data"));
    }

    /// Issue #14: one repetition stalled at 1.2 Mbit/s made a 95 % interval reaching far
    /// above the link; the axis stays on the data and the interval is marked and named.
    #[test]
    fn an_interval_far_above_the_data_is_clipped_and_named() {
        let p = Plot {
            y_unit: "Mbit/s".into(),
            lines: vec![Line {
                name: "window=bdp".into(),
                points: vec![(0.0, 42.0), (50.0, 42.5), (100.0, 28.9), (150.0, 42.0)],
                errors: vec![(41.0, 43.0), (42.0, 43.0), (0.9, 7000.0), (41.0, 43.0)],
                samples: vec![(100.0, 42.8), (100.0, 42.7), (100.0, 1.2)],
                ..Default::default()
            }],
            hlines: vec![HLine {
                y: 45.0,
                label: "link rate".into(),
                color: "#555".into(),
            }],
            ..Default::default()
        };
        let s = plot(&p);
        assert_eq!(
            s.matches("class=\"clipped\"").count(),
            2,
            "the bar and its note"
        );
        assert!(
            s.contains(">window=bdp at 100: 95 %</text>")
                && s.contains(">interval up to 7000 Mbit/s</text>"),
            "{s}"
        );
        // The top tick is the next nice number above the link rate, not above 7000.
        assert!(
            s.contains(">50</text>") && !s.contains(">7000</text>"),
            "{s}"
        );
        // The stalled repetition is drawn.
        assert_eq!(s.matches("class=\"sample\"").count(), 3);
        // A ceiling curve wholly above the axis is named as such.
        let mut q = p.clone();
        q.lines.push(Line {
            name: "window/RTT".into(),
            points: vec![(0.0, 59.0), (150.0, 59.6)],
            dashed: true,
            ..Default::default()
        });
        assert!(plot(&q).contains("window/RTT (above the axis)"));
    }

    #[test]
    fn log2_axis_ticks_at_powers_of_two() {
        let p = Plot {
            x_axis: XAxis::Log2,
            x_format: Some(|v| nsperf_core::Bytes(v as u64).to_string()),
            lines: vec![Line {
                name: "a".into(),
                points: vec![(4096.0, 1.0), (1048576.0, 2.0)],
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = plot(&p);
        assert!(
            s.contains(">4 KiB</text>") && s.contains(">1 MiB</text>"),
            "{s}"
        );
    }
}
