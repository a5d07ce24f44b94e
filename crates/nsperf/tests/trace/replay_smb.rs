//! `nsperf replay CAPTURE --against smb://…` (issue 25 item 2, the SMB2 engine): nsperf's
//! own smb engine captured in a lab at 2 ms RTT against Samba's smbd in the server's site,
//! replayed from the client's site against the same smbd. Needs root, a lab, tcpdump and
//! smbd; else skipped with the reason.

use crate::common;
use common::lab::{io_in_site, lab_name, timing_lock};
use common::scratch::{Scratch, disk_base};
use common::servers::{Smbd, serve_smb};
use common::*;

use crate::replay::read_bytes;
use crate::trace_proto::{capture_whole, lab_up};

/// Every captured command replayed as many times with no error, the bytes read as many as
/// captured, no connection with more requests in flight than captured; the replay's
/// duration error, %.
fn check_replay(a: &serde_json::Value, captured_read: u64) -> f64 {
    for o in a["ops"].as_array().unwrap() {
        assert_eq!(o["replayed_requests"], o["captured_requests"], "{o}");
        assert_eq!(o["replayed_errors"], 0, "{o}");
        assert!(o["replayed_latency_max_ms"].as_f64().unwrap() > 0.0, "{o}");
    }
    let names: Vec<&str> = a["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["replayed_as_getattr"] == false)
        .map(|o| o["op"].as_str().unwrap())
        .collect();
    for op in ["smb2:READ", "smb2:WRITE", "smb2:FLUSH", "smb2:CREATE"] {
        assert!(names.contains(&op), "{op} replayed as itself: {names:?}");
    }
    assert_eq!(a["read_bytes"].as_u64().unwrap(), captured_read, "{a}");
    for c in a["clients"].as_array().unwrap() {
        let (got, want) = (&c["replayed_in_flight_max"], &c["captured_in_flight_max"]);
        assert!(got.as_u64() <= want.as_u64(), "{c}");
    }
    let rtt = a["path_rtt_ms"].as_f64().unwrap();
    assert!((1.8..25.0).contains(&rtt), "path RTT {rtt} ms: {a}");
    a["duration_error_pct"].as_f64().unwrap()
}

/// A sequential read of 4 MiB in 64 KiB with 4 in flight and a small write series (512
/// KiB in 16 KiB, one in flight) with a FLUSH at its end, by nsperf's smb engine, captured
/// at the client of a lab at 2 ms RTT with smbd in the server's site; replayed three times
/// against the same smbd: each time every captured command replayed as many times with no
/// error, the bytes read as captured, in flight not above the capture; the median duration
/// within 10 % of the captured one. Then through a lab of its own with smbd (`--lab
/// --server samba --check --rtt 10`): the same counts, the replay's own error at the
/// capture's RTT within 10 %, at 10 ms within 25 % of the model.
#[test]
fn replay_of_an_smb_capture_against_smbd_over_a_2ms_lab_gives_its_duration_back() {
    let what = "replay --against smb:// in a lab";
    if !require_lab(what) || !require_program("smbd", what) || !require_program("tcpdump", what) {
        return;
    }
    // Durations compared: no other lab of this binary forwards meanwhile.
    let _serial = timing_lock();
    let lab = lab_name("rsm");
    let _g = lab_up(&lab, &["--rtt", "2ms"]);
    // A scratch name of its own: replay.rs's smbd test shares one named `smb-replay` (the
    // same directory, and share, in this process) and removes it when it ends.
    let dir = Scratch::new(&disk_base(), "smb-against");
    let Smbd { url, creds, .. } = serve_smb(&lab, &dir);
    let d = tempfile::tempdir().unwrap();
    let pcap = d.path().join("smb.pcap");
    let whole = capture_whole(&format!("nsp-{lab}-a"), &pcap, what, || {
        for w in [
            &["-w", "seqread", "-s", "4m", "-b", "64k", "--iodepth", "4"][..],
            &[
                "-w",
                "seqwrite",
                "-s",
                "512k",
                "-b",
                "16k",
                "--iodepth",
                "1",
                "--fsync",
                "end",
            ],
        ] {
            let mut a = w.to_vec();
            a.extend_from_slice(&["-q", "--credentials", &creds]);
            io_in_site(&lab, "a", &url, &a).ok();
        }
    });
    if !whole {
        return;
    }
    let p = pcap.to_str().unwrap();
    let bin = nsperf_bin();
    let mut errs = Vec::new();
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
            "2",
            "--against",
            &url,
            "--credentials",
            &creds,
        ])
        .ok()
        .json();
        let s = &j["summary"];
        let a = &s["against"];
        let captured_read = read_bytes(&s["clients"]);
        assert!(captured_read >= 4 << 20, "{}", s["clients"]);
        let e = check_replay(a, captured_read);
        eprintln!(
            "replay --against smb at 2 ms: captured {:.4} s, replayed {:.4} s ({e:+.2} %), {} connection(s)",
            a["captured_duration_s"].as_f64().unwrap(),
            a["replayed_duration_s"].as_f64().unwrap(),
            a["clients"].as_array().unwrap().len()
        );
        errs.push(e);
    }
    let mut sorted = errs.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[1];
    eprintln!("replay --against smb at 2 ms, median error {median:+.2} % ({errs:?})");
    assert!(median.abs() <= 10.0, "duration errors {errs:?} %");
    // Through a lab of its own with smbd (`--lab --server samba`): at the capture's RTT
    // (`--check`), then at 10 ms beside the model.
    let j = run(&[
        "replay", p, "--json", "--lab", "--server", "samba", "--check", "--rtt", "10",
    ])
    .ok()
    .json();
    let s = &j["summary"];
    let l = &s["lab"];
    assert_eq!(l["server"], "samba", "{l}");
    let captured_read = read_bytes(&s["clients"]);
    let check = &l["check"];
    let own = check_replay(&check["replay"], captured_read);
    let at10 = &l["runs"][0];
    check_replay(&at10["replay"], captured_read);
    let vs_model = at10["replay_vs_model_pct"].as_f64().unwrap();
    eprintln!(
        "replay --lab --server samba: the replay's own error at the capture's RTT {own:+.2} %; at 10 ms replayed {:.4} s, model {:.4} s ({vs_model:+.2} %)",
        at10["replayed_duration_s"].as_f64().unwrap(),
        at10["model_duration_s"].as_f64().unwrap()
    );
    assert!(own.abs() <= 10.0, "the replay's own error {own} %");
    assert!(
        vs_model.abs() <= 25.0,
        "at 10 ms against the model: {vs_model} %"
    );
    // `--window 64k`: the lab's routes bound it each way (45 segments of 1448 bytes), so
    // the read's connection moves at most a window a round trip.
    let j = run(&[
        "replay", p, "--json", "--lab", "--server", "samba", "--rtt", "10", "--window", "64k",
    ])
    .ok()
    .json();
    let r = &j["summary"]["lab"]["runs"][0];
    assert_eq!(r["window_bytes"], 45 * 1448, "{r}");
    check_replay(&r["replay"], captured_read);
    let path = r["replay"]["path_rtt_ms"].as_f64().unwrap() / 1e3;
    let read = crate::replay::busiest(&r["replay"]["clients"], "smb2:READ", "captured_requests");
    let (bytes, took) = (
        read["read_bytes"].as_f64().unwrap(),
        read["replayed_duration_s"].as_f64().unwrap(),
    );
    let floor = (bytes / (45.0 * 1448.0) - 1.0) * path * 0.95;
    eprintln!(
        "replay --lab --server samba --window 64k at 10 ms: the read's connection {bytes} bytes in {took:.4} s (the window's floor {floor:.4} s), all {:.4} s against the model's {:.4} s",
        r["replayed_duration_s"].as_f64().unwrap(),
        r["model_duration_s"].as_f64().unwrap()
    );
    assert!(
        took >= floor,
        "{took} s under the window's floor {floor} s: {read}"
    );
}
