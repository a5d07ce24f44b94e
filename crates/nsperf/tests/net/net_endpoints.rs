//! Where `nsperf net`'s and `nsperf server`'s packets go and how they are marked (issue 14,
//! item 3): `-B`, `--cport`, `-4`/`-6` on both, `-S`/`--dscp` on both ends' data packets
//! (read back from a capture), and the server's `-D` with `--pidfile` and `--logfile`.

use crate::common;
use common::*;

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts on `addr` (bounded).
fn wait_listening(addr: &str) {
    let t0 = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nothing listens on {addr}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `nsperf server` with its log lines going to a file in `dir`.
fn server(dir: &std::path::Path, extra: &[&str]) -> (KillOnDrop, u16, std::path::PathBuf) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = dir.join(format!("server-{n}.log"));
    let mut args = vec!["server", "-p", "0", "--logfile", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    let child = nsperf(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut guard = KillOnDrop(child);
    let port = wait_listening_in(&mut guard, &log);
    (guard, port, log)
}

/// The local port of the client's established connections to `port` (`ss`).
fn client_ports(port: u16) -> Vec<u16> {
    let out = std::process::Command::new("ss")
        .args([
            "-Htn",
            "state",
            "established",
            &format!("( dport = :{port} )"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .nth(2)?
                .rsplit(':')
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn bind_cport_and_ip_version() {
    if !require_program("ss", "--cport check") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_srv, port, log) = server(dir.path(), &[]);
    let p = port.to_string();
    let cport = free_port();
    let c = cport.to_string();
    // -B 127.0.0.2 and --cport: the server sees that address, the data streams those ports.
    let mut child = KillOnDrop(
        nsperf([
            "net",
            "127.0.0.1",
            "-p",
            &p,
            "-B",
            "127.0.0.2",
            "--cport",
            &c,
            "-P",
            "2",
            "-t",
            "3",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let t0 = Instant::now();
    let mut seen = Vec::new();
    while t0.elapsed() < Duration::from_secs(3) && seen.len() < 2 {
        seen = client_ports(port).into_iter().filter(|&x| x != 0).collect();
        seen.retain(|&x| x == cport || x == cport + 1);
        seen.sort();
        seen.dedup();
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = stdout_of(&mut child.0);
    assert_eq!(
        seen,
        [cport, cport + 1],
        "data streams from --cport {cport} and the next port"
    );
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["spec"]["local"]["bind"], "127.0.0.2");
    assert_eq!(j["spec"]["local"]["cport"], cport);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("[::ffff:127.0.0.2]:"), "{text}");
    // -4: an IPv4 connection to a dual-stack server.
    run(&["net", "localhost", "-p", &p, "-4", "-t", "1", "-q"]).ok();
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("[::ffff:127.0.0.1]:")
    );
    // -B of another version than -4 is a usage error.
    let r = run(&["net", "127.0.0.1", "-p", &p, "-4", "-B", "::1"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    if !std::fs::read_to_string("/proc/net/if_inet6").is_ok_and(|s| s.contains(" lo")) {
        skip("-6 checks: no IPv6 on lo");
        return;
    }
    run(&["net", "::1", "-p", &p, "-6", "-t", "1", "-q"]).ok();
    assert!(std::fs::read_to_string(&log).unwrap().contains("[::1]:"));
    let r = run(&["net", "127.0.0.1", "-p", &p, "-6"]);
    assert_ne!(r.code, Some(0));
    assert!(r.stderr.contains("no IPv6 address"), "{}", r.stderr);
    // The server's -4 and -6 listen on one family only.
    let (_s4, p4, _) = server(dir.path(), &["-4"]);
    assert!(TcpStream::connect(("::1", p4)).is_err());
    TcpStream::connect(("127.0.0.1", p4)).unwrap();
    let (_s6, p6, _) = server(dir.path(), &["-6"]);
    assert!(TcpStream::connect(("127.0.0.1", p6)).is_err());
    TcpStream::connect(("::1", p6)).unwrap();
}

/// Reads a child's stdout on a thread (so a large output cannot block it) and waits at most
/// 30 s for it to end.
fn stdout_of(child: &mut std::process::Child) -> String {
    use std::io::Read;
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "client did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    reader.join().unwrap()
}

/// Captures `filter` on lo while `client` runs; returns (source port, DS field, payload
/// length) of every packet.
fn capture(dir: &std::path::Path, filter: &str, client: &[&str]) -> Vec<(u16, u8, usize)> {
    let pcap = dir.join("cap.pcap");
    let mut dump = std::process::Command::new("tcpdump")
        .args([
            "-i",
            "lo",
            "-s",
            "128",
            "-U",
            "-w",
            pcap.to_str().unwrap(),
            filter,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // tcpdump says "listening on lo" once it captures.
    let mut err = BufReader::new(dump.stderr.take().unwrap());
    let mut line = String::new();
    let _ = err.read_line(&mut line);
    let dump = KillOnDrop(dump);
    run(client).ok();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: SIGINT to our own child; tcpdump then flushes and exits.
    unsafe { libc::kill(dump.0.id() as i32, libc::SIGINT) };
    drop(dump);
    let proto = if filter.starts_with("udp") {
        "udp"
    } else {
        "tcp"
    };
    let out = std::process::Command::new("tshark")
        .args([
            "-r",
            pcap.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            &format!("{proto}.srcport"),
            "-e",
            "ip.dsfield",
            "-e",
            if proto == "udp" {
                "udp.length"
            } else {
                "tcp.len"
            },
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let ds = f.get(1)?.trim_start_matches("0x");
            Some((
                f[0].parse().ok()?,
                u8::from_str_radix(ds, 16).ok()?,
                f.get(2)?.parse().ok()?,
            ))
        })
        .collect()
}

#[test]
fn dscp_marks_both_ends_data_packets() {
    let what = "-S/--dscp capture";
    if !require_root(what) || !require_program("tcpdump", what) || !require_program("tshark", what)
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_srv, port, _) = server(dir.path(), &["-B", "127.0.0.1"]);
    let p = port.to_string();
    let cport = free_port();
    let c = cport.to_string();
    // TCP, server sending (-R): the server's data packets carry it as well as the client's.
    let pkts = capture(
        dir.path(),
        &format!("tcp port {cport}"),
        &[
            "net",
            "127.0.0.1",
            "-p",
            &p,
            "--cport",
            &c,
            "-S",
            "0xb8",
            "-R",
            "-t",
            "1",
            "-q",
        ],
    );
    let from_client: Vec<_> = pkts.iter().filter(|x| x.0 == cport).collect();
    let server_data: Vec<_> = pkts.iter().filter(|x| x.0 == port && x.2 > 0).collect();
    let unmarked = |v: &[&(u16, u8, usize)]| -> Vec<(u16, u8, usize)> {
        v.iter()
            .filter(|x| x.1 != 0xb8)
            .take(5)
            .map(|x| **x)
            .collect()
    };
    assert!(
        from_client.len() > 2 && server_data.len() > 10,
        "{} client packets, {} server data packets",
        from_client.len(),
        server_data.len()
    );
    assert_eq!(
        unmarked(&from_client),
        [],
        "client packets without TOS 0xb8"
    );
    assert_eq!(
        unmarked(&server_data),
        [],
        "server data packets without TOS 0xb8"
    );
    // UDP from the server (-R) with --dscp EF (46 << 2 = 0xb8).
    let pkts = capture(
        dir.path(),
        &format!("udp port {cport}"),
        &[
            "net",
            "127.0.0.1",
            "-p",
            &p,
            "--cport",
            &c,
            "--dscp",
            "EF",
            "-u",
            "-R",
            "-b",
            "5m",
            "-t",
            "1",
            "-q",
        ],
    );
    let server_dgrams: Vec<_> = pkts.iter().filter(|x| x.0 != cport).collect();
    assert!(
        server_dgrams.len() > 10,
        "{} server datagrams",
        server_dgrams.len()
    );
    let all: Vec<_> = pkts.iter().collect();
    assert_eq!(unmarked(&all), [], "datagrams without TOS 0xb8");
}

#[test]
fn server_daemon_writes_its_pidfile_serves_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("srv.pid");
    let log = dir.path().join("srv.log");
    let port = free_port();
    let p = port.to_string();
    let t0 = Instant::now();
    // The foreground process returns once the daemon is ready.
    run(&[
        "server",
        "-D",
        "--pidfile",
        pidfile.to_str().unwrap(),
        "--logfile",
        log.to_str().unwrap(),
        "-p",
        &p,
        "-B",
        "127.0.0.1",
    ])
    .ok();
    assert!(t0.elapsed() < Duration::from_secs(10));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    struct Daemon(i32);
    impl Drop for Daemon {
        fn drop(&mut self) {
            // SAFETY: signal to the daemon this test started.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
    let daemon = Daemon(pid);
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
    };
    assert!(alive(pid));
    let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(cmdline.contains("server"), "{cmdline}");
    wait_listening(&format!("127.0.0.1:{port}"));
    // A second server with the same pid file is refused while the first runs.
    let r = run(&[
        "server",
        "--pidfile",
        pidfile.to_str().unwrap(),
        "-p",
        &free_port().to_string(),
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("process {pid} is running")),
        "{}",
        r.stderr
    );
    let j = run(&["net", "127.0.0.1", "-p", &p, "-t", "1", "--json"])
        .ok()
        .json();
    assert!(j["summary"]["throughput_bps"].as_f64().unwrap() > 0.0);
    // SAFETY: SIGTERM to the daemon.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let t0 = Instant::now();
    while alive(pid) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the daemon ignored SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::mem::forget(daemon);
    assert!(!pidfile.exists(), "the pid file is removed on exit");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains(&format!("in the background as process {pid}")),
        "{text}"
    );
    assert!(text.contains("test done"), "{text}");
}
