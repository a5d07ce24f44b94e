//! The one result model of nsperf.
//!
//! Every command produces a [`Report`]: what was asked (`spec`), where it ran (`hosts`), what
//! happened over time (`intervals`), the totals (`summary`), and what the figures mean
//! (`findings`). Each engine supplies its own spec, interval and summary types; the envelope,
//! the host facts and the findings are the same for all, so exporters and the result store
//! handle every command alike. `--json` prints exactly this structure; its fields are
//! documented in `docs/schema.md`. Units are part of field names (`_bytes`, `_bps`, `_ns`,
//! `_pct`, `_s`).
//!
//! The schema is versioned by [`SCHEMA_VERSION`]: adding a field keeps the version; renaming,
//! removing or changing the meaning of a field increments it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cpu::CpuSample;
use crate::host::HostFacts;

/// Version of the JSON result schema.
pub const SCHEMA_VERSION: u32 = 1;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A fact worth knowing, nothing wrong.
    Info,
    /// Something that probably costs throughput or latency.
    Warning,
    /// Something that certainly limits the result.
    Limit,
}

/// A plain sentence about the result, with the figures it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable identifier, e.g. `cpu_bound`, `window_limited`, `page_cache_cliff`.
    pub id: String,
    /// How much it matters.
    pub severity: Severity,
    /// The sentence shown to the user, figures included.
    pub message: String,
    /// The figures behind it, named with their units.
    pub evidence: BTreeMap<String, f64>,
}

impl Finding {
    /// A finding without evidence; add figures with [`Finding::with`].
    pub fn new(id: &str, severity: Severity, message: impl Into<String>) -> Self {
        Finding {
            id: id.to_string(),
            severity,
            message: message.into(),
            evidence: BTreeMap::new(),
        }
    }

    /// Adds one figure of evidence.
    pub fn with(mut self, name: &str, value: f64) -> Self {
        self.evidence.insert(name.to_string(), value);
        self
    }
}

/// The command that wrote a report (`command` in every `--json` document).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Command {
    /// `nsperf net`.
    Net,
    /// `nsperf io` (run, matrix, bonnie).
    Io,
    /// `nsperf lab` (list, stats, events, capture).
    Lab,
    /// `nsperf trace`.
    Trace,
    /// `nsperf doctor`.
    Doctor,
    /// `nsperf replay`.
    Replay,
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::Net => "net",
            Command::Io => "io",
            Command::Lab => "lab",
            Command::Trace => "trace",
            Command::Doctor => "doctor",
            Command::Replay => "replay",
        })
    }
}

/// One host's part in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRecord {
    /// `local`, `client`, `server`, or a lab site name.
    pub role: String,
    /// The host's facts at the start of the run.
    pub facts: HostFacts,
}

/// CPU use of one host over one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuInterval {
    /// Role of the host (as in [`HostRecord::role`]).
    pub role: String,
    /// Interval start, seconds since the run started.
    pub start_s: f64,
    /// Interval length in seconds.
    pub length_s: f64,
    /// The sample.
    pub cpu: CpuSample,
}

/// The result of one nsperf command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report<Spec, Interval, Summary> {
    /// [`SCHEMA_VERSION`] of this document.
    pub schema_version: u32,
    /// The nsperf version that wrote it.
    pub nsperf_version: String,
    /// The command that wrote it.
    pub command: Command,
    /// Wall-clock start, nanoseconds since the Unix epoch.
    pub started_unix_ns: u64,
    /// When the measured part began (after connections, file creation and layout), on the
    /// same clock: the instant `intervals` count from. Absent where the engine does not
    /// say (then `started_unix_ns` is the best estimate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_unix_ns: Option<u64>,
    /// Measured duration of the run in nanoseconds (monotonic clock).
    pub duration_ns: u64,
    /// Every parameter of the run, defaults included.
    pub spec: Spec,
    /// The hosts involved and their facts.
    pub hosts: Vec<HostRecord>,
    /// Time series, one entry per interval (and per stream or job where the engine has them).
    pub intervals: Vec<Interval>,
    /// CPU use per host and interval.
    pub cpu: Vec<CpuInterval>,
    /// Totals and statistics.
    pub summary: Summary,
    /// What the figures mean.
    pub findings: Vec<Finding>,
}

impl<Spec, Interval, Summary> Report<Spec, Interval, Summary> {
    /// A report envelope for `command`, stamped with this build's version.
    pub fn new(command: Command, spec: Spec, summary: Summary) -> Self {
        Report {
            schema_version: SCHEMA_VERSION,
            nsperf_version: env!("CARGO_PKG_VERSION").to_string(),
            command,
            started_unix_ns: crate::clock::unix_time_ns(),
            measured_unix_ns: None,
            duration_ns: 0,
            spec,
            hosts: Vec::new(),
            intervals: Vec::new(),
            cpu: Vec::new(),
            summary,
            findings: Vec::new(),
        }
    }
}

