//! The pass loop every runner shares: one thread per job on its engine, all started together
//! behind a barrier, the calling thread sampling the jobs' live counters for an observer once
//! per interval; where each job's blocks lie, and the facts every report records.

use std::io;
use std::sync::Barrier;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nsperf_core::host::HostFacts;

use crate::buffer::BufferPool;
use crate::config::RunConfig;
use crate::engine::IoEngine;
use crate::job::{JobClock, JobOutcome, JobPlan, run_job};
use crate::live::{LatencyBuckets, LiveJob};
use crate::target::Target;

/// Who watches a running pass (see [`crate::run_observed`]).
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

/// A live view of a running pass, given to the observer of [`crate::run_observed`] once per
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
