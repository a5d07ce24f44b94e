//! The figures of `nsperf io run`, from the engine's once-per-interval samples of its jobs'
//! live counters (the status line and the `--json-stream` lines read the same samples).

use std::sync::{Arc, Mutex};

use nsperf_io::{JobProgress, LIVE_LATENCY_BOUNDS_NS, LatencyBuckets, Progress};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::{Family, Labels, bytes_per_second};

#[derive(Debug, Default)]
struct State {
    /// Each job's totals at the last sample.
    jobs: Vec<JobProgress>,
    /// Each job's bytes per second over the last interval: (read, write).
    rates: Vec<(f64, f64)>,
    /// Each job's ops per second over the last interval: (read, write).
    op_rates: Vec<(f64, f64)>,
    /// Time of the last sample (`None` before the first).
    elapsed_s: Option<f64>,
    intervals: u64,
}

/// The live figures of one `nsperf io run` (shared with the endpoint).
#[derive(Debug, Clone, Default)]
pub struct IoMetrics {
    state: Arc<Mutex<State>>,
}

impl IoMetrics {
    /// Takes in a sample.
    pub fn sample(&self, p: &Progress) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let len = (p.elapsed_s - s.elapsed_s.unwrap_or(p.begin_s)).max(1e-9);
        let per_s = |now: u64, before: u64| now.saturating_sub(before) as f64 / len;
        let before = std::mem::take(&mut s.jobs);
        s.rates.clear();
        s.op_rates.clear();
        for (i, j) in p.jobs.iter().enumerate() {
            let b = before.get(i).copied().unwrap_or_default();
            s.rates.push((
                per_s(j.read_bytes, b.read_bytes),
                per_s(j.write_bytes, b.write_bytes),
            ));
            s.op_rates.push((
                per_s(j.read_ops, b.read_ops),
                per_s(j.write_ops, b.write_ops),
            ));
        }
        s.jobs = p.jobs.clone();
        s.elapsed_s = Some(p.elapsed_s);
        s.intervals += 1;
    }
}

fn labels(job: usize, op: &str) -> Labels {
    vec![("job", job.to_string()), ("op", op.to_string())]
}

/// `(read, write)` of a job's figure, each with its `op` label.
fn both<T: Copy>(job: usize, (r, w): (T, T)) -> [(Labels, T); 2] {
    [(labels(job, "read"), r), (labels(job, "write"), w)]
}

/// A histogram's per-bucket counts with their bounds in seconds (the last one infinite).
fn buckets(l: &LatencyBuckets) -> Vec<(f64, u64)> {
    LIVE_LATENCY_BOUNDS_NS
        .iter()
        .map(|&b| b as f64 / 1e9)
        .chain([f64::INFINITY])
        .zip(l.counts)
        .collect()
}

impl Collector for IoMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let Ok(s) = self.state.lock() else {
            return Ok(());
        };
        let (bytes, seconds, bps) = (Unit::Bytes, Unit::Seconds, bytes_per_second());
        let mut f = Family::new(
            &mut enc,
            "nsperf_io",
            "Measured bytes per job and direction",
            Some(&bytes),
            MetricType::Counter,
        )?;
        for (i, j) in s.jobs.iter().enumerate() {
            for (l, v) in both(i, (j.read_bytes, j.write_bytes)) {
                f.counter(&l, v)?;
            }
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_io_ops",
            "Measured I/O operations per job and direction",
            None,
            MetricType::Counter,
        )?;
        for (i, j) in s.jobs.iter().enumerate() {
            for (l, v) in both(i, (j.read_ops, j.write_ops)) {
                f.counter(&l, v)?;
            }
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_io_throughput",
            "Throughput per job and direction over the last interval",
            Some(&bps),
            MetricType::Gauge,
        )?;
        for (i, r) in s.rates.iter().enumerate() {
            for (l, v) in both(i, *r) {
                f.gauge(&l, v)?;
            }
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_io_iops",
            "I/O operations per second per job and direction over the last interval",
            None,
            MetricType::Gauge,
        )?;
        for (i, r) in s.op_rates.iter().enumerate() {
            for (l, v) in both(i, *r) {
                f.gauge(&l, v)?;
            }
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_io_latency",
            "Latency of each measured operation per job and direction",
            Some(&seconds),
            MetricType::Histogram,
        )?;
        for (i, j) in s.jobs.iter().enumerate() {
            for (l, h) in both(i, (&j.read_latency, &j.write_latency)) {
                f.histogram(&l, h.sum_ns as f64 / 1e9, h.count(), &buckets(h))?;
            }
        }
        Family::new(
            &mut enc,
            "nsperf_io_intervals",
            "Intervals sampled",
            None,
            MetricType::Counter,
        )?
        .counter(&Vec::new(), s.intervals)?;
        Family::new(
            &mut enc,
            "nsperf_io_elapsed",
            "Time since measuring started at the last sample (negative during --ramp_time)",
            Some(&seconds),
            MetricType::Gauge,
        )?
        .gauge(&Vec::new(), s.elapsed_s.unwrap_or(0.0))
    }
}
