//! The measured loop of one job, generic over the engine so the per-op path is
//! monomorphised: no allocation, no dynamic dispatch, two clock reads per op (one per batch
//! on queued engines).
//!
//! Interval accounting: an op counts in the interval in which it completed (fio's IOPS), and
//! its bytes over the time it was being moved — from its submission or the job's previous
//! completion, whichever is later, to its completion — so that no interval shows more than
//! crossed the wire or the device in it (a 1 MiB read that completes just after a boundary is
//! not counted whole in the next interval; summed over many clients of one port, counting at
//! completion put intervals a third above the port). Intervals are laid on a grid starting at
//! the common measuring start of all jobs, so the runner can add jobs' intervals index by
//! index. Ops that complete before that start (the `--ramp_time` warm-up) are done but not
//! counted, and a counted op's bytes are spread from that start at the earliest. Per op, the loop also paces (`--rate`), stamps or
//! checks the block (`--verify`) and publishes its totals to the live counters, each only
//! when asked for.

use nsperf_core::data_path::DataOp;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nsperf_core::stats::LatencyHistogram;

use crate::buffer::BufferPool;
use crate::config::{FsyncMode, RateLimit, RunConfig};
use crate::engine::{Completion, IoEngine};
use crate::live::{LatencyBuckets, LiveJob, live_latency_bucket};
use crate::pace::Pacer;
use crate::verify::{self, Tally};
use crate::workload::OpStream;

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
    /// Size-bound: this many measured ops; time-bound: `u64::MAX` and a deadline.
    pub ops: u64,
    /// fsync policy.
    pub fsync: FsyncMode,
    /// Rate limits of this job.
    pub rate: RateLimit,
    /// Seed of the `--verify` headers; `None`: blocks are neither stamped nor checked.
    pub verify_seed: Option<u64>,
}

impl JobPlan {
    /// Job `j` of `cfg`: its stream of ops from byte `base` of its file (`fd`, -1 for a
    /// network target's, `file_len` bytes long), `depth` ops in flight.
    pub fn of(cfg: &RunConfig, j: u32, fd: RawFd, file_len: u64, base: u64, depth: usize) -> Self {
        let bs = cfg.bs_bytes;
        let blocks = cfg.blocks();
        JobPlan {
            id: j,
            fd,
            file_len,
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
            depth,
            ops: if cfg.time_based { u64::MAX } else { blocks },
            fsync: cfg.fsync,
            rate: cfg.rate,
            verify_seed: cfg.verify.map(|_| cfg.seed),
        }
    }
}

/// When a job runs: it starts at `begin`, counts from `measure` (later than `begin` by the
/// ramp time), reports per `interval` and stops at `deadline` if one is set.
#[derive(Debug, Clone, Copy)]
pub struct JobClock {
    /// The first op may start.
    pub begin: Instant,
    /// Start of the measured part and of the interval grid.
    pub measure: Instant,
    /// Interval length.
    pub interval: Duration,
    /// No op starts after this.
    pub deadline: Option<Instant>,
}

impl JobClock {
    /// A clock without ramp: measuring starts at once.
    pub fn at(start: Instant, interval: Duration, deadline: Option<Instant>) -> Self {
        JobClock {
            begin: start,
            measure: start,
            interval,
            deadline,
        }
    }
}

/// The job's totals as the live counters show them.
impl LiveJob {
    #[inline]
    fn publish(&self, o: &JobOutcome) {
        self.read_bytes.store(o.read_bytes, Ordering::Relaxed);
        self.write_bytes.store(o.write_bytes, Ordering::Relaxed);
        self.ops.store(o.ops, Ordering::Relaxed);
        self.read_ops.store(o.read_ops, Ordering::Relaxed);
    }
}

/// Counters of one job.
#[derive(Debug, Clone)]
pub struct JobOutcome {
    /// Per-op latency of reads.
    pub read_hist: LatencyHistogram,
    /// Per-op latency of writes.
    pub write_hist: LatencyHistogram,
    /// `(bytes, ops)` per interval of the common grid.
    pub buckets: Vec<(u64, u64)>,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Ops completed.
    pub ops: u64,
    /// Read ops completed.
    pub read_ops: u64,
    /// When the job's measured pass started.
    pub start: Instant,
    /// When the job's last op (and final fsync) ended.
    pub end: Instant,
    /// Time in the final fsync.
    pub fsync_ns: u64,
    /// True when stopped by Ctrl-C.
    pub interrupted: bool,
    /// Blocks checked by `--verify` during the pass.
    pub verify: Tally,
    /// Ops completed including the unmeasured ramp.
    pub all_ops: u64,
}

