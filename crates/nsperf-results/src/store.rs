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

use crate::error::StoreError;
use crate::model::{
    ExperimentStatus, HostPart, Measurement, NicDelta, Phase, RunConditions, RunKey, RunStatus,
    SeriesPoint,
};

/// Version of the store schema (`PRAGMA user_version`). Older stores are upgraded in place
/// when opened (the columns added since are nullable; version 3 only adds `run_hosts`;
/// version 4 adds `runs.lab_json`, `runs.findings_json` and `run_events`).
pub const STORE_VERSION: i64 = 4;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS experiments (
    id INTEGER PRIMARY KEY,
    plan_name TEXT NOT NULL,
    description TEXT,
    fingerprint TEXT NOT NULL,
    plan_toml TEXT NOT NULL,
    status TEXT NOT NULL,
    started_unix_ns INTEGER NOT NULL,
    finished_unix_ns INTEGER,
    total_runs INTEGER NOT NULL,
    nsperf_version TEXT NOT NULL,
    host_json TEXT NOT NULL,
    notes TEXT NOT NULL DEFAULT '',
    owner_pid INTEGER,
    owner_start INTEGER
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    cell TEXT NOT NULL,
    params_json TEXT NOT NULL,
    step TEXT NOT NULL,
    kind TEXT NOT NULL,
    phase TEXT NOT NULL,
    repetition INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    started_unix_ns INTEGER NOT NULL,
    duration_ns INTEGER NOT NULL,
    metric TEXT,
    value REAL,
    payload_bytes INTEGER,
    wire_bytes INTEGER,
    metrics_json TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    report_json TEXT,
    trace_json TEXT,
    conditions_json TEXT,
    lab_json TEXT,
    findings_json TEXT,
    UNIQUE (experiment_id, cell, step, phase, repetition)
);
CREATE TABLE IF NOT EXISTS run_events (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    at_s REAL NOT NULL,
    t_unix_ns INTEGER NOT NULL,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    directions_json TEXT NOT NULL,
    until_s REAL
);
CREATE TABLE IF NOT EXISTS intervals (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    start_s REAL NOT NULL,
    length_s REAL NOT NULL,
    value REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS cpu (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    start_s REAL NOT NULL,
    length_s REAL NOT NULL,
    core INTEGER NOT NULL,
    busy_pct REAL NOT NULL,
    user_pct REAL NOT NULL,
    sys_pct REAL NOT NULL,
    softirq_pct REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS nic (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    site TEXT NOT NULL,
    iface TEXT NOT NULL,
    rx_bytes INTEGER NOT NULL,
    tx_bytes INTEGER NOT NULL,
    rx_packets INTEGER NOT NULL,
    tx_packets INTEGER NOT NULL,
    rx_dropped INTEGER NOT NULL,
    tx_dropped INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS run_hosts (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    host TEXT NOT NULL,
    role TEXT NOT NULL,
    error TEXT,
    metric TEXT NOT NULL,
    value REAL NOT NULL,
    payload_bytes INTEGER,
    started_unix_ns INTEGER NOT NULL,
    clock_offset_ns INTEGER NOT NULL,
    clock_error_ns INTEGER NOT NULL,
    metrics_json TEXT NOT NULL,
    report_json TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_experiment ON runs(experiment_id);
CREATE INDEX IF NOT EXISTS run_hosts_by_run ON run_hosts(run_id);
CREATE INDEX IF NOT EXISTS intervals_by_run ON intervals(run_id);
CREATE INDEX IF NOT EXISTS cpu_by_run ON cpu(run_id);
CREATE INDEX IF NOT EXISTS nic_by_run ON nic(run_id);
CREATE INDEX IF NOT EXISTS run_events_by_run ON run_events(run_id);
";

/// What version 2 added to a version 1 store.
const UPGRADE_1_TO_2: &str = "
ALTER TABLE experiments ADD COLUMN owner_pid INTEGER;
ALTER TABLE experiments ADD COLUMN owner_start INTEGER;
ALTER TABLE runs ADD COLUMN conditions_json TEXT;
";

/// What version 4 added to a version 1-3 store (`run_events` comes with [`SCHEMA`]).
const UPGRADE_TO_4: &str = "
ALTER TABLE runs ADD COLUMN lab_json TEXT;
ALTER TABLE runs ADD COLUMN findings_json TEXT;
";

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
    /// The matrix parameters the step depends on, with this cell's values.
    pub params: BTreeMap<String, String>,
    /// Step name.
    pub step: String,
    /// Step type.
    pub kind: String,
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
    pub metric: Option<String>,
    /// Headline value.
    pub value: Option<f64>,
    /// Payload bytes.
    pub payload_bytes: Option<u64>,
    /// Wire bytes.
    pub wire_bytes: Option<u64>,
    /// Every figure of the engine's summary.
    pub metrics: BTreeMap<String, f64>,
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
}

/// Which run of which step a stored row is, and what it was measured under.
#[derive(Debug, Clone, Copy)]
pub struct RunHeader<'a> {
    /// The run's key.
    pub key: &'a RunKey,
    /// Step type (`net`, `rr`, `sweep`, `io`, `exec`).
    pub kind: &'a str,
    /// The matrix parameters the step depends on, with this cell's values.
    pub params: &'a [(String, String)],
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
        let conn = Connection::open(path).map_err(e)?;
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
        if version == 1 {
            conn.execute_batch(UPGRADE_1_TO_2).map_err(e)?;
        }
        if (1..4).contains(&version) {
            conn.execute_batch(UPGRADE_TO_4).map_err(e)?;
        }
        conn.execute_batch(SCHEMA).map_err(e)?;
        conn.pragma_update(None, "user_version", STORE_VERSION)
            .map_err(e)?;
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
                 started_unix_ns, total_runs, nsperf_version, host_json, owner_pid, owner_start)
                 VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9, ?10)",
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
        let params_json =
            serde_json::to_string(&params.iter().cloned().collect::<BTreeMap<_, _>>())
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
             lab_json, findings_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
             ?18, ?19, ?20, ?21, ?22)",
            params![
                experiment,
                key.cell,
                params_json,
                key.step,
                kind,
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
            ],
        )
        .map_err(&e)?;
        let run_id = tx.last_insert_rowid();
        crate::events::write(&tx, run_id, &mm.events).map_err(&e)?;
        {
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO intervals (run_id, start_s, length_s, value) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(&e)?;
            for p in &mm.series {
                st.execute(params![run_id, p.start_s, p.length_s, p.value])
                    .map_err(&e)?;
            }
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO cpu (run_id, start_s, length_s, core, busy_pct, user_pct, sys_pct,
                     softirq_pct) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(&e)?;
            for c in &mm.cpu {
                for k in &c.cpu.per_core {
                    st.execute(params![
                        run_id,
                        c.start_s,
                        c.length_s,
                        k.core,
                        k.busy_pct,
                        k.user_pct,
                        k.sys_pct,
                        k.softirq_pct
                    ])
                    .map_err(&e)?;
                }
            }
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO run_hosts (run_id, host, role, error, metric, value, payload_bytes,
                     started_unix_ns, clock_offset_ns, clock_error_ns, metrics_json, report_json)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                )
                .map_err(&e)?;
            for h in &mm.hosts {
                st.execute(params![
                    run_id,
                    h.host,
                    h.role,
                    h.error,
                    h.metric,
                    h.value,
                    h.payload_bytes.map(|b| b as i64),
                    h.started_unix_ns as i64,
                    h.clock_offset_ns,
                    h.clock_error_ns as i64,
                    serde_json::to_string(&h.metrics).unwrap_or_default(),
                    h.report_json,
                ])
                .map_err(&e)?;
            }
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO nic (run_id, site, iface, rx_bytes, tx_bytes, rx_packets,
                     tx_packets, rx_dropped, tx_dropped) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .map_err(&e)?;
            for NicDelta { site, counters: c } in &mm.nic {
                st.execute(params![
                    run_id,
                    site,
                    c.name,
                    c.rx_bytes as i64,
                    c.tx_bytes as i64,
                    c.rx_packets as i64,
                    c.tx_packets as i64,
                    c.rx_dropped as i64,
                    c.tx_dropped as i64
                ])
                .map_err(&e)?;
            }
        }
        tx.commit().map_err(&e)?;
        Ok(run_id)
    }

    fn experiment_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ExperimentRecord> {
        Ok(ExperimentRecord {
            id: r.get(0)?,
            plan_name: r.get(1)?,
            description: r.get(2)?,
            fingerprint: r.get(3)?,
            plan_toml: r.get(4)?,
            status: r.get::<_, String>(5)?.parse().map_err(|e: String| {
                rusqlite::Error::FromSqlConversionFailure(5, rusqlite::types::Type::Text, e.into())
            })?,
            started_unix_ns: u(r.get(6)?),
            finished_unix_ns: r.get::<_, Option<i64>>(7)?.map(u),
            total_runs: u(r.get(8)?),
            nsperf_version: r.get(9)?,
            host_json: r.get(10)?,
            notes: r.get(11)?,
        })
    }

    const EXP_COLS: &'static str = "id, plan_name, description, fingerprint, plan_toml, status,
        started_unix_ns, finished_unix_ns, total_runs, nsperf_version, host_json, notes";

    /// Every experiment, oldest first.
    pub fn experiments(&self) -> Result<Vec<ExperimentRecord>, StoreError> {
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT {} FROM experiments ORDER BY id",
                Self::EXP_COLS
            ))
            .map_err(self.err())?;
        let rows = st
            .query_map([], Self::experiment_from_row)
            .map_err(self.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.err())
    }

    /// One experiment by id, or the latest for `latest`.
    pub fn experiment(&self, which: &str) -> Result<ExperimentRecord, StoreError> {
        let r = if which == "latest" {
            self.conn
                .query_row(
                    &format!(
                        "SELECT {} FROM experiments ORDER BY id DESC LIMIT 1",
                        Self::EXP_COLS
                    ),
                    [],
                    Self::experiment_from_row,
                )
                .optional()
        } else {
            let id: i64 = which.parse().map_err(|_| {
                StoreError::NoExperiment(format!("\"{which}\" (give a number or latest)"))
            })?;
            self.conn
                .query_row(
                    &format!("SELECT {} FROM experiments WHERE id = ?1", Self::EXP_COLS),
                    params![id],
                    Self::experiment_from_row,
                )
                .optional()
        };
        r.map_err(self.err())?
            .ok_or_else(|| StoreError::NoExperiment(which.to_string()))
    }

    /// Counts of an experiment's runs by status: (ok, skipped, failed), partial runs (some
    /// hosts failed) counted as failed.
    pub fn counts(&self, id: i64) -> Result<(u64, u64, u64), StoreError> {
        self.conn
            .query_row(
                "SELECT COALESCE(SUM(status = 'ok'), 0), COALESCE(SUM(status = 'skipped'), 0),
                 COALESCE(SUM(status IN ('failed', 'partial')), 0) FROM runs WHERE experiment_id = ?1",
                params![id],
                |r| Ok((u(r.get(0)?), u(r.get(1)?), u(r.get(2)?))),
            )
            .map_err(self.err())
    }

    /// The runs of an experiment, in the order they were written.
    pub fn runs(&self, id: i64) -> Result<Vec<RunRecord>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT id, experiment_id, cell, params_json, step, kind, phase, repetition,
                 status, error, started_unix_ns, duration_ns, metric, value, payload_bytes,
                 wire_bytes, metrics_json, spec_json, conditions_json, lab_json,
                 findings_json FROM runs
                 WHERE experiment_id = ?1 ORDER BY id",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, String>(8)?,
                    r.get::<_, Option<String>>(9)?,
                    r.get::<_, i64>(10)?,
                    r.get::<_, i64>(11)?,
                    r.get::<_, Option<String>>(12)?,
                    r.get::<_, Option<f64>>(13)?,
                    (
                        r.get::<_, Option<i64>>(14)?,
                        r.get::<_, Option<i64>>(15)?,
                        r.get::<_, String>(16)?,
                        r.get::<_, String>(17)?,
                        r.get::<_, Option<String>>(18)?,
                        r.get::<_, Option<String>>(19)?,
                        r.get::<_, Option<String>>(20)?,
                    ),
                ))
            })
            .map_err(self.err())?;
        let mut v = Vec::new();
        for row in rows {
            let (
                id,
                exp,
                cell,
                pj,
                step,
                kind,
                phase,
                rep,
                status,
                error,
                st,
                dur,
                metric,
                value,
                rest,
            ) = row.map_err(self.err())?;
            let (payload, wire, mj, sj, cj, lj, fj) = rest;
            let bad = |what: &str, e: serde_json::Error| {
                StoreError::Corrupt(format!("{what} of run {id}: {e}"))
            };
            v.push(RunRecord {
                id,
                experiment_id: exp,
                cell,
                params: serde_json::from_str(&pj).map_err(|e| bad("params", e))?,
                step,
                kind,
                phase: phase
                    .parse()
                    .map_err(|e| StoreError::Corrupt(format!("{e} in run {id}")))?,
                repetition: rep.max(0) as u32,
                status: status.parse().map_err(StoreError::Corrupt)?,
                error,
                started_unix_ns: u(st),
                duration_ns: u(dur),
                metric,
                value,
                payload_bytes: payload.map(u),
                wire_bytes: wire.map(u),
                metrics: serde_json::from_str(&mj).map_err(|e| bad("metrics", e))?,
                spec: serde_json::from_str(&sj).map_err(|e| bad("spec", e))?,
                conditions: cj
                    .map(|c| serde_json::from_str(&c).map_err(|e| bad("conditions", e)))
                    .transpose()?,
                lab: lj
                    .map(|c| serde_json::from_str(&c).map_err(|e| bad("lab", e)))
                    .transpose()?,
                findings: fj
                    .map(|c| serde_json::from_str(&c).map_err(|e| bad("findings", e)))
                    .transpose()?
                    .unwrap_or_default(),
            });
        }
        Ok(v)
    }

    /// The per-host parts of one run (empty for a run on one host), in the order written.
    pub fn hosts(&self, run_id: i64) -> Result<Vec<HostPart>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT host, role, error, metric, value, payload_bytes, started_unix_ns,
                 clock_offset_ns, clock_error_ns, metrics_json, report_json FROM run_hosts
                 WHERE run_id = ?1 ORDER BY rowid",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok((
                    HostPart {
                        host: r.get(0)?,
                        role: r.get(1)?,
                        error: r.get(2)?,
                        metric: r.get(3)?,
                        value: r.get(4)?,
                        payload_bytes: r.get::<_, Option<i64>>(5)?.map(u),
                        started_unix_ns: u(r.get(6)?),
                        clock_offset_ns: r.get(7)?,
                        clock_error_ns: u(r.get(8)?),
                        metrics: BTreeMap::new(),
                        report_json: r.get(10)?,
                    },
                    r.get::<_, String>(9)?,
                ))
            })
            .map_err(self.err())?;
        let mut v = Vec::new();
        for row in rows {
            let (mut h, mj) = row.map_err(self.err())?;
            h.metrics = serde_json::from_str(&mj).map_err(|e| {
                StoreError::Corrupt(format!("metrics of host {} of run {run_id}: {e}", h.host))
            })?;
            v.push(h);
        }
        Ok(v)
    }

    /// The time series of one run.
    pub fn series(&self, run_id: i64) -> Result<Vec<SeriesPoint>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT start_s, length_s, value FROM intervals WHERE run_id = ?1 ORDER BY start_s",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok(SeriesPoint {
                    start_s: r.get(0)?,
                    length_s: r.get(1)?,
                    value: r.get(2)?,
                })
            })
            .map_err(self.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.err())
    }

    /// The CPU rows of one run.
    pub fn cpu(&self, run_id: i64) -> Result<Vec<CpuRow>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT run_id, start_s, length_s, core, busy_pct, user_pct, sys_pct, softirq_pct
                 FROM cpu WHERE run_id = ?1 ORDER BY start_s, core",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok(CpuRow {
                    run_id: r.get(0)?,
                    start_s: r.get(1)?,
                    length_s: r.get(2)?,
                    core: r.get::<_, i64>(3)?.max(0) as u32,
                    busy_pct: r.get(4)?,
                    user_pct: r.get(5)?,
                    sys_pct: r.get(6)?,
                    softirq_pct: r.get(7)?,
                })
            })
            .map_err(self.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.err())
    }

    /// The NIC deltas of one run.
    pub fn nic(&self, run_id: i64) -> Result<Vec<NicDelta>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT site, iface, rx_bytes, tx_bytes, rx_packets, tx_packets, rx_dropped,
                 tx_dropped FROM nic WHERE run_id = ?1",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok(NicDelta {
                    site: r.get(0)?,
                    counters: nsperf_core::nic::NicCounters {
                        name: r.get(1)?,
                        rx_bytes: u(r.get(2)?),
                        tx_bytes: u(r.get(3)?),
                        rx_packets: u(r.get(4)?),
                        tx_packets: u(r.get(5)?),
                        rx_dropped: u(r.get(6)?),
                        tx_dropped: u(r.get(7)?),
                        ..Default::default()
                    },
                })
            })
            .map_err(self.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.err())
    }

    /// The stored report of the engine and of the capture analysis of one run.
    pub fn raw_json(&self, run_id: i64) -> Result<(Option<String>, Option<String>), StoreError> {
        self.conn
            .query_row(
                "SELECT report_json, trace_json FROM runs WHERE id = ?1",
                params![run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(self.err())
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
