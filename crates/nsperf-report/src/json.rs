//! JSON: the experiment, its statistics, and every run with its time series and CPU rows.

use serde_json::json;

use crate::{ExperimentData, Exporter, ReportError};

/// JSON exporter.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn name(&self) -> &'static str {
        "json"
    }

    fn extension(&self) -> &'static str {
        "json"
    }

    fn export(&self, data: &ExperimentData) -> Result<Vec<u8>, ReportError> {
        let runs: Vec<serde_json::Value> = data
            .runs
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                v["intervals"] = serde_json::to_value(data.series.get(&r.id)).unwrap_or_default();
                v["cpu"] = serde_json::to_value(data.cpu.get(&r.id)).unwrap_or_default();
                if let Some(t) = data.traces.get(&r.id) {
                    v["trace"] = t.clone();
                }
                if let Some(e) = data.events.get(&r.id) {
                    v["events"] = serde_json::to_value(e).unwrap_or_default();
                }
                if let Some(h) = data.hosts.get(&r.id) {
                    v["hosts"] = serde_json::to_value(h).unwrap_or_default();
                }
                v
            })
            .collect();
        let doc = json!({
            "schema_version": nsperf_core::SCHEMA_VERSION,
            "experiment": data.experiment,
            "stats": data.stats,
            "runs": runs,
        });
        let mut out = serde_json::to_vec_pretty(&doc).map_err(|e| ReportError::Write {
            format: "json",
            source: e.into(),
        })?;
        out.push(b'\n');
        Ok(out)
    }
}
