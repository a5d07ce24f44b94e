//! `nsperf replay CAPTURE --against URL` (issue 25 item 2, the engine): workloads of nsperf's
//! nfs engine captured against one embedded NFSv3 server and replayed against another; in
//! a lab, captured at 5 ms and replayed over the same path.
//! Loopback tests need root and tcpdump, the lab test a lab too; else skipped with the reason.

use crate::common;
use common::lab::{io_in_site, lab_name, timing_lock};
use common::servers::{embedded_nfs, serve_nfs_in_site, url_port};
use common::*;

use std::path::Path;

use crate::replay::{busiest, read_bytes};
use crate::trace_proto::{capture, capture_whole, lab_up};

const MIB: u64 = 1 << 20;

/// `nsperf io run URL -w W -s SIZE -b 64k --iodepth 4 EXTRA` captured on loopback on `port`
/// (three tries while tcpdump drops packets); false (skipped) when it always did.
fn captured_io(pcap: &Path, url: &str, port: u16, w: &str, size: &str, extra: &[&str]) -> bool {
    for _attempt in 0..3 {
        let dropped = capture(pcap, port, || {
            let mut a = vec![
                "io",
                "run",
                url,
                "-w",
                w,
                "-s",
                size,
                "-b",
                "64k",
                "--iodepth",
                "4",
                "-q",
            ];
            a.extend_from_slice(extra);
            run(&a).ok();
        });
        if dropped == 0 {
            return true;
        }
    }
    skip(&format!(
        "replay --against {w}: tcpdump dropped packets three times"
    ));
    false
}

/// The `against` object of `nsperf replay PCAP --json --against URL EXTRA`.
fn replay_against(
    pcap: &Path,
    url: &str,
    extra: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let mut a = vec![
        "replay",
        pcap.to_str().unwrap(),
        "--json",
        "--rtt",
        "0",
        "--against",
        url,
    ];
    a.extend_from_slice(extra);
    let j = run(&a).ok().json();
    let s = j["summary"].clone();
    (s["against"].clone(), s)
}

fn op<'a>(ops: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    ops.as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == name)
        .unwrap_or_else(|| panic!("{name} in {ops}"))
}

/// Every captured operation replayed as many times; no connection with more in flight than
/// captured, and the measured one (most `op` requests, when given) as many: the replay holds a request
/// back only for its trigger or a slot, so it can have fewer in flight than the capture only
/// where the server answers sooner (the engine's 1 MiB warm-up pass, for one).
fn same_counts(a: &serde_json::Value, op: Option<&str>) {
    for o in a["ops"].as_array().unwrap() {
        assert_eq!(o["replayed_requests"], o["captured_requests"], "{o}");
        assert!(o["replayed_latency_max_ms"].as_f64().unwrap() > 0.0, "{o}");
    }
    let clients = a["clients"].as_array().unwrap();
    for c in clients {
        let (got, want) = (&c["replayed_in_flight_max"], &c["captured_in_flight_max"]);
        assert!(got.as_u64() <= want.as_u64(), "{c}");
        eprintln!(
            "connection {}: {} requests, in flight max captured {want}, replayed {got}",
            c["connection"],
            c["ops"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["captured_requests"].as_u64().unwrap())
                .sum::<u64>()
        );
    }
    let Some(op) = op else { return };
    let m = busiest(&a["clients"], op, "captured_requests");
    assert_eq!(
        m["replayed_in_flight_max"], m["captured_in_flight_max"],
        "{m}"
    );
}

