//! The plan's services during a run: each started when the first step through it comes
//! (after its lab is up), checked before and after every step through it, and stopped when
//! the plan ends, whatever ends it. A service that did not start, or died, fails every later
//! step through it with the reason: the steps are never pointed anywhere else.

use std::collections::BTreeMap;

use crate::error::ExecError;
use crate::exec::{Executor, Lab, ServiceAnswer};
use crate::plan::ServiceSpec;

use super::Progress;

#[derive(Debug)]
enum State {
    /// Answering as `answer` says, started in build `generation` of the lab.
    Up {
        answer: ServiceAnswer,
        generation: u64,
    },
    /// Cannot run here (true: skip) or failed, and why.
    Gone(bool, String),
}

/// The services of one run.
#[derive(Debug, Default)]
pub(super) struct ServiceRuns {
    states: BTreeMap<String, State>,
}

impl ServiceRuns {
    /// Where `svc` answers, started now if it is not running; an error when it cannot start or
    /// died. `generation` is the lab's build count (a rebuilt lab took the service with it).
    pub(super) fn ensure(
        &mut self,
        exec: &mut dyn Executor,
        progress: &mut dyn Progress,
        svc: &ServiceSpec,
        lab: Option<&Lab>,
        generation: u64,
    ) -> Result<ServiceAnswer, ExecError> {
        let generation = if svc.site.is_some() { generation } else { 0 };
        match self.states.get(&svc.name) {
            Some(State::Gone(true, why)) => return Err(ExecError::Skip(why.clone())),
            Some(State::Gone(false, why)) => return Err(ExecError::FailedBefore(why.clone())),
            Some(State::Up {
                answer,
                generation: g,
            }) if *g == generation => {
                let answer = answer.clone();
                self.check(exec, &svc.name, "before the step")?;
                return Ok(answer);
            }
            Some(State::Up { .. }) => {
                progress.note(&format!(
                    "service {}: restarted with its rebuilt lab",
                    svc.name
                ));
                exec.service_stop(&svc.name);
            }
            None => {}
        }
        match exec.service_start(lab, svc) {
            Ok(answer) => {
                progress.note(&format!(
                    "service {}: answers at {}",
                    svc.describe(),
                    answer.url
                ));
                self.states.insert(
                    svc.name.clone(),
                    State::Up {
                        answer: answer.clone(),
                        generation,
                    },
                );
                Ok(answer)
            }
            Err(ExecError::Interrupted) => Err(ExecError::Interrupted),
            Err(ExecError::Skip(why)) => {
                self.states
                    .insert(svc.name.clone(), State::Gone(true, why.clone()));
                Err(ExecError::Skip(why))
            }
            Err(e) => {
                let why = format!("{e}; every step through service {} fails", svc.name);
                self.states
                    .insert(svc.name.clone(), State::Gone(false, why.clone()));
                Err(ExecError::FailedBefore(why))
            }
        }
    }

    /// `Ok` while the service runs; once it died, an error naming it (and every later
    /// step through it fails with that error).
    pub(super) fn check(
        &mut self,
        exec: &mut dyn Executor,
        name: &str,
        when: &str,
    ) -> Result<(), ExecError> {
        if let Some(State::Gone(_, why)) = self.states.get(name) {
            return Err(ExecError::FailedBefore(why.clone()));
        }
        exec.service_check(name).map_err(|e| {
            let why = format!(
                "{e}, found {when}: the step's figures cannot be trusted and every later step through it fails (a plan never falls back to another path)"
            );
            self.states
                .insert(name.to_string(), State::Gone(false, why.clone()));
            exec.service_stop(name);
            ExecError::FailedBefore(why)
        })
    }

    /// Stops every service still running.
    pub(super) fn stop_all(&mut self, exec: &mut dyn Executor) {
        for (name, state) in &self.states {
            if matches!(state, State::Up { .. }) {
                exec.service_stop(name);
            }
        }
        self.states.clear();
    }
}
