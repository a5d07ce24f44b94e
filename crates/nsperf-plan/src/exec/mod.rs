//! How a step is carried out: the [`Executor`] trait, one file per implementation.
//!
//! - [`process::ProcessExecutor`] builds, tears down and changes the lab through the lab
//!   library, and runs every step in a child process: `nsperf step` with a typed
//!   [`crate::step::StepSpec`] on its standard input, reading the typed
//!   [`crate::step::StepReport`] from its standard output (`child` runs the processes,
//!   `measure` turns reports into measurements). It holds no measurement code: the engines
//!   measure, it only starts them and reads what they report.
//! - `mock::MockExecutor` (feature `mock`, for tests) returns figures computed from the run's
//!   key, so the runner, the store, the statistics and the exporters can be tested exactly.

mod child;
mod hosts;
mod load;
mod measure;
#[cfg(any(test, feature = "mock"))]
pub mod mock;
mod port;
pub mod process;
mod served;
mod window;
pub(crate) use port::shared_port;
pub use port::tcp_payload_bps;

use nsperf_lab::Schedule;
use nsperf_lab::events::LinkEvent;
use nsperf_lab::stats::LabStats;

use crate::error::ExecError;
use crate::plan::{IoStep, LabShape, LinkSettings, Phase, Record, ResolvedStep, ServiceSpec};
pub use nsperf_results::{Measurement, NicDelta, SeriesPoint};

/// The lab of one run: the name it has in this run and its sites.
#[derive(Debug, Clone, PartialEq)]
pub struct Lab {
    /// Lab name (unique per run unless the plan names it).
    pub name: String,
    /// Site names in order; site `i` has address `10.77.0.(i+1)`.
    pub sites: Vec<String>,
    /// Its topology, memory and seed.
    pub shape: LabShape,
}

/// Why a command runs unmeasured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandRole {
    /// The `prime` of a `remote-warm` phase.
    Prime,
    /// A step's `setup`, once per cell before its first run.
    Setup,
    /// A step's `teardown`, once per cell after its last run.
    Teardown,
}

impl std::fmt::Display for CommandRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CommandRole::Prime => "prime",
            CommandRole::Setup => "setup",
            CommandRole::Teardown => "teardown",
        })
    }
}

/// What the executor is told about the run it carries out.
#[derive(Debug, Clone, Copy)]
pub struct RunContext<'a> {
    /// The plan's lab, when it is up.
    pub lab: Option<&'a Lab>,
    /// What to record beside.
    pub record: Record,
    /// The experiment the run belongs to.
    pub experiment: i64,
    /// Cell key.
    pub cell: &'a str,
    /// Phase.
    pub phase: Phase,
    /// Repetition, 1-based.
    pub repetition: u32,
    /// Where the running service the step goes through answers (a mirror peer's
    /// `ADDRESS:PORT`), if it goes through one.
    pub service: Option<&'a ServiceAnswer>,
}

impl RunContext<'_> {
    /// The io engine's configuration for this run: the cache phase, and through a service the
    /// URL it answers at now (a loopback service's port is known only once it runs).
    pub(crate) fn io_config(&self, io: &IoStep) -> Result<nsperf_io::RunConfig, ExecError> {
        let mut config = io.config.clone();
        match self.phase {
            Phase::Cold => {
                config.cache = nsperf_io::CacheMode::Cold;
                // Through a service (on this host): the engine evicts the server's copy.
                config.drop_caches = io.service.is_some();
            }
            Phase::Warm => config.cache = nsperf_io::CacheMode::Warm,
            Phase::RemoteWarm if io.is_remote() => {
                config.cache = nsperf_io::CacheMode::RemoteWarm;
            }
            Phase::None | Phase::RemoteWarm => {}
        }
        if let Some(svc) = &io.service {
            let answer = self
                .service
                .ok_or_else(|| ExecError::ServiceNotRunning(svc.name.clone()))?;
            config.target = crate::plan::service_target(answer, &svc.path).map_err(|reason| {
                ExecError::ServiceTarget {
                    name: svc.name.clone(),
                    reason,
                }
            })?;
        }
        if let (Some(p), Some(rep)) = (&io.peer, config.replicate.as_mut()) {
            let answer = self
                .service
                .ok_or_else(|| ExecError::ServiceNotRunning(p.name.clone()))?;
            rep.peer = answer.url.clone();
        }
        Ok(config)
    }
}

/// Where a running service answers: what its clients are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAnswer {
    /// The URL of its export or share (`nfs://ADDRESS[:PORT]/DIR`, `smb://ADDRESS/SHARE`), or
    /// a mirror peer's `ADDRESS:PORT`.
    pub url: String,
    /// The smbclient-style credentials file of a Samba share (the secret stays in it).
    pub credentials: Option<std::path::PathBuf>,
}

/// Carries out the steps of a plan. Errors of kind [`ExecError::Skip`] mean "cannot here"
/// (no root, a program missing): the runner records the run as skipped with the reason.
pub trait Executor {
    /// Refuses a lab name another live process's lab holds ([`ExecError::LabTaken`]); asked
    /// once before a plan with a named lab starts, so nothing is stored or built.
    fn lab_available(&mut self, _lab: &Lab) -> Result<(), ExecError> {
        Ok(())
    }
    /// Builds the lab with a cell's link settings (replacing a leftover of a dead run of the
    /// same name, never a lab whose owner is alive).
    fn lab_up(&mut self, lab: &Lab, link: &LinkSettings) -> Result<(), ExecError>;
    /// Makes the lab's link exactly `link` between cells (same MTU).
    fn lab_set(&mut self, lab: &Lab, link: &LinkSettings) -> Result<(), ExecError>;
    /// Tears the lab down (errors are reported on stderr, never fatal).
    fn lab_down(&mut self, lab: &Lab);
    /// The lab's links now (parameters and counters of every direction); `None` where they
    /// cannot be read.
    fn lab_stats(&mut self, lab: &Lab) -> Option<LabStats>;
    /// The lab's link events so far (every change with its time).
    fn lab_events(&mut self, lab: &Lab) -> Vec<LinkEvent>;
    /// Plays a fault schedule on the lab's links, its times counted from now.
    fn lab_schedule(&mut self, lab: &Lab, schedule: &Schedule) -> Result<(), ExecError>;
    /// Stops the schedules playing on the lab's links (what they changed stays).
    fn lab_stop_schedules(&mut self, lab: &Lab);
    /// Drops the page cache (for `cold` and `remote-warm` phases).
    fn drop_caches(&mut self) -> Result<(), ExecError>;
    /// Runs a command without measuring it (the `prime` of a `remote-warm` phase, a step's
    /// `setup` or `teardown`), in a site when given. A teardown runs to its end even after
    /// Ctrl-C.
    fn command(
        &mut self,
        ctx: &RunContext<'_>,
        site: Option<&str>,
        command: &[String],
        role: CommandRole,
    ) -> Result<(), ExecError>;
    /// Starts a service of the plan (in its lab site when it has one, the lab up) and waits
    /// until it answers; returns where its clients reach it.
    fn service_start(
        &mut self,
        lab: Option<&Lab>,
        service: &ServiceSpec,
    ) -> Result<ServiceAnswer, ExecError>;
    /// `Ok` while the started service `name` runs; the error says how it ended.
    fn service_check(&mut self, name: &str) -> Result<(), ExecError>;
    /// Stops the service `name` (nothing of it is left running).
    fn service_stop(&mut self, name: &str);
    /// Runs one step and returns what it measured.
    fn measure(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
    ) -> Result<Measurement, ExecError>;
}
