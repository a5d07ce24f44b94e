//! XLSX: a `summary` sheet with the statistics, then one sheet per test (step) with one row
//! per run, written with rust_xlsxwriter.

use rust_xlsxwriter::{Format, Workbook, Worksheet};

use crate::{ExperimentData, Exporter, ReportError};

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

fn header(ws: &mut Worksheet, cols: &[String], bold: &Format) -> Result<(), ReportError> {
    for (i, c) in cols.iter().enumerate() {
        ws.write_string_with_format(0, i as u16, c, bold)
            .map_err(x)?;
    }
    Ok(())
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
        let bold = Format::new().set_bold();
        let mut taken = vec!["summary".to_string()];
        {
            let ws = wb.add_worksheet().set_name("summary").map_err(x)?;
            let cols: Vec<String> = [
                "step",
                "parameters",
                "phase",
                "metric",
                "n",
                "mean",
                "ci95_lo",
                "ci95_hi",
                "median",
                "stddev",
                "min",
                "max",
                "peak_interval",
                "sustained_mean",
                "outliers",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            header(ws, &cols, &bold)?;
            for (i, g) in data.stats.iter().enumerate() {
                let r = (i + 1) as u32;
                let params = nsperf_results::params_label(&g.params, "");
                ws.write_string(r, 0, &g.step).map_err(x)?;
                ws.write_string(r, 1, &params).map_err(x)?;
                ws.write_string(r, 2, g.phase.to_string()).map_err(x)?;
                ws.write_string(r, 3, &g.metric).map_err(x)?;
                ws.write_number(r, 4, g.summary.n as f64).map_err(x)?;
                let s = &g.summary;
                for (c, v) in [
                    s.mean, s.ci95_lo, s.ci95_hi, s.median, s.stddev, s.min, s.max,
                ]
                .into_iter()
                .enumerate()
                {
                    ws.write_number(r, 5 + c as u16, v).map_err(x)?;
                }
                if let Some(p) = g.peak_interval {
                    ws.write_number(r, 12, p).map_err(x)?;
                }
                if let Some(p) = g.sustained_mean {
                    ws.write_number(r, 13, p).map_err(x)?;
                }
                let o = g
                    .outlier_repetitions
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(" ");
                ws.write_string(r, 14, &o).map_err(x)?;
            }
        }
        for step in data.steps() {
            let name = sheet_name(&step, &taken);
            taken.push(name.clone());
            let params = data.param_names(&step);
            let ws = wb.add_worksheet().set_name(&name).map_err(x)?;
            let mut cols = vec!["run".to_string()];
            cols.extend(params.iter().cloned());
            cols.extend(crate::RUN_COLUMNS.iter().map(|s| s.to_string()));
            header(ws, &cols, &bold)?;
            let np = params.len() as u16;
            for (i, r) in data.runs.iter().filter(|r| r.step == step).enumerate() {
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
                ws.write_string(row, c + 3, r.metric.as_deref().unwrap_or(""))
                    .map_err(x)?;
                if let Some(v) = r.value {
                    ws.write_number(row, c + 4, v).map_err(x)?;
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
        }
        wb.save_to_buffer().map_err(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sheet_names_are_valid_and_unique() {
        let taken = vec!["summary".to_string(), "a_b".to_string()];
        assert_eq!(sheet_name("a/b", &taken), "a_b~2");
        assert_eq!(sheet_name("summary", &taken), "test summary");
        assert!(sheet_name(&"x".repeat(50), &taken).len() <= 31);
    }
}
