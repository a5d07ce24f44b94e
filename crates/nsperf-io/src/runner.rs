//! `nsperf io run` for record workloads: prepares the files (layout, cache state), starts one
//! thread per job on the chosen engine, and turns the jobs' counters into a report.
//!
//! Order of a run: validate → name (or `--clean`) stale files, check free space → create or
//! open files → lay them out (unmeasured) → set the cache state (warm pre-read, cold
//! eviction, or O_DIRECT reopen) → all jobs start together behind a barrier → ramp
//! (unmeasured) → measured pass(es) → final fsync / close if asked → `--verify` read-back →
//! files removed.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Barrier;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nsperf_core::host::HostFacts;
use nsperf_core::report::HostRecord;

use crate::aggregate::{aggregate, fill_cpu};
use crate::buffer::BufferPool;
use crate::cache;
use crate::config::{CacheMode, RunConfig};
use crate::engine::{EngineKind, IoEngine, Mmap, Null, Psync, Uring};
use crate::error::IoError;
use crate::findings::{RunFacts, findings};
use crate::job::{JobClock, JobOutcome, JobPlan, LatencyBuckets, LiveJob, run_job};
use crate::prepare::{RunFile, layout, prepare_cache, verify_readback};
use crate::result::{IoReport, VerifySummary};
use crate::space::{Need, Preflight, preflight};
use crate::target::{CreatedFiles, Target, open_device};
use crate::verify::Tally;
use crate::workload::Workload;

/// Decides the engine actually used: io_uring falls back to psync when the kernel refuses it,
/// with the reason.
pub fn resolve_engine(
    asked: EngineKind,
    probe: impl FnOnce() -> io::Result<()>,
) -> (EngineKind, Option<String>) {
    match asked {
        EngineKind::Uring => match probe() {
            Ok(()) => (EngineKind::Uring, None),
            Err(e) => (
                EngineKind::Psync,
                Some(format!(
                    "io_uring is not available here ({e}; see sysctl kernel.io_uring_disabled): fell back to psync, one op at a time"
                )),
            ),
        },
        k => (k, None),
    }
}

/// Who watches a running pass (see [`run_observed`]).
pub struct Observer<'a> {
    /// Called on the calling thread once per interval.
    pub sample: &'a mut dyn FnMut(&Progress),
    /// Have the jobs publish each op's latency too ([`JobProgress::read_latency`]); without
    /// it those stay empty and the op loop does not touch them.
    pub latency: bool,
    /// Called once on the calling thread when a record workload is set up (files created
    /// and laid out, the cache state set, every job's connection or engine open) and every
    /// job waits at its start: the jobs start when it returns. A start barrier across hosts
    /// holds here, so setup times do not skew the measured starts. Returning false starts
    /// nothing: the run ends at once as interrupted.
    pub ready: Option<&'a mut dyn FnMut() -> bool>,
}

impl std::fmt::Debug for Observer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("latency", &self.latency)
            .field("ready", &self.ready.is_some())
            .finish_non_exhaustive()
    }
}

/// One job's live totals in a [`Progress`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JobProgress {
    /// Measured bytes read so far.
    pub read_bytes: u64,
    /// Measured bytes written so far.
    pub write_bytes: u64,
    /// Measured read ops so far.
    pub read_ops: u64,
    /// Measured write ops so far.
    pub write_ops: u64,
    /// Latency of the measured reads so far (empty unless [`Observer::latency`]).
    pub read_latency: LatencyBuckets,
    /// Latency of the measured writes so far (empty unless [`Observer::latency`]).
    pub write_latency: LatencyBuckets,
}

impl JobProgress {
    fn load(l: &LiveJob) -> Self {
        let ops = l.ops.load(Ordering::Relaxed);
        let read_ops = l.read_ops.load(Ordering::Relaxed);
        JobProgress {
            read_bytes: l.read_bytes.load(Ordering::Relaxed),
            write_bytes: l.write_bytes.load(Ordering::Relaxed),
            read_ops,
            write_ops: ops.saturating_sub(read_ops),
            read_latency: l.latency[0].load(),
            write_latency: l.latency[1].load(),
        }
    }
}