/// Findings about CPU saturation from a series of samples of one host: one core busy at or
/// above `threshold_pct` for at least `share` of the samples gives a `cpu_bound` finding.
pub fn cpu_bound_finding(
    role: &str,
    samples: &[CpuSample],
    threshold_pct: f64,
    share: f64,
) -> Option<Finding> {
    if samples.is_empty() {
        return None;
    }
    let mut best: Option<(u32, f64, f64)> = None; // (core, share, mean busy)
    let cores: std::collections::BTreeSet<u32> = samples
        .iter()
        .flat_map(|s| s.per_core.iter().map(|c| c.core))
        .collect();
    for core in cores {
        let busy: Vec<f64> = samples
            .iter()
            .filter_map(|s| {
                s.per_core
                    .iter()
                    .find(|c| c.core == core)
                    .map(|c| c.busy_pct)
            })
            .collect();
        let hot =
            busy.iter().filter(|&&b| b >= threshold_pct).count() as f64 / samples.len() as f64;
        let mean = crate::stats::mean(&busy).unwrap_or(0.0);
        if best.is_none_or(|(_, s, m)| hot > s || (hot == s && mean > m)) {
            best = Some((core, hot, mean));
        }
    }
    let (core, hot, mean) = best?;
    (hot >= share).then(|| {
        // A mean below the threshold means the core was saturated only part of the time:
        // say both figures rather than one that reads as a contradiction.
        let message = if mean >= threshold_pct {
            format!(
                "{role} core {core} at {mean:.0} % for {:.0} % of the test: CPU-bound",
                hot * 100.0
            )
        } else {
            format!(
                "{role} core {core} at {threshold_pct:.0} % or more for {:.0} % of the test \
                 (mean {mean:.0} %): CPU-bound while busy",
                hot * 100.0
            )
        };
        Finding::new("cpu_bound", Severity::Limit, message)
            .with("core", core as f64)
            .with("mean_busy_pct", mean)
            .with("time_share_pct", hot * 100.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CoreUsage;

    fn sample(busy: &[f64]) -> CpuSample {
        CpuSample {
            per_core: busy
                .iter()
                .enumerate()
                .map(|(i, &b)| CoreUsage {
                    core: i as u32,
                    busy_pct: b,
                    ..Default::default()
                })
                .collect(),
            process_pct: 0.0,
        }
    }

    #[test]
    fn saturated_core_found() {
        let s: Vec<CpuSample> = (0..10)
            .map(|i| sample(&[20.0, if i < 9 { 99.5 } else { 50.0 }]))
            .collect();
        let f = cpu_bound_finding("client", &s, 95.0, 0.8).unwrap();
        assert_eq!(f.id, "cpu_bound");
        assert_eq!(f.evidence["core"], 1.0);
        assert_eq!(f.evidence["time_share_pct"], 90.0);
        assert_eq!(
            f.message,
            "client core 1 at 95 % or more for 90 % of the test (mean 95 %): CPU-bound while busy"
        );
    }

    /// Issue 13: "core 0 at 65 % … CPU-bound" contradicted itself. The figure a finding
    /// calls CPU-bound is at the threshold or above; a lower mean is named as the mean of a
    /// core saturated part of the time.
    #[test]
    fn cpu_bound_wording_never_contradicts_its_figures() {
        // Core 0 saturated in 13 of 20 samples, idle in the rest: mean 65 %.
        let part: Vec<CpuSample> = (0..20)
            .map(|i| sample(&[if i < 13 { 100.0 } else { 0.0 }, 10.0]))
            .collect();
        let f = cpu_bound_finding("client", &part, 95.0, 0.5).unwrap();
        assert_eq!(
            f.message,
            "client core 0 at 95 % or more for 65 % of the test (mean 65 %): CPU-bound while busy"
        );
        assert_eq!(f.evidence["mean_busy_pct"], 65.0);
        // Saturated throughout: the mean is the figure.
        let full: Vec<CpuSample> = (0..10).map(|_| sample(&[99.0, 10.0])).collect();
        let f = cpu_bound_finding("server", &full, 95.0, 0.5).unwrap();
        assert_eq!(
            f.message,
            "server core 0 at 99 % for 100 % of the test: CPU-bound"
        );
        // Whatever the samples, a percentage printed right before "for" is never below the
        // threshold.
        let mut seed = 7u64;
        let mut found = 0;
        for _ in 0..500 {
            let set: Vec<CpuSample> = (0..12)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    // Half the samples saturated (95-100 %), half anywhere.
                    let busy = if seed % 2 == 0 {
                        95.0 + (seed >> 8) as f64 % 51.0 / 10.0
                    } else {
                        (seed >> 8) as f64 % 1001.0 / 10.0
                    };
                    sample(&[busy, 5.0])
                })
                .collect();
            if let Some(f) = cpu_bound_finding("host", &set, 95.0, 0.3) {
                let said: f64 = f.message["host core 0 at ".len()..]
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("{}", f.message));
                assert!(said >= 95.0, "{}", f.message);
                found += 1;
            }
        }
        assert!(
            found > 100,
            "only {found} findings: the check proves little"
        );
    }

    #[test]
    fn idle_host_is_not_cpu_bound() {
        let s: Vec<CpuSample> = (0..10).map(|_| sample(&[20.0, 40.0])).collect();
        assert!(cpu_bound_finding("server", &s, 95.0, 0.5).is_none());
        assert!(cpu_bound_finding("server", &[], 95.0, 0.5).is_none());
    }

    #[test]
    fn report_round_trips_json() {
        let mut r: Report<BTreeMap<String, u32>, u32, f64> =
            Report::new(Command::Io, BTreeMap::new(), 1.5);
        r.intervals.push(7);
        r.findings
            .push(Finding::new("x", Severity::Info, "hello").with("a_bps", 1.0));
        let j = serde_json::to_string(&r).unwrap();
        let back: Report<BTreeMap<String, u32>, u32, f64> = serde_json::from_str(&j).unwrap();
        assert_eq!(back, r);
        assert!(j.contains("\"schema_version\":1"));
    }
}
