//! XLSX, written with rust_xlsxwriter: a `summary` sheet with the statistics, one sheet per
//! test (step) with one row per run and a native chart of its means, and one `iozone` sheet per
//! io workload and phase with the file size × record size matrix (colour scale) and a chart of
//! it. Every sheet has labelled headers with units, numeric cells, fitted column widths, a
//! frozen header row and autofilters.
//!
//! The matrix is laid out as iozone's own spreadsheets are (file sizes down, record sizes
//! across), with a line chart (one line per file size) and the iozone surface chart beside it;
//! rust_xlsxwriter has no surface chart type, so [`surface`] puts it in the written package.

use std::collections::BTreeMap;

use rust_xlsxwriter::{
    Chart, ChartType, ConditionalFormat3ColorScale, Format, Workbook, Worksheet,
};

mod surface;

use crate::data::io_matrices;
use crate::{ExperimentData, Exporter, ReportError};
use nsperf_results::{Metric, Unit};

/// XLSX exporter.
#[derive(Debug, Clone, Copy, Default)]
pub struct XlsxExporter;

/// A valid, unique sheet name: at most 31 characters, none of `[]:*?/\`.
pub fn sheet_name(name: &str, taken: &[String]) -> String {
    let clean: String = name
        .chars()
        .map(|c| if "[]:*?/\\".contains(c) { '_' } else { c })
        .take(28)
        .collect();
    let clean = if clean.is_empty() || clean.eq_ignore_ascii_case("summary") {
        format!("test {clean}")
    } else {
        clean
    };
    let mut n = clean.clone();
    let mut i = 2;
    while taken.iter().any(|t| t.eq_ignore_ascii_case(&n)) {
        n = format!("{clean}~{i}");
        i += 1;
    }
    n
}

fn x(e: rust_xlsxwriter::XlsxError) -> ReportError {
    ReportError::Xlsx(e.to_string())
}

/// Header row (bold, frozen, with autofilters over `rows` data rows), then fitted widths.
fn header(ws: &mut Worksheet, cols: &[String], rows: u32) -> Result<(), ReportError> {
    let bold = Format::new().set_bold();
    for (i, c) in cols.iter().enumerate() {
        ws.write_string_with_format(0, i as u16, c, &bold)
            .map_err(x)?;
    }
    ws.set_freeze_panes(1, 0).map_err(x)?;
    if !cols.is_empty() {
        ws.autofilter(0, 0, rows.max(1), cols.len() as u16 - 1)
            .map_err(x)?;
    }
    Ok(())
}

/// One unit per metric down a sheet: the one that fits its largest value, so a column sorts
/// and filters by value (688 MiB/s and 10.7 GiB/s of one metric are both written in GiB/s).
fn metric_units<'a>(values: impl Iterator<Item = (&'a Metric, f64)>) -> BTreeMap<&'a Metric, Unit> {
    let mut max: BTreeMap<&Metric, f64> = BTreeMap::new();
    for (m, v) in values {
        let e = max.entry(m).or_insert(0.0);
        *e = e.max(v.abs());
    }
    max.into_iter().map(|(m, v)| (m, m.unit_for(v))).collect()
}

