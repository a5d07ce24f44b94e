//! The marks inside a plot's area: shaded x spans and change lines, reference lines, and the
//! series with their intervals and repetitions.

use std::fmt::Write;

use super::{Frame, PALETTE, esc};

/// A series of points, optionally with error bars `(lo, hi)` and the repetitions behind
/// each point.
#[derive(Debug, Clone, Default)]
pub struct Line {
    /// Legend label.
    pub name: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
    /// Error bar per point (same length as `points`, or empty).
    pub errors: Vec<(f64, f64)>,
    /// The single values behind the points (`(x, y)`, repetitions), drawn as small rings.
    pub samples: Vec<(f64, f64)>,
    /// Dashed (for theoretical curves): left out of the y range, clipped at the axis top.
    pub dashed: bool,
    /// Colour index into [`PALETTE`]; theoretical curves usually share their series' colour.
    pub color: usize,
    /// Points only, no line between them (categories that are not a sequence).
    pub unjoined: bool,
    /// A dense series (hundreds of points, a time series): the line alone, no dot per point.
    pub dense: bool,
}

/// A horizontal reference line (a ceiling, a mean), labelled in the legend.
#[derive(Debug, Clone)]
pub struct HLine {
    /// y value.
    pub y: f64,
    /// Label, in the legend.
    pub label: String,
    /// CSS colour.
    pub color: String,
}

/// A ringed point (a peak), labelled in the legend.
#[derive(Debug, Clone)]
pub struct Marker {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
    /// Label, in the legend.
    pub label: String,
}

/// Something that happened on the x axis (time): a shaded span (a link outage) or, without
/// an end, a dashed vertical line (a link change); its label goes to the legend.
#[derive(Debug, Clone)]
pub struct XEvent {
    /// Where it starts.
    pub from: f64,
    /// Where a span ends; `None` for an instant.
    pub to: Option<f64>,
    /// Label, in the legend.
    pub label: String,
}

/// Colour of a shaded outage, of a link-change line.
pub(super) const OUTAGE: &str = "rgba(214,39,40,0.18)";
pub(super) const CHANGE: &str = "#9467bd";

/// Shades outages (class `outage`) and marks changes (class `link-change`), clipped to the x
/// range; their labels are in the legend.
/// `at` gives the px of an x value, clamped to the plot area.
pub(super) fn draw_events(
    out: &mut String,
    f: &Frame,
    events: &[XEvent],
    at: &dyn Fn(f64) -> Option<f64>,
) {
    for e in events {
        let end = e.to.unwrap_or(e.from);
        let (Some(a), Some(b)) = (at(e.from), at(end)) else {
            continue;
        };
        if e.to.is_some() {
            let _ = write!(
                out,
                r#"<g class="outage"><rect x="{a:.1}" y="{y0}" width="{w:.1}" height="{h:.1}" fill="{OUTAGE}"/></g>"#,
                y0 = f.y0,
                w = (b - a).max(1.0),
                h = f.y1 - f.y0,
            );
        } else {
            let _ = write!(
                out,
                r#"<g class="link-change"><line x1="{a:.1}" y1="{y0}" x2="{a:.1}" y2="{y1}" stroke="{CHANGE}" stroke-dasharray="2 2"/></g>"#,
                y0 = f.y0,
                y1 = f.y1,
            );
        }
    }
}

/// The reference lines, across the plot area (their labels are in the legend).
pub(super) fn draw_hlines(out: &mut String, f: &Frame, hlines: &[HLine], sy: &dyn Fn(f64) -> f64) {
    for h in hlines {
        let y = sy(h.y);
        let _ = write!(
            out,
            r#"<g class="ceiling"><line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="{c}" stroke-width="1.5" stroke-dasharray="6 4"/></g>"#,
            x0 = f.x0,
            x1 = f.x1,
            c = esc(&h.color),
        );
    }
}

