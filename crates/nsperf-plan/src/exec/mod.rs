//! How a step is carried out: the [`Executor`] trait, one file per implementation.
//!
//! - [`process::ProcessExecutor`] runs the `nsperf` binary itself (`std::env::current_exe()`)
//!   as child processes (`nsperf net … --json`, `nsperf io run … --json`, `nsperf lab …`) and
//!   external commands, and reads their `--json` output. It holds no measurement code: the
//!   engines measure, it only starts them and reads what they print.
//! - [`mock::MockExecutor`] returns figures computed from the run's key, so the runner, the
//!   store, the statistics and the exporters can be tested exactly.

pub mod mock;
pub mod process;

use std::collections::BTreeMap;

use nsperf_core::nic::NicCounters;
use nsperf_core::report::CpuInterval;
use serde::{Deserialize, Serialize};

use crate::error::ExecError;
use crate::plan::{LabSpec, LinkSettings, Phase, Record, ResolvedStep};

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

/// What one run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurement {
    /// Name of the headline metric, unit in the name: `throughput_bps`,
    /// `throughput_bytes_per_s`, `transactions_per_s`, `elapsed_s`.
    pub metric: String,
    /// Its value.
    pub value: f64,
    /// Every other figure of the summary, flattened (`lat_p99_ns`, `peak_interval_bps`, …).
    pub metrics: BTreeMap<String, f64>,
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
    /// The resolved parameters, for the record.
    pub spec: BTreeMap<String, String>,
    /// The engine's own `--json` document, verbatim.
    pub report_json: Option<String>,
    /// `nsperf trace --json` of the capture taken during the run.
    pub trace_json: Option<String>,
}

/// What the executor is told about the run it carries out.
#[derive(Debug, Clone, Copy)]
pub struct RunContext<'a> {
    /// The plan's lab, when it was built.
    pub lab: Option<&'a LabSpec>,
    /// What to record beside.
    pub record: Record,
    /// Cell key.
    pub cell: &'a str,
    /// Phase.
    pub phase: Phase,
    /// Repetition, 1-based.
    pub repetition: u32,
}

/// Carries out the steps of a plan. Errors of kind [`ExecError::Skip`] mean "cannot here"
/// (no root, a program missing): the runner records the run as skipped with the reason.
pub trait Executor {
    /// Builds the lab with the first cell's link settings.
    fn lab_up(&mut self, lab: &LabSpec, link: &LinkSettings) -> Result<(), ExecError>;
    /// Changes the lab's link settings between cells.
    fn lab_set(&mut self, lab: &LabSpec, link: &LinkSettings) -> Result<(), ExecError>;
    /// Tears the lab down (errors are reported on stderr, never fatal).
    fn lab_down(&mut self, lab: &LabSpec);
    /// Drops the page cache (for `cold` and `remote-warm` phases).
    fn drop_caches(&mut self) -> Result<(), ExecError>;
    /// Runs a command without measuring it (the `prime` of a `remote-warm` phase), in a site
    /// when given.
    fn prime(
        &mut self,
        ctx: &RunContext<'_>,
        site: Option<&str>,
        command: &[String],
    ) -> Result<(), ExecError>;
    /// Runs one step and returns what it measured.
    fn measure(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
    ) -> Result<Measurement, ExecError>;
}
