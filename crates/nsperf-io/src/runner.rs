//! `nsperf io run` for record workloads: prepares the files (layout, cache state), starts one
//! thread per job on the chosen engine, and turns the jobs' counters into a report.
//!
//! Order of a run: validate → create or open files → lay them out (unmeasured) → set the cache
//! state (warm pre-read, cold eviction, or O_DIRECT reopen) → all jobs start together behind
//! a barrier → measured pass(es) → final fsync / close if asked → files removed.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::Instant;

use nsperf_core::host::HostFacts;
use nsperf_core::report::HostRecord;
use nsperf_core::stats::LatencyHistogram;

use crate::buffer::BufferPool;
use crate::cache;
use crate::config::{CacheMode, RunConfig};
use crate::engine::{EngineKind, IoEngine, Mmap, Null, Psync, Uring};
use crate::error::IoError;
use crate::findings::{RunFacts, findings};
use crate::job::{JobOutcome, JobPlan, run_job};
use crate::result::{IoInterval, IoReport, IoSummary};
use crate::target::{CreatedFiles, Target, cstr, open_device};
use crate::workload::{OpStream, Workload};

/// One file of the run (a created file, or the device).
#[derive(Debug)]
pub(crate) struct RunFile {
    pub file: File,
    pub path: PathBuf,
    pub len: u64,
}

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

/// Runs one workload and returns its report. Created files are removed before returning.
pub fn run(cfg: &RunConfig) -> Result<IoReport, IoError> {
    cfg.validate()?;
    match cfg.workload {
        w if w.is_block() => run_block(cfg),
        _ => crate::suite::run_special(cfg),
    }
}