/// An 8 MiB read at depth 4, a 4 MiB write at depth 4 with a COMMIT at its end and a
/// metadata burst (16 files), captured against one embedded server and replayed against
/// another: the same requests per operation, the most in flight per connection, the bytes
/// read and written, no error on the data path nor on LOOKUP/CREATE/REMOVE, the written
/// data in the replay's files (kept: `--keep`), MKDIR replayed as GETATTR.
#[test]
fn replay_against_an_embedded_server_makes_the_captured_requests() {
    let what = "replay --against on loopback";
    if !(require_root(what) && require_program("tcpdump", what)) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (src, dst) = (d.path().join("src"), d.path().join("dst"));
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&dst).unwrap();
    let (_s1, url) = embedded_nfs(&src, &[]);
    let (_s2, target) = embedded_nfs(&dst, &[]);
    let port = url_port(&url);
    run(&[
        "io", "run", &url, "-w", "seqwrite", "-s", "8m", "-b", "64k", "-q",
    ])
    .ok();

    let pcap = d.path().join("read.pcap");
    if !captured_io(&pcap, &url, port, "seqread", "8m", &[]) {
        return;
    }
    let (a, s) = replay_against(&pcap, &target, &[]);
    same_counts(&a, Some("nfs3:READ"));
    let read = op(&a["ops"], "nfs3:READ");
    assert!(
        read["captured_requests"].as_u64().unwrap() >= 8 * MIB / (64 << 10),
        "{a}"
    );
    assert_eq!(read["replayed_errors"], 0, "{a}");
    let captured_read = read_bytes(&s["clients"]);
    assert_eq!(a["read_bytes"], captured_read, "{a}");
    let depth4 = a["clients"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["captured_in_flight_max"] == 4)
        .count();
    assert!(depth4 >= 1, "the measured pass at depth 4: {a}");
    assert!(a["replayed_duration_s"].as_f64().unwrap() > 0.0);
    assert!(a["path_rtt_ms"].as_f64().unwrap() > 0.0);
    // nothing left behind without --keep
    let left: Vec<_> = std::fs::read_dir(&dst).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    eprintln!(
        "replay --against, read: captured {:.4} s, replayed {:.4} s ({:+.1} %)",
        a["captured_duration_s"].as_f64().unwrap(),
        a["replayed_duration_s"].as_f64().unwrap(),
        a["duration_error_pct"].as_f64().unwrap()
    );

    let pcap = d.path().join("write.pcap");
    if !captured_io(&pcap, &url, port, "seqwrite", "4m", &["--fsync", "end"]) {
        return;
    }
    let (a, s) = replay_against(&pcap, &target, &["--keep"]);
    // the WRITEs are answered in ~0.1 ms on loopback: a WRITE due after the previous one
    // finds it answered more often than in the capture, so fewer may be in flight
    same_counts(&a, None);
    let write = op(&a["ops"], "nfs3:WRITE");
    assert!(
        write["captured_requests"].as_u64().unwrap() >= 4 * MIB / (64 << 10),
        "{a}"
    );
    assert_eq!(write["replayed_errors"], 0, "{a}");
    let commit = op(&a["ops"], "nfs3:COMMIT");
    assert!(commit["replayed_requests"].as_u64().unwrap() >= 1, "{a}");
    assert_eq!(commit["replayed_errors"], 0, "{a}");
    let captured_written: u64 = s["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["written_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(a["written_bytes"], captured_written, "{a}");
    // kept: the file written holds 4 MiB, the WRITEs' pattern in its first and last block
    let kept = dst.join(a["directory"].as_str().unwrap());
    let big = std::fs::read_dir(&kept)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let data = std::fs::read(&big).unwrap();
    assert_eq!(data.len() as u64, 4 * MIB, "{}", big.display());
    let block = 64 << 10;
    assert!(data[..block].iter().any(|&b| b != 0));
    assert!(data[data.len() - block..].iter().any(|&b| b != 0));
    // the text report: captured beside replayed
    let p = pcap.to_str().unwrap();
    let text = run(&["replay", p, "--rtt", "0", "--against", &target])
        .ok()
        .stdout;
    assert!(
        text.contains("replayed against") && text.contains("nfs3:COMMIT"),
        "{text}"
    );
    // a metadata burst: LOOKUP, CREATE, REMOVE of the replay's names, MKDIR and RMDIR as
    // GETATTRs
    let pcap = d.path().join("meta.pcap");
    let meta = ["--files", "16", "--file-size", "4k"];
    if !captured_io(&pcap, &url, port, "meta", "64k", &meta) {
        return;
    }
    let (a, _) = replay_against(&pcap, &target, &[]);
    same_counts(&a, Some("nfs3:LOOKUP"));
    for name in ["nfs3:LOOKUP", "nfs3:CREATE", "nfs3:REMOVE"] {
        let o = op(&a["ops"], name);
        assert!(o["replayed_requests"].as_u64().unwrap() >= 16, "{o}");
        assert_eq!(o["replayed_errors"], 0, "{o}");
        assert_eq!(o["replayed_as_getattr"], false, "{o}");
    }
    assert_eq!(
        op(&a["ops"], "nfs3:MKDIR")["replayed_as_getattr"],
        true,
        "{a}"
    );
}

