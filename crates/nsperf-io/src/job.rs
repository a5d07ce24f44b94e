//! The measured loop of one job, generic over the engine so the per-op path is
//! monomorphised: no allocation, no dynamic dispatch, two clock reads per op (one per batch
//! on queued engines).
//!
//! Interval accounting: an op belongs to the interval in which it completed; intervals are
//! laid on a grid starting at the common `start` of all jobs, so the runner can add jobs'
//! intervals index by index.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use nsperf_core::stats::LatencyHistogram;

use crate::buffer::BufferPool;
use crate::config::FsyncMode;
use crate::engine::{Completion, IoEngine};
use crate::workload::{OpKind, OpStream};

/// What one job does in the measured pass.
#[derive(Debug, Clone)]
pub struct JobPlan {
    /// Job number.
    pub id: u32,
    /// File descriptor of its file (or of the shared file).
    pub fd: RawFd,
    /// Length of that file in bytes (for engines that map it).
    pub file_len: u64,
    /// The offsets and directions.
    pub stream: OpStream,
    /// Record size.
    pub bs: usize,
    /// Ops in flight (1 for synchronous engines).
    pub depth: usize,
    /// Size-bound: this many ops; time-bound: `u64::MAX` and a deadline.
    pub ops: u64,
    /// fsync policy.
    pub fsync: FsyncMode,
}

/// Counters of one job.
#[derive(Debug, Clone)]
pub struct JobOutcome {
    /// Per-op latency.
    pub hist: LatencyHistogram,
    /// `(bytes, ops)` per interval of the common grid.
    pub buckets: Vec<(u64, u64)>,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Ops completed.
    pub ops: u64,
    /// When the job's measured pass started.
    pub start: Instant,
    /// When the job's last op (and final fsync) ended.
    pub end: Instant,
    /// Time in the final fsync.
    pub fsync_ns: u64,
    /// True when stopped by Ctrl-C.
    pub interrupted: bool,
}

/// A failed op: what was done, at which offset, and the error.
#[derive(Debug)]
pub struct JobError {
    /// `pread`, `pwrite`, `fsync`, `attach`.
    pub what: &'static str,
    /// The error.
    pub source: std::io::Error,
}

struct Grid {
    next: Instant,
    interval: Duration,
    cur: (u64, u64),
    buckets: Vec<(u64, u64)>,
}

impl Grid {
    fn new(start: Instant, interval: Duration, expect: usize) -> Self {
        Grid {
            next: start + interval,
            interval,
            cur: (0, 0),
            buckets: Vec::with_capacity(expect),
        }
    }

    #[inline]
    fn add(&mut self, t: Instant, bytes: u64, ops: u64) {
        while t >= self.next {
            self.buckets.push(self.cur);
            self.cur = (0, 0);
            self.next += self.interval;
        }
        self.cur.0 += bytes;
        self.cur.1 += ops;
    }

    fn finish(mut self) -> Vec<(u64, u64)> {
        self.buckets.push(self.cur);
        self.buckets
    }
}

fn op_name(k: OpKind) -> &'static str {
    match k {
        OpKind::Read => "pread",
        OpKind::Write => "pwrite",
    }
}

/// Runs one job's measured pass on an attached engine.
pub fn run_job<E: IoEngine>(
    engine: &mut E,
    pool: &mut BufferPool,
    mut plan: JobPlan,
    start: Instant,
    interval: Duration,
    deadline: Option<Instant>,
) -> Result<JobOutcome, JobError> {
    engine
        .attach(plan.fd, plan.file_len, pool)
        .map_err(|source| JobError {
            what: "attach",
            source,
        })?;
    let expect = deadline
        .map(|d| {
            (d.saturating_duration_since(start).as_nanos() / interval.as_nanos().max(1)) as usize
                + 2
        })
        .unwrap_or(64);
    let mut out = JobOutcome {
        hist: LatencyHistogram::new(),
        buckets: Vec::new(),
        read_bytes: 0,
        write_bytes: 0,
        ops: 0,
        start,
        end: start,
        fsync_ns: 0,
        interrupted: false,
    };
    let mut grid = Grid::new(start, interval, expect);
    let r = if engine.caps().queued && plan.depth > 1 {
        queued_loop(engine, &mut plan, &mut out, &mut grid, deadline)
    } else {
        sync_loop(engine, pool, &mut plan, &mut out, &mut grid, deadline)
    };
    let r = r.and_then(|()| {
        if plan.fsync == FsyncMode::End && out.write_bytes > 0 {
            let t = Instant::now();
            engine.sync_file().map_err(|source| JobError {
                what: "fsync",
                source,
            })?;
            out.fsync_ns = t.elapsed().as_nanos() as u64;
        }
        Ok(())
    });
    out.end = Instant::now();
    engine.detach();
    r?;
    out.buckets = grid.finish();
    Ok(out)
}

