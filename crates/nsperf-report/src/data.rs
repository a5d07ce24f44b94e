//! Everything an exporter needs about one experiment, loaded once from the store.

use std::collections::BTreeMap;

use nsperf_plan::exec::SeriesPoint;
use nsperf_plan::plan::{Action, Plan};
use nsperf_plan::stats::{GroupStats, group_stats};
use nsperf_plan::store::{CpuRow, ExperimentRecord, RunRecord};
use nsperf_plan::{Store, StoreError};

/// What the plan says about one statistics group: link settings and resolved step values,
/// for the ceilings and the heatmap.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupContext {
    /// Link rate, bit/s (lab plans).
    pub link_rate_bps: Option<f64>,
    /// Link RTT, s (lab plans).
    pub rtt_s: Option<f64>,
    /// Socket buffer asked for, bytes (network steps with an explicit window).
    pub window_bytes: Option<u64>,
    /// True for a network step between two lab sites.
    pub in_lab: bool,
    /// io: workload, file size, record size.
    pub io: Option<(String, u64, u64)>,
}

/// One experiment with its runs, statistics, series and CPU samples.
#[derive(Debug, Clone)]
pub struct ExperimentData {
    /// The experiment.
    pub experiment: ExperimentRecord,
    /// Every run, in the order written.
    pub runs: Vec<RunRecord>,
    /// Statistics per (step, cell, phase).
    pub stats: Vec<GroupStats>,
    /// Time series per run id.
    pub series: BTreeMap<i64, Vec<SeriesPoint>>,
    /// CPU rows per run id.
    pub cpu: BTreeMap<i64, Vec<CpuRow>>,
    /// Plan context per statistics group (same order as `stats`).
    pub context: Vec<GroupContext>,
    /// `nsperf trace --json` of the capture taken during a run, per run id.
    pub traces: BTreeMap<i64, serde_json::Value>,
}

impl ExperimentData {
    /// Loads experiment `which` (an id or `latest`).
    pub fn load(store: &Store, which: &str) -> Result<ExperimentData, StoreError> {
        let experiment = store.experiment(which)?;
        let runs = store.runs(experiment.id)?;
        let mut series = BTreeMap::new();
        let mut cpu = BTreeMap::new();
        let mut traces = BTreeMap::new();
        for r in &runs {
            series.insert(r.id, store.series(r.id)?);
            cpu.insert(r.id, store.cpu(r.id)?);
            if let (_, Some(t)) = store.raw_json(r.id)?
                && let Ok(v) = serde_json::from_str(&t)
            {
                traces.insert(r.id, v);
            }
        }
        let stats = group_stats(&runs, &|id| series.get(&id).cloned().unwrap_or_default());
        let plan = Plan::parse(experiment.plan_toml.as_bytes()).ok();
        let context = stats.iter().map(|g| context_of(plan.as_ref(), g)).collect();
        Ok(ExperimentData {
            experiment,
            runs,
            stats,
            series,
            cpu,
            context,
            traces,
        })
    }

    /// Names of the tests (steps), in first-run order.
    pub fn steps(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in &self.runs {
            if !v.contains(&r.step) {
                v.push(r.step.clone());
            }
        }
        v
    }

    /// Names of all parameters of a step's runs, sorted.
    pub fn param_names(&self, step: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .runs
            .iter()
            .filter(|r| r.step == step)
            .flat_map(|r| r.params.keys().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

fn context_of(plan: Option<&Plan>, g: &GroupStats) -> GroupContext {
    let Some(plan) = plan else {
        return GroupContext::default();
    };
    let Some(cell) = plan.cells.iter().find(|c| c.key() == g.cell) else {
        return GroupContext::default();
    };
    let Some(step) = cell.steps.iter().find(|s| s.name == g.step) else {
        return GroupContext::default();
    };
    let mut ctx = GroupContext::default();
    match &step.action {
        Action::Net(n) => {
            ctx.in_lab = matches!(n.target, nsperf_plan::plan::Target::Lab { .. });
            ctx.window_bytes = n.window.map(|w| w.0);
            if ctx.in_lab
                && let Some(l) = &cell.link
            {
                ctx.link_rate_bps = l.rate.map(|r| r.bps()).filter(|r| *r > 0.0);
                ctx.rtt_s = l.rtt.map(|t| t.as_secs_f64());
            }
        }
        Action::Io(io) => {
            ctx.io = Some((io.workload.clone(), io.size.0, io.bs.0));
        }
        Action::Exec(_) => {}
    }
    ctx
}