impl JobOutcome {
    /// Empty counters of a pass starting at `start`.
    pub fn new(start: Instant) -> Self {
        JobOutcome {
            read_hist: LatencyHistogram::new(),
            write_hist: LatencyHistogram::new(),
            buckets: Vec::new(),
            read_bytes: 0,
            write_bytes: 0,
            ops: 0,
            read_ops: 0,
            start,
            end: start,
            fsync_ns: 0,
            interrupted: false,
            verify: Tally::default(),
            all_ops: 0,
        }
    }

    /// Counts one measured op.
    #[inline]
    pub fn count(&mut self, kind: DataOp, bytes: u64, lat_ns: u64) {
        match kind {
            DataOp::Read => {
                self.read_hist.record_ns(lat_ns);
                self.read_bytes += bytes;
                self.read_ops += 1;
            }
            DataOp::Write => {
                self.write_hist.record_ns(lat_ns);
                self.write_bytes += bytes;
            }
        }
        self.ops += 1;
    }

    /// Latency of all ops, reads and writes together.
    pub fn hist(&self) -> LatencyHistogram {
        let mut h = self.read_hist.clone();
        h.merge(&self.write_hist);
        h
    }
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
    start: Instant,
    next: Instant,
    interval: Duration,
    cur: (u64, u64),
    buckets: Vec<(u64, u64)>,
    /// The job's last counted completion: the earliest its next op's bytes can have moved.
    last_done: Instant,
}

impl Grid {
    fn new(start: Instant, interval: Duration, expect: usize) -> Self {
        Grid {
            start,
            next: start + interval,
            interval,
            cur: (0, 0),
            buckets: Vec::with_capacity(expect),
            last_done: start,
        }
    }

    /// Counts an op submitted at `from` that completed at `t` with `bytes`: the op in the
    /// interval of `t`, its bytes over `[max(from, last completion, start), t]` in proportion
    /// to the time each interval holds of it (the remainder of the integer shares in the
    /// interval of `t`, so every byte is counted once).
    #[inline]
    fn add(&mut self, from: Instant, t: Instant, bytes: u64, ops: u64) {
        while t >= self.next {
            self.buckets.push(self.cur);
            self.cur = (0, 0);
            self.next += self.interval;
        }
        let from = from.max(self.last_done).min(t);
        self.last_done = self.last_done.max(t);
        let cur_start = self.next - self.interval;
        self.cur.1 += ops;
        if from >= cur_start {
            self.cur.0 += bytes;
            return;
        }
        let span = t.duration_since(from).as_nanos();
        let mut left = bytes;
        let mut j = self.buckets.len();
        let mut end = cur_start;
        // Whole earlier intervals, back to the one `from` falls in.
        while end > from && j > 0 {
            j -= 1;
            let begin = self.start + self.interval * j as u32;
            let held = end.duration_since(begin.max(from)).as_nanos();
            let share = (bytes as u128 * held / span) as u64;
            self.buckets[j].0 += share.min(left);
            left -= share.min(left);
            end = begin;
        }
        self.cur.0 += left;
    }

    fn finish(mut self) -> Vec<(u64, u64)> {
        self.buckets.push(self.cur);
        self.buckets
    }
}

fn op_name(k: DataOp) -> &'static str {
    match k {
        DataOp::Read => "pread",
        DataOp::Write => "pwrite",
    }
}

/// What the loops share: the plan, the counters, the grid, the clock and the live totals.
struct Pass<'a> {
    plan: &'a mut JobPlan,
    out: &'a mut JobOutcome,
    grid: &'a mut Grid,
    clock: JobClock,
    pacer: Option<Pacer>,
    live: Option<&'a LiveJob>,
    /// This job's live latency (reads, writes), published to `live` as it changes.
    latency: [LatencyBuckets; 2],
}

