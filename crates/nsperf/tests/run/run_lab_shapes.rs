//! `nsperf run` with the lab shapes and events of issue 15: a star topology from a plan's
//! `[lab]`, a capture on the emulated link (`capture = "link"`), and a fault schedule whose
//! partition is recorded with the run, drawn in the report and named in its findings.
//! Root, `ip` and TUN; skipped with a reason otherwise. The plan's lab gets a unique name and
//! `nsperf run` tears it down whatever ends it.

use crate::common;
use common::*;

use std::path::Path;
use std::time::Duration;

/// Runs `plan` (text) into a store in `dir` and returns the experiment as the JSON export.
fn run_plan(dir: &Path, plan: &str) -> serde_json::Value {
    let p = dir.join("plan.toml");
    std::fs::write(&p, plan).unwrap();
    let db = dir.join("r.db");
    let mut cmd = nsperf([
        "run",
        p.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "-q",
        "--no-report",
    ]);
    cmd.current_dir(dir);
    run_with_limit(cmd, Duration::from_secs(180)).ok();
    let out = dir.join("x.json");
    let args = ["results", "export", "latest", "-o"];
    let mut cmd = nsperf(args);
    cmd.args([out.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    run_with_limit(cmd, Duration::from_secs(60)).ok();
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

fn runs(x: &serde_json::Value) -> &Vec<serde_json::Value> {
    x["runs"].as_array().unwrap()
}

/// The stored direction `from -> to` of a run's lab.
fn direction<'a>(run: &'a serde_json::Value, from: &str, to: &str) -> &'a serde_json::Value {
    run["lab"]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["from"] == from && d["to"] == to)
        .unwrap_or_else(|| panic!("no direction {from} -> {to} in {}", run["lab"]))
}

/// Issue 15: a star from the plan (two clients into a server's 100 Mbit/s port, 1 Gbit/s
/// access links with 1 ms) is built as asked: the lab stored with each run has those
/// settings on every direction, and each client's traffic crossed its own access link and
/// the port only.
#[test]
fn a_star_from_a_plan_runs_with_the_settings_it_asked_for() {
    let what = "star topology in a plan";
    if !require_lab(what) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let step = |c: &str| {
        format!(
            "[[step]]\nname = \"{c}\"\ntype = \"net\"\nclient = \"{c}\"\nserver = \"srv\"\ntime = \"2s\"\n"
        )
    };
    let plan = format!(
        "name = \"star\"\nrepetitions = 1\n[lab]\nsites = [\"srv\"]\nclients = 2\ntopology = \"star\"\nrate = \"100mbit\"\naccess_rate = \"1g\"\naccess_delay = \"1ms\"\nseed = 5\n{}{}",
        step("c1"),
        step("c2")
    );
    let x = run_plan(dir.path(), &plan);
    let runs = runs(&x);
    assert_eq!(runs.len(), 2);
    for (run, (me, other)) in runs.iter().zip([("c1", "c2"), ("c2", "c1")]) {
        assert_eq!(run["status"], "ok", "{}", run["error"]);
        assert_eq!(run["lab"]["topology"]["kind"], "star");
        assert_eq!(run["lab"]["topology"]["server"], "srv");
        for (from, to) in [("srv", "sw"), ("sw", "srv")] {
            let d = direction(run, from, to);
            assert_eq!(d["link"], "srv");
            assert_eq!(d["params"]["rate_bps"], 100e6, "{d}");
            assert_eq!(d["params"]["delay_ns"], 0);
        }
        for c in ["c1", "c2"] {
            for (from, to) in [(c, "sw"), ("sw", c)] {
                let d = direction(run, from, to);
                assert_eq!(d["params"]["rate_bps"], 1e9, "{d}");
                assert_eq!(d["params"]["delay_ns"], 1_000_000);
            }
        }
        // The run's data went up its client's access link and down the port; the other
        // client's link carried nothing.
        let up = direction(run, me, "sw")["counters"]["forwarded_bytes"]
            .as_u64()
            .unwrap();
        let port = direction(run, "sw", "srv")["counters"]["forwarded_bytes"]
            .as_u64()
            .unwrap();
        let idle = direction(run, other, "sw")["counters"]["offered_packets"]
            .as_u64()
            .unwrap();
        assert!(up > 1_000_000 && port >= up * 99 / 100, "{up} {port}");
        assert_eq!(idle, 0);
        // The port is the bottleneck: TCP payload stays under its 100 Mbit/s.
        let bps = run["value"].as_f64().unwrap();
        assert!(bps > 50e6 && bps < 100e6, "{bps}");
    }
}

