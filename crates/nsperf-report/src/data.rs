//! Everything an exporter needs about one experiment, loaded once from the store.

use std::collections::BTreeMap;

use nsperf_results::Metric;
use nsperf_results::stats::{GroupStats, group_stats};
use nsperf_results::{
    CpuRow, ExperimentRecord, HostPart, RunConditions, RunEvent, RunRecord, SeriesPoint, Store,
    StoreError,
};

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
    /// What each statistics group was measured under (same order as `stats`; the default
    /// for runs stored before the store recorded it).
    pub context: Vec<RunConditions>,
    /// `nsperf trace --json` of the capture taken during a run, per run id.
    pub traces: BTreeMap<i64, serde_json::Value>,
    /// Per-host parts of runs on several hosts, per run id (runs on one host have none).
    pub hosts: BTreeMap<i64, Vec<HostPart>>,
    /// The lab's link events each run overlapped, per run id (runs without any have none).
    pub events: BTreeMap<i64, Vec<RunEvent>>,
    /// What the mirror of a replicated io run reported, per run id (runs without one have
    /// none).
    pub mirrors: BTreeMap<i64, MirrorFacts>,
}

/// A replicated io run's mirror, from its stored report (`summary.replication` and its
/// `mirror_*` finding).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MirrorFacts {
    /// `A`, `B` or `C`.
    pub protocol: String,
    /// The copies compared with their originals after the run: all equal, or not; `None`
    /// when not checked.
    pub copies_equal: Option<bool>,
    /// The finding naming what limited the run (`mirror_round_trip: …`), when there is one.
    pub finding: Option<String>,
}

