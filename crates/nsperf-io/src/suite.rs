//! The bonnie++-style workloads that do not go through the record engines: per-character
//! output and input (one byte per call through a user-space buffer, like stdio's
//! `putc`/`getc`), and the metadata test (create, stat, read, delete many small files in
//! sequential and random order).

use std::os::fd::AsRawFd;
use std::time::Instant;

use nsperf_core::report::HostRecord;

use crate::aggregate::{aggregate, fill_cpu};
use crate::cache;
use crate::config::{CacheMode, FsyncMode, RunConfig};
use crate::error::IoError;
use crate::findings::{RunFacts, findings};
use crate::job::JobOutcome;
use crate::monitor::CpuMonitor;
use crate::prepare::{layout, read_through};
use crate::result::{IoReport, IoSummary, Phase};
use crate::rng::Permutation;
use crate::space::Preflight;
use crate::target::{CreatedFiles, Target};
use crate::workload::Workload;
use nsperf_core::data_path::DataOp;

/// The stdio buffer size glibc uses for files on common file systems (`st_blksize`).
pub(crate) const STDIO_BUF: usize = 4096;

/// Runs a non-record workload (`charwrite`, `charread`, `meta`) in a directory.
pub(crate) fn run_special(cfg: &RunConfig, pre: Preflight) -> Result<IoReport, IoError> {
    let Target::Dir { path } = &cfg.target else {
        return Err(IoError::Config(format!(
            "{} needs a directory target",
            cfg.workload
        )));
    };
    let (facts, memory, target_fs) = crate::pass::context(cfg);
    let mut guard = CreatedFiles::new(path)?;
    let started_unix_ns = nsperf_core::clock::unix_time_ns();
    let start = Instant::now();
    let monitor = CpuMonitor::start(start, cfg.interval);
    let mut phases = Vec::new();
    let out = match cfg.workload {
        Workload::CharWrite => char_write(cfg, &mut guard),
        Workload::CharRead => char_read(cfg, &mut guard),
        Workload::Meta => meta(cfg, &mut guard, &mut phases),
        w => Err(IoError::Config(format!("{w} is a record workload"))),
    };
    let cpu = monitor.stop();
    let out = out?;
    drop(guard);
    let mut rep = IoReport::new(
        nsperf_core::report::Command::Io,
        cfg.clone(),
        IoSummary::default(),
    );
    rep.started_unix_ns = started_unix_ns;
    rep.hosts.push(HostRecord {
        role: "local".into(),
        facts,
    });
    let (intervals, mut s) = aggregate(cfg, std::slice::from_ref(&out), 0);
    s.engine = crate::result::EngineUsed::Stdio;
    s.passes = 1.0;
    s.phases = phases;
    fill_cpu(&mut s, &cpu);
    rep.duration_ns = (s.elapsed_s * 1e9) as u64;
    rep.intervals = intervals;
    s.memory = memory;
    let rf = RunFacts {
        file_bytes: cfg.size_bytes,
        engine_fallback: None,
        device: false,
        fs_after: target_fs
            .as_ref()
            .and_then(|_| crate::fsinfo::of_path(path)),
        stale: pre.stale,
    };
    s.target_fs = target_fs;
    rep.findings = findings(cfg, &s, &cpu, &rf);
    rep.cpu = cpu;
    rep.summary = s;
    Ok(rep)
}

pub(crate) struct Counter {
    pub(crate) out: JobOutcome,
    next: Instant,
    cur: (u64, u64),
    interval: std::time::Duration,
}

impl Counter {
    pub(crate) fn new(start: Instant, interval: std::time::Duration) -> Self {
        Counter {
            out: JobOutcome::new(start),
            next: start + interval,
            cur: (0, 0),
            interval,
        }
    }

    /// Counts `ops` operations of `kind` moving `bytes` that took `lat_ns` (one latency
    /// sample: one system call), ending at `t`.
    pub(crate) fn op(&mut self, kind: DataOp, bytes: u64, ops: u64, lat_ns: u64, t: Instant) {
        let o = &mut self.out;
        match kind {
            DataOp::Read => {
                o.read_hist.record_ns(lat_ns);
                o.read_bytes += bytes;
                o.read_ops += ops;
            }
            DataOp::Write => {
                o.write_hist.record_ns(lat_ns);
                o.write_bytes += bytes;
            }
        }
        self.add(t, bytes, ops);
    }

    fn add(&mut self, t: Instant, bytes: u64, ops: u64) {
        while t >= self.next {
            self.out.buckets.push(self.cur);
            self.cur = (0, 0);
            self.next += self.interval;
        }
        self.cur.0 += bytes;
        self.cur.1 += ops;
        self.out.ops += ops;
    }

    pub(crate) fn finish(mut self) -> JobOutcome {
        self.out.buckets.push(self.cur);
        self.out.end = Instant::now();
        self.out
    }
}

