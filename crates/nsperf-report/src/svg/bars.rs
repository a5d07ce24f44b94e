//! Grouped bar charts: one group per category, one bar per series. The groups stand side by
//! side while every category's label fits under its group whole; when they would be thinned
//! or cut (18 iozone groups named `workload=seqread, file_size=8 MiB, record=4 KiB`), the bars
//! lie across instead, a row per group with its label on the left, wrapped after its commas,
//! and the chart grows a row per group: every group is named in full however many there are.

use std::fmt::Write;

use super::ticks::label_lines;
use super::{
    ACROSS_LABELS, Across, FONT, LINE, PALETTE, Side, Swatch, draw_axes, draw_x_ticks, esc,
    fit_ticks, frame, nice_ticks, open, short, title_lines,
};

/// The thickness of one bar across, px.
const BAR_H: f64 = 7.0;

/// A grouped bar chart: one group per category, one bar per series.
#[derive(Debug, Clone, Default)]
pub struct Bars {
    /// Title.
    pub title: String,
    /// y-axis title, with its unit.
    pub y_label: String,
    /// Category labels (x axis).
    pub categories: Vec<String>,
    /// Series names (legend).
    pub series: Vec<String>,
    /// `values[category][series]`, in the unit of the y axis.
    pub values: Vec<Vec<f64>>,
    /// Formats a value for its bar's tooltip.
    pub label: Option<fn(f64) -> String>,
    /// A category drawn in [`MARKED`](super::MARKED) (the slowest client), and its legend
    /// text.
    pub marked: Option<(usize, String)>,
}

impl Bars {
    /// The colour of the bar of category `ci`, series `si`.
    fn color(&self, ci: usize, si: usize) -> &'static str {
        match &self.marked {
            Some((m, _)) if *m == ci => super::MARKED,
            _ => PALETTE[si % PALETTE.len()],
        }
    }

    /// The value of the bar of category `ci`, series `si` (0 when missing).
    fn value(&self, ci: usize, si: usize) -> f64 {
        self.values
            .get(ci)
            .and_then(|r| r.get(si))
            .copied()
            .unwrap_or(0.0)
    }
}

/// Renders a grouped bar chart.
pub fn bars(b: &Bars) -> String {
    let title = title_lines(&b.title);
    let ymax = b
        .values
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        * 1.08;
    let ymax = if ymax > 0.0 { ymax } else { 1.0 };
    let ymax = super::nice_ceiling(ymax);
    let mut side = Side::default();
    for (si, s) in b.series.iter().enumerate() {
        side.add(Swatch::Box(PALETTE[si % PALETTE.len()].into()), s);
    }
    if let Some((_, text)) = &b.marked {
        side.add(Swatch::Box(super::MARKED.into()), text);
    }
    let probe = frame(title.len(), 0.0, false, side.height());
    let n = b.categories.len().max(1) as f64;
    let gw = (probe.x1 - probe.x0) / n;
    let ticks: Vec<(f64, String)> = b
        .categories
        .iter()
        .enumerate()
        .map(|(ci, c)| (probe.x0 + gw * (ci as f64 + 0.5), c.clone()))
        .collect();
    let lay = fit_ticks(&ticks, gw, true);
    if !lay.shows_all(&ticks) {
        return across(b, &title, &side, ymax);
    }
    let f = frame(title.len(), lay.height, false, side.height());
    let sy = |y: f64| f.y1 - (y.clamp(0.0, ymax) / ymax) * (f.y1 - f.y0);
    let mut out = String::new();
    open(&mut out, &b.title, &title, "bars", f.height);
    let y_ticks: Vec<(f64, String)> = nice_ticks(0.0, ymax, 5)
        .into_iter()
        .filter(|t| *t <= ymax * (1.0 + 1e-9))
        .map(|t| (sy(t), short(t)))
        .collect();
    draw_axes(&mut out, &f, &y_ticks, "", &b.y_label, lay.height);
    let ns = b.series.len().max(1) as f64;
    let bw = (gw * 0.8 / ns).max(1.0);
    for ci in 0..b.categories.len() {
        let gx = f.x0 + gw * ci as f64 + gw * 0.1;
        for si in 0..b.series.len() {
            let v = b.value(ci, si);
            if !v.is_finite() {
                continue;
            }
            let y = sy(v);
            let _ = write!(
                out,
                r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{c}"><title>{t}</title></rect>"#,
                x = gx + bw * si as f64,
                w = bw * 0.92,
                h = (f.y1 - y).max(0.5),
                c = b.color(ci, si),
                t = esc(&b.label.map(|f| f(v)).unwrap_or_else(|| short(v)))
            );
        }
    }
    draw_x_ticks(&mut out, &ticks, f.y1, &lay);
    side.draw(&mut out, &f);
    out.push_str("</svg>");
    out
}

