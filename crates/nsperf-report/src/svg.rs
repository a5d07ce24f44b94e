//! Inline SVG charts, drawn without any library: line/point plots with error bars,
//! reference lines and markers; grouped bar charts; heatmaps. Every chart is one `<svg>`
//! element with a `viewBox`, so it scales with the page; text is escaped.

use std::fmt::Write;

const W: f64 = 760.0;
const H: f64 = 380.0;
const ML: f64 = 90.0;
const MR: f64 = 170.0;
const MT: f64 = 36.0;
const MB: f64 = 56.0;

/// Colours of the series, in order.
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Cuts a label to `n` characters, with an ellipsis.
pub fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Escapes text for SVG/HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A series of points, optionally with error bars `(lo, hi)`.
#[derive(Debug, Clone, Default)]
pub struct Line {
    /// Legend label.
    pub name: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
    /// Error bar per point (same length as `points`, or empty).
    pub errors: Vec<(f64, f64)>,
    /// Dashed (for theoretical curves).
    pub dashed: bool,
    /// Colour index into [`PALETTE`]; theoretical curves usually share their series' colour.
    pub color: usize,
}

/// A horizontal reference line (a ceiling, a mean) with its label.
#[derive(Debug, Clone)]
pub struct HLine {
    /// y value.
    pub y: f64,
    /// Label drawn at the right end.
    pub label: String,
    /// CSS colour.
    pub color: String,
}

/// A labelled point (a peak).
#[derive(Debug, Clone)]
pub struct Marker {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
    /// Label.
    pub label: String,
}

/// Something that happened on the x axis (time): a shaded span (a link outage) or, without
/// an end, a labelled vertical line (a link change).
#[derive(Debug, Clone)]
pub struct XEvent {
    /// Where it starts.
    pub from: f64,
    /// Where a span ends; `None` for an instant.
    pub to: Option<f64>,
    /// Label drawn at its top.
    pub label: String,
}

/// An x-y plot.
#[derive(Debug, Clone, Default)]
pub struct Plot {
    /// Title.
    pub title: String,
    /// x-axis label.
    pub x_label: String,
    /// y-axis label.
    pub y_label: String,
    /// Fixed x ticks `(x, label)` (categorical axes); empty = automatic numeric ticks.
    pub x_ticks: Vec<(f64, String)>,
    /// Series.
    pub lines: Vec<Line>,
    /// Reference lines.
    pub hlines: Vec<HLine>,
    /// Markers.
    pub markers: Vec<Marker>,
    /// Events on the x axis, drawn behind the series (clipped to the axis).
    pub events: Vec<XEvent>,
}

/// "Nice" tick values covering `[lo, hi]` (Heckbert 1990, *Nice numbers for graph labels*).
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater)
        || !lo.is_finite()
        || !hi.is_finite()
    {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).floor() * step;
    let mut v = Vec::new();
    let mut t = start;
    while t <= hi + step * 1e-9 && v.len() < 50 {
        v.push(t);
        t += step;
    }
    v
}

/// A short number: `1.5k`, `42M`, `3.2G`.
pub fn short(v: f64) -> String {
    let a = v.abs();
    let (x, s) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let t = if x.fract().abs() < 1e-9 || x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    format!("{t}{s}")
}

fn open(out: &mut String, title: &str, kind: &str) {
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" role="img" data-kind="{kind}" aria-label="{t}"><title>{t}</title><rect class="bg" x="0" y="0" width="{W}" height="{H}" fill="#fff"/><text x="{x}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{t}</text>"##,
        t = esc(title),
        x = W / 2.0
    );
}

fn axes(out: &mut String, x_label: &str, y_label: &str) {
    let (x0, x1, y0, y1) = (ML, W - MR, H - MB, MT);
    let _ = write!(
        out,
        r##"<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/><text x="{cx}" y="{ly}" text-anchor="middle" font-size="12">{xl}</text><text transform="translate(16 {cy}) rotate(-90)" text-anchor="middle" font-size="12">{yl}</text>"##,
        cx = (x0 + x1) / 2.0,
        ly = H - 14.0,
        cy = (y0 + y1) / 2.0,
        xl = esc(x_label),
        yl = esc(y_label)
    );
}

