//! Runs a plan: builds the lab, walks the runs in order, applies each cell's link settings
//! and cache phase, measures through an [`Executor`], and writes each run to the store as it
//! ends.
//!
//! What cannot run here (no root for the lab or for a cold cache, a missing program) is
//! recorded as skipped with the reason, and the rest goes on; a run that fails is recorded as
//! failed and the rest goes on. Ctrl-C stops at the run in progress, which is not recorded;
//! the lab is torn down whatever ends the run.

mod lab;
mod service;

use nsperf_results::{ExperimentStatus, NewExperiment, RunHeader, RunStatus, Store, StoreError};

use std::collections::{HashMap, HashSet};

use crate::error::{ExecError, RunError};
use crate::exec::{CommandRole, Executor, RunContext};
use crate::plan::{Action, Cell, Phase, Plan, ResolvedStep, RunKey};
use lab::LabRun;
use service::ServiceRuns;

/// What the runner tells whoever watches (the CLI's progress bar or plain lines).
pub trait Progress {
    /// The experiment starts: `total` runs, `done` of them already stored (resume).
    fn start(&mut self, experiment: i64, total: usize, done: usize);
    /// A run starts; `params` are the parameters its step depends on (`rtt=50ms,…`).
    fn run_start(&mut self, key: &RunKey, params: &str);
    /// A run ended: `outcome` is a short human summary.
    fn run_end(&mut self, key: &RunKey, params: &str, status: RunStatus, outcome: &str);
    /// A note (a skipped group of runs, the lab going up).
    fn note(&mut self, message: &str);
    /// The experiment ended.
    fn finish(&mut self);
}

/// A progress sink that ignores everything.
#[derive(Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&mut self, _: i64, _: usize, _: usize) {}
    fn run_start(&mut self, _: &RunKey, _: &str) {}
    fn run_end(&mut self, _: &RunKey, _: &str, _: RunStatus, _: &str) {}
    fn note(&mut self, _: &str) {}
    fn finish(&mut self) {}
}

/// How an execution of a plan ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// The experiment id.
    pub experiment: i64,
    /// Runs measured in this execution.
    pub measured: usize,
    /// Runs skipped in this execution.
    pub skipped: usize,
    /// Runs failed in this execution (partial runs on several hosts included).
    pub failed: usize,
    /// Runs already stored before (resume).
    pub already_done: usize,
    /// True when Ctrl-C stopped it.
    pub interrupted: bool,
    /// Why runs were skipped, one line per reason.
    pub skip_reasons: Vec<String>,
    /// The name the lab had in this run, when the plan has one.
    pub lab: Option<String>,
}

/// Options of one execution.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Complete the latest unfinished experiment of this plan instead of starting a new one.
    pub resume: bool,
    /// A label for the experiment (`native`, `replicated`), stored with it; a resumed
    /// experiment takes it too.
    pub label: Option<String>,
}

/// Opens the experiment: a new one, or with `resume` the latest unfinished one of this plan
/// (refused while the run that owns it is alive). Returns its id and the keys already done.
fn open_experiment(
    plan: &Plan,
    store: &mut Store,
    opts: &RunOptions,
) -> Result<(i64, HashSet<RunKey>), StoreError> {
    if opts.resume {
        let id = store.take_over(&plan.fingerprint())?.ok_or_else(|| {
            StoreError::NothingToResume(format!(
                "no unfinished experiment of plan \"{}\" (as written now) in the store",
                plan.name
            ))
        })?;
        if let Some(l) = &opts.label {
            store.set_label(id, Some(l))?;
        }
        return Ok((id, store.done_keys(id)?.into_iter().collect()));
    }
    let host = serde_json::to_string(&nsperf_core::host::HostFacts::collect()).unwrap_or_default();
    let id = store.create_experiment(&NewExperiment {
        plan_name: &plan.name,
        description: plan.description.as_deref(),
        fingerprint: &plan.fingerprint(),
        plan_toml: &plan.source,
        total_runs: plan.total_runs() as u64,
        host_json: &host,
        label: opts.label.as_deref(),
    })?;
    Ok((id, HashSet::new()))
}

