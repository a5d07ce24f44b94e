//! The jobs' counters turned into the report's intervals and summary.

use nsperf_core::report::CpuInterval;
use nsperf_core::stats::{LatencyHistogram, LatencySummary};

use crate::config::RunConfig;
use crate::job::JobOutcome;
use crate::result::{DirectionSummary, IoInterval, IoSummary};

/// Fills the CPU figures of the summary from the interval samples.
pub(crate) fn fill_cpu(s: &mut IoSummary, cpu: &[CpuInterval]) {
    let total: f64 = cpu.iter().map(|c| c.length_s).sum();
    if total <= 0.0 {
        return;
    }
    let w = |f: &dyn Fn(&CpuInterval) -> f64| {
        cpu.iter().map(|c| f(c) * c.length_s).sum::<f64>() / total
    };
    s.cpu_process_pct = w(&|c| c.cpu.process_pct);
    s.cpu_busiest_core_pct = w(&|c| c.cpu.busiest().map(|b| b.busy_pct).unwrap_or(0.0));
}

/// Sums the jobs' interval grids and histograms into the report's intervals and summary.
pub(crate) fn aggregate(
    cfg: &RunConfig,
    outs: &[JobOutcome],
    close_ns: u64,
) -> (Vec<IoInterval>, IoSummary) {
    let mut s = IoSummary {
        workload: cfg.workload,
        cache: cfg.cache,
        close_ns,
        ..Default::default()
    };
    let Some(start) = outs.iter().map(|o| o.start).min() else {
        return (Vec::new(), s);
    };
    let end = outs.iter().map(|o| o.end).max().unwrap_or(start);
    let run_s = end.duration_since(start).as_secs_f64();
    let intervals = intervals(cfg, outs, run_s);
    let mut read = LatencyHistogram::new();
    let mut write = LatencyHistogram::new();
    let mut read_ops = 0;
    for o in outs {
        read.merge(&o.read_hist);
        write.merge(&o.write_hist);
        s.read_bytes += o.read_bytes;
        s.write_bytes += o.write_bytes;
        s.ops += o.ops;
        read_ops += o.read_ops;
        s.fsync_ns = s.fsync_ns.max(o.fsync_ns);
        s.interrupted |= o.interrupted;
    }
    s.bytes = s.read_bytes + s.write_bytes;
    s.elapsed_s = run_s + close_ns as f64 / 1e9;
    let per_s = |x: f64| {
        if s.elapsed_s > 0.0 {
            x / s.elapsed_s
        } else {
            0.0
        }
    };
    s.throughput_bytes_per_s = per_s(s.bytes as f64);
    s.iops = per_s(s.ops as f64);
    let direction = |bytes: u64, ops: u64, h: &LatencyHistogram| {
        (ops > 0).then(|| DirectionSummary {
            bytes,
            ops,
            throughput_bytes_per_s: per_s(bytes as f64),
            iops: per_s(ops as f64),
            latency: h.summary(),
        })
    };
    s.read = direction(s.read_bytes, read_ops, &read);
    s.write = direction(s.write_bytes, s.ops - read_ops, &write);
    let iv = cfg.interval.as_secs_f64();
    let n = intervals.iter().filter(|x| x.job.is_none()).count();
    // The peak ignores a short trailing partial interval, whose rate is noise.
    s.peak_interval_bytes_per_s = intervals
        .iter()
        .filter(|x| x.job.is_none() && (x.length_s >= iv * 0.5 || n == 1))
        .map(|x| x.throughput_bytes_per_s)
        .fold(0.0, f64::max);
    read.merge(&write);
    set_latency(&mut s, &read.summary());
    (intervals, s)
}

fn set_latency(s: &mut IoSummary, l: &LatencySummary) {
    s.lat_count = l.count;
    s.lat_min_ns = l.min_ns;
    s.lat_mean_ns = l.mean_ns;
    s.lat_p50_ns = l.p50_ns;
    s.lat_p90_ns = l.p90_ns;
    s.lat_p99_ns = l.p99_ns;
    s.lat_p999_ns = l.p999_ns;
    s.lat_max_ns = l.max_ns;
}

/// The aggregate intervals, then per job when there are several jobs.
fn intervals(cfg: &RunConfig, outs: &[JobOutcome], run_s: f64) -> Vec<IoInterval> {
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
    let mut out = Vec::with_capacity(n * (1 + outs.len()));
    for i in 0..n {
        let (b, o) = folded
            .iter()
            .filter_map(|x| x.get(i))
            .fold((0, 0), |a, &(b, o)| (a.0 + b, a.1 + o));
        out.push(mk(None, i, b, o));
    }
    if outs.len() > 1 {
        for (j, f) in folded.iter().enumerate() {
            for (i, &(b, o)) in f.iter().enumerate() {
                out.push(mk(Some(j as u32), i, b, o));
            }
        }
    }
    out
}