fn char_write(cfg: &RunConfig, guard: &mut CreatedFiles) -> Result<JobOutcome, IoError> {
    let (file, path) = guard.create("charwrite")?;
    let fd = file.as_raw_fd();
    let mut buf = vec![0u8; STDIO_BUF];
    let mut fill = 0usize;
    let start = Instant::now();
    let mut c = Counter::new(start, cfg.interval);
    let flush = |buf: &[u8], c: &mut Counter| -> Result<(), IoError> {
        let t0 = Instant::now();
        // SAFETY: buf is valid for its length.
        let r = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        let t1 = Instant::now();
        if r != buf.len() as isize {
            return Err(IoError::last_os("write", &path));
        }
        let len = buf.len() as u64;
        c.op(
            DataOp::Write,
            len,
            len,
            t1.duration_since(t0).as_nanos() as u64,
            t1,
        );
        Ok(())
    };
    for i in 0..cfg.size_bytes {
        // One call per byte, as putc: the byte goes through a function the optimiser
        // cannot merge into a block copy.
        buf[fill] = std::hint::black_box(i as u8);
        fill += 1;
        if fill == STDIO_BUF {
            flush(&buf, &mut c)?;
            fill = 0;
            if nsperf_core::signal::interrupted() {
                c.out.interrupted = true;
                break;
            }
        }
    }
    if fill > 0 {
        flush(&buf[..fill], &mut c)?;
    }
    if cfg.fsync != FsyncMode::None {
        let t = Instant::now();
        // SAFETY: fsync on our own file.
        if unsafe { libc::fsync(fd) } != 0 {
            return Err(IoError::last_os("fsync", &path));
        }
        c.out.fsync_ns = t.elapsed().as_nanos() as u64;
    }
    Ok(c.finish())
}

fn char_read(cfg: &RunConfig, guard: &mut CreatedFiles) -> Result<JobOutcome, IoError> {
    let (file, path) = guard.create("charread")?;
    let fd = file.as_raw_fd();
    layout(fd, cfg.size_bytes, &path, None)?;
    match cfg.cache {
        CacheMode::Warm => read_through(fd, cfg.size_bytes, &path)?,
        _ => cache::evict_file(fd, &path)?,
    }
    if cfg.drop_caches {
        cache::drop_all_caches()?;
    }
    let mut buf = vec![0u8; STDIO_BUF];
    let start = Instant::now();
    let mut c = Counter::new(start, cfg.interval);
    let mut off = 0u64;
    let mut sum = 0u64;
    while off < cfg.size_bytes {
        let t0 = Instant::now();
        // SAFETY: buf is valid for its length.
        let r = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), off as i64) };
        let t1 = Instant::now();
        if r < 0 {
            return Err(IoError::last_os("read", &path));
        }
        if r == 0 {
            break;
        }
        let n = r as usize;
        for &b in &buf[..n] {
            // One call per byte, as getc.
            sum = sum.wrapping_add(std::hint::black_box(b) as u64);
        }
        off += n as u64;
        let lat = t1.duration_since(t0).as_nanos() as u64;
        c.op(DataOp::Read, n as u64, n as u64, lat, Instant::now());
        if nsperf_core::signal::interrupted() {
            c.out.interrupted = true;
            break;
        }
    }
    std::hint::black_box(sum);
    Ok(c.finish())
}

fn meta(
    cfg: &RunConfig,
    guard: &mut CreatedFiles,
    phases: &mut Vec<Phase>,
) -> Result<JobOutcome, IoError> {
    let dir = guard.mkdir("meta")?;
    let n = cfg.meta_files.max(1) as u64;
    let names: Vec<std::path::PathBuf> = (0..n).map(|i| dir.join(format!("f{i:08}"))).collect();
    let payload = vec![0x5au8; cfg.meta_file_bytes as usize];
    let mut rbuf = vec![0u8; cfg.meta_file_bytes.max(1) as usize];
    let start = Instant::now();
    let mut c = Counter::new(start, cfg.interval);
    for order in ["seq", "random"] {
        let seq: Vec<usize> = if order == "seq" {
            (0..n as usize).collect()
        } else {
            let mut p = Permutation::new(n, cfg.seed);
            (0..n).map(|_| p.next_value() as usize).collect()
        };
        for op in ["create", "stat", "read", "delete"] {
            let t_phase = Instant::now();
            let mut done = 0u64;
            for &i in &seq {
                if nsperf_core::signal::interrupted() {
                    c.out.interrupted = true;
                    break;
                }
                let p = &names[i];
                let t0 = Instant::now();
                let r = match op {
                    "create" => std::fs::File::create_new(p).and_then(|mut f| {
                        use std::io::Write;
                        f.write_all(&payload)
                    }),
                    "stat" => std::fs::metadata(p).map(|_| ()),
                    "read" => std::fs::File::open(p).and_then(|mut f| {
                        use std::io::Read;
                        f.read(&mut rbuf).map(|_| ())
                    }),
                    _ => std::fs::remove_file(p),
                };
                let t1 = Instant::now();
                r.map_err(|e| IoError::os(op_verb(op), p, e))?;
                let (kind, bytes) = match op {
                    "create" => (DataOp::Write, payload.len() as u64),
                    "delete" => (DataOp::Write, 0),
                    _ => (DataOp::Read, 0),
                };
                c.op(kind, bytes, 1, t1.duration_since(t0).as_nanos() as u64, t1);
                done += 1;
            }
            let el = t_phase.elapsed().as_secs_f64();
            phases.push(Phase {
                name: format!("{op}_{order}"),
                ops: done,
                elapsed_s: el,
                ops_per_s: if el > 0.0 { done as f64 / el } else { 0.0 },
            });
            if c.out.interrupted {
                return Ok(c.finish());
            }
        }
    }
    Ok(c.finish())
}

fn op_verb(op: &str) -> &'static str {
    match op {
        "create" => "create",
        "stat" => "stat",
        "read" => "read",
        _ => "unlink",
    }
}
