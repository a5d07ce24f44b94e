//! `nsperf io run nfs://…` and `smb://…`: the same workloads, cache phases, histograms and
//! intervals as a local directory, done through a user-space protocol client ([`nfs`],
//! [`smb`]) — one connection per job, `--iodepth` requests in flight on each, `--bs` the
//! request size (clamped to what the server allows, with a finding). What the two share is
//! here: the facts recorded, the clamp, the report, and the bonnie-style [`suite`].

mod findings;
pub(crate) mod nfs;
mod nfs_control;
pub(crate) mod smb;
mod suite;

use nsperf_core::data_path::DataOp;
use std::time::Instant;

use nsperf_core::report::{CpuInterval, HostRecord};

use suite::RemoteFs;

use crate::aggregate::{aggregate, fill_cpu};
use crate::buffer::BufferPool;
use crate::cache;
use crate::config::{CacheMode, RunConfig};
use crate::engine::{EngineKind, IoEngine};
use crate::error::IoError;
use crate::findings::{RunFacts, findings};
use crate::job::JobPlan;
use crate::pass::{Placement, run_jobs};
use crate::result::{IoReport, IoSummary, RemoteFacts, VerifySummary};
use crate::target::Target;
use crate::verify::{self, Tally};
use crate::workload::Workload;

/// Opens a job's data connection to a file (called on each job's thread).
trait JobOpener<F>: Sync {
    /// The engine of the protocol.
    type Engine: crate::engine::IoEngine;
    /// Connects to file `f` (named `name` in the target directory).
    fn open(&self, f: &F, name: &str) -> std::io::Result<Self::Engine>;
}

/// Record workloads: one connection per job through the generic job loop.
fn block<R: RemoteFs, O: JobOpener<R::File>>(
    cfg: &RunConfig,
    files: &mut R,
    opener: &O,
    observer: Option<crate::pass::Observer<'_>>,
) -> Result<Outcomes, IoError>
where
    R::File: Sync,
{
    let bs = cfg.bs_bytes;
    let blocks = cfg.blocks();
    let place = Placement::of(cfg, false);
    let per_file = place.per_file;
    let mut handles = Vec::with_capacity(place.files);
    for _ in 0..place.files {
        handles.push(files.create_file(&cfg.workload.to_string())?);
    }
    let reads = cfg.workload.needs_layout() && cfg.workload != Workload::Rewrite;
    let read_back =
        cfg.workload == Workload::Reread || (cfg.cache == CacheMode::RemoteWarm && reads);
    // With --verify every block carries its checksummed header from the layout on (laid
    // out here through a job's connection, a record per request), and every block read
    // (here, in the pass, and read back after a writing pass) is checked.
    let seed = cfg.verify.map(|_| cfg.seed);
    let mut check = seed.map(|seed| Check {
        bs,
        seed,
        tally: Tally::default(),
    });
    if cfg.workload.needs_layout() {
        for (fh, name) in &handles {
            match check.as_mut() {
                // Read back: the server's cache then holds the data (when it fits its memory).
                None => files.lay_out(fh, name, per_file, read_back)?,
                Some(c) => {
                    let path = files.path(name);
                    let mut e = opener
                        .open(fh, name)
                        .map_err(|e| IoError::remote("layout", path.clone(), e))?;
                    let depth = cfg.iodepth as usize;
                    let span = (0, per_file);
                    transfer_checked(&mut e, depth, span, DataOp::Write, &path, Some(c))?;
                    if read_back {
                        transfer_checked(&mut e, depth, span, DataOp::Read, &path, Some(c))?;
                    }
                }
            }
        }
    }
    if cfg.drop_caches {
        // Written data was made stable by `lay_out`; this host's page cache is the server's
        // when the server runs here (the only case validation lets through).
        cache::drop_all_caches()?;
    }
    let plans: Vec<JobPlan> = (0..cfg.jobs)
        .map(|j| {
            let base = place.of_job(j).1;
            JobPlan::of(cfg, j, -1, per_file, base, cfg.iodepth as usize)
        })
        .collect();
    let file_of = |j: u32| &handles[place.of_job(j).0];
    let results = run_jobs(cfg, plans, observer, |plan: &JobPlan| {
        let (f, name) = file_of(plan.id);
        opener.open(f, name)
    });
    let mut outcomes = Vec::with_capacity(results.len());
    for (j, r) in results.into_iter().enumerate() {
        let name = &file_of(j as u32).1;
        match r {
            Ok(o) => outcomes.push(o),
            Err((what, source)) => return Err(IoError::remote(what, files.path(name), source)),
        }
    }
    let verify = match check {
        Some(mut c) => {
            for (j, o) in outcomes.iter().enumerate() {
                c.tally.merge(&o.verify);
                // After a writing pass, every block it wrote is read back and checked.
                let written = written_blocks(cfg, o, blocks);
                if written > 0 {
                    let (f, name) = file_of(j as u32);
                    let path = files.path(name);
                    let mut e = opener
                        .open(f, name)
                        .map_err(|e| IoError::remote("verify", path.clone(), e))?;
                    let span = (place.of_job(j as u32).1, written * bs);
                    let depth = cfg.iodepth as usize;
                    transfer_checked(&mut e, depth, span, DataOp::Read, &path, Some(&mut c))?;
                }
            }
            Some(c.summary())
        }
        None => None,
    };
    Ok((outcomes, Vec::new(), per_file * place.files as u64, verify))
}

