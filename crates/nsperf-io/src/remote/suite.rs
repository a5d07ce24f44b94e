//! The bonnie++-style workloads over a network file protocol: per-character output and
//! input through a 4 KiB stdio-like buffer (one WRITE or READ per 4 KiB), and the metadata
//! test (create, stat, read, delete of many small files in a directory of nsperf's own, in
//! sequential then random order). The protocol is behind [`RemoteFs`].

use nsperf_core::data_path::DataOp;
use std::time::Instant;

use super::Outcomes;
use crate::config::{CacheMode, FsyncMode, RunConfig};
use crate::error::IoError;
use crate::job::JobOutcome;
use crate::result::Phase;
use crate::rng::Permutation;
use crate::suite::{Counter, STDIO_BUF};
use crate::workload::Workload;

/// One step of the metadata test.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum MetaOp {
    /// Create a file (with `--file-size` bytes).
    Create,
    /// Look it up.
    Stat,
    /// Look it up and read it.
    Read,
    /// Remove it.
    Delete,
}

impl MetaOp {
    fn name(self) -> &'static str {
        match self {
            MetaOp::Create => "create",
            MetaOp::Stat => "stat",
            MetaOp::Read => "read",
            MetaOp::Delete => "delete",
        }
    }
}

/// What the suite needs of a protocol client; files it creates are removed whatever
/// happens (the implementor registers them).
pub(super) trait RemoteFs {
    /// An open file.
    type File;
    /// A directory of nsperf's own.
    type Dir;
    /// Creates a new `.nsperf-*` file in the target directory.
    fn create_file(&mut self, what: &str) -> Result<(Self::File, String), IoError>;
    /// The URL of `name` in the target directory (for messages).
    fn path(&self, name: &str) -> String;
    /// One WRITE of `buf` at `off`.
    fn write_at(&mut self, f: &Self::File, name: &str, off: u64, buf: &[u8])
    -> Result<(), IoError>;
    /// One READ into `buf` at `off`: bytes read, and whether the end was reached.
    fn read_at(
        &mut self,
        f: &Self::File,
        name: &str,
        off: u64,
        buf: &mut [u8],
    ) -> Result<(usize, bool), IoError>;
    /// Whether written data needs a [`RemoteFs::sync`] to be stable.
    fn needs_sync(&self) -> bool;
    /// Makes the file's written data stable (COMMIT, FLUSH).
    fn sync(&mut self, f: &Self::File, name: &str) -> Result<(), IoError>;
    /// Writes `len` bytes into the file, unmeasured (and makes them stable), then reads them
    /// through once when `read_back`.
    fn lay_out(
        &mut self,
        f: &Self::File,
        name: &str,
        len: u64,
        read_back: bool,
    ) -> Result<(), IoError>;
    /// Creates a directory of nsperf's own for the metadata test.
    fn meta_dir(&mut self) -> Result<Self::Dir, IoError>;
    /// One metadata step on `name` in `dir` (`payload`: a created file's contents).
    fn meta(
        &mut self,
        dir: &Self::Dir,
        name: &str,
        op: MetaOp,
        payload: &[u8],
        rbuf: &mut [u8],
    ) -> Result<(), IoError>;
}

/// Runs `charwrite`, `charread` or `meta` against the target directory.
pub(super) fn run<R: RemoteFs>(cfg: &RunConfig, files: &mut R) -> Result<Outcomes, IoError> {
    let mut phases = Vec::new();
    let out = match cfg.workload {
        Workload::CharWrite => char_write(cfg, files)?,
        Workload::CharRead => char_read(cfg, files)?,
        Workload::Meta => meta(cfg, files, &mut phases)?,
        w => return Err(IoError::Config(format!("{w} is a record workload"))),
    };
    Ok((vec![out], phases, cfg.size_bytes, None))
}

