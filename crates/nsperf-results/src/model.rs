//! What one run measured and what it was measured under: the records the runner writes and
//! the exporters read. Units are in the field names.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use nsperf_core::nic::NicCounters;
use nsperf_core::report::CpuInterval;
use nsperf_core::workload::Workload;
use serde::{Deserialize, Serialize};

use crate::Metric;

/// One point of a run's time series, in the unit of its headline metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// Interval start, seconds since the run started.
    pub start_s: f64,
    /// Interval length, seconds.
    pub length_s: f64,
    /// The metric over the interval.
    pub value: f64,
}

/// NIC counter growth of one interface of one site over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicDelta {
    /// Site name (`local` outside a lab).
    pub site: String,
    /// The counters' growth.
    pub counters: NicCounters,
}

/// The type of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    /// Bulk network transfer.
    Net,
    /// Network request/response.
    Rr,
    /// Network message-size sweep.
    Sweep,
    /// File-system I/O.
    Io,
    /// The bonnie++-style suite (`nsperf io bonnie`).
    Bonnie,
    /// A user's command.
    Exec,
    /// A captured NFSv3 workload replayed through the lab (`nsperf replay --lab`).
    Replay,
}

impl StepKind {
    /// The name used in plans and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Net => "net",
            StepKind::Rr => "rr",
            StepKind::Sweep => "sweep",
            StepKind::Io => "io",
            StepKind::Bonnie => "bonnie",
            StepKind::Exec => "exec",
            StepKind::Replay => "replay",
        }
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a step type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown type \"{0}\" (use net, rr, sweep, io, bonnie, exec or replay)")]
pub struct UnknownStepKind(pub String);

impl FromStr for StepKind {
    type Err = UnknownStepKind;
    fn from_str(s: &str) -> Result<Self, UnknownStepKind> {
        Ok(match s {
            "net" => StepKind::Net,
            "rr" => StepKind::Rr,
            "sweep" => StepKind::Sweep,
            "io" => StepKind::Io,
            "bonnie" => StepKind::Bonnie,
            "exec" => StepKind::Exec,
            "replay" => StepKind::Replay,
            _ => return Err(UnknownStepKind(s.to_string())),
        })
    }
}

/// What a host was in a step run on several hosts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostRole {
    /// A client of a net or io step (it measured).
    #[default]
    Client,
    /// The server of a net step, or the file service whose count is set beside the clients'.
    Server,
    /// A host of an io or exec step that runs alone (no server).
    Host,
}

impl HostRole {
    /// Its name in the store and the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            HostRole::Client => "client",
            HostRole::Server => "server",
            HostRole::Host => "host",
        }
    }
}

impl fmt::Display for HostRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a host's role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not client, server or host")]
pub struct UnknownHostRole(pub String);

impl FromStr for HostRole {
    type Err = UnknownHostRole;
    fn from_str(s: &str) -> Result<HostRole, UnknownHostRole> {
        [HostRole::Client, HostRole::Server, HostRole::Host]
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownHostRole(s.to_string()))
    }
}

/// One host's part of a run on several hosts (a step `on` a group of `[hosts]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostPart {
    /// Host name, as the plan calls it.
    pub host: String,
    /// What the host was in the step.
    pub role: HostRole,
    /// Why its part failed; `None` when it measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Headline metric of its part (unit in the name), as the run's.
    pub metric: Metric,
    /// Its value (0 when the part failed).
    pub value: f64,
    /// Payload bytes it moved, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_bytes: Option<u64>,
    /// When its engine started, on the coordinator's clock (ns since the Unix epoch).
    pub started_unix_ns: u64,
    /// Its clock minus the coordinator's, ns, as measured over the control connection.
    pub clock_offset_ns: i64,
    /// The offset is right within ± this, ns.
    pub clock_error_ns: u64,
    /// Every number of its engine's summary (a server's own counts for the server).
    pub metrics: BTreeMap<Metric, f64>,
    /// Its engine's report (JSON), verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_json: Option<String>,
    /// Its intervals on the run's clock (`start_s` from the run's series' time 0, the start
    /// barrier), in the headline's unit: what the run's aggregate was made of. Empty for a
    /// server's count, a command, a failed part, and runs stored before store version 6.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesPoint>,
}

