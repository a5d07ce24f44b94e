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
mod protocol;
mod replication;
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

/// An export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExportFormat {
    /// One row per run and metric.
    Csv,
    /// The experiment as one JSON document.
    Json,
    /// A workbook: runs, statistics and charts.
    Xlsx,
    /// The self-contained HTML report.
    Html,
}

impl ExportFormat {
    /// Every format, in the order help texts list them.
    pub const ALL: [ExportFormat; 4] = [
        ExportFormat::Csv,
        ExportFormat::Json,
        ExportFormat::Xlsx,
        ExportFormat::Html,
    ];

    /// The format of an output path, from its extension (`.htm` is HTML too).
    pub fn of_path(path: &std::path::Path) -> Option<ExportFormat> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "htm" => Some(ExportFormat::Html),
            ext => ext.parse().ok(),
        }
    }

    /// Its exporter.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            ExportFormat::Csv => Box::new(csv::CsvExporter),
            ExportFormat::Json => Box::new(json::JsonExporter),
            ExportFormat::Xlsx => Box::new(xlsx::XlsxExporter),
            ExportFormat::Html => Box::new(html::HtmlExporter),
        }
    }
}

impl std::fmt::Display for ExportFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExportFormat::Csv => "csv",
            ExportFormat::Json => "json",
            ExportFormat::Xlsx => "xlsx",
            ExportFormat::Html => "html",
        })
    }
}

impl std::str::FromStr for ExportFormat {
    type Err = ReportError;

    fn from_str(s: &str) -> Result<Self, ReportError> {
        ExportFormat::ALL
            .into_iter()
            .find(|f| f.to_string() == s)
            .ok_or_else(|| ReportError::UnknownFormat(s.to_string()))
    }
}

#[cfg(test)]
mod format_tests {
    use super::ExportFormat;
    use std::path::Path;

    #[test]
    fn formats_parse_print_and_follow_extensions() {
        for f in ExportFormat::ALL {
            assert_eq!(f.to_string().parse::<ExportFormat>().unwrap(), f);
            assert_eq!(f.exporter().name(), f.to_string());
        }
        assert!("pdf".parse::<ExportFormat>().is_err());
        assert_eq!(
            ExportFormat::of_path(Path::new("r.HTM")),
            Some(ExportFormat::Html)
        );
        assert_eq!(
            ExportFormat::of_path(Path::new("r.xlsx")),
            Some(ExportFormat::Xlsx)
        );
        assert_eq!(ExportFormat::of_path(Path::new("r.txt")), None);
        assert_eq!(ExportFormat::of_path(Path::new("report")), None);
    }
}
