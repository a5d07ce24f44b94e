//! `nsperf io auto`: the iozone-style matrix of file size × record size, each cell running the
//! chosen tests in iozone's order on one fresh file (write creates it, rewrite overwrites it,
//! read and reread read it, …), and the markers that explain the surface: cells whose file
//! exceeds free RAM (the page-cache cliff) or fits in the CPU cache.
//!
//! Cells run on the calling thread through the same measured loop as `io run`
//! ([`crate::job::run_job`]), without per-cell threads or host probes, so a matrix costs
//! little more than the I/O it does.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nsperf_core::host::HostFacts;
use nsperf_core::report::{Finding, HostRecord, Severity};
use nsperf_core::units::Bytes;
use serde::{Deserialize, Serialize};

use crate::buffer::BufferPool;
use crate::cache;
use crate::config::{CacheMode, FsyncMode};
use crate::engine::{EngineKind, IoEngine, Mmap, Null, Psync, Uring};
use crate::error::IoError;
use crate::job::{JobClock, JobPlan, run_job};
use crate::local::resolve_engine;
use crate::memory::MemoryFacts;
use crate::target::{CreatedFiles, cstr};
use crate::workload::{OpStream, Workload};

mod report;
pub use report::{iozone_csv, matrix_findings};

/// The tests of the matrix, in iozone's order, with iozone's report names.
pub const TESTS: [(Workload, &str); 9] = [
    (Workload::SeqWrite, "Writer report"),
    (Workload::Rewrite, "Re-writer report"),
    (Workload::SeqRead, "Reader report"),
    (Workload::Reread, "Re-Reader report"),
    (Workload::RandRead, "Random read report"),
    (Workload::RandWrite, "Random write report"),
    (Workload::BkwdRead, "Backward read report"),
    (Workload::RecRewrite, "Record rewrite report"),
    (Workload::StrideRead, "Stride read report"),
];

/// Parameters of a matrix run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixConfig {
    /// Directory for the test files.
    pub dir: PathBuf,
    /// Smallest file size.
    pub min_file_bytes: u64,
    /// Largest file size.
    pub max_file_bytes: u64,
    /// Record sizes (each ≤ the file size is run).
    pub records_bytes: Vec<u64>,
    /// Tests, in the order run.
    pub tests: Vec<Workload>,
    /// Engine.
    pub engine: EngineKind,
    /// Ops in flight (uring).
    pub iodepth: u32,
    /// Cache state of read tests: warm (iozone's default) or cold (evicted before each read
    /// test) or direct (O_DIRECT).
    pub cache: CacheMode,
    /// fsync inside write tests (`end` is iozone `-e`).
    pub fsync: FsyncMode,
    /// Count close() in write tests (iozone `-c`).
    pub include_close: bool,
    /// Seed of the random offsets.
    pub seed: u64,
    /// Refuse to start when the largest file does not fit in the free space.
    pub space_check: bool,
    /// Also remove the stale `.nsperf-*` files nsperf cannot prove dead (`--clean`).
    pub clean_stale: bool,
}

impl MatrixConfig {
    /// iozone `-a -z` defaults: 64 KiB .. 512 MiB files, 4 KiB .. 16 MiB records, all tests.
    pub fn new(dir: PathBuf) -> Self {
        MatrixConfig {
            dir,
            min_file_bytes: 64 * 1024,
            max_file_bytes: 512 * 1024 * 1024,
            records_bytes: default_records(),
            tests: TESTS.iter().map(|t| t.0).collect(),
            engine: EngineKind::Psync,
            iodepth: 1,
            cache: CacheMode::Warm,
            fsync: FsyncMode::None,
            include_close: false,
            seed: 0x6e73_7065_7266,
            space_check: true,
            clean_stale: false,
        }
    }

