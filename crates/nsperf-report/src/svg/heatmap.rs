//! Heatmaps: rows × columns of values (the iozone file size × record size surface seen from
//! above), colour from white to dark blue, the value in each cell that has room for it.

use std::fmt::Write;

use super::{
    FONT, Frame, Side, Swatch, draw_axes, esc, fit_ticks, frame, open, short, text_width,
    title_lines,
};

/// A heatmap: rows × columns of values.
#[derive(Debug, Clone, Default)]
pub struct Heatmap {
    /// Title.
    pub title: String,
    /// Row axis title.
    pub row_label: String,
    /// Column axis title.
    pub col_label: String,
    /// What the colour is, with its unit (`throughput, MiB/s`).
    pub value_label: String,
    /// Row labels (top to bottom).
    pub rows: Vec<String>,
    /// Column labels (left to right).
    pub cols: Vec<String>,
    /// `values[row][col]` in the unit of `value_label`; `None` = not measured.
    pub values: Vec<Vec<Option<f64>>>,
}

fn shade(t: f64) -> String {
    let c = |a: f64, b: f64| (a + (b - a) * t.clamp(0.0, 1.0)).round() as u8;
    format!(
        "rgb({},{},{})",
        c(240.0, 8.0),
        c(245.0, 48.0),
        c(255.0, 107.0)
    )
}

/// Renders a heatmap.
pub fn heatmap(h: &Heatmap) -> String {
    let title = title_lines(&h.title);
    let vmax = h
        .values
        .iter()
        .flatten()
        .flatten()
        .copied()
        .fold(0.0f64, f64::max);
    let mut side = Side::default();
    side.add(Swatch::None, &h.value_label);
    side.add(
        Swatch::Box(shade(1.0)),
        &format!("{} (highest)", short(vmax)),
    );
    side.add(Swatch::Box(shade(0.5)), &short(vmax / 2.0));
    side.add(Swatch::Box(shade(0.0)), "0");
    side.add(Swatch::Box("#ddd".into()), "not measured");
    let probe = frame(title.len(), 0.0, true, side.height());
    let nc = h.cols.len().max(1) as f64;
    let cw = (probe.x1 - probe.x0) / nc;
    let ticks: Vec<(f64, String)> = h
        .cols
        .iter()
        .enumerate()
        .map(|(ci, c)| (probe.x0 + cw * (ci as f64 + 0.5), c.clone()))
        .collect();
    let lay = fit_ticks(&ticks, cw, true);
    let f = frame(title.len(), lay.height, true, side.height());
    let mut out = String::new();
    open(&mut out, &h.title, &title, "heatmap", f.height);
    let rh = (f.y1 - f.y0) / h.rows.len().max(1) as f64;
    let row_ticks: Vec<(f64, String)> = h
        .rows
        .iter()
        .enumerate()
        .map(|(ri, l)| (f.y0 + rh * (ri as f64 + 0.5), l.clone()))
        .collect();
    draw_axes(&mut out, &f, &[], &h.col_label, &h.row_label, lay.height);
    for (ri, row) in h.rows.iter().enumerate() {
        for ci in 0..h.cols.len() {
            let v = h.values.get(ri).and_then(|r| r.get(ci)).copied().flatten();
            cell(
                &mut out,
                &f,
                (ri, ci),
                (rh, cw),
                v,
                vmax,
                (row, &h.cols[ci]),
            );
        }
    }
    for (y, l) in &row_ticks {
        let _ = write!(
            out,
            r#"<text class="tick" x="{tx}" y="{ty:.1}" text-anchor="end" font-size="{FONT}">{l}</text>"#,
            tx = f.x0 - 6.0,
            ty = y + 4.0,
            l = esc(l)
        );
    }
    super::draw_x_ticks(&mut out, &ticks, f.y1, &lay);
    side.draw(&mut out, &f);
    out.push_str("</svg>");
    out
}

fn cell(
    out: &mut String,
    f: &Frame,
    (ri, ci): (usize, usize),
    (rh, cw): (f64, f64),
    v: Option<f64>,
    vmax: f64,
    (row, col): (&str, &str),
) {
    let x = f.x0 + cw * ci as f64;
    let y = f.y0 + rh * ri as f64;
    let (fill, text) = match v {
        Some(v) if vmax > 0.0 => (shade(v / vmax), short(v)),
        _ => ("#ddd".to_string(), "–".to_string()),
    };
    let dark = v.is_some_and(|v| vmax > 0.0 && v / vmax > 0.55);
    let _ = write!(
        out,
        r##"<rect class="cell" x="{x:.1}" y="{y:.1}" width="{cw:.1}" height="{rh:.1}" fill="{fill}" stroke="#fff"><title>{t}</title></rect>"##,
        t = esc(&format!("{row} × {col}: {text}"))
    );
    // The value, when the cell has room for it (the tooltip has it always).
    if text_width(&text, FONT) + 4.0 <= cw && rh >= FONT + 2.0 {
        let _ = write!(
            out,
            r##"<text class="value" x="{tx:.1}" y="{ty:.1}" text-anchor="middle" font-size="{FONT}" fill="{tc}">{t}</text>"##,
            tx = x + cw / 2.0,
            ty = y + rh / 2.0 + 4.0,
            tc = if dark { "#fff" } else { "#000" },
            t = esc(&text)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heatmap_renders_cells_and_its_scale() {
        let h = heatmap(&Heatmap {
            rows: vec!["1".into(), "2".into()],
            cols: vec!["a".into()],
            values: vec![vec![Some(1.0)], vec![None]],
            value_label: "throughput, MiB/s".into(),
            ..Default::default()
        });
        assert_eq!(h.matches("class=\"cell\"").count(), 2);
        assert!(h.contains(">throughput, MiB/s</text>"));
    }
}