/// What the replay does not take: `--server` without `--lab`, one line, exit 2;
/// `--credentials` without `--against`, 2; `--against` an NFSv4 URL is taken (an empty capture is
/// then the capture's error, 3).
#[test]
fn replay_against_what_is_not_built_is_a_usage_error() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x.pcap");
    std::fs::write(&p, b"").unwrap();
    let r = run(&[
        "replay",
        p.to_str().unwrap(),
        "--against",
        "nfs://127.0.0.1/x?version=4.1",
    ]);
    assert_eq!(r.code, Some(3), "{r:?}");
    assert_eq!(r.stderr.trim().lines().count(), 1, "{r:?}");
    let r = run(&["replay", p.to_str().unwrap(), "--server", "ganesha"]);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert_eq!(r.stderr.trim().lines().count(), 1, "{r:?}");
    let r = run(&["replay", p.to_str().unwrap(), "--credentials", "x"]);
    assert_eq!(r.code, Some(2), "--credentials without --against: {r:?}");
    let r = run(&["replay", p.to_str().unwrap(), "--keep"]);
    assert_eq!(r.code, Some(2), "--keep without --against: {r:?}");
}

/// Captured at the client of a lab at 5 ms RTT with the embedded server in the server's
/// site, replayed three times from the client's site against the same server: the median
/// replayed duration within 10 % of the captured one, in all and for the measured
/// connection (the one with the most READs).
#[test]
fn replay_against_the_captured_server_over_a_5ms_lab_gives_its_duration_back() {
    let what = "replay --against in a lab";
    if !require_lab(what) || !require_program("tcpdump", what) {
        return;
    }
    // Durations compared: no other lab of this binary forwards meanwhile.
    let _serial = timing_lock();
    let lab = lab_name("rpa");
    let _g = lab_up(&lab, &["--rtt", "5ms"]);
    let d = tempfile::tempdir().unwrap();
    let export = std::fs::canonicalize(d.path()).unwrap().join("export");
    std::fs::create_dir(&export).unwrap();
    let url = serve_nfs_in_site(&lab, "b", &export, None);
    let bin = nsperf_bin();
    let io = |w: &str| {
        let a = ["-w", w, "-s", "4m", "-b", "64k", "--iodepth", "4", "-q"];
        io_in_site(&lab, "a", &url, &a).ok();
    };
    io("seqwrite");
    let pcap = d.path().join("lab.pcap");
    if !capture_whole(&format!("nsp-{lab}-a"), &pcap, what, || io("seqread")) {
        return;
    }
    let p = pcap.to_str().unwrap();
    // Three replays of the one capture; the median error of each figure is the replay's
    // own (on the shared 2-core VM one replay alone varies by ±10 %: the lab's link is a
    // userspace forwarder competing for the cores).
    let mut alls = Vec::new();
    let mut ones = Vec::new();
    for _ in 0..3 {
        let j = run(&[
            "lab",
            "exec",
            &lab,
            "a",
            "--",
            bin,
            "replay",
            p,
            "--json",
            "--rtt",
            "5",
            "--against",
            &url,
        ])
        .ok()
        .json();
        let a = &j["summary"]["against"];
        same_counts(a, Some("nfs3:READ"));
        let rtt = a["path_rtt_ms"].as_f64().unwrap();
        // the lab's 5 ms, and the NULLs' mean above it when the machine is loaded (other
        // labs of this binary run beside it)
        assert!((4.5..25.0).contains(&rtt), "path RTT {rtt} ms: {a}");
        let all = a["duration_error_pct"].as_f64().unwrap();
        // the measured pass: the connection with the most READs
        let measured = busiest(&a["clients"], "nfs3:READ", "captured_requests");
        let one = measured["duration_error_pct"].as_f64().unwrap();
        eprintln!(
            "replay --against at 5 ms: all captured {:.4} s replayed {:.4} s ({all:+.2} %); connection {} captured {:.4} s replayed {:.4} s ({one:+.2} %), model {:.4} s",
            a["captured_duration_s"].as_f64().unwrap(),
            a["replayed_duration_s"].as_f64().unwrap(),
            measured["connection"],
            measured["captured_duration_s"].as_f64().unwrap(),
            measured["replayed_duration_s"].as_f64().unwrap(),
            measured["model_at_path_rtt_s"].as_f64().unwrap(),
        );
        alls.push(all);
        ones.push(one);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[1]
    };
    let (all, one) = (median(&mut alls), median(&mut ones));
    eprintln!("replay --against at 5 ms, median errors: all {all:+.2} %, measured {one:+.2} %");
    assert!(all.abs() <= 10.0, "all connections: {alls:?} %");
    assert!(one.abs() <= 10.0, "the measured connection: {ones:?} %");
}