/// `--verify` through a protocol: the record size, the seed of the block headers, and what
/// the checks found.
struct Check {
    bs: u64,
    seed: u64,
    tally: Tally,
}

impl Check {
    fn summary(&self) -> VerifySummary {
        VerifySummary {
            blocks_checked: self.tally.checked,
            failures: self.tally.failed,
            first_failure_offset: self.tally.first.map(|f| f.0),
            first_failure: self.tally.first.map(|f| f.1),
        }
    }
}

/// Blocks from the start of a job's region that hold a `--verify` header after its pass:
/// all of a laid-out file, else the range a sequential writer reached (none for an
/// unfinished random writer, whose blocks are not a range).
fn written_blocks(cfg: &RunConfig, o: &crate::job::JobOutcome, blocks: u64) -> u64 {
    if !cfg.workload.writes() {
        0
    } else if cfg.workload.needs_layout() || o.all_ops >= blocks {
        blocks
    } else {
        match cfg.workload {
            Workload::SeqWrite | Workload::Rewrite => o.all_ops,
            _ => 0,
        }
    }
}

/// Requests in flight while laying out or reading through a file, unmeasured.
const LAYOUT_DEPTH: usize = 8;

/// Writes (then makes stable: COMMIT, FLUSH) or reads `len` bytes of a file through
/// `engine`, unmeasured, in requests of `chunk` bytes with [`LAYOUT_DEPTH`] in flight. A
/// WRITE the server takes only in part fails the run (nsperf never leaves a hole in a file
/// it then measures).
fn transfer<E: IoEngine>(
    engine: &mut E,
    chunk: usize,
    len: u64,
    op: DataOp,
    path: &str,
) -> Result<(), IoError> {
    transfer_chunked(engine, (chunk, LAYOUT_DEPTH), (0, len), op, path, None)
}

/// As [`transfer`], one record (`check.bs`) per request with at most `depth` in
/// flight (the connection's own depth), over `span` = (offset, length); with `check`, each
/// block written is stamped and each block read checked.
fn transfer_checked<E: IoEngine>(
    engine: &mut E,
    depth: usize,
    span: (u64, u64),
    op: DataOp,
    path: &str,
    check: Option<&mut Check>,
) -> Result<(), IoError> {
    let chunk = check.as_ref().map_or(1 << 20, |c| c.bs as usize);
    let depth = depth.clamp(1, LAYOUT_DEPTH);
    transfer_chunked(engine, (chunk, depth), span, op, path, check)
}

fn transfer_chunked<E: IoEngine>(
    engine: &mut E,
    (chunk, depth): (usize, usize),
    (base, len): (u64, u64),
    op: DataOp,
    path: &str,
    check: Option<&mut Check>,
) -> Result<(), IoError> {
    let mut pool = BufferPool::new(chunk, depth, len ^ 0xA5A5);
    let err = |e: std::io::Error| match e.raw_os_error() {
        Some(libc::EINTR) => IoError::Interrupted,
        _ => IoError::remote("layout", path.to_string(), e),
    };
    engine.attach(-1, len, &mut pool).map_err(err)?;
    let r =
        transfer_attached(engine, &mut pool, (chunk, depth), (base, len), op, check).map_err(err);
    engine.detach();
    drop(pool);
    r
}

fn transfer_attached<E: IoEngine>(
    engine: &mut E,
    pool: &mut BufferPool,
    (chunk, depth): (usize, usize),
    (base, len): (u64, u64),
    op: DataOp,
    mut check: Option<&mut Check>,
) -> std::io::Result<()> {
    let mut free: Vec<u32> = (0..depth as u32).collect();
    let mut asked = [(0u64, 0i32); LAYOUT_DEPTH];
    let mut done = Vec::with_capacity(depth);
    let end = base + len;
    let (mut off, mut inflight) = (base, 0usize);
    while off < end || inflight > 0 {
        if nsperf_core::signal::interrupted() {
            return Err(std::io::Error::from_raw_os_error(libc::EINTR));
        }
        while off < end {
            let Some(slot) = free.pop() else { break };
            let n = (end - off).min(chunk as u64) as usize;
            if let (Some(c), DataOp::Write) = (check.as_deref(), op) {
                verify::stamp(pool.buf(slot as usize, n), off, c.seed);
            }
            engine.queue(op, off, n, slot)?;
            asked[slot as usize] = (off, n as i32);
            off += n as u64;
            inflight += 1;
        }
        done.clear();
        engine.reap(1, &mut done)?;
        for d in &done {
            inflight -= 1;
            let (at, n) = asked[d.slot as usize];
            let short_write = op == DataOp::Write && d.result < n;
            if d.result <= 0 || short_write {
                return Err(std::io::Error::from_raw_os_error(if d.result < 0 {
                    -d.result
                } else {
                    libc::EIO
                }));
            }
            if let (Some(c), DataOp::Read) = (check.as_deref_mut(), op) {
                let got = pool.buf(d.slot as usize, d.result as usize);
                c.tally
                    .record(at, verify::check(got, c.bs as usize, at, c.seed));
            }
            free.push(d.slot);
        }
    }
    if op == DataOp::Write {
        engine.sync_file()?;
    }
    Ok(())
}

