//! `nsperf io run --replicate` and `nsperf io peer` (issue 26): the mirror through the CLI on
//! loopback (every write on both sides, copies compared, the peer's files), its errors and
//! exit codes, and as root through a 100 Mbit/s lab link at 0, 10 and 50 ms, each protocol's
//! rate at the ceiling the user can work out:
//!
//! - B and C, one write in flight: `bs / (L + S + RTT [+ W for C])`, with `L` the local
//!   write's time (a native run's mean latency), `S` the write's serialisation at the link
//!   rate (its frame and data in 1448-byte segments of 66 header bytes each) and `W` the
//!   peer's write time (reported by the run);
//! - A: `min(link goodput, in-flight bytes / (RTT + S))`, the local writes being faster.
//!
//! The connections use cubic: BBR (this machine's default) paces each write at its
//! bandwidth estimate, which one write in flight per round trip keeps low (app-limited): at
//! 50 ms, protocol B, 64 KiB writes took 75 ms with BBR against 56 ms with cubic, side by
//! side (0.90 against 1.19 MB/s).

use crate::common;
use common::lab::{Lab, timing_lock};
use common::scratch::{Scratch, TMPFS, io_json};
use common::*;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// `nsperf io peer DIR ARGS` with its output in `log`; the port it listens on.
fn peer(dir: &str, args: &[&str], log: &Path) -> (KillOnDrop, u16) {
    let mut child = KillOnDrop(
        nsperf(["io", "peer", dir])
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let port = wait_listening_in(&mut child, log);
    (child, port)
}

/// Waits (at most 10 s) for the peer to exit after its last connection.
fn exits(p: &mut KillOnDrop) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(s)) = p.0.try_wait() {
            return s.success();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn two_jobs_mirrored_on_loopback_land_on_the_peer() {
    let local = Scratch::new(TMPFS, "mirror-local");
    let remote = Scratch::new(TMPFS, "mirror-remote");
    let log = local.0.with_extension("log");
    let (mut p, port) = peer(
        remote.path(),
        &["-l", "127.0.0.1:0", "--connections", "2", "--keep"],
        &log,
    );
    let peer_addr = format!("127.0.0.1:{port}");
    let j = io_json(&[
        local.path(),
        "-w",
        "randwrite",
        "-s",
        "4m",
        "-b",
        "64k",
        "-j",
        "2",
        "--iodepth",
        "4",
        "--fsync",
        "end",
        "--replicate",
        &peer_addr,
        "--replicate-protocol",
        "B",
        "--replicate-in-flight",
        "128k",
        "--replicate-check",
    ]);
    let _ = std::fs::remove_file(&log);
    let s = &j["summary"];
    let m = &s["replication"];
    assert_eq!(j["spec"]["replicate"]["protocol"], "B", "{j}");
    assert_eq!(m["protocol"], "B");
    assert_eq!(m["peer"], peer_addr.as_str());
    assert_eq!(m["writes"], s["ops"], "every write mirrored: {m}");
    assert_eq!(m["writes"], 128);
    assert_eq!(m["bytes"], 8 << 20);
    assert_eq!(m["flushes"], 2, "one flush per job at the end");
    assert_eq!(m["copies_equal"], true);
    assert!(exits(&mut p), "the peer exits after its 2 connections");
    // --keep: both jobs' copies stay, at their full size; the local files are gone.
    let mut sizes: Vec<u64> = std::fs::read_dir(&remote.0)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    sizes.sort();
    assert_eq!(sizes, [4 << 20, 4 << 20]);
    assert!(local.leftovers().is_empty());
}

#[test]
fn without_keep_the_peer_removes_its_copies() {
    let local = Scratch::new(TMPFS, "mirror-l2");
    let remote = Scratch::new(TMPFS, "mirror-r2");
    let log = local.0.with_extension("log");
    let (mut p, port) = peer(
        remote.path(),
        &["-l", "127.0.0.1:0", "--connections", "1"],
        &log,
    );
    let _ = std::fs::remove_file(&log);
    let j = io_json(&[
        local.path(),
        "-w",
        "seqwrite",
        "-s",
        "1m",
        "-b",
        "64k",
        "--replicate",
        &format!("127.0.0.1:{port}"),
        "--replicate-compare",
    ]);
    assert_eq!(j["summary"]["replication"]["writes"], 16);
    // The native run went first, without the peer (which served one connection only).
    let native = &j["summary"]["replication"]["native"];
    assert!(
        native["throughput_bytes_per_s"].as_f64().unwrap() > 0.0,
        "{j}"
    );
    assert!(native["lat_p99_ns"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(j["spec"]["replicate"]["protocol"], "C", "C is the default");
    assert!(exits(&mut p));
    assert_eq!(std::fs::read_dir(&remote.0).unwrap().count(), 0);
}

#[test]
fn mirror_errors_have_their_exit_codes() {
    let local = Scratch::new(TMPFS, "mirror-err");
    let dir = local.path();
    // Nothing listens on the port of a socket bound and closed.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let cases: [(&[&str], i32, &str); 5] = [
        (&["--replicate", &free], 5, "mirror peer"),
        (&["--replicate-protocol", "C"], 2, "--replicate"),
        (
            &["--replicate", &free, "--replicate-protocol", "D"],
            2,
            "unknown replication protocol",
        ),
        (
            &["--replicate", &free, "-e", "uring"],
            2,
            "psync, mmap or null",
        ),
        (
            &["--replicate", &free, "--replicate-in-flight", "0"],
            2,
            "at least 1 byte",
        ),
    ];
    for (flags, code, text) in cases {
        let mut a = vec!["io", "run", dir, "-w", "seqwrite", "-s", "1m"];
        a.extend_from_slice(flags);
        let r = run(&a);
        assert_eq!(r.code, Some(code), "{flags:?}: {}", r.stderr);
        assert!(r.stderr.contains(text), "{flags:?}: {}", r.stderr);
        assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    }
    let r = run(&["io", "run", dir, "-w", "meta", "--replicate", &free]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("record workloads"), "{}", r.stderr);
    let r = run(&["io", "peer", "/nonexistent-nsperf-dir"]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    // A peer whose directory went away refuses the copy: exit 8.
    let gone = Scratch::new(TMPFS, "mirror-gone");
    let log = local.0.with_extension("log");
    let (_p, port) = peer(gone.path(), &["-l", "127.0.0.1:0"], &log);
    let _ = std::fs::remove_file(&log);
    std::fs::remove_dir_all(&gone.0).unwrap();
    let r = run(&[
        "io",
        "run",
        dir,
        "-w",
        "seqwrite",
        "-s",
        "1m",
        "--replicate",
        &format!("127.0.0.1:{port}"),
    ]);
    assert_eq!(r.code, Some(8), "{}", r.stderr);
    assert!(r.stderr.contains("refused the copy"), "{}", r.stderr);
}

/// Bytes on the wire to carry one mirrored write of `bs` bytes: its 24-byte frame and data in
/// 1448-byte segments, each with 66 bytes of Ethernet, IPv4 and TCP (timestamps) headers.
fn wire_bytes(bs: f64) -> f64 {
    let payload = bs + 24.0;
    payload + (payload / 1448.0).ceil() * 66.0
}

/// What one mirrored run measured.
struct Mirrored {
    mb_per_s: f64,
    peer_write_ns: f64,
    /// The round trip to the peer the mirror measured at connect, s.
    rtt_s: f64,
    /// The id of the mirror's finding.
    finding: String,
}

/// One mirrored run in site a of `lab` to the peer in site b, `time` measured after `ramp`
/// (TCP's slow start out of the figures).
fn mirrored(lab: &Lab, dir: &str, protocol: &str, ramp: &str, time: &str) -> Mirrored {
    let r = lab.exec(
        "a",
        &[
            nsperf_bin(),
            "io",
            "run",
            dir,
            "-w",
            "seqwrite",
            "-s",
            "4m",
            "-b",
            "64k",
            "--ramp_time",
            ramp,
            "-t",
            time,
            "--replicate",
            "10.77.0.2:7789",
            "--replicate-protocol",
            protocol,
            "--replicate-in-flight",
            "256k",
            "--replicate-check",
            "--replicate-congestion",
            "cubic",
            "--interval",
            "500ms",
            "--json",
        ],
    );
    let j = r.ok().json();
    let s = &j["summary"];
    let m = &s["replication"];
    assert_eq!(m["copies_equal"], true, "{j}");
    mirror_intervals_agree(&j, protocol);
    Mirrored {
        mb_per_s: s["throughput_bytes_per_s"].as_f64().unwrap() / 1e6,
        peer_write_ns: m["peer_write_mean_ns"].as_f64().unwrap(),
        rtt_s: m["rtt_us"].as_f64().unwrap() / 1e6,
        finding: j["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["id"].as_str())
            .find(|id| id.starts_with("mirror_"))
            .unwrap_or_default()
            .to_string(),
    }
}

/// The mirror's intervals line up with the run's, add up to what the run wrote (within
/// the bytes in flight at either end: an ack lands in the interval it arrived in), never
/// carry more than the 100 Mbit/s link can, and wait at least the round trip for an ack.
fn mirror_intervals_agree(j: &serde_json::Value, protocol: &str) {
    let s = &j["summary"];
    let m = &s["replication"];
    let mine = m["intervals"].as_array().expect("the mirror's intervals");
    let runs: Vec<&serde_json::Value> = j["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i.get("job").is_none())
        .collect();
    assert_eq!(mine.len(), runs.len(), "{m}");
    let mut acked = 0.0;
    for (a, b) in mine.iter().zip(&runs) {
        assert_eq!(a["start_s"], b["start_s"], "{a} {b}");
        assert_eq!(a["length_s"], b["length_s"], "{a} {b}");
        acked += a["acked_bytes"].as_f64().unwrap();
        // Acks count where they arrive: an interval may hold, beyond what the link carried
        // in it, the bytes in flight at its start (and the last one the acks that came
        // after the run's end), at most 256 KiB + a block.
        let rate = a["link_bytes_per_s"].as_f64().unwrap();
        let length = a["length_s"].as_f64().unwrap();
        let edge = (256.0 * 1024.0 + 65536.0) / length;
        assert!(
            (rate - edge) * wire_bytes(65536.0) / 65536.0 * 8.0 <= 100e6 * 1.05,
            "protocol {protocol}: the mirror carried {rate} B/s in {a}"
        );
        if a["acked_writes"].as_u64().unwrap() > 0 {
            let wait = a["ack_wait_mean_ns"].as_f64().unwrap();
            let rtt = m["rtt_us"].as_f64().unwrap() * 1e3;
            assert!(
                wait >= rtt * 0.9,
                "protocol {protocol}: {wait} ns < RTT {rtt} ns: {a}"
            );
            if protocol == "C" {
                assert!(a["peer_write_mean_ns"].as_f64().unwrap() > 0.0, "{a}");
            }
        }
    }
    let bytes = s["bytes"].as_f64().unwrap();
    let slack = 256.0 * 1024.0 + 65536.0;
    assert!(
        (acked - bytes).abs() <= slack,
        "protocol {protocol}: the intervals acked {acked} bytes, the run wrote {bytes}"
    );
}

#[test]
fn each_protocol_writes_at_its_ceiling_through_a_100_mbit_link() {
    let what = "the mirror's ceilings through a lab link";
    if !require_lab(what) {
        return;
    }
    let _serial = timing_lock();
    let lab = Lab::up("mir", &["--rate", "100mbit"]);
    let local = Scratch::new(TMPFS, "mirror-lab-a");
    let remote = Scratch::new(TMPFS, "mirror-lab-b");
    let log = local.0.with_extension("log");
    let mut child = KillOnDrop(
        nsperf([
            "lab",
            "exec",
            lab.name(),
            "b",
            "--",
            nsperf_bin(),
            "io",
            "peer",
        ])
        .arg(remote.path())
        .args(["-l", "10.77.0.2:7789"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    wait_listening_in(&mut child, &log);
    let _ = std::fs::remove_file(&log);
    // The local write's time: a native run of the same writes.
    let native = io_json(&[local.path(), "-w", "seqwrite", "-s", "4m", "-b", "64k"]);
    let l_s = native["summary"]["lat_mean_ns"].as_f64().unwrap() / 1e9;
    let bs = 65536.0;
    let rate = 100e6;
    let ser = wire_bytes(bs) * 8.0 / rate;
    let goodput = bs / ser / 1e6;
    let in_flight = 4.0 * bs;
    let mut table = String::new();
    for rtt_ms in [0.0, 10.0, 50.0] {
        if rtt_ms > 0.0 {
            lab.set(&["--rtt", &format!("{rtt_ms}ms")]);
        }
        let ramp = if rtt_ms >= 50.0 { "1s" } else { "0.5s" };
        for p in ["A", "B", "C"] {
            let m = mirrored(&lab, local.path(), p, ramp, "1.5s");
            // The path's round trip as the mirror measured it: the configured one plus the
            // lab's own forwarding, which a loaded machine stretches (at "0 ms" it is all).
            let rtt = m.rtt_s;
            assert!(
                rtt >= rtt_ms / 1e3 && rtt < rtt_ms / 1e3 + 0.002,
                "RTT {rtt_ms} ms: the mirror measured {:.3} ms",
                rtt * 1e3
            );
            let ceiling = match p {
                "A" => goodput.min(in_flight / (rtt + ser) / 1e6),
                "B" => bs / (l_s + ser + rtt) / 1e6,
                _ => bs / (l_s + ser + rtt + m.peer_write_ns / 1e9) / 1e6,
            };
            let (got, finding) = (m.mb_per_s, &m.finding);
            let ratio = got / ceiling;
            table += &format!(
                "RTT {rtt_ms} ms (measured {:.3}) protocol {p}: {got:.3} MB/s, ceiling {ceiling:.3} ({ratio:.3}), {finding}\n",
                rtt * 1e3
            );
            assert!(
                (0.9..=1.1).contains(&ratio),
                "RTT {rtt_ms} ms, protocol {p}: {got:.3} MB/s against the ceiling {ceiling:.3} MB/s\n{table}"
            );
            // The finding names the part the arithmetic says is the largest.
            let expect = match (p, rtt_ms as u32) {
                ("A", 50) => "mirror_in_flight",
                ("A", _) | (_, 0) => "mirror_link",
                _ => "mirror_round_trip",
            };
            assert_eq!(finding, expect, "RTT {rtt_ms} ms, protocol {p}\n{table}");
        }
    }
    println!("{table}");
}