/// The pieces of a polyline inside `[0, ymax]`: a segment leaving the top ends where it
/// crosses it.
fn clip_polyline(pts: &[(f64, f64)], ymax: f64) -> Vec<Vec<(f64, f64)>> {
    let mut parts: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    for w in 0..pts.len() {
        let (x, y) = pts[w];
        let inside = y <= ymax;
        if w > 0 {
            let (px, py) = pts[w - 1];
            if (py <= ymax) != inside {
                let t = (ymax - py) / (y - py);
                cur.push((px + (x - px) * t, ymax));
                if !inside {
                    parts.push(std::mem::take(&mut cur));
                }
            }
        }
        if inside {
            cur.push((x, y));
        }
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
}

/// A series: its line (a dashed one clipped at the axis top), its means with their
/// intervals, and its repetitions as small rings beside them.
pub(super) fn draw_line(
    out: &mut String,
    f: &Frame,
    l: &Line,
    sx: &dyn Fn(f64) -> Option<f64>,
    ymax: f64,
) {
    let c = PALETTE[l.color % PALETTE.len()];
    let py = |y: f64| f.y1 - (y.clamp(0.0, ymax) / ymax) * (f.y1 - f.y0);
    let pix: Vec<(f64, f64)> = l
        .points
        .iter()
        .filter(|q| q.1.is_finite())
        .filter_map(|q| Some((sx(q.0)?, q.1)))
        .collect();
    if pix.is_empty() {
        return;
    }
    let dash = if l.dashed {
        r#" stroke-dasharray="3 3""#
    } else {
        ""
    };
    out.push_str(r#"<g class="series">"#);
    let parts = if l.dashed {
        clip_polyline(&pix, ymax)
    } else {
        vec![pix.clone()]
    };
    // A ceiling known at one x only (one non-zero RTT): a short dashed bar at its value, so
    // it is drawn, not left to a legend entry without a mark.
    if let [(x, y)] = pix.as_slice()
        && l.dashed
        && *y <= ymax
    {
        let _ = write!(
            out,
            r#"<line class="ceiling-point" x1="{a:.1}" y1="{yy:.1}" x2="{b:.1}" y2="{yy:.1}" stroke="{c}" stroke-width="2"{dash}/>"#,
            a = (x - 16.0).max(f.x0),
            b = (x + 16.0).min(f.x1),
            yy = py(*y)
        );
    }
    for part in parts.iter().filter(|p| p.len() >= 2 && !l.unjoined) {
        let pts: Vec<String> = part
            .iter()
            .map(|(x, y)| format!("{x:.1},{:.1}", py(*y)))
            .collect();
        let _ = write!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"{dash}/>"#,
            pts.join(" ")
        );
    }
    if !l.dashed && !l.dense {
        for (i, q) in l.points.iter().enumerate() {
            let Some(x) = sx(q.0).filter(|_| q.1.is_finite()) else {
                continue;
            };
            if let Some(&(lo, hi)) = l.errors.get(i) {
                let _ = write!(
                    out,
                    r#"<line class="interval" x1="{x:.1}" y1="{a:.1}" x2="{x:.1}" y2="{b:.1}" stroke="{c}"/>"#,
                    a = py(lo),
                    b = py(hi)
                );
            }
            let _ = write!(
                out,
                r#"<circle cx="{x:.1}" cy="{:.1}" r="3.5" fill="{c}"/>"#,
                py(q.1)
            );
        }
        for q in &l.samples {
            if let Some(x) = sx(q.0).filter(|_| q.1.is_finite() && q.1 <= ymax) {
                let _ = write!(
                    out,
                    r#"<circle class="sample" cx="{:.1}" cy="{:.1}" r="2" fill="none" stroke="{c}"/>"#,
                    x + 6.0,
                    py(q.1)
                );
            }
        }
    }
    out.push_str("</g>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashed_curves_stop_at_the_axis_top() {
        let parts = clip_polyline(&[(0.0, 1.0), (1.0, 3.0), (2.0, 1.0)], 2.0);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], [(0.0, 1.0), (0.5, 2.0)]);
        assert_eq!(parts[1], [(1.5, 2.0), (2.0, 1.0)]);
    }
}