/// What one run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurement {
    /// Name of the headline metric, unit in the name: `throughput_bps`,
    /// `throughput_bytes_per_s`, `transactions_per_s`, `elapsed_s`.
    pub metric: Metric,
    /// Its value.
    pub value: f64,
    /// Every other figure of the summary, flattened (`lat_p99_ns`, `peak_interval_bps`, …).
    pub metrics: BTreeMap<Metric, f64>,
    /// Time series of the headline metric (aggregate over streams).
    pub series: Vec<SeriesPoint>,
    /// CPU use per core, per interval.
    pub cpu: Vec<CpuInterval>,
    /// NIC counter growth per site and interface (loopback excluded).
    pub nic: Vec<NicDelta>,
    /// Payload bytes moved, when known.
    pub payload_bytes: Option<u64>,
    /// Bytes on the wire (headers included), when NIC counters were recorded.
    pub wire_bytes: Option<u64>,
    /// Wall time of the run.
    pub duration_ns: u64,
    /// When the engine started measuring (ns since the Unix epoch): time 0 of `series`,
    /// when the engine says.
    pub started_unix_ns: Option<u64>,
    /// The resolved parameters, for the record.
    pub spec: BTreeMap<String, String>,
    /// The engine's own report (JSON), verbatim.
    pub report_json: Option<String>,
    /// The analysis of the capture taken during the run (`nsperf trace --json` document).
    pub trace_json: Option<String>,
    /// Where the capture taken during the run was kept (`nsperf run --keep-captures`).
    pub capture_path: Option<String>,
    /// Per-host parts of a run on several hosts (empty on one host). The headline, series
    /// and metrics above are then the aggregate; a failed part makes the run partial.
    pub hosts: Vec<HostPart>,
    /// The lab's links during the run (JSON: per direction its parameters and the growth of
    /// its counters over the run), for a run in a lab.
    pub lab_json: Option<String>,
    /// The link events the run overlapped.
    pub events: Vec<crate::RunEvent>,
    /// What the runner found about the run (a link outage it crossed).
    pub findings: Vec<nsperf_core::Finding>,
}

impl Measurement {
    /// True when some host's part failed (the run is stored as partial).
    pub fn partial(&self) -> bool {
        self.hosts.iter().any(|h| h.error.is_some())
    }

    /// The failed hosts' errors, one line.
    pub fn host_errors(&self) -> Option<String> {
        let v: Vec<&str> = self
            .hosts
            .iter()
            .filter_map(|h| h.error.as_deref())
            .collect();
        (!v.is_empty()).then(|| v.join("; "))
    }
}

/// The shape of an io run, for the report's file size × record size heatmap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoShape {
    /// The workload (`seqread`, `randwrite`, …: its name in the JSON).
    pub workload: Workload,
    /// File size, bytes.
    pub size_bytes: u64,
    /// Record (block) size, bytes.
    pub bs_bytes: u64,
}

/// What a run was measured under, as the plan configured it: the figures the report's
/// ceilings (window/RTT, link rate) and heatmaps are drawn from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConditions {
    /// Link rate of the lab, bit/s (network steps between lab sites).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate_bps: Option<f64>,
    /// Round-trip time of the lab link, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_s: Option<f64>,
    /// Socket buffer asked for, bytes (network steps with an explicit window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_bytes: Option<u64>,
    /// True for a network step between two lab sites.
    #[serde(default)]
    pub in_lab: bool,
    /// io steps: workload, file size, record size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoShape>,
}

/// A cache phase: the state of the page cache when the step starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// No phase asked: the step runs as it is (`-`).
    None,
    /// Page cache dropped before the step (needs root).
    Cold,
    /// The step ran just before (unmeasured if needed), so caches hold its data.
    Warm,
    /// Page cache dropped, then the step's `prime` command run (on the remote site).
    RemoteWarm,
}

