//! Runs a plan: builds the lab, walks the runs in order, applies each cell's link settings
//! and cache phase, measures through an [`Executor`], and writes each run to the store as it
//! ends.
//!
//! What cannot run here (no root for the lab or for a cold cache, a missing program) is
//! recorded as skipped with the reason, and the rest goes on; a run that fails is recorded as
//! failed and the rest goes on. Ctrl-C stops at the run in progress, which is not recorded.

use crate::error::{ExecError, StoreError};
use crate::exec::{Executor, RunContext};
use crate::plan::{Action, LinkSettings, Phase, Plan, RunKey, Target};
use crate::store::{RunStatus, Store};

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
    /// Runs failed in this execution.
    pub failed: usize,
    /// Runs already stored before (resume).
    pub already_done: usize,
    /// True when Ctrl-C stopped it.
    pub interrupted: bool,
    /// Why runs were skipped, one line per reason.
    pub skip_reasons: Vec<String>,
}

/// Options of one execution.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Complete the latest unfinished experiment of this plan instead of starting a new one.
    pub resume: bool,
}

fn needs_lab(plan: &Plan, ci: usize, si: usize) -> bool {
    match &plan.cells[ci].steps[si].action {
        Action::Net(n) => matches!(n.target, Target::Lab { .. }),
        Action::Io(io) => io.site.is_some(),
        Action::Exec(e) => e.site.is_some() || e.prime.is_some() && plan.lab.is_some(),
    }
}

/// Runs `plan` into `store` through `exec`.
pub fn run_plan(
    plan: &Plan,
    store: &mut Store,
    exec: &mut dyn Executor,
    opts: &RunOptions,
    progress: &mut dyn Progress,
) -> Result<RunSummary, StoreError> {
    let (experiment, done) = if opts.resume {
        let id = store.resumable(&plan.fingerprint())?.ok_or_else(|| {
            StoreError::NothingToResume(format!(
                "no unfinished experiment of plan \"{}\" (as written now) in the store",
                plan.name
            ))
        })?;
        store.reopen(id)?;
        (id, store.done_keys(id)?)
    } else {
        let host =
            serde_json::to_string(&nsperf_core::host::HostFacts::collect()).unwrap_or_default();
        (store.create_experiment(plan, &host)?, Vec::new())
    };
    let done: std::collections::HashSet<RunKey> = done.into_iter().collect();
    let all = plan.runs();
    let pending: Vec<_> = all.iter().filter(|(_, _, k)| !done.contains(k)).collect();
    progress.start(experiment, all.len(), all.len() - pending.len());
    let mut summary = RunSummary {
        experiment,
        measured: 0,
        skipped: 0,
        failed: 0,
        already_done: all.len() - pending.len(),
        interrupted: false,
        skip_reasons: Vec::new(),
    };
    let note_skip = |summary: &mut RunSummary, why: &str| {
        if !summary.skip_reasons.iter().any(|r| r == why) {
            summary.skip_reasons.push(why.to_string());
        }
    };
    // The lab, when a pending run needs it.
    // The lab: its current link, or why it is not there (true: skipped, false: failed).
    let mut lab_state: Option<Result<LinkSettings, (bool, String)>> = None;
    let lab = plan.lab.as_ref();
    if let Some(l) = lab
        && let Some((ci, _, _)) = pending.iter().find(|(ci, si, _)| needs_lab(plan, *ci, *si))
    {
        let link = plan.cells[*ci].link.clone().unwrap_or_default();
        progress.note(&format!(
            "lab {}: sites {} {}",
            l.name,
            l.sites.join(","),
            link.args().join(" ")
        ));
        lab_state = Some(match exec.lab_up(l, &link) {
            Ok(()) => Ok(link),
            Err(ExecError::Skip(why)) => Err((true, why)),
            Err(e) => Err((false, format!("lab up failed: {e}"))),
        });
    }
    let mut last_measured: Option<(usize, usize)> = None;
    let result = (|| -> Result<(), StoreError> {
        for (ci, si, key) in pending {
            if nsperf_core::signal::interrupted() {
                summary.interrupted = true;
                break;
            }
            let cell = &plan.cells[*ci];
            let step = &cell.steps[*si];
            let desc = step
                .params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            progress.run_start(key, &desc);
            let started = nsperf_core::clock::unix_time_ns();
            let ctx = RunContext {
                lab: lab.filter(|_| matches!(lab_state, Some(Ok(_)))),
                record: plan.record,
                cell: &key.cell,
                phase: key.phase,
                repetition: key.repetition,
            };
            let outcome = (|| -> Result<crate::exec::Measurement, ExecError> {
                if needs_lab(plan, *ci, *si) {
                    match &mut lab_state {
                        Some(Err((true, why))) => return Err(ExecError::Skip(why.clone())),
                        Some(Err((false, why))) => return Err(ExecError::Other(why.clone())),
                        Some(Ok(cur)) => {
                            let want = cell.link.clone().unwrap_or_default();
                            if *cur != want {
                                exec.lab_set(lab.expect("lab"), &want)?;
                                *cur = want;
                            }
                        }
                        None => {}
                    }
                }
                match key.phase {
                    Phase::None => {}
                    Phase::Cold => exec.drop_caches()?,
                    Phase::Warm => {
                        if last_measured != Some((*ci, *si)) {
                            // Warm the cache with one unmeasured run of the step.
                            exec.measure(&ctx, step)?;
                        }
                    }
                    Phase::RemoteWarm => {
                        exec.drop_caches()?;
                        if let Action::Exec(e) = &step.action
                            && let Some(p) = &e.prime
                        {
                            // The prime runs on the other site when there is a lab.
                            let remote = lab.and_then(|l| {
                                l.sites
                                    .iter()
                                    .find(|s| Some(s.as_str()) != e.site.as_deref())
                            });
                            exec.prime(&ctx, remote.map(String::as_str), p)?;
                        }
                    }
                }
                exec.measure(&ctx, step)
            })();
            match outcome {
                Ok(m) => {
                    last_measured = Some((*ci, *si));
                    store.write_run(experiment, key, &step.kind, &step.params, started, Ok(&m))?;
                    summary.measured += 1;
                    progress.run_end(
                        key,
                        &desc,
                        RunStatus::Ok,
                        &crate::stats::format_metric(&m.metric, m.value),
                    );
                }
                Err(ExecError::Interrupted) => {
                    summary.interrupted = true;
                    break;
                }
                Err(ExecError::Skip(why)) => {
                    last_measured = None;
                    store.write_run(
                        experiment,
                        key,
                        &step.kind,
                        &step.params,
                        started,
                        Err((RunStatus::Skipped, &why)),
                    )?;
                    summary.skipped += 1;
                    note_skip(&mut summary, &format!("{}: {why}", step.name));
                    progress.run_end(key, &desc, RunStatus::Skipped, &why);
                }
                Err(e) => {
                    last_measured = None;
                    let why = e.to_string();
                    store.write_run(
                        experiment,
                        key,
                        &step.kind,
                        &step.params,
                        started,
                        Err((RunStatus::Failed, &why)),
                    )?;
                    summary.failed += 1;
                    progress.run_end(key, &desc, RunStatus::Failed, &why);
                }
            }
        }
        Ok(())
    })();
    if let (Some(l), Some(Ok(_))) = (lab, &lab_state) {
        exec.lab_down(l);
    }
    result?;
    let (_, skipped, failed) = store.counts(experiment)?;
    let status = if summary.interrupted {
        "interrupted"
    } else if skipped + failed > 0 {
        "partial"
    } else {
        "complete"
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
