//! The plan's lab during a run: built when the first run that needs it comes, its link
//! changed between cells (rebuilt when the MTU changes, which only `lab up` sets), and torn
//! down when the run ends for any reason. Built under a name unique to this run unless the
//! plan names it.

use nsperf_lab::events::{self, LinkEvent, RunSeries};
use nsperf_lab::stats::{LabStats, LinksOverRun};
use nsperf_results::{Measurement, RunEvent, RunEventKind, RunEventSource};

use crate::error::ExecError;
use crate::exec::{Executor, Lab};
use crate::plan::{Action, LabSpec, LinkSettings, ResolvedStep, describe_link};

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

/// What the lab's links did during one run of a step: started as the step starts,
/// finished into its measurement as it ends.
pub(super) struct LinkWatch {
    before: Option<LabStats>,
    start_unix_ns: u64,
    scheduled: bool,
}

/// The lab of one run.
#[derive(Debug)]
pub(super) struct LabRun {
    lab: Lab,
    state: State,
    /// How many times it was built in this run (a service started in an earlier build is
    /// gone).
    generation: u64,
}

impl LabRun {
    /// The lab of this run of the plan.
    pub(super) fn new(spec: &LabSpec) -> LabRun {
        LabRun {
            lab: Lab {
                name: spec.name_for_run(std::process::id(), nsperf_core::clock::unix_time_ns()),
                sites: spec.sites.clone(),
                shape: spec.shape.clone(),
            },
            state: State::Down,
            generation: 0,
        }
    }

    /// How many times the lab was built in this run.
    pub(super) fn generation(&self) -> u64 {
        self.generation
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
            State::Unavailable(false, why) => return Err(ExecError::FailedBefore(why.clone())),
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
                self.generation += 1;
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
                Err(ExecError::FailedBefore(why))
            }
        }
    }

    /// Starts watching the links for a run of `step` (playing its schedule); `None` when
    /// the lab is not up.
    pub(super) fn watch(
        &mut self,
        exec: &mut dyn Executor,
        step: &ResolvedStep,
    ) -> Result<Option<LinkWatch>, ExecError> {
        if self.up().is_none() {
            return Ok(None);
        }
        let before = exec.lab_stats(&self.lab);
        let start_unix_ns = nsperf_core::clock::unix_time_ns();
        if let Some(s) = &step.schedule {
            exec.lab_schedule(&self.lab, s)?;
        }
        Ok(Some(LinkWatch {
            before,
            start_unix_ns,
            scheduled: step.schedule.is_some(),
        }))
    }

    /// Ends a watch: stops the step's schedule and puts the cell's link back; gives the
    /// measurement the lab's links over the run, the link events it overlapped and the
    /// outages it crossed (with the figures of its own series).
    pub(super) fn finish(
        &mut self,
        exec: &mut dyn Executor,
        w: LinkWatch,
        step: &ResolvedStep,
        m: Option<&mut Measurement>,
    ) -> Result<(), ExecError> {
        let end_unix_ns = nsperf_core::clock::unix_time_ns();
        let after = exec.lab_stats(&self.lab);
        let all = exec.lab_events(&self.lab);
        if w.scheduled {
            exec.lab_stop_schedules(&self.lab);
            if let State::Up(link) = &self.state {
                exec.lab_set(&self.lab, link)?;
            }
        }
        let Some(m) = m else { return Ok(()) };
        if let (Some(b), Some(a)) = (&w.before, &after) {
            m.lab_json = serde_json::to_string(&LinksOverRun::between(b, a)).ok();
        }
        // Times on the series' clock: from the engine's start when it says.
        let origin = m.started_unix_ns.unwrap_or(w.start_unix_ns);
        m.events = run_events(&all, origin, w.start_unix_ns, end_unix_ns);
        let intervals: Vec<events::Interval> = m
            .series
            .iter()
            .map(|p| (p.start_s, p.length_s, p.value))
            .collect();
        let tcp = matches!(step.action, Action::Net(_));
        let series = (!intervals.is_empty()).then_some(RunSeries {
            intervals: &intervals,
            backoff_cause: tcp.then_some("TCP's retransmission backoff"),
        });
        let end = origin.max(end_unix_ns);
        m.findings
            .extend(events::outage_findings(&all, origin, end, series));
        Ok(())
    }

    /// Tears the lab down if this run built it.
    pub(super) fn down(&mut self, exec: &mut dyn Executor) {
        if matches!(self.state, State::Up(_)) {
            exec.lab_down(&self.lab);
            self.state = State::Down;
        }
    }
}

/// The link changes a run from `start` to `end` overlapped, on the clock whose 0 is
/// `origin` (all Unix ns).
fn run_events(all: &[LinkEvent], origin: u64, start: u64, end: u64) -> Vec<RunEvent> {
    let rel = |t: u64| (t as f64 - origin as f64) / 1e9;
    events::during(all, start, end)
        .into_iter()
        .map(|(e, until)| RunEvent {
            at_s: rel(e.t_unix_ns),
            t_unix_ns: e.t_unix_ns,
            source: match e.source {
                events::EventSource::Emulator => RunEventSource::Emulator,
                events::EventSource::Set => RunEventSource::Set,
                events::EventSource::Schedule => RunEventSource::Schedule,
                events::EventSource::Capture => RunEventSource::Capture,
            },
            kind: match e.kind {
                events::EventKind::Down => RunEventKind::Down,
                events::EventKind::Up => RunEventKind::Up,
                _ => RunEventKind::Change,
            },
            text: e.text.clone(),
            directions: e.directions.clone(),
            until_s: until.map(rel),
        })
        .collect()
}
