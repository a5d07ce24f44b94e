//! What the figures of an I/O run mean, in plain sentences with their evidence.

use nsperf_core::report::{CpuInterval, Finding, Severity, cpu_bound_finding};
use nsperf_core::units::Bytes;

use crate::config::{CacheMode, FsyncMode, RunConfig};
use crate::result::IoSummary;
use crate::stale::StaleFile;

mod facts;
mod fs;
mod mirror;

pub use facts::RunFacts;

/// A measured pass shorter than this is flagged: start-up, one scheduler stall or one burst
/// of writeback weigh too much on it, and the CPU figures (10 ms ticks) say nothing.
pub const MIN_MEANINGFUL_S: f64 = 1.0;

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
    if s.engine == crate::engine::EngineKind::Null.into() {
        out.push(Finding::new(
            "null_engine",
            Severity::Info,
            "null engine: no I/O was done; the figures are nsperf's own per-op overhead",
        ));
    }
    out.extend(stale_findings(facts));
    if let Some(m) = &s.replication {
        let lat = s
            .write
            .as_ref()
            .map_or(s.lat_mean_ns, |w| w.latency.mean_ns);
        let rate = s
            .write
            .as_ref()
            .map_or(s.throughput_bytes_per_s, |w| w.throughput_bytes_per_s);
        out.extend(mirror::mirror_limit(m, lat, rate, cfg.iodepth));
    }
    let reads = s.read_bytes > 0;
    let mem = &s.memory;
    let warm_avail = mem
        .cache_usable_bytes
        .filter(|_| cfg.cache == CacheMode::Warm && reads && !facts.device);
    if let Some(avail) = warm_avail {
        let (id, severity, message) = if facts.file_bytes <= avail {
            (
                "page_cache_read",
                Severity::Info,
                format!(
                    "the {} of data fit in {}: warm reads measure the page cache, not the device; use --cache cold or --cache direct for the device",
                    Bytes(facts.file_bytes),
                    mem.describe()
                ),
            )
        } else {
            (
                "page_cache_cliff",
                Severity::Warning,
                format!(
                    "the {} of data exceed {}: reads past the page cache go to the device, expect a throughput cliff",
                    Bytes(facts.file_bytes),
                    mem.describe()
                ),
            )
        };
        out.push(
            Finding::new(id, severity, message)
                .with("file_bytes", facts.file_bytes as f64)
                .with("cache_usable_bytes", avail as f64),
        );
    }
    out.extend(cold_in_memory(cfg, s));
    short_pass(s, &mut out);
    fs::fs_findings(cfg, s, facts, &mut out);
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

/// File systems whose files live only in memory: the page cache is their storage, so a
/// file cannot be evicted from it and read back from a device.
const IN_MEMORY: [&str; 3] = ["tmpfs", "ramfs", "hugetlbfs"];

/// A cold read asked on a file system kept in memory (tmpfs): it is impossible there, and
/// the resident figure beside it (100 %) is the file itself, not a failed eviction.
fn cold_in_memory(cfg: &RunConfig, s: &IoSummary) -> Option<Finding> {
    let fs = s.target_fs.as_ref()?;
    if cfg.cache != CacheMode::Cold || s.read_bytes == 0 || !IN_MEMORY.contains(&&*fs.fs_type) {
        return None;
    }
    let resident = s
        .cache_resident_pct
        .map(|p| format!(" ({p:.0} % resident before the pass)"))
        .unwrap_or_default();
    Some(
        Finding::new(
            "cold_impossible",
            Severity::Warning,
            format!(
                "cold: {} is on {}, which keeps its files only in memory: there is no device to read them back from, so a cold read is impossible there{resident} and these reads measure memory; run on a disk-backed file system to measure cold reads",
                fs.mount_point.display(),
                fs.fs_type
            ),
        )
        .with(
            "cache_resident_pct",
            s.cache_resident_pct.unwrap_or(f64::NAN),
        ),
    )
}

/// Stale files of dead runs: those removed (`stale_files_removed`), those left
/// (`stale_files`, with what removes them), and a directory that could not be listed.
pub(crate) fn stale_findings(facts: &RunFacts) -> Vec<Finding> {
    let sw = &facts.stale;
    let mut out = Vec::new();
    let group = |removed: bool| -> Vec<&StaleFile> {
        sw.files.iter().filter(|f| f.removed == removed).collect()
    };
    let evidence = |f: Finding, files: &[&StaleFile]| {
        f.with("stale_files", files.len() as f64).with(
            "stale_bytes",
            files.iter().filter_map(|f| f.bytes).sum::<u64>() as f64,
        )
    };
    let removed = group(true);
    if !removed.is_empty() {
        let line = crate::stale::describe(&sw.dir, &removed);
        let f = Finding::new(
            "stale_files_removed",
            Severity::Info,
            format!("removed {line}"),
        );
        out.push(evidence(f, &removed));
    }
    let left = group(false);
    if !left.is_empty() {
        let line = crate::stale::describe(&sw.dir, &left);
        let why = if left.iter().all(|f| f.whose == crate::stale::Whose::Dead) {
            "they could not be removed"
        } else {
            "nsperf cannot tell whether their runs are over; --clean removes them"
        };
        let f = Finding::new("stale_files", Severity::Warning, format!("{line}; {why}"));
        out.push(evidence(f, &left));
    }
    if let Some(why) = &sw.unlisted {
        out.push(Finding::new(
            "stale_files_unknown",
            Severity::Info,
            format!("could not look for stale nsperf files in {}: {why}", sw.dir),
        ));
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsinfo::FsInfo;
    use crate::target::Target;
    use crate::workload::Workload;

    fn on(fs_type: &str, cache: CacheMode) -> Vec<Finding> {
        let mut cfg = RunConfig::new(
            Target::Dir {
                path: "/dev/shm/x".into(),
            },
            Workload::SeqRead,
            8 << 20,
            1 << 20,
        );
        cfg.cache = cache;
        let s = IoSummary {
            read_bytes: 8 << 20,
            cache_resident_pct: Some(100.0),
            target_fs: Some(FsInfo {
                fs_type: fs_type.into(),
                mount_source: fs_type.into(),
                mount_point: "/dev/shm".into(),
                dev: "0:25".into(),
                statfs_magic: 0,
                network: Some(false),
                server: None,
                link: None,
            }),
            ..Default::default()
        };
        findings(&cfg, &s, &[], &RunFacts::default())
    }

    /// Issue 20 item 6: "reads cold" on tmpfs showed 100 % resident and no finding said
    /// that cold is impossible there.
    #[test]
    fn cold_on_tmpfs_is_named_impossible() {
        let f = on("tmpfs", CacheMode::Cold);
        let c = f
            .iter()
            .find(|f| f.id == "cold_impossible")
            .unwrap_or_else(|| panic!("{f:?}"));
        assert!(
            c.message.contains("cold read is impossible"),
            "{}",
            c.message
        );
        assert!(c.message.contains("100 % resident"), "{}", c.message);
        assert!(
            on("ext4", CacheMode::Cold)
                .iter()
                .all(|f| f.id != "cold_impossible")
        );
        assert!(
            on("tmpfs", CacheMode::Warm)
                .iter()
                .all(|f| f.id != "cold_impossible")
        );
    }
}
