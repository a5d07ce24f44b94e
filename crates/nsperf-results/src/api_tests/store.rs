//! The result store on its own: a run written and read back, version 1 and 3 stores upgraded
//! in place, experiments picked by label, and an experiment whose owner is alive refused to `--resume`.

use crate::{
    ExperimentStatus, IoShape, Measurement, NewExperiment, ParamKind, ParamValue, Phase,
    RunConditions, RunEvent, RunEventKind, RunEventSource, RunHeader, RunKey, RunStatus,
    STORE_VERSION, SeriesPoint, Store, StoreError,
};

fn new_experiment(store: &mut Store, fingerprint: &str) -> i64 {
    store
        .create_experiment(&NewExperiment {
            plan_name: "p",
            description: None,
            fingerprint,
            plan_toml: "name = \"p\"",
            total_runs: 1,
            host_json: "{}",
            label: Some("native"),
        })
        .unwrap()
}

#[test]
fn run_round_trip_with_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let id = new_experiment(&mut store, "f");
    let key = RunKey {
        cell: "size=8m".into(),
        step: "read".into(),
        phase: Phase::Cold,
        repetition: 1,
    };
    let cond = RunConditions {
        io: Some(IoShape {
            workload: nsperf_core::Workload::SeqRead,
            size_bytes: 8 << 20,
            bs_bytes: 4096,
        }),
        ..Default::default()
    };
    let m = Measurement {
        metric: "throughput_bytes_per_s".into(),
        value: 1e8,
        series: vec![SeriesPoint {
            start_s: 0.0,
            length_s: 1.0,
            value: 1e8,
        }],
        payload_bytes: Some(8 << 20),
        duration_ns: 84_000_000,
        ..Default::default()
    };
    let params = [(
        "size".to_string(),
        ParamValue::typed(ParamKind::Size, "8m", None),
    )];
    let header = RunHeader {
        key: &key,
        kind: crate::StepKind::Io,
        params: &params,
        started_unix_ns: 1,
        conditions: Some(&cond),
    };
    let rid = store.write_run(id, &header, Ok(&m)).unwrap();
    let runs = store.runs(id).unwrap();
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!((r.id, r.phase, r.status), (rid, Phase::Cold, RunStatus::Ok));
    assert_eq!(r.conditions.as_ref(), Some(&cond));
    assert_eq!(r.params["size"].number, Some(8.0 * 1048576.0));
    assert_eq!(r.params["size"].label(), "8 MiB");
    assert_eq!(store.series(rid).unwrap(), m.series);
    assert_eq!(store.done_keys(id).unwrap(), [key]);
    store
        .set_status(id, ExperimentStatus::Complete, None)
        .unwrap();
    assert_eq!(
        store.experiment("latest").unwrap().status,
        ExperimentStatus::Complete
    );
    // A label picks the latest experiment that has it.
    let second = new_experiment(&mut store, "g");
    assert_eq!(store.experiment("native").unwrap().id, second);
    store.set_label(second, Some("replicated")).unwrap();
    assert_eq!(store.experiment("native").unwrap().id, id);
    assert_eq!(
        store.experiment("replicated").unwrap().label.as_deref(),
        Some("replicated")
    );
    assert!(matches!(
        store.experiment("nothing"),
        Err(StoreError::NoExperiment(_))
    ));
}

