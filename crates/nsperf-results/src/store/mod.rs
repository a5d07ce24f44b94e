//! The SQLite result store (default `./nsperf-results.db`).
//!
//! Invariants:
//! - every run is written in its own transaction as soon as it ends (WAL journal), so a crash
//!   or Ctrl-C loses at most the run in progress;
//! - a (experiment, cell, step, phase, repetition) has at most one row (`UNIQUE`); a resumed
//!   run replaces a failed or skipped row of the same key, never adds a second one;
//! - running a plan again makes a new experiment; nothing is overwritten.
//!
//! The schema is documented in `docs/schema.md` (section "Result store").

use std::collections::BTreeMap;
use std::path::Path;

use nsperf_core::process::ProcessId;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

mod events;
mod read;
mod rows;
mod schema;

use crate::error::StoreError;
use crate::model::{ExperimentStatus, Measurement, Phase, RunConditions, RunKey, RunStatus};
use crate::params::{ParamValue, Params};
use crate::{Metric, StepKind};

/// Version of the store schema (`PRAGMA user_version`). Older stores are upgraded in place
/// when opened (the columns added since are nullable; version 3 added `run_hosts`; version 4
/// `runs.lab_json`, `runs.findings_json` and `run_events`; version 5 `run_params` (typed,
/// resolved parameters), `experiments.label` and `runs.capture_path`; version 6
/// `run_hosts.series_json`, each host's intervals on the run's clock).
pub const STORE_VERSION: i64 = 6;

/// One experiment (one execution of a plan, resumed or not).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExperimentRecord {
    /// Experiment id.
    pub id: i64,
    /// Plan name.
    pub plan_name: String,
    /// Plan description.
    pub description: Option<String>,
    /// Fingerprint of the plan text.
    pub fingerprint: String,
    /// The plan text.
    pub plan_toml: String,
    /// Where the experiment stands.
    pub status: ExperimentStatus,
    /// Start, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// End of the last execution, ns since the Unix epoch.
    pub finished_unix_ns: Option<u64>,
    /// Runs the plan expands to.
    pub total_runs: u64,
    /// The nsperf version that ran it.
    pub nsperf_version: String,
    /// Host facts (JSON).
    pub host_json: String,
    /// What was skipped and why, one line each.
    pub notes: String,
    /// The label given with `nsperf run --label` (`native`, `replicated`), if any.
    pub label: Option<String>,
}

/// One stored run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    /// Run id.
    pub id: i64,
    /// Experiment id.
    pub experiment_id: i64,
    /// Cell key.
    pub cell: String,
    /// The matrix parameters the step depends on, with this cell's values, resolved and typed.
    pub params: Params,
    /// Step name.
    pub step: String,
    /// Step type.
    pub kind: StepKind,
    /// Cache phase (`-` when none).
    pub phase: Phase,
    /// Repetition, 1-based.
    pub repetition: u32,
    /// Outcome.
    pub status: RunStatus,
    /// Why it was skipped or failed.
    pub error: Option<String>,
    /// Start, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// Wall time.
    pub duration_ns: u64,
    /// Headline metric name (unit in the name).
    pub metric: Option<Metric>,
    /// Headline value.
    pub value: Option<f64>,
    /// Payload bytes.
    pub payload_bytes: Option<u64>,
    /// Wire bytes.
    pub wire_bytes: Option<u64>,
    /// Every figure of the engine's summary.
    pub metrics: BTreeMap<Metric, f64>,
    /// Resolved parameters.
    pub spec: BTreeMap<String, String>,
    /// What the run was measured under (absent in stores written before version 2).
    pub conditions: Option<RunConditions>,
    /// The lab's links during the run, as its emulator reported them: per direction the
    /// parameters and the counters' growth over the run (runs in a lab; store version 4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lab: Option<serde_json::Value>,
    /// What the runner found about the run beside the engine's own findings (a link outage
    /// the run crossed, with the figures of its own interval series).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<nsperf_core::Finding>,
    /// Where the capture taken during the run was kept (`nsperf run --keep-captures`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_path: Option<String>,
}

/// CPU use of one core over one interval of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuRow {
    /// Run id.
    pub run_id: i64,
    /// Interval start, s since the run started.
    pub start_s: f64,
    /// Interval length, s.
    pub length_s: f64,
    /// Core number.
    pub core: u32,
    /// Busy %.
    pub busy_pct: f64,
    /// User %.
    pub user_pct: f64,
    /// System %.
    pub sys_pct: f64,
    /// Softirq %.
    pub softirq_pct: f64,
}

/// A new experiment: what the store keeps about the plan that makes it.
#[derive(Debug, Clone, Copy)]
pub struct NewExperiment<'a> {
    /// Plan name.
    pub plan_name: &'a str,
    /// Plan description.
    pub description: Option<&'a str>,
    /// Fingerprint of the plan text (finds the experiment to resume).
    pub fingerprint: &'a str,
    /// The plan text.
    pub plan_toml: &'a str,
    /// Runs the plan expands to.
    pub total_runs: u64,
    /// Host facts (JSON).
    pub host_json: &'a str,
    /// A label for the experiment (`nsperf run --label`).
    pub label: Option<&'a str>,
}