fn run_block(cfg: &RunConfig) -> Result<IoReport, IoError> {
    let facts = HostFacts::collect();
    let (engine, fallback) = resolve_engine(cfg.engine, Uring::probe);
    let bs = cfg.bs_bytes;
    let blocks = cfg.blocks();
    let region = blocks * bs;
    let nfiles = if cfg.shared_file || matches!(cfg.target, Target::Device { .. }) {
        1
    } else {
        cfg.jobs as usize
    };
    let per_file = if nfiles == 1 {
        region * cfg.jobs as u64
    } else {
        region
    };

    // Files: created in the directory (removed by `_guard` on every exit path) or the device.
    let mut _guard: Option<CreatedFiles> = None;
    let mut files: Vec<RunFile> = Vec::new();
    match &cfg.target {
        Target::Dir { path } => {
            let mut g = CreatedFiles::new(path)?;
            for _ in 0..nfiles {
                let (file, p) = g.create(cfg.workload.name())?;
                files.push(RunFile {
                    file,
                    path: p,
                    len: per_file,
                });
            }
            _guard = Some(g);
        }
        Target::Device { path, destructive } => {
            let (file, size) = open_device(path, *destructive)?;
            if per_file > size {
                return Err(IoError::Config(format!(
                    "--size × --jobs ({per_file} bytes) exceeds {} ({size} bytes)",
                    path.display()
                )));
            }
            files.push(RunFile {
                file,
                path: path.clone(),
                len: per_file,
            });
        }
    }
    let is_device = matches!(cfg.target, Target::Device { .. });
    for f in &files {
        if cfg.workload.needs_layout() && !is_device {
            layout(f.file.as_raw_fd(), f.len, &f.path)?;
        } else if engine.caps().needs_full_size && !is_device {
            // A mapping cannot grow the file: give it its size first.
            // SAFETY: ftruncate on our own new file.
            if unsafe { libc::ftruncate(f.file.as_raw_fd(), f.len as libc::off_t) } != 0 {
                return Err(IoError::last_os("ftruncate", &f.path));
            }
        }
    }
    prepare_cache(cfg, &mut files)?;
    let resident = if is_device {
        None
    } else {
        let mut r = (0u64, 0u64);
        for f in &files {
            if let Some((a, b)) = cache::resident_pages(f.file.as_raw_fd(), f.len) {
                r = (r.0 + a, r.1 + b);
            }
        }
        (r.1 > 0).then(|| 100.0 * r.0 as f64 / r.1 as f64)
    };

    // Measured pass.
    let plans: Vec<JobPlan> = (0..cfg.jobs)
        .map(|j| {
            let (fi, base) = if nfiles == 1 {
                (0, j as u64 * region)
            } else {
                (j as usize, 0)
            };
            JobPlan {
                id: j,
                fd: files[fi].file.as_raw_fd(),
                file_len: files[fi].len,
                stream: OpStream::new(
                    cfg.workload,
                    base,
                    bs,
                    blocks,
                    (cfg.stride_bytes / bs).max(1),
                    cfg.rwmix_read_pct,
                    cfg.seed.wrapping_add(j as u64 * 7919),
                ),
                bs: bs as usize,
                depth: if engine.caps().queued {
                    cfg.iodepth as usize
                } else {
                    1
                },
                ops: if cfg.time.is_some() { u64::MAX } else { blocks },
                fsync: cfg.fsync,
            }
        })
        .collect();
    let report_start = Instant::now();
    let started_unix_ns = nsperf_core::clock::unix_time_ns();
    let monitor = crate::monitor::CpuMonitor::start(report_start, cfg.interval);
    let results = match engine {
        EngineKind::Psync => run_jobs(cfg, plans, || Ok(Psync::new())),
        EngineKind::Uring => run_jobs(cfg, plans, || Uring::new(cfg.iodepth as usize)),
        EngineKind::Mmap => run_jobs(cfg, plans, || Ok(Mmap::new())),
        EngineKind::Null => run_jobs(cfg, plans, || Ok(Null::new())),
    };
    let cpu = monitor.stop();
    let mut outcomes = Vec::with_capacity(results.len());
    for (j, r) in results.into_iter().enumerate() {
        let fi = if nfiles == 1 { 0 } else { j };
        match r {
            Ok(o) => outcomes.push(o),
            Err((what, source)) => {
                return Err(IoError::os(what, &files[fi].path, source));
            }
        }
    }
    let file_bytes: u64 = files.iter().map(|f| f.len).sum();
    let close_ns = if cfg.include_close {
        let t = Instant::now();
        files.clear();
        t.elapsed().as_nanos() as u64
    } else {
        0
    };
    drop(files);

    let mut rep = IoReport::new("io", cfg.clone(), IoSummary::default());
    rep.started_unix_ns = started_unix_ns;
    let mem = facts.mem_available_bytes;
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
    fill_cpu(&mut summary, &cpu);
    rep.duration_ns = (summary.elapsed_s * 1e9) as u64;
    rep.intervals = intervals;
    let rf = RunFacts {
        file_bytes,
        mem_available_bytes: mem,
        engine_fallback: fallback,
        device: is_device,
    };
    rep.findings = findings(cfg, &summary, &cpu, &rf);
    rep.cpu = cpu;
    rep.summary = summary;
    Ok(rep)
}

/// Fills the CPU figures of the summary from the interval samples.
pub(crate) fn fill_cpu(s: &mut IoSummary, cpu: &[nsperf_core::report::CpuInterval]) {
    let total: f64 = cpu.iter().map(|c| c.length_s).sum();
    if total <= 0.0 {
        return;
    }
    let w = |f: &dyn Fn(&nsperf_core::report::CpuInterval) -> f64| {
        cpu.iter().map(|c| f(c) * c.length_s).sum::<f64>() / total
    };
    s.cpu_process_pct = w(&|c| c.cpu.process_pct);
    s.cpu_busiest_core_pct = w(&|c| c.cpu.busiest().map(|b| b.busy_pct).unwrap_or(0.0));
}

