//! The store's schema and its upgrades from older versions.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};

use crate::model::RunConditions;
use crate::params::{ParamKind, ParamValue};

pub(super) const SCHEMA: &str = "
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
    owner_start INTEGER,
    label TEXT
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
    capture_path TEXT,
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
    report_json TEXT,
    series_json TEXT
);
CREATE TABLE IF NOT EXISTS run_params (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    template TEXT,
    kind TEXT NOT NULL,
    number REAL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX IF NOT EXISTS runs_by_experiment ON runs(experiment_id);
CREATE INDEX IF NOT EXISTS run_hosts_by_run ON run_hosts(run_id);
CREATE INDEX IF NOT EXISTS intervals_by_run ON intervals(run_id);
CREATE INDEX IF NOT EXISTS cpu_by_run ON cpu(run_id);
CREATE INDEX IF NOT EXISTS nic_by_run ON nic(run_id);
CREATE INDEX IF NOT EXISTS run_events_by_run ON run_events(run_id);
";

/// What version 2 added to a version 1 store.
pub(super) const UPGRADE_1_TO_2: &str = "
ALTER TABLE experiments ADD COLUMN owner_pid INTEGER;
ALTER TABLE experiments ADD COLUMN owner_start INTEGER;
ALTER TABLE runs ADD COLUMN conditions_json TEXT;
";

/// What version 4 added to a version 1-3 store (`run_events` comes with [`SCHEMA`]).
pub(super) const UPGRADE_TO_4: &str = "
ALTER TABLE runs ADD COLUMN lab_json TEXT;
ALTER TABLE runs ADD COLUMN findings_json TEXT;
";

/// What version 5 added to a version 1-4 store (then `run_params` is filled from
/// `params_json` by [`type_old_params`]).
pub(super) const UPGRADE_TO_5: &str = "
ALTER TABLE experiments ADD COLUMN label TEXT;
ALTER TABLE runs ADD COLUMN capture_path TEXT;
";

/// What version 6 added to a version 3-5 store (one with `run_hosts`).
pub(super) const UPGRADE_TO_6: &str = "
ALTER TABLE run_hosts ADD COLUMN series_json TEXT;
";

/// True when `table` exists without `column`.
fn lacks_column(
    tx: &rusqlite::Transaction<'_>,
    table: &str,
    column: &str,
) -> rusqlite::Result<bool> {
    let (columns, has): (i64, i64) = tx.query_row(
        "SELECT count(*), count(CASE WHEN name = ?2 THEN 1 END) FROM pragma_table_info(?1)",
        params![table, column],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(columns > 0 && has == 0)
}

/// Fills `run_params` for the runs of a store written before parameters were typed: each
/// value typed from its spelling ([`ParamValue::inferred`]); a template (`{bdp}`) in a
/// `window` parameter resolved from the socket buffer the run recorded in `conditions_json`
/// (the only template those versions resolved into a recorded figure), others kept as text.
/// `params_json` is rewritten with the resolved values.
pub(super) fn type_old_params(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let mut rows: Vec<(i64, String, Option<String>)> = Vec::new();
    {
        let mut st = tx.prepare(
            "SELECT id, params_json, conditions_json FROM runs
             WHERE id NOT IN (SELECT run_id FROM run_params)",
        )?;
        let it = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        for r in it {
            rows.push(r?);
        }
    }
    let mut insert = tx.prepare(
        "INSERT INTO run_params (run_id, name, value, template, kind, number)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut update = tx.prepare("UPDATE runs SET params_json = ?2 WHERE id = ?1")?;
    for (id, pj, cj) in rows {
        // A damaged row is left as it is: reading it reports it.
        let Ok(old) = serde_json::from_str::<BTreeMap<String, String>>(&pj) else {
            continue;
        };
        let window = cj
            .and_then(|c| serde_json::from_str::<RunConditions>(&c).ok())
            .and_then(|c| c.window_bytes);
        let mut resolved = BTreeMap::new();
        for (name, text) in &old {
            let v = match (name.as_str(), window) {
                ("window", Some(w)) if text.contains('{') => {
                    ParamValue::typed(ParamKind::Size, &w.to_string(), Some(text))
                }
                _ => ParamValue::inferred(text, None),
            };
            insert.execute(params![
                id,
                name,
                v.value,
                v.template,
                v.kind.as_str(),
                v.number
            ])?;
            resolved.insert(name.clone(), v.value);
        }
        update.execute(params![id, serde_json::to_string(&resolved).unwrap_or(pj)])?;
    }
    Ok(())
}

/// Brings a store of `version` (0: new) to [`super::STORE_VERSION`], in one transaction.
pub(super) fn upgrade(conn: &mut Connection, version: i64) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    if version == 1 {
        tx.execute_batch(UPGRADE_1_TO_2)?;
    }
    if (1..4).contains(&version) {
        tx.execute_batch(UPGRADE_TO_4)?;
    }
    if (1..5).contains(&version) {
        tx.execute_batch(UPGRADE_TO_5)?;
    }
    if (3..6).contains(&version) && lacks_column(&tx, "run_hosts", "series_json")? {
        tx.execute_batch(UPGRADE_TO_6)?;
    }
    tx.execute_batch(SCHEMA)?;
    if (1..5).contains(&version) {
        type_old_params(&tx)?;
    }
    tx.pragma_update(None, "user_version", super::STORE_VERSION)?;
    tx.commit()
}
