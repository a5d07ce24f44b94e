//! CSV: one row per run, the step's parameters as columns (RFC 4180 quoting).

use crate::{ExperimentData, Exporter, ReportError};

/// CSV exporter.
#[derive(Debug, Clone, Copy, Default)]
pub struct CsvExporter;

/// Quotes a field when it holds a comma, a quote or a line break (RFC 4180).
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

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
        let mut out = String::new();
        out.push_str(&head.iter().map(|h| field(h)).collect::<Vec<_>>().join(","));
        out.push_str("\r\n");
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
                r.phase.clone(),
                r.repetition.to_string(),
                format!("{:?}", r.status).to_lowercase(),
                r.metric.clone().unwrap_or_default(),
                num(r.value),
                r.payload_bytes.map(|b| b.to_string()).unwrap_or_default(),
                r.wire_bytes.map(|b| b.to_string()).unwrap_or_default(),
                format!("{}", r.duration_ns as f64 / 1e9),
                r.error.clone().unwrap_or_default(),
            ]);
            out.push_str(&row.iter().map(|c| field(c)).collect::<Vec<_>>().join(","));
            out.push_str("\r\n");
        }
        Ok(out.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(field("a"), "a");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
