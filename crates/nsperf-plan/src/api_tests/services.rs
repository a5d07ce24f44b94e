//! Services, setup and teardown in the runner, driven by the mock executor: what runs when,
//! and how often.

use crate::exec::mock::MockExecutor;
use crate::runner::NoProgress;
use crate::{Plan, RunOptions, run_plan};
use nsperf_results::{RunStatus, Store};

const PLAN: &str = r#"
name = "svc"
repetitions = 3

[lab]
name = "svclab"
sites = ["client", "server"]
rate = "45mbit"
rtt = "{rtt}"

[matrix]
rtt = ["0ms", "50ms"]
workload = ["seqread", "seqwrite"]

[[service]]
name = "nas"
site = "server"
dir = "/srv/nas"

[[step]]
name = "nfs"
type = "io"
service = "nas"
site = "client"
workload = "{workload}"
size = "1m"
bs = "64k"
setup = ["prep", "{rtt}", "{workload}"]
teardown = ["clean", "{rtt}", "{workload}"]

[[step]]
name = "tcp"
type = "net"
client = "client"
server = "server"
"#;

fn run(ex: &mut MockExecutor, plan: &str) -> (crate::RunSummary, Vec<RunStatus>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let plan = Plan::parse(plan.as_bytes()).unwrap();
    let s = run_plan(
        &plan,
        &mut store,
        ex,
        &RunOptions::default(),
        &mut NoProgress,
    )
    .unwrap();
    let runs = store.runs(s.experiment).unwrap();
    let status = runs.iter().map(|r| r.status).collect();
    let errors = runs.iter().filter_map(|r| r.error.clone()).collect();
    (s, status, errors)
}

fn count(log: &[String], prefix: &str) -> usize {
    log.iter().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn setup_and_teardown_run_once_per_cell_around_its_runs() {
    let mut ex = MockExecutor::new(Box::new(|_, _| 1e6));
    let (s, _, _) = run(&mut ex, PLAN);
    // 4 cells of the nfs step x 3 repetitions, plus 2 cells of tcp x 3.
    assert_eq!(s.measured, 4 * 3 + 2 * 3);
    assert_eq!(count(&ex.log, "setup "), 4, "{:#?}", ex.log);
    assert_eq!(count(&ex.log, "teardown "), 4);
    // Each cell: setup, then its three runs, then teardown; in the step's site.
    let setup = ex
        .log
        .iter()
        .position(|l| l == "setup client prep 50ms seqwrite")
        .unwrap();
    let teardown = ex
        .log
        .iter()
        .position(|l| l == "teardown client clean 50ms seqwrite")
        .unwrap();
    let runs: Vec<usize> = (0..ex.log.len())
        .filter(|&i| ex.log[i].starts_with("measure rtt=50ms,workload=seqwrite nfs"))
        .collect();
    assert_eq!(runs.len(), 3);
    assert!(setup < runs[0] && runs[2] < teardown, "{:#?}", ex.log);
}

#[test]
fn a_service_starts_once_before_its_steps_and_stops_after() {
    let mut ex = MockExecutor::new(Box::new(|_, _| 1e6));
    run(&mut ex, PLAN);
    assert_eq!(count(&ex.log, "service_start nas"), 1);
    let start = ex
        .log
        .iter()
        .position(|l| l == "service_start nas")
        .unwrap();
    let first_lab_up = ex.log.iter().position(|l| l.starts_with("lab_up")).unwrap();
    let first_nfs = ex.log.iter().position(|l| l.contains(" nfs ")).unwrap();
    assert!(first_lab_up < start && start < first_nfs, "{:#?}", ex.log);
    // Stopped after the last run, before the lab goes.
    let n = ex.log.len();
    assert_eq!(ex.log[n - 2], "service_stop nas");
    assert_eq!(ex.log[n - 1], "lab_down svclab");
    assert!(ex.running.is_empty());
}

#[test]
fn a_dead_service_fails_the_steps_through_it_and_only_those() {
    let mut ex = MockExecutor::new(Box::new(|_, _| 1e6));
    ex.dead_services = vec!["nas".into()];
    let (s, status, errors) = run(&mut ex, PLAN);
    assert_eq!(s.failed, 12, "every nfs run: {errors:#?}");
    assert_eq!(s.measured, 6, "the tcp runs go on");
    assert_eq!(
        status.iter().filter(|s| **s == RunStatus::Failed).count(),
        12
    );
    // The run during which it died is failed whatever it measured; no later run is tried
    // (never measured through another path).
    let nfs_measured = ex
        .log
        .iter()
        .filter(|l| l.starts_with("measure") && l.contains(" nfs "))
        .count();
    assert_eq!(nfs_measured, 1, "{:#?}", ex.log);
    assert!(
        errors
            .iter()
            .all(|e| e.contains("service nas died") && e.contains("never falls back")),
        "{errors:#?}"
    );
}

#[test]
fn a_failed_setup_fails_its_cell_and_skips_its_teardown() {
    let mut ex = MockExecutor::new(Box::new(|_, _| 1e6));
    ex.failing_commands = vec!["seqwrite".into()];
    let (s, _, errors) = run(&mut ex, PLAN);
    // The two seqwrite cells fail (3 runs each); the setup ran once per cell, not per run.
    assert_eq!(s.failed, 6, "{errors:#?}");
    assert_eq!(count(&ex.log, "setup "), 4);
    assert_eq!(count(&ex.log, "teardown "), 2, "{:#?}", ex.log);
    assert!(
        errors.iter().all(|e| e.starts_with("setup failed")),
        "{errors:#?}"
    );
}

/// An io step with `replicate`: the runner starts the site's mirror peer once, before the
/// first step that replicates to it, gives each run the peer's running address, and stops it
/// at the end.
#[test]
fn a_mirror_peer_runs_around_the_steps_that_replicate_to_it() {
    let plan = r#"
name = "mirror"
repetitions = 2
[lab]
name = "mirlab"
sites = ["a", "b"]
rate = "45mbit"
rtt = "{rtt}"
[matrix]
rtt = ["0ms", "50ms"]
[[step]]
name = "w"
type = "io"
site = "a"
dir = "/tmp"
workload = "seqwrite"
size = "1m"
bs = "64k"
replicate = { peer = "b", compare = true }
"#;
    let peers = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let seen = std::rc::Rc::clone(&peers);
    let mut ex = MockExecutor::new(Box::new(move |ctx, step| {
        if let crate::plan::Action::Io(io) = &step.action
            && let Ok(c) = ctx.io_config(io)
        {
            seen.borrow_mut().push(c.replicate.map(|r| r.peer));
        }
        1e6
    }));
    let (s, status, _) = run(&mut ex, plan);
    assert_eq!(s.measured, 4);
    // The running peer's address (the mock's port), not the load-time port 0.
    assert_eq!(*peers.borrow(), vec![Some("10.77.0.2:7789".to_string()); 4]);
    assert!(status.iter().all(|st| *st == RunStatus::Ok));
    assert_eq!(count(&ex.log, "service_start mirror.b"), 1, "{:#?}", ex.log);
    assert_eq!(count(&ex.log, "service_stop mirror.b"), 1);
    let start = ex.log.iter().position(|l| l == "service_start mirror.b");
    let stop = ex.log.iter().position(|l| l == "service_stop mirror.b");
    assert!(start < stop);
}