    /// File sizes: powers of two from the minimum to the maximum (both included).
    pub fn file_sizes(&self) -> Vec<u64> {
        let mut v = Vec::new();
        let mut f = self.min_file_bytes.max(1);
        while f <= self.max_file_bytes {
            v.push(f);
            f *= 2;
        }
        if v.last() != Some(&self.max_file_bytes) && self.max_file_bytes >= self.min_file_bytes {
            v.push(self.max_file_bytes);
        }
        v
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), IoError> {
        let bad = |m: &str| Err(IoError::Config(m.to_string()));
        if self.min_file_bytes == 0 || self.min_file_bytes > self.max_file_bytes {
            return bad("--min-file must be at least 1 byte and at most --max-file");
        }
        if self.records_bytes.is_empty() || self.records_bytes.contains(&0) {
            return bad("--records needs at least one size above 0");
        }
        if self.tests.is_empty() {
            return bad("--tests needs at least one test");
        }
        if let Some(t) = self
            .tests
            .iter()
            .find(|t| !TESTS.iter().any(|x| x.0 == **t))
        {
            return Err(IoError::Config(format!(
                "{t} is not a matrix test (write, rewrite, read, reread, randread, randwrite, bkwdread, recrewrite, strideread)"
            )));
        }
        if self.iodepth > 1 && !self.engine.caps().queued {
            return bad("--iodepth above 1 needs --engine uring");
        }
        if self.cache == CacheMode::Direct
            && (!self.engine.caps().direct || self.records_bytes.iter().any(|r| r % 512 != 0))
        {
            return bad("--cache direct needs an O_DIRECT engine and records in multiples of 512");
        }
        if self.file_sizes().len() * self.records_bytes.len() > 10_000 {
            return bad("the matrix has more than 10000 cells");
        }
        Ok(())
    }
}

/// 4 KiB .. 16 MiB, every power of two (iozone `-a -z`).
pub fn default_records() -> Vec<u64> {
    (12..=24).map(|s| 1u64 << s).collect()
}

/// One cell: a test at one file size and record size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixCell {
    /// The test.
    pub test: String,
    /// File size.
    pub file_bytes: u64,
    /// Record size.
    pub record_bytes: u64,
    /// Bytes per second.
    pub throughput_bytes_per_s: f64,
    /// Measured time in seconds.
    pub elapsed_s: f64,
    /// Median op latency.
    pub lat_p50_ns: u64,
    /// 99th percentile op latency.
    pub lat_p99_ns: u64,
    /// The file exceeds the memory the page cache can use (free RAM, or the cgroup's
    /// `memory.max` when smaller): reads are past the page-cache cliff.
    pub beyond_free_ram: bool,
    /// The file fits in the CPU's largest cache.
    pub fits_cpu_cache: bool,
}

/// Summary of a matrix run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MatrixSummary {
    /// The engine used.
    pub engine: String,
    /// The tests, in order.
    pub tests: Vec<String>,
    /// File sizes (rows).
    pub file_sizes_bytes: Vec<u64>,
    /// Record sizes (columns).
    pub record_sizes_bytes: Vec<u64>,
    /// Free memory at the start.
    pub mem_available_bytes: Option<u64>,
    /// Memory the page cache can use (free RAM or the cgroup's room): the cliff lies beyond.
    #[serde(default)]
    pub memory: MemoryFacts,
    /// Largest CPU cache of core 0.
    pub cpu_cache_bytes: Option<u64>,
    /// Every cell, in run order.
    pub cells: Vec<MatrixCell>,
    /// Wall time of the whole matrix, seconds.
    pub wall_s: f64,
    /// True when Ctrl-C cut the matrix short.
    pub interrupted: bool,
}

/// The report of `nsperf io auto`: cells are in the summary; `intervals` is empty.
pub type MatrixReport = nsperf_core::Report<MatrixConfig, (), MatrixSummary>;

/// The largest cache of CPU 0, from sysfs.
pub fn cpu_cache_bytes() -> Option<u64> {
    let mut best = None;
    for i in 0..8 {
        let p = format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size");
        let Ok(s) = std::fs::read_to_string(&p) else {
            continue;
        };
        if let Ok(b) = Bytes::parse(s.trim()) {
            best = best.max(Some(b.0));
        }
    }
    best
}

/// Runs the matrix.
pub fn run_matrix(cfg: &MatrixConfig) -> Result<MatrixReport, IoError> {
    run_matrix_observed(cfg, &mut |_| {})
}