fn char_write<R: RemoteFs>(cfg: &RunConfig, files: &mut R) -> Result<JobOutcome, IoError> {
    let (fh, name) = files.create_file("charwrite")?;
    let mut buf = vec![0u8; STDIO_BUF];
    let mut fill = 0usize;
    let mut off = 0u64;
    let mut c = Counter::new(Instant::now(), cfg.interval);
    let flush = |buf: &[u8], c: &mut Counter, files: &mut R, off: &mut u64| {
        let t0 = Instant::now();
        files.write_at(&fh, &name, *off, buf)?;
        let t1 = Instant::now();
        let lat = t1.duration_since(t0).as_nanos() as u64;
        c.op(DataOp::Write, buf.len() as u64, buf.len() as u64, lat, t1);
        *off += buf.len() as u64;
        Ok::<(), IoError>(())
    };
    for i in 0..cfg.size_bytes {
        buf[fill] = std::hint::black_box(i as u8);
        fill += 1;
        if fill == STDIO_BUF {
            flush(&buf, &mut c, files, &mut off)?;
            fill = 0;
            if nsperf_core::signal::interrupted() {
                c.out.interrupted = true;
                break;
            }
        }
    }
    if fill > 0 {
        flush(&buf[..fill], &mut c, files, &mut off)?;
    }
    if cfg.fsync != FsyncMode::None && files.needs_sync() {
        let t = Instant::now();
        files.sync(&fh, &name)?;
        c.out.fsync_ns = t.elapsed().as_nanos() as u64;
    }
    Ok(c.finish())
}

fn char_read<R: RemoteFs>(cfg: &RunConfig, files: &mut R) -> Result<JobOutcome, IoError> {
    let (fh, name) = files.create_file("charread")?;
    files.lay_out(
        &fh,
        &name,
        cfg.size_bytes,
        cfg.cache == CacheMode::RemoteWarm,
    )?;
    if cfg.drop_caches {
        crate::cache::drop_all_caches()?;
    }
    let mut buf = vec![0u8; STDIO_BUF];
    let mut c = Counter::new(Instant::now(), cfg.interval);
    let mut off = 0u64;
    let mut sum = 0u64;
    while off < cfg.size_bytes {
        let t0 = Instant::now();
        let (n, eof) = files.read_at(&fh, &name, off, &mut buf)?;
        let lat = t0.elapsed().as_nanos() as u64;
        for &b in &buf[..n] {
            sum = sum.wrapping_add(std::hint::black_box(b) as u64);
        }
        off += n as u64;
        c.op(DataOp::Read, n as u64, n as u64, lat, Instant::now());
        if n == 0 || eof || nsperf_core::signal::interrupted() {
            c.out.interrupted = nsperf_core::signal::interrupted();
            break;
        }
    }
    std::hint::black_box(sum);
    Ok(c.finish())
}

fn meta<R: RemoteFs>(
    cfg: &RunConfig,
    files: &mut R,
    phases: &mut Vec<Phase>,
) -> Result<JobOutcome, IoError> {
    let dir = files.meta_dir()?;
    let n = cfg.meta_files.max(1) as u64;
    let names: Vec<String> = (0..n).map(|i| format!("f{i:08}")).collect();
    let payload = vec![0x5au8; cfg.meta_file_bytes as usize];
    let mut rbuf = vec![0u8; cfg.meta_file_bytes.max(1) as usize];
    let mut c = Counter::new(Instant::now(), cfg.interval);
    for random in [false, true] {
        let seq: Vec<usize> = if random {
            let mut p = Permutation::new(n, cfg.seed);
            (0..n).map(|_| p.next_value() as usize).collect()
        } else {
            (0..n as usize).collect()
        };
        for op in [MetaOp::Create, MetaOp::Stat, MetaOp::Read, MetaOp::Delete] {
            let t_phase = Instant::now();
            let mut done = 0u64;
            for &i in &seq {
                if nsperf_core::signal::interrupted() {
                    c.out.interrupted = true;
                    break;
                }
                let t0 = Instant::now();
                files.meta(&dir, &names[i], op, &payload, &mut rbuf)?;
                let t1 = Instant::now();
                let bytes = if op == MetaOp::Create {
                    payload.len() as u64
                } else {
                    0
                };
                let kind = match op {
                    MetaOp::Create | MetaOp::Delete => DataOp::Write,
                    MetaOp::Stat | MetaOp::Read => DataOp::Read,
                };
                c.op(kind, bytes, 1, t1.duration_since(t0).as_nanos() as u64, t1);
                done += 1;
            }
            let el = t_phase.elapsed().as_secs_f64();
            phases.push(Phase {
                name: format!("{}_{}", op.name(), if random { "random" } else { "seq" }),
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
