//! Plans with `[[service]]` file servers and per-cell `setup`/`teardown` (issue #12): io steps
//! through the embedded NFS server (on loopback without root; in a lab site as root), with
//! the data checked; a service killed mid-plan fails the steps through it; nothing is left
//! behind after the plan, after a failed step, after Ctrl-C, after `kill -9` + `lab down`.

use crate::common;
use common::procs::{self, Proc};
use common::*;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// The runs of experiment 1 of `db`: (step, cell, phase, status, error, metrics).
fn runs(db: &Path) -> Vec<serde_json::Value> {
    let j = run(&[
        "results",
        "show",
        "1",
        "--db",
        db.to_str().unwrap(),
        "--json",
        "--runs",
    ])
    .ok()
    .json();
    j["runs"].as_array().unwrap().clone()
}

/// Every `.nsperf-*` entry left in `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".nsperf-"))
        .collect()
}

/// Service scratch directories of processes that are gone (`/tmp/.nsperf-service-PID`).
fn service_dirs_of(pids: &[u32]) -> Vec<String> {
    pids.iter()
        .map(|p| std::env::temp_dir().join(format!(".nsperf-service-{p}")))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect()
}

/// A plan of io steps through a service `nas` serving `export`; `service` and `step`
/// extra lines.
fn plan_text(name: &str, lab: &str, service: &str, steps: &str) -> String {
    format!(
        "name = \"{name}\"\nrepetitions = 1\n{lab}\n[[service]]\nname = \"nas\"\n{service}\n{steps}"
    )
}

const IO_STEPS: &str = r#"
[matrix]
workload = ["seqwrite", "seqread", "randrw"]

[[step]]
name = "nfs"
type = "io"
service = "nas"
workload = "{workload}"
size = "2m"
bs = "64k"
iodepth = 4
verify = "crc32"
SITE
setup = ["sh", "-c", "echo setup {workload} >> COUNT"]
teardown = ["sh", "-c", "echo teardown {workload} >> COUNT"]
"#;

/// Checks the runs of the io plan: every workload measured through the service with every
/// block checked and none failed, setup and teardown once per cell.
fn check_io_plan(db: &Path, count: &Path, export: &Path) {
    let rs = runs(db);
    assert_eq!(rs.len(), 3, "{rs:#?}");
    for r in &rs {
        assert_eq!(r["status"], "ok", "{r:#}");
        let m = &r["metrics"];
        assert!(
            m["verify.blocks_checked"].as_f64().unwrap_or(0.0) >= 32.0,
            "{}: {m:#}",
            r["cell"]
        );
        assert_eq!(m["verify.failures"].as_f64(), Some(0.0), "{m:#}");
        assert_eq!(m["remote.rpcs_in_flight"].as_f64(), Some(4.0), "{m:#}");
    }
    let lines = std::fs::read_to_string(count).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(
        lines,
        [
            "setup seqwrite",
            "teardown seqwrite",
            "setup seqread",
            "teardown seqread",
            "setup randrw",
            "teardown randrw"
        ]
    );
    assert!(leftovers(export).is_empty(), "{:?}", leftovers(export));
}