type JobResult = Result<JobOutcome, (&'static str, io::Error)>;

/// One thread per job; all start together behind a barrier.
fn run_jobs<E: IoEngine, F>(cfg: &RunConfig, plans: Vec<JobPlan>, make: F) -> Vec<JobResult>
where
    F: Fn() -> io::Result<E> + Sync,
{
    let barrier = Barrier::new(plans.len());
    let make = &make;
    let barrier = &barrier;
    std::thread::scope(|s| {
        let handles: Vec<_> = plans
            .into_iter()
            .map(|plan| {
                s.spawn(move || -> JobResult {
                    // A private copy of the descriptor table: the kernel then looks the
                    // file up without reference counting on every system call (as in a
                    // single-threaded process), instead of sharing the table with the
                    // monitor and main threads.
                    // SAFETY: unshare(CLONE_FILES) only affects this thread's table; the
                    // job's descriptors are open already and stay valid in the copy.
                    unsafe { libc::unshare(libc::CLONE_FILES) };
                    let engine = make();
                    let mut pool = BufferPool::new(plan.bs, plan.depth, cfg.seed ^ plan.id as u64);
                    barrier.wait();
                    let mut engine = engine.map_err(|e| ("engine setup", e))?;
                    let start = Instant::now();
                    let deadline = cfg.time.map(|t| start + t);
                    let interval = cfg.interval;
                    run_job(&mut engine, &mut pool, plan, start, interval, deadline)
                        .map_err(|e| (e.what, e.source))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(("job", io::Error::other("job thread panicked"))))
            })
            .collect()
    })
}

/// Sums the jobs' interval grids and histograms into the report's intervals and summary.
pub(crate) fn aggregate(
    cfg: &RunConfig,
    outs: &[JobOutcome],
    close_ns: u64,
) -> (Vec<IoInterval>, IoSummary) {
    let mut s = IoSummary {
        workload: cfg.workload.name().into(),
        cache: cfg.cache.name().into(),
        close_ns,
        ..Default::default()
    };
    let Some(start) = outs.iter().map(|o| o.start).min() else {
        return (Vec::new(), s);
    };
    let end = outs.iter().map(|o| o.end).max().unwrap_or(start);
    let run_s = end.duration_since(start).as_secs_f64();
    let iv = cfg.interval.as_secs_f64();
    let mut n = outs.iter().map(|o| o.buckets.len()).max().unwrap_or(0);
    // A trailing sliver (the ops in flight at a --time deadline) joins the interval before
    // it, so no interval rate is computed over a few microseconds.
    let merge_tail = n > 1 && run_s - (n - 1) as f64 * iv < 0.25 * iv;
    let folded: Vec<Vec<(u64, u64)>> = outs
        .iter()
        .map(|o| {
            let mut b = o.buckets.clone();
            if merge_tail && b.len() == n {
                let last = b.pop().unwrap_or_default();
                if let Some(prev) = b.last_mut() {
                    prev.0 += last.0;
                    prev.1 += last.1;
                }
            }
            b
        })
        .collect();
    if merge_tail {
        n -= 1;
    }
    let length = |i: usize| {
        let st = i as f64 * iv;
        if i + 1 == n {
            (run_s - st).max(1e-9)
        } else {
            iv
        }
    };
    let mk = |job: Option<u32>, i: usize, bytes: u64, ops: u64| {
        let len = length(i);
        IoInterval {
            job,
            start_s: i as f64 * iv,
            length_s: len,
            bytes,
            ops,
            throughput_bytes_per_s: bytes as f64 / len,
            iops: ops as f64 / len,
        }
    };
    let mut intervals = Vec::with_capacity(n * (1 + outs.len()));
    for i in 0..n {
        let (b, o) = folded
            .iter()
            .filter_map(|x| x.get(i))
            .fold((0, 0), |a, &(b, o)| (a.0 + b, a.1 + o));
        intervals.push(mk(None, i, b, o));
    }
    if outs.len() > 1 {
        for (j, out) in folded.iter().enumerate() {
            for (i, &(b, o)) in out.iter().enumerate() {
                intervals.push(mk(Some(j as u32), i, b, o));
            }
        }
    }
    let mut hist = LatencyHistogram::new();
    for o in outs {
        hist.merge(&o.hist);
        s.read_bytes += o.read_bytes;
        s.write_bytes += o.write_bytes;
        s.ops += o.ops;
        s.fsync_ns = s.fsync_ns.max(o.fsync_ns);
        s.interrupted |= o.interrupted;
    }
    s.bytes = s.read_bytes + s.write_bytes;
    s.elapsed_s = run_s + close_ns as f64 / 1e9;
    if s.elapsed_s > 0.0 {
        s.throughput_bytes_per_s = s.bytes as f64 / s.elapsed_s;
        s.iops = s.ops as f64 / s.elapsed_s;
    }
    // The peak ignores a short trailing partial interval, whose rate is noise.
    s.peak_interval_bytes_per_s = intervals
        .iter()
        .filter(|x| x.job.is_none() && (x.length_s >= iv * 0.5 || n == 1))
        .map(|x| x.throughput_bytes_per_s)
        .fold(0.0, f64::max);
    let l = hist.summary();
    s.lat_count = l.count;
    s.lat_min_ns = l.min_ns;
    s.lat_mean_ns = l.mean_ns;
    s.lat_p50_ns = l.p50_ns;
    s.lat_p90_ns = l.p90_ns;
    s.lat_p99_ns = l.p99_ns;
    s.lat_p999_ns = l.p999_ns;
    s.lat_max_ns = l.max_ns;
    (intervals, s)
}

/// Writes `len` bytes of incompressible data over the file, unmeasured.
pub(crate) fn layout(fd: RawFd, len: u64, path: &Path) -> Result<(), IoError> {
    const CHUNK: usize = 1 << 20;
    let mut pool = BufferPool::new(CHUNK, 1, len ^ 0xA5A5);
    let buf = pool.buf(0, CHUNK);
    let mut off = 0u64;
    while off < len {
        if nsperf_core::signal::interrupted() {
            return Err(IoError::Interrupted);
        }
        let n = (len - off).min(CHUNK as u64) as usize;
        // SAFETY: buf is valid for n <= CHUNK bytes.
        let r = unsafe { libc::pwrite(fd, buf.as_ptr().cast(), n, off as libc::off_t) };
        if r <= 0 {
            return Err(IoError::last_os("write (layout)", path));
        }
        off += r as u64;
    }
    Ok(())
}

/// Reads the whole file once, unmeasured (the warm-up pass).
pub(crate) fn read_through(fd: RawFd, len: u64, path: &Path) -> Result<(), IoError> {
    const CHUNK: usize = 1 << 20;
    let mut pool = BufferPool::new(CHUNK, 1, 1);
    let buf = pool.buf(0, CHUNK);
    let mut off = 0u64;
    while off < len {
        if nsperf_core::signal::interrupted() {
            return Err(IoError::Interrupted);
        }
        let n = (len - off).min(CHUNK as u64) as usize;
        // SAFETY: buf is valid for n bytes.
        let r = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), n, off as libc::off_t) };
        if r < 0 {
            return Err(IoError::last_os("read (warm-up)", path));
        }
        if r == 0 {
            break;
        }
        off += r as u64;
    }
    Ok(())
}

