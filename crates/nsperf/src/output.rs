//! How results leave the process: a human table on stdout, or exactly the JSON schema with
//! `--json`, or one JSON line per interval with `--json-stream`.

use std::io::{IsTerminal, Write};

use clap::Args;
use serde::Serialize;

/// Output flags shared by every measuring command.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Print the result as JSON (the documented schema) and nothing else (-J as in iperf3).
    #[arg(long, short = 'J', global = true, conflicts_with = "csv")]
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
    // Buffered: stdout is line-buffered, and a large document has a line per field.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    out.flush()?;
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

/// `--logfile FILE` (iperf3's): everything this process prints from now on, on stdout and
/// stderr (the one-line error included), is appended to FILE instead; created 0644 if new.
pub fn log_to_file(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(path)
        .map_err(|e| {
            crate::exit::classified(
                nsperf_core::Failure::Input,
                format!("--logfile {}: {e}", path.display()),
            )
        })?;
    std::io::stdout().flush()?;
    for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2 of an open descriptor onto a standard one; std's handles keep using
        // the descriptor numbers, now the file.
        if unsafe { libc::dup2(f.as_raw_fd(), fd) } < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
    }
    Ok(())
}
