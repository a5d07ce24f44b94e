//! CSV: one row per run, the step's parameters as columns (RFC 4180 quoting). Headers are
//! machine names; a parameter's column holds its resolved value (`{bdp}` as the byte count it
//! stood for), and a typed one a second column with its number in the base unit
//! (`rtt_s`, `window_bytes`).

use nsperf_core::csv::CsvWriter;

use crate::{ExperimentData, Exporter, ReportError};
use nsperf_results::Metric;

/// CSV exporter.
#[derive(Debug, Clone, Copy, Default)]
pub struct CsvExporter;

fn num(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

impl Exporter for CsvExporter {
    fn name(&self) -> &'static str {
        "csv"
    }

    fn extension(&self) -> &'static str {
        "csv"
    }

    fn export(&self, data: &ExperimentData) -> Result<Vec<u8>, ReportError> {
        let params = data.all_param_names();
        // A typed parameter also gets its number in the base unit (`rtt_s`, `window_bytes`).
        let units: Vec<Option<&str>> = params
            .iter()
            .map(|p| {
                data.runs
                    .iter()
                    .find_map(|r| r.params.get(p).filter(|v| v.number.is_some()))
                    .and_then(|v| v.kind.unit())
            })
            .collect();
        let mut head: Vec<String> = ["experiment", "run", "step", "type"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for (p, u) in params.iter().zip(&units) {
            head.push(p.clone());
            if let Some(u) = u {
                head.push(format!("{p}_{u}"));
            }
        }
        head.extend(crate::RUN_COLUMNS.iter().map(|s| s.to_string()));
        let mut out = CsvWriter::new();
        out.record(&head);
        for r in &data.runs {
            let mut row = vec![
                r.experiment_id.to_string(),
                r.id.to_string(),
                r.step.clone(),
                r.kind.to_string(),
            ];
            for (p, u) in params.iter().zip(&units) {
                let v = r.params.get(p);
                row.push(v.map(|v| v.value.clone()).unwrap_or_default());
                if u.is_some() {
                    row.push(num(v.and_then(|v| v.number)));
                }
            }
            row.extend([
                r.phase.to_string(),
                r.repetition.to_string(),
                r.status.to_string(),
                r.metric.as_ref().map(Metric::to_string).unwrap_or_default(),
                num(r.value),
                r.payload_bytes.map(|b| b.to_string()).unwrap_or_default(),
                r.wire_bytes.map(|b| b.to_string()).unwrap_or_default(),
                format!("{}", r.duration_ns as f64 / 1e9),
                r.error.clone().unwrap_or_default(),
            ]);
            out.record(&row);
        }
        Ok(out.into_string().into_bytes())
    }
}
