//! `nsperf lab` through the real binary: up, exec, set, stats, list, down (also after the
//! emulator was killed with SIGKILL). Root only; skipped with a printed reason otherwise.

use crate::common;
use common::*;

use common::lab::{Lab, lab_name, timing_lock};

#[test]
fn lab_flags_are_checked_without_root() {
    let _serial = timing_lock();
    let r = run(&["lab", "up", "x", "--rate", "fast"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("invalid rate 'fast'"), "{}", r.stderr);
    let r = run(&["lab", "up", "x", "--loss", "5"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("write a percentage"), "{}", r.stderr);
    let r = run(&["lab", "up", "Bad-Name"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let r = run(&["lab", "up", "x", "--sites", "a,a"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("named twice"), "{}", r.stderr);
}

#[test]
fn lab_up_exec_set_stats_down() {
    let _serial = timing_lock();
    if !require_root("lab lifecycle test") || !require_program("ip", "lab lifecycle test") {
        return;
    }
    if !require_tun("lab lifecycle test") || !require_program("ping", "lab lifecycle test") {
        return;
    }
    let name = lab_name("l");
    let _g = Lab(name.clone());
    let r = run(&[
        "lab", "up", &name, "--sites", "a,b", "--rtt", "20ms", "--rate", "100mbit",
    ])
    .ok();
    assert!(r.stdout.contains("10.77.0.2"), "{}", r.stdout);
    // exec passes the exit code through
    let r = run(&["lab", "exec", &name, "a", "--", "sh", "-c", "exit 7"]);
    assert_eq!(r.code, Some(7));
    // the link adds the RTT
    let r = run(&[
        "lab",
        "exec",
        &name,
        "a",
        "--",
        "ping",
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "2",
        "10.77.0.2",
    ])
    .ok();
    // The minimum: a loaded machine only ever adds to a ping's time.
    let min: f64 = r
        .stdout
        .lines()
        .find(|l| l.contains("min/avg"))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(
        (19.5..25.0).contains(&min),
        "ping min {min} ms\n{}",
        r.stdout
    );
    // set, then stats shows the change and the event
    run(&["lab", "set", &name, "--rtt", "40ms", "--loss", "1%"]).ok();
    let r = run(&["lab", "stats", &name, "--json"]).ok();
    let j = r.json();
    assert_eq!(j["command"], "lab");
    let dirs = j["summary"]["directions"].as_array().unwrap();
    assert_eq!(dirs.len(), 2);
    assert_eq!(dirs[0]["params"]["delay_ns"], 20_000_000);
    assert!(dirs[0]["counters"]["forwarded_packets"].as_u64().unwrap() >= 3);
    let ev = j["summary"]["events"].as_array().unwrap();
    assert!(
        ev.iter()
            .any(|e| e["text"].as_str().unwrap().contains("--loss 1%")),
        "{ev:?}"
    );
    // the emulator holds the CPUs' idle-exit latency at 0 while the lab is up (PM QoS)
    if std::path::Path::new("/dev/cpu_dma_latency").exists() {
        assert!(
            ev.iter().any(|e| e["text"]
                .as_str()
                .unwrap()
                .starts_with("CPU idle-exit latency held")),
            "{ev:?}"
        );
    }
    let r = run(&["lab", "set", &name, "--from", "zz", "--rate", "1mbit"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    // list
    let j = run(&["lab", "list", "--json"]).ok().json();
    let labs = j["summary"]["labs"].as_array().unwrap();
    let me = labs.iter().find(|l| l["name"] == name.as_str()).unwrap();
    assert_eq!(me["sites"][1]["addr"], "10.77.0.2");
    assert_eq!(me["running"], true);
    // kill -9 the emulator: down still removes everything
    let pid = me["emulator_pid"].as_u64().unwrap();
    unsafe_kill9(pid);
    run(&["lab", "down", &name]).ok();
    assert!(!std::path::Path::new(&format!("/run/netns/nsp-{name}-a")).exists());
    assert!(!std::path::Path::new(&format!("/run/nsperf/labs/{name}")).exists());
    let t0 = std::time::Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}/exe")).exists()
        && t0.elapsed() < std::time::Duration::from_secs(2)
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let r = run(&["lab", "exec", &name, "a", "--", "true"]);
    assert_eq!(r.code, Some(2));
}

fn alive(pid: u32) -> bool {
    nsperf_core::process::ProcessId::of(pid).is_some()
}

/// Issue 13: a lab owned by another live process is never torn down by accident (two plan
/// runs with the same lab name), `--force` still removes it, and once the owner is gone
/// anyone may remove it.
#[test]
fn lab_owned_by_a_live_process_is_kept_without_force() {
    let _serial = timing_lock();
    let what = "lab ownership test";
    if !require_lab(what) {
        return;
    }
    let name = lab_name("o");
    let _g = Lab(name.clone());
    // The owner: a process that is not an ancestor of the `nsperf lab down` we run.
    let mut owner = KillOnDrop(
        std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap(),
    );
    let pid = owner.0.id().to_string();
    run(&["lab", "up", &name, "--owner", &pid]).ok();
    let j = run(&["lab", "list", "--json"]).ok().json();
    let me = j["summary"]["labs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name.as_str())
        .cloned()
        .unwrap();
    assert_eq!(me["owner"]["pid"].as_u64(), Some(u64::from(owner.0.id())));
    let r = run(&["lab", "down", &name]);
    assert_eq!(r.code, Some(10), "{}", r.stderr);
    assert!(r.stderr.contains("still running"), "{}", r.stderr);
    assert!(std::path::Path::new(&format!("/run/netns/nsp-{name}-a")).exists());
    // The owner gone, the lab is anyone's to remove.
    let _ = owner.0.kill();
    let _ = owner.0.wait();
    run(&["lab", "down", &name]).ok();
    assert!(!std::path::Path::new(&format!("/run/netns/nsp-{name}-a")).exists());
    // --force removes a lab whose owner lives; the owner itself (or its children) needs none.
    let owner = KillOnDrop(
        std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap(),
    );
    run(&["lab", "up", &name, "--owner", &owner.0.id().to_string()]).ok();
    run(&["lab", "down", &name, "--force"]).ok();
    run(&["lab", "up", &name]).ok(); // owned by this test process, the parent
    run(&["lab", "down", &name]).ok();
    assert!(!std::path::Path::new(&format!("/run/nsperf/labs/{name}")).exists());
}

/// Issue 13: `lab down` while `lab exec … server` runs stops the server instead of leaving
/// it in a namespace no longer listed.
#[test]
fn lab_down_stops_processes_left_inside() {
    let _serial = timing_lock();
    let what = "lab down process cleanup test";
    if !require_lab(what) {
        return;
    }
    let name = lab_name("k");
    let _g = Lab(name.clone());
    run(&["lab", "up", &name]).ok();
    let server = KillOnDrop(
        nsperf(["lab", "exec", &name, "b", "--"])
            .args([nsperf_bin(), "server", "--port", "5399"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = server.0.id();
    let t0 = std::time::Instant::now();
    // `lab exec` execs `ip netns exec`, which execs the server: same pid, in the namespace.
    while !std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.starts_with(format!("{}\0server\0", nsperf_bin()).as_bytes()))
        && t0.elapsed() < std::time::Duration::from_secs(5)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(alive(pid));
    let r = run(&["lab", "down", &name]).ok();
    assert!(
        r.stderr.contains(&format!("stopped pid {pid}")),
        "{}",
        r.stderr
    );
    // The server is our child: reap it (it exits on SIGTERM), then it is gone.
    let mut server = server;
    server.0.wait().unwrap();
    assert!(!alive(pid));
}

fn unsafe_kill9(pid: u64) {
    let st = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(std::time::Duration::from_millis(100));
}
