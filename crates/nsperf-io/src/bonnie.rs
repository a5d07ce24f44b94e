//! `nsperf io bonnie`: the bonnie++ suite — per-character output, block output, rewrite,
//! per-character input, block input, random seeks, and the metadata test (create, stat, read,
//! delete small files in sequential and random order) — each run as an `io run` workload on
//! the same directory and reported in one table.

use std::path::PathBuf;
use std::time::Instant;

use nsperf_core::report::{Finding, HostRecord};
use serde::{Deserialize, Serialize};

use crate::config::{CacheMode, FsyncMode, RunConfig};
use crate::engine::EngineKind;
use crate::error::IoError;
use crate::result::Phase;
use crate::target::Target;
use crate::workload::Workload;

/// Parameters of the suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BonnieConfig {
    /// Directory for the test files.
    pub dir: PathBuf,
    /// File size of the throughput tests (bonnie++ uses twice the RAM to defeat the cache;
    /// here the read tests evict the file instead, see `cache`).
    pub size_bytes: u64,
    /// Chunk size of block I/O and seeks (bonnie++: 8 KiB).
    pub chunk_bytes: u64,
    /// Cache state of the read tests (default cold: evicted before reading).
    pub cache: CacheMode,
    /// fsync of the write tests (default end: the data reaches the device inside the timing).
    pub fsync: FsyncMode,
    /// Engine of the block tests.
    pub engine: EngineKind,
    /// Files of the metadata test.
    pub files: u32,
    /// Size of each file of the metadata test.
    pub file_bytes: u64,
    /// Jobs of the seek test (bonnie++ runs 3 seekers).
    pub seekers: u32,
    /// Skip the per-character tests (bonnie++ `-f`).
    pub fast: bool,
    /// Seed.
    pub seed: u64,
    /// Refuse to start a test whose files do not fit in the free space.
    pub space_check: bool,
    /// Also remove the stale `.nsperf-*` files nsperf cannot prove dead (`--clean`).
    pub clean_stale: bool,
}

impl BonnieConfig {
    /// Defaults: 256 MiB, 8 KiB chunks, cold reads, fsync at end, 4096 files, 3 seekers.
    pub fn new(dir: PathBuf) -> Self {
        BonnieConfig {
            dir,
            size_bytes: 256 << 20,
            chunk_bytes: 8192,
            cache: CacheMode::Cold,
            fsync: FsyncMode::End,
            engine: EngineKind::Psync,
            files: 4096,
            file_bytes: 0,
            seekers: 3,
            fast: false,
            seed: 0x6e73_7065_7266,
            space_check: true,
            clean_stale: false,
        }
    }

    /// The tests of the suite in bonnie++'s order: its name for each, and the workload.
    pub fn tests(&self) -> Vec<(&'static str, Workload)> {
        let mut steps: Vec<(&str, Workload)> = Vec::new();
        if !self.fast {
            steps.push(("per-char output", Workload::CharWrite));
        }
        steps.push(("block output", Workload::SeqWrite));
        steps.push(("rewrite", Workload::Rewrite));
        if !self.fast {
            steps.push(("per-char input", Workload::CharRead));
        }
        steps.push(("block input", Workload::SeqRead));
        steps.push(("random seeks", Workload::Seeks));
        steps.push(("metadata", Workload::Meta));
        steps
    }

    /// The run of one test of the suite.
    pub fn test_config(&self, w: Workload) -> RunConfig {
        let mut c = RunConfig::new(
            Target::Dir {
                path: self.dir.clone(),
            },
            w,
            self.size_bytes,
            self.chunk_bytes,
        );
        c.engine = if w.is_block() {
            self.engine
        } else {
            EngineKind::Psync
        };
        c.cache = match (w, self.cache) {
            (Workload::Meta, _) => CacheMode::Warm,
            (w, CacheMode::Direct) if !w.is_block() => CacheMode::Cold,
            (_, m) => m,
        };
        c.fsync = if w.writes() && w != Workload::Meta {
            self.fsync
        } else {
            FsyncMode::None
        };
        c.meta_files = self.files;
        c.meta_file_bytes = self.file_bytes;
        c.seed = self.seed;
        c.space_check = self.space_check;
        c.clean_stale = self.clean_stale;
        if w == Workload::Seeks {
            c.jobs = self.seekers.max(1);
            c.shared_file = true;
            c.size_bytes = (self.size_bytes / c.jobs as u64).max(self.chunk_bytes);
        }
        c
    }