/// Sets the page-cache state of every file for the measured pass.
fn prepare_cache(cfg: &RunConfig, files: &mut [RunFile]) -> Result<(), IoError> {
    let reads = cfg.workload.needs_layout() && cfg.workload != Workload::Rewrite;
    for f in files.iter() {
        let fd = f.file.as_raw_fd();
        if cfg.workload == Workload::Reread {
            if cfg.cache != CacheMode::Warm {
                cache::evict_file(fd, &f.path)?;
            }
            read_through(fd, f.len, &f.path)?;
        } else if cfg.cache == CacheMode::Warm && reads {
            read_through(fd, f.len, &f.path)?;
        }
        if matches!(cfg.cache, CacheMode::Cold | CacheMode::Direct)
            && cfg.workload != Workload::Reread
        {
            cache::evict_file(fd, &f.path)?;
        }
    }
    if cfg.drop_caches {
        cache::drop_all_caches()?;
    }
    if cfg.cache == CacheMode::Direct {
        for f in files.iter_mut() {
            f.file = reopen_direct(&f.path)?;
        }
    }
    Ok(())
}

fn reopen_direct(path: &Path) -> Result<File, IoError> {
    let c = cstr(path);
    // SAFETY: opening an existing file we created (or the device the user named); no
    // O_CREAT, no O_TRUNC.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_DIRECT | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) {
            return Err(IoError::Unsupported(format!(
                "the file system of {} refuses O_DIRECT (--cache direct); use --cache cold instead",
                path.display()
            )));
        }
        return Err(IoError::os("open O_DIRECT", path, e));
    }
    // SAFETY: fresh descriptor we own.
    Ok(unsafe { File::from_raw_fd(fd) })
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