impl MirrorFacts {
    /// The mirror of an io report (JSON), if it has one.
    fn of_report(json: &str) -> Option<MirrorFacts> {
        if !json.contains("\"replication\"") {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(json).ok()?;
        let rep = v.get("summary")?.get("replication")?;
        let finding = v.get("findings")?.as_array()?.iter().find_map(|f| {
            let id = f.get("id")?.as_str()?;
            let message = f.get("message")?.as_str()?;
            id.starts_with("mirror").then(|| format!("{id}: {message}"))
        });
        Some(MirrorFacts {
            protocol: rep
                .get("protocol")?
                .as_str()
                .unwrap_or_default()
                .to_string(),
            copies_equal: rep.get("copies_equal").and_then(serde_json::Value::as_bool),
            finding,
        })
    }
}

impl ExperimentData {
    /// Loads experiment `which` (an id or `latest`).
    pub fn load(store: &Store, which: &str) -> Result<ExperimentData, StoreError> {
        let experiment = store.experiment(which)?;
        let runs = store.runs(experiment.id)?;
        let mut series = BTreeMap::new();
        let mut cpu = BTreeMap::new();
        let mut traces = BTreeMap::new();
        let mut hosts = BTreeMap::new();
        let mut events = BTreeMap::new();
        let mut mirrors = BTreeMap::new();
        for r in &runs {
            let ev = store.events(r.id)?;
            if !ev.is_empty() {
                events.insert(r.id, ev);
            }
            let parts = store.hosts(r.id)?;
            if !parts.is_empty() {
                hosts.insert(r.id, parts);
            }
            series.insert(r.id, store.series(r.id)?);
            cpu.insert(r.id, store.cpu(r.id)?);
            let (report, trace) = store.raw_json(r.id)?;
            if let Some(m) = report.as_deref().and_then(MirrorFacts::of_report) {
                mirrors.insert(r.id, m);
            }
            if let Some(t) = trace
                && let Ok(v) = serde_json::from_str(&t)
            {
                traces.insert(r.id, v);
            }
        }
        let stats = group_stats(&runs, &|id| series.get(&id).cloned().unwrap_or_default());
        let context = stats
            .iter()
            .map(|g| {
                runs.iter()
                    .find(|r| g.run_ids.first() == Some(&r.id))
                    .and_then(|r| r.conditions.clone())
                    .unwrap_or_default()
            })
            .collect();
        Ok(ExperimentData {
            experiment,
            runs,
            stats,
            series,
            cpu,
            context,
            traces,
            hosts,
            events,
            mirrors,
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

    /// Names of all parameters of every run, sorted.
    pub fn all_param_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .runs
            .iter()
            .flat_map(|r| r.params.keys().cloned())
            .collect();
        v.sort();
        v.dedup();
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

/// The mean throughput of an io step's workload in one cache phase over file size × record
/// size: the iozone matrix.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IoMatrix {
    /// Step name.
    pub(crate) step: String,
    /// Workload (`seqread`, …).
    pub(crate) workload: String,
    /// Cache phase.
    pub(crate) phase: nsperf_results::Phase,
    /// The headline metric of the cells (unit in the name: `throughput_bytes_per_s`,
    /// `seeks_per_s`, …).
    pub(crate) metric: Metric,
    /// File sizes, bytes, ascending (rows).
    pub(crate) sizes: Vec<u64>,
    /// Record sizes, bytes, ascending (columns).
    pub(crate) records: Vec<u64>,
    /// `values[size][record]`: mean of the headline, in `metric`'s base unit; `None` = not
    /// measured.
    pub(crate) values: Vec<Vec<Option<f64>>>,
}

impl IoMatrix {
    /// The largest value.
    pub(crate) fn max(&self) -> f64 {
        self.values
            .iter()
            .flatten()
            .flatten()
            .copied()
            .fold(0.0, f64::max)
    }
}

/// Every io matrix of an experiment (from the io shape each run recorded).
pub(crate) fn io_matrices(d: &ExperimentData) -> Vec<IoMatrix> {
    let mut by: BTreeMap<MatrixKey, Vec<(u64, u64, f64)>> = BTreeMap::new();
    for (i, g) in d.stats.iter().enumerate() {
        if let Some(io) = &d.context[i].io {
            by.entry((
                g.step.clone(),
                io.workload.to_string(),
                g.phase,
                g.metric.clone(),
            ))
            .or_default()
            .push((io.size_bytes, io.bs_bytes, g.summary.mean));
        }
    }
    surfaces(by)
}

/// Step, workload, phase, headline metric.
type MatrixKey = (String, String, nsperf_results::Phase, Metric);

/// The file size × record size surfaces of the groups `(size, record, mean)` of each key.
/// Only a real surface: none with a single cell, and none where another parameter varies
/// (two groups in one cell, such as an NFS step at four RTTs), whose cells would each show
/// one of their values and hide the rest.
fn surfaces(by: BTreeMap<MatrixKey, Vec<(u64, u64, f64)>>) -> Vec<IoMatrix> {
    by.into_iter()
        .filter_map(|((step, workload, phase, metric), cells)| {
            let mut sizes: Vec<u64> = cells.iter().map(|c| c.0).collect();
            let mut records: Vec<u64> = cells.iter().map(|c| c.1).collect();
            sizes.sort_unstable();
            sizes.dedup();
            records.sort_unstable();
            records.dedup();
            let mut at: Vec<(u64, u64)> = cells.iter().map(|c| (c.0, c.1)).collect();
            at.sort_unstable();
            at.dedup();
            if cells.len() < 2 || at.len() < cells.len() {
                return None;
            }
            let values = sizes
                .iter()
                .map(|s| {
                    records
                        .iter()
                        .map(|b| cells.iter().find(|c| c.0 == *s && c.1 == *b).map(|c| c.2))
                        .collect()
                })
                .collect();
            Some(IoMatrix {
                step,
                workload,
                phase,
                metric,
                sizes,
                records,
                values,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_results::Phase;

    fn key(step: &str) -> MatrixKey {
        (
            step.into(),
            "seqread".into(),
            Phase::None,
            Metric::THROUGHPUT_BYTES_PER_S,
        )
    }

    #[test]
    fn a_surface_needs_cells_of_one_group_each() {
        let mut by = BTreeMap::new();
        // The iozone matrix: 2 sizes x 2 records, one group a cell (one missing).
        by.insert(
            key("io"),
            vec![
                (8 << 20, 4096, 1.0),
                (8 << 20, 1 << 20, 2.0),
                (32 << 20, 4096, 3.0),
            ],
        );
        // An NFS step at four RTTs: one size and record, four groups in the one cell.
        by.insert(
            key("nfs-read"),
            (0..4).map(|i| (384 << 10, 64 << 10, i as f64)).collect(),
        );
        // A single cell says nothing about a surface.
        by.insert(key("one"), vec![(1 << 20, 4096, 5.0)]);
        let m = surfaces(by);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].step, "io");
        assert_eq!(
            m[0].values,
            [vec![Some(1.0), Some(2.0)], vec![Some(3.0), None]]
        );
    }
}