/// The io shape of a run is stored as the text every version wrote (the workload by its
/// name), and read back typed; a workload name no version wrote is a corrupt row, named.
#[test]
fn io_conditions_keep_their_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut store = Store::open(&path).unwrap();
    let id = new_experiment(&mut store, "f");
    let cond = RunConditions {
        io: Some(IoShape {
            workload: nsperf_core::Workload::StrideRead,
            size_bytes: 1 << 30,
            bs_bytes: 65536,
        }),
        ..Default::default()
    };
    let key = RunKey {
        cell: "-".into(),
        step: "stride".into(),
        phase: Phase::None,
        repetition: 1,
    };
    let header = RunHeader {
        key: &key,
        kind: crate::StepKind::Io,
        params: &[],
        started_unix_ns: 1,
        conditions: Some(&cond),
    };
    let m = Measurement {
        metric: "throughput_bytes_per_s".into(),
        value: 1e8,
        ..Default::default()
    };
    let rid = store.write_run(id, &header, Ok(&m)).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let text: String = conn
        .query_row(
            "SELECT conditions_json FROM runs WHERE id = ?1",
            [rid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        text,
        r#"{"in_lab":false,"io":{"workload":"strideread","size_bytes":1073741824,"bs_bytes":65536}}"#
    );
    // A row as an older version wrote it reads back typed.
    conn.execute(
        "UPDATE runs SET conditions_json = ?2 WHERE id = ?1",
        rusqlite::params![
            rid,
            r#"{"in_lab":false,"io":{"workload":"seqrw","size_bytes":8,"bs_bytes":4}}"#
        ],
    )
    .unwrap();
    let io = store.runs(id).unwrap()[0].conditions.clone().unwrap().io;
    assert_eq!(io.map(|s| s.workload), Some(nsperf_core::Workload::SeqRw));
    conn.execute(
        "UPDATE runs SET conditions_json = ?2 WHERE id = ?1",
        rusqlite::params![
            rid,
            r#"{"in_lab":false,"io":{"workload":"trim","size_bytes":8,"bs_bytes":4}}"#
        ],
    )
    .unwrap();
    let e = store.runs(id).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt(_)), "{e}");
    let e = e.to_string();
    assert!(
        e.contains(&format!("conditions of run {rid}")) && e.contains("unknown variant `trim`"),
        "{e}"
    );
}

/// Issue #14: a version 3 store (parameters as text, `{bdp}` unresolved) is upgraded: every
/// parameter typed, the `{bdp}` window resolved from the socket buffer the run recorded.
#[test]
fn a_version_3_store_gets_typed_resolved_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(V1_SCHEMA).unwrap();
        conn.execute_batch(
            "ALTER TABLE experiments ADD COLUMN owner_pid INTEGER;
             ALTER TABLE experiments ADD COLUMN owner_start INTEGER;
             ALTER TABLE runs ADD COLUMN conditions_json TEXT;
             INSERT INTO experiments (plan_name, fingerprint, plan_toml, status,
             started_unix_ns, total_runs, nsperf_version, host_json)
             VALUES ('old', 'f3', '', 'complete', 5, 3, '0.1.0', '{}');
             PRAGMA user_version = 3;",
        )
        .unwrap();
        for (i, (rtt, window, cond)) in [
            ("100ms", "{bdp}", r#"{"window_bytes":562176,"in_lab":true}"#),
            ("50ms", "64k", r#"{"window_bytes":65536,"in_lab":true}"#),
            ("0ms", "default", r#"{"in_lab":true}"#),
        ]
        .into_iter()
        .enumerate()
        {
            conn.execute(
                "INSERT INTO runs (experiment_id, cell, params_json, step, kind, phase,
                 repetition, status, started_unix_ns, duration_ns, metric, value, metrics_json,
                 spec_json, conditions_json)
                 VALUES (1, ?1, ?2, 'tcp', 'net', '-', 1, 'ok', 5, 7, 'throughput_bps', 1e6,
                 '{}', '{}', ?3)",
                rusqlite::params![
                    format!("c{i}"),
                    format!(r#"{{"rtt":"{rtt}","window":"{window}"}}"#),
                    cond
                ],
            )
            .unwrap();
        }
    }
    let store = Store::open(&path).unwrap();
    let runs = store.runs(1).unwrap();
    let w = &runs[0].params["window"];
    assert_eq!(
        (w.value.as_str(), w.template.as_deref(), w.kind, w.number),
        ("562176", Some("{bdp}"), ParamKind::Size, Some(562176.0))
    );
    assert_eq!(runs[1].params["window"].label(), "64 KiB");
    assert_eq!(runs[2].params["window"].kind, ParamKind::Text);
    let mut rtts: Vec<&ParamValue> = runs.iter().map(|r| &r.params["rtt"]).collect();
    rtts.sort();
    let rtts: Vec<&str> = rtts.iter().map(|p| p.value.as_str()).collect();
    assert_eq!(rtts, ["0ms", "50ms", "100ms"], "typed, 100ms after 50ms");
    assert_eq!(store.experiment("latest").unwrap().label, None);
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let pj: String = conn
        .query_row("SELECT params_json FROM runs WHERE id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(pj, r#"{"rtt":"100ms","window":"562176"}"#);
}

/// Issue #13: `nsperf run --resume` while the original still runs said "UNIQUE constraint
/// failed"; it now names the experiment and the process that owns it.
#[test]
fn resume_of_an_experiment_whose_owner_lives_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut store = Store::open(&path).unwrap();
    let id = new_experiment(&mut store, "f");
    // This process owns it and is alive.
    let mut other = Store::open(&path).unwrap();
    let e = other.take_over("f").unwrap_err();
    assert!(matches!(e, StoreError::StillRunning { experiment, pid }
        if experiment == id && pid == std::process::id()));
    assert_eq!(
        e.to_string(),
        format!(
            "experiment {id} is still running (pid {})",
            std::process::id()
        )
    );
    // An owner that died is taken over.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE experiments SET owner_start = owner_start + 1 WHERE id = ?1",
        [id],
    )
    .unwrap();
    assert_eq!(other.take_over("f").unwrap(), Some(id));
    assert_eq!(other.take_over("nothing").unwrap(), None);
}

