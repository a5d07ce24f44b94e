//! The bonnie++-style workloads over NFS: per-character output and input through a 4 KiB
//! stdio-like buffer (one WRITE or READ RPC per 4 KiB), and the metadata test (CREATE,
//! LOOKUP, READ, REMOVE of many small files in a directory of nsperf's own, in sequential
//! then random order).

use std::time::Instant;

use nsperf_nfs::{NfsError, Stable};

use super::{Outcomes, RemoteFiles, stable_of};
use crate::config::{CacheMode, FsyncMode, RunConfig};
use crate::error::IoError;
use crate::job::JobOutcome;
use crate::result::Phase;
use crate::rng::Permutation;
use crate::suite::{Counter, STDIO_BUF};
use crate::workload::{OpKind, Workload};

/// Runs `charwrite`, `charread` or `meta` against the target directory.
pub(super) fn run(cfg: &RunConfig, files: &mut RemoteFiles) -> Result<Outcomes, IoError> {
    let mut phases = Vec::new();
    let out = match cfg.workload {
        Workload::CharWrite => char_write(cfg, files)?,
        Workload::CharRead => char_read(cfg, files)?,
        Workload::Meta => meta(cfg, files, &mut phases)?,
        w => return Err(IoError::Config(format!("{w} is a record workload"))),
    };
    Ok((vec![out], phases, cfg.size_bytes))
}

fn char_write(cfg: &RunConfig, files: &mut RemoteFiles) -> Result<JobOutcome, IoError> {
    let (fh, name) = files.create("charwrite")?;
    let stable = stable_of(cfg);
    let mut buf = vec![0u8; STDIO_BUF];
    let mut fill = 0usize;
    let mut off = 0u64;
    let mut c = Counter::new(Instant::now(), cfg.interval);
    let flush = |buf: &[u8],
                 c: &mut Counter,
                 files: &mut RemoteFiles,
                 off: &mut u64|
     -> Result<(), IoError> {
        let t0 = Instant::now();
        files.session.client.write(&fh, &name, *off, buf, stable)?;
        let t1 = Instant::now();
        let lat = t1.duration_since(t0).as_nanos() as u64;
        c.op(OpKind::Write, buf.len() as u64, buf.len() as u64, lat, t1);
        *off += buf.len() as u64;
        Ok(())
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
    if cfg.fsync != FsyncMode::None && stable == Stable::Unstable {
        let t = Instant::now();
        files.session.client.commit(&fh, &name)?;
        c.out.fsync_ns = t.elapsed().as_nanos() as u64;
    }
    Ok(c.finish())
}

fn char_read(cfg: &RunConfig, files: &mut RemoteFiles) -> Result<JobOutcome, IoError> {
    let (fh, name) = files.create("charread")?;
    let path = files.path(&name);
    let t = super::Transfer::new(files);
    super::transfer(t, fh, cfg.size_bytes, nsperf_nfs::DataOp::Write, &path)?;
    if cfg.cache == CacheMode::RemoteWarm {
        super::transfer(t, fh, cfg.size_bytes, nsperf_nfs::DataOp::Read, &path)?;
    }
    if cfg.drop_caches {
        crate::cache::drop_all_caches()?;
    }
    let mut buf = vec![0u8; STDIO_BUF];
    let mut c = Counter::new(Instant::now(), cfg.interval);
    let mut off = 0u64;
    let mut sum = 0u64;
    while off < cfg.size_bytes {
        let t0 = Instant::now();
        let (n, eof) = files.session.client.read(&fh, &name, off, &mut buf)?;
        let lat = t0.elapsed().as_nanos() as u64;
        for &b in &buf[..n] {
            sum = sum.wrapping_add(std::hint::black_box(b) as u64);
        }
        off += n as u64;
        c.op(OpKind::Read, n as u64, n as u64, lat, Instant::now());
        if n == 0 || eof || nsperf_core::signal::interrupted() {
            c.out.interrupted = nsperf_core::signal::interrupted();
            break;
        }
    }
    std::hint::black_box(sum);
    Ok(c.finish())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MetaOp {
    Create,
    Stat,
    Read,
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

fn meta(
    cfg: &RunConfig,
    files: &mut RemoteFiles,
    phases: &mut Vec<Phase>,
) -> Result<JobOutcome, IoError> {
    let (dir, _) = files.mkdir("meta")?;
    let n = cfg.meta_files.max(1) as u64;
    let names: Vec<String> = (0..n).map(|i| format!("f{i:08}")).collect();
    let payload = vec![0x5au8; cfg.meta_file_bytes as usize];
    let mut rbuf = vec![0u8; cfg.meta_file_bytes.max(1) as usize];
    let mut c = Counter::new(Instant::now(), cfg.interval);
    let stable = stable_of(cfg);
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
                let name = &names[i];
                let cl = &mut files.session.client;
                let t0 = Instant::now();
                let r: Result<(), NfsError> = match op {
                    MetaOp::Create => cl.create(&dir, name).and_then(|fh| {
                        if payload.is_empty() {
                            Ok(())
                        } else {
                            cl.write(&fh, name, 0, &payload, stable).map(|_| ())
                        }
                    }),
                    MetaOp::Stat => cl.lookup(&dir, name).map(|_| ()),
                    MetaOp::Read => cl
                        .lookup(&dir, name)
                        .and_then(|(fh, _)| cl.read(&fh, name, 0, &mut rbuf).map(|_| ())),
                    MetaOp::Delete => cl.remove(&dir, name),
                };
                let t1 = Instant::now();
                r?;
                match op {
                    MetaOp::Create => files.adopt(dir, name.clone()),
                    MetaOp::Delete => files.removed(&dir, name),
                    _ => {}
                }
                let bytes = if op == MetaOp::Create {
                    payload.len() as u64
                } else {
                    0
                };
                let kind = match op {
                    MetaOp::Create | MetaOp::Delete => OpKind::Write,
                    MetaOp::Stat | MetaOp::Read => OpKind::Read,
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
