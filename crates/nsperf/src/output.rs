//! How results leave the process: a human table on stdout, or exactly the JSON schema with
//! `--json`, or one JSON line per interval with `--json-stream`.

use std::io::{IsTerminal, Write};

use clap::Args;
use serde::Serialize;

/// Output flags shared by every measuring command.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Print the result as JSON (the documented schema) and nothing else.
    #[arg(long, global = true, conflicts_with = "csv")]
    pub json: bool,
    /// Print one JSON object per line as each interval ends, then the final result.
    #[arg(long, global = true, conflicts_with_all = ["json", "csv"])]
    pub json_stream: bool,
    /// Print the interval time series as CSV.
    #[arg(long, global = true)]
    pub csv: bool,
    /// No live progress line, even on a terminal.
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
}

/// The one output format chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Tables for people.
    Human,
    /// The result schema as one JSON document.
    Json,
    /// One JSON line per interval, then the result.
    JsonStream,
    /// CSV of the intervals.
    Csv,
}

impl OutputArgs {
    /// The chosen format.
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else if self.json_stream {
            Format::JsonStream
        } else if self.csv {
            Format::Csv
        } else {
            Format::Human
        }
    }

    /// Whether a live progress line may be drawn on stderr.
    pub fn progress(&self) -> bool {
        !self.quiet && self.format() == Format::Human && std::io::stderr().is_terminal()
    }
}

/// Writes `value` as pretty JSON and a newline to stdout.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Writes `value` as one compact JSON line to stdout and flushes, for streaming.
pub fn print_json_line<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}