/// Without root: the embedded server on loopback, every block written then read back
/// through it checked (crc32 headers), setup and teardown once per cell, and nothing left
/// behind (no process of the run, no `.nsperf-*` file, no service directory).
#[test]
fn io_steps_through_a_loopback_service_with_checked_data() {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let count = dir.path().join("count");
    let steps = IO_STEPS
        .replace("SITE", "")
        .replace("COUNT", count.to_str().unwrap());
    let plan = write(
        dir.path(),
        "p.toml",
        &plan_text(
            "svc-loop",
            "",
            &format!("dir = \"{}\"", export.display()),
            &steps,
        ),
    );
    let dry = run(&["run", &plan, "--dry-run"]).ok();
    assert!(
        dry.stdout.contains(&format!(
            "service nas (embedded nfs of {} on this host's loopback)",
            export.display()
        )) && dry
            .stdout
            .contains("setup (once in this cell): sh -c echo setup seqread"),
        "{}",
        dry.stdout
    );
    let db = dir.path().join("r.db");
    let mut child = nsperf(["run", &plan, "--db", db.to_str().unwrap(), "--no-report"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Everything the run starts, seen while it runs.
    let mut seen: Vec<Proc> = Vec::new();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        seen.extend(procs::tree(pid).into_iter().filter(|p| p.pid != pid));
        assert!(t0.elapsed() < Duration::from_secs(120), "the plan hangs");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("service nas (embedded nfs"), "{stderr}");
    check_io_plan(&db, &count, &export);
    seen.sort();
    seen.dedup();
    let alive: Vec<String> = seen
        .iter()
        .filter(|p| procs::alive(**p))
        .map(|p| format!("{} {}", p.pid, procs::cmdline(p.pid)))
        .collect();
    assert!(alive.is_empty(), "left running: {alive:?}");
    let pids: Vec<u32> = seen.iter().map(|p| p.pid).collect();
    assert!(
        service_dirs_of(&pids).is_empty(),
        "{:?}",
        service_dirs_of(&pids)
    );
}

/// Waits until `stderr_file` holds `what` (60 s at most) while the child runs.
fn wait_for_line(child: &mut Child, log: &Path, what: &str) {
    let t0 = Instant::now();
    loop {
        let s = std::fs::read_to_string(log).unwrap_or_default();
        if s.contains(what) {
            return;
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("nsperf run ended ({st}) before \"{what}\":\n{s}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no \"{what}\":\n{s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `nsperf run PLAN` with stderr into `log`.
fn start(plan: &str, db: &Path, log: &Path) -> KillOnDrop {
    let err = std::fs::File::create(log).unwrap();
    KillOnDrop(
        nsperf(["run", plan, "--db", db.to_str().unwrap(), "--no-report"])
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap(),
    )
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        assert!(t0.elapsed() < limit, "nsperf run did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ctrl-C in the middle of a step through a service: exit 130, the teardown still runs, the
/// service and the step's child are gone, and the export holds no `.nsperf-*` file.
#[test]
fn ctrl_c_mid_step_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let count = dir.path().join("count");
    let plan = write(
        dir.path(),
        "p.toml",
        &plan_text(
            "svc-int",
            "",
            &format!("dir = \"{}\"", export.display()),
            &format!(
                "[[step]]\nname = \"long\"\ntype = \"io\"\nservice = \"nas\"\nworkload = \"seqread\"\nsize = \"1m\"\nbs = \"64k\"\ntime = \"60s\"\nsetup = [\"sh\", \"-c\", \"echo setup >> {0}\"]\nteardown = [\"sh\", \"-c\", \"echo teardown >> {0}\"]\n",
                count.display()
            ),
        ),
    );
    let db = dir.path().join("r.db");
    let log = dir.path().join("err");
    let mut run = start(&plan, &db, &log);
    wait_for_line(&mut run.0, &log, "answers at");
    // The step is running once its file is on the server.
    let t0 = Instant::now();
    while leftovers(&export).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the step did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let tree: Vec<Proc> = procs::tree(run.0.id());
    assert!(tree.len() >= 3, "run, service and step: {tree:?}");
    // SAFETY: kill with a pid of our own child.
    unsafe { libc::kill(run.0.id() as i32, libc::SIGINT) };
    assert_eq!(wait_exit(&mut run.0, Duration::from_secs(30)), Some(130));
    let alive: Vec<String> = tree
        .iter()
        .filter(|p| procs::alive(**p))
        .map(|p| procs::cmdline(p.pid))
        .collect();
    assert!(alive.is_empty(), "left running: {alive:?}");
    assert_eq!(
        std::fs::read_to_string(&count).unwrap(),
        "setup\nteardown\n"
    );
    // The step was interrupted (SIGINT to its group before any SIGKILL): it removed its
    // files on the server.
    assert!(leftovers(&export).is_empty(), "{:?}", leftovers(&export));
    let pids: Vec<u32> = tree.iter().map(|p| p.pid).collect();
    assert!(
        service_dirs_of(&pids).is_empty(),
        "{:?}",
        service_dirs_of(&pids)
    );
}