/// Renders a plot. A plot without any point still renders, with a "no data" note.
pub fn plot(p: &Plot) -> String {
    let mut out = String::new();
    open(&mut out, &p.title, "plot");
    axes(&mut out, &p.x_label, &p.y_label);
    let xs: Vec<f64> = p
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|q| q.0))
        .chain(p.markers.iter().map(|m| m.x))
        .chain(p.x_ticks.iter().map(|t| t.0))
        .filter(|v| v.is_finite())
        .collect();
    let ys: Vec<f64> = p
        .lines
        .iter()
        .filter(|l| !l.dashed)
        .flat_map(|l| {
            l.points
                .iter()
                .map(|q| q.1)
                .chain(l.errors.iter().map(|e| e.1))
        })
        .chain(p.hlines.iter().map(|h| h.y))
        .chain(p.markers.iter().map(|m| m.y))
        .filter(|v| v.is_finite())
        .collect();
    if xs.is_empty() || ys.is_empty() {
        let _ = write!(
            out,
            r##"<text x="{}" y="{}" text-anchor="middle" font-size="13" fill="#777">no data</text></svg>"##,
            W / 2.0,
            H / 2.0
        );
        return out;
    }
    let (mut xmin, mut xmax) = (
        xs.iter().copied().fold(f64::INFINITY, f64::min),
        xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    if xmax - xmin < 1e-12 {
        xmin -= 1.0;
        xmax += 1.0;
    }
    let ymax = ys.iter().copied().fold(0.0f64, f64::max) * 1.1;
    let ymax = if ymax > 0.0 { ymax } else { 1.0 };
    let sx = |x: f64| ML + (x - xmin) / (xmax - xmin) * (W - ML - MR);
    let sy = |y: f64| (H - MB) - (y.clamp(0.0, ymax) / ymax) * (H - MB - MT);
    // Grid and ticks.
    for t in nice_ticks(0.0, ymax, 5) {
        if t > ymax {
            continue;
        }
        let y = sy(t);
        let _ = write!(
            out,
            r##"<line x1="{ML}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{l}</text>"##,
            x1 = W - MR,
            tx = ML - 6.0,
            ty = y + 4.0,
            l = short(t)
        );
    }
    let xticks: Vec<(f64, String)> = if p.x_ticks.is_empty() {
        nice_ticks(xmin, xmax, 6)
            .into_iter()
            .filter(|t| *t >= xmin - 1e-9 && *t <= xmax + 1e-9)
            .map(|t| (t, short(t)))
            .collect()
    } else {
        p.x_ticks.clone()
    };
    for (t, l) in &xticks {
        let x = sx(*t);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#333"/><text x="{x:.1}" y="{ty}" text-anchor="middle" font-size="11">{l}</text>"##,
            y0 = H - MB,
            y1 = H - MB + 5.0,
            ty = H - MB + 18.0,
            l = esc(l)
        );
    }
    draw_events(&mut out, &p.events, (xmin, xmax), &sx);
    // Reference lines.
    for h in &p.hlines {
        let y = sy(h.y);
        let _ = write!(
            out,
            r#"<g class="ceiling"><line x1="{ML}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="{c}" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11" fill="{c}">{l}</text></g>"#,
            x1 = W - MR,
            tx = W - MR - 4.0,
            ty = y - 5.0,
            c = esc(&h.color),
            l = esc(&h.label)
        );
    }
    // Series.
    let mut legend_y = MT + 10.0;
    for l in &p.lines {
        let c = PALETTE[l.color % PALETTE.len()];
        let pts: Vec<String> = l
            .points
            .iter()
            .filter(|q| q.0.is_finite() && q.1.is_finite())
            .map(|q| format!("{:.1},{:.1}", sx(q.0), sy(q.1)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let dash = if l.dashed {
            r#" stroke-dasharray="3 3""#
        } else {
            ""
        };
        let _ = write!(
            out,
            r#"<g class="series"><polyline points="{}" fill="none" stroke="{c}" stroke-width="2"{dash}/>"#,
            pts.join(" ")
        );
        if !l.dashed {
            for (i, q) in l.points.iter().enumerate() {
                if !(q.0.is_finite() && q.1.is_finite()) {
                    continue;
                }
                if let Some(&(lo, hi)) = l.errors.get(i) {
                    let _ = write!(
                        out,
                        r#"<line x1="{x:.1}" y1="{a:.1}" x2="{x:.1}" y2="{b:.1}" stroke="{c}"/>"#,
                        x = sx(q.0),
                        a = sy(lo),
                        b = sy(hi)
                    );
                }
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{c}"/>"#,
                    sx(q.0),
                    sy(q.1)
                );
            }
        }
        out.push_str("</g>");
        let _ = write!(
            out,
            r#"<line x1="{lx}" y1="{legend_y}" x2="{lx2}" y2="{legend_y}" stroke="{c}" stroke-width="2"{dash}/><text x="{tx}" y="{ty}" font-size="11">{n}</text>"#,
            lx = W - MR + 8.0,
            lx2 = W - MR + 26.0,
            tx = W - MR + 30.0,
            ty = legend_y + 4.0,
            n = esc(&clip(&l.name, 26))
        );
        legend_y += 16.0;
    }
    for m in &p.markers {
        let _ = write!(
            out,
            r##"<g class="marker"><circle cx="{x:.1}" cy="{y:.1}" r="5" fill="none" stroke="#000" stroke-width="1.5"/><text x="{x:.1}" y="{ty:.1}" text-anchor="middle" font-size="11">{l}</text></g>"##,
            x = sx(m.x),
            y = sy(m.y),
            ty = sy(m.y) - 9.0,
            l = esc(&m.label)
        );
    }
    out.push_str("</svg>");
    out
}

