//! Inline SVG charts, drawn without any library: x-y plots with error bars, repetitions,
//! reference lines and markers; grouped bar charts; heatmaps. Every chart is one `<svg>`
//! element with a `viewBox`, so it scales with the page; text is escaped.
//!
//! Layout invariants (checked in a browser by the report's Chromium test):
//! - every text is outside the plot area but the series' own marks: the title above, tick
//!   labels and axis titles beside the axes, and the legend, the reference lines' labels and
//!   the notes in a column right of the plot, wrapped to its width; the chart grows taller
//!   when that column needs it, so nothing is cropped and no two texts overlap;
//! - x tick labels are thinned, then rotated, until they fit their slots;
//! - the y axis covers the data's robust range: an error bar or a value far beyond the rest
//!   (Tukey's far-out fence) is drawn to the axis' top with an arrow and named in a note, never
//!   hidden.
//!
//! Layers are drawn in order (grid, [`Frame`]-clipped overlays such as shaded x spans,
//! reference lines, series, markers, then the side column), each by its own function taking
//! the [`Frame`], so another layer can be added between them.

mod bars;
mod forest;
mod heatmap;
mod marks;
mod plot;
mod ticks;

use std::fmt::Write;

pub use bars::{Bars, bars};
pub use forest::{Forest, forest};
pub use heatmap::{Heatmap, heatmap};
pub use marks::{HLine, Line, Marker, XEvent};
pub use plot::{Plot, XAxis, plot};
pub(crate) use ticks::{draw_x_ticks, fit_ticks};

/// Width of every chart (the height follows from its content).
pub const W: f64 = 900.0;
/// Height of the plot area.
const PLOT_H: f64 = 300.0;
/// Left margin (y tick labels and the y axis title).
const ML: f64 = 78.0;
/// Width of the side column (legend, notes).
const SIDE: f64 = 230.0;
/// Font sizes.
const FONT: f64 = 11.0;
const TITLE_FONT: f64 = 15.0;
/// Line height of side-column and title text.
const LINE: f64 = 14.0;

/// Colours of the series, in order.
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Colour of a marked bar (the slowest client), apart from the series' colours.
pub const MARKED: &str = "#b2182b";

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

/// Width of `s` in px at `font` px, overestimated for a sans-serif font (no font metrics in
/// the exporter: wider than the real text, so a box computed from it holds the text).
pub fn text_width(s: &str, font: f64) -> f64 {
    s.chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | ' ' => 0.34,
            'm' | 'w' | 'M' | 'W' | '%' | '@' => 0.92,
            c if c.is_ascii_uppercase() => 0.72,
            _ => 0.62,
        })
        .sum::<f64>()
        * font
}

/// Splits `s` into lines no wider than `width` px at `font` px, breaking at spaces (a word
/// longer than a line is cut with an ellipsis).
pub fn wrap(s: &str, width: f64, font: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in s.split(' ') {
        let cand = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if text_width(&cand, font) <= width || cur.is_empty() {
            cur = cand;
        } else {
            lines.push(std::mem::take(&mut cur));
            cur = word.to_string();
        }
        while text_width(&cur, font) > width && cur.chars().count() > 2 {
            let n = (cur.chars().count() * 9 / 10).max(2);
            cur = clip(&cur, n);
        }
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
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
        v.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    v
}

/// The smallest "nice" tick at or above `top` (the axis' end), for an axis from 0.
pub(crate) fn nice_ceiling(top: f64) -> f64 {
    let t = nice_ticks(0.0, top, 5);
    match t.as_slice() {
        [a, b, ..] if b > a => ((top / (b - a)).ceil() * (b - a)).max(*b),
        _ => top,
    }
}

/// A short number: `1.5k`, `42M`, `3.2G`, `0.25`.
pub fn short(v: f64) -> String {
    let a = v.abs();
    let (x, s) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
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
    let t = if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    };
    format!("{t}{s}")
}

/// Where a chart's parts go: the plot area and the side column, in the SVG's pixels.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    /// Left edge of the plot area.
    pub x0: f64,
    /// Right edge of the plot area.
    pub x1: f64,
    /// Top of the plot area.
    pub y0: f64,
    /// Bottom of the plot area (the x axis).
    pub y1: f64,
    /// Height of the whole chart.
    pub height: f64,
}

/// One entry of the side column: a swatch and its text.
#[derive(Debug, Clone)]
pub(crate) enum Swatch {
    /// A line (solid or dashed) in a colour.
    Line(String, bool),
    /// A filled box.
    Box(String),
    /// A hollow ring (a marker).
    Ring,
    /// Small hollow dots (repetitions).
    Dots(String),
    /// A clipped value's arrow.
    Arrow,
    /// No swatch (a note or a heading).
    None,
}

