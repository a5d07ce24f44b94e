//! `nsperf server` and `nsperf net` through the real binary on loopback: every mode, the
//! agreement of both ends' figures, and the documented error exits.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `nsperf server` on 127.0.0.1 with extra args; waits until it accepts.
fn server(extra: &[&str]) -> (KillOnDrop, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut args = vec!["server", "-B", "127.0.0.1", "-p", &p];
    args.extend_from_slice(extra);
    let child = nsperf(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server");
    let guard = KillOnDrop(child);
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (guard, port)
}

fn net(port: u16, extra: &[&str]) -> Run {
    let p = port.to_string();
    let mut args = vec!["net", "127.0.0.1", "-p", &p];
    args.extend_from_slice(extra);
    run(&args)
}

fn summary(j: &serde_json::Value) -> &serde_json::Value {
    &j["summary"]
}

#[test]
fn loopback_json_has_the_schema() {
    let r = run(&["net", "--loopback", "-t", "1", "-i", "250ms", "--json"]).ok();
    let j = r.json();
    assert_eq!(j["schema_version"], 1);
    assert_eq!(j["command"], "net");
    let s = summary(&j);
    assert!(s["throughput_bps"].as_f64().unwrap() > 1e8, "{s}");
    assert!(
        s["peak_interval_bps"].as_f64().unwrap() >= s["throughput_bps"].as_f64().unwrap() * 0.9
    );
    assert_eq!(s["sent_bytes"], s["received_bytes"]);
    assert!(s["retransmits"].is_u64());
    let iv = j["intervals"].as_array().unwrap();
    assert!(iv.len() >= 4, "{iv:?}");
    assert!(iv.iter().any(|i| i["stream"].is_null()));
    assert!(iv.iter().any(|i| i["sender_tcp"]["rtt_us"].is_u64()));
    assert!(
        iv.iter()
            .all(|i| i["start_s"].is_f64() && i["length_s"].is_f64())
    );
    let roles: Vec<&str> = j["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["client", "server"]);
    let cpu = j["cpu"].as_array().unwrap();
    assert!(cpu.iter().any(|c| c["role"] == "server"));
    assert!(cpu.iter().any(|c| c["role"] == "client"));
}

#[test]
fn loopback_human_output_has_table_and_summary() {
    let r = run(&["net", "--loopback", "-t", "1"]).ok();
    assert!(
        r.stdout.contains("throughput (receiver, after warm-up)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("interval s"), "{}", r.stdout);
}

#[test]
fn tcp_bytes_sent_equal_bytes_received_every_direction() {
    let (_s, port) = server(&[]);
    for extra in [
        &["-n", "64m"][..],
        &["-n", "64m", "-R"],
        &["-n", "32m", "--bidir", "-P", "2"],
        &["-t", "1", "-P", "4"],
        &["-t", "1", "-R", "-Z"],
        &["-t", "1", "-l", "1k", "-N", "-w", "256k"],
    ] {
        let mut args = extra.to_vec();
        args.push("--json");
        let j = net(port, &args).ok().json();
        let s = summary(&j);
        assert_eq!(s["sent_bytes"], s["received_bytes"], "{extra:?}: {s}");
        assert!(s["received_bytes"].as_u64().unwrap() > 0, "{extra:?}");
        if extra.contains(&"-n") {
            let per_dir = if extra.contains(&"--bidir") { 2 } else { 1 };
            let n = if extra.contains(&"64m") {
                64 << 20
            } else {
                32 << 20
            };
            assert_eq!(s["sent_bytes"].as_u64().unwrap(), n * per_dir, "{extra:?}");
        }
        if extra.contains(&"--bidir") {
            assert!(s["up"]["received_bytes"].as_u64().unwrap() > 0);
            assert!(s["down"]["received_bytes"].as_u64().unwrap() > 0);
        }
        if extra.contains(&"-R") {
            assert!(s["down"].is_object() && s["up"].is_null(), "{s}");
        }
        if extra.contains(&"-w") {
            // The kernel reports double the request (its bookkeeping share).
            assert_eq!(s["up"]["receiver_rcvbuf_bytes"], 512 * 1024, "{s}");
        }
    }
}

#[test]
fn rr_and_sweep() {
    let (_s, port) = server(&[]);
    let j = net(port, &["--rr", "1", "-t", "1", "--json"]).ok().json();
    let s = summary(&j);
    assert!(s["transactions_per_s"].as_f64().unwrap() > 100.0, "{s}");
    let p50 = s["lat_p50_ns"].as_u64().unwrap();
    assert!(p50 > 0 && p50 <= s["lat_p99_ns"].as_u64().unwrap());
    assert!(s["lat_p999_ns"].as_u64().unwrap() >= s["lat_p99_ns"].as_u64().unwrap());
    let j = net(port, &["--sweep", "1..256k", "-t", "1", "--json"])
        .ok()
        .json();
    let pts = summary(&j)["sweep"].as_array().unwrap().clone();
    assert!(pts.len() > 20, "{pts:?}");
    assert!(pts.iter().any(|p| p["size_bytes"] == 16384));
    assert!(pts.iter().any(|p| p["size_bytes"] == 16387));
    assert!(pts.iter().all(|p| p["round_trips"].as_u64().unwrap() >= 3));
    assert!(
        j["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "sweep_saturation")
    );
}

#[test]
fn psk_right_wrong_and_missing() {
    let dir = std::env::temp_dir().join(format!("nsperf-psk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key");
    let wrong = dir.join("wrong");
    std::fs::write(&key, "s3cret\n").unwrap();
    std::fs::write(&wrong, "other").unwrap();
    let (_s, port) = server(&["--psk-file", key.to_str().unwrap()]);
    net(port, &["-t", "0.3", "--psk-file", key.to_str().unwrap()]).ok();
    let r = net(port, &["-t", "0.3", "--psk-file", wrong.to_str().unwrap()]);
    assert_eq!(r.code, Some(6), "{}", r.stderr);
    assert!(r.stderr.contains("authentication failed"), "{}", r.stderr);
    let r = net(port, &["-t", "0.3"]);
    assert_eq!(r.code, Some(6), "{}", r.stderr);
    assert!(r.stderr.contains("--psk-file"), "{}", r.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_have_their_exit_codes() {
    // Refused port.
    let r = net(free_port(), &["-t", "1"]);
    assert_eq!(r.code, Some(5), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    // Unknown host.
    let r = run(&["net", "no-such-host.invalid", "-t", "1"]);
    assert_eq!(r.code, Some(5), "{}", r.stderr);
    // Bad values.
    let r = run(&["net", "--loopback", "-t", "soon"]);
    assert_eq!(r.code, Some(2));
    let r = run(&["net", "--loopback", "--sweep", "9..3"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    // Over the server's caps.
    let (_s, port) = server(&["--max-streams", "2", "--max-time", "5"]);
    let r = net(port, &["-P", "4", "-t", "1"]);
    assert_eq!(r.code, Some(8), "{}", r.stderr);
    assert!(r.stderr.contains("--max-streams"), "{}", r.stderr);
    let r = net(port, &["-t", "30"]);
    assert_eq!(r.code, Some(8), "{}", r.stderr);
    // Unknown congestion control: the list of available ones.
    let r = run(&["net", "--loopback", "-t", "1", "-C", "nosuchcc"]);
    assert_eq!(r.code, Some(9), "{}", r.stderr);
    assert!(r.stderr.contains("available: "), "{}", r.stderr);
    assert!(
        r.stderr.contains("cubic") || r.stderr.contains("reno"),
        "{}",
        r.stderr
    );
}

#[test]
fn version_mismatch_is_exit_7() {
    // A fake server that answers in protocol version 99.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 12];
        let _ = s.read_exact(&mut b);
        let body = br#"{"type":"welcome","software":"9"}"#;
        let mut f = b"NSPF".to_vec();
        f.extend_from_slice(&99u16.to_be_bytes());
        f.extend_from_slice(&[3, 0]);
        f.extend_from_slice(&(body.len() as u32).to_be_bytes());
        f.extend_from_slice(body);
        let _ = s.write_all(&f);
        std::thread::sleep(Duration::from_millis(300));
    });
    let r = net(port, &["-t", "1"]);
    assert_eq!(r.code, Some(7), "{}", r.stderr);
    assert!(r.stderr.contains("version"), "{}", r.stderr);
    t.join().unwrap();
}

#[test]
fn hostile_client_is_dropped_and_others_served() {
    let (_s, port) = server(&[]);
    // Garbage, a huge length, and a half frame that never completes.
    let mut a = TcpStream::connect(("127.0.0.1", port)).unwrap();
    a.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut b = TcpStream::connect(("127.0.0.1", port)).unwrap();
    b.write_all(&[b'N', b'S', b'P', b'F', 0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff])
        .unwrap();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(b"NSPF\x00\x01").unwrap();
    let j = net(port, &["-t", "0.5", "--json"]).ok().json();
    assert!(summary(&j)["received_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn one_off_server_exits_after_one_test() {
    let port = free_port();
    let p = port.to_string();
    let child = nsperf(["server", "-B", "127.0.0.1", "-p", &p, "--one-off"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut g = KillOnDrop(child);
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    // The probe connection above sent nothing; the server drops it after its greeting
    // timeout, so run the real test now.
    net(port, &["-t", "0.3"]).ok();
    let t0 = Instant::now();
    loop {
        if let Some(st) = g.0.try_wait().unwrap() {
            assert!(st.success());
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "one-off server still running"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn json_stream_and_csv() {
    let r = run(&[
        "net",
        "--loopback",
        "-t",
        "1",
        "-i",
        "250ms",
        "--json-stream",
    ])
    .ok();
    let lines: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert!(lines.iter().filter(|l| l["event"] == "interval").count() >= 3);
    assert_eq!(lines.last().unwrap()["event"], "result");
    let r = run(&["net", "--loopback", "-t", "0.5", "--csv"]).ok();
    let mut it = r.stdout.lines();
    assert!(it.next().unwrap().starts_with("start_s,length_s,stream"));
    assert!(it.count() >= 2);
}