#[test]
fn a_version_1_store_is_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(V1_SCHEMA).unwrap();
        conn.execute_batch(
            "INSERT INTO experiments (plan_name, fingerprint, plan_toml, status,
             started_unix_ns, total_runs, nsperf_version, host_json)
             VALUES ('old', 'f1', '', 'interrupted', 5, 1, '0.1.0', '{}');
             INSERT INTO runs (experiment_id, cell, params_json, step, kind, phase, repetition,
             status, started_unix_ns, duration_ns, metric, value, metrics_json, spec_json)
             VALUES (1, '-', '{}', 's', 'exec', '-', 1, 'ok', 5, 7, 'elapsed_s', 0.5, '{}', '{}');
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    let runs = store.runs(1).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].conditions, None);
    assert_eq!(runs[0].value, Some(0.5));
    assert_eq!((&runs[0].lab, runs[0].findings.len()), (&None, 0));
    assert!(store.events(runs[0].id).unwrap().is_empty());
    // An interrupted experiment of a version 1 store has no owner: it can be resumed.
    assert_eq!(store.take_over("f1").unwrap(), Some(1));
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, STORE_VERSION);
}

/// Issue 21: each host's intervals on the run's clock are kept (the report draws a line per
/// client from them); a version 5 store gains the column in place and its old host rows read
/// back without a series.
#[test]
fn a_hosts_series_round_trips_and_a_version_5_store_gains_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("ALTER TABLE run_hosts DROP COLUMN series_json; PRAGMA user_version = 5;")
        .unwrap();
    drop(conn);
    let mut store = Store::open(&path).unwrap();
    let id = new_experiment(&mut store, "f");
    let key = RunKey {
        cell: "-".into(),
        step: "up".into(),
        phase: Phase::None,
        repetition: 1,
    };
    let series = vec![SeriesPoint {
        start_s: 0.25,
        length_s: 1.0,
        value: 5e6,
    }];
    let part = |host: &str, series: Vec<SeriesPoint>| crate::HostPart {
        host: host.into(),
        role: crate::HostRole::Client,
        metric: "throughput_bps".into(),
        value: 5e6,
        series,
        ..Default::default()
    };
    let m = Measurement {
        metric: "throughput_bps".into(),
        value: 5e6,
        hosts: vec![part("c1", series.clone()), part("c2", Vec::new())],
        ..Default::default()
    };
    let header = RunHeader {
        key: &key,
        kind: crate::StepKind::Net,
        params: &[],
        started_unix_ns: 10_000_000_000,
        conditions: None,
    };
    let rid = store.write_run(id, &header, Ok(&m)).unwrap();
    let hosts = store.hosts(rid).unwrap();
    assert_eq!(hosts[0].series, series);
    assert!(hosts[1].series.is_empty());
    let v: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, STORE_VERSION);
}