/// Runs the matrix, calling `on_cell` with each cell as it is measured (for
/// `--json-stream`).
pub fn run_matrix_observed(
    cfg: &MatrixConfig,
    on_cell: &mut dyn FnMut(&MatrixCell),
) -> Result<MatrixReport, IoError> {
    cfg.validate()?;
    let pre = crate::space::preflight(
        &cfg.dir,
        crate::space::Need {
            bytes: cfg.max_file_bytes,
            inodes: 1,
        },
        cfg.space_check,
        cfg.clean_stale,
        cfg.engine == EngineKind::Mmap,
    )?;
    let facts = HostFacts::collect();
    let (engine, fallback) = resolve_engine(cfg.engine, Uring::probe);
    let mem = facts.mem_available_bytes;
    let memory = MemoryFacts::read(mem);
    let l3 = cpu_cache_bytes();
    let mut rep = MatrixReport::new(
        nsperf_core::report::Command::Io,
        cfg.clone(),
        MatrixSummary::default(),
    );
    rep.hosts.push(HostRecord {
        role: "local".into(),
        facts,
    });
    let t0 = Instant::now();
    let mut s = MatrixSummary {
        engine: engine.to_string(),
        tests: cfg.tests.iter().map(|t| t.to_string()).collect(),
        file_sizes_bytes: cfg.file_sizes(),
        record_sizes_bytes: cfg.records_bytes.clone(),
        mem_available_bytes: mem,
        memory,
        cpu_cache_bytes: l3,
        ..Default::default()
    };
    let depth = if engine.caps().queued {
        cfg.iodepth.max(1) as usize
    } else {
        1
    };
    let max_rec = cfg.records_bytes.iter().copied().max().unwrap_or(4096) as usize;
    let mut pool = BufferPool::new(max_rec, depth, cfg.seed);
    if cfg.cache == CacheMode::RemoteWarm {
        cache::require_network_fs(&cfg.dir)?;
    }
    let mut guard = CreatedFiles::new(&cfg.dir)?;
    let r = match engine {
        EngineKind::Psync => cells(
            cfg,
            &mut guard,
            &mut pool,
            &mut Psync::new(),
            &mut s,
            on_cell,
        ),
        EngineKind::Uring => {
            let mut e = Uring::new(depth).map_err(|e| IoError::Unsupported(e.to_string()))?;
            cells(cfg, &mut guard, &mut pool, &mut e, &mut s, on_cell)
        }
        EngineKind::Mmap => cells(
            cfg,
            &mut guard,
            &mut pool,
            &mut Mmap::new(),
            &mut s,
            on_cell,
        ),
        EngineKind::Null => cells(
            cfg,
            &mut guard,
            &mut pool,
            &mut Null::new(),
            &mut s,
            on_cell,
        ),
        EngineKind::Nfs | EngineKind::Smb => Err(IoError::Config(
            "io auto works on local directories and mounts; an nfs:// or smb:// target takes io run".into(),
        )),
    };
    drop(guard);
    r?;
    s.wall_s = t0.elapsed().as_secs_f64();
    rep.duration_ns = t0.elapsed().as_nanos() as u64;
    if let Some(why) = fallback {
        rep.findings
            .push(Finding::new("engine_fallback", Severity::Warning, why));
    }
    let rf = crate::findings::RunFacts {
        stale: pre.stale,
        ..Default::default()
    };
    rep.findings.extend(crate::findings::stale_findings(&rf));
    rep.findings.extend(matrix_findings(&s));
    rep.summary = s;
    Ok(rep)
}

