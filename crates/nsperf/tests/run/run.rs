//! `nsperf run`, `nsperf results`: plans end to end through the real binary, with external
//! commands only (no root, no other engine needed).

use crate::common;
use common::lab::{Lab, lab_name};
use common::*;

use std::time::{Duration, Instant};

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

const SMALL: &str = r#"
name = "e2e"
repetitions = 3

[matrix]
kib = [256, 1024]

[[step]]
name = "copy"
type = "exec"
command = ["sh", "-c", "head -c {kib}k /dev/zero | wc -c"]
payload_regex = "(\\d+)"

[[step]]
name = "nap"
type = "exec"
command = ["sleep", "0.05"]
"#;

#[test]
fn small_plan_end_to_end_into_a_temporary_store() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(dir.path(), "p.toml", SMALL);
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let report = dir.path().join("report.html");
    let r = run(&[
        "run",
        &plan,
        "--db",
        db,
        "--json",
        "--report",
        report.to_str().unwrap(),
    ])
    .ok();
    let j = r.json();
    assert_eq!(j["experiment"], 1);
    assert_eq!(j["report"], report.to_str().unwrap());
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("data-chart=\"throughput-vs-parameter\""));
    assert_eq!(j["measured"], 9);
    assert_eq!(j["failed"], 0);

    let r = run(&["results", "show", "1", "--db", db, "--json", "--runs"]).ok();
    let j = r.json();
    assert_eq!(j["experiment"]["status"], "complete");
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 9);
    let copies: Vec<_> = runs.iter().filter(|r| r["step"] == "copy").collect();
    assert_eq!(copies.len(), 6);
    for c in &copies {
        let kib: u64 = c["params"]["kib"]["value"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(c["params"]["kib"]["kind"], "number");
        assert_eq!(c["payload_bytes"].as_u64().unwrap(), kib * 1024);
        assert_eq!(c["metric"], "throughput_bytes_per_s");
        assert!(c["value"].as_f64().unwrap() > 0.0);
    }
    let stats = j["stats"].as_array().unwrap();
    assert_eq!(stats.len(), 3, "copy x2, nap x1");
    let nap = stats.iter().find(|s| s["step"] == "nap").unwrap();
    assert_eq!(nap["summary"]["n"], 3);
    let mean = nap["summary"]["mean"].as_f64().unwrap();
    assert!((0.04..1.0).contains(&mean), "sleep 0.05 took {mean} s");
    assert!(nap["summary"]["ci95_lo"].as_f64().unwrap() <= mean);

    let r = run(&["results", "list", "--db", db]).ok();
    assert!(
        r.stdout.contains("e2e") && r.stdout.contains("complete"),
        "{}",
        r.stdout
    );
    let r = run(&["results", "show", "latest", "--db", db]).ok();
    assert!(
        r.stdout.contains("95% CI") && r.stdout.contains("kib=1024"),
        "{}",
        r.stdout
    );
}