/// A live view of a running pass, given to the observer of [`run_observed`] once per
/// interval (sampled from the jobs' counters; the report's intervals are exact).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Seconds since measuring started (negative during the ramp).
    pub elapsed_s: f64,
    /// When the jobs began, on the same scale (minus the ramp time; 0 without a ramp).
    pub begin_s: f64,
    /// Measured bytes read so far, all jobs.
    pub read_bytes: u64,
    /// Measured bytes written so far, all jobs.
    pub write_bytes: u64,
    /// Measured ops so far, all jobs.
    pub ops: u64,
    /// Ops of a size-bound pass, all jobs (`None` when time-bound).
    pub total_ops: Option<u64>,
    /// Length of the measured part when it is time-limited.
    pub total_s: Option<f64>,
    /// Each job's totals, by job number.
    pub jobs: Vec<JobProgress>,
}

/// Runs one workload and returns its report. Created files are removed before returning.
pub fn run(cfg: &RunConfig) -> Result<IoReport, IoError> {
    run_observed(cfg, None)
}

/// [`run`], calling `observer` on the calling thread once per interval while the record
/// workloads run.
pub fn run_observed(cfg: &RunConfig, observer: Option<Observer<'_>>) -> Result<IoReport, IoError> {
    cfg.validate()?;
    if cfg.target.is_remote() {
        return crate::remote::run(cfg, observer);
    }
    let pre = match &cfg.target {
        Target::Dir { path } => preflight(
            path,
            need(cfg),
            cfg.space_check,
            cfg.clean_stale,
            cfg.engine == EngineKind::Mmap,
        )?,
        Target::Device { .. } | Target::Nfs { .. } | Target::Smb { .. } => Preflight::default(),
    };
    match cfg.workload {
        w if w.is_block() => run_block(cfg, pre, observer),
        _ => crate::suite::run_special(cfg, pre),
    }
}

/// What a run creates in its directory.
pub fn need(cfg: &RunConfig) -> Need {
    match cfg.workload {
        Workload::Meta => Need {
            bytes: cfg.meta_files as u64 * cfg.meta_file_bytes,
            inodes: cfg.meta_files as u64 + 1,
        },
        Workload::CharWrite | Workload::CharRead => Need {
            bytes: cfg.size_bytes,
            inodes: 1,
        },
        _ => {
            let files = if cfg.shared_file { 1 } else { cfg.jobs as u64 };
            Need {
                bytes: cfg.blocks() * cfg.bs_bytes * cfg.jobs as u64,
                inodes: files,
            }
        }
    }
}

/// The facts every io report records: host, memory, the target's file system.
pub(crate) fn context(
    cfg: &RunConfig,
) -> (
    HostFacts,
    crate::memory::MemoryFacts,
    Option<crate::fsinfo::FsInfo>,
) {
    let facts = HostFacts::collect();
    let mem = crate::memory::MemoryFacts::read(facts.mem_available_bytes);
    let fs = match &cfg.target {
        Target::Dir { path } => crate::fsinfo::of_path(path),
        Target::Device { .. } | Target::Nfs { .. } | Target::Smb { .. } => None,
    };
    (facts, mem, fs)
}