/// Job outcomes, phases of the metadata test, the bytes of the files used, and what
/// `--verify` checked.
type Outcomes = (
    Vec<crate::job::JobOutcome>,
    Vec<crate::result::Phase>,
    u64,
    Option<VerifySummary>,
);

/// Runs one workload against an `nfs://` or `smb://` target; `observer` watches the
/// measured pass of a record workload (and may hold its start).
pub fn run(
    cfg: &RunConfig,
    observer: Option<crate::pass::Observer<'_>>,
) -> Result<IoReport, IoError> {
    match &cfg.target {
        Target::Smb { .. } => smb::run(cfg, observer),
        _ => nfs::run(cfg, observer),
    }
}

/// `--bs` clamped to what the server allows per request (`rmax`, `wmax`; 0: no limit known):
/// the run's effective configuration, and `(asked, used)` when it was clamped.
fn clamp_bs(cfg: &RunConfig, rmax: u32, wmax: u32) -> (RunConfig, Option<(u64, u64)>) {
    let limit = match (
        cfg.workload.writes(),
        cfg.workload.needs_layout() || !cfg.workload.writes(),
    ) {
        (true, true) => rmax.min(wmax),
        (true, false) => wmax,
        _ => rmax,
    } as u64;
    let mut eff = cfg.clone();
    let mut clamp = None;
    if limit > 0 && eff.bs_bytes > limit {
        clamp = Some((eff.bs_bytes, limit));
        eff.bs_bytes = limit;
    }
    (eff, clamp)
}

/// The facts taken when a run starts, and what turns its outcomes into the report.
struct Started {
    facts: nsperf_core::host::HostFacts,
    memory: crate::memory::MemoryFacts,
    started_unix_ns: u64,
    start: Instant,
    /// Stale nsperf files found in the target directory before the run.
    stale: crate::stale::Sweep,
}

impl Started {
    fn new(cfg: &RunConfig) -> Started {
        let (facts, memory, _) = crate::pass::context(cfg);
        Started {
            facts,
            memory,
            started_unix_ns: nsperf_core::clock::unix_time_ns(),
            start: Instant::now(),
            stale: crate::stale::Sweep::default(),
        }
    }

    /// The CPU monitor of the run (started now, on the run's clock).
    fn monitor(&self, cfg: &RunConfig) -> crate::monitor::CpuMonitor {
        crate::monitor::CpuMonitor::start(self.start, cfg.interval)
    }

    /// The report of a finished run (`eff`: the configuration with the clamped `--bs`).
    #[allow(clippy::too_many_arguments)]
    fn finish(
        self,
        cfg: &RunConfig,
        eff: &RunConfig,
        (outcomes, phases, file_bytes, verify): Outcomes,
        cpu: Vec<CpuInterval>,
        remote: RemoteFacts,
        fs: crate::fsinfo::FsInfo,
        engine: EngineKind,
        clamp: Option<(u64, u64)>,
    ) -> IoReport {
        let mut rep = IoReport::new(
            nsperf_core::report::Command::Io,
            cfg.clone(),
            IoSummary::default(),
        );
        rep.started_unix_ns = self.started_unix_ns;
        rep.measured_unix_ns =
            crate::pass::measured_unix_ns(&outcomes, (self.start, self.started_unix_ns));
        rep.hosts.push(HostRecord {
            role: "local".into(),
            facts: self.facts,
        });
        let (intervals, mut summary) = aggregate(eff, &outcomes, 0);
        summary.engine = engine.into();
        summary.phases = phases;
        summary.verify = verify;
        let blocks = eff.blocks() * eff.jobs as u64;
        summary.passes = if eff.workload.is_block() && blocks > 0 {
            summary.ops as f64 / blocks as f64
        } else {
            1.0
        };
        fill_cpu(&mut summary, &cpu);
        rep.duration_ns = (summary.elapsed_s * 1e9) as u64;
        rep.intervals = intervals;
        summary.memory = self.memory;
        summary.target_fs = Some(fs);
        let rf = RunFacts {
            file_bytes,
            engine_fallback: None,
            device: false,
            fs_after: None,
            stale: self.stale,
        };
        let mut f = findings(cfg, &summary, &cpu, &rf);
        f.extend(findings::remote_findings(cfg, &summary, &remote, clamp));
        rep.findings = f;
        summary.remote = Some(remote);
        rep.cpu = cpu;
        rep.summary = summary;
        rep
    }
}