/// Which run of which step a stored row is, and what it was measured under.
#[derive(Debug, Clone, Copy)]
pub struct RunHeader<'a> {
    /// The run's key.
    pub key: &'a RunKey,
    /// Step type.
    pub kind: StepKind,
    /// The matrix parameters the step depends on, with this cell's values, resolved.
    pub params: &'a [(String, ParamValue)],
    /// Start, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// What the run was measured under.
    pub conditions: Option<&'a RunConditions>,
}

/// Whether the process recorded as an experiment's owner still runs: the same pid with the
/// same start time (a pid reused by another process is not the owner); a row stored before
/// start times were recorded trusts the pid alone.
fn owner_alive(pid: u32, start: Option<u64>) -> bool {
    match start {
        Some(start_ticks) => ProcessId { pid, start_ticks }.is_alive(),
        None => ProcessId::of(pid).is_some(),
    }
}

/// The result store.
pub struct Store {
    conn: Connection,
    path: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.path)
    }
}

fn u(x: i64) -> u64 {
    x.max(0) as u64
}

impl Store {
    /// Opens (creating if needed) the store at `path`, in WAL mode.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let p = path.display().to_string();
        let e = |source| StoreError::Sqlite {
            path: p.clone(),
            error: source,
        };
        let mut conn = Connection::open(path).map_err(e)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(e)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(e)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(e)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(e)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(e)?;
        if version > STORE_VERSION {
            return Err(StoreError::Corrupt(format!(
                "{p} has store version {version}, newer than this nsperf ({STORE_VERSION})"
            )));
        }
        if version < STORE_VERSION {
            schema::upgrade(&mut conn, version).map_err(e)?;
        }
        Ok(Store { conn, path: p })
    }

    /// The connection (for the other modules of this crate).
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// An SQLite error on this store.
    pub(crate) fn sqlite(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            error: source,
        }
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |source| StoreError::Sqlite {
            path: self.path.clone(),
            error: source,
        }
    }

    /// Starts a new experiment owned by this process and returns its id.
    pub fn create_experiment(&mut self, new: &NewExperiment<'_>) -> Result<i64, StoreError> {
        let owner = ProcessId::current();
        self.conn
            .execute(
                "INSERT INTO experiments (plan_name, description, fingerprint, plan_toml, status,
                 started_unix_ns, total_runs, nsperf_version, host_json, owner_pid, owner_start,
                 label)
                 VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    new.plan_name,
                    new.description,
                    new.fingerprint,
                    new.plan_toml,
                    nsperf_core::clock::unix_time_ns() as i64,
                    new.total_runs as i64,
                    env!("CARGO_PKG_VERSION"),
                    new.host_json,
                    owner.pid,
                    owner.start_ticks as i64,
                    new.label,
                ],
            )
            .map_err(self.err())?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The latest experiment of this plan (same fingerprint) that is not complete, taken over
    /// by this process. An experiment whose owner is still alive is refused
    /// ([`StoreError::StillRunning`]); one whose owner died (killed, crashed) is resumed.
    pub fn take_over(&mut self, fingerprint: &str) -> Result<Option<i64>, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|source| StoreError::Sqlite {
                path: self.path.clone(),
                error: source,
            })?;
        let e = |source| StoreError::Sqlite {
            path: self.path.clone(),
            error: source,
        };
        let found: Option<(i64, String, Option<i64>, Option<i64>)> = tx
            .query_row(
                "SELECT id, status, owner_pid, owner_start FROM experiments
                 WHERE fingerprint = ?1 AND status != 'complete' ORDER BY id DESC LIMIT 1",
                params![fingerprint],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .map_err(e)?;
        let Some((id, status, pid, start)) = found else {
            return Ok(None);
        };
        if status == ExperimentStatus::Running.as_str()
            && let Some(pid) = pid
        {
            let pid = pid.clamp(0, u32::MAX as i64) as u32;
            if owner_alive(pid, start.map(u)) {
                return Err(StoreError::StillRunning {
                    experiment: id,
                    pid,
                });
            }
        }
        let me = ProcessId::current();
        tx.execute(
            "UPDATE experiments SET status = 'running', owner_pid = ?2, owner_start = ?3
             WHERE id = ?1",
            params![id, me.pid, me.start_ticks as i64],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
        Ok(Some(id))
    }

    /// Sets an experiment's status (and its end time, and notes when given).
    pub fn set_status(
        &mut self,
        id: i64,
        status: ExperimentStatus,
        notes: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE experiments SET status = ?2, finished_unix_ns = ?3,
                 notes = COALESCE(?4, notes) WHERE id = ?1",
                params![
                    id,
                    status.as_str(),
                    nsperf_core::clock::unix_time_ns() as i64,
                    notes
                ],
            )
            .map_err(self.err())?;
        Ok(())
    }

    /// Sets (or with `None` clears) an experiment's label.
    pub fn set_label(&mut self, id: i64, label: Option<&str>) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE experiments SET label = ?2 WHERE id = ?1",
                params![id, label],
            )
            .map_err(self.err())?;
        Ok(())
    }

    /// Keys of the runs of an experiment that are measured (`ok`).
    pub fn done_keys(&self, id: i64) -> Result<Vec<RunKey>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT cell, step, phase, repetition FROM runs
                 WHERE experiment_id = ?1 AND status = 'ok'",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .map_err(self.err())?;
        let mut v = Vec::new();
        for row in rows {
            let (cell, step, phase, rep) = row.map_err(self.err())?;
            v.push(RunKey {
                cell,
                step,
                phase: phase
                    .parse()
                    .map_err(|e| StoreError::Corrupt(format!("{e}")))?,
                repetition: rep.max(0) as u32,
            });
        }
        Ok(v)
    }

    /// Writes one finished run (measured, skipped or failed) in one transaction, replacing an
    /// earlier unmeasured row of the same key.
    pub fn write_run(
        &mut self,
        experiment: i64,
        run: &RunHeader<'_>,
        outcome: Result<&Measurement, (RunStatus, &str)>,
    ) -> Result<i64, StoreError> {
        let RunHeader {
            key,
            kind,
            params,
            started_unix_ns,
            conditions,
        } = *run;
        let path = self.path.clone();
        let e = move |source| StoreError::Sqlite {
            path: path.clone(),
            error: source,
        };
        let tx = self.conn.transaction().map_err(&e)?;
        tx.execute(
            "DELETE FROM runs WHERE experiment_id = ?1 AND cell = ?2 AND step = ?3
             AND phase = ?4 AND repetition = ?5 AND status != 'ok'",
            params![
                experiment,
                key.cell,
                key.step,
                key.phase.as_str(),
                key.repetition
            ],
        )
        .map_err(&e)?;
        let params_json = serde_json::to_string(
            &params
                .iter()
                .map(|(k, v)| (k, &v.value))
                .collect::<BTreeMap<_, _>>(),
        )
        .unwrap_or_default();
        let (status, error, m) = match outcome {
            Ok(m) if m.partial() => (RunStatus::Partial, m.host_errors(), Some(m)),
            Ok(m) => (RunStatus::Ok, None, Some(m)),
            Err((s, why)) => (s, Some(why.to_string()), None),
        };
        let empty = Measurement::default();
        let mm = m.unwrap_or(&empty);
        tx.execute(
            "INSERT INTO runs (experiment_id, cell, params_json, step, kind, phase, repetition,
             status, error, started_unix_ns, duration_ns, metric, value, payload_bytes,
             wire_bytes, metrics_json, spec_json, report_json, trace_json, conditions_json,
             lab_json, findings_json, capture_path)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
             ?18, ?19, ?20, ?21, ?22, ?23)",
            params![
                experiment,
                key.cell,
                params_json,
                key.step,
                kind.as_str(),
                key.phase.as_str(),
                key.repetition,
                status.as_str(),
                error,
                started_unix_ns as i64,
                mm.duration_ns as i64,
                m.map(|m| m.metric.clone()),
                m.map(|m| m.value),
                mm.payload_bytes.map(|b| b as i64),
                mm.wire_bytes.map(|b| b as i64),
                serde_json::to_string(&mm.metrics).unwrap_or_default(),
                serde_json::to_string(&mm.spec).unwrap_or_default(),
                mm.report_json,
                mm.trace_json,
                conditions.map(|c| serde_json::to_string(c).unwrap_or_default()),
                mm.lab_json,
                (!mm.findings.is_empty())
                    .then(|| serde_json::to_string(&mm.findings).unwrap_or_default()),
                mm.capture_path,
            ],
        )
        .map_err(&e)?;
        let run_id = tx.last_insert_rowid();
        events::write(&tx, run_id, &mm.events).map_err(&e)?;
        rows::params(&tx, run_id, params).map_err(&e)?;
        rows::intervals(&tx, run_id, &mm.series).map_err(&e)?;
        rows::cpu(&tx, run_id, &mm.cpu).map_err(&e)?;
        rows::hosts(&tx, run_id, &mm.hosts).map_err(&e)?;
        rows::nic(&tx, run_id, &mm.nic).map_err(&e)?;
        tx.commit().map_err(&e)?;
        Ok(run_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_is_this_process_and_a_dead_pid_is_not_alive() {
        let me = ProcessId::current();
        assert!(owner_alive(me.pid, Some(me.start_ticks)));
        assert!(
            owner_alive(me.pid, None),
            "a row without a start time trusts the pid"
        );
        assert!(
            !owner_alive(me.pid, Some(me.start_ticks + 1)),
            "same pid, other start time"
        );
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!owner_alive(pid, Some(0)));
        assert!(!owner_alive(pid, None));
    }
}