fn run_block(
    cfg: &RunConfig,
    pre: Preflight,
    observer: Option<Observer<'_>>,
) -> Result<IoReport, IoError> {
    if cfg.target.is_remote() {
        return crate::remote::run(cfg, observer);
    }
    let (facts, memory, target_fs) = context(cfg);
    let (engine, fallback) = resolve_engine(cfg.engine, Uring::probe);
    let blocks = cfg.blocks();
    let is_device = matches!(cfg.target, Target::Device { .. });
    let place = Placement::of(cfg, is_device);

    // Files: created in the directory (removed by `_guard` on every exit path) or the device.
    let (_guard, mut files) = open_files(cfg, &place)?;
    if cfg.cache == CacheMode::RemoteWarm {
        if let Target::Dir { path } = &cfg.target {
            cache::require_network_fs(path)?;
        }
    }
    let laid_out = cfg.workload.needs_layout() && !is_device;
    size_files(cfg, engine, &files, laid_out, is_device)?;
    prepare_cache(cfg, &mut files)?;
    let resident = if is_device {
        None
    } else {
        resident_pct(&files)
    };

    // Measured pass.
    let plans = job_plans(cfg, &files, &place, cfg.depth(engine));
    let report_start = Instant::now();
    let started_unix_ns = nsperf_core::clock::unix_time_ns();
    let monitor = crate::monitor::CpuMonitor::start(
        report_start + cfg.ramp.unwrap_or_default(),
        cfg.interval,
    );
    let results = run_engine(cfg, engine, plans, observer)?;
    let cpu = monitor.stop();
    let mut outcomes = Vec::with_capacity(results.len());
    for (j, r) in results.into_iter().enumerate() {
        let fi = place.of_job(j as u32).0;
        match r {
            Ok(o) => outcomes.push(o),
            Err((what, source)) => {
                return Err(IoError::os(what, &files[fi].path, source));
            }
        }
    }
    let file_bytes: u64 = files.iter().map(|f| f.len).sum();
    let close_ns = if cfg.include_close && cfg.verify.is_none() {
        let t = Instant::now();
        files.clear();
        t.elapsed().as_nanos() as u64
    } else {
        0
    };
    let verify = match cfg.verify {
        Some(_) => Some(read_back(cfg, &files, &outcomes, laid_out, |j| {
            place.of_job(j)
        })?),
        None => None,
    };
    drop(files);

    let mut rep = IoReport::new("io", cfg.clone(), Default::default());
    rep.started_unix_ns = started_unix_ns;
    rep.measured_unix_ns = measured_unix_ns(&outcomes, (report_start, started_unix_ns));
    rep.hosts.push(HostRecord {
        role: "local".into(),
        facts,
    });
    let (intervals, mut summary) = aggregate(cfg, &outcomes, close_ns);
    summary.engine = engine.name().into();
    summary.cache_resident_pct = resident;
    summary.passes = if blocks > 0 {
        summary.ops as f64 / (blocks * cfg.jobs as u64) as f64
    } else {
        0.0
    };
    summary.verify = verify;
    summary.memory = memory;
    fill_cpu(&mut summary, &cpu);
    rep.duration_ns = (summary.elapsed_s * 1e9) as u64;
    rep.intervals = intervals;
    let rf = RunFacts {
        file_bytes,
        engine_fallback: fallback,
        device: is_device,
        fs_after: target_fs
            .as_ref()
            .and_then(|_| crate::fsinfo::of_path(cfg.target.path())),
        stale: pre.stale,
    };
    summary.target_fs = target_fs;
    rep.findings = findings(cfg, &summary, &cpu, &rf);
    rep.cpu = cpu;
    rep.summary = summary;
    Ok(rep)
}

/// Where each job's blocks lie: in one shared file (or the device), job `j` from `j ×
/// region`, or each job at the start of a file of its own.
pub(crate) struct Placement {
    /// How many files (1: shared by every job).
    pub files: usize,
    /// One job's bytes (`blocks × bs`).
    region: u64,
    /// Each file's length.
    pub per_file: u64,
}

impl Placement {
    pub(crate) fn of(cfg: &RunConfig, is_device: bool) -> Self {
        let region = cfg.blocks() * cfg.bs_bytes;
        let files = if cfg.shared_file || is_device {
            1
        } else {
            cfg.jobs as usize
        };
        let per_file = if files == 1 {
            region * cfg.jobs as u64
        } else {
            region
        };
        Placement {
            files,
            region,
            per_file,
        }
    }