impl Phase {
    /// The name used in plans and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::None => "-",
            Phase::Cold => "cold",
            Phase::Warm => "warm",
            Phase::RemoteWarm => "remote-warm",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Phase {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Phase {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A name that is not a phase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not cold, warm or remote-warm")]
pub struct UnknownPhase(pub String);

impl FromStr for Phase {
    type Err = UnknownPhase;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "-" => Phase::None,
            "cold" => Phase::Cold,
            "warm" => Phase::Warm,
            "remote-warm" => Phase::RemoteWarm,
            _ => return Err(UnknownPhase(s.to_string())),
        })
    }
}

/// One run of an experiment: a (cell, step, phase, repetition).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    /// Cell key (`rtt=50ms,window=64k`, `-` without a matrix).
    pub cell: String,
    /// Step name.
    pub step: String,
    /// Phase.
    pub phase: Phase,
    /// Repetition, 1-based.
    pub repetition: u32,
}

/// Status of a stored run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Measured.
    Ok,
    /// Could not run here (reason in `error`); `--resume` tries again.
    Skipped,
    /// Ran and failed (reason in `error`); `--resume` tries again.
    Failed,
    /// Ran on several hosts and some parts failed (which, in `error`): the figures are those
    /// of the hosts that measured; kept out of the statistics; `--resume` tries again.
    Partial,
}

impl RunStatus {
    /// The name used in the store and the exports.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Skipped => "skipped",
            RunStatus::Failed => "failed",
            RunStatus::Partial => "partial",
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "ok" => RunStatus::Ok,
            "partial" => RunStatus::Partial,
            "skipped" => RunStatus::Skipped,
            "failed" => RunStatus::Failed,
            o => return Err(format!("run status \"{o}\"")),
        })
    }
}

/// Status of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentStatus {
    /// A run is executing it now (or was killed; its owner pid tells).
    Running,
    /// Every run measured.
    Complete,
    /// Ended with some runs skipped or failed.
    Partial,
    /// Stopped by Ctrl-C; `--resume` completes it.
    Interrupted,
}

impl ExperimentStatus {
    /// The name used in the store and the exports.
    pub fn as_str(self) -> &'static str {
        match self {
            ExperimentStatus::Running => "running",
            ExperimentStatus::Complete => "complete",
            ExperimentStatus::Partial => "partial",
            ExperimentStatus::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for ExperimentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExperimentStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "running" => ExperimentStatus::Running,
            "complete" => ExperimentStatus::Complete,
            "partial" => ExperimentStatus::Partial,
            "interrupted" => ExperimentStatus::Interrupted,
            o => return Err(format!("experiment status \"{o}\"")),
        })
    }
}

/// What a link event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEventKind {
    /// Directions went down: an outage starts (it ends at `until_s`).
    Down,
    /// Directions came back up.
    Up,
    /// Parameters changed (rate, delay, loss, …).
    Change,
}

impl fmt::Display for RunEventKind {
    /// The name used in the store and the exports.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RunEventKind::Down => "down",
            RunEventKind::Up => "up",
            RunEventKind::Change => "change",
        })
    }
}

impl FromStr for RunEventKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "down" => RunEventKind::Down,
            "up" => RunEventKind::Up,
            "change" => RunEventKind::Change,
            o => return Err(format!("run event kind \"{o}\"")),
        })
    }
}

/// Who made a link event (the lab's own names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEventSource {
    /// The emulator itself (start, CPU latency hold).
    Emulator,
    /// `lab set` (or the plan runner through it).
    Set,
    /// A line of a fault schedule.
    Schedule,
    /// A capture on a link started or stopped.
    Capture,
}

impl fmt::Display for RunEventSource {
    /// The name used in the store and the exports.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RunEventSource::Emulator => "emulator",
            RunEventSource::Set => "set",
            RunEventSource::Schedule => "schedule",
            RunEventSource::Capture => "capture",
        })
    }
}