/// Runs `plan` into `store` through `exec`.
pub fn run_plan(
    plan: &Plan,
    store: &mut Store,
    exec: &mut dyn Executor,
    opts: &RunOptions,
    progress: &mut dyn Progress,
) -> Result<RunSummary, RunError> {
    let mut lab = plan.lab.as_ref().map(LabRun::new);
    // A named lab another live run holds: refused before anything is stored or built.
    if let Some(l) = &lab {
        exec.lab_available(l.lab()).map_err(RunError::Refused)?;
    }
    let (experiment, done) = open_experiment(plan, store, opts)?;
    let all = plan.runs();
    let pending: Vec<_> = all.iter().filter(|(_, _, k)| !done.contains(k)).collect();
    progress.start(experiment, all.len(), all.len() - pending.len());
    let mut run = Runner {
        plan,
        exec,
        progress,
        lab: lab.as_mut(),
        services: ServiceRuns::default(),
        setups: HashMap::new(),
        last_measured: None,
        summary: RunSummary {
            experiment,
            measured: 0,
            skipped: 0,
            failed: 0,
            already_done: all.len() - pending.len(),
            interrupted: false,
            skip_reasons: Vec::new(),
            lab: None,
        },
    };
    // The last pending run of each (cell, step): its teardown follows it.
    let last: HashMap<(usize, usize), usize> = pending
        .iter()
        .enumerate()
        .map(|(i, (ci, si, _))| ((*ci, *si), i))
        .collect();
    let result = pending
        .iter()
        .enumerate()
        .try_for_each(|(i, (ci, si, key))| {
            run.one(store, *ci, *si, key)?;
            if last.get(&(*ci, *si)) == Some(&i) {
                run.teardown(*ci, *si);
            }
            Ok(())
        });
    // Whatever ended the walk (the end, Ctrl-C, a store error): the teardowns still due,
    // then the services, then the lab.
    let due: Vec<(usize, usize)> = run.setups.keys().copied().collect();
    for (ci, si) in due {
        run.teardown(ci, si);
    }
    run.services.stop_all(run.exec);
    if let Some(l) = run.lab.as_deref_mut() {
        l.down(run.exec);
    }
    let mut summary = run.summary;
    summary.lab = lab.map(|l| l.name().to_string());
    match result {
        Ok(()) | Err(Stop::Interrupted) => {}
        Err(Stop::Store(e)) => return Err(e.into()),
    }
    let (_, skipped, failed) = store.counts(experiment)?;
    let status = if summary.interrupted {
        ExperimentStatus::Interrupted
    } else if skipped + failed > 0 {
        ExperimentStatus::Partial
    } else {
        ExperimentStatus::Complete
    };
    let notes = summary.skip_reasons.join("\n");
    store.set_status(
        experiment,
        status,
        (!notes.is_empty()).then_some(notes.as_str()),
    )?;
    progress.finish();
    Ok(summary)
}

/// Why the walk over the runs stopped early.
enum Stop {
    /// Ctrl-C.
    Interrupted,
    /// The store refused a write.
    Store(StoreError),
}

/// The state of one execution of a plan.
struct Runner<'a> {
    plan: &'a Plan,
    exec: &'a mut dyn Executor,
    progress: &'a mut dyn Progress,
    lab: Option<&'a mut LabRun>,
    services: ServiceRuns,
    /// The (cell, step) pairs whose setup ran (or that have none but a teardown) and are
    /// not torn down yet: `Err` holds why the setup failed (true: skipped).
    setups: Setups,
    /// The (cell, step) measured last, for warm phases.
    last_measured: Option<(usize, usize)>,
    summary: RunSummary,
}

