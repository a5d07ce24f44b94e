//! `nsperf io run nfs://…`: the same workloads, cache phases, histograms and intervals as a
//! local directory, done through the user-space NFSv3 client — one connection per job,
//! `--iodepth` RPCs in flight on each, `--bs` the RPC size (clamped to what the server's
//! FSINFO allows, with a finding).
//!
//! Order of a run: mount → create `.nsperf-*` files (CREATE GUARDED: never an existing file)
//! → lay them out with unmeasured WRITEs and a COMMIT → set the cache phase (remote-warm:
//! read through once so the server's cache holds the data; cold: drop this host's page
//! cache, which is the server's in a lab) → measured pass → files removed (REMOVE), also on
//! error and after Ctrl-C.

mod findings;
mod suite;

use std::time::{Duration, Instant};

use nsperf_core::report::HostRecord;
use nsperf_nfs::{DataOp, Done, FileHandle, NfsError, Pipeline, Session, Stable};
use serde::{Deserialize, Serialize};

use crate::aggregate::{aggregate, fill_cpu};
use crate::buffer::BufferPool;
use crate::cache;
use crate::config::{CacheMode, FsyncMode, RunConfig};
use crate::engine::Nfs;
use crate::engine::nfs::to_io;
use crate::error::IoError;
use crate::findings::{RunFacts, findings};
use crate::job::JobPlan;
use crate::result::{IoReport, IoSummary};
use crate::runner::run_jobs;
use crate::target::{FILE_PREFIX, Target};
use crate::workload::{OpStream, Workload};

/// How long the server may stay silent before the run fails with "server went away".
pub const TIMEOUT: Duration = nsperf_nfs::client::DEFAULT_TIMEOUT;

/// What was measured when the target is a network file protocol (`summary.remote`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteFacts {
    /// `nfs3`.
    pub protocol: String,
    /// Where the NFS service answered (`ADDRESS:PORT`).
    pub server: String,
    /// The export mounted.
    pub export: String,
    /// Largest READ the server allows (FSINFO rtmax).
    pub rtmax_bytes: u32,
    /// Largest WRITE the server allows (FSINFO wtmax).
    pub wtmax_bytes: u32,
    /// Preferred READ size (FSINFO rtpref).
    pub rtpref_bytes: u32,
    /// Data bytes per READ/WRITE RPC in the measured pass (`--bs`, clamped).
    pub rpc_bytes: u64,
    /// RPCs in flight per connection (`--iodepth`).
    pub rpcs_in_flight: u32,
    /// TCP connections (`--jobs`).
    pub connections: u32,
    /// How writes were sent: `unstable` (COMMIT at the end with `--fsync end`) or
    /// `file_sync` (`--fsync each`).
    pub write_stable: String,
}

/// The files created on the server; removes them (and the metadata test's directory) when
/// dropped, whatever the exit path.
struct RemoteFiles {
    session: Session,
    tag: String,
    seq: u32,
    created: Vec<(FileHandle, String, bool)>,
}

impl RemoteFiles {
    fn new(session: Session) -> Self {
        RemoteFiles {
            session,
            tag: std::process::id().to_string(),
            seq: 0,
            created: Vec::new(),
        }
    }

    fn next_name(&mut self, what: &str) -> String {
        self.seq += 1;
        format!("{FILE_PREFIX}{}-{what}-{}", self.tag, self.seq)
    }

    /// Creates a new file in the target directory.
    fn create(&mut self, what: &str) -> Result<(FileHandle, String), IoError> {
        let name = self.next_name(what);
        let dir = self.session.dir;
        let fh = self.session.client.create(&dir, &name)?;
        self.created.push((dir, name.clone(), false));
        Ok((fh, name))
    }

    /// Creates a directory in the target directory.
    fn mkdir(&mut self, what: &str) -> Result<(FileHandle, String), IoError> {
        let name = self.next_name(what);
        let dir = self.session.dir;
        let fh = self.session.client.mkdir(&dir, &name)?;
        self.created.push((dir, name.clone(), true));
        Ok((fh, name))
    }

    /// Registers a file created inside a created directory.
    fn adopt(&mut self, dir: FileHandle, name: String) {
        self.created.push((dir, name, false));
    }

    /// Forgets a file removed by the workload itself.
    fn removed(&mut self, dir: &FileHandle, name: &str) {
        if let Some(i) = self
            .created
            .iter()
            .position(|(d, n, _)| d == dir && n == name)
        {
            self.created.swap_remove(i);
        }
    }

    fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.session.url)
    }
}

impl Drop for RemoteFiles {
    fn drop(&mut self) {
        // Files before directories: a directory's files were registered after it.
        for (dir, name, is_dir) in self.created.drain(..).rev() {
            let _ = if is_dir {
                self.session.client.rmdir(&dir, &name)
            } else {
                self.session.client.remove(&dir, &name)
            };
        }
    }
}

