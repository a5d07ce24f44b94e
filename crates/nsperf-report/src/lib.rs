//! Exporters of nsperf experiments, one file per format behind the [`Exporter`] trait:
//! CSV (one row per run), JSON (experiment, statistics, runs with their series), XLSX (one
//! sheet per test plus a summary sheet) and a self-contained HTML report with inline SVG
//! charts (no script or style fetched from anywhere: it opens offline).
//!
//! Exporters read an [`ExperimentData`], loaded once from the result store; they never see
//! command-line types.
#![deny(missing_docs)]

mod capture;
mod charts;
mod compare;
mod csv;
mod data;
mod events;
mod html;
mod json;
mod labels;
mod protocol;
mod svg;
mod xlsx;

pub use compare::{compare_html, compare_svg};
pub use data::ExperimentData;

/// The columns of one stored run after its parameters, in the CSV export (machine names; the
/// XLSX export labels them with their units).
pub const RUN_COLUMNS: [&str; 9] = [
    "phase",
    "repetition",
    "status",
    "metric",
    "value",
    "payload_bytes",
    "wire_bytes",
    "duration_s",
    "error",
];

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// Writing the output failed.
    #[error("cannot write the {format} export: {source}")]
    Write {
        /// The format.
        format: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The XLSX writer refused.
    #[error("XLSX: {0}")]
    Xlsx(String),
    /// An unknown format name.
    #[error("unknown export format \"{0}\" (use csv, json, xlsx or html)")]
    UnknownFormat(String),
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] nsperf_results::StoreError),
}

impl Classify for ReportError {
    fn failure(&self) -> Failure {
        match self {
            ReportError::UnknownFormat(_) => Failure::Usage,
            ReportError::Store(e) => e.failure(),
            _ => Failure::Runtime,
        }
    }
}

/// One export format.
pub trait Exporter {
    /// Format name (`csv`, `json`, `xlsx`, `html`).
    fn name(&self) -> &'static str;
    /// File extension without the dot.
    fn extension(&self) -> &'static str;
    /// The exported document.
    fn export(&self, data: &ExperimentData) -> Result<Vec<u8>, ReportError>;
}

/// The exporter of a format name.
pub fn exporter(format: &str) -> Result<Box<dyn Exporter>, ReportError> {
    Ok(match format {
        "csv" => Box::new(csv::CsvExporter),
        "json" => Box::new(json::JsonExporter),
        "xlsx" => Box::new(xlsx::XlsxExporter),
        "html" => Box::new(html::HtmlExporter),
        other => return Err(ReportError::UnknownFormat(other.to_string())),
    })
}

/// The format of an output path, from its extension.
pub fn format_of_path(path: &std::path::Path) -> Option<&'static str> {
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "csv" => Some("csv"),
        "json" => Some("json"),
        "xlsx" => Some("xlsx"),
        "html" | "htm" => Some("html"),
        _ => None,
    }
}