/// Issue #14: experiments picked by label; `results compare` writes its chart.
#[test]
fn labelled_experiments_compare_with_a_chart() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(dir.path(), "p.toml", SMALL);
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    for label in ["native", "replicated"] {
        run(&[
            "run",
            &plan,
            "--db",
            db,
            "-q",
            "--no-report",
            "--label",
            label,
        ])
        .ok();
    }
    let r = run(&["run", &plan, "--db", db, "--label", "7"]);
    assert_eq!(r.code, Some(2), "a number is not a label: {}", r.stderr);
    let list = run(&["results", "list", "--db", db]).ok();
    assert!(list.stdout.contains("native") && list.stdout.contains("replicated"));
    let chart = dir.path().join("cmp.html");
    let j = run(&[
        "results",
        "compare",
        "native",
        "replicated",
        "--db",
        db,
        "--json",
        "-o",
        chart.to_str().unwrap(),
    ])
    .ok()
    .json();
    assert_eq!((j["a"].as_i64(), j["b"].as_i64()), (Some(1), Some(2)));
    assert_eq!(j["b_label"], "replicated");
    assert_eq!(j["comparisons"].as_array().unwrap().len(), 3);
    let html = std::fs::read_to_string(&chart).unwrap();
    assert!(html.contains("data-chart=\"compare\"") && html.contains("<svg"));
    assert!(html.contains("“native”") && html.contains("B/A = 1: no difference"));
    let r = run(&["results", "compare", "1", "2", "--db", db, "-o", "x.png"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
}

#[test]
fn bad_plan_is_an_input_error_naming_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "bad.toml",
        "name = \"x\"\n[[step]]\nname = \"a\"\ntype = \"exec\"\ncommand = [\"echo\", \"{nope}\"]\n",
    );
    let r = run(&[
        "run",
        &plan,
        "--db",
        dir.path().join("r.db").to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(r.stderr.contains("unknown variable {nope}"), "{}", r.stderr);
    assert_eq!(r.stderr.trim().lines().count(), 1);
    let r = run(&["run", "/no/such/plan.toml"]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    let r = run(&[
        "results",
        "show",
        "7",
        "--db",
        dir.path().join("none.db").to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
}

#[test]
fn default_plan_dry_run() {
    let r = run(&["run", "--dry-run"]).ok();
    assert!(r.stdout.contains("plan wan-window"), "{}", r.stdout);
    assert!(
        r.stdout.contains("19 cells, 96 runs (3 repetitions)"),
        "{}",
        r.stdout
    );
    // Issue 14 item 7: a fixed 64 KiB window beside the autotuned default and the BDP at
    // every RTT, so the headline chart has the window/RTT curve.
    for rtt in ["0ms", "50ms", "100ms", "150ms"] {
        for window in ["64k", "default", "{bdp}"] {
            let cell = format!("cell rtt={rtt},window={window},");
            assert!(r.stdout.contains(&cell), "no {cell}: {}", r.stdout);
        }
    }
    // Issue 12 item 7: NFS reads (cold, remote-warm) and writes through the embedded server
    // in the lab's server site, listed once per RTT.
    assert!(
        r.stdout.contains("service nfs (embedded nfs of "),
        "{}",
        r.stdout
    );
    for (line, n) in [
        (
            "nfs-read (io) phases cold,remote-warm through service nfs",
            4,
        ),
        ("nfs-write (io) phases - through service nfs", 4),
    ] {
        assert_eq!(r.stdout.matches(line).count(), n, "{line}: {}", r.stdout);
    }
}

/// The default plan cut down: its header, `[lab]` and `[matrix]` with the RTTs replaced by
/// `rtt` and `repetitions = 2`, then the sections from `from` to `to` (or the end).
fn default_plan_part(rtt: &str, parts: &[(&str, Option<&str>)]) -> String {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans/default.toml"),
    )
    .unwrap();
    let cut = |s: &str, from: &str, to: &str| {
        assert!(s.contains(from), "the default plan has no `{from}`");
        s.replace(from, to)
    };
    let text = cut(&text, "repetitions = 3", "repetitions = 2");
    let text = cut(
        &text,
        r#"rtt = ["0ms", "50ms", "100ms", "150ms"]"#,
        &format!(r#"rtt = ["{rtt}"]"#),
    );
    let at = |s: &str| {
        text.find(s)
            .unwrap_or_else(|| panic!("the default plan has no `{s}`"))
    };
    let mut out = text[..at("[[service]]")].to_string();
    for (from, to) in parts {
        let a = at(from);
        let b = to.map_or(text.len(), &at);
        assert!(a < b, "`{from}` after `{to:?}` in the default plan");
        out.push_str(&text[a..b]);
    }
    out
}

/// The default plan's own tcp step (from `plans/default.toml`, cut to the 100 ms RTT and two
/// repetitions): the 64 KiB window is held under window/RTT while the autotuned default and
/// the BDP window go far faster — the phenomenon its headline chart shows.
#[test]
fn default_plan_tcp_step_shows_the_window_ceiling_as_root() {
    if !require_root("the default plan's tcp step in a lab") || !require_program("ip", "lab") {
        return;
    }
    let text = default_plan_part(
        "100ms",
        &[(TCP_STEP, Some("[[step]]\nname = \"nfs-read\""))],
    );
    let dir = tempfile::tempdir().unwrap();
    let plan = write(dir.path(), "default-tcp.toml", &text);
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let r = run(&["run", &plan, "--db", db, "--json", "--no-report", "-q"])
        .ok()
        .json();
    assert_eq!(r["measured"], 6, "{r}");
    let j = run(&["results", "show", "1", "--db", db, "--json", "--runs"])
        .ok()
        .json();
    let rates = |w: &str| -> Vec<f64> {
        j["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| {
                let p = &r["params"]["window"];
                p["value"] == w || p["template"] == w
            })
            .map(|r| r["value"].as_f64().unwrap())
            .collect()
    };
    let small = rates("64k");
    assert_eq!(small.len(), 2);
    // 64 KiB asked, 128 KiB granted: the advertised window is under 128 KiB, so the rate is
    // under 128 KiB x 8 / 100 ms = 10.5 Mbit/s (measured 5.4-6.1 on the loaded test VM).
    let ceiling = 128.0 * 1024.0 * 8.0 / 0.1;
    for bps in &small {
        assert!(
            *bps > 1e6 && *bps <= ceiling,
            "64k at 100 ms: {bps} bit/s, ceiling {ceiling}"
        );
    }
    // The other two reach far past it (43 Mbit/s measured); the best of two repetitions, as
    // the userspace emulator can be starved of CPU on a loaded machine.
    for w in ["default", "{bdp}"] {
        let best = rates(w).into_iter().fold(0.0, f64::max);
        assert!(
            best > 2.0 * ceiling && best < 45.5e6,
            "{w} at 100 ms: best {best} bit/s against the 64k ceiling {ceiling}"
        );
    }
}

const TCP_STEP: &str = "[[step]]\nname = \"tcp\"";

/// The default plan's NFS steps (issue 12 item 7; cut to the 100 ms RTT and two
/// repetitions, run in a temporary directory, which the embedded server serves): reads cold
/// and remote-warm and a write, each with one 64 KiB RPC in flight, recorded with a 64 KiB
/// window on the lab's link, stay under 64 KiB/RTT (each RPC waits a round trip) and still
/// move a fair share of it.
#[test]
fn default_plan_nfs_steps_follow_one_rpc_per_rtt_as_root() {
    if !require_lab("the default plan's nfs steps in a lab") {
        return;
    }
    let text = default_plan_part(
        "100ms",
        &[
            ("[[service]]", Some(TCP_STEP)),
            (
                "[[step]]\nname = \"nfs-read\"",
                Some("[[step]]\nname = \"io\""),
            ),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let plan = write(dir.path(), "default-nfs.toml", &text);
    let mut cmd = nsperf(["run", &plan, "--db", "r.db", "--json", "--no-report", "-q"]);
    cmd.current_dir(dir.path());
    let r = run_with_limit(cmd, Duration::from_secs(180)).ok().json();
    assert_eq!(r["measured"], 6, "{r}");
    assert_eq!(r["failed"], 0, "{r}");
    let mut cmd = nsperf(["results", "show", "1", "--db", "r.db", "--json", "--runs"]);
    cmd.current_dir(dir.path());
    let j = run_with_limit(cmd, Duration::from_secs(60)).ok().json();
    let runs = j["runs"].as_array().unwrap();
    // One RPC in flight: every RPC waits a full round trip, so no run beats 64 KiB / 100 ms.
    let ceiling = 64.0 * 1024.0 / 0.1;
    for (step, phase) in [
        ("nfs-read", "cold"),
        ("nfs-read", "remote-warm"),
        ("nfs-write", "-"),
    ] {
        let rates: Vec<f64> = runs
            .iter()
            .filter(|r| r["step"] == step && r["phase"] == phase)
            .map(|r| {
                let c = &r["conditions"];
                assert_eq!(c["window_bytes"], 65536, "{r}");
                assert_eq!(c["rtt_s"], 0.1, "{r}");
                r["value"].as_f64().unwrap()
            })
            .collect();
        assert_eq!(rates.len(), 2, "{step} {phase}: {j}");
        for b in &rates {
            assert!(*b <= ceiling, "{step} {phase}: {b} B/s over {ceiling}");
        }
        // Measured 53-57 % of it (a 64 KiB reply needs TCP's window opened past the initial
        // 10 segments); the best of two, as the emulator can be starved of CPU.
        let best = rates.into_iter().fold(0.0, f64::max);
        assert!(
            best > 0.25 * ceiling,
            "{step} {phase}: best {best} B/s, ceiling {ceiling}"
        );
    }
    // Nothing of the runs is left in the served directory.
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(".nsperf-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn kill_9_mid_plan_then_resume_completes_only_missing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("executions.log");
    let plan = write(
        dir.path(),
        "slow.toml",
        &format!(
            r#"
name = "slow"
repetitions = 2

[matrix]
n = [1, 2, 3, 4, 5]

[[step]]
name = "nap"
type = "exec"
command = ["sh", "-c", "echo {{n}} >> {}; sleep 0.25"]
"#,
            log.display()
        ),
    );
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let mut child = nsperf(["run", &plan, "--db", db, "-q", "--no-report"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once a few runs are stored.
    let t0 = Instant::now();
    loop {
        let lines = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count();
        if lines >= 4 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "plan did not progress"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let before = run(&["results", "show", "1", "--db", db, "--json", "--runs"])
        .ok()
        .json();
    let stored = before["runs"].as_array().unwrap().len();
    assert!(
        (3..10).contains(&stored),
        "{stored} runs stored before the kill"
    );
    assert_eq!(before["experiment"]["status"], "running");
    let executed_before = std::fs::read_to_string(&log).unwrap().lines().count();

    let r = run(&[
        "run",
        &plan,
        "--db",
        db,
        "--resume",
        "--json",
        "--no-report",
    ])
    .ok()
    .json();
    assert_eq!(r["experiment"], 1, "resume continues the same experiment");
    assert_eq!(r["already_done"].as_u64().unwrap() as usize, stored);
    assert_eq!(r["measured"].as_u64().unwrap() as usize, 10 - stored);
    let after = run(&["results", "show", "1", "--db", db, "--json", "--runs"])
        .ok()
        .json();
    let runs = after["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 10);
    let mut keys: Vec<String> = runs
        .iter()
        .map(|r| format!("{}/{}/{}", r["cell"], r["step"], r["repetition"]))
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 10, "no run stored twice");
    assert_eq!(after["experiment"]["status"], "complete");
    // Only the missing runs were executed again (plus at most the one killed in progress).
    let executed = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(executed - executed_before, 10 - stored);
    assert!(executed <= 11);
    let list = run(&["results", "list", "--db", db]).ok();
    assert_eq!(
        list.stdout.lines().count(),
        2,
        "one experiment: {}",
        list.stdout
    );
}

#[test]
fn lab_plan_with_net_capture_and_cold_phase_as_root() {
    if !require_root("lab plan end to end") {
        return;
    }
    let have_tcpdump = require_program("tcpdump", "capture part of the lab plan");
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("rtst");
    let _guard = Lab(lab.clone());
    let capture = if have_tcpdump {
        "capture = \"srv\""
    } else {
        ""
    };
    let plan = write(
        dir.path(),
        "lab.toml",
        &format!(
            r#"
name = "labtest"
repetitions = 1

[lab]
name = "{lab}"
sites = ["cli", "srv"]
rate = "20mbit"
rtt = "{{rtt}}"

[matrix]
rtt = ["5ms", "40ms"]
window = ["{{bdp}}"]

[[step]]
name = "tcp"
type = "net"
client = "cli"
server = "srv"
time = "1s"
window = "{{window}}"
{capture}

[[step]]
name = "mtu"
type = "exec"
site = "cli"
command = ["cat", "/sys/class/net/wan0/mtu"]
phases = ["cold"]
"#
        ),
    );
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let report = dir.path().join("lab.html");
    let r = run(&[
        "run",
        &plan,
        "--db",
        db,
        "--json",
        "--label",
        "native lab",
        "--keep-captures",
        "--report",
        report.to_str().unwrap(),
    ])
    .ok()
    .json();
    assert_eq!(r["measured"], 4, "{r}");
    assert_eq!(r["label"], "native lab");
    // The label picks the experiment.
    let j = run(&[
        "results",
        "show",
        "native lab",
        "--db",
        db,
        "--json",
        "--runs",
    ])
    .ok()
    .json();
    assert_eq!(j["experiment"]["label"], "native lab");
    let runs = j["runs"].as_array().unwrap();
    for t in runs.iter().filter(|r| r["step"] == "tcp") {
        // {bdp} is stored as the byte count it stood for: 20 Mbit/s x RTT, in whole KiB, at
        // least 64 KiB (5 ms: 12.5 kB -> 64 KiB; 40 ms: 100 kB -> 98 KiB).
        let w = &t["params"]["window"];
        assert_eq!(w["template"], "{bdp}", "{w}");
        assert_eq!(w["kind"], "size");
        let rtt = t["params"]["rtt"]["number"].as_f64().unwrap();
        let want = ((20e6 / 8.0 * rtt / 1024.0).ceil().max(64.0) * 1024.0) as u64;
        assert_eq!(w["value"], want.to_string(), "{w} at rtt {rtt}");
        let bps = t["value"].as_f64().unwrap();
        assert!(bps > 5e6 && bps < 20.5e6, "{bps} bit/s on a 20 Mbit/s link");
        assert!(t["wire_bytes"].as_u64().unwrap() >= t["payload_bytes"].as_u64().unwrap());
    }
    // The exec step ran inside the site: /sys shows the site's link device.
    let mtu = runs.iter().find(|r| r["step"] == "mtu").unwrap();
    assert_eq!(mtu["status"], "ok", "{mtu}");
    assert_eq!(mtu["phase"], "cold");
    assert_eq!(mtu["metric"], "elapsed_s");
    if have_tcpdump {
        let out = dir.path().join("e.json");
        run(&[
            "results",
            "export",
            "1",
            "--db",
            db,
            "-o",
            out.to_str().unwrap(),
        ])
        .ok();
        let e: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        let traced = e["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["step"] == "tcp" && r["trace"]["command"] == "trace")
            .count();
        assert_eq!(traced, 2, "a capture analysed per tcp run");
        // --keep-captures: each tcp run's pcap kept beside the store, its path recorded.
        let kept: Vec<String> = runs
            .iter()
            .filter(|r| r["step"] == "tcp")
            .map(|r| r["capture_path"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(kept.len(), 2);
        for k in &kept {
            let k = std::path::Path::new(k);
            assert_eq!(k.parent().unwrap(), dir.path().join("r-captures"));
            let bytes = std::fs::read(k).unwrap();
            assert!(
                bytes.len() > 1000 && bytes[..4] == [0xd4, 0xc3, 0xb2, 0xa1],
                "{} is not a pcap with packets",
                k.display()
            );
        }
        // Issue #11: the HTML report shows each capture's diagnosis and findings.
        let html = std::fs::read_to_string(&report).unwrap();
        assert!(
            html.contains("<h2>Capture analysis</h2>"),
            "no capture section"
        );
        assert_eq!(html.matches("<section class=\"trace\"").count(), 2);
        assert!(
            html.contains("10.77.0.1:"),
            "the connection table names the client"
        );
        for k in &kept {
            assert!(html.contains(k.as_str()), "the report names {k}");
        }
        assert!(html.contains("native lab"), "the report shows the label");
    }
    let html = std::fs::read_to_string(&report).unwrap();
    let body = html.split("<h2>Plan</h2>").next().unwrap();
    assert!(
        !body.contains("{bdp}"),
        "a template left unresolved in the report"
    );
    // The lab is gone after the plan.
    let l = run(&["lab", "list"]).ok();
    assert!(!l.stdout.contains(&lab), "{}", l.stdout);
}

/// Issue #13: `--db X` puts the report beside the database, not in the current directory.
#[test]
fn report_goes_beside_the_database_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "p.toml",
        "name = \"where\"\n[[step]]\nname = \"t\"\ntype = \"exec\"\ncommand = [\"true\"]\n",
    );
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let db = store.join("r.db");
    let mut cmd = nsperf(["run", &plan, "--db", db.to_str().unwrap(), "--json"]);
    cmd.current_dir(cwd.path());
    let r = run_with_limit(cmd, Duration::from_secs(60)).ok().json();
    let beside = store.join("nsperf-report.html");
    assert_eq!(r["report"], beside.to_str().unwrap());
    assert!(beside.exists());
    assert!(
        !cwd.path().join("nsperf-report.html").exists(),
        "the current directory's report was written"
    );
}

/// Issue #13: `run --resume` while the original run still works on the experiment names it
/// instead of failing on a database constraint.
#[test]
fn resume_while_the_original_runs_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("started");
    let plan = write(
        dir.path(),
        "slow.toml",
        &format!(
            "name = \"slow\"\n[matrix]\nn = [1, 2, 3]\n[[step]]\nname = \"nap\"\ntype = \"exec\"\ncommand = [\"sh\", \"-c\", \"echo {{n}} >> {}; sleep 5\"]\n",
            log.display()
        ),
    );
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let child = nsperf(["run", &plan, "--db", db, "-q", "--no-report"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let _child = KillOnDrop(child);
    let t0 = Instant::now();
    while !log.exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "plan did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = run(&["run", &plan, "--db", db, "--resume", "--no-report"]);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(
        r.stderr
            .contains(&format!("experiment 1 is still running (pid {pid})")),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("UNIQUE"), "{}", r.stderr);
}
