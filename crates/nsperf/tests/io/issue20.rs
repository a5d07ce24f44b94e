//! Regression tests of issue 20 (a new user's tryout): what `lab up`, `lab stats`, `lab exec`
//! and `lab serve` print, `doctor` on a path a lab does not serve, `run --resume` with nothing
//! to resume. The lab ones need root; skipped with a printed reason otherwise.

use crate::common;
use common::lab::{Lab, lab_name};
use common::scratch::{Scratch, disk_base};
use common::servers::{Smbd, embedded_nfs, serve_smb};
use common::*;

use std::time::Duration;

#[test]
fn resume_with_nothing_to_resume_leaves_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("never.db");
    let r = run(&["run", "--resume", "--db", db.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.starts_with("nsperf: "), "{}", r.stderr);
    assert!(r.stderr.contains("nothing to resume"), "{}", r.stderr);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn io_run_t_0_names_the_flag_typed() {
    let r = run(&["io", "run", "/tmp", "-t", "0"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("-t/--time must be more than 0"),
        "{}",
        r.stderr
    );
}

/// `lab up` and `lab stats` show the MTU; `lab exec` of a missing program is an nsperf error;
/// `lab serve` prints a test command that works as printed; `doctor` on a path the lab's
/// server does not serve, or that does not exist, is "not found" (exit 11).
#[test]
fn lab_tryout_outputs_and_codes() {
    let what = "issue 20 lab tryout test";
    if !require_lab(what) {
        return;
    }
    let lab = lab_name("i20u");
    let _g = Lab(lab.clone());
    let r = run(&["lab", "up", &lab, "--sites", "a,b", "--mtu", "9000"]).ok();
    assert!(r.stdout.contains("MTU 9000"), "{}", r.stdout);
    let r = run(&["lab", "stats", &lab]).ok();
    assert!(r.stdout.contains("MTU 9000"), "{}", r.stdout);

    let r = run(&["lab", "exec", &lab, "a", "--", "nosuchprog-nsperf"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.starts_with("nsperf: "), "{}", r.stderr);
    assert!(r.stderr.contains("nosuchprog-nsperf"), "{}", r.stderr);
    assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);

    let dir = Scratch::new(&disk_base(), "i20-serve");
    let r = run(&["lab", "serve", &lab, "b", "nfs", dir.path()]).ok();
    let line = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("test it:"))
        .unwrap_or_else(|| panic!("no test line: {}", r.stdout));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        &words[..6],
        &["nsperf", "lab", "exec", lab.as_str(), "a", "--"],
        "{line}"
    );
    // Run it as printed (the nsperf under test standing for `nsperf`).
    let args: Vec<&str> = words[1..]
        .iter()
        .map(|w| if *w == "nsperf" { nsperf_bin() } else { w })
        .collect();
    run_with_limit(nsperf(&args), Duration::from_secs(120)).ok();
    assert!(dir.leftovers().is_empty(), "{:?}", dir.leftovers());

    let served = std::fs::canonicalize(&dir.0).unwrap();
    for path in [
        format!("{}/nope", served.display()),
        "/var/tmp/not-served-by-this-lab".to_string(),
    ] {
        let url = format!("nfs://10.77.0.2{path}");
        let r = run(&["doctor", &url, "--lab", &lab, "-t", "1s"]);
        assert_eq!(r.code, Some(11), "{url}: {}", r.stderr);
        assert!(r.stderr.starts_with("nsperf: "), "{}", r.stderr);
        assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    }
}

