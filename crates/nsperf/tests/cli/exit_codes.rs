//! Every exit code of docs/exit-codes.md produced through the real binary, one test per code,
//! each checking the one-line `nsperf: …` message that goes with it.

use crate::common;
use common::scratch::{Scratch, disk_base};
use common::*;

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Asserts the exit code and a one-line `nsperf: …` error containing `want`.
fn fails_with(r: &Run, code: i32, want: &str) {
    assert_eq!(
        r.code,
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    let line = r.stderr.trim();
    assert!(line.starts_with("nsperf: "), "{line}");
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(line.contains(want), "wanted {want:?} in: {line}");
}

/// `nsperf lab nfsd DIR` on loopback, killed on drop; returns its URL.
fn embedded_nfs(dir: &str, extra: &[&str]) -> (KillOnDrop, String) {
    let mut c = nsperf(["lab", "nfsd", dir]);
    c.args(extra).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().strip_prefix("ready ").expect("ready line");
    (KillOnDrop(child), url.to_string())
}

/// A local port nothing listens on.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (bounded) for `child` to exit; returns its code and stderr.
fn wait_exit(child: &mut KillOnDrop, limit: Duration) -> (Option<i32>, String) {
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < limit, "still running after {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(e) = child.0.stderr.as_mut() {
        e.read_to_string(&mut err).unwrap();
    }
    (status.code(), err)
}

#[test]
fn code_0_success_also_into_a_closed_pipe() {
    let r = run(&["host", "--json"]).ok();
    assert!(r.stdout.contains("\"schema_version\""), "{}", r.stdout);
    // `nsperf … | head` after head exited: the reader is gone before nsperf writes.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = nsperf(["host", "--json"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{:?} {err}", out.status);
    assert!(err.is_empty(), "{err}");
}

#[test]
fn code_1_runtime_failure_no_space_left() {
    if !require_root("exit 1 test (mounts a 2 MiB tmpfs)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let m = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "nsperf-exit1", d])
        .status()
        .unwrap();
    assert!(m.success());
    struct Umount(String);
    impl Drop for Umount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Umount(d.to_string());
    let r = run(&[
        "io",
        "run",
        d,
        "-w",
        "seqwrite",
        "-s",
        "8m",
        "--no-space-check",
    ]);
    fails_with(&r, 1, "No space left on device");
}

#[test]
fn code_2_usage() {
    fails_with(&run(&["net", "--loopback", "-t", "soon"]), 2, "soon");
    fails_with(&run(&["io", "run", "/tmp", "-t", "0"]), 2, "-t/--time");
    fails_with(
        &run(&["trace", "x.pcap", "-w", "y.pcap"]),
        2,
        "needs -i IFACE",
    );
}

#[test]
fn code_3_input() {
    fails_with(
        &run(&["trace", "/nonexistent/nsperf-exit3.pcap"]),
        3,
        "No such file",
    );
    fails_with(
        &run(&["trace", "-i", "nsperf-none0", "-t", "1s"]),
        3,
        "cannot capture on nsperf-none0: no such network interface",
    );
}

#[test]
fn code_4_permission_read_only_export() {
    let dir = Scratch::new(&disk_base(), "exit4");
    let (_srv, url) = embedded_nfs(dir.path(), &["--read-only"]);
    let r = run(&["io", "run", &url, "-w", "seqwrite", "-s", "1m"]);
    fails_with(&r, 4, "NFS3ERR_ROFS");
}

#[test]
fn code_5_connect_refused() {
    let port = closed_port().to_string();
    let r = run(&["net", "127.0.0.1", "-p", &port, "-t", "1"]);
    fails_with(&r, 5, "cannot connect");
}

#[test]
fn code_6_wrong_key() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.key");
    let bad = dir.path().join("bad.key");
    std::fs::write(&good, "the server's key\n").unwrap();
    std::fs::write(&bad, "another key\n").unwrap();
    let (_srv, port) = spawn_server_quiet(&["--psk-file", good.to_str().unwrap()]);
    let port = port.to_string();
    let r = run(&[
        "net",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1",
        "--psk-file",
        bad.to_str().unwrap(),
    ]);
    fails_with(&r, 6, "authentication");
}

#[test]
fn code_7_protocol_not_nsperf() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    // A peer that answers with something else than nsperf (an HTTP server, say).
    let t = std::thread::spawn(move || {
        // One connection: the client's (or, if it never came, the test's own below).
        if let Ok((mut s, _)) = l.accept() {
            let _ = std::io::Write::write_all(
                &mut s,
                b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\nnot nsperf at all\n",
            );
            let mut buf = [0u8; 256];
            let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
            let _ = s.read(&mut buf);
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    });
    let r = run(&["net", "127.0.0.1", "-p", &port, "-t", "1"]);
    let _ = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_millis(100),
    );
    t.join().unwrap();
    fails_with(&r, 7, "");
}

#[test]
fn code_8_refused_over_the_servers_limit() {
    let (_srv, port) = spawn_server_quiet(&["--max-time", "2"]);
    let port = port.to_string();
    let r = run(&["net", "127.0.0.1", "-p", &port, "-t", "10"]);
    fails_with(&r, 8, "refused");
}

#[test]
fn code_9_unsupported_congestion_control() {
    let r = run(&["net", "--loopback", "-t", "1", "-C", "nosuchcc"]);
    fails_with(&r, 9, "nosuchcc");
}

#[test]
fn code_10_unsafe_device_without_destructive() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("precious");
    std::fs::write(&f, vec![7u8; 1 << 20]).unwrap();
    let r = run(&[
        "io",
        "run",
        "--device",
        f.to_str().unwrap(),
        "-w",
        "seqwrite",
    ]);
    fails_with(&r, 10, "--destructive");
    assert_eq!(std::fs::read(&f).unwrap(), vec![7u8; 1 << 20]);
}

#[test]
fn code_11_not_found_on_the_server() {
    let dir = Scratch::new(&disk_base(), "exit11");
    let (_srv, url) = embedded_nfs(dir.path(), &[]);
    let r = run(&["io", "run", &format!("{url}/missing"), "-s", "1m"]);
    fails_with(&r, 11, "NFS3ERR_NOENT");
}

#[test]
fn code_12_net_server_killed_mid_test() {
    let (mut srv, port) = spawn_server_quiet(&[]);
    let port = port.to_string();
    let mut client = KillOnDrop(
        nsperf(["net", "127.0.0.1", "-p", &port, "-t", "20", "-q"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_secs(2));
    srv.0.kill().unwrap();
    let _ = srv.0.wait();
    let (code, err) = wait_exit(&mut client, Duration::from_secs(60));
    assert_eq!(code, Some(12), "{err}");
    assert!(err.contains("went away"), "{err}");
    assert!(err.trim().starts_with("nsperf: "), "{err}");
}

#[test]
fn code_130_interrupted_prints_what_ran() {
    let mut client = KillOnDrop(
        nsperf(["net", "--loopback", "-t", "20", "-q"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(client.0.id() as i32, libc::SIGINT) };
    let (code, err) = wait_exit(&mut client, Duration::from_secs(30));
    let mut out = String::new();
    client
        .0
        .stdout
        .as_mut()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(code, Some(130), "{err}");
    assert!(
        !out.trim().is_empty(),
        "no partial result printed; stderr: {err}"
    );
}