/// Issue 15: `capture = "link"` captures the emulated link during the step and stores
/// `nsperf trace`'s analysis with the run: the trace knows it was taken on the link, and
/// its packet count is exactly the emulator's count of packets that entered the link.
#[test]
fn a_capture_on_the_link_is_analysed_and_matches_the_emulators_counters() {
    let what = "capture = \"link\" in a plan";
    if !require_lab(what) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = "name = \"cap\"\nrepetitions = 1\n[lab]\nsites = [\"a\", \"b\"]\nrate = \"50mbit\"\nrtt = \"10ms\"\n[[step]]\nname = \"tcp\"\ntype = \"net\"\nclient = \"a\"\nserver = \"b\"\ntime = \"2s\"\ncapture = \"link\"\n";
    let x = run_plan(dir.path(), plan);
    let run = &runs(&x)[0];
    assert_eq!(run["status"], "ok", "{}", run["error"]);
    let t = &run["trace"];
    assert_eq!(
        t["summary"]["capture"]["declared_vantage"],
        "link (middle of the path)"
    );
    let link = &t["link_capture"];
    assert_eq!(link["link"], "a-b");
    let mut records = 0;
    for d in link["directions"].as_array().unwrap() {
        let r = d["recorded"]["records"].as_u64().unwrap();
        assert_eq!(r, d["counters"]["offered_packets"].as_u64().unwrap(), "{d}");
        records += r;
    }
    let packets = t["summary"]["packets"].as_u64().unwrap();
    assert!(packets > 1000, "{packets}");
    assert_eq!(packets, records, "trace packets vs the emulator's count");
    // Every packet of the run crossed the link inside the capture.
    let entered: u64 = run["lab"]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["counters"]["offered_packets"].as_u64().unwrap())
        .sum();
    assert_eq!(entered, records);
}

/// Issue 15: a step's fault schedule partitions the link for 2 s while TCP runs. The event
/// is stored with the run, the report shades it on the run's chart, and the finding names
/// the outage with the stretch of empty intervals exactly as the run's own series has it.
#[test]
fn a_partition_is_recorded_drawn_and_named_consistently_with_the_intervals() {
    let what = "schedule partition in a plan";
    if !require_lab(what) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = "name = \"split\"\nrepetitions = 1\n[lab]\nsites = [\"a\", \"b\"]\nrate = \"50mbit\"\nrtt = \"10ms\"\n[[step]]\nname = \"tcp\"\ntype = \"net\"\nclient = \"a\"\nserver = \"b\"\ntime = \"8s\"\nschedule = \"\"\"\n2s down\n4s up\n\"\"\"\n";
    let x = run_plan(dir.path(), plan);
    let run = &runs(&x)[0];
    assert_eq!(run["status"], "ok", "{}", run["error"]);
    let events = run["events"].as_array().expect("events stored");
    let down = events.iter().find(|e| e["kind"] == "down").unwrap();
    assert_eq!(down["text"], "2s down");
    assert_eq!(down["source"], "schedule");
    let (at, until) = (
        down["at_s"].as_f64().unwrap(),
        down["until_s"].as_f64().unwrap(),
    );
    assert!((until - at - 2.0).abs() < 0.1, "{at} {until}");
    assert!(
        at > 0.5 && at < 3.0,
        "the outage starts inside the run: {at}"
    );
    let f = run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "link_outage")
        .expect("an outage finding");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.starts_with("link a-b partitioned 2.0 s at ") && msg.contains("(2s down)"),
        "{msg}"
    );
    // The stretch the finding names is the run's own empty intervals, to the interval.
    let from = f["evidence"]["zero_bytes_from_s"].as_f64().unwrap();
    let len = f["evidence"]["zero_bytes_s"].as_f64().unwrap();
    let iv = run["intervals"].as_array().unwrap();
    let inside: Vec<_> = iv
        .iter()
        .filter(|i| {
            let s = i["start_s"].as_f64().unwrap();
            s >= from - 1e-3 && s < from + len - 0.5
        })
        .collect();
    let covered: f64 = inside.iter().map(|i| i["length_s"].as_f64().unwrap()).sum();
    assert!((covered - len).abs() < 0.05 * len, "{covered} {len}");
    assert!(inside.iter().all(|i| i["value"] == 0.0), "{inside:?}");
    // ... and all of them: the intervals just before and after moved data.
    let at = |t: f64| {
        iv.iter().find(|i| {
            let s = i["start_s"].as_f64().unwrap();
            (s - t).abs() < 0.1
        })
    };
    let before = at(from - inside[0]["length_s"].as_f64().unwrap());
    assert!(before.is_none_or(|i| i["value"] != 0.0), "{before:?}");
    assert!(at(from + len).is_none_or(|i| i["value"] != 0.0), "{iv:?}");
    assert!(
        len >= 1.0,
        "a 2 s partition empties at least one 1 s interval"
    );
    assert!(
        msg.contains(&format!("0 bytes moved for {len:.1} s")),
        "{msg}"
    );
    // The report shades it on the run's time-series chart.
    let html = dir.path().join("r.html");
    let db = dir.path().join("r.db");
    let mut cmd = nsperf(["report", "latest", "-o"]);
    cmd.args([html.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    run_with_limit(cmd, Duration::from_secs(60)).ok();
    let html = std::fs::read_to_string(&html).unwrap();
    let chart = html
        .split("<figure")
        .find(|f| f.contains("data-chart=\"throughput-over-time\""))
        .unwrap();
    assert!(
        chart.contains("<g class=\"outage\">"),
        "shaded on the chart"
    );
    assert!(chart.contains("down: 2s down"));
    assert!(html.contains(&msg.replace('>', "&gt;")));
}
