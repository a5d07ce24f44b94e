//! Runs a record workload on a local directory or device: prepares the files (layout, cache
//! state), starts one thread per job on the chosen engine, and turns the jobs' counters into a
//! report.
//!
//! Order of a run: validate → name (or `--clean`) stale files, check free space → create or
//! open files → lay them out (unmeasured) → set the cache state (warm pre-read, cold
//! eviction, or O_DIRECT reopen) → all jobs start together behind a barrier → ramp
//! (unmeasured) → measured pass(es) → final fsync / close if asked → `--verify` read-back →
//! files removed.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nsperf_core::report::HostRecord;

use crate::aggregate::{aggregate, fill_cpu};
use crate::cache;
use crate::config::{CacheMode, RunConfig};
use crate::engine::{EngineKind, IoEngine, Mmap, Null, Psync, Uring};
use crate::error::IoError;
use crate::findings::{RunFacts, findings};
use crate::job::{JobOutcome, JobPlan};
use crate::mirror::engine::Mirror;
use crate::mirror::{Replicate, ReplicationFacts};
use crate::pass::{JobResult, Observer, Placement, context, measured_unix_ns, run_jobs};
use crate::prepare::{RunFile, layout, prepare_cache, verify_readback};
use crate::result::{IoReport, VerifySummary};
use crate::space::Preflight;
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

pub(crate) fn run_block(
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
    let mirror = cfg.replicate.as_ref().map(|r| {
        let names = (0..cfg.jobs)
            .map(|j| {
                let p = &files[place.of_job(j).0].path;
                p.file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            })
            .collect();
        MirrorSetup::new(r, names)
    });
    let results = match &mirror {
        Some(m) => run_mirrored(cfg, engine, plans, observer, m),
        None => run_engine(cfg, engine, plans, observer)?,
    };
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

    let mut rep = IoReport::new(
        nsperf_core::report::Command::Io,
        cfg.clone(),
        Default::default(),
    );
    rep.started_unix_ns = started_unix_ns;
    rep.measured_unix_ns = measured_unix_ns(&outcomes, (report_start, started_unix_ns));
    rep.hosts.push(HostRecord {
        role: "local".into(),
        facts,
    });
    let (intervals, mut summary) = aggregate(cfg, &outcomes, close_ns);
    summary.engine = engine.into();
    summary.cache_resident_pct = resident;
    summary.passes = if blocks > 0 {
        summary.ops as f64 / (blocks * cfg.jobs as u64) as f64
    } else {
        0.0
    };
    summary.verify = verify;
    summary.memory = memory;
    summary.replication = mirror.map(|m| {
        let lengths: Vec<f64> = intervals
            .iter()
            .filter(|i| i.job.is_none())
            .map(|i| i.length_s)
            .collect();
        m.facts(&lengths)
    });
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
                let (file, p) = g.create(&cfg.workload.to_string())?;
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

/// A run's mirror: the settings, the peer's name of each job's file, and the facts its jobs
/// add up.
struct MirrorSetup {
    rep: Replicate,
    names: Vec<String>,
    facts: Arc<Mutex<ReplicationFacts>>,
}

impl MirrorSetup {
    fn new(rep: &Replicate, names: Vec<String>) -> Self {
        let facts = ReplicationFacts {
            peer: rep.peer.clone(),
            protocol: Some(rep.protocol),
            max_in_flight_bytes: rep.max_in_flight_bytes,
            ..Default::default()
        };
        MirrorSetup {
            rep: rep.clone(),
            names,
            facts: Arc::new(Mutex::new(facts)),
        }
    }

    /// What the jobs added up, the mirror's intervals given the run's interval `lengths`.
    fn facts(self, lengths: &[f64]) -> ReplicationFacts {
        let mut f = self.facts.lock().unwrap_or_else(|e| e.into_inner()).clone();
        crate::mirror::grid::align(&mut f.intervals, lengths);
        f
    }

    /// Job `plan`'s engine: `inner` with its connection to the peer.
    fn engine<E: IoEngine>(&self, inner: E, plan: &JobPlan) -> std::io::Result<Mirror<E>> {
        Mirror::connect(
            inner,
            &self.rep,
            &self.names[plan.id as usize],
            plan.file_len,
            plan.bs,
            Arc::clone(&self.facts),
        )
    }
}

/// The measured pass of every job through the mirror over a synchronous local engine
/// (`RunConfig::validate` refused the others).
fn run_mirrored(
    cfg: &RunConfig,
    engine: EngineKind,
    plans: Vec<JobPlan>,
    observer: Option<Observer<'_>>,
    m: &MirrorSetup,
) -> Vec<JobResult> {
    match engine {
        EngineKind::Mmap => run_jobs(cfg, plans, observer, |p: &JobPlan| m.engine(Mmap::new(), p)),
        EngineKind::Null => run_jobs(cfg, plans, observer, |p: &JobPlan| m.engine(Null::new(), p)),
        _ => run_jobs(cfg, plans, observer, |p: &JobPlan| {
            m.engine(Psync::new(), p)
        }),
    }
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