/// The NFS server killed mid-write, five times: each time the client ends with exit 12 and
/// one line naming the NFS client (not io_uring), never silently (SIGPIPE, exit 141).
#[test]
fn nfs_server_killed_mid_write_is_peer_lost_every_time() {
    let dir = Scratch::new(&disk_base(), "i20-kill");
    for attempt in 1..=5 {
        let (mut srv, url) = embedded_nfs(dir.path(), &[]);
        let mut client = KillOnDrop(
            nsperf([
                "io", "run", &url, "-w", "seqwrite", "-s", "256m", "-b", "1m",
            ])
            .args(["-t", "30", "--iodepth", "4", "-q"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        );
        std::thread::sleep(Duration::from_millis(800 + 200 * attempt));
        srv.0.kill().unwrap();
        let _ = srv.0.wait();
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(s) = client.0.try_wait().unwrap() {
                break s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "attempt {attempt}: the client did not notice the server died"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(client.0.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(
            status.code(),
            Some(12),
            "attempt {attempt}: {status:?} {err}"
        );
        let line = err.trim();
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(line.starts_with("nsperf: "), "{line}");
        assert!(line.contains("NFS server went away"), "{line}");
        assert!(!line.contains("io_uring"), "{line}");
    }
}

/// A `lab capture` file is read by tcptrace and tcpdump (libpcap refused the raw-IP pcapng
/// with two interfaces: "an interface has a type 101 different from the type of the first
/// interface"), and tcptrace sees the TCP transfer that crossed the link, as nsperf trace.
#[test]
fn lab_capture_is_read_by_tcptrace_and_tcpdump() {
    let what = "lab capture tcptrace test";
    if !require_lab(what) || !require_program("tcptrace", what) {
        return;
    }
    let lab = lab_name("i20c");
    let _g = Lab(lab.clone());
    run(&[
        "lab", "up", &lab, "--sites", "a,b", "--rate", "100mbit", "--rtt", "4ms",
    ])
    .ok();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("link.pcapng");
    let mut cap = KillOnDrop(
        nsperf([
            "lab",
            "capture",
            &lab,
            "a-b",
            "-w",
            file.to_str().unwrap(),
            "-t",
            "5s",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap(),
    );
    let t0 = std::time::Instant::now();
    while std::fs::metadata(&file).map_or(0, |m| m.len()) == 0
        && t0.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let bin = nsperf_bin();
    let _srv = KillOnDrop(
        nsperf(["lab", "exec", &lab, "b", "--", bin, "server", "-1", "-q"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(500));
    run(&[
        "lab",
        "exec",
        &lab,
        "a",
        "--",
        bin,
        "net",
        "10.77.0.2",
        "-t",
        "1",
        "-q",
    ])
    .ok();
    let status = cap.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let f = file.to_str().unwrap();
    let t = std::process::Command::new("tcptrace")
        .args(["-n", "-l", f])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&t.stdout);
    let err = String::from_utf8_lossy(&t.stderr);
    assert!(t.status.success(), "tcptrace failed: {err}\n{out}");
    assert!(!err.contains("different from the type"), "{err}");
    assert!(out.contains("TCP connection 1:"), "{out}\n{err}");
    // The data connection moved megabytes: tcptrace counts its bytes.
    let most = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("unique bytes sent:"))
        .filter_map(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    assert!(most > 1 << 20, "{out}");
    if require_program("tcpdump", what) {
        let d = std::process::Command::new("tcpdump")
            .args(["-n", "-r", f, "-c", "5"])
            .output()
            .unwrap();
        assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
        assert!(String::from_utf8_lossy(&d.stdout).contains("10.77.0.1"));
    }
    let r = run(&["trace", f, "--json"]).ok();
    assert!(r.stdout.contains("10.77.0.2"), "{}", r.stdout);
}

/// dist/strip.sh (which dist/build.sh runs on every binary, whatever built it: the musl-gcc
/// path kept the symbol table, issue 20) leaves no `.symtab` and a smaller file.
#[test]
fn dist_strip_leaves_no_symbol_table() {
    let what = "dist/strip.sh test";
    if !require_program("readelf", what) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("nsperf-unstripped");
    std::fs::copy(nsperf_bin(), &bin).unwrap();
    let has_symtab = |p: &std::path::Path| {
        let o = std::process::Command::new("readelf")
            .arg("-S")
            .arg(p)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).contains(".symtab")
    };
    assert!(has_symtab(&bin), "the test binary should start unstripped");
    let before = std::fs::metadata(&bin).unwrap().len();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../dist/strip.sh");
    let target = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
    let o = std::process::Command::new(script)
        .arg(&target)
        .arg(&bin)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!has_symtab(&bin));
    assert!(std::fs::metadata(&bin).unwrap().len() < before);
    let v = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("nsperf "));
}

/// Runs `nsperf ARGS` in site `site` of `lab`; returns the run and how long it took.
fn timed_in_site(lab: &str, site: &str, args: &[&str]) -> (Run, Duration) {
    let mut a = vec!["lab", "exec", lab, site, "--", nsperf_bin()];
    a.extend_from_slice(args);
    let t0 = std::time::Instant::now();
    let r = run_with_limit(nsperf(&a), Duration::from_secs(120));
    (r, t0.elapsed())
}

/// A server behind a link that drops every packet (no reply, no refusal): every protocol
/// gives up connecting within its connect timeout, 5 s by default or `--connect-timeout`,
/// with exit 5 (NFS took 270 s: 30 s for each of nine source ports tried as root).
#[test]
fn unreachable_servers_fail_within_the_connect_timeout() {
    let what = "connect timeout test";
    if !require_lab(what) {
        return;
    }
    let lab = lab_name("i20t");
    let _g = Lab(lab.clone());
    run(&["lab", "up", &lab, "--sites", "a,b"]).ok();
    run(&["lab", "set", &lab, "--loss", "100%"]).ok();
    let cases: [(&[&str], &str, u64); 6] = [
        (
            &["io", "run", "nfs://10.77.0.2/x", "-s", "1m"],
            "portmapper",
            5,
        ),
        (
            &[
                "io",
                "run",
                "nfs://10.77.0.2:2049/x",
                "-s",
                "1m",
                "--connect-timeout",
                "1s",
            ],
            "MOUNT",
            1,
        ),
        (
            &[
                "io",
                "run",
                "smb://10.77.0.2/share",
                "-s",
                "1m",
                "--connect-timeout",
                "1s",
            ],
            "10.77.0.2",
            1,
        ),
        (
            &["net", "10.77.0.2", "-t", "1", "--connect-timeout", "1s"],
            "10.77.0.2",
            1,
        ),
        (
            &["doctor", "nfs://10.77.0.2/x", "--connect-timeout", "1s"],
            "portmapper",
            1,
        ),
        (
            &["doctor", "smb://10.77.0.2/share", "--connect-timeout", "1s"],
            "10.77.0.2",
            1,
        ),
    ];
    for (args, want, limit_s) in cases {
        let (r, took) = timed_in_site(&lab, "a", args);
        assert_eq!(r.code, Some(5), "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with("nsperf: "), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
        // The timeout, plus start-up and a loaded machine's slack.
        assert!(
            took < Duration::from_secs(limit_s + 4),
            "{args:?} took {took:?}: {}",
            r.stderr
        );
        assert!(
            took >= Duration::from_secs(limit_s),
            "{args:?} gave up before the timeout ({took:?}): {}",
            r.stderr
        );
    }
}

/// Ctrl-C during doctor's protocol test prints what was measured before it (the network
/// figures, the layers not reached named) and exits 130.
#[test]
fn ctrl_c_on_doctor_prints_what_was_measured() {
    let dir = Scratch::new(&disk_base(), "i20-doctor-int");
    let (_nfs, url) = embedded_nfs(dir.path(), &[]);
    let (_srv, port) = spawn_server_quiet(&[]);
    let net = format!("127.0.0.1:{port}");
    let mut c = KillOnDrop(
        nsperf(["doctor", &url, "--net-server", &net, "--net-time", "1s"])
            .args(["-s", "4g", "-b", "1m", "-t", "30s"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Network: 2 × (1 s warm-up + 1 s) + 1 s RTT; then the protocol's write pass runs.
    std::thread::sleep(Duration::from_secs(9));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(c.0.id() as i32, libc::SIGINT) };
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = c.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "doctor did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let (mut out, mut err) = (String::new(), String::new());
    std::io::Read::read_to_string(c.0.stdout.as_mut().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(c.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{out}\n{err}");
    assert!(
        out.contains("Mbit/s") || out.contains("Gbit/s"),
        "no network figures:\n{out}\n{err}"
    );
    assert!(out.contains("interrupted"), "{out}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(dir.leftovers().is_empty(), "{:?}", dir.leftovers());
}

/// Starts `client` (an `io run` writing into `dir`), SIGKILLs it once its file holds a few
/// MiB (it cannot clean up), and returns that file's name.
fn kill_mid_write(mut client: std::process::Command, dir: &Scratch) -> String {
    client
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = KillOnDrop(client.spawn().unwrap());
    let t0 = std::time::Instant::now();
    let grown = || {
        dir.leftovers()
            .into_iter()
            .find(|n| std::fs::metadata(dir.0.join(n)).is_ok_and(|m| m.len() >= 4 << 20))
    };
    let name = loop {
        if let Some(n) = grown() {
            break n;
        }
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "the client ended before it was killed"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no file grew in {}",
            dir.path()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    assert_eq!(dir.leftovers(), std::slice::from_ref(&name));
    name
}

/// The files a later run cannot prove dead: another host's (a host tag not ours) and a name
/// without host tag (seen through a protocol, its PID means nothing here).
const FOREIGN: [&str; 2] = [
    ".nsperf-4242@000000000000-seqwrite-1",
    ".nsperf-4243-seqread-1",
];

/// After a client of this host was killed mid-write (`killed`, its file left in `dir`):
/// plants [`FOREIGN`] files; the next run (`next`, given extra arguments) removes the killed
/// run's file and names the foreign ones; then a metadata directory of another dead run of
/// this host and `--clean` remove everything.
fn stale_files_cleaned_or_named(dir: &Scratch, killed: &str, next: &dyn Fn(&[&str]) -> Run) {
    for (i, f) in FOREIGN.iter().enumerate() {
        std::fs::write(dir.0.join(f), vec![7u8; 1000 * (i + 1)]).unwrap();
    }
    let r = next(&[]).ok();
    let left = dir.leftovers();
    assert!(
        !left.iter().any(|n| n == killed),
        "the killed run's {killed} is still there: {left:?}\nstderr: {}",
        r.stderr
    );
    let j = r.json();
    let f = j["findings"].as_array().unwrap();
    let by_id = |id: &str| f.iter().find(|f| f["id"] == id).cloned();
    let removed = by_id("stale_files_removed").unwrap_or_else(|| panic!("{f:?}"));
    assert_eq!(removed["evidence"]["stale_files"], 1.0, "{removed}");
    assert!(removed["evidence"]["stale_bytes"].as_f64().unwrap() >= (4 << 20) as f64);
    let named = by_id("stale_files").unwrap_or_else(|| panic!("{f:?}"));
    assert_eq!(named["evidence"]["stale_files"], 2.0, "{named}");
    assert_eq!(named["evidence"]["stale_bytes"], 3000.0, "{named}");
    // Said on stderr too: what was removed, what is left and what removes it.
    assert!(r.stderr.contains(killed), "{}", r.stderr);
    assert!(
        FOREIGN.iter().all(|n| r.stderr.contains(n)) && r.stderr.contains("--clean"),
        "{}",
        r.stderr
    );
    let mut want: Vec<String> = FOREIGN.iter().map(|s| s.to_string()).collect();
    want.sort();
    let mut left = dir.leftovers();
    left.sort();
    assert_eq!(left, want);

    // A metadata test's directory of another dead run of this host (a PID that has exited,
    // the killed run's host tag), and --clean: everything goes, the foreign files included.
    let tag = killed
        .split_once('@')
        .and_then(|(_, t)| t.split_once('-'))
        .map(|(t, _)| t)
        .unwrap_or_else(|| panic!("{killed}: no host tag"));
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let gone = c.id();
    c.wait().unwrap();
    let meta = dir.0.join(format!(".nsperf-{gone}@{tag}-meta-2"));
    std::fs::create_dir(&meta).unwrap();
    for i in 0..3 {
        std::fs::write(meta.join(format!("f{i:08}")), b"abcd").unwrap();
    }
    let r = next(&["--clean"]).ok();
    assert!(dir.leftovers().is_empty(), "{:?}", dir.leftovers());
    let j = r.json();
    let removed = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "stale_files_removed")
        .cloned()
        .unwrap_or_else(|| panic!("{}", j["findings"]));
    assert_eq!(removed["evidence"]["stale_files"], 3.0, "{removed}");
}

/// Issue 20 item 9: a client SIGKILLed mid-write through `nfs://` leaves its file in the
/// export; the next `io run nfs://` from this host removes it (its process is certainly
/// dead), names the files whose runs it cannot prove over, and `--clean` removes those.
#[test]
fn nfs_stale_files_of_a_killed_client_are_removed_or_named() {
    let dir = Scratch::new(&disk_base(), "i20-stale-nfs");
    let (_srv, url) = embedded_nfs(dir.path(), &[]);
    let mut c = nsperf([
        "io", "run", &url, "-w", "seqwrite", "-s", "256m", "-b", "1m",
    ]);
    c.args(["-t", "30", "--iodepth", "4", "-q"]);
    let killed = kill_mid_write(c, &dir);
    let next = |extra: &[&str]| {
        let mut a = vec!["io", "run", url.as_str(), "-s", "1m", "-b", "64k", "--json"];
        a.extend_from_slice(extra);
        run(&a)
    };
    stale_files_cleaned_or_named(&dir, &killed, &next);
}

/// The same through `smb://`, against smbd in a lab (root and smbd needed).
#[test]
fn smb_stale_files_of_a_killed_client_are_removed_or_named() {
    let what = "issue 20 smb stale files test";
    if !require_lab(what) || !require_program("smbd", what) {
        return;
    }
    let lab = lab_name("i20s");
    let _g = Lab(lab.clone());
    run(&["lab", "up", &lab, "--sites", "a,b"]).ok();
    let dir = Scratch::new(&disk_base(), "i20-stale-smb");
    let Smbd { url, creds, .. } = serve_smb(&lab, &dir);
    let in_a = ["lab", "exec", lab.as_str(), "a", "--", nsperf_bin()];
    let mut c = nsperf(in_a);
    c.args([
        "io", "run", &url, "-w", "seqwrite", "-s", "256m", "-b", "1m",
    ]);
    c.args(["-t", "30", "--iodepth", "4", "-q", "--credentials", &creds]);
    let killed = kill_mid_write(c, &dir);
    let next = |extra: &[&str]| {
        let mut a = in_a.to_vec();
        a.extend_from_slice(&["io", "run", &url, "-s", "1m", "-b", "64k", "--json"]);
        a.extend_from_slice(&["--credentials", &creds]);
        a.extend_from_slice(extra);
        run(&a)
    };
    stale_files_cleaned_or_named(&dir, &killed, &next);
}