/// Runs one workload against an `nfs://` target.
pub fn run(cfg: &RunConfig) -> Result<IoReport, IoError> {
    let Target::Nfs { url } = &cfg.target else {
        return Err(IoError::Config("not an nfs:// target".into()));
    };
    let (facts, memory, _) = crate::runner::context(cfg);
    let session = Session::open(url, TIMEOUT)?;
    let fsi = session.fsinfo;
    let limit = match (
        cfg.workload.writes(),
        cfg.workload.needs_layout() || !cfg.workload.writes(),
    ) {
        (true, true) => fsi.rtmax.min(fsi.wtmax),
        (true, false) => fsi.wtmax,
        _ => fsi.rtmax,
    } as u64;
    let mut eff = cfg.clone();
    let mut clamp = None;
    if limit > 0 && eff.bs_bytes > limit {
        clamp = Some((eff.bs_bytes, limit));
        eff.bs_bytes = limit;
    }
    let remote = RemoteFacts {
        protocol: "nfs3".into(),
        server: session.nfs_addr.to_string(),
        export: session.export.clone(),
        rtmax_bytes: fsi.rtmax,
        wtmax_bytes: fsi.wtmax,
        rtpref_bytes: fsi.rtpref,
        rpc_bytes: eff.bs_bytes,
        rpcs_in_flight: eff.iodepth,
        connections: eff.jobs,
        write_stable: if stable_of(cfg) == Stable::FileSync {
            "file_sync".into()
        } else {
            "unstable".into()
        },
    };
    let mut files = RemoteFiles::new(session);
    let started_unix_ns = nsperf_core::clock::unix_time_ns();
    let start = Instant::now();
    let monitor = crate::monitor::CpuMonitor::start(start, cfg.interval);
    let run = if eff.workload.is_block() {
        block(&eff, &mut files)
    } else {
        suite::run(&eff, &mut files)
    };
    let cpu = monitor.stop();
    let (outcomes, phases, file_bytes) = run?;
    drop(files);

    let mut rep = IoReport::new("io", cfg.clone(), IoSummary::default());
    rep.started_unix_ns = started_unix_ns;
    rep.hosts.push(HostRecord {
        role: "local".into(),
        facts,
    });
    let (intervals, mut summary) = aggregate(&eff, &outcomes, 0);
    summary.engine = "nfs".into();
    summary.phases = phases;
    let blocks = eff.blocks() * eff.jobs as u64;
    summary.passes = if eff.workload.is_block() && blocks > 0 {
        summary.ops as f64 / blocks as f64
    } else {
        1.0
    };
    fill_cpu(&mut summary, &cpu);
    rep.duration_ns = (summary.elapsed_s * 1e9) as u64;
    rep.intervals = intervals;
    summary.memory = memory;
    summary.target_fs = Some(crate::fsinfo::FsInfo {
        fs_type: "nfs3 (nsperf user-space client)".into(),
        mount_source: format!("{}:{}", url.host, remote.export),
        mount_point: std::path::PathBuf::from(&url.path),
        dev: String::new(),
        statfs_magic: 0,
        network: Some(true),
        server: remote
            .server
            .parse::<std::net::SocketAddr>()
            .ok()
            .map(|a| a.ip()),
        link: None,
    });
    let rf = RunFacts {
        file_bytes,
        engine_fallback: None,
        device: false,
        fs_after: None,
        stale: Vec::new(),
        stale_removed: false,
    };
    let mut f = findings(cfg, &summary, &cpu, &rf);
    f.extend(findings::remote_findings(cfg, &summary, &remote, clamp));
    rep.findings = f;
    summary.remote = Some(remote);
    rep.cpu = cpu;
    rep.summary = summary;
    Ok(rep)
}

fn stable_of(cfg: &RunConfig) -> Stable {
    if cfg.fsync == FsyncMode::Each {
        Stable::FileSync
    } else {
        Stable::Unstable
    }
}

type Outcomes = (Vec<crate::job::JobOutcome>, Vec<crate::result::Phase>, u64);

