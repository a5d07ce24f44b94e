//! `nsperf server` and `nsperf net` through the real binary on loopback: every mode, the
//! agreement of both ends' figures, and the documented error exits.

use crate::common;
use common::lab::{Lab, lab_name};
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
    let mut args = vec!["-B", "127.0.0.1"];
    args.extend_from_slice(extra);
    spawn_server_quiet(&args)
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
fn rr_latency_per_interval() {
    let (_s, port) = server(&[]);
    let j = net(
        port,
        &["--rr", "64/1k", "-P", "2", "-t", "2", "-i", "0.5", "--json"],
    )
    .ok()
    .json();
    let iv = j["intervals"].as_array().unwrap();
    let aggs: Vec<_> = iv.iter().filter(|i| i["stream"].is_null()).collect();
    assert!(aggs.len() >= 3, "{aggs:?}");
    let (mut counted, mut done) = (0u64, 0u64);
    for a in &aggs {
        let l = &a["latency"];
        let (p50, p99, max) = (
            l["p50_ns"].as_u64().unwrap(),
            l["p99_ns"].as_u64().unwrap(),
            l["max_ns"].as_u64().unwrap(),
        );
        assert!(0 < p50 && p50 <= p99 && p99 <= max, "{a}");
        let (c, m) = (
            l["count"].as_u64().unwrap(),
            a["messages"].as_u64().unwrap(),
        );
        // Counted a moment apart: a transaction can fall on either side of a tick.
        assert!(
            c.abs_diff(m) <= 4,
            "interval latency count {c} vs transactions {m}"
        );
        counted += c;
        done += m;
    }
    assert_eq!(
        counted, done,
        "every transaction is in one interval's latency"
    );
    // Per stream too.
    assert!(
        iv.iter()
            .filter(|i| !i["stream"].is_null())
            .all(|i| i["latency"]["count"].as_u64().is_some())
    );
    let csv = net(port, &["--rr", "1", "-t", "1", "--csv"]).ok().stdout;
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = head.iter().position(|h| *h == "lat_p99_ns").unwrap();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    assert!(row[col].parse::<u64>().unwrap() > 0, "{csv}");
}

#[test]
fn awake_is_held_on_both_ends_or_reported() {
    let (_s, port) = server(&[]);
    let j = net(port, &["--rr", "1", "-t", "1", "--awake", "--json"])
        .ok()
        .json();
    let s = summary(&j);
    let ids: Vec<&str> = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(j["spec"]["awake"], true);
    assert!(!ids.contains(&"idle_wait"), "{ids:?}");
    // Root can open /dev/cpu_dma_latency (where the kernel has PM QoS); anyone else gets the
    // finding instead of a silent no-op.
    let can = common::is_root() && std::path::Path::new("/dev/cpu_dma_latency").exists();
    assert_eq!(s["client_cpu_awake"], can, "{s}");
    assert_eq!(s["server_cpu_awake"], can, "{s}");
    assert_eq!(ids.contains(&"awake_not_held"), !can, "{ids:?}");
    // A server may refuse: the client still holds its own, the report names the server.
    let (_d, port) = server(&["--deny-awake"]);
    let j = net(port, &["--rr", "1", "-t", "1", "--awake", "--json"])
        .ok()
        .json();
    let s = summary(&j);
    assert_eq!(s["client_cpu_awake"], can, "{s}");
    assert_eq!(s["server_cpu_awake"], false, "{s}");
    let f = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "awake_not_held")
        .unwrap_or_else(|| panic!("no awake_not_held: {}", j["findings"]));
    assert!(f["message"].as_str().unwrap().contains("server"), "{f}");
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
    let (mut g, port) = spawn_server_quiet(&["-B", "127.0.0.1", "--one-off"]);
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

#[test]
fn udp_forward_reverse_and_rate() {
    let (_s, port) = server(&[]);
    for extra in [
        &["-b", "200mbit"][..],
        &["-R", "-b", "200mbit"],
        &["--no-offload", "-b", "100mbit", "-l", "8000"],
    ] {
        let mut args = vec!["-u", "-t", "1", "--json"];
        args.extend_from_slice(extra);
        let j = net(port, &args).ok().json();
        let u = &summary(&j)["udp"];
        let sent = u["sent_datagrams"].as_u64().unwrap();
        let got = u["received_datagrams"].as_u64().unwrap();
        assert!(sent > 1000, "{extra:?}: {u}");
        assert_eq!(sent, got + u["lost_datagrams"].as_u64().unwrap(), "{u}");
        // Paced: within 25 % of the target rate.
        let target = if extra.contains(&"100mbit") {
            100e6
        } else {
            200e6
        };
        let bps = summary(&j)["throughput_bps"].as_f64().unwrap();
        assert!((bps - target).abs() < 0.25 * target, "{extra:?}: {bps}");
        assert!(u["jitter_ns"].as_f64().unwrap() >= 0.0);
    }
}