    /// Checks every test's run with the engine's own rules; the message is one line.
    pub fn validate(&self) -> Result<(), IoError> {
        for (name, w) in self.tests() {
            self.test_config(w)
                .validate()
                .map_err(|e| IoError::Config(format!("bonnie {name}: {e}")))?;
        }
        Ok(())
    }
}

/// One line of the suite's table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BonnieRow {
    /// bonnie++'s name of the test.
    pub test: String,
    /// The workload run.
    pub workload: String,
    /// Bytes per second (0 for seeks and metadata).
    pub throughput_bytes_per_s: f64,
    /// Operations per second (seeks/s, files/s, records/s).
    pub ops_per_s: f64,
    /// 99th percentile latency of one op.
    pub lat_p99_ns: u64,
    /// This process's CPU, % of one core (bonnie++'s %CP).
    pub cpu_process_pct: f64,
    /// Seconds taken.
    pub elapsed_s: f64,
    /// Metadata phases, for the metadata test.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
}

/// Summary of the suite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BonnieSummary {
    /// One row per test, in bonnie++'s order.
    pub rows: Vec<BonnieRow>,
    /// True when Ctrl-C cut the suite short.
    pub interrupted: bool,
}

/// The report of `nsperf io bonnie`.
pub type BonnieReport = nsperf_core::Report<BonnieConfig, (), BonnieSummary>;

/// Runs the suite.
pub fn run_bonnie(cfg: &BonnieConfig) -> Result<BonnieReport, IoError> {
    run_bonnie_observed(cfg, &mut |_| {})
}

/// Runs the suite, calling `on_row` with each test's row as it ends (for `--json-stream`).
pub fn run_bonnie_observed(
    cfg: &BonnieConfig,
    on_row: &mut dyn FnMut(&BonnieRow),
) -> Result<BonnieReport, IoError> {
    let t0 = Instant::now();
    let mut rep = BonnieReport::new(
        nsperf_core::report::Command::Io,
        cfg.clone(),
        BonnieSummary::default(),
    );
    for (name, w) in cfg.tests() {
        let c = cfg.test_config(w);
        let r = crate::runner::run(&c)?;
        let s = &r.summary;
        if rep.hosts.is_empty() {
            rep.hosts = r.hosts.clone();
        }
        rep.cpu.extend(r.cpu.iter().cloned());
        rep.findings.extend(
            r.findings
                .iter()
                .filter(|f| !rep.findings.iter().any(|g: &Finding| g.id == f.id))
                .cloned()
                .collect::<Vec<_>>(),
        );
        let meta = w == Workload::Meta;
        rep.summary.rows.push(BonnieRow {
            test: name.into(),
            workload: w.to_string(),
            throughput_bytes_per_s: if meta || w == Workload::Seeks {
                0.0
            } else {
                s.throughput_bytes_per_s
            },
            ops_per_s: s.iops,
            lat_p99_ns: s.lat_p99_ns,
            cpu_process_pct: s.cpu_process_pct,
            elapsed_s: s.elapsed_s,
            phases: s.phases.clone(),
        });
        if let Some(row) = rep.summary.rows.last() {
            on_row(row);
        }
        if s.interrupted {
            rep.summary.interrupted = true;
            break;
        }
    }
    if rep.hosts.is_empty() {
        rep.hosts.push(HostRecord {
            role: "local".into(),
            facts: nsperf_core::host::HostFacts::collect(),
        });
    }
    rep.duration_ns = t0.elapsed().as_nanos() as u64;
    Ok(rep)
}