/// The side column: entries wrapped to its width, laid out top down.
#[derive(Debug, Clone, Default)]
pub(crate) struct Side {
    entries: Vec<(Swatch, Vec<String>)>,
}

impl Side {
    const TEXT_X: f64 = 26.0;

    pub(crate) fn add(&mut self, swatch: Swatch, text: &str) {
        let lines = wrap(text, SIDE - 14.0 - Self::TEXT_X - 8.0, FONT);
        self.entries.push((swatch, lines));
    }

    /// Height the column needs.
    pub(crate) fn height(&self) -> f64 {
        self.entries
            .iter()
            .map(|(_, l)| l.len() as f64 * LINE + 4.0)
            .sum()
    }

    /// Draws the column from the top of the plot area.
    pub(crate) fn draw(&self, out: &mut String, f: &Frame) {
        let x = f.x1 + 14.0;
        let mut y = f.y0 + 4.0;
        out.push_str(r#"<g class="legend">"#);
        for (sw, lines) in &self.entries {
            let cy = y + LINE / 2.0 - 1.0;
            match sw {
                Swatch::Line(c, dashed) => {
                    let dash = if *dashed {
                        r#" stroke-dasharray="4 3""#
                    } else {
                        ""
                    };
                    let _ = write!(
                        out,
                        r#"<line x1="{x}" y1="{cy:.1}" x2="{x2}" y2="{cy:.1}" stroke="{c}" stroke-width="2"{dash}/>"#,
                        x2 = x + 18.0
                    );
                }
                Swatch::Box(c) => {
                    let _ = write!(
                        out,
                        r#"<rect x="{x}" y="{ry:.1}" width="12" height="10" fill="{c}"/>"#,
                        ry = cy - 5.0
                    );
                }
                Swatch::Ring => {
                    let _ = write!(
                        out,
                        r##"<circle cx="{cx}" cy="{cy:.1}" r="5" fill="none" stroke="#000" stroke-width="1.5"/>"##,
                        cx = x + 9.0
                    );
                }
                Swatch::Dots(c) => {
                    for dx in [4.0, 9.0, 14.0] {
                        let _ = write!(
                            out,
                            r#"<circle cx="{cx}" cy="{cy:.1}" r="2" fill="none" stroke="{c}"/>"#,
                            cx = x + dx
                        );
                    }
                }
                Swatch::Arrow => arrow(out, x + 9.0, cy + 4.0, "#000"),
                Swatch::None => {}
            }
            for (i, l) in lines.iter().enumerate() {
                let _ = write!(
                    out,
                    r#"<text x="{tx}" y="{ty:.1}" font-size="{FONT}">{t}</text>"#,
                    tx = x + Self::TEXT_X,
                    ty = y + LINE * (i as f64 + 1.0) - 3.0,
                    t = esc(l)
                );
            }
            y += lines.len() as f64 * LINE + 4.0;
        }
        out.push_str("</g>");
    }
}

/// An upward arrow whose tip is at (`x`, `y` - 8): a value clipped at the axis top.
pub(crate) fn arrow(out: &mut String, x: f64, y: f64, color: &str) {
    let _ = write!(
        out,
        r#"<polygon class="clipped" points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{color}"/>"#,
        x - 4.0,
        y,
        x + 4.0,
        y,
        x,
        y - 8.0
    );
}

/// The title, wrapped to the chart's width; returns the height it takes.
pub(crate) fn title_lines(title: &str) -> Vec<String> {
    wrap(title, W - 24.0, TITLE_FONT)
}

/// Opens the `<svg>` of a chart of `height` with its title lines.
pub(crate) fn open(out: &mut String, title: &str, lines: &[String], kind: &str, height: f64) {
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height:.0}" role="img" data-kind="{kind}" aria-label="{t}"><title>{t}</title><rect class="bg" x="0" y="0" width="{W}" height="{height:.0}" fill="#fff"/>"##,
        t = esc(title),
    );
    for (i, l) in lines.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text class="title" x="{x}" y="{y:.1}" text-anchor="middle" font-size="{TITLE_FONT}" font-weight="bold">{t}</text>"#,
            x = W / 2.0,
            y = 20.0 + i as f64 * (TITLE_FONT + 3.0),
            t = esc(l)
        );
    }
}

/// Top of the plot area under `n` title lines.
pub(crate) fn plot_top(n: usize) -> f64 {
    12.0 + n as f64 * (TITLE_FONT + 3.0) + 12.0
}

