//! CSV: one row per run, the step's parameters as columns (RFC 4180 quoting).

use nsperf_core::csv::CsvWriter;

use crate::{ExperimentData, Exporter, ReportError};

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
        let mut params: Vec<String> = data
            .runs
            .iter()
            .flat_map(|r| r.params.keys().cloned())
            .collect();
        params.sort();
        params.dedup();
        let mut head: Vec<String> = ["experiment", "run", "step", "type"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        head.extend(params.iter().cloned());
        head.extend(crate::RUN_COLUMNS.iter().map(|s| s.to_string()));
        let mut out = CsvWriter::new();
        out.record(&head);
        for r in &data.runs {
            let mut row = vec![
                r.experiment_id.to_string(),
                r.id.to_string(),
                r.step.clone(),
                r.kind.clone(),
            ];
            for p in &params {
                row.push(r.params.get(p).cloned().unwrap_or_default());
            }
            row.extend([
                r.phase.to_string(),
                r.repetition.to_string(),
                r.status.to_string(),
                r.metric.clone().unwrap_or_default(),
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
