//! What the figures of an I/O run mean, in plain sentences with their evidence.

use nsperf_core::report::{CpuInterval, Finding, Severity, cpu_bound_finding};
use nsperf_core::units::Bytes;

use crate::config::{CacheMode, FsyncMode, RunConfig};
use crate::fsinfo::FsInfo;
use crate::result::IoSummary;
use crate::stale::StaleFile;

/// A measured pass shorter than this is flagged: start-up, one scheduler stall or one burst
/// of writeback weigh too much on it, and the CPU figures (10 ms ticks) say nothing.
pub const MIN_MEANINGFUL_S: f64 = 1.0;

/// Facts about the run that are not in the config or summary.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    /// Total bytes of the files worked on.
    pub file_bytes: u64,
    /// Why the asked engine was replaced, if it was.
    pub engine_fallback: Option<String>,
    /// True when the target is a device (no page-cache advice about files).
    pub device: bool,
    /// The target's file system when the run ended (compared with `summary.target_fs`).
    pub fs_after: Option<FsInfo>,
    /// Stale nsperf files found in the directory, and whether they were removed.
    pub stale: Vec<StaleFile>,
    /// True when the stale files were removed (`--clean`).
    pub stale_removed: bool,
}

/// The findings of one run.
pub fn findings(
    cfg: &RunConfig,
    s: &IoSummary,
    cpu: &[CpuInterval],
    facts: &RunFacts,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(why) = &facts.engine_fallback {
        out.push(Finding::new(
            "engine_fallback",
            Severity::Warning,
            why.clone(),
        ));
    }
    if s.engine == "null" {
        out.push(Finding::new(
            "null_engine",
            Severity::Info,
            "null engine: no I/O was done; the figures are nsperf's own per-op overhead",
        ));
    }
    out.extend(stale_findings(facts));
    let reads = s.read_bytes > 0;
    let mem = &s.memory;
    let warm_avail = mem
        .cache_usable_bytes
        .filter(|_| cfg.cache == CacheMode::Warm && reads && !facts.device);
    if let Some(avail) = warm_avail.filter(|&a| facts.file_bytes <= a) {
        out.push(
            Finding::new(
                "page_cache_read",
                Severity::Info,
                format!(
                    "the {} of data fit in {}: warm reads measure the page cache, not the device; use --cache cold or --cache direct for the device",
                    Bytes(facts.file_bytes),
                    mem.describe()
                ),
            )
            .with("file_bytes", facts.file_bytes as f64)
            .with("cache_usable_bytes", avail as f64),
        );
    }
    if let Some(avail) = warm_avail.filter(|&a| facts.file_bytes > a) {
        out.push(
            Finding::new(
                "page_cache_cliff",
                Severity::Warning,
                format!(
                    "the {} of data exceed {}: reads past the page cache go to the device, expect a throughput cliff",
                    Bytes(facts.file_bytes),
                    mem.describe()
                ),
            )
            .with("file_bytes", facts.file_bytes as f64)
            .with("cache_usable_bytes", avail as f64),
        );
    }
    short_pass(s, &mut out);
    crate::findings_fs::fs_findings(cfg, s, facts, &mut out);
    verify_findings(s, &mut out);
    let remote = cfg.target.is_remote();
    if s.write_bytes > 0
        && cfg.fsync == FsyncMode::None
        && cfg.cache != CacheMode::Direct
        && !remote
    {
        out.push(Finding::new(
            "writes_not_durable",
            Severity::Info,
            "writes ended in the page cache (--fsync none): add --fsync end to include writing the data back to the device",
        ));
    }
    if s.fsync_ns > 0 && s.elapsed_s > 0.0 {
        let share = s.fsync_ns as f64 / 1e9 / s.elapsed_s * 100.0;
        if share >= 50.0 {
            out.push(
                Finding::new(
                    "fsync_dominates",
                    Severity::Info,
                    format!("the final fsync took {share:.0} % of the measured time: the device, not the page cache, set the write speed"),
                )
                .with("fsync_share_pct", share),
            );
        }
    }
    if s.lat_count >= 1000 && s.lat_p50_ns > 0 && s.lat_p999_ns > 50 * s.lat_p50_ns {
        out.push(
            Finding::new(
                "latency_tail",
                Severity::Warning,
                format!(
                    "p99.9 latency {:.1} µs is {:.0}× the median ({:.1} µs): a few ops stall (writeback, reclaim, device queue, CPU contention)",
                    s.lat_p999_ns as f64 / 1e3,
                    s.lat_p999_ns as f64 / s.lat_p50_ns as f64,
                    s.lat_p50_ns as f64 / 1e3
                ),
            )
            .with("lat_p50_ns", s.lat_p50_ns as f64)
            .with("lat_p999_ns", s.lat_p999_ns as f64),
        );
    }
    // A busy core means little unless nsperf itself kept it busy (other load shows too).
    // CPU figures come in clock ticks (10 ms): runs shorter than half a second say nothing.
    let samples: Vec<_> = cpu.iter().map(|c| c.cpu.clone()).collect();
    let sampled_s: f64 = cpu.iter().map(|c| c.length_s).sum();
    if sampled_s < 0.5 {
        return out;
    }
    if s.cpu_process_pct >= 80.0 {
        if let Some(f) = cpu_bound_finding("local", &samples, 95.0, 0.8) {
            out.push(f.with("nsperf_cpu_pct", s.cpu_process_pct));
        }
    } else if s.cpu_busiest_core_pct >= 90.0 && s.cpu_process_pct < 60.0 {
        out.push(
            Finding::new(
                "cpu_contention",
                Severity::Warning,
                format!(
                    "a core was {:.0} % busy while nsperf used {:.0} % of one: other load on this machine shares the CPU, figures may be low",
                    s.cpu_busiest_core_pct, s.cpu_process_pct
                ),
            )
            .with("busiest_core_pct", s.cpu_busiest_core_pct)
            .with("nsperf_cpu_pct", s.cpu_process_pct),
        );
    }
    out
}

