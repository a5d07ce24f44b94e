//! The real executor. The lab is built, changed and removed through the lab library, in this
//! process (which owns it); every step runs in a child process, `nsperf step`, given a typed
//! [`StepSpec`](crate::step::StepSpec) on its standard input and answering a typed
//! [`StepReport`](crate::step::StepReport) on its standard output. A user's command (an
//! `exec` step) runs as it is, through `nsperf step` when it must enter a lab site. The
//! capture of a network or io step is tcpdump in a site (a `capture` step) or the emulator
//! on a link; its analysis runs here, through the trace library.
//!
//! CPU use per core is sampled each second while a step runs; NIC counters are read before
//! and after in every site (or on this host without a lab).
//!
//! This file holds the executor, its connection to the plan's `[hosts]` and the
//! [`Executor`] trait's methods (the lab's lifecycle through the lab library, the cache, a
//! user's unmeasured command, the dispatch of a step). `step_child` makes and runs the
//! `nsperf step` children; `steps` runs each kind of step here or in a lab site; `capture`
//! takes and analyses a step's capture; `services` starts, checks and stops the plan's
//! services.

mod capture;
mod load;
mod services;
mod step_child;
mod steps;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use nsperf_core::process::ProcessId;
use nsperf_lab::events::LinkEvent;
use nsperf_lab::lab::{self, UpConfig};
use nsperf_lab::stats::LabStats;
use nsperf_lab::{LabError, LinkChange, Schedule};

use super::child::{self, is_root};
use super::hosts::HostRunner;
use super::{CommandRole, Executor, Lab, Measurement, RunContext, ServiceAnswer};
use crate::error::ExecError;
use crate::plan::{Action, Hosts, LinkSettings, ResolvedStep, ServiceSpec};
use services::RunningService;

/// Makes the command that runs a lab's emulator process (`nsperf lab emulate NAME`).
pub type EmulatorCommand = fn(&str) -> Command;

/// Runs steps through `nsperf step` children and external programs.
#[derive(Debug)]
pub struct ProcessExecutor {
    /// The `nsperf` binary whose hidden `step` subcommand runs a step.
    exe: PathBuf,
    emulator: EmulatorCommand,
    captures: u32,
    /// Where captures are kept (`nsperf run --keep-captures`); without it they are removed
    /// once analysed.
    keep_captures: Option<PathBuf>,
    /// The plan's `[hosts]`, once connected.
    hosts: Option<HostRunner>,
    /// The plan's services that were started, by name.
    services: BTreeMap<String, RunningService>,
}

impl ProcessExecutor {
    /// Keeps every capture in `dir` (made when needed) instead of removing it once
    /// analysed; the run records the file's path.
    pub fn keep_captures_in(&mut self, dir: PathBuf) {
        self.keep_captures = Some(dir);
    }

    /// An executor whose steps run `exe step` and whose labs' emulators are `emulator`.
    pub fn new(exe: PathBuf, emulator: EmulatorCommand) -> Self {
        ProcessExecutor {
            exe,
            emulator,
            captures: 0,
            keep_captures: None,
            hosts: None,
            services: BTreeMap::new(),
        }
    }

    /// The binary running now (`std::env::current_exe()`), as the step runner.
    pub fn current(emulator: EmulatorCommand) -> Result<Self, ExecError> {
        let exe = nsperf_core::process::running_binary().map_err(ExecError::SelfExe)?;
        Ok(Self::new(exe, emulator))
    }

    /// Reaches or starts the agent of every host of the plan and opens their sessions
    /// (before any run: a host that cannot be reached fails the plan at once).
    pub fn connect_hosts(&mut self, hosts: &Hosts) -> Result<(), ExecError> {
        self.hosts = Some(HostRunner::connect(hosts, &self.exe)?);
        Ok(())
    }

