//! The plan's lab during a run: built when the first run that needs it comes, its link
//! changed between cells (rebuilt when the MTU changes, which only `lab up` sets), and torn
//! down when the run ends for any reason. Built under a name unique to this run unless the
//! plan names it.

use crate::error::ExecError;
use crate::exec::{Executor, Lab};
use crate::plan::{LabSpec, LinkSettings, describe_link};

use super::Progress;

/// Where the lab stands.
#[derive(Debug)]
enum State {
    /// Not built yet.
    Down,
    /// Up with this link.
    Up(Box<LinkSettings>),
    /// Could not be built: skipped (true: cannot here) or failed, and why.
    Unavailable(bool, String),
}

/// The lab of one run.
#[derive(Debug)]
pub(super) struct LabRun {
    lab: Lab,
    state: State,
}

impl LabRun {
    /// The lab of this run of the plan.
    pub(super) fn new(spec: &LabSpec) -> LabRun {
        LabRun {
            lab: Lab {
                name: spec.name_for_run(std::process::id(), nsperf_core::clock::unix_time_ns()),
                sites: spec.sites.clone(),
            },
            state: State::Down,
        }
    }

    /// The lab's name in this run.
    pub(super) fn name(&self) -> &str {
        &self.lab.name
    }

    /// The lab this run builds (up or not).
    pub(super) fn lab(&self) -> &Lab {
        &self.lab
    }

    /// The lab, while it is up.
    pub(super) fn up(&self) -> Option<&Lab> {
        matches!(self.state, State::Up(_)).then_some(&self.lab)
    }

    /// Makes the lab's link `link`, building the lab first if needed.
    pub(super) fn ensure(
        &mut self,
        exec: &mut dyn Executor,
        progress: &mut dyn Progress,
        link: &LinkSettings,
    ) -> Result<(), ExecError> {
        match &self.state {
            State::Unavailable(true, why) => return Err(ExecError::Skip(why.clone())),
            State::Unavailable(false, why) => return Err(ExecError::Other(why.clone())),
            State::Up(cur) if **cur == *link => return Ok(()),
            State::Up(cur) if cur.mtu() == link.mtu() => {
                exec.lab_set(&self.lab, link)?;
                self.state = State::Up(Box::new(link.clone()));
                return Ok(());
            }
            State::Up(_) => {
                progress.note(&format!(
                    "lab {}: rebuilt for MTU {}",
                    self.lab.name,
                    link.mtu()
                ));
                exec.lab_down(&self.lab);
                self.state = State::Down;
            }
            State::Down => {}
        }
        progress.note(&format!(
            "lab {}: sites {} {}",
            self.lab.name,
            self.lab.sites.join(","),
            describe_link(link)
        ));
        match exec.lab_up(&self.lab, link) {
            Ok(()) => {
                self.state = State::Up(Box::new(link.clone()));
                Ok(())
            }
            Err(ExecError::Skip(why)) => {
                self.state = State::Unavailable(true, why.clone());
                Err(ExecError::Skip(why))
            }
            Err(ExecError::Interrupted) => Err(ExecError::Interrupted),
            Err(e) => {
                let why = format!("lab up: {e}");
                self.state = State::Unavailable(false, why.clone());
                Err(ExecError::Other(why))
            }
        }
    }

    /// Tears the lab down if this run built it.
    pub(super) fn down(&mut self, exec: &mut dyn Executor) {
        if matches!(self.state, State::Up(_)) {
            exec.lab_down(&self.lab);
            self.state = State::Down;
        }
    }
}
