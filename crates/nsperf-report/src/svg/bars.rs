//! Grouped bar charts: one group per category, one bar per series.

use std::fmt::Write;

use super::{
    PALETTE, Side, Swatch, draw_axes, draw_x_ticks, esc, fit_ticks, frame, nice_ticks, open, short,
    title_lines,
};

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
            let v = b
                .values
                .get(ci)
                .and_then(|r| r.get(si))
                .copied()
                .unwrap_or(0.0);
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
                c = PALETTE[si % PALETTE.len()],
                t = esc(&b.label.map(|f| f(v)).unwrap_or_else(|| short(v)))
            );
        }
    }
    draw_x_ticks(&mut out, &ticks, f.y1, &lay);
    side.draw(&mut out, &f);
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
}
