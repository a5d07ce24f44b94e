//! The runner, the store and the statistics, driven by the mock executor: exact figures.

use crate::exec::mock::MockExecutor;
use crate::runner::NoProgress;
use crate::{Plan, RunOptions, run_plan};
use nsperf_results::stats::group_stats;
use nsperf_results::{ExperimentStatus, RunStatus, Store};

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

fn value(ctx: &crate::exec::RunContext<'_>, step: &crate::plan::ResolvedStep) -> f64 {
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
    assert!(ex.log[0].contains("--delay 5ms"), "{}", ex.log[0]);
    let sets: Vec<_> = ex.log.iter().filter(|l| l.starts_with("lab_set")).collect();
    assert_eq!(sets.len(), 1);
    assert!(sets[0].contains("--delay 25ms"), "{}", sets[0]);
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
    // Positive values: the log-normal interval, within t's width of the mean.
    let half = 4.303 * 1e6 / 3f64.sqrt();
    let s = &tcp10.summary;
    assert!(s.ci95_lo > 42e6 - half && s.ci95_lo < 42e6, "{s:?}");
    assert!(s.ci95_hi > 42e6 && s.ci95_hi < 42e6 + half * 1.05, "{s:?}");
    // Mock series: 0.5v, v, 1.1v, 0.9v -> peak 1.1 * 43e6 over the repetitions.
    assert!((tcp10.peak_interval.unwrap() - 1.1 * 43e6).abs() < 1e-3);
    assert_eq!(tcp10.params["rtt"].value, "10ms");
    assert_eq!(tcp10.params["rtt"].number, Some(0.01));
    let exp = store.experiment("latest").unwrap();
    assert_eq!(exp.status, ExperimentStatus::Complete);
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
    assert_eq!(
        store.experiment("latest").unwrap().status,
        ExperimentStatus::Partial
    );

    // Resume with a working executor: only the 18 missing runs, none twice.
    let mut ex2 = mock();
    let s2 = run_plan(
        &plan,
        &mut store,
        &mut ex2,
        &RunOptions {
            resume: true,
            ..Default::default()
        },
        &mut NoProgress,
    )
    .unwrap();
    assert_eq!(s2.experiment, s.experiment);
    assert_eq!((s2.measured, s2.already_done), (18, 6));
    let runs = store.runs(s.experiment).unwrap();
    assert_eq!(runs.len(), 24);
    let mut keys: Vec<_> = runs
        .iter()
        .map(|r| (r.cell.clone(), r.step.clone(), r.phase, r.repetition))
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 24);
    assert!(runs.iter().all(|r| r.status == RunStatus::Ok));
    assert_eq!(
        store.experiment("latest").unwrap().status,
        ExperimentStatus::Complete
    );
    // Nothing left to resume; a new run makes a new experiment.
    assert!(
        run_plan(
            &plan,
            &mut store,
            &mut mock(),
            &RunOptions {
                resume: true,
                ..Default::default()
            },
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

/// Issue #10: `--mtu` in a matrix runs: the lab is rebuilt when the MTU changes (only
/// `lab up` sets it) and changed in place otherwise.
#[test]
fn mtu_change_rebuilds_the_lab() {
    let plan = Plan::parse(
        br#"
name = "jumbo"
repetitions = 1
[lab]
sites = ["a", "b"]
link_args = ["--mtu", "{mtu}", "--delay", "{d}"]
[matrix]
mtu = [1500, 9000]
d = ["1ms", "2ms"]
[[step]]
name = "t"
type = "net"
client = "a"
server = "b"
"#,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let mut ex = mock();
    let s = run_plan(
        &plan,
        &mut store,
        &mut ex,
        &RunOptions::default(),
        &mut NoProgress,
    )
    .unwrap();
    assert_eq!(s.measured, 4);
    let lab = s.lab.clone().unwrap();
    assert!(lab.starts_with('r'), "a unique name per run: {lab}");
    let ops: Vec<&str> = ex
        .log
        .iter()
        .filter(|l| l.starts_with("lab_"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "lab_up", "lab_set", "lab_down", "lab_up", "lab_set", "lab_down"
        ],
        "{:?}",
        ex.log
    );
    assert!(
        ex.log
            .iter()
            .any(|l| l.starts_with("lab_up") && l.contains("--mtu 9000"))
    );
}

/// Issue #13: a plan whose named lab another live run holds is refused before anything is
/// stored or built (the lab is never touched).
#[test]
fn a_lab_held_by_another_run_is_refused_before_anything_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let plan = Plan::parse(PLAN.as_bytes()).unwrap();
    let mut ex = mock();
    ex.lab_taken_by = Some(4242);
    let e = run_plan(
        &plan,
        &mut store,
        &mut ex,
        &RunOptions::default(),
        &mut NoProgress,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "lab mocklab belongs to another running process (pid 4242); give the plan another [lab] \
         name or leave it out"
    );
    assert_eq!(
        nsperf_core::failure::Classify::failure(&e),
        nsperf_core::Failure::Unsafe
    );
    assert!(
        ex.log.is_empty(),
        "the executor was asked to act: {:?}",
        ex.log
    );
    assert!(store.experiments().unwrap().is_empty());
}