fn summary(wb: &mut Workbook, data: &ExperimentData) -> Result<(), ReportError> {
    let ws = wb.add_worksheet().set_name("summary").map_err(x)?;
    let cols: Vec<String> = [
        "step",
        "parameters",
        "phase",
        "metric",
        "unit",
        "n",
        "mean",
        "95 % CI low",
        "95 % CI high",
        "median",
        "stddev",
        "min",
        "max",
        "peak interval",
        "sustained mean",
        "outlier repetitions",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let units = metric_units(data.stats.iter().map(|g| (&g.metric, g.summary.mean)));
    for (i, g) in data.stats.iter().enumerate() {
        let r = (i + 1) as u32;
        let unit = units[&g.metric];
        ws.write_string(r, 0, &g.step).map_err(x)?;
        ws.write_string(r, 1, nsperf_results::params_label(&g.params, ""))
            .map_err(x)?;
        ws.write_string(r, 2, g.phase.to_string()).map_err(x)?;
        ws.write_string(r, 3, g.metric.quantity()).map_err(x)?;
        ws.write_string(r, 4, unit.name).map_err(x)?;
        ws.write_number(r, 5, g.summary.n as f64).map_err(x)?;
        let s = &g.summary;
        let vals = [
            Some(s.mean),
            Some(s.ci95_lo),
            Some(s.ci95_hi),
            Some(s.median),
            Some(s.stddev),
            Some(s.min),
            Some(s.max),
            g.peak_interval,
            g.sustained_mean,
        ];
        for (c, v) in vals.into_iter().enumerate() {
            if let Some(v) = v {
                ws.write_number(r, 6 + c as u16, v * unit.factor)
                    .map_err(x)?;
            }
        }
        let o = g
            .outlier_repetitions
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        ws.write_string(r, 15, &o).map_err(x)?;
    }
    header(ws, &cols, data.stats.len() as u32)?;
    ws.set_autofit_max_width(400).autofit();
    Ok(())
}

/// One step's sheet: a row per run; beside it the means per x parameter and series, charted.
fn step_sheet(
    wb: &mut Workbook,
    data: &ExperimentData,
    step: &str,
    name: &str,
) -> Result<(), ReportError> {
    let params = data.param_names(step);
    let runs: Vec<_> = data.runs.iter().filter(|r| r.step == step).collect();
    // One metric per step sheet's value column when the runs share it (else base units).
    let metric = runs
        .iter()
        .find_map(|r| r.metric.clone())
        .unwrap_or_default();
    let same = runs
        .iter()
        .all(|r| r.metric.as_ref().is_none_or(|m| *m == metric));
    let max = runs.iter().filter_map(|r| r.value).fold(0.0, f64::max);
    let unit = if same {
        metric.unit_for(max)
    } else {
        Unit {
            factor: 1.0,
            name: "",
        }
    };
    let ws = wb.add_worksheet().set_name(name).map_err(x)?;
    let mut cols = vec!["run".to_string()];
    for p in &params {
        let unit = runs
            .iter()
            .find_map(|r| r.params.get(p).filter(|v| v.number.is_some()))
            .and_then(|v| v.kind.unit());
        cols.push(match unit {
            Some(u) => format!("{p}, {u}"),
            None => p.clone(),
        });
    }
    let value_col = if same {
        metric.label(unit)
    } else {
        "value (base unit of its metric)".into()
    };
    cols.extend(
        [
            "phase",
            "repetition",
            "status",
            "metric",
            &value_col,
            "payload, bytes",
            "wire, bytes",
            "duration, s",
            "error",
        ]
        .map(String::from),
    );
    let np = params.len() as u16;
    for (i, r) in runs.iter().enumerate() {
        let row = (i + 1) as u32;
        ws.write_number(row, 0, r.id as f64).map_err(x)?;
        for (j, p) in params.iter().enumerate() {
            if let Some(v) = r.params.get(p) {
                match v.number {
                    Some(n) => ws.write_number(row, 1 + j as u16, n),
                    None => ws.write_string(row, 1 + j as u16, &v.value),
                }
                .map_err(x)?;
            }
        }
        let c = 1 + np;
        ws.write_string(row, c, r.phase.to_string()).map_err(x)?;
        ws.write_number(row, c + 1, r.repetition as f64)
            .map_err(x)?;
        ws.write_string(row, c + 2, r.status.to_string())
            .map_err(x)?;
        ws.write_string(
            row,
            c + 3,
            r.metric.as_ref().map(Metric::quantity).unwrap_or_default(),
        )
        .map_err(x)?;
        if let Some(v) = r.value {
            ws.write_number(row, c + 4, v * unit.factor).map_err(x)?;
        }
        if let Some(b) = r.payload_bytes {
            ws.write_number(row, c + 5, b as f64).map_err(x)?;
        }
        if let Some(b) = r.wire_bytes {
            ws.write_number(row, c + 6, b as f64).map_err(x)?;
        }
        ws.write_number(row, c + 7, r.duration_ns as f64 / 1e9)
            .map_err(x)?;
        ws.write_string(row, c + 8, r.error.as_deref().unwrap_or(""))
            .map_err(x)?;
    }
    header(ws, &cols, runs.len() as u32)?;
    ws.set_autofit_max_width(300).autofit();
    if same {
        means_chart(ws, data, step, name, (cols.len() as u16 + 1, unit))?;
    }
    Ok(())
}

/// The means of a step against its first typed parameter (RTT first), one column per series,
/// from column `at`, and a native scatter chart of them.
fn means_chart(
    ws: &mut Worksheet,
    data: &ExperimentData,
    step: &str,
    sheet: &str,
    (at, unit): (u16, Unit),
) -> Result<(), ReportError> {
    let Some(t) = crate::charts::means_table(data, step) else {
        return Ok(());
    };
    let bold = Format::new().set_bold();
    ws.write_string_with_format(0, at, &t.x_label, &bold)
        .map_err(x)?;
    for (si, s) in t.series.iter().enumerate() {
        ws.write_string_with_format(0, at + 1 + si as u16, s, &bold)
            .map_err(x)?;
    }
    for (xi, xv) in t.xs.iter().enumerate() {
        ws.write_number(1 + xi as u32, at, *xv).map_err(x)?;
        for (si, v) in t.means[xi].iter().enumerate() {
            if let Some(v) = v {
                ws.write_number(1 + xi as u32, at + 1 + si as u16, v * unit.factor)
                    .map_err(x)?;
            }
        }
    }
    let last = t.xs.len() as u32;
    let mut chart = Chart::new(ChartType::ScatterStraightWithMarkers);
    for si in 0..t.series.len() {
        let col = at + 1 + si as u16;
        chart
            .add_series()
            .set_name((sheet, 0, col))
            .set_categories((sheet, 1, at, last, at))
            .set_values((sheet, 1, col, last, col));
    }
    chart
        .title()
        .set_name(&format!("{step}: {} vs {}", t.metric.quantity(), t.x_name));
    chart.x_axis().set_name(&t.x_label);
    if t.log2 {
        chart.x_axis().set_log_base(2);
    }
    chart.y_axis().set_name(&t.metric.label(unit));
    ws.insert_chart(last + 3, at, &chart).map_err(x)?;
    Ok(())
}

/// One sheet per io matrix: file sizes down, record sizes across, MiB/s (or the unit that
/// fits), a colour scale, a line per file size, and the placeholder of its surface chart
/// (returned, to be put in once the workbook is written).
fn iozone_sheets(
    wb: &mut Workbook,
    data: &ExperimentData,
    taken: &mut Vec<String>,
) -> Result<Vec<surface::Surface>, ReportError> {
    let mut surfaces = Vec::new();
    for m in io_matrices(data) {
        let unit = m.metric.unit_for(m.max());
        let phase = match m.phase {
            nsperf_results::Phase::None => String::new(),
            p => format!(" {p}"),
        };
        let name = sheet_name(&format!("iozone {}{phase}", m.workload), taken);
        taken.push(name.clone());
        let ws = wb.add_worksheet().set_name(&name).map_err(x)?;
        let mut cols = vec![format!("file size \\ record size ({})", unit.name)];
        cols.extend(m.records.iter().map(|r| nsperf_core::Bytes(*r).to_string()));
        for (ri, s) in m.sizes.iter().enumerate() {
            let row = 1 + ri as u32;
            ws.write_string(row, 0, nsperf_core::Bytes(*s).to_string())
                .map_err(x)?;
            for (ci, v) in m.values[ri].iter().enumerate() {
                if let Some(v) = v {
                    ws.write_number(row, 1 + ci as u16, v * unit.factor)
                        .map_err(x)?;
                }
            }
        }
        let (nr, nc) = (m.sizes.len() as u32, m.records.len() as u16);
        ws.add_conditional_format(1, 1, nr, nc, &ConditionalFormat3ColorScale::new())
            .map_err(x)?;
        header(ws, &cols, nr)?;
        ws.set_autofit_max_width(300).autofit();
        let mut chart = Chart::new(ChartType::Line);
        for ri in 0..nr {
            chart
                .add_series()
                .set_name((name.as_str(), 1 + ri, 0))
                .set_categories((name.as_str(), 0, 1, 0, nc))
                .set_values((name.as_str(), 1 + ri, 1, 1 + ri, nc));
        }
        chart.title().set_name(&format!(
            "{} {}{phase}: {} per file size and record size",
            m.step,
            m.workload,
            m.metric.quantity()
        ));
        chart.x_axis().set_name("record size");
        chart.y_axis().set_name(&m.metric.label(unit));
        ws.insert_chart(nr + 3, 0, &chart).map_err(x)?;
        let s = surface::Surface {
            key: format!("nsperf surface placeholder {}", surfaces.len() + 1),
            title: format!(
                "{} {}{phase}: iozone surface (file size × record size)",
                m.step, m.workload
            ),
            sheet: name.clone(),
            rows: m
                .sizes
                .iter()
                .map(|s| nsperf_core::Bytes(*s).to_string())
                .collect(),
            cols: m
                .records
                .iter()
                .map(|r| nsperf_core::Bytes(*r).to_string())
                .collect(),
            values: m
                .values
                .iter()
                .map(|r| r.iter().map(|v| v.map(|v| v * unit.factor)).collect())
                .collect(),
            value_label: m.metric.label(unit),
        };
        chart.title().set_name(&s.key);
        ws.insert_chart(nr + 20, 0, &chart).map_err(x)?;
        surfaces.push(s);
    }
    Ok(surfaces)
}

impl Exporter for XlsxExporter {
    fn name(&self) -> &'static str {
        "xlsx"
    }

    fn extension(&self) -> &'static str {
        "xlsx"
    }

    fn export(&self, data: &ExperimentData) -> Result<Vec<u8>, ReportError> {
        let mut wb = Workbook::new();
        let mut taken = vec!["summary".to_string()];
        summary(&mut wb, data)?;
        for step in data.steps() {
            let name = sheet_name(&step, &taken);
            taken.push(name.clone());
            step_sheet(&mut wb, data, &step, &name)?;
        }
        let surfaces = iozone_sheets(&mut wb, data, &mut taken)?;
        surface::replace_placeholders(wb.save_to_buffer().map_err(x)?, &surfaces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_has_one_unit_down_the_sheet() {
        let (bytes, bits) = (Metric::THROUGHPUT_BYTES_PER_S, Metric::THROUGHPUT_BPS);
        let u = metric_units(
            [
                (&bytes, 688.0 * 1048576.0),
                (&bits, 42.5e6),
                (&bytes, 10.7 * 1073741824.0),
            ]
            .into_iter(),
        );
        assert_eq!(u[&Metric::THROUGHPUT_BYTES_PER_S].name, "GiB/s");
        assert_eq!(u[&Metric::THROUGHPUT_BPS].name, "Mbit/s");
    }

    #[test]
    fn sheet_names_are_valid_and_unique() {
        let taken = vec!["summary".to_string(), "a_b".to_string()];
        assert_eq!(sheet_name("a/b", &taken), "a_b~2");
        assert_eq!(sheet_name("summary", &taken), "test summary");
        assert!(sheet_name(&"x".repeat(50), &taken).len() <= 31);
    }
}
