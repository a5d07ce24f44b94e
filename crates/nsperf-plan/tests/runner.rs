//! The runner, the store and the statistics, driven by the mock executor: exact figures.

use nsperf_plan::exec::mock::MockExecutor;
use nsperf_plan::runner::NoProgress;
use nsperf_plan::stats::group_stats;
use nsperf_plan::store::RunStatus;
use nsperf_plan::{Plan, RunOptions, Store, run_plan};

const PLAN: &str = r#"
name = "mocked"
repetitions = 3

[lab]
name = "mocklab"
sites = ["a", "b"]
rate = "45mbit"
rtt = "{rtt}"

[matrix]
rtt = ["10ms", "50ms"]

[[step]]
name = "tcp"
type = "net"
client = "a"
server = "b"
window = "{bdp}"

[[step]]
name = "read"
type = "exec"
site = "b"
command = ["cat", "/x"]
payload = "1m"
phases = ["cold", "warm", "remote-warm"]
prime = ["cat", "/x"]
"#;

fn value(ctx: &nsperf_plan::exec::RunContext<'_>, step: &nsperf_plan::plan::ResolvedStep) -> f64 {
    let base = if ctx.cell.contains("10ms") {
        40e6
    } else {
        20e6
    };
    let step_f = if step.name == "tcp" { 1.0 } else { 2.0 };
    base * step_f + ctx.repetition as f64 * 1e6
}

fn mock() -> MockExecutor {
    MockExecutor::new(Box::new(value))
}

#[test]
fn runs_in_order_with_phases_and_exact_stats() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let plan = Plan::parse(PLAN.as_bytes()).unwrap();
    let mut ex = mock();
    let s = run_plan(
        &plan,
        &mut store,
        &mut ex,
        &RunOptions::default(),
        &mut NoProgress,
    )
    .unwrap();
    assert_eq!(s.measured, 2 * 3 * (1 + 3));
    assert_eq!((s.skipped, s.failed), (0, 0));
    // The lab goes up once, is changed once (10ms -> 50ms), and comes down.
    assert_eq!(ex.log.iter().filter(|l| l.starts_with("lab_up")).count(), 1);
    assert!(ex.log[0].contains("--rtt 10000us"), "{}", ex.log[0]);
    let sets: Vec<_> = ex.log.iter().filter(|l| l.starts_with("lab_set")).collect();
    assert_eq!(sets.len(), 1);
    assert!(sets[0].contains("--rtt 50000us"));
    assert_eq!(ex.log.last().unwrap(), "lab_down mocklab");
    // cold: drop then measure; warm directly after cold: no extra run; remote-warm: drop,
    // prime on the other site, measure.
    let first_read = ex
        .log
        .iter()
        .position(|l| l.contains(" read cold 1"))
        .unwrap();
    assert_eq!(ex.log[first_read - 1], "drop_caches");
    assert!(ex.log[first_read + 1].contains(" read warm 1"));
    assert_eq!(ex.log[first_read + 2], "drop_caches");
    assert_eq!(ex.log[first_read + 3], "prime a cat /x");
    assert!(ex.log[first_read + 4].contains(" read remote-warm 1"));

    let runs = store.runs(s.experiment).unwrap();
    assert_eq!(runs.len(), 24);
    assert!(runs.iter().all(|r| r.status == RunStatus::Ok));
    let stats = group_stats(&runs, &|id| store.series(id).unwrap());
    assert_eq!(stats.len(), 2 * 4);
    let tcp10 = stats
        .iter()
        .find(|g| g.step == "tcp" && g.cell == "rtt=10ms")
        .unwrap();
    assert_eq!(tcp10.summary.n, 3);
    assert_eq!(tcp10.summary.mean, 42e6);
    assert_eq!(tcp10.summary.median, 42e6);
    assert_eq!(tcp10.summary.stddev, 1e6);
    let half = 4.303 * 1e6 / 3f64.sqrt();
    assert!((tcp10.summary.ci95_hi - (42e6 + half)).abs() < 1e-3);
    // Mock series: 0.5v, v, 1.1v, 0.9v -> peak 1.1 * 43e6 over the repetitions.
    assert!((tcp10.peak_interval.unwrap() - 1.1 * 43e6).abs() < 1e-3);
    assert_eq!(tcp10.params.get("rtt").map(String::as_str), Some("10ms"));
    let exp = store.experiment("latest").unwrap();
    assert_eq!(exp.status, "complete");
    assert_eq!(store.cpu(runs[0].id).unwrap().len(), 8);
    assert_eq!(store.nic(runs[0].id).unwrap().len(), 1);
}

#[test]
fn no_root_skips_the_lab_and_resume_completes_only_missing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let plan = Plan::parse(PLAN.as_bytes()).unwrap();
    let mut store = Store::open(&db).unwrap();
    let mut ex = mock();
    ex.drop_skip = Some("a cold cache needs root".into());
    ex.failing_steps = vec!["tcp".into()];
    let s = run_plan(
        &plan,
        &mut store,
        &mut ex,
        &RunOptions::default(),
        &mut NoProgress,
    )
    .unwrap();
    // tcp fails 6 times; read: cold and remote-warm skipped (12), warm measured (6).
    assert_eq!((s.measured, s.skipped, s.failed), (6, 12, 6));
    assert_eq!(s.skip_reasons, ["read: a cold cache needs root"]);
    assert_eq!(store.experiment("latest").unwrap().status, "partial");

    // Resume with a working executor: only the 18 missing runs, none twice.
    let mut ex2 = mock();
    let s2 = run_plan(
        &plan,
        &mut store,
        &mut ex2,
        &RunOptions { resume: true },
        &mut NoProgress,
    )
    .unwrap();
    assert_eq!(s2.experiment, s.experiment);
    assert_eq!((s2.measured, s2.already_done), (18, 6));
    let runs = store.runs(s.experiment).unwrap();
    assert_eq!(runs.len(), 24);
    let mut keys: Vec<_> = runs
        .iter()
        .map(|r| {
            (
                r.cell.clone(),
                r.step.clone(),
                r.phase.clone(),
                r.repetition,
            )
        })
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 24);
    assert!(runs.iter().all(|r| r.status == RunStatus::Ok));
    assert_eq!(store.experiment("latest").unwrap().status, "complete");
    // Nothing left to resume; a new run makes a new experiment.
    assert!(
        run_plan(
            &plan,
            &mut store,
            &mut mock(),
            &RunOptions { resume: true },
            &mut NoProgress
        )
        .is_err()
    );
    let s3 = run_plan(
        &plan,
        &mut store,
        &mut mock(),
        &RunOptions::default(),
        &mut NoProgress,
    )
    .unwrap();
    assert_eq!(s3.experiment, s.experiment + 1);
    assert_eq!(store.experiments().unwrap().len(), 2);
}

#[test]
fn lab_without_root_is_skipped_with_reason() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::parse(PLAN.as_bytes()).unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let mut ex = mock();
    ex.lab_skip = Some("the lab needs root".into());
    let s = run_plan(
        &plan,
        &mut store,
        &mut ex,
        &RunOptions::default(),
        &mut NoProgress,
    )
    .unwrap();
    assert_eq!((s.measured, s.skipped), (0, 24));
    assert!(
        s.skip_reasons
            .iter()
            .all(|r| r.contains("the lab needs root"))
    );
    assert!(!ex.log.iter().any(|l| l.starts_with("lab_down")));
}
