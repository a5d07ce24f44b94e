//! `nsperf replay CAPTURE` (issue 25, its first step): a known workload of nsperf's own nfs
//! engine against its embedded NFSv3 server, captured on loopback, and what replay extracts
//! from it checked against what was done and against tshark; the model at the capture's own
//! conditions against the captured duration; and at 50 ms against the hand computation.
//! Captured with `trace_proto`'s `capture` (tcpdump in immediate mode).
//! Skipped with a printed reason without root, tcpdump or tshark.

use crate::common;
use common::servers::{embedded_nfs, url_port};
use common::*;

use std::path::Path;

use crate::trace_proto::{capture, tshark_srt};

use nsperf_trace::testkit::pcap;
use nsperf_trace::testkit::sim::{PathSim, simulate};

const MIB: u64 = 1 << 20;
/// The file read: 8 MiB in 64 KiB READs.
const SIZE: u64 = 8 * MIB;
const BLOCK: u64 = 64 << 10;

/// The client connection of the measured pass: the one with the most 64 KiB READs (the
/// engine warms the server's cache first on a connection of its own, 1 MiB at a time).
fn measured(j: &serde_json::Value) -> serde_json::Value {
    let reads = |c: &serde_json::Value| {
        c["ops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["op"] == "nfs3:READ")
            .map_or(0, |o| o["requests"].as_u64().unwrap())
    };
    j["clients"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|c| reads(c))
        .expect("a client")
        .clone()
}

/// One seqread of [`SIZE`] at `depth`, captured and replayed: the counts against what was
/// done and against tshark, the model against the captured duration and the hand
/// computation at 50 ms. Returns the model's error at the capture, %.
fn read_at_depth(url: &str, port: u16, dir: &Path, depth: u32) -> Option<f64> {
    let pcap = dir.join(format!("read-depth{depth}.pcap"));
    let depth_s = depth.to_string();
    let work = || {
        run(&[
            "io",
            "run",
            url,
            "-w",
            "seqread",
            "-s",
            "8m",
            "-b",
            "64k",
            "--iodepth",
            &depth_s,
            "-q",
        ])
        .ok();
    };
    let mut dropped = 0;
    for _attempt in 0..3 {
        dropped = capture(&pcap, port, work);
        if dropped == 0 {
            break;
        }
    }
    if dropped > 0 {
        skip(&format!(
            "replay at depth {depth}: tcpdump dropped {dropped} packets three times"
        ));
        return None;
    }
    let p = pcap.to_str().unwrap();
    let j = run(&["replay", p, "--json", "--rtt", "0,50"]).ok().json();
    assert_eq!(j["command"], "replay");
    assert_eq!(j["spec"]["rtt_axis_ms"], serde_json::json!([0.0, 50.0]));
    let j = j["summary"].clone();
    assert!(j["not_built"].as_str().unwrap().contains("not built yet"));
    let c = measured(&j);
    let read = c["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == "nfs3:READ")
        .unwrap()
        .clone();
    // what was done: SIZE / BLOCK READs of BLOCK bytes, `depth` in flight at most
    assert_eq!(read["requests"], SIZE / BLOCK, "{c}");
    assert_eq!(read["errors"], 0, "{c}");
    assert_eq!(c["read_bytes"], SIZE, "{c}");
    assert_eq!(c["written_bytes"], 0, "{c}");
    assert_eq!(c["in_flight_max"], depth, "{c}");
    assert_eq!(c["file_count"], 1, "{c}");
    assert_eq!(c["files"][0]["extent_bytes"], SIZE, "{c}");
    let mean = c["in_flight_mean"].as_f64().unwrap();
    assert!(mean >= 1.0 && mean <= f64::from(depth), "{c}");
    if depth == 1 {
        // one at a time: each READ but the first waited for the previous reply
        assert_eq!(c["dependent"], SIZE / BLOCK - 1, "{c}");
    }
    // against tshark: every READ of the capture, all connections
    let all: u64 = j["clients"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["ops"].as_array().unwrap().iter())
        .filter(|o| o["op"] == "nfs3:READ")
        .map(|o| o["requests"].as_u64().unwrap())
        .sum();
    let tshark = tshark_srt(&pcap, port, 3)
        .get("READ")
        .map_or(0, |s| s.calls);
    assert_eq!(all, tshark, "READs against tshark -z rpc,srt");
    // the model at the capture's own conditions: within 20 % of the captured duration
    let err = c["model_error_pct"].as_f64().unwrap();
    assert!(err.abs() <= 20.0, "model at the capture: {err} %\n{c}");
    let captured = c["captured_duration_s"].as_f64().unwrap();
    let model = c["model_at_capture_s"].as_f64().unwrap();
    assert!(captured > 0.0 && model > 0.0, "{c}");
    // at 50 ms: 128 READs, `depth` at a time, each at least one round trip; at most that
    // plus the captured duration (the server's and client's times, as captured)
    let at50 = &c["predictions"][1];
    assert_eq!(at50["rtt_ms"], 50.0);
    let rounds = (SIZE / BLOCK).div_ceil(u64::from(depth)) as f64;
    let d = at50["duration_s"].as_f64().unwrap();
    assert!(
        d >= rounds * 0.050 && d <= rounds * 0.050 + captured + 0.01,
        "{d} s for {rounds} rounds at 50 ms\n{c}"
    );
    assert_eq!(at50["bound"], "latency", "{c}");
    let at0 = &c["predictions"][0];
    assert!((at0["duration_s"].as_f64().unwrap() - model).abs() <= captured * 0.2 + 1e-3);
    // the text report says the same, and what is not built
    let text = run(&["replay", p, "--rtt", "0,50"]).ok().stdout;
    assert!(
        text.contains("nfs3:READ") && text.contains("latency-bound from here"),
        "{text}"
    );
    assert!(text.contains("not built yet"), "{text}");
    eprintln!(
        "replay depth {depth}: captured {captured:.4} s, model {model:.4} s ({err:+.2} %), at 50 ms {d:.3} s"
    );
    Some(err)
}

/// A sequential read at depth 4 and at depth 1 through nsperf's embedded NFSv3 server.
#[test]
fn replay_extracts_a_known_nfs3_read_and_the_model_gives_its_duration_back() {
    let what = "replay of an NFSv3 capture";
    if !(require_root(what) && require_program("tcpdump", what) && require_program("tshark", what))
    {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let export = d.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let (_server, url) = embedded_nfs(&export, &[]);
    let port = url_port(&url);
    run(&[
        "io", "run", &url, "-w", "seqwrite", "-s", "8m", "-b", "64k", "-q",
    ])
    .ok();
    // the engine names its file after the workload: the read finds the one written
    for depth in [4, 1] {
        if read_at_depth(&url, port, d.path(), depth).is_none() {
            return;
        }
    }
}

/// One-line errors with their exit codes: a capture that cannot be read (3), a capture with
/// no storage request (11), a bad flag value (2).
#[test]
fn replay_errors_have_their_exit_codes() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing.pcap");
    let r = run(&["replay", missing.to_str().unwrap()]);
    assert_eq!(r.code, Some(3), "{r:?}");
    assert_eq!(r.stderr.trim().lines().count(), 1, "{r:?}");
    let plain = d.path().join("plain-tcp.pcap");
    let frames = simulate(&PathSim {
        bytes: 256 << 10,
        ..PathSim::default()
    });
    std::fs::write(&plain, pcap(false, true, 1, &frames)).unwrap();
    let r = run(&["replay", plain.to_str().unwrap()]);
    assert_eq!(r.code, Some(11), "{r:?}");
    assert!(r.stderr.contains("no NFS or SMB2 request"), "{r:?}");
    assert_eq!(r.stderr.trim().lines().count(), 1, "{r:?}");
    for bad in [
        &["--rtt", "-1"][..],
        &["--rtt", "soon"],
        &["--rate", "fast"],
        &["--window", "0"],
    ] {
        let mut a = vec!["replay", plain.to_str().unwrap()];
        a.extend_from_slice(bad);
        let r = run(&a);
        assert_eq!(r.code, Some(2), "{bad:?}: {r:?}");
    }
}