    /// Job `j`'s file index and its first byte there.
    pub(crate) fn of_job(&self, j: u32) -> (usize, u64) {
        if self.files == 1 {
            (0, j as u64 * self.region)
        } else {
            (j as usize, 0)
        }
    }
}

/// The run's files: created in the directory (removed when the guard drops), or the device
/// opened (refused when the run does not fit it).
fn open_files(
    cfg: &RunConfig,
    place: &Placement,
) -> Result<(Option<CreatedFiles>, Vec<RunFile>), IoError> {
    let mut files = Vec::with_capacity(place.files);
    match &cfg.target {
        Target::Dir { path } => {
            let mut g = CreatedFiles::new(path)?;
            for _ in 0..place.files {
                let (file, p) = g.create(cfg.workload.name())?;
                files.push(RunFile {
                    file,
                    path: p,
                    len: place.per_file,
                });
            }
            Ok((Some(g), files))
        }
        Target::Device { path, destructive } => {
            let (file, size) = open_device(path, *destructive)?;
            if place.per_file > size {
                return Err(IoError::Config(format!(
                    "--size × --jobs ({} bytes) exceeds {} ({size} bytes)",
                    place.per_file,
                    path.display()
                )));
            }
            files.push(RunFile {
                file,
                path: path.clone(),
                len: place.per_file,
            });
            Ok((None, files))
        }
        Target::Nfs { .. } | Target::Smb { .. } => Err(IoError::Config(format!(
            "{} is a network target: the remote runner's",
            cfg.target
        ))),
    }
}

/// Lays the files out (unmeasured, stamped for `--verify`) when the workload reads them, or
/// gives them their size when the engine maps them.
fn size_files(
    cfg: &RunConfig,
    engine: EngineKind,
    files: &[RunFile],
    laid_out: bool,
    is_device: bool,
) -> Result<(), IoError> {
    let stamp = cfg.verify.map(|_| (cfg.bs_bytes, cfg.seed));
    for f in files {
        if laid_out {
            layout(f.file.as_raw_fd(), f.len, &f.path, stamp)?;
        } else if engine.caps().needs_full_size && !is_device {
            // A mapping cannot grow the file: give it its size first.
            // SAFETY: ftruncate on our own new file.
            if unsafe { libc::ftruncate(f.file.as_raw_fd(), f.len as libc::off_t) } != 0 {
                return Err(IoError::last_os("ftruncate", &f.path));
            }
        }
    }
    Ok(())
}

/// The share of the files' pages in the page cache, %, before the pass.
fn resident_pct(files: &[RunFile]) -> Option<f64> {
    let mut r = (0u64, 0u64);
    for f in files {
        if let Some((a, b)) = cache::resident_pages(f.file.as_raw_fd(), f.len) {
            r = (r.0 + a, r.1 + b);
        }
    }
    (r.1 > 0).then(|| 100.0 * r.0 as f64 / r.1 as f64)
}

/// Each job's plan: its file, its stream of operations, its depth and limits.
fn job_plans(cfg: &RunConfig, files: &[RunFile], place: &Placement, depth: usize) -> Vec<JobPlan> {
    (0..cfg.jobs)
        .map(|j| {
            let (fi, base) = place.of_job(j);
            let f = &files[fi];
            JobPlan::of(cfg, j, f.file.as_raw_fd(), f.len, base, depth)
        })
        .collect()
}

/// The measured pass of every job through a local engine.
fn run_engine(
    cfg: &RunConfig,
    engine: EngineKind,
    plans: Vec<JobPlan>,
    observer: Option<Observer<'_>>,
) -> Result<Vec<JobResult>, IoError> {
    Ok(match engine {
        EngineKind::Psync => run_jobs(cfg, plans, observer, |_: &JobPlan| Ok(Psync::new())),
        EngineKind::Uring => run_jobs(cfg, plans, observer, |_: &JobPlan| {
            Uring::new(cfg.iodepth as usize)
        }),
        EngineKind::Mmap => run_jobs(cfg, plans, observer, |_: &JobPlan| Ok(Mmap::new())),
        EngineKind::Null => run_jobs(cfg, plans, observer, |_: &JobPlan| Ok(Null::new())),
        EngineKind::Nfs | EngineKind::Smb => {
            return Err(IoError::Config(format!(
                "--engine {engine} needs an {engine}:// target"
            )));
        }
    })
}

