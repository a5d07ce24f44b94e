//! x tick labels: horizontal when the widest fits its slot; numbers thinned to every other one
//! when that is enough; else rotated 40°, a category's label broken into lines after its
//! commas (`rtt=50 ms,` / `window=550 KiB (bdp)`) so that each line fits between its tick and
//! the chart's left edge, and thinned to every k-th when even that is too dense. A label is
//! cut only when one word alone is longer than the room it has.

use std::fmt::Write;

use super::{FONT, clip, esc, text_width, wrap};

/// The angle of rotated labels, in degrees.
const ANGLE: f64 = 40.0;
/// The longest line of a rotated label, px.
const MAX_LINE: f64 = 170.0;
/// The margin a rotated label keeps from the chart's left edge, px.
const LEFT: f64 = 16.0;
/// Line height of a rotated label's lines, px.
const LINE_H: f64 = FONT + 2.0;

/// How x tick labels are drawn: every `step`-th, rotated or not, their lines; and the room
/// they take under the axis.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TickLayout {
    /// Every `step`-th label is drawn.
    pub(crate) step: usize,
    /// Rotated 40°.
    pub(crate) rotate: bool,
    /// Room taken under the axis, px.
    pub(crate) height: f64,
    /// The lines of each tick's label.
    lines: Vec<Vec<String>>,
}

impl TickLayout {
    /// True when every label of `ticks` is drawn whole: none thinned out, none cut.
    pub(crate) fn shows_all(&self, ticks: &[(f64, String)]) -> bool {
        self.step == 1
            && ticks
                .iter()
                .zip(&self.lines)
                .all(|((_, l), lines)| lines.join(" ") == *l)
    }
}

/// The lines of a rotated label with `room` px: its parts (split at `, `) joined while they
/// fit, a line broken after a part ending with its comma; a part wider than the room wrapped
/// at its spaces.
pub(super) fn label_lines(label: &str, room: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for part in label.split(", ") {
        if !cur.is_empty() {
            let cand = format!("{cur}, {part}");
            if text_width(&cand, FONT) + 4.0 <= room {
                cur = cand;
                continue;
            }
            lines.push(std::mem::take(&mut cur) + ",");
        }
        let mut pieces = wrap(part, (room - 4.0).max(FONT * 3.0), FONT);
        cur = pieces.pop().unwrap_or_default();
        lines.extend(pieces);
    }
    lines.push(cur);
    lines
}

/// Fits the labels of `ticks` (x in px, label) into slots of `slot` px. Categories are
/// rotated before they are thinned (each names a bar or a point).
pub(crate) fn fit_ticks(ticks: &[(f64, String)], slot: f64, categories: bool) -> TickLayout {
    let widest = ticks
        .iter()
        .map(|(_, l)| text_width(l, FONT))
        .fold(0.0, f64::max);
    let flat = |step| TickLayout {
        step,
        rotate: false,
        height: FONT + 8.0,
        lines: ticks.iter().map(|(_, l)| vec![clip(l, 30)]).collect(),
    };
    if widest + 6.0 <= slot {
        return flat(1);
    }
    // Horizontal but thinned, when few enough labels remain readable.
    let k = ((widest + 6.0) / slot).ceil().max(1.0) as usize;
    if k <= 2 && !categories {
        return flat(k);
    }
    let (sin, cos) = ANGLE.to_radians().sin_cos();
    let lines: Vec<Vec<String>> = ticks
        .iter()
        .map(|(x, l)| label_lines(l, ((x - LEFT) / cos).min(MAX_LINE)))
        .collect();
    let n = lines.iter().map(Vec::len).max().unwrap_or(1) as f64;
    let longest = lines
        .iter()
        .flatten()
        .map(|l| text_width(l, FONT))
        .fold(0.0, f64::max);
    // Rotated labels side by side need their lines' height across the axis (÷ sin 40°).
    let need = (n * LINE_H + 3.0) / sin;
    TickLayout {
        step: (need / slot).ceil().max(1.0) as usize,
        rotate: true,
        height: longest * sin + (n - 1.0) * LINE_H * cos + FONT + 12.0,
        lines,
    }
}

