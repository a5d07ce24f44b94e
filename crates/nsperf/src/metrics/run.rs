//! The figures of `nsperf run`, from the plan runner's progress events: runs by status,
//! per step, the run in progress and the time spent in runs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nsperf_plan::runner::Progress;
use nsperf_results::{RunKey, RunStatus};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::{Family, Labels};

/// Every status a run can end with, in the order they are listed.
const STATUSES: [RunStatus; 4] = [
    RunStatus::Ok,
    RunStatus::Skipped,
    RunStatus::Failed,
    RunStatus::Partial,
];

#[derive(Debug, Default)]
struct State {
    experiment: Option<i64>,
    planned: usize,
    stored_before: usize,
    /// Runs ended in this execution, by step and status.
    ended: BTreeMap<(String, String), u64>,
    /// Time spent in each step's runs, seconds.
    seconds: BTreeMap<String, f64>,
    /// The run in progress: its step, phase, repetition, parameters and start.
    current: Option<(RunKey, String, Instant)>,
}

/// The live figures of one `nsperf run` (shared with the endpoint).
#[derive(Debug, Clone, Default)]
pub struct RunMetrics {
    state: Arc<Mutex<State>>,
}

/// A [`Progress`] that keeps [`RunMetrics`] and passes every event on to `inner`.
pub struct Counting<'a, P: Progress> {
    /// The progress shown to the user.
    pub inner: &'a mut P,
    /// The figures kept.
    pub metrics: RunMetrics,
}

impl<P: Progress> Progress for Counting<'_, P> {
    fn start(&mut self, experiment: i64, total: usize, done: usize) {
        if let Ok(mut s) = self.metrics.state.lock() {
            s.experiment = Some(experiment);
            s.planned = total;
            s.stored_before = done;
        }
        self.inner.start(experiment, total, done);
    }

    fn run_start(&mut self, key: &RunKey, params: &str) {
        if let Ok(mut s) = self.metrics.state.lock() {
            s.current = Some((key.clone(), params.to_string(), Instant::now()));
        }
        self.inner.run_start(key, params);
    }

    fn run_end(&mut self, key: &RunKey, params: &str, status: RunStatus, outcome: &str) {
        if let Ok(mut s) = self.metrics.state.lock() {
            *s.ended
                .entry((key.step.clone(), status.to_string()))
                .or_default() += 1;
            if let Some((_, _, t0)) = s.current.take() {
                *s.seconds.entry(key.step.clone()).or_default() += t0.elapsed().as_secs_f64();
            }
        }
        self.inner.run_end(key, params, status, outcome);
    }

    fn note(&mut self, message: &str) {
        self.inner.note(message);
    }

    fn finish(&mut self) {
        self.inner.finish();
    }
}

impl Collector for RunMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let Ok(s) = self.state.lock() else {
            return Ok(());
        };
        let none = Labels::new();
        let status = |st: String| -> Labels { vec![("status", st)] };
        let mut f = Family::new(
            &mut enc,
            "nsperf_run_runs",
            "Runs of the plan ended in this execution, by status",
            None,
            MetricType::Counter,
        )?;
        for st in STATUSES.map(|s| s.to_string()) {
            let n = s
                .ended
                .iter()
                .filter(|((_, x), _)| *x == st)
                .map(|(_, n)| n);
            let n = n.sum();
            f.counter(&status(st), n)?;
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_run_step_runs",
            "Runs ended in this execution, by step and status",
            None,
            MetricType::Counter,
        )?;
        for ((step, st), n) in &s.ended {
            f.counter(&vec![("step", step.clone()), ("status", st.clone())], *n)?;
        }
        let seconds = Unit::Seconds;
        let mut f = Family::new(
            &mut enc,
            "nsperf_run_step_run",
            "Time spent in each step's ended runs",
            Some(&seconds),
            MetricType::Counter,
        )?;
        for (step, secs) in &s.seconds {
            f.counter_f64(&vec![("step", step.clone())], *secs)?;
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_run_runs_planned",
            "Runs in the experiment, those stored before (--resume) included",
            None,
            MetricType::Gauge,
        )?;
        f.gauge(&none, s.planned as f64)?;
        Family::new(
            &mut enc,
            "nsperf_run_runs_stored_before",
            "Runs of the experiment stored before this execution (--resume)",
            None,
            MetricType::Gauge,
        )?
        .gauge(&none, s.stored_before as f64)?;
        Family::new(
            &mut enc,
            "nsperf_run_experiment",
            "The experiment's id in the result store",
            None,
            MetricType::Gauge,
        )?
        .gauge(&none, s.experiment.unwrap_or(0) as f64)?;
        let mut f = Family::new(
            &mut enc,
            "nsperf_run_current_run",
            "Seconds the run in progress has taken so far; its labels say which run it is",
            Some(&seconds),
            MetricType::Gauge,
        )?;
        if let Some((key, params, t0)) = &s.current {
            let labels = vec![
                ("step", key.step.clone()),
                ("params", params.clone()),
                ("phase", key.phase.to_string()),
                ("repetition", key.repetition.to_string()),
            ];
            f.gauge(&labels, t0.elapsed().as_secs_f64())?;
        }
        Ok(())
    }
}