/// The `--verify` checks of the pass plus a read-back of every block the run wrote.
fn read_back(
    cfg: &RunConfig,
    files: &[RunFile],
    outs: &[JobOutcome],
    laid_out: bool,
    placement: impl Fn(u32) -> (usize, u64),
) -> Result<VerifySummary, IoError> {
    let mut t = Tally::default();
    let blocks = cfg.blocks();
    for (j, o) in outs.iter().enumerate() {
        t.merge(&o.verify);
        if !cfg.workload.writes() {
            continue;
        }
        // Blocks that hold a stamp: all of a laid-out file; else what the ops reached.
        let written = if laid_out || o.all_ops >= blocks {
            blocks
        } else {
            match cfg.workload {
                Workload::SeqWrite | Workload::Rewrite => o.all_ops,
                Workload::RecRewrite => o.all_ops.min(1),
                // Random order cut short: the written blocks are not a range; skip.
                _ => 0,
            }
        };
        let (fi, base) = placement(j as u32);
        let f = &files[fi];
        verify_readback(
            f.file.as_raw_fd(),
            &f.path,
            base,
            cfg.bs_bytes,
            written,
            cfg.seed,
            &mut t,
        )?;
    }
    Ok(VerifySummary {
        blocks_checked: t.checked,
        failures: t.failed,
        first_failure_offset: t.first.map(|f| f.0),
        first_failure: t.first.map(|f| f.1),
    })
}

pub(crate) type JobResult = Result<JobOutcome, (&'static str, io::Error)>;

/// When the first job's measured pass began (the zero of the report's intervals), on the
/// wall clock: `reference` is one instant read on both clocks.
pub(crate) fn measured_unix_ns(outs: &[JobOutcome], reference: (Instant, u64)) -> Option<u64> {
    let first = outs.iter().map(|o| o.start).min()?;
    let (at, unix_ns) = reference;
    Some(if first >= at {
        unix_ns + first.duration_since(at).as_nanos() as u64
    } else {
        unix_ns.saturating_sub(at.duration_since(first).as_nanos() as u64)
    })
}

/// One thread per job, each with the engine `make` builds for its plan; all start together
/// behind a barrier, once every engine is built and the observer's `ready` returned. The
/// calling thread samples the jobs' live counters for `observer` once per interval until
/// they end.
pub(crate) fn run_jobs<E: IoEngine, F>(
    cfg: &RunConfig,
    plans: Vec<JobPlan>,
    observer: Option<Observer<'_>>,
    make: F,
) -> Vec<JobResult>
where
    F: Fn(&JobPlan) -> io::Result<E> + Sync,
{
    let mut observer = observer;
    // Every job's engine is built (`ready`), then all start at once (`go`).
    let ready = Barrier::new(plans.len() + 1);
    let barrier = Barrier::new(plans.len() + 1);
    let with_latency = observer.as_ref().is_some_and(|o| o.latency);
    let live: Vec<LiveJob> = plans.iter().map(|_| LiveJob::new(with_latency)).collect();
    let total_ops = (!cfg.time_based).then(|| cfg.blocks() * cfg.jobs as u64);
    let (make, ready, barrier, live_ref) = (&make, &ready, &barrier, &live);
    std::thread::scope(|s| {
        let handles: Vec<_> = plans
            .into_iter()
            .enumerate()
            .map(|(i, plan)| {
                s.spawn(move || -> JobResult {
                    // A private copy of the descriptor table: the kernel then looks the
                    // file up without reference counting on every system call (as in a
                    // single-threaded process), instead of sharing the table with the
                    // monitor and main threads.
                    // SAFETY: unshare(CLONE_FILES) only affects this thread's table; the
                    // job's descriptors are open already and stay valid in the copy.
                    unsafe { libc::unshare(libc::CLONE_FILES) };
                    let engine = make(&plan);
                    let mut pool = BufferPool::new(plan.bs, plan.depth, cfg.seed ^ plan.id as u64);
                    ready.wait();
                    barrier.wait();
                    let mut engine = engine.map_err(|e| ("engine setup", e))?;
                    let begin = Instant::now();
                    let measure = begin + cfg.ramp.unwrap_or_default();
                    let clock = JobClock {
                        begin,
                        measure,
                        interval: cfg.interval,
                        deadline: cfg.time.map(|t| measure + t),
                    };
                    run_job(&mut engine, &mut pool, plan, clock, Some(&live_ref[i]))
                        .map_err(|e| (e.what, e.source))
                })
            })
            .collect();
        ready.wait();
        if let Some(hold) = observer.as_mut().and_then(|o| o.ready.take())
            && !hold()
        {
            nsperf_core::signal::request_stop();
        }
        barrier.wait();
        if let Some(observe) = observer {
            let measure = Instant::now() + cfg.ramp.unwrap_or_default();
            watch(&handles, live_ref, measure, cfg, total_ops, observe.sample);
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(("job", io::Error::other("job thread panicked"))))
            })
            .collect()
    })
}