/// Draws the tick marks at `ticks` (x in px) under the axis at `y`, and their labels as laid
/// out by [`fit_ticks`] for the same ticks.
pub(crate) fn draw_x_ticks(out: &mut String, ticks: &[(f64, String)], y: f64, lay: &TickLayout) {
    for (i, (x, _)) in ticks.iter().enumerate() {
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{y}" x2="{x:.1}" y2="{y2}" stroke="#333"/>"##,
            y2 = y + 5.0
        );
        let Some(lines) = lay.lines.get(i).filter(|_| i % lay.step == 0) else {
            continue;
        };
        if lay.rotate {
            let ty = y + 12.0;
            let _ = write!(
                out,
                r#"<text class="tick" x="{x:.1}" y="{ty:.1}" text-anchor="end" font-size="{FONT}" transform="rotate(-{ANGLE} {x:.1} {ty:.1})">"#
            );
            if let [one] = lines.as_slice() {
                out.push_str(&esc(one));
            } else {
                for (k, l) in lines.iter().enumerate() {
                    let _ = write!(
                        out,
                        r#"<tspan x="{x:.1}" dy="{dy}">{t}</tspan>"#,
                        dy = if k == 0 { 0.0 } else { LINE_H },
                        t = esc(l)
                    );
                }
            }
            out.push_str("</text>");
        } else {
            let _ = write!(
                out,
                r#"<text class="tick" x="{x:.1}" y="{ty:.1}" text-anchor="middle" font-size="{FONT}">{l}</text>"#,
                ty = y + 17.0,
                l = esc(lines.first().map(String::as_str).unwrap_or(""))
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(labels: &[String], x0: f64, slot: f64) -> Vec<(f64, String)> {
        labels
            .iter()
            .enumerate()
            .map(|(i, l)| (x0 + slot * (i as f64 + 0.5), l.clone()))
            .collect()
    }

    #[test]
    fn dense_tick_labels_rotate_and_thin() {
        let few: Vec<String> = ["0 ms", "50 ms"].map(String::from).to_vec();
        assert!(!fit_ticks(&at(&few, 80.0, 100.0), 100.0, false).rotate);
        assert!(fit_ticks(&at(&few, 80.0, 40.0), 40.0, true).rotate);
        let many: Vec<String> = (0..40)
            .map(|i| format!("rtt={i} ms, window=64 KiB"))
            .collect();
        let lay = fit_ticks(&at(&many, 80.0, 15.0), 15.0, true);
        assert!(lay.rotate && lay.step >= 2 && lay.height > 60.0, "{lay:?}");
    }

    /// Issue #14: rotated category labels were cut with an ellipsis where they met the
    /// chart's left edge (`rtt=10 ms, window=64 …`); they are broken into lines instead.
    #[test]
    fn long_category_labels_break_after_commas_and_keep_every_word() {
        let cats: Vec<String> = [
            "rtt=10 ms, window=64 KiB (bdp), file_size=32 MiB",
            "rtt=100 ms, window=550 KiB (bdp)",
        ]
        .map(String::from)
        .to_vec();
        let ticks = at(&cats, 78.0, 98.0);
        let lay = fit_ticks(&ticks, 98.0, true);
        assert!(lay.rotate);
        let first = &lay.lines[0];
        assert!(first.len() >= 2, "{first:?}");
        assert_eq!(first.join(" "), cats[0], "nothing cut");
        assert!(first[0].ends_with(','), "{first:?}");
        let room = (ticks[0].0 - LEFT) / ANGLE.to_radians().cos();
        assert!(
            first.iter().all(|l| text_width(l, FONT) <= room),
            "{first:?}"
        );
        let mut svg = String::new();
        draw_x_ticks(&mut svg, &ticks, 300.0, &lay);
        assert!(svg.contains(">window=64 KiB (bdp),</tspan>"), "{svg}");
        assert!(!svg.contains('…'), "{svg}");
    }
}