#[inline]
fn stop_now(t: Instant, deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| t >= d)
}

fn sync_loop<E: IoEngine>(
    engine: &mut E,
    pool: &mut BufferPool,
    plan: &mut JobPlan,
    out: &mut JobOutcome,
    grid: &mut Grid,
    deadline: Option<Instant>,
) -> Result<(), JobError> {
    let buf = pool.buf(0, plan.bs);
    let each = plan.fsync == FsyncMode::Each;
    for _ in 0..plan.ops {
        if nsperf_core::signal::interrupted() {
            out.interrupted = true;
            break;
        }
        let (kind, off) = plan.stream.next_op();
        let t0 = Instant::now();
        let r = engine.submit_sync(kind, off, buf);
        let r = match (r, each && kind == OpKind::Write) {
            (Ok(n), true) => engine.sync_file().map(|()| n),
            (r, _) => r,
        };
        let t1 = Instant::now();
        let n = match r {
            Ok(0) => {
                return Err(JobError {
                    what: op_name(kind),
                    source: std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                });
            }
            Ok(n) => n as u64,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(source) => {
                return Err(JobError {
                    what: op_name(kind),
                    source,
                });
            }
        };
        out.hist.record_ns(t1.duration_since(t0).as_nanos() as u64);
        match kind {
            OpKind::Read => out.read_bytes += n,
            OpKind::Write => out.write_bytes += n,
        }
        out.ops += 1;
        grid.add(t1, n, 1);
        if stop_now(t1, deadline) {
            break;
        }
    }
    Ok(())
}

fn queued_loop<E: IoEngine>(
    engine: &mut E,
    plan: &mut JobPlan,
    out: &mut JobOutcome,
    grid: &mut Grid,
    deadline: Option<Instant>,
) -> Result<(), JobError> {
    let depth = plan.depth;
    let mut issued_at = vec![Instant::now(); depth];
    let mut kinds = vec![OpKind::Read; depth];
    let mut free: Vec<u32> = (0..depth as u32).rev().collect();
    let mut done: Vec<Completion> = Vec::with_capacity(depth * 2);
    let mut batch: Vec<u32> = Vec::with_capacity(depth);
    let mut issued = 0u64;
    let mut inflight = 0usize;
    let mut stopping = false;
    let each = plan.fsync == FsyncMode::Each;
    loop {
        batch.clear();
        while !stopping && inflight < depth && issued < plan.ops {
            let Some(slot) = free.pop() else { break };
            let (kind, off) = plan.stream.next_op();
            engine
                .queue(kind, off, plan.bs, slot)
                .map_err(|source| JobError {
                    what: op_name(kind),
                    source,
                })?;
            kinds[slot as usize] = kind;
            issued += 1;
            inflight += 1;
            batch.push(slot);
        }
        if !batch.is_empty() {
            // One clock read per batch: the batch is handed to the kernel by reap() below.
            let t = Instant::now();
            for &s in &batch {
                issued_at[s as usize] = t;
            }
        }
        if inflight == 0 {
            break;
        }
        done.clear();
        match engine.reap(1, &mut done) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                out.interrupted = true;
                stopping = true;
                continue;
            }
            Err(source) => {
                return Err(JobError {
                    what: "io_uring_enter",
                    source,
                });
            }
        }
        let t1 = Instant::now();
        for c in &done {
            let slot = c.slot as usize;
            inflight -= 1;
            free.push(c.slot);
            let kind = kinds[slot];
            if c.result <= 0 {
                let source = if c.result == 0 {
                    std::io::Error::from(std::io::ErrorKind::UnexpectedEof)
                } else {
                    std::io::Error::from_raw_os_error(-c.result)
                };
                return Err(JobError {
                    what: op_name(kind),
                    source,
                });
            }
            if each && kind == OpKind::Write {
                engine.sync_file().map_err(|source| JobError {
                    what: "fsync",
                    source,
                })?;
            }
            let n = c.result as u64;
            out.hist
                .record_ns(t1.duration_since(issued_at[slot]).as_nanos() as u64);
            match kind {
                OpKind::Read => out.read_bytes += n,
                OpKind::Write => out.write_bytes += n,
            }
            out.ops += 1;
            grid.add(t1, n, 1);
        }
        if nsperf_core::signal::interrupted() {
            out.interrupted = true;
            stopping = true;
        }
        if stop_now(t1, deadline) {
            stopping = true;
        }
    }
    Ok(())
}