/// Calls `observe` on the interval grid from `measure` (and once per interval of the ramp)
/// until every job has ended.
fn watch<T>(
    handles: &[std::thread::ScopedJoinHandle<'_, T>],
    live: &[LiveJob],
    measure: Instant,
    cfg: &RunConfig,
    total_ops: Option<u64>,
    observe: &mut dyn FnMut(&Progress),
) {
    // Ticks on the measuring grid, extended back over the ramp.
    let ramp = cfg.ramp.unwrap_or_default();
    let begin = measure - ramp;
    let k = (ramp.as_nanos() / cfg.interval.as_nanos().max(1)) as u32;
    let mut next = measure - cfg.interval * k;
    if next <= begin {
        next += cfg.interval;
    }
    let sample = |now: Instant| {
        let sum = |f: fn(&LiveJob) -> u64| live.iter().map(f).sum::<u64>();
        Progress {
            elapsed_s: if now >= measure {
                now.duration_since(measure).as_secs_f64()
            } else {
                -measure.duration_since(now).as_secs_f64()
            },
            begin_s: -ramp.as_secs_f64(),
            read_bytes: sum(|l| l.read_bytes.load(Ordering::Relaxed)),
            write_bytes: sum(|l| l.write_bytes.load(Ordering::Relaxed)),
            ops: sum(|l| l.ops.load(Ordering::Relaxed)),
            total_ops,
            total_s: cfg.time.map(|t| t.as_secs_f64()),
            jobs: live.iter().map(JobProgress::load).collect(),
        }
    };
    let mut last: Option<(u64, u64, u64)> = None;
    while !handles.iter().all(|h| h.is_finished()) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
            continue;
        }
        let p = sample(now);
        observe(&p);
        last = Some((p.ops, p.read_bytes, p.write_bytes));
        next += cfg.interval;
    }
    // The last, partial interval, so the samples add up to the whole run.
    let p = sample(Instant::now());
    if last.is_none_or(|l| l != (p.ops, p.read_bytes, p.write_bytes)) {
        observe(&p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uring_falls_back_with_a_reason() {
        let (k, why) = resolve_engine(EngineKind::Uring, || {
            Err(io::Error::from_raw_os_error(libc::EPERM))
        });
        assert_eq!(k, EngineKind::Psync);
        assert!(why.unwrap().contains("fell back to psync"));
        assert_eq!(
            resolve_engine(EngineKind::Uring, || Ok(())).0,
            EngineKind::Uring
        );
        assert_eq!(
            resolve_engine(EngineKind::Mmap, || unreachable!()).0,
            EngineKind::Mmap
        );
    }
}