/// Shades outages and marks changes (class `outage` / `link-change`), clipped to
/// `[xmin, xmax]`; labels are stacked so neighbours do not overwrite each other.
fn draw_events(
    out: &mut String,
    events: &[XEvent],
    (xmin, xmax): (f64, f64),
    sx: &dyn Fn(f64) -> f64,
) {
    for (i, e) in events.iter().enumerate() {
        let end = e.to.unwrap_or(e.from);
        if !(e.from.is_finite() && end.is_finite()) || end < xmin || e.from > xmax {
            continue;
        }
        let (a, b) = (sx(e.from.max(xmin)), sx(end.min(xmax)));
        let ty = MT + 12.0 + (i % 3) as f64 * 13.0;
        let label = esc(&clip(&e.label, 40));
        if e.to.is_some() {
            let _ = write!(
                out,
                r##"<g class="outage"><rect x="{a:.1}" y="{MT}" width="{w:.1}" height="{h:.1}" fill="#d62728" fill-opacity="0.15"/><text x="{a:.1}" y="{ty:.1}" font-size="10" fill="#a00">{label}</text></g>"##,
                w = (b - a).max(1.0),
                h = H - MB - MT,
            );
        } else {
            let _ = write!(
                out,
                r##"<g class="link-change"><line x1="{a:.1}" y1="{MT}" x2="{a:.1}" y2="{y0}" stroke="#9467bd" stroke-dasharray="2 2"/><text x="{tx:.1}" y="{ty:.1}" font-size="10" fill="#9467bd">{label}</text></g>"##,
                y0 = H - MB,
                tx = a + 3.0,
            );
        }
    }
}

/// A grouped bar chart: one group per category, one bar per series.
#[derive(Debug, Clone, Default)]
pub struct Bars {
    /// Title.
    pub title: String,
    /// y-axis label.
    pub y_label: String,
    /// Category labels (x axis).
    pub categories: Vec<String>,
    /// Series names (legend).
    pub series: Vec<String>,
    /// `values[category][series]`.
    pub values: Vec<Vec<f64>>,
    /// Formats a value for its label.
    pub label: Option<fn(f64) -> String>,
}

/// Renders a grouped bar chart.
pub fn bars(b: &Bars) -> String {
    let mut out = String::new();
    open(&mut out, &b.title, "bars");
    axes(&mut out, "", &b.y_label);
    let ymax = b
        .values
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        * 1.1;
    let ymax = if ymax > 0.0 { ymax } else { 1.0 };
    let sy = |y: f64| (H - MB) - (y.clamp(0.0, ymax) / ymax) * (H - MB - MT);
    for t in nice_ticks(0.0, ymax, 5) {
        if t > ymax {
            continue;
        }
        let _ = write!(
            out,
            r##"<line x1="{ML}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{l}</text>"##,
            y = sy(t),
            x1 = W - MR,
            tx = ML - 6.0,
            ty = sy(t) + 4.0,
            l = short(t)
        );
    }
    let n = b.categories.len().max(1) as f64;
    let gw = (W - ML - MR) / n;
    let ns = b.series.len().max(1) as f64;
    let bw = (gw * 0.8 / ns).max(1.0);
    for (ci, cat) in b.categories.iter().enumerate() {
        let gx = ML + gw * ci as f64 + gw * 0.1;
        for (si, _) in b.series.iter().enumerate() {
            let v = b
                .values
                .get(ci)
                .and_then(|r| r.get(si))
                .copied()
                .unwrap_or(0.0);
            if !v.is_finite() {
                continue;
            }
            let x = gx + bw * si as f64;
            let y = sy(v);
            let _ = write!(
                out,
                r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{c}"><title>{t}</title></rect>"#,
                w = bw * 0.92,
                h = (H - MB - y).max(0.5),
                c = PALETTE[si % PALETTE.len()],
                t = esc(&b.label.map(|f| f(v)).unwrap_or_else(|| short(v)))
            );
        }
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" text-anchor="middle" font-size="10">{l}</text>"#,
            x = ML + gw * (ci as f64 + 0.5),
            y = H - MB + 16.0,
            l = esc(&clip(cat, ((gw / 6.0) as usize).max(4)))
        );
    }
    for (si, s) in b.series.iter().enumerate() {
        let y = MT + 10.0 + 16.0 * si as f64;
        let _ = write!(
            out,
            r#"<rect x="{x}" y="{ry}" width="12" height="10" fill="{c}"/><text x="{tx}" y="{ty}" font-size="11">{n}</text>"#,
            x = W - MR + 8.0,
            ry = y - 6.0,
            c = PALETTE[si % PALETTE.len()],
            tx = W - MR + 26.0,
            ty = y + 4.0,
            n = esc(s)
        );
    }
    out.push_str("</svg>");
    out
}

