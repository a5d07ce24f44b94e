//! `nsperf io bonnie DIR`: the bonnie++-style suite in one table.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use nsperf_core::table::Table;
use nsperf_core::units::Bytes;
use nsperf_io::bonnie::{BonnieConfig, BonnieReport, run_bonnie_observed};
use nsperf_io::{CacheMode, EngineKind, FsyncMode};

use super::{dur_ns, ops, rate};
use crate::output::OutputArgs;

/// Arguments of `nsperf io bonnie`.
#[derive(Debug, Args)]
pub struct BonnieArgs {
    /// Directory in which nsperf creates (and removes) its own `.nsperf-*` files.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// File size of the throughput tests.
    #[arg(long, short = 's', default_value = "256m", value_parser = Bytes::parse)]
    pub size: Bytes,
    /// Chunk size of block I/O and seeks (bonnie++: 8k).
    #[arg(long, default_value = "8k", value_parser = Bytes::parse)]
    pub chunk: Bytes,
    /// Cache state of the read tests: cold (default: evicted first), warm, direct.
    #[arg(long, default_value = "cold", value_parser = super::args::parse_cache)]
    pub cache: CacheMode,
    /// fsync of the write tests: end (default), none, each.
    #[arg(long, default_value = "end", value_parser = super::args::parse_fsync)]
    pub fsync: FsyncMode,
    /// Engine of the block tests.
    #[arg(long, short = 'e', default_value = "psync", value_parser = super::args::parse_engine)]
    pub engine: EngineKind,
    /// Files of the metadata test.
    #[arg(long, short = 'n', default_value_t = 4096)]
    pub files: u32,
    /// Size of each file of the metadata test.
    #[arg(long, default_value = "0", value_parser = Bytes::parse)]
    pub file_size: Bytes,
    /// Skip the per-character tests (bonnie++ -f).
    #[arg(long, short = 'f')]
    pub fast: bool,
    #[command(flatten)]
    pub dir_care: super::DirCareArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `nsperf io bonnie`.
pub fn run(a: BonnieArgs) -> anyhow::Result<()> {
    let mut c = BonnieConfig::new(a.dir.clone());
    c.size_bytes = a.size.0;
    c.chunk_bytes = a.chunk.0;
    c.cache = a.cache;
    c.fsync = a.fsync;
    c.engine = a.engine;
    c.files = a.files;
    c.file_bytes = a.file_size.0;
    c.fast = a.fast;
    c.space_check = !a.dir_care.no_space_check;
    c.clean_stale = a.dir_care.clean;
    // --json-stream: each test's row as one line as it ends, then the result.
    let stream = a.output.format() == crate::output::Format::JsonStream;
    let rep = run_bonnie_observed(&c, &mut |row| {
        if stream {
            let _ =
                crate::output::print_json_line(&serde_json::json!({"event": "test", "row": row}));
        }
    })
    .context("io bonnie")?;
    super::print_report(
        &rep,
        a.output.format(),
        csv,
        human,
        rep.summary.interrupted,
        "the tests above are those that ran",
    )
}

/// One line per test.
pub fn csv(r: &BonnieReport) -> String {
    let mut w = nsperf_core::csv::CsvWriter::new();
    w.record([
        "test",
        "workload",
        "throughput_bytes_per_s",
        "ops_per_s",
        "lat_p99_ns",
        "cpu_process_pct",
        "elapsed_s",
    ]);
    for x in &r.summary.rows {
        w.record([
            x.test.clone(),
            x.workload.to_string(),
            format!("{:.0}", x.throughput_bytes_per_s),
            format!("{:.1}", x.ops_per_s),
            x.lat_p99_ns.to_string(),
            format!("{:.1}", x.cpu_process_pct),
            format!("{:.6}", x.elapsed_s),
        ]);
    }
    for x in r.summary.rows.iter().flat_map(|x| &x.phases) {
        w.record([
            x.name.clone(),
            "meta".into(),
            "0".into(),
            format!("{:.1}", x.ops_per_s),
            String::new(),
            String::new(),
            format!("{:.6}", x.elapsed_s),
        ]);
    }
    w.into_string()
}

/// The suite for people.
pub fn human(r: &BonnieReport) -> String {
    let c = &r.spec;
    let mut o = format!(
        "nsperf io bonnie: {}, {} file, {} chunks, reads {}, writes fsync {}, {} small files\n\n",
        c.dir.display(),
        Bytes(c.size_bytes),
        Bytes(c.chunk_bytes),
        c.cache,
        c.fsync,
        c.files
    );
    let mut t = Table::new(["test", "throughput", "ops/s", "p99 latency", "%CPU"]);
    for x in &r.summary.rows {
        t.row([
            x.test.clone(),
            if x.throughput_bytes_per_s > 0.0 {
                rate(x.throughput_bytes_per_s)
            } else {
                String::new()
            },
            ops(x.ops_per_s),
            dur_ns(x.lat_p99_ns as f64),
            format!("{:.0}", x.cpu_process_pct),
        ]);
    }
    o += &t.render();
    let phases: Vec<_> = r.summary.rows.iter().flat_map(|x| &x.phases).collect();
    if !phases.is_empty() {
        let mut t = Table::new(["metadata", "files", "files/s"]);
        for p in phases {
            t.row([
                p.name.replace('_', " "),
                p.ops.to_string(),
                ops(p.ops_per_s),
            ]);
        }
        o += "\n";
        o += &t.render();
    }
    for f in &r.findings {
        o += &format!(
            "{:<9} {}\n",
            format!("{:?}", f.severity).to_lowercase(),
            f.message
        );
    }
    o
}