impl FromStr for RunEventSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "emulator" => RunEventSource::Emulator,
            "set" => RunEventSource::Set,
            "schedule" => RunEventSource::Schedule,
            "capture" => RunEventSource::Capture,
            o => return Err(format!("run event source \"{o}\"")),
        })
    }
}

/// One link event as a run saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEvent {
    /// Seconds from the run's start (negative: before the run, for an outage still going on
    /// when it started).
    pub at_s: f64,
    /// Unix time of the event, ns.
    pub t_unix_ns: u64,
    /// Who made it: `set` (`lab set`, the plan runner) or `schedule` (a fault schedule).
    pub source: RunEventSource,
    /// What it did.
    pub kind: RunEventKind,
    /// The change as written (flags, or the schedule line).
    pub text: String,
    /// The directions it changed (`a -> b`).
    pub directions: Vec<String>,
    /// For a `down`: seconds from the run's start when every direction it took down was up
    /// again; `None` when they were still down at the run's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in [Phase::None, Phase::Cold, Phase::Warm, Phase::RemoteWarm] {
            assert_eq!(p.to_string().parse::<Phase>().unwrap(), p);
        }
        assert!("hot".parse::<Phase>().is_err());
        for s in [RunStatus::Ok, RunStatus::Skipped, RunStatus::Failed] {
            assert_eq!(s.to_string().parse::<RunStatus>().unwrap(), s);
        }
        for s in [
            ExperimentStatus::Running,
            ExperimentStatus::Complete,
            ExperimentStatus::Partial,
            ExperimentStatus::Interrupted,
        ] {
            assert_eq!(s.to_string().parse::<ExperimentStatus>().unwrap(), s);
        }
    }

    #[test]
    fn host_roles_keep_their_names() {
        for (r, name) in [
            (HostRole::Client, "client"),
            (HostRole::Server, "server"),
            (HostRole::Host, "host"),
        ] {
            assert_eq!(r.to_string(), name);
            assert_eq!(name.parse::<HostRole>().unwrap(), r);
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{name}\""));
        }
        let e = "peer".parse::<HostRole>().unwrap_err().to_string();
        assert_eq!(e, "\"peer\" is not client, server or host");
    }

    #[test]
    fn step_kinds_keep_their_names() {
        for k in [
            StepKind::Net,
            StepKind::Rr,
            StepKind::Sweep,
            StepKind::Io,
            StepKind::Bonnie,
            StepKind::Exec,
        ] {
            let name = k.to_string();
            assert_eq!(name.parse::<StepKind>().unwrap(), k);
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{name}\""));
        }
        let e = "fio".parse::<StepKind>().unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown type \"fio\" (use net, rr, sweep, io, bonnie, exec or replay)"
        );
    }

    #[test]
    fn io_shapes_keep_their_json_text() {
        // The text the store's conditions_json holds (and every version wrote): the
        // workload by its name.
        let text =
            r#"{"in_lab":false,"io":{"workload":"randrw","size_bytes":8388608,"bs_bytes":4096}}"#;
        let c = RunConditions {
            io: Some(IoShape {
                workload: Workload::RandRw,
                size_bytes: 8 << 20,
                bs_bytes: 4096,
            }),
            ..Default::default()
        };
        assert_eq!(serde_json::to_string(&c).unwrap(), text);
        assert_eq!(serde_json::from_str::<RunConditions>(text).unwrap(), c);
        for w in Workload::ALL {
            let shape = IoShape {
                workload: w,
                size_bytes: 1,
                bs_bytes: 2,
            };
            let text = format!(r#"{{"workload":"{w}","size_bytes":1,"bs_bytes":2}}"#);
            assert_eq!(serde_json::to_string(&shape).unwrap(), text);
            assert_eq!(serde_json::from_str::<IoShape>(&text).unwrap(), shape);
        }
        // A name no version wrote is an error, not a guess.
        let e =
            serde_json::from_str::<IoShape>(r#"{"workload":"trim","size_bytes":1,"bs_bytes":2}"#)
                .unwrap_err()
                .to_string();
        assert!(e.contains("unknown variant `trim`"), "{e}");
    }
}