/// A heatmap: rows × columns of values, colour from white to dark blue, value in each cell.
#[derive(Debug, Clone, Default)]
pub struct Heatmap {
    /// Title.
    pub title: String,
    /// Row axis label.
    pub row_label: String,
    /// Column axis label.
    pub col_label: String,
    /// Row labels (top to bottom).
    pub rows: Vec<String>,
    /// Column labels (left to right).
    pub cols: Vec<String>,
    /// `values[row][col]`; `None` = not measured.
    pub values: Vec<Vec<Option<f64>>>,
    /// Formats a value for its cell.
    pub label: Option<fn(f64) -> String>,
}

/// Renders a heatmap.
pub fn heatmap(h: &Heatmap) -> String {
    let mut out = String::new();
    open(&mut out, &h.title, "heatmap");
    axes(&mut out, &h.col_label, &h.row_label);
    let vmax = h
        .values
        .iter()
        .flatten()
        .flatten()
        .copied()
        .fold(0.0f64, f64::max);
    let nr = h.rows.len().max(1) as f64;
    let nc = h.cols.len().max(1) as f64;
    let cw = (W - ML - MR) / nc;
    let rh = (H - MB - MT) / nr;
    for (ri, rl) in h.rows.iter().enumerate() {
        let y = MT + rh * ri as f64;
        for ci in 0..h.cols.len() {
            let x = ML + cw * ci as f64;
            let v = h.values.get(ri).and_then(|r| r.get(ci)).copied().flatten();
            let (fill, text) = match v {
                Some(v) if vmax > 0.0 => {
                    let t = (v / vmax).clamp(0.0, 1.0);
                    let c = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
                    (
                        format!(
                            "rgb({},{},{})",
                            c(240.0, 8.0),
                            c(245.0, 48.0),
                            c(255.0, 107.0)
                        ),
                        h.label.map(|f| f(v)).unwrap_or_else(|| short(v)),
                    )
                }
                _ => ("#ddd".to_string(), "–".to_string()),
            };
            let dark = v.is_some_and(|v| vmax > 0.0 && v / vmax > 0.55);
            let _ = write!(
                out,
                r##"<rect class="cell" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{hh:.1}" fill="{fill}" stroke="#fff"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="middle" font-size="11" fill="{tc}">{text}</text>"##,
                w = cw,
                hh = rh,
                tx = x + cw / 2.0,
                ty = y + rh / 2.0 + 4.0,
                tc = if dark { "#fff" } else { "#000" },
                text = esc(&text)
            );
        }
        let _ = write!(
            out,
            r#"<text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{l}</text>"#,
            tx = ML - 6.0,
            ty = y + rh / 2.0 + 4.0,
            l = esc(rl)
        );
    }
    for (ci, cl) in h.cols.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" text-anchor="middle" font-size="11">{l}</text>"#,
            x = ML + cw * (ci as f64 + 0.5),
            y = H - MB + 16.0,
            l = esc(cl)
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_nice() {
        assert_eq!(
            nice_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(nice_ticks(0.0, 45e6, 5).len(), 5);
        assert_eq!(short(45e6), "45M");
        assert_eq!(short(1500.0), "1.50k");
    }

    #[test]
    fn plot_draws_points_lines_and_labels() {
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
        assert!(s.contains("link rate"));
        assert!(plot(&Plot::default()).contains("no data"));
    }

    #[test]
    fn heatmap_and_bars_render_cells() {
        let h = heatmap(&Heatmap {
            rows: vec!["1".into(), "2".into()],
            cols: vec!["a".into()],
            values: vec![vec![Some(1.0)], vec![None]],
            ..Default::default()
        });
        assert_eq!(h.matches("class=\"cell\"").count(), 2);
        let b = bars(&Bars {
            categories: vec!["x".into()],
            series: vec!["p50".into(), "p99".into()],
            values: vec![vec![1.0, 2.0]],
            ..Default::default()
        });
        assert_eq!(b.matches("class=\"bar\"").count(), 2);
    }
}