/// Issue #15: a version 3 store gains the lab, findings and link events of runs (version 4)
/// in place, and they round-trip.
#[test]
fn a_version_3_store_gains_link_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.db");
    drop(Store::open(&path).unwrap());
    // What version 3 had: the same without the version 4 and 5 additions.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "DROP TABLE run_events; ALTER TABLE runs DROP COLUMN lab_json;
             ALTER TABLE runs DROP COLUMN findings_json; DROP TABLE run_params;
             ALTER TABLE runs DROP COLUMN capture_path;
             ALTER TABLE experiments DROP COLUMN label; PRAGMA user_version = 3;",
        )
        .unwrap();
    let mut store = Store::open(&path).unwrap();
    let id = new_experiment(&mut store, "f");
    let key = RunKey {
        cell: "-".into(),
        step: "tcp".into(),
        phase: Phase::None,
        repetition: 1,
    };
    let events = vec![
        RunEvent {
            at_s: -0.5,
            t_unix_ns: 9_500_000_000,
            source: RunEventSource::Schedule,
            kind: RunEventKind::Down,
            text: "1s down".into(),
            directions: vec!["a -> b".into(), "b -> a".into()],
            until_s: Some(2.0),
        },
        RunEvent {
            at_s: 2.0,
            t_unix_ns: 12_000_000_000,
            source: RunEventSource::Schedule,
            kind: RunEventKind::Up,
            text: "3.5s up".into(),
            directions: vec!["a -> b".into(), "b -> a".into()],
            until_s: None,
        },
    ];
    let finding = nsperf_core::Finding::new(
        "link_outage",
        nsperf_core::Severity::Warning,
        "link a-b partitioned",
    )
    .with("outage_s", 2.5);
    let m = Measurement {
        metric: "throughput_bps".into(),
        value: 1e6,
        lab_json: Some(r#"{"topology":{"kind":"mesh"}}"#.into()),
        events: events.clone(),
        findings: vec![finding.clone()],
        ..Default::default()
    };
    let header = RunHeader {
        key: &key,
        kind: crate::StepKind::Net,
        params: &[],
        started_unix_ns: 10_000_000_000,
        conditions: None,
    };
    let rid = store.write_run(id, &header, Ok(&m)).unwrap();
    let r = &store.runs(id).unwrap()[0];
    assert_eq!(r.findings, [finding]);
    assert_eq!(r.lab.as_ref().unwrap()["topology"]["kind"], "mesh");
    assert_eq!(store.events(rid).unwrap(), events);
}

/// The schema of store version 1, as nsperf 0.1 wrote it.
const V1_SCHEMA: &str = "
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
    notes TEXT NOT NULL DEFAULT ''
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
    UNIQUE (experiment_id, cell, step, phase, repetition)
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
CREATE INDEX IF NOT EXISTS runs_by_experiment ON runs(experiment_id);
CREATE INDEX IF NOT EXISTS intervals_by_run ON intervals(run_id);
CREATE INDEX IF NOT EXISTS cpu_by_run ON cpu(run_id);
CREATE INDEX IF NOT EXISTS nic_by_run ON nic(run_id);
";