fn cells<E: IoEngine>(
    cfg: &MatrixConfig,
    guard: &mut CreatedFiles,
    pool: &mut BufferPool,
    engine: &mut E,
    s: &mut MatrixSummary,
    on_cell: &mut dyn FnMut(&MatrixCell),
) -> Result<(), IoError> {
    let full_size = engine.caps().needs_full_size;
    for &file in &s.file_sizes_bytes.clone() {
        for &rec in &cfg.records_bytes {
            if rec > file {
                continue;
            }
            if nsperf_core::signal::interrupted() {
                s.interrupted = true;
                return Ok(());
            }
            let blocks = file / rec;
            let len = blocks * rec;
            let (f, path) = guard.create("auto")?;
            let mut file_h = f;
            let mut written = false;
            if full_size {
                // SAFETY: ftruncate on our own new file.
                unsafe { libc::ftruncate(file_h.as_raw_fd(), len as libc::off_t) };
            }
            for &test in &cfg.tests {
                if !written && test != Workload::SeqWrite {
                    crate::prepare::layout(file_h.as_raw_fd(), len, &path, None)?;
                }
                written = true;
                if !test.writes() {
                    match cfg.cache {
                        // remote-warm (a network mount): the server read it before, the
                        // client's pages are dropped.
                        CacheMode::Cold | CacheMode::Direct | CacheMode::RemoteWarm => {
                            cache::evict_file(file_h.as_raw_fd(), &path)?
                        }
                        // iozone's default: the file is in the page cache from the
                        // tests before (reread is the second read of a warm file).
                        CacheMode::Warm => {}
                    }
                }
                let direct = cfg.cache == CacheMode::Direct;
                let fd = if direct {
                    reopen(&path, libc::O_DIRECT)?
                } else {
                    -1
                };
                let plan = JobPlan {
                    id: 0,
                    fd: if direct { fd } else { file_h.as_raw_fd() },
                    file_len: len,
                    stream: OpStream::new(test, 0, rec, blocks, 17, 0, cfg.seed),
                    bs: rec as usize,
                    depth: pool.count(),
                    ops: blocks,
                    fsync: if test.writes() {
                        cfg.fsync
                    } else {
                        FsyncMode::None
                    },
                    rate: Default::default(),
                    verify_seed: None,
                };
                let start = Instant::now();
                let clock = JobClock::at(start, Duration::from_secs(3600), None);
                let r = run_job(engine, pool, plan, clock, None);
                let mut end = Instant::now();
                if direct {
                    // SAFETY: closing the descriptor opened above.
                    unsafe { libc::close(fd) };
                }
                let o = r.map_err(|e| IoError::os(e.what, &path, e.source))?;
                if cfg.include_close && test.writes() {
                    // iozone -c: close (and reopen for the next test) is timed.
                    drop(file_h);
                    file_h = reopen_file(&path)?;
                    end = Instant::now();
                }
                let el = end.duration_since(start).as_secs_f64().max(1e-9);
                let l = o.hist().summary();
                s.cells.push(MatrixCell {
                    test: test.to_string(),
                    file_bytes: len,
                    record_bytes: rec,
                    throughput_bytes_per_s: (o.read_bytes + o.write_bytes) as f64 / el,
                    elapsed_s: el,
                    lat_p50_ns: l.p50_ns,
                    lat_p99_ns: l.p99_ns,
                    beyond_free_ram: s.memory.cache_usable_bytes.is_some_and(|m| len > m),
                    fits_cpu_cache: s.cpu_cache_bytes.is_some_and(|c| len <= c),
                });
                if let Some(c) = s.cells.last() {
                    on_cell(c);
                }
                if o.interrupted {
                    s.interrupted = true;
                    guard.remove(&path);
                    return Ok(());
                }
            }
            drop(file_h);
            guard.remove(&path);
        }
    }
    Ok(())
}

fn reopen(path: &std::path::Path, extra: i32) -> Result<i32, IoError> {
    let c = cstr(path);
    // SAFETY: reopening our own file, no O_CREAT/O_TRUNC.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC | extra) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) && extra & libc::O_DIRECT != 0 {
            return Err(IoError::Unsupported(format!(
                "the file system of {} refuses O_DIRECT; use --cache cold instead",
                path.display()
            )));
        }
        return Err(IoError::os("open", path, e));
    }
    Ok(fd)
}

fn reopen_file(path: &std::path::Path) -> Result<std::fs::File, IoError> {
    use std::os::fd::FromRawFd;
    let fd = reopen(path, 0)?;
    // SAFETY: fresh descriptor we own.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_validation() {
        let mut c = MatrixConfig::new("/tmp".into());
        c.min_file_bytes = 64 << 10;
        c.max_file_bytes = 1 << 20;
        assert_eq!(c.file_sizes(), vec![65536, 131072, 262144, 524288, 1048576]);
        assert_eq!(default_records().len(), 13);
        assert!(c.validate().is_ok());
        c.tests = vec![Workload::Meta];
        assert!(c.validate().is_err());
    }
}