/// Record workloads: one connection per job through the generic job loop.
fn block(cfg: &RunConfig, files: &mut RemoteFiles) -> Result<Outcomes, IoError> {
    let bs = cfg.bs_bytes;
    let blocks = cfg.blocks();
    let region = blocks * bs;
    let nfiles = if cfg.shared_file {
        1
    } else {
        cfg.jobs as usize
    };
    let per_file = if nfiles == 1 {
        region * cfg.jobs as u64
    } else {
        region
    };
    let mut handles = Vec::with_capacity(nfiles);
    for _ in 0..nfiles {
        handles.push(files.create(cfg.workload.name())?);
    }
    let addr = files.session.nfs_addr;
    let t = Transfer::new(files);
    if cfg.workload.needs_layout() {
        for (fh, name) in &handles {
            transfer(t, *fh, per_file, DataOp::Write, &files.path(name))?;
        }
    }
    let reads = cfg.workload.needs_layout() && cfg.workload != Workload::Rewrite;
    if cfg.workload == Workload::Reread || (cfg.cache == CacheMode::RemoteWarm && reads) {
        // The server's cache now holds the data (when it fits the server's memory).
        for (fh, name) in &handles {
            transfer(t, *fh, per_file, DataOp::Read, &files.path(name))?;
        }
    }
    if cfg.drop_caches {
        // Written data was committed by `transfer`; this host's page cache is the server's
        // when the server runs here (the only case validation lets through).
        cache::drop_all_caches()?;
    }
    let plans: Vec<JobPlan> = (0..cfg.jobs)
        .map(|j| {
            let base = if nfiles == 1 { j as u64 * region } else { 0 };
            JobPlan {
                id: j,
                fd: -1,
                file_len: per_file,
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
                depth: cfg.iodepth as usize,
                ops: if cfg.time_based { u64::MAX } else { blocks },
                fsync: cfg.fsync,
                rate: cfg.rate,
                verify_seed: None,
            }
        })
        .collect();
    let stable = stable_of(cfg);
    let depth = cfg.iodepth as usize;
    let fh_of = |j: u32| handles[if nfiles == 1 { 0 } else { j as usize }].0;
    let results = run_jobs(cfg, plans, None, |plan: &JobPlan| {
        Pipeline::connect(addr, fh_of(plan.id), depth, stable, TIMEOUT)
            .map(Nfs::new)
            .map_err(to_io)
    });
    let mut outcomes = Vec::with_capacity(results.len());
    for (j, r) in results.into_iter().enumerate() {
        let name = &handles[if nfiles == 1 { 0 } else { j }].1;
        match r {
            Ok(o) => outcomes.push(o),
            Err((what, source)) => return Err(IoError::remote(what, files.path(name), source)),
        }
    }
    Ok((outcomes, Vec::new(), per_file * nfiles as u64))
}

/// Where and how to lay out or read through a file, unmeasured.
#[derive(Debug, Clone, Copy)]
pub(super) struct Transfer {
    addr: std::net::SocketAddr,
    /// RPC size: 1 MiB or less when the server allows less.
    chunk: usize,
}

impl Transfer {
    fn new(files: &RemoteFiles) -> Self {
        let f = files.session.fsinfo;
        let limit = f.rtmax.min(f.wtmax).max(4096) as usize;
        Transfer {
            addr: files.session.nfs_addr,
            chunk: limit.min(1 << 20),
        }
    }
}

/// Writes (unstably, then COMMIT) or reads `len` bytes of a file, unmeasured, with 8 RPCs
/// in flight. A WRITE the server takes only in part fails the run (nsperf never leaves a
/// hole in a file it then measures).
fn transfer(t: Transfer, fh: FileHandle, len: u64, op: DataOp, path: &str) -> Result<(), IoError> {
    const DEPTH: usize = 8;
    let (addr, chunk) = (t.addr, t.chunk);
    let err = |e: NfsError| IoError::remote("layout", path.to_string(), to_io(e));
    let mut p = Pipeline::connect(addr, fh, DEPTH, Stable::Unstable, TIMEOUT).map_err(err)?;
    let mut pool = BufferPool::new(chunk, DEPTH, len ^ 0xA5A5);
    for i in 0..DEPTH {
        // SAFETY: the pool outlives the pipeline (dropped after it, below).
        unsafe { p.set_buffer(i as u32, pool.ptr(i), pool.capacity()) };
    }
    let mut free: Vec<u32> = (0..DEPTH as u32).collect();
    let mut asked = [0i32; DEPTH];
    let mut done: Vec<Done> = Vec::with_capacity(DEPTH);
    let mut off = 0u64;
    while off < len || p.inflight() > 0 {
        if nsperf_core::signal::interrupted() {
            return Err(IoError::Interrupted);
        }
        while off < len {
            let Some(slot) = free.pop() else { break };
            let n = (len - off).min(chunk as u64) as usize;
            p.queue(op, off, n, slot).map_err(err)?;
            asked[slot as usize] = n as i32;
            off += n as u64;
        }
        done.clear();
        p.reap(1, &mut done).map_err(err)?;
        for d in &done {
            let short_write = op == DataOp::Write && d.result < asked[d.slot as usize];
            if d.result <= 0 || short_write {
                return Err(IoError::remote(
                    "layout",
                    path.to_string(),
                    std::io::Error::from_raw_os_error(if d.result < 0 {
                        -d.result
                    } else {
                        libc::EIO
                    }),
                ));
            }
            free.push(d.slot);
        }
    }
    if op == DataOp::Write {
        p.commit(&mut done).map_err(err)?;
    }
    drop(p);
    drop(pool);
    Ok(())
}
