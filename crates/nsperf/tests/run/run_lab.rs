//! `nsperf run` with a lab under faults (issue 13): two runs of a plan naming the same lab,
//! and Ctrl-C in the middle of a step. Root, `ip` and TUN; skipped with a reason otherwise.

use crate::common;
use common::lab::{Lab, lab_name};
use common::procs::{self, Proc};
use common::*;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The device a lab's emulator holds open to keep the CPUs out of deep idle states.
const DMA_LATENCY: &str = "/dev/cpu_dma_latency";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// A plan whose one step, in site `a` of lab `lab`, touches `marker` and runs `then`.
fn plan_with_step(dir: &Path, lab: &str, marker: &Path, then: &str) -> String {
    write(
        dir,
        "lab.toml",
        &format!(
            "name = \"labfault\"\n[lab]\nname = \"{lab}\"\nsites = [\"a\", \"b\"]\n[[step]]\nname = \"wait\"\ntype = \"exec\"\nsite = \"a\"\ncommand = [\"sh\", \"-c\", \"touch {}; {then}\"]\n",
            marker.display()
        ),
    )
}

/// `nsperf run PLAN` into `db`, quiet, without a report.
fn start_run(plan: &str, db: &Path) -> KillOnDrop {
    let child = nsperf([
        "run",
        plan,
        "--db",
        db.to_str().unwrap(),
        "-q",
        "--no-report",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    KillOnDrop(child)
}

/// Waits (at most 60 s) until the step made `marker`.
fn wait_for(marker: &Path, child: &mut Child) {
    let t0 = Instant::now();
    while !marker.exists() {
        if let Some(s) = child.try_wait().unwrap() {
            panic!("nsperf run ended ({s}) before its step started");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the step did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (at most `limit`) for the child to exit and returns its exit code.
fn exit_code(child: &mut Child, limit: Duration) -> Option<i32> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        assert!(
            t0.elapsed() < limit,
            "nsperf run did not end within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Lab `name` as `lab list --json` shows it, if it is up.
fn listed(name: &str) -> Option<serde_json::Value> {
    let j = run(&["lab", "list", "--json"]).ok().json();
    j["summary"]["labs"]
        .as_array()?
        .iter()
        .find(|l| l["name"] == name)
        .cloned()
}

/// Issue #13: a second `nsperf run` of a plan naming the lab of a run still going refuses
/// (exit 10, one line naming the owner) before it stores or builds anything, and the first
/// run's lab, emulator and step carry on untouched to a complete experiment.
#[test]
fn second_run_with_the_same_lab_name_refuses_and_leaves_the_first_alone() {
    let what = "two runs with one lab name";
    if !require_lab(what) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("rdup");
    let _guard = Lab(lab.clone());
    let marker = dir.path().join("inside");
    let release = dir.path().join("release");
    // The step holds until the test releases it (at most 60 s).
    let plan = plan_with_step(
        dir.path(),
        &lab,
        &marker,
        &format!(
            "i=0; while [ ! -e {} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
            release.display()
        ),
    );
    let first_db = dir.path().join("first.db");
    let mut first = start_run(&plan, &first_db);
    wait_for(&marker, &mut first.0);
    let before = listed(&lab).expect("the first run's lab is up");
    let step: Vec<Proc> = procs::tree(first.0.id())
        .into_iter()
        .filter(|p| procs::cmdline(p.pid).contains(release.to_str().unwrap()))
        .collect();
    assert!(!step.is_empty(), "the first run's step is not running");

    let second_db = dir.path().join("second.db");
    let r = run_with_limit(
        nsperf([
            "run",
            &plan,
            "--db",
            second_db.to_str().unwrap(),
            "--no-report",
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(10), "{r:?}");
    assert_eq!(r.stderr.lines().count(), 2, "plan line + one error: {r:?}");
    assert!(
        r.stderr.contains(&format!(
            "lab {lab} belongs to another running process (pid {})",
            first.0.id()
        )),
        "{}",
        r.stderr
    );
    let stored = run(&["results", "list", "--db", second_db.to_str().unwrap()]).ok();
    assert_eq!(
        stored.stdout.lines().count(),
        1,
        "the refused run stored an experiment:\n{}",
        stored.stdout
    );

    // The first run's lab: the same emulator, still forwarding, its step still running.
    let after = listed(&lab).expect("the first run's lab was taken down");
    assert_eq!(after["emulator_pid"], before["emulator_pid"]);
    assert_eq!(after["owner"], before["owner"]);
    assert_eq!(after["running"], true);
    assert!(
        step.iter().all(|&p| procs::alive(p)),
        "the step was stopped"
    );
    if require_program("ping", "link check of two runs with one lab name") {
        let ping = run(&[
            "lab",
            "exec",
            &lab,
            "a",
            "--",
            "ping",
            "-c",
            "1",
            "-W",
            "5",
            "10.77.0.2",
        ]);
        assert_eq!(ping.code, Some(0), "the link no longer carries: {ping:?}");
    }

    std::fs::write(&release, b"").unwrap();
    assert_eq!(exit_code(&mut first.0, Duration::from_secs(120)), Some(0));
    let shown = run(&["results", "show", "--db", first_db.to_str().unwrap()]).ok();
    assert!(
        shown
            .stdout
            .contains("3/3 runs measured, 0 skipped, 0 failed"),
        "{}",
        shown.stdout
    );
    assert!(listed(&lab).is_none(), "the first run left its lab up");
}

/// Issue #13: Ctrl-C on a plan with a lab ends with exit 130 and leaves nothing: the lab is
/// not listed, its namespaces are gone, and so are the emulator, the step's processes and
/// the CPU idle-state hold (the emulator's open `/dev/cpu_dma_latency`).
#[test]
fn ctrl_c_on_a_lab_run_takes_the_lab_down() {
    let what = "Ctrl-C on a lab plan";
    if !require_lab(what) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("rint");
    let _guard = Lab(lab.clone());
    let marker = dir.path().join("inside");
    // The emulator holds the idle state only while the link carries traffic: the step pings
    // across it (for at most 60 s) when it can.
    let hold = if !Path::new(DMA_LATENCY).exists() {
        skip(&format!(
            "{what}: the idle-state hold is not checked: no {DMA_LATENCY} (no PM QoS)"
        ));
        false
    } else {
        require_program("ping", &format!("{what}: the idle-state hold check"))
    };
    let step = if hold {
        "ping -q -i 0.2 -c 300 10.77.0.2"
    } else {
        "sleep 60"
    };
    let plan = plan_with_step(dir.path(), &lab, &marker, step);
    let mut child = start_run(&plan, &dir.path().join("r.db"));
    wait_for(&marker, &mut child.0);
    let lab_state = listed(&lab).expect("the lab is up");
    let emulator = lab_state["emulator_pid"].as_u64().unwrap() as u32;
    if hold {
        let t0 = Instant::now();
        while !procs::holds(emulator, DMA_LATENCY) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the emulator does not hold {DMA_LATENCY} while the link carries pings: the \
                 check below would prove nothing"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Everything the run started: the emulator, the step's `nsperf step`, its shell, the
    // step's command.
    let started = procs::tree(child.0.id());
    let names: Vec<String> = started.iter().map(|p| procs::cmdline(p.pid)).collect();
    assert!(
        started.iter().any(|p| p.pid == emulator),
        "the emulator is not below the run: {names:?}"
    );
    assert!(
        names.iter().any(|c| c.starts_with(step)),
        "the step is not below the run: {names:?}"
    );
    let holders: Vec<Proc> = started
        .iter()
        .copied()
        .filter(|p| procs::holds(p.pid, DMA_LATENCY))
        .collect();
    assert!(
        !hold || holders.iter().any(|p| p.pid == emulator),
        "the emulator let go of {DMA_LATENCY} while the pings went on"
    );

    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert_eq!(exit_code(&mut child.0, Duration::from_secs(30)), Some(130));

    assert!(listed(&lab).is_none(), "lab left up");
    let ns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        !ns.contains(&format!("nsp-{lab}-")),
        "namespaces left: {ns}"
    );
    // The run has exited: what it started must be gone (a moment for init to reap them).
    let t0 = Instant::now();
    let left = loop {
        let left: Vec<(Proc, String)> = started
            .iter()
            .filter(|&&p| procs::alive(p))
            .map(|&p| (p, procs::cmdline(p.pid)))
            .collect();
        if left.is_empty() || t0.elapsed() > Duration::from_secs(5) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(left.is_empty(), "left running after Ctrl-C: {left:?}");
    assert!(
        holders.iter().all(|&p| !procs::alive(p)),
        "{DMA_LATENCY} still held by {holders:?}"
    );
}
