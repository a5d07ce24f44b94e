//! The step children: the `nsperf step` command and typed input of a step, run to its end
//! (its report read) or started in the background, and a user's command (as it is, or
//! through `nsperf step` in a lab site).

use std::process::Command;
use std::time::Duration;

use super::ProcessExecutor;
use crate::error::ExecError;
use crate::exec::Lab;
use crate::exec::child::{self, Background, ChildRun};
use crate::step::{SiteRef, StepReport, StepRequest, StepSpec};

impl ProcessExecutor {
    /// The command and input of a step child for `spec`.
    pub(super) fn step(&self, spec: &StepSpec) -> Result<(Command, Vec<u8>), ExecError> {
        let input =
            serde_json::to_vec(&StepRequest::now(spec.clone())).map_err(ExecError::StepSpec)?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("step");
        Ok((cmd, input))
    }

    /// Runs a step child to its end and reads its report.
    pub(super) fn run_step(
        &self,
        spec: &StepSpec,
        what: &str,
        timeout: Duration,
        sample_cpu: bool,
    ) -> Result<(StepReport, ChildRun), ExecError> {
        let (cmd, input) = self.step(spec)?;
        let r = child::run(cmd, Some(input), what, timeout, sample_cpu)?;
        r.check(what)?;
        let report = serde_json::from_slice(&r.stdout).map_err(|e| ExecError::Output {
            command: what.to_string(),
            reason: e.to_string(),
        })?;
        Ok((report, r))
    }

    /// Starts a step child in the background.
    pub(super) fn background(&self, spec: &StepSpec, what: &str) -> Result<Background, ExecError> {
        let (cmd, input) = self.step(spec)?;
        Background::spawn(cmd, Some(input), what)
    }

    /// A user's command: run as it is, or through `nsperf step` inside a lab site.
    pub(super) fn user_command(
        &self,
        lab: Option<&Lab>,
        site: Option<&str>,
        command: &[String],
    ) -> Result<(Command, Option<Vec<u8>>), ExecError> {
        match site_ref(lab, site) {
            Some(site) => {
                let (cmd, input) = self.step(&StepSpec::Exec {
                    site: Some(site),
                    command: command.to_vec(),
                })?;
                Ok((cmd, Some(input)))
            }
            None => {
                let (prog, args) = command.split_first().ok_or(ExecError::EmptyCommand)?;
                let mut cmd = Command::new(prog);
                cmd.args(args);
                Ok((cmd, None))
            }
        }
    }
}

pub(super) fn site_ref(lab: Option<&Lab>, site: Option<&str>) -> Option<SiteRef> {
    Some(SiteRef {
        lab: lab?.name.clone(),
        site: site?.to_string(),
    })
}

pub(super) fn unexpected(what: &str, r: &StepReport) -> ExecError {
    let kind = serde_json::to_value(r)
        .ok()
        .and_then(|v| v.get("report").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_default();
    ExecError::Output {
        command: what.to_string(),
        reason: format!("answered a {kind} report"),
    }
}