impl Runner<'_> {
    /// Carries out one run and stores what came of it.
    fn one(&mut self, store: &mut Store, ci: usize, si: usize, key: &RunKey) -> Result<(), Stop> {
        if nsperf_core::signal::interrupted() {
            self.summary.interrupted = true;
            return Err(Stop::Interrupted);
        }
        let cell = &self.plan.cells[ci];
        let step = &cell.steps[si];
        let desc = step
            .params
            .iter()
            .map(|(k, v)| format!("{k}={}", v.label()))
            .collect::<Vec<_>>()
            .join(",");
        self.progress.run_start(key, &desc);
        let conditions = cell.conditions(step);
        let header = RunHeader {
            key,
            kind: step.kind,
            params: &step.params,
            started_unix_ns: nsperf_core::clock::unix_time_ns(),
            conditions: Some(&conditions),
        };
        let mut outcome = self.measure(cell, (ci, si), step, key);
        if let Ok(m) = outcome.as_mut() {
            crate::exec::shared_port(m, step, cell.link.as_ref());
        }
        let (status, text) = match &outcome {
            Ok(m) if m.partial() => (
                RunStatus::Partial,
                format!(
                    "{} from the hosts that measured; {}",
                    m.metric.format(m.value),
                    m.host_errors().unwrap_or_default()
                ),
            ),
            Ok(m) => (RunStatus::Ok, m.metric.format(m.value)),
            Err(ExecError::Interrupted) => {
                self.summary.interrupted = true;
                return Err(Stop::Interrupted);
            }
            Err(ExecError::Skip(why)) => (RunStatus::Skipped, why.clone()),
            Err(e) => (RunStatus::Failed, e.to_string()),
        };
        let written = match &outcome {
            Ok(m) => store.write_run(self.summary.experiment, &header, Ok(m)),
            Err(_) => store.write_run(self.summary.experiment, &header, Err((status, &text))),
        };
        written.map_err(Stop::Store)?;
        match status {
            RunStatus::Ok => {
                self.last_measured = Some((ci, si));
                self.summary.measured += 1;
            }
            RunStatus::Skipped => {
                self.last_measured = None;
                self.summary.skipped += 1;
                let why = format!("{}: {text}", step.name);
                if !self.summary.skip_reasons.contains(&why) {
                    self.summary.skip_reasons.push(why);
                }
            }
            RunStatus::Failed | RunStatus::Partial => {
                self.last_measured = None;
                self.summary.failed += 1;
            }
        }
        self.progress.run_end(key, &desc, status, &text);
        Ok(())
    }

    /// The lab at this cell's link (when the step needs it), the service it goes through,
    /// its setup (once per cell), the cache phase, the step; then the service checked again.
    fn measure(
        &mut self,
        cell: &Cell,
        at: (usize, usize),
        step: &ResolvedStep,
        key: &RunKey,
    ) -> Result<crate::exec::Measurement, ExecError> {
        let in_lab = step.needs_lab(self.plan.lab.is_some());
        if in_lab && let (Some(lab), Some(link)) = (self.lab.as_deref_mut(), &cell.link) {
            lab.ensure(self.exec, self.progress, link)?;
        }
        let service = step
            .service()
            .and_then(|n| self.plan.services.iter().find(|s| s.name == n));
        let answer = match service {
            Some(svc) => {
                let generation = self.lab.as_deref().map_or(0, LabRun::generation);
                let lab = self.lab.as_deref().and_then(LabRun::up);
                Some(
                    self.services
                        .ensure(self.exec, self.progress, svc, lab, generation)?,
                )
            }
            None => None,
        };
        let up = self.lab.as_deref().and_then(LabRun::up).cloned();
        let ctx = RunContext {
            lab: up.as_ref(),
            record: self.plan.record,
            experiment: self.summary.experiment,
            cell: &key.cell,
            phase: key.phase,
            repetition: key.repetition,
            service: answer.as_ref(),
        };
        setup(&mut self.setups, self.exec, at, step, &ctx)?;
        match key.phase {
            Phase::None => {}
            // Through a network file protocol the engine sets the phase: it evicts the
            // server's copy after laying out the file (cold), or reads it through the server
            // once (remote-warm).
            Phase::Cold | Phase::RemoteWarm if step.engine_sets_cache() => {}
            Phase::Cold => self.exec.drop_caches()?,
            // Warm the cache with one unmeasured run of the step.
            Phase::Warm if self.last_measured != Some(at) => {
                self.exec.measure(&ctx, step)?;
            }
            Phase::Warm => {}
            Phase::RemoteWarm => {
                self.exec.drop_caches()?;
                if let Action::Exec(e) = &step.action
                    && let Some(p) = &e.prime
                {
                    // The prime runs on the other site when there is a lab.
                    let remote = ctx.lab.and_then(|l| {
                        l.sites
                            .iter()
                            .find(|s| Some(s.as_str()) != e.site.as_deref())
                    });
                    self.exec
                        .command(&ctx, remote.map(String::as_str), p, CommandRole::Prime)?;
                }
            }
        }
        let watch = match self.lab.as_deref_mut() {
            Some(lab) if in_lab => lab.watch(self.exec, step)?,
            _ => None,
        };
        let mut m = self.exec.measure(&ctx, step);
        if let (Some(w), Some(lab)) = (watch, self.lab.as_deref_mut()) {
            lab.finish(self.exec, w, step, m.as_mut().ok())?;
        }
        if let Some(svc) = service {
            // A service that died during the step fails it, whatever the engine said.
            self.services
                .check(self.exec, &svc.name, "after the step")?;
        }
        m
    }

    /// Runs the step's teardown once in the cell, after its last run, when its setup ran
    /// (even after Ctrl-C); a failure is reported, not fatal.
    fn teardown(&mut self, ci: usize, si: usize) {
        let Some(outcome) = self.setups.remove(&(ci, si)) else {
            return;
        };
        let cell = &self.plan.cells[ci];
        let step = &cell.steps[si];
        let (Ok(()), Some(cmd)) = (outcome, &step.teardown) else {
            return;
        };
        let key = cell.key();
        let ctx = RunContext {
            lab: self.lab.as_deref().and_then(LabRun::up),
            record: self.plan.record,
            cell: &key,
            phase: Phase::None,
            repetition: 0,
            service: None,
            experiment: self.summary.experiment,
        };
        if let Err(e) = self
            .exec
            .command(&ctx, step.site(), cmd, CommandRole::Teardown)
        {
            self.progress.note(&format!(
                "teardown of step {} [{key}] failed: {e}",
                step.name
            ));
        }
    }
}