impl Pass<'_> {
    /// Accounts one finished op; returns false when the pass must stop (deadline).
    #[inline]
    fn finished(&mut self, kind: DataOp, n: u64, t0: Instant, t1: Instant) -> bool {
        if let Some(p) = self.pacer.as_mut() {
            p.done(kind, n);
        }
        self.out.all_ops += 1;
        if t1 >= self.clock.measure {
            let ns = t1.duration_since(t0).as_nanos() as u64;
            self.out.count(kind, n, ns);
            self.grid.add(t0, t1, n, 1);
            if let Some(l) = self.live {
                l.publish(self.out);
                if l.with_latency {
                    let b = live_latency_bucket(ns);
                    self.latency[kind as usize].add(b, ns);
                    l.publish_latency(kind, b, &self.latency[kind as usize]);
                }
            }
        }
        self.clock.deadline.is_none_or(|d| t1 < d)
    }

    #[inline]
    fn check(&mut self, block: &[u8], offset: u64) {
        if let Some(seed) = self.plan.verify_seed {
            let r = verify::check(block, self.plan.bs, offset, seed);
            self.out.verify.record(offset, r);
        }
    }
}

/// Runs one job's measured pass on an attached engine.
pub fn run_job<E: IoEngine>(
    engine: &mut E,
    pool: &mut BufferPool,
    mut plan: JobPlan,
    clock: JobClock,
    live: Option<&LiveJob>,
) -> Result<JobOutcome, JobError> {
    engine
        .attach(plan.fd, plan.file_len, pool)
        .map_err(|source| JobError {
            what: "attach",
            source,
        })?;
    engine.measure_from(clock.measure, clock.interval, clock.deadline);
    let expect = clock
        .deadline
        .map(|d| {
            (d.saturating_duration_since(clock.measure).as_nanos()
                / clock.interval.as_nanos().max(1)) as usize
                + 2
        })
        .unwrap_or(64);
    let mut out = JobOutcome::new(clock.measure);
    let mut grid = Grid::new(clock.measure, clock.interval, expect);
    let pacer = Pacer::new(&plan.rate, clock.begin);
    let queued = engine.caps().queued && plan.depth > 1;
    let fsync_end = plan.fsync == FsyncMode::End;
    let mut pass = Pass {
        plan: &mut plan,
        out: &mut out,
        grid: &mut grid,
        clock,
        pacer,
        live,
        latency: [LatencyBuckets::default(); 2],
    };
    let r = if queued {
        queued_loop(engine, pool, &mut pass)
    } else {
        sync_loop(engine, pool, &mut pass)
    };
    let r = r.and_then(|()| {
        if fsync_end && out.write_bytes > 0 {
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

fn sync_loop<E: IoEngine>(
    engine: &mut E,
    pool: &mut BufferPool,
    pass: &mut Pass<'_>,
) -> Result<(), JobError> {
    let bs = pass.plan.bs;
    let buf = pool.buf(0, bs);
    let each = pass.plan.fsync == FsyncMode::Each;
    let seed = pass.plan.verify_seed;
    while pass.out.ops < pass.plan.ops {
        if nsperf_core::signal::interrupted() {
            pass.out.interrupted = true;
            break;
        }
        let (kind, off) = pass.plan.stream.next_op();
        if let Some(p) = pass.pacer.as_mut() {
            if !p.wait(kind, pass.clock.deadline) {
                pass.out.interrupted |= nsperf_core::signal::interrupted();
                break;
            }
        }
        if let (Some(seed), DataOp::Write) = (seed, kind) {
            verify::stamp(buf, off, seed);
        }
        let t0 = Instant::now();
        let r = engine.submit_sync(kind, off, buf);
        let r = match (r, each && kind == DataOp::Write) {
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
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(source) => {
                return Err(JobError {
                    what: op_name(kind),
                    source,
                });
            }
        };
        if kind == DataOp::Read {
            pass.check(&buf[..n], off);
        }
        if !pass.finished(kind, n as u64, t0, t1) {
            break;
        }
    }
    Ok(())
}

fn queued_loop<E: IoEngine>(
    engine: &mut E,
    pool: &mut BufferPool,
    pass: &mut Pass<'_>,
) -> Result<(), JobError> {
    let depth = pass.plan.depth;
    let bs = pass.plan.bs;
    let seed = pass.plan.verify_seed;
    let mut issued_at = vec![Instant::now(); depth];
    let mut ops_of = vec![(DataOp::Read, 0u64); depth];
    let mut free: Vec<u32> = (0..depth as u32).rev().collect();
    let mut done: Vec<Completion> = Vec::with_capacity(depth * 2);
    let mut batch: Vec<u32> = Vec::with_capacity(depth);
    let mut inflight = 0usize;
    let mut stopping = false;
    // An op drawn from the stream but not yet due (rate limit): issued first next time.
    let mut held: Option<(DataOp, u64)> = None;
    let each = pass.plan.fsync == FsyncMode::Each;
    loop {
        batch.clear();
        // Ramp ops are not counted in `out.ops`: issue until the measured ops are done.
        while !stopping && inflight < depth && pass.out.ops + (inflight as u64) < pass.plan.ops {
            let Some(&slot) = free.last() else { break };
            let (kind, off) = held.take().unwrap_or_else(|| pass.plan.stream.next_op());
            if let Some(p) = pass.pacer.as_mut() {
                if p.due(kind) > Instant::now() {
                    if inflight > 0 {
                        held = Some((kind, off));
                        break;
                    }
                    if !p.wait(kind, pass.clock.deadline) {
                        pass.out.interrupted |= nsperf_core::signal::interrupted();
                        stopping = true;
                        break;
                    }
                }
            }
            free.pop();
            if let (Some(seed), DataOp::Write) = (seed, kind) {
                verify::stamp(pool.buf(slot as usize, bs), off, seed);
            }
            engine
                .queue(kind, off, bs, slot)
                .map_err(|source| JobError {
                    what: engine.queue_name(kind),
                    source,
                })?;
            ops_of[slot as usize] = (kind, off);
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
                pass.out.interrupted = true;
                stopping = true;
                continue;
            }
            Err(source) => {
                return Err(JobError {
                    what: engine.reap_name(),
                    source,
                });
            }
        }
        let t1 = Instant::now();
        for c in &done {
            let slot = c.slot as usize;
            inflight -= 1;
            free.push(c.slot);
            let (kind, off) = ops_of[slot];
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
            if each && kind == DataOp::Write {
                engine.sync_file().map_err(|source| JobError {
                    what: "fsync",
                    source,
                })?;
            }
            let n = c.result as usize;
            if kind == DataOp::Read && seed.is_some() {
                pass.check(&pool.buf(slot, bs)[..n.min(bs)], off);
            }
            if !pass.finished(kind, n as u64, issued_at[slot], t1) {
                stopping = true;
            }
        }
        if !stopping && pass.out.ops >= pass.plan.ops {
            stopping = true;
        }
        if nsperf_core::signal::interrupted() {
            pass.out.interrupted = true;
            stopping = true;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn an_op_spanning_intervals_counts_its_bytes_over_them_and_itself_once() {
        let t = Instant::now();
        let mut g = Grid::new(t, 100 * MS, 4);
        // 1000 bytes moved from 50 ms to 250 ms: a quarter, a half, a quarter.
        g.add(t + 50 * MS, t + 250 * MS, 1000, 1);
        assert_eq!(g.finish(), vec![(250, 0), (500, 0), (250, 1)]);
    }

    #[test]
    fn the_next_op_moves_after_the_previous_completion() {
        let t = Instant::now();
        let mut g = Grid::new(t, 100 * MS, 4);
        // Two ops queued at once: the first takes the wire until 90 ms, the second after.
        g.add(t, t + 90 * MS, 900, 1);
        g.add(t, t + 190 * MS, 1000, 1);
        assert_eq!(g.finish(), vec![(900 + 100, 1), (900, 1)]);
    }

    #[test]
    fn bytes_before_the_measured_start_are_not_spread_before_it() {
        let t = Instant::now();
        let mut g = Grid::new(t + 100 * MS, 100 * MS, 4);
        g.add(t, t + 150 * MS, 700, 1);
        g.add(t + 150 * MS, t + 150 * MS, 5, 1);
        let b = g.finish();
        assert_eq!(b, vec![(705, 2)]);
    }

    #[test]
    fn shares_always_add_up_to_the_bytes() {
        let t = Instant::now();
        let mut g = Grid::new(t, 7 * MS, 4);
        let mut total = 0;
        for k in 1..200u64 {
            let bytes = k * 4093 % 100_003;
            g.add(t + MS * (k as u32 % 13), t + MS * k as u32 * 3, bytes, 1);
            total += bytes;
        }
        let b = g.finish();
        assert_eq!(b.iter().map(|x| x.0).sum::<u64>(), total);
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 199);
    }
}