/// The bars across: a row per category, its label on the left, the value axis at the bottom.
fn across(b: &Bars, title: &[String], side: &Side, xmax: f64) -> String {
    let labels: Vec<Vec<String>> = b
        .categories
        .iter()
        .map(|c| label_lines(c, ACROSS_LABELS - 16.0))
        .collect();
    let ns = b.series.len().max(1) as f64;
    let heights: Vec<f64> = labels
        .iter()
        .map(|l| (l.len() as f64 * LINE).max(ns * BAR_H) + 8.0)
        .collect();
    let rows_h: f64 = heights.iter().sum();
    let a = Across::new(title.len(), rows_h, side.height(), xmax);
    let (f, ticks, lay) = (&a.f, &a.ticks, &a.lay);
    let (x0, y0, y1) = (f.x0, f.y0, f.y1);
    let sx = |x: f64| a.sx(x);
    let mut out = String::new();
    open(&mut out, &b.title, title, "bars", f.height);
    for (x, _) in ticks.iter() {
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{y0:.1}" x2="{x:.1}" y2="{y1:.1}" stroke="#eee"/>"##
        );
    }
    draw_axes(&mut out, f, &[], &b.y_label, "", lay.height);
    draw_x_ticks(&mut out, ticks, f.y1, lay);
    let mut y = f.y0;
    for (ci, (lines, h)) in labels.iter().zip(&heights).enumerate() {
        let cy = y + h / 2.0;
        for (k, l) in lines.iter().enumerate() {
            let ty = cy - (lines.len() as f64 - 1.0) * LINE / 2.0 + k as f64 * LINE + FONT / 3.0;
            let _ = write!(
                out,
                r#"<text class="tick" x="{tx:.1}" y="{ty:.1}" text-anchor="end" font-size="{FONT}">{t}</text>"#,
                tx = x0 - 8.0,
                t = esc(l)
            );
        }
        let top = cy - ns * BAR_H / 2.0;
        for si in 0..b.series.len() {
            let v = b.value(ci, si);
            if !v.is_finite() {
                continue;
            }
            let _ = write!(
                out,
                r#"<rect class="bar" x="{x0:.1}" y="{by:.1}" width="{w:.1}" height="{bh:.1}" fill="{c}"><title>{t}</title></rect>"#,
                by = top + BAR_H * si as f64,
                w = (sx(v) - x0).max(0.5),
                bh = BAR_H * 0.9,
                c = b.color(ci, si),
                t = esc(&b.label.map(|f| f(v)).unwrap_or_else(|| short(v)))
            );
        }
        y += h;
    }
    side.draw(&mut out, f);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_render_one_rect_per_value_and_a_legend() {
        let b = bars(&Bars {
            categories: vec!["x".into()],
            series: vec!["p50".into(), "p99".into()],
            values: vec![vec![1.0, 2.0]],
            ..Default::default()
        });
        assert_eq!(b.matches("class=\"bar\"").count(), 2);
        assert!(b.contains(">p99</text>"));
    }

    /// Issue 20 item 8: the latency chart of an iozone report with 18 groups labelled every
    /// other group and cut the first label (`workload=seqr…`).
    #[test]
    fn many_long_categories_are_each_named_in_full() {
        let mut cats = Vec::new();
        for w in ["seqread", "seqwrite"] {
            for size in ["8 MiB", "32 MiB", "128 MiB"] {
                for rec in ["4 KiB", "64 KiB", "1 MiB"] {
                    cats.push(format!("workload={w}, file_size={size}, record={rec}"));
                }
            }
        }
        assert_eq!(cats.len(), 18);
        let b = bars(&Bars {
            title: "io: latency percentiles".into(),
            y_label: "latency, ms".into(),
            values: cats.iter().map(|_| vec![1.0, 2.0, 3.0]).collect(),
            categories: cats.clone(),
            series: vec!["p50".into(), "p99".into(), "p99.9".into()],
            label: None,
            marked: None,
        });
        assert!(!b.contains('…'), "a label was cut: {b}");
        assert_eq!(b.matches("class=\"bar\"").count(), 18 * 3);
        // Every group's label, every part of it, is drawn.
        let texts: String = b
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').map(|(_, r)| r))
            .filter_map(|r| r.split_once("</text>").map(|(t, _)| t))
            .collect::<Vec<_>>()
            .join(" ");
        for c in &cats {
            let (w, rest) = c.split_once(", ").unwrap();
            assert!(texts.contains(w), "{w}");
            assert!(
                texts.contains(rest) || rest.split(", ").all(|p| texts.contains(p)),
                "{c}"
            );
        }
        let rows = texts.matches("workload=").count();
        assert_eq!(rows, 18, "{texts}");
        // A few short categories stay side by side.
        let few = bars(&Bars {
            categories: vec!["a".into(), "b".into()],
            series: vec!["p50".into()],
            values: vec![vec![1.0], vec![2.0]],
            ..Default::default()
        });
        assert!(
            few.contains(r#"text-anchor="middle" font-size="11">a</text>"#),
            "{few}"
        );
    }
}