    /// Each connected host: its name, clock offset and error bound (ns).
    pub fn host_clocks(&self) -> Vec<(String, i64, u64)> {
        self.hosts
            .as_ref()
            .map(|h| {
                h.fleet()
                    .agents()
                    .iter()
                    .map(|a| (a.name.clone(), a.clock.offset_ns, a.clock.error_ns))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Ends the hosts' agent sessions (the agents the plan started exit).
    pub fn close_hosts(&mut self) {
        if let Some(mut h) = self.hosts.take() {
            h.close();
        }
    }
}

fn lab_error(e: LabError) -> ExecError {
    match e {
        LabError::NeedsRoot(_) => ExecError::Skip(e.to_string()),
        e => ExecError::Lab(e),
    }
}

impl Executor for ProcessExecutor {
    fn lab_available(&mut self, lab: &Lab) -> Result<(), ExecError> {
        match lab::live_owner(&lab.name) {
            Ok(Some(owner)) if owner != ProcessId::current() => Err(ExecError::LabTaken {
                lab: lab.name.clone(),
                pid: owner.pid,
            }),
            _ => Ok(()),
        }
    }

    fn lab_up(&mut self, lab: &Lab, link: &LinkSettings) -> Result<(), ExecError> {
        if !is_root() {
            return Err(ExecError::Skip(
                "the lab needs root (network namespaces)".into(),
            ));
        }
        let me = ProcessId::current();
        // A lab of this name left by a run that died is replaced; one whose owner lives is
        // never touched.
        self.lab_available(lab)?;
        match lab::down(&lab.name, false) {
            Ok(_) | Err(LabError::NotFound(_)) => {}
            Err(e) => return Err(lab_error(e)),
        }
        let cfg = UpConfig {
            owner: Some(me),
            ..crate::plan::up_config(&lab.name, &lab.sites, &lab.shape, link)
        };
        lab::up(&cfg, (self.emulator)(&lab.name))
            .map(|_| ())
            .map_err(lab_error)
    }

    fn lab_set(&mut self, lab: &Lab, link: &LinkSettings) -> Result<(), ExecError> {
        for change in link.from_default() {
            lab::set(&lab.name, &change, None).map_err(lab_error)?;
        }
        Ok(())
    }

    fn lab_down(&mut self, lab: &Lab) {
        // The agents in its sites first: they end their sessions rather than being killed.
        if let Some(h) = self.hosts.as_mut() {
            h.close_sites();
        }
        match lab::down(&lab.name, false) {
            Ok(_) | Err(LabError::NotFound(_)) => {}
            Err(e) => eprintln!("nsperf: lab down {}: {e}", lab.name),
        }
    }

    fn lab_stats(&mut self, lab: &Lab) -> Option<LabStats> {
        lab::stats(&lab.name).ok()
    }

    fn lab_events(&mut self, lab: &Lab) -> Vec<LinkEvent> {
        lab::events(&lab.name).unwrap_or_default()
    }

    fn lab_schedule(&mut self, lab: &Lab, schedule: &Schedule) -> Result<(), ExecError> {
        lab::set(&lab.name, &LinkChange::default(), Some(schedule.clone())).map_err(lab_error)
    }

    fn lab_stop_schedules(&mut self, lab: &Lab) {
        if let Err(e) = lab::stop_schedules(&lab.name) {
            eprintln!("nsperf: lab {}: stopping its schedules: {e}", lab.name);
        }
    }

    fn drop_caches(&mut self) -> Result<(), ExecError> {
        if !is_root() {
            return Err(ExecError::Skip(
                "a cold cache needs root (/proc/sys/vm/drop_caches)".into(),
            ));
        }
        // SAFETY: sync has no preconditions.
        unsafe { libc::sync() };
        std::fs::write("/proc/sys/vm/drop_caches", "3")
            .map_err(|e| ExecError::Skip(format!("cannot drop the page cache: {e}")))
    }

    fn command(
        &mut self,
        ctx: &RunContext<'_>,
        site: Option<&str>,
        command: &[String],
        role: CommandRole,
    ) -> Result<(), ExecError> {
        let what = format!("{role} {}", command.join(" "));
        let (cmd, input) = self.user_command(ctx.lab, site, command)?;
        let timeout = Duration::from_secs(600);
        match role {
            CommandRole::Teardown => child::run_to_end(cmd, input, &what, timeout)?,
            CommandRole::Prime | CommandRole::Setup => {
                child::run(cmd, input, &what, timeout, false)?
            }
        }
        .check(&what)
    }

    fn service_start(
        &mut self,
        lab: Option<&Lab>,
        service: &ServiceSpec,
    ) -> Result<ServiceAnswer, ExecError> {
        self.start_service(lab, service)
    }

    fn service_check(&mut self, name: &str) -> Result<(), ExecError> {
        self.check_service(name)
    }

    fn service_stop(&mut self, name: &str) {
        self.stop_service(name)
    }

    fn measure(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
    ) -> Result<Measurement, ExecError> {
        let t0 = Instant::now();
        let service = step.service().map(str::to_string);
        if let Some(s) = service.as_ref().and_then(|n| self.services.get_mut(n)) {
            s.before_step();
        }
        // The step's load runs from before the step until after it; dropped (killed) when
        // the step fails.
        let load = match &step.load {
            Some(l) => Some(self.start_load(ctx, step, l)?),
            None => None,
        };
        let mut m = match &step.action {
            _ if step.on.is_some() => self
                .hosts
                .as_mut()
                .ok_or(ExecError::HostsNotConnected)?
                .measure(ctx, step)?,
            Action::Net(n) => self.net(ctx, step, n)?,
            Action::Io(io) => self.io(ctx, step, io)?,
            Action::Bonnie(b) => self.bonnie(ctx, step, b)?,
            Action::Exec(e) => self.exec(ctx, step, e)?,
            Action::Replay(r) => self.replay(ctx, step, r)?,
        };
        if let (Some(running), Some(spec)) = (load, &step.load) {
            let figures = self.stop_load(running)?;
            crate::exec::load::beside_step(&mut m, spec, &figures);
        }
        if let Some(name) = &service
            && let Some(s) = self.services.get_mut(name)
        {
            s.after_step(name, &mut m);
        }
        if m.duration_ns == 0 {
            m.duration_ns = t0.elapsed().as_nanos() as u64;
        }
        m.spec = step
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect();
        m.spec.insert("type".into(), step.kind.to_string());
        Ok(m)
    }
}