/// Per (cell, step) whose setup ran and that is not torn down: `Err` holds why the setup
/// failed (true: skipped).
type Setups = HashMap<(usize, usize), Result<(), (bool, String)>>;

/// Runs the step's setup once in the cell, before its first run; a failed setup fails
/// every run of the step in the cell.
fn setup(
    setups: &mut Setups,
    exec: &mut dyn Executor,
    at: (usize, usize),
    step: &ResolvedStep,
    ctx: &RunContext<'_>,
) -> Result<(), ExecError> {
    if step.setup.is_none() && step.teardown.is_none() {
        return Ok(());
    }
    let outcome = match setups.entry(at) {
        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => {
            let outcome = match &step.setup {
                None => Ok(()),
                Some(cmd) => match exec.command(ctx, step.site(), cmd, CommandRole::Setup) {
                    Ok(()) => Ok(()),
                    Err(ExecError::Interrupted) => return Err(ExecError::Interrupted),
                    Err(ExecError::Skip(why)) => Err((true, why)),
                    Err(e) => Err((false, format!("setup failed: {e}"))),
                },
            };
            v.insert(outcome)
        }
    };
    match outcome {
        Ok(()) => Ok(()),
        Err((true, why)) => Err(ExecError::Skip(why.clone())),
        Err((false, why)) => Err(ExecError::FailedBefore(why.clone())),
    }
}