/// Draws the axes, the y grid with its tick labels (`ticks` in data units, `sy` to pixels),
/// and both axis titles.
pub(crate) fn draw_axes(
    out: &mut String,
    f: &Frame,
    y_ticks: &[(f64, String)],
    x_title: &str,
    y_title: &str,
    below_ticks: f64,
) {
    for (y, l) in y_ticks {
        let _ = write!(
            out,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text class="tick" x="{tx}" y="{ty:.1}" text-anchor="end" font-size="{FONT}">{l}</text>"##,
            x0 = f.x0,
            x1 = f.x1,
            tx = f.x0 - 6.0,
            ty = y + 4.0,
            l = esc(l)
        );
    }
    let _ = write!(
        out,
        r##"<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="#333"/><line x1="{x0}" y1="{y1}" x2="{x0}" y2="{y0}" stroke="#333"/>"##,
        x0 = f.x0,
        x1 = f.x1,
        y0 = f.y0,
        y1 = f.y1,
    );
    if !x_title.is_empty() {
        let _ = write!(
            out,
            r#"<text class="axis-title" x="{cx:.1}" y="{y:.1}" text-anchor="middle" font-size="12">{t}</text>"#,
            cx = (f.x0 + f.x1) / 2.0,
            y = f.y1 + below_ticks + 14.0,
            t = esc(&clip(x_title, 80))
        );
    }
    let max_chars = ((f.y1 - f.y0) / 7.0) as usize;
    let _ = write!(
        out,
        r#"<text class="axis-title" transform="translate(16 {cy:.1}) rotate(-90)" text-anchor="middle" font-size="12">{t}</text>"#,
        cy = (f.y0 + f.y1) / 2.0,
        t = esc(&clip(y_title, max_chars))
    );
}

/// The frame of a chart with `title_n` title lines, x tick labels taking `below` px, and a
/// side column of `side_h` px.
pub(crate) fn frame(title_n: usize, below: f64, x_title: bool, side_h: f64) -> Frame {
    let y0 = plot_top(title_n);
    let y1 = y0 + PLOT_H.max(side_h + 8.0);
    let height = y1 + below + if x_title { 24.0 } else { 6.0 } + 6.0;
    Frame {
        x0: ML,
        x1: W - SIDE,
        y0,
        y1,
        height,
    }
}

/// The width of the label column of a chart whose rows run across (forest plots, bars laid
/// across), px.
pub(crate) const ACROSS_LABELS: f64 = 250.0;

/// The layout of a chart whose rows run across: the labels in a column on the left, the rows
/// one under another, the value axis from 0 to `xmax` at the bottom.
pub(crate) struct Across {
    /// The plot area and the chart's height.
    pub(crate) f: Frame,
    /// The value axis's ticks, at their x.
    pub(crate) ticks: Vec<(f64, String)>,
    /// How the tick labels are laid out.
    pub(crate) lay: ticks::TickLayout,
    xmax: f64,
}

impl Across {
    /// The layout for rows of `rows_h` px in all, a side column of `side_h` px and values up to
    /// `xmax`, under `title_n` title lines.
    pub(crate) fn new(title_n: usize, rows_h: f64, side_h: f64, xmax: f64) -> Across {
        let (x0, x1, y0) = (12.0 + ACROSS_LABELS, W - SIDE, plot_top(title_n));
        let mut a = Across {
            f: Frame {
                x0,
                x1,
                y0,
                y1: y0 + rows_h.max(side_h + 8.0),
                height: 0.0,
            },
            ticks: Vec::new(),
            lay: fit_ticks(&[], x1 - x0, false),
            xmax,
        };
        a.ticks = nice_ticks(0.0, xmax, 6)
            .into_iter()
            .filter(|t| *t <= xmax * (1.0 + 1e-9))
            .map(|t| (a.sx(t), short(t)))
            .collect();
        let slot = match a.ticks.as_slice() {
            [p, q, ..] => q.0 - p.0,
            _ => x1 - x0,
        };
        a.lay = fit_ticks(&a.ticks, slot, false);
        a.f.height = a.f.y1 + a.lay.height + 30.0;
        a
    }

    /// The x of value `x`, clamped to the axis.
    pub(crate) fn sx(&self, x: f64) -> f64 {
        let f = &self.f;
        f.x0 + (x.clamp(0.0, self.xmax) / self.xmax) * (f.x1 - f.x0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_nice_and_short() {
        assert_eq!(
            nice_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(nice_ticks(0.0, 45e6, 5).len(), 5);
        assert_eq!(short(45e6), "45M");
        assert_eq!(short(1500.0), "1500");
        assert_eq!(short(2.5), "2.5");
        assert_eq!(short(12_500.0), "12.5k");
    }

    #[test]
    fn wrapping_keeps_every_line_within_the_width() {
        let s = "window/RTT window=bdp (64 KiB … 825 KiB) at the link's RTT, a long label";
        let lines = wrap(s, 150.0, 11.0);
        assert!(lines.len() >= 3, "{lines:?}");
        assert!(
            lines.iter().all(|l| text_width(l, 11.0) <= 150.0),
            "{lines:?}"
        );
        assert_eq!(lines.join(" "), s);
        let long = wrap(&"x".repeat(200), 100.0, 11.0);
        assert!(text_width(&long[0], 11.0) <= 100.0);
    }
}
