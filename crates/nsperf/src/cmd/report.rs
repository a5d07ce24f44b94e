//! `nsperf report EXP -o report.html`: the self-contained HTML report of an experiment (or
//! any other export format, chosen by the file's extension).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use nsperf_report::{ExperimentData, ExportFormat};
use nsperf_results::Store;

/// Arguments of `nsperf report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Experiment id, `latest`, or a label (the latest experiment run with `--label`).
    #[arg(default_value = "latest")]
    pub experiment: String,
    /// Output file; the format follows its extension (.html, .csv, .json, .xlsx) [default:
    /// nsperf-report.html beside the result store].
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Result store (SQLite).
    #[arg(long, default_value = "nsperf-results.db")]
    pub db: PathBuf,
}

/// Writes experiment `which` of `store` to `path` in `format`.
pub fn export_to(
    store: &Store,
    which: &str,
    format: ExportFormat,
    path: &Path,
) -> anyhow::Result<()> {
    let exporter = format.exporter();
    let data = ExperimentData::load(store, which)?;
    let bytes = exporter.export(&data)?;
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// `nsperf-report.html` in the directory of the result store `db`.
pub fn beside(db: &Path) -> PathBuf {
    db.parent()
        .unwrap_or(Path::new(""))
        .join("nsperf-report.html")
}

/// Opens an existing store (an input error when there is none).
pub fn open_store(db: &Path) -> anyhow::Result<Store> {
    if !db.exists() {
        return Err(crate::exit::classified(
            nsperf_core::Failure::Input,
            format!(
                "no result store at {} (run `nsperf run` first, or give --db)",
                db.display()
            ),
        ));
    }
    Ok(Store::open(db)?)
}

/// Runs `nsperf report`.
pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let store = open_store(&args.db)?;
    let output = args.output.unwrap_or_else(|| beside(&args.db));
    let format = ExportFormat::of_path(&output).unwrap_or(ExportFormat::Html);
    export_to(&store, &args.experiment, format, &output)?;
    println!("wrote {}", output.display());
    Ok(())
}