/// Datagrams lost by nsperf's count are exactly those the receiving kernel dropped for want
/// of buffer (a tiny -w; without GRO the kernel counts each datagram).
#[test]
fn udp_loss_equals_kernel_drops_with_tiny_buffer() {
    let j = run(&[
        "net",
        "--loopback",
        "-u",
        "--no-offload",
        "-b",
        "2g",
        "-w",
        "4k",
        "-t",
        "1",
        "--json",
    ])
    .ok()
    .json();
    let u = &summary(&j)["udp"];
    let lost = u["lost_datagrams"].as_u64().unwrap();
    assert!(lost > 100, "the tiny buffer should drop some: {u}");
    assert_eq!(lost, u["kernel_drops"].as_u64().unwrap(), "{u}");
    // Issue 11: the loss is placed at the receiver's socket buffer.
    assert_eq!(u["lost_at"], "receiver_buffer", "{u}");
    let f = j["findings"].as_array().unwrap();
    let l = f.iter().find(|f| f["id"] == "udp_loss").expect("udp_loss");
    assert!(
        l["message"]
            .as_str()
            .unwrap()
            .contains("lost at the receiver: the receiving socket's buffer overflowed"),
        "{l}"
    );
}

fn peak_rss_bytes(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// 200 parallel streams, then 50 clients at once against one server: no error, and the
/// server's peak RSS stays under 200 MiB.
#[test]
fn two_hundred_streams_and_fifty_clients_in_bounded_memory() {
    let (s, port) = server(&["--max-streams", "256", "--max-clients", "64"]);
    let j = net(port, &["-P", "200", "-t", "2", "--json"]).ok().json();
    let sm = summary(&j);
    assert_eq!(sm["sent_bytes"], sm["received_bytes"]);
    let streams: std::collections::BTreeSet<u64> = j["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["stream"].as_u64())
        .collect();
    assert_eq!(streams.len(), 200);
    let p = port.to_string();
    let kids: Vec<KillOnDrop> = (0..50)
        .map(|i| {
            let rev = if i % 2 == 0 { "-R" } else { "-N" };
            KillOnDrop(
                nsperf([
                    "net",
                    "127.0.0.1",
                    "-p",
                    &p,
                    "-t",
                    "3",
                    "-l",
                    "16k",
                    rev,
                    "--json",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
            )
        })
        .collect();
    for mut k in kids {
        let st = k.0.wait().unwrap();
        let mut err = String::new();
        let _ = k.0.stderr.take().unwrap().read_to_string(&mut err);
        assert!(st.success(), "a client failed: {err}");
    }
    let rss = peak_rss_bytes(s.0.id());
    eprintln!("server peak RSS: {} MiB", rss >> 20);
    assert!(rss < 200 << 20, "server peak RSS {} MiB", rss >> 20);
}

/// Two network namespaces joined by a veth pair, named per test run so parallel runs do not
/// collide; removed on drop even when the test fails.
struct NetnsPair {
    a: String,
    b: String,
}

impl NetnsPair {
    fn new(tag: &str) -> Option<NetnsPair> {
        let id = format!("{}{}", std::process::id() % 100_000, tag);
        let pair = NetnsPair {
            a: format!("nsp-net-{id}-a"),
            b: format!("nsp-net-{id}-b"),
        };
        let va = format!("nvA{id}");
        let vb = format!("nvB{id}");
        let sh = |args: &[&str]| {
            std::process::Command::new("ip")
                .args(args)
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        let ok = sh(&["netns", "add", &pair.a])
            && sh(&["netns", "add", &pair.b])
            && sh(&["link", "add", &va, "type", "veth", "peer", "name", &vb])
            && sh(&["link", "set", &va, "netns", &pair.a])
            && sh(&["link", "set", &vb, "netns", &pair.b])
            && sh(&["-n", &pair.a, "addr", "add", "10.199.0.1/24", "dev", &va])
            && sh(&["-n", &pair.b, "addr", "add", "10.199.0.2/24", "dev", &vb])
            && sh(&["-n", &pair.a, "link", "set", &va, "up"])
            && sh(&["-n", &pair.b, "link", "set", &vb, "up"])
            && sh(&["-n", &pair.a, "link", "set", "lo", "up"])
            && sh(&["-n", &pair.b, "link", "set", "lo", "up"]);
        if ok { Some(pair) } else { None }
    }

    fn exec(&self, ns: &str, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new("ip");
        c.args(["netns", "exec", ns, nsperf_bin()]).args(args);
        c
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for n in [&self.a, &self.b] {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", n])
                .status();
        }
    }
}

#[test]
fn across_two_namespaces_over_veth() {
    if !require_root("veth namespace test") || !require_program("ip", "veth namespace test") {
        return;
    }
    let pair = NetnsPair::new("v").expect("create namespaces and veth");
    let srv = pair
        .exec(&pair.a, &["server", "-B", "10.199.0.1", "-p", "5301"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _srv = KillOnDrop(srv);
    std::thread::sleep(Duration::from_millis(300));
    let client = |extra: &[&str]| {
        let mut args = vec!["net", "10.199.0.1", "-p", "5301", "--json"];
        args.extend_from_slice(extra);
        run_with_limit(pair.exec(&pair.b, &args), Duration::from_secs(60))
            .ok()
            .json()
    };
    for extra in [
        &["-t", "1"][..],
        &["-t", "1", "-R"],
        &["-t", "1", "--bidir", "-P", "2"],
        &["-t", "1", "-P", "4"],
        &["-n", "32m"],
    ] {
        let j = client(extra);
        let s = summary(&j);
        assert_eq!(s["sent_bytes"], s["received_bytes"], "{extra:?}: {s}");
        assert!(
            s["throughput_bps"].as_f64().unwrap() > 1e8,
            "{extra:?}: {s}"
        );
    }
    let j = client(&["-u", "-b", "300mbit", "-t", "1"]);
    let u = &summary(&j)["udp"];
    assert!(u["received_datagrams"].as_u64().unwrap() > 1000, "{u}");
    let j = client(&["--rr", "64/1k", "-t", "1"]);
    assert!(summary(&j)["transactions_per_s"].as_f64().unwrap() > 100.0);
    let j = client(&["--sweep", "1..64k", "-t", "1"]);
    assert!(!summary(&j)["sweep"].as_array().unwrap().is_empty());
}

/// End to end over the lab's emulated T3 (45 Mbit/s, 50 ms RTT): a 64 KiB socket buffer
/// caps TCP near 64 KiB / 50 ms = 10.5 Mbit/s, and the report says so.
#[test]
fn window_limited_finding_over_emulated_wan() {
    if !require_root("window-limited lab test") || !require_program("ip", "window-limited lab test")
    {
        return;
    }
    let name = lab_name("nw");
    run(&[
        "lab", "up", &name, "--sites", "a,b", "--rate", "45mbit", "--rtt", "50ms",
    ])
    .ok();
    let _lab = Lab(name.clone());
    let srv = nsperf([
        "lab",
        "exec",
        &name,
        "b",
        "--",
        nsperf_bin(),
        "server",
        "--one-off",
        "-q",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let _srv = KillOnDrop(srv);
    std::thread::sleep(Duration::from_millis(500));
    let r = run(&[
        "lab",
        "exec",
        &name,
        "a",
        "--",
        nsperf_bin(),
        "net",
        "10.77.0.2",
        "-t",
        "4",
        "-O",
        "1",
        "-w",
        "64k",
        "--json",
    ])
    .ok();
    let j = r.json();
    let s = summary(&j);
    let bps = s["throughput_bps"].as_f64().unwrap();
    assert!(
        bps > 4e6 && bps < 14e6,
        "expected about 10.5 Mbit/s, got {bps}"
    );
    let f = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "window_limited")
        .unwrap_or_else(|| panic!("no window_limited finding: {}", j["findings"]))
        .clone();
    let rtt_us = f["evidence"]["rtt_us"].as_f64().unwrap();
    assert!((45_000.0..80_000.0).contains(&rtt_us), "{f}");
    assert!(f["message"].as_str().unwrap().contains("64 KiB"), "{f}");
}

/// iperf3's habits (issue #14): `-u` without `-b` sends 1 Mbit/s and says so, `-b 0` is
/// unlimited, `-b` paces TCP (SO_MAX_PACING_RATE), `-J` is `--json`.
#[test]
fn udp_default_rate_tcp_pacing_and_dash_j() {
    let j = run(&["net", "--loopback", "-u", "-t", "1", "-J"])
        .ok()
        .json();
    assert_eq!(j["spec"]["rate_bps"], 1e6);
    let bps = summary(&j)["throughput_bps"].as_f64().unwrap();
    assert!((bps - 1e6).abs() < 0.25e6, "UDP default rate: {bps}");
    let r = run(&["net", "--loopback", "-u", "-t", "0.5"]).ok();
    assert!(
        r.stdout.contains("1.00 Mbit/s per stream (UDP's default"),
        "{}",
        r.stdout
    );
    let j = run(&["net", "--loopback", "-u", "-b", "0", "-t", "0.5", "--json"])
        .ok()
        .json();
    let bps = summary(&j)["throughput_bps"].as_f64().unwrap();
    assert!(bps > 50e6, "-b 0 is unlimited: {bps}");
    let j = run(&["net", "--loopback", "-b", "200mbit", "-t", "2", "--json"])
        .ok()
        .json();
    let bps = summary(&j)["throughput_bps"].as_f64().unwrap();
    assert!(
        (bps - 200e6).abs() < 0.25 * 200e6,
        "TCP paced to 200 Mbit/s: {bps}"
    );
}
