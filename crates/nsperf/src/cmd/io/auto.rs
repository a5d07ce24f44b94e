//! `nsperf io auto DIR`: the iozone-style matrix (file size × record size per test).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use nsperf_core::table::Table;
use nsperf_core::units::Bytes;
use nsperf_io::matrix::{MatrixConfig, MatrixReport, TESTS, iozone_csv, run_matrix_observed};
use nsperf_io::{CacheMode, EngineKind, FsyncMode, Workload};

use crate::exit::usage;
use crate::output::{Format, OutputArgs, print_json_line};

/// Arguments of `nsperf io auto`.
#[derive(Debug, Args)]
pub struct AutoArgs {
    /// Directory in which nsperf creates (and removes) its own `.nsperf-*` files.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Largest file size (rows go up in powers of two to it).
    #[arg(long, default_value = "512m", value_parser = Bytes::parse)]
    pub max_file: Bytes,
    /// Smallest file size.
    #[arg(long, default_value = "64k", value_parser = Bytes::parse)]
    pub min_file: Bytes,
    /// Record sizes, comma-separated (default every power of two 4k..16m, like iozone -a -z).
    #[arg(long, value_delimiter = ',', value_parser = Bytes::parse)]
    pub records: Vec<Bytes>,
    /// Tests, comma-separated, in iozone's order: write, rewrite, read, reread, randread,
    /// randwrite, bkwdread, recrewrite, strideread (default all).
    #[arg(long, value_delimiter = ',')]
    pub tests: Vec<String>,
    /// I/O engine: psync, uring, mmap, null.
    #[arg(long, short = 'e', default_value = "psync", value_parser = super::args::parse_engine)]
    pub engine: EngineKind,
    /// Ops in flight (uring only).
    #[arg(long, default_value_t = 1)]
    pub iodepth: u32,
    /// Cache state of the read tests: warm (iozone's default), cold, direct.
    #[arg(long, default_value = "warm", value_parser = super::args::parse_cache)]
    pub cache: CacheMode,
    /// fsync in the write tests: none, end (iozone -e), each.
    #[arg(long, default_value = "none", value_parser = super::args::parse_fsync)]
    pub fsync: FsyncMode,
    /// Count close() in the write tests (iozone -c).
    #[arg(long)]
    pub include_close: bool,
    /// Print iozone's -R spreadsheet layout as CSV (kB/s; file sizes down, records across).
    #[arg(long, conflicts_with_all = ["json", "csv", "json_stream"])]
    pub iozone_csv: bool,
    #[command(flatten)]
    pub dir_care: super::DirCareArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Builds the matrix config from the flags.
pub fn config(a: &AutoArgs) -> anyhow::Result<MatrixConfig> {
    let mut c = MatrixConfig::new(a.dir.clone());
    c.max_file_bytes = a.max_file.0;
    c.min_file_bytes = a.min_file.0;
    if !a.records.is_empty() {
        c.records_bytes = a.records.iter().map(|b| b.0).collect();
        c.records_bytes.sort_unstable();
        c.records_bytes.dedup();
    }
    let all = a.tests.is_empty() || (a.tests.len() == 1 && a.tests[0] == "all");
    if !all {
        let mut tests = Vec::new();
        for t in &a.tests {
            let w = t.trim()
                .parse::<Workload>()
                .ok()
                .filter(|w| TESTS.iter().any(|x| x.0 == *w))
                .ok_or_else(|| {
                    usage(format!(
                        "unknown matrix test '{t}' (write, rewrite, read, reread, randread, randwrite, bkwdread, recrewrite, strideread)"
                    ))
                })?;
            if !tests.contains(&w) {
                tests.push(w);
            }
        }
        // Run in iozone's order whatever order was typed.
        tests.sort_by_key(|w| TESTS.iter().position(|x| x.0 == *w));
        c.tests = tests;
    }
    c.engine = a.engine;
    c.iodepth = a.iodepth;
    c.cache = a.cache;
    c.fsync = a.fsync;
    c.include_close = a.include_close;
    c.space_check = !a.dir_care.no_space_check;
    c.clean_stale = a.dir_care.clean;
    Ok(c)
}

/// Runs `nsperf io auto`.
pub fn run(a: AutoArgs) -> anyhow::Result<()> {
    let cfg = config(&a)?;
    let stream = a.output.format() == Format::JsonStream;
    // --json-stream: each cell as one line as it is measured, then the result.
    let rep = run_matrix_observed(&cfg, &mut |c| {
        if stream {
            let _ = print_json_line(&serde_json::json!({"event": "cell", "cell": c}));
        }
    })
    .context("io auto")?;
    for why in rep.findings.iter().filter(|f| {
        matches!(
            f.id.as_str(),
            "engine_fallback" | "stale_files" | "stale_files_removed"
        )
    }) {
        eprintln!("nsperf: {}", why.message);
    }
    let csv_of: fn(&MatrixReport) -> String = if a.iozone_csv {
        |r| iozone_csv(&r.summary)
    } else {
        csv
    };
    let format = if a.iozone_csv {
        Format::Csv
    } else {
        a.output.format()
    };
    super::print_report(
        &rep,
        format,
        csv_of,
        human,
        rep.summary.interrupted,
        "the cells above are those that ran",
    )
}

/// One line per cell.
pub fn csv(r: &MatrixReport) -> String {
    let mut w = nsperf_core::csv::CsvWriter::new();
    w.record([
        "test",
        "file_bytes",
        "record_bytes",
        "throughput_bytes_per_s",
        "elapsed_s",
        "lat_p50_ns",
        "lat_p99_ns",
        "beyond_free_ram",
        "fits_cpu_cache",
    ]);
    for c in &r.summary.cells {
        w.record([
            c.test.clone(),
            c.file_bytes.to_string(),
            c.record_bytes.to_string(),
            format!("{:.0}", c.throughput_bytes_per_s),
            format!("{:.6}", c.elapsed_s),
            c.lat_p50_ns.to_string(),
            c.lat_p99_ns.to_string(),
            c.beyond_free_ram.to_string(),
            c.fits_cpu_cache.to_string(),
        ]);
    }
    w.into_string()
}

fn short(b: u64) -> String {
    Bytes(b)
        .to_string()
        .replace(" KiB", "k")
        .replace(" MiB", "m")
        .replace(" GiB", "g")
}

/// One table per test: file sizes down, record sizes across, MiB/s in the cells.
pub fn human(r: &MatrixReport) -> String {
    let s = &r.summary;
    let mut o = format!(
        "nsperf io auto: {} files {}..{}, {} record sizes, engine {}, cache {}, fsync {}\n",
        r.spec.dir.display(),
        short(r.spec.min_file_bytes),
        short(r.spec.max_file_bytes),
        s.record_sizes_bytes.len(),
        s.engine,
        r.spec.cache,
        r.spec.fsync
    );
    for test in &s.tests {
        o += &format!("\n{test} (MiB/s)\n");
        let mut header = vec!["file \\ record".to_string()];
        header.extend(s.record_sizes_bytes.iter().map(|&r| short(r)));
        let mut t = Table::new(header);
        for &f in &s.file_sizes_bytes {
            let mut row = vec![short(f)];
            let mut any = false;
            for &rec in &s.record_sizes_bytes {
                let c = s.cells.iter().find(|c| {
                    &c.test == test
                        && c.record_bytes == rec
                        && c.file_bytes <= f
                        && c.file_bytes * 2 > f
                });
                row.push(match c {
                    Some(c) => {
                        any = true;
                        let mark = if c.beyond_free_ram {
                            "*"
                        } else if c.fits_cpu_cache {
                            "c"
                        } else {
                            ""
                        };
                        format!("{:.0}{mark}", c.throughput_bytes_per_s / 1048576.0)
                    }
                    None => String::new(),
                });
            }
            if any {
                t.row(row);
            }
        }
        o += &t.render();
    }
    o += &format!(
        "\nc: the file fits in the CPU cache ({}); *: the file exceeds {}, past the page-cache cliff\n",
        s.cpu_cache_bytes
            .map(|b| Bytes(b).to_string())
            .unwrap_or_else(|| "unknown".into()),
        s.memory.describe(),
    );
    o += &format!("{} cells in {:.2} s\n", s.cells.len(), s.wall_s);
    for f in &r.findings {
        o += &format!(
            "{:<9} {}\n",
            format!("{:?}", f.severity).to_lowercase(),
            f.message
        );
    }
    o
}