/// Stale files of dead runs, named (or reported removed).
pub(crate) fn stale_findings(facts: &RunFacts) -> Option<Finding> {
    if facts.stale.is_empty() {
        return None;
    }
    let bytes: u64 = facts.stale.iter().map(|f| f.bytes).sum();
    let dir = facts
        .stale
        .first()
        .and_then(|f| f.path.parent())
        .unwrap_or(std::path::Path::new("."));
    let line = crate::stale::describe(dir, &facts.stale);
    let f = if facts.stale_removed {
        Finding::new(
            "stale_files_removed",
            Severity::Info,
            format!("removed {line}"),
        )
    } else {
        Finding::new(
            "stale_files",
            Severity::Warning,
            format!("{line}; --clean removes them"),
        )
    };
    Some(
        f.with("stale_files", facts.stale.len() as f64)
            .with("stale_bytes", bytes as f64),
    )
}

/// A pass too short to be a stable figure.
fn short_pass(s: &IoSummary, out: &mut Vec<Finding>) {
    if s.elapsed_s <= 0.0 || s.elapsed_s >= MIN_MEANINGFUL_S || s.interrupted {
        return;
    }
    out.push(
        Finding::new(
            "short_pass",
            Severity::Warning,
            format!(
                "the measured pass lasted {:.3} s, under {MIN_MEANINGFUL_S:.0} s: start-up, one scheduler stall or one writeback burst weigh on a figure this short; use a larger --size or --runtime with --time_based",
                s.elapsed_s
            ),
        )
        .with("elapsed_s", s.elapsed_s)
        .with("min_meaningful_s", MIN_MEANINGFUL_S),
    );
}

/// What `--verify` found.
fn verify_findings(s: &IoSummary, out: &mut Vec<Finding>) {
    let Some(v) = &s.verify else {
        return;
    };
    if v.failures == 0 {
        out.push(
            Finding::new(
                "verify_ok",
                Severity::Info,
                format!(
                    "{} blocks verified (crc32 and block header): none failed",
                    v.blocks_checked
                ),
            )
            .with("blocks_checked", v.blocks_checked as f64),
        );
        return;
    }
    out.push(
        Finding::new(
            "verify_failed",
            Severity::Warning,
            format!(
                "{} of {} blocks failed verification; the first at offset {}: {}",
                v.failures,
                v.blocks_checked,
                v.first_failure_offset.unwrap_or(0),
                v.first_failure
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| "unknown".into())
            ),
        )
        .with("blocks_checked", v.blocks_checked as f64)
        .with("failures", v.failures as f64),
    );
}
