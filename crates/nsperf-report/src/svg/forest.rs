//! Forest plots: one row per compared group, its ratio with its interval across, the labels
//! horizontal on the left (wrapped after their commas), the line of "no difference" at 1. A
//! chart grows a row per group, so every group is named however many there are.

use std::fmt::Write;

use super::plot::y_top;
use super::ticks::label_lines;
use super::{
    ACROSS_LABELS, Across, FONT, LINE, PALETTE, Side, Swatch, draw_axes, draw_x_ticks, esc, open,
    short, title_lines,
};

/// Colour of a row whose interval excludes the reference (a difference beyond the noise).
const DIFFERS: &str = PALETTE[1];
/// Colour of the other rows.
const SAME: &str = PALETTE[0];

/// A forest plot.
#[derive(Debug, Clone, Default)]
pub struct Forest {
    /// Title.
    pub title: String,
    /// x-axis title, with its unit.
    pub x_label: String,
    /// One label per row.
    pub rows: Vec<String>,
    /// `(value, interval low, interval high)` per row.
    pub values: Vec<(f64, f64, f64)>,
    /// The reference value (1 for a ratio) and its legend text.
    pub reference: (f64, String),
    /// Legend text of the rows whose interval excludes the reference, and of the others.
    pub names: (String, String),
    /// Notes under the legend.
    pub notes: Vec<String>,
}

/// A right-pointing arrow whose tip is at (`x` + 8, `y`): an interval clipped at the axis end
/// (named in the legend with a ▸).
fn arrow_right(out: &mut String, x: f64, y: f64, color: &str) {
    let _ = write!(
        out,
        r#"<polygon class="clipped" points="{:.1},{:.1} {:.1},{:.1} {:.1},{y:.1}" fill="{color}"/>"#,
        x,
        y - 4.0,
        x,
        y + 4.0,
        x + 8.0,
    );
}

/// Renders a forest plot.
pub fn forest(fp: &Forest) -> String {
    let title = title_lines(&fp.title);
    let refv = fp.reference.0;
    // The axis holds every value and the reference; an interval reaching far beyond the rest
    // (Tukey's fence, as on the plots' y axes) is clipped and named.
    let his: Vec<f64> = fp.values.iter().map(|v| v.2).collect();
    let mut always: Vec<f64> = fp.values.iter().map(|v| v.0).collect();
    always.push(refv);
    let xmax = y_top(&his, &always);
    let differs = |v: &(f64, f64, f64)| v.1 > refv || v.2 < refv;
    let mut side = Side::default();
    side.add(Swatch::Line(DIFFERS.into(), false), &fp.names.0);
    side.add(Swatch::Line(SAME.into(), false), &fp.names.1);
    side.add(Swatch::Line("#555".into(), true), &fp.reference.1);
    for (label, v) in fp.rows.iter().zip(&fp.values) {
        if v.2 > xmax {
            side.add(
                Swatch::None,
                &format!("▸ {label}: 95 % interval up to {}", short(v.2)),
            );
        }
    }
    for n in &fp.notes {
        side.add(Swatch::None, n);
    }
    let labels: Vec<Vec<String>> = fp
        .rows
        .iter()
        .map(|r| label_lines(r, ACROSS_LABELS - 16.0))
        .collect();
    let heights: Vec<f64> = labels
        .iter()
        .map(|l| (l.len() as f64 * LINE).max(18.0) + 6.0)
        .collect();
    let rows_h: f64 = heights.iter().sum();
    let a = Across::new(title.len(), rows_h, side.height(), xmax);
    let (f, ticks, lay) = (&a.f, &a.ticks, &a.lay);
    let (x0, x1) = (f.x0, f.x1);
    let sx = |x: f64| a.sx(x);
    let mut out = String::new();
    open(&mut out, &fp.title, &title, "forest", f.height);
    draw_axes(&mut out, f, &[], &fp.x_label, "", lay.height);
    draw_x_ticks(&mut out, ticks, f.y1, lay);
    let _ = write!(
        out,
        r##"<g class="ceiling"><line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#555" stroke-width="1.5" stroke-dasharray="6 4"/></g>"##,
        x = sx(refv),
        y0 = f.y0,
        y1 = f.y1
    );
    let mut y = f.y0;
    for ((lines, h), v) in labels.iter().zip(&heights).zip(&fp.values) {
        let cy = y + h / 2.0;
        let c = if differs(v) { DIFFERS } else { SAME };
        for (k, l) in lines.iter().enumerate() {
            let ty = cy - (lines.len() as f64 - 1.0) * LINE / 2.0 + k as f64 * LINE + FONT / 3.0;
            let _ = write!(
                out,
                r#"<text class="tick" x="{tx:.1}" y="{ty:.1}" text-anchor="end" font-size="{FONT}">{t}</text>"#,
                tx = x0 - 8.0,
                t = esc(l)
            );
        }
        let _ = write!(
            out,
            r##"<line x1="{x0}" y1="{yb:.1}" x2="{x1}" y2="{yb:.1}" stroke="#eee"/><line class="interval" x1="{a:.1}" y1="{cy:.1}" x2="{b:.1}" y2="{cy:.1}" stroke="{c}" stroke-width="2"/>"##,
            yb = y + h,
            a = sx(v.1),
            b = sx(v.2),
        );
        if v.2 > xmax {
            arrow_right(&mut out, x1 - 8.0, cy, c);
        }
        let _ = write!(
            out,
            r#"<circle cx="{:.1}" cy="{cy:.1}" r="4" fill="{c}"><title>{}</title></circle>"#,
            sx(v.0),
            esc(&format!(
                "{}  ({} .. {})",
                short(v.0),
                short(v.1),
                short(v.2)
            ))
        );
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
    fn every_row_is_named_and_a_wide_interval_is_clipped_and_named() {
        let rows: Vec<String> = (0..20)
            .map(|i| format!("tcp: rtt={i} ms, window=550 KiB (bdp)"))
            .collect();
        let mut values = vec![(1.0, 0.95, 1.05); 20];
        values[3] = (1.3, 1.2, 1.4);
        values[7] = (1.0, 0.4, 2.5);
        let s = forest(&Forest {
            rows,
            values,
            reference: (1.0, "B/A = 1: no difference".into()),
            names: ("differs".into(), "within the noise".into()),
            ..Default::default()
        });
        for i in 0..20 {
            assert!(s.contains(&format!(">tcp: rtt={i} ms,")), "row {i}");
        }
        assert_eq!(s.matches("<circle").count(), 20);
        assert_eq!(
            s.matches(DIFFERS).count(),
            1 + 2,
            "legend, row 3 (line, dot)"
        );
        let note = s.split("<g class=\"legend\">").nth(1).unwrap();
        assert!(
            note.contains(">▸ tcp: rtt=7 ms,")
                && note.contains("interval up to")
                && note.contains(">2.5</text>"),
            "{note}"
        );
        assert_eq!(s.matches("class=\"clipped\"").count(), 1, "the row's arrow");
    }
}
