//! `nsperf net` verdicts against the truth (issue 11, "Network measurements"): the sweep
//! against NPtcp on a 1 Gbit/s lab link, `window_limited` on a 45 Mbit/s / 50 ms lab link,
//! UDP loss placed in the network, and a server held to a cgroup CPU quota. Root (labs,
//! cgroups); each test skips with a printed reason when what it needs is missing. Labs and
//! cgroups are removed by guards, also when an assertion fails.

use crate::common;
use common::lab::{Lab, timing_lock};
use common::*;

use std::process::Stdio;
use std::time::{Duration, Instant};

/// `nsperf net 10.77.0.2` from site a against a one-off server started in site b on
/// `port`; retried while the server is not yet listening.
fn lab_net(lab: &Lab, port: u16, flags: &[&str]) -> serde_json::Value {
    let p = port.to_string();
    let _server = lab.spawn(b_site(), &[nsperf_bin(), "server", "--one-off", "-p", &p]);
    let mut args = vec![nsperf_bin(), "net", "10.77.0.2", "-p", &p, "--json"];
    args.extend_from_slice(flags);
    let t0 = Instant::now();
    loop {
        let r = lab.exec("a", &args);
        if r.code == Some(0) {
            return r.json();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20) && r.stderr.contains("cannot connect"),
            "net failed: {}\n{}",
            r.stdout,
            r.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn b_site() -> &'static str {
    "b"
}

/// Lab tests measure time: one at a time.
fn lab_ok(what: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    if !require_lab(what) {
        return None;
    }
    Some(timing_lock())
}

/// Load average per core: timing bands widen with it.
fn load_per_core() -> f64 {
    let l: f64 = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    l / cores
}

fn findings(j: &serde_json::Value) -> Vec<serde_json::Value> {
    j["findings"].as_array().cloned().unwrap_or_default()
}

/// NPtcp's one-way throughput (bit/s) for one message size: `-l S -u S -p 0`.
/// NPtcp at one message size in the lab: its one-way throughput (bit/s) and how long one of
/// its trials lasted (s), from its "N: SIZE bytes TIMES times --> RATE Mbps in USEC usec".
fn nptcp(lab: &Lab, size: u32, port: u16) -> (f64, f64) {
    let s = size.to_string();
    let p = port.to_string();
    let out = std::env::temp_dir().join(format!("nsperf-np-{}-{size}.out", std::process::id()));
    let o = out.to_str().unwrap().to_string();
    let _rx = lab.spawn(
        "b",
        &[
            "NPtcp",
            "-l",
            &s,
            "-u",
            &s,
            "-p",
            "0",
            "-P",
            &p,
            "-o",
            "/dev/null",
        ],
    );
    let t0 = Instant::now();
    loop {
        let r = lab.exec(
            "a",
            &[
                "NPtcp",
                "-h",
                "10.77.0.2",
                "-l",
                &s,
                "-u",
                &s,
                "-p",
                "0",
                "-P",
                &p,
                "-o",
                &o,
            ],
        );
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let _ = std::fs::remove_file(&out);
        // bytes, 2^20-bit "Mbps", one-way time in seconds
        let said = format!("{}{}", r.stdout, r.stderr);
        let trial = said.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 11 && f[2] == "bytes" && f[4] == "times").then(|| {
                let times: f64 = f[3].parse().ok()?;
                let usec: f64 = f[9].parse().ok()?;
                Some(times * 2.0 * usec / 1e6)
            })?
        });
        if let (Some(t), Some(trial)) = (
            text.split_whitespace()
                .nth(2)
                .and_then(|t| t.parse::<f64>().ok()),
            trial,
        ) {
            return (size as f64 * 8.0 / t, trial);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "NPtcp gave nothing: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The sweep is NetPIPE's: per size within 10 % of NPtcp (the band widens with the load of
/// a shared machine, and to NPtcp's own spread over its repeats without their extremes: a
/// tool cannot be held closer to the reference than the reference is to itself) and never above the link rate (the old overlapping sweep reported up
/// to 1.45 Gbit/s on this 1 Gbit/s link). Each nsperf run gets the trial length NPtcp just
/// used: for small messages the figure depends on it (two ends on one CPU or on two).
/// How far a tool's repeats spread once their extremes are set aside: second largest over
/// second smallest, less one (0 with fewer than 5 repeats: nothing is left but the median).
fn spread(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.len() < 5 || v[1] <= 0.0 {
        return 0.0;
    }
    v[v.len() - 2] / v[1] - 1.0
}

#[test]
fn sweep_agrees_with_nptcp_and_stays_below_the_link() {
    let what = "sweep against NPtcp";
    if !require_program("NPtcp", what) {
        return;
    }
    let Some(_g) = lab_ok(what) else { return };
    let lab = Lab::up("sw", &["--sites", "a,b", "--rate", "1gbit"]);
    let sizes = [16u32, 16384, 262_144, 2_097_152];
    let mut port = 47_200u16;
    let mut table = Vec::new();
    for &size in &sizes {
        let (mut np, mut ns) = (Vec::new(), Vec::new());
        // 16 B is latency-bound (about 11 µs a message through the lab, where 1.5 µs of a
        // scheduler's whim is 13 %): five alternations for it, three for the others.
        let repeats = if size <= 1024 { 5 } else { 3 };
        for _ in 0..repeats {
            port += 1;
            let (bps, trial) = nptcp(&lab, size, port);
            np.push(bps);
            port += 1;
            let r = format!("{size}..{size}");
            let t = format!("{:.4}", 3.0 * trial);
            let j = lab_net(&lab, port, &["--sweep", &r, "-t", &t]);
            let bps = j["summary"]["sweep"][0]["throughput_bps"].as_f64().unwrap();
            assert!(
                bps < 1e9,
                "{size} B: {bps:.3e} bit/s, above the 1 Gbit/s link"
            );
            ns.push(bps);
        }
        let own = spread(&np);
        table.push((size, median(&mut np), median(&mut ns), own));
    }
    let load_band = (0.10 * load_per_core().max(1.0)).min(0.6);
    let text: Vec<String> = table
        .iter()
        .map(|(s, a, b, own)| {
            format!(
                "{s} B: NPtcp {a:.3e} (own spread {:.0} %), nsperf {b:.3e} ({:.2})",
                own * 100.0,
                b / a
            )
        })
        .collect();
    eprintln!(
        "sweep vs NPtcp (band ±{:.0} % or NPtcp's own spread): {text:?}",
        load_band * 100.0
    );
    for (s, a, b, own) in &table {
        let band = load_band.max(*own);
        assert!(
            (b / a - 1.0).abs() <= band,
            "{s} B outside ±{:.0} % of NPtcp: {text:?}",
            band * 100.0
        );
    }
}

/// `window_limited` fires on a 64 KiB window at 45 Mbit/s / 50 ms with advice from the
/// measured figures, and stays quiet with a window larger than the path's BDP.
#[test]
fn window_limited_only_when_the_window_limits() {
    let Some(_g) = lab_ok("window_limited in a lab") else {
        return;
    };
    let lab = Lab::up(
        "wl",
        &["--sites", "a,b", "--rate", "45mbit", "--rtt", "50ms"],
    );
    let j = lab_net(&lab, 47_301, &["-w", "64k", "-t", "4", "-O", "1"]);
    let f = findings(&j);
    let w = f
        .iter()
        .find(|f| f["id"] == "window_limited")
        .unwrap_or_else(|| panic!("no window_limited: {f:?}\n{}", j["summary"]));
    let msg = w["message"].as_str().unwrap();
    let rate = j["summary"]["up"]["throughput_bps"].as_f64().unwrap();
    assert!(
        rate < 20e6,
        "a 64 KiB window cannot fill 45 Mbit/s at 50 ms: {rate}"
    );
    // Twice the measured ~11 Mbit/s over 50 ms is ~140 KiB, never the MiB of an assumed
    // 1 Gbit/s link.
    let bdp = w["evidence"]["bdp_bytes"].as_f64().unwrap();
    assert!((40e3..120e3).contains(&bdp), "{bdp}: {msg}");
    assert!(
        msg.contains("twice the measured rate needs") && !msg.contains("MiB"),
        "{msg}"
    );
    // 1 MiB: about four BDPs; the queue holds the rest and the link limits.
    let j = lab_net(&lab, 47_302, &["-w", "1m", "-t", "4", "-O", "1"]);
    let f = findings(&j);
    assert!(
        !f.iter().any(|f| f["id"] == "window_limited"),
        "window_limited with a window above the BDP: {f:?}\n{}",
        j["summary"]["up"]
    );
}

/// Issue 20 item 1: with `-P 2` each stream is judged against its own window: the finding
/// gives the per-stream and the total figures, and never more than a window in flight per
/// stream (the total against one window read "185 % of the window").
#[test]
fn window_limited_with_parallel_streams_is_judged_per_stream() {
    let Some(_g) = lab_ok("window_limited -P 2 in a lab") else {
        return;
    };
    let lab = Lab::up(
        "wp",
        &["--sites", "a,b", "--rate", "45mbit", "--rtt", "50ms"],
    );
    let j = lab_net(
        &lab,
        47_311,
        &["-w", "64k", "-P", "2", "-t", "4", "-O", "1"],
    );
    let up = &j["summary"]["up"];
    let streams = up["streams"].as_array().cloned().unwrap_or_default();
    assert_eq!(streams.len(), 2, "per-stream window figures: {up}");
    let f = findings(&j);
    let w = f
        .iter()
        .find(|f| f["id"] == "window_limited")
        .unwrap_or_else(|| panic!("no window_limited: {f:?}\n{up}"));
    let (msg, e) = (w["message"].as_str().unwrap(), &w["evidence"]);
    let in_flight = e["in_flight_bytes"].as_f64().unwrap();
    let window = e["window_bytes"].as_f64().unwrap();
    assert!(in_flight <= 1.05 * window, "{in_flight} of {window}: {msg}");
    let total = up["throughput_bps"].as_f64().unwrap();
    let per = e["throughput_bps"].as_f64().unwrap();
    assert!(per < 0.7 * total, "per stream {per} of {total}: {msg}");
    assert!(
        msg.contains("2 streams") && msg.contains("per stream") && msg.contains("in total"),
        "{msg}"
    );
}

/// Datagrams dropped by the lab link are placed in the network.
#[test]
fn udp_loss_in_the_network_is_placed_there() {
    let Some(_g) = lab_ok("UDP network loss in a lab") else {
        return;
    };
    let lab = Lab::up(
        "ul",
        &["--sites", "a,b", "--rate", "100mbit", "--loss", "2%"],
    );
    let j = lab_net(&lab, 47_401, &["-u", "-b", "20m", "-t", "2"]);
    let u = &j["summary"]["udp"];
    let pct = u["loss_pct"].as_f64().unwrap();
    assert!(
        (0.5..6.0).contains(&pct),
        "2 % configured, {pct} % lost: {u}"
    );
    assert_eq!(u["lost_at"], "network", "{u}");
    let f = findings(&j);
    let l = f.iter().find(|f| f["id"] == "udp_loss").expect("udp_loss");
    assert!(
        l["message"]
            .as_str()
            .unwrap()
            .contains("lost in the network"),
        "{l}"
    );
}

/// A cgroup with a CPU quota (v2 `cpu.max`, or the v1 cpu controller), removed on drop.
struct CpuCgroup {
    dir: std::path::PathBuf,
}

impl CpuCgroup {
    /// A cgroup allowed `quota_us` per 100 ms, or why none can be made.
    fn new(quota_us: u32) -> Result<CpuCgroup, String> {
        let name = format!("nsperf-test-{}", std::process::id());
        let v2 = std::path::Path::new("/sys/fs/cgroup");
        let ctl = std::fs::read_to_string(v2.join("cgroup.subtree_control")).unwrap_or_default();
        let (dir, files) = if ctl.split_whitespace().any(|c| c == "cpu") {
            (
                v2.join(&name),
                vec![("cpu.max", format!("{quota_us} 100000"))],
            )
        } else if std::path::Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists() {
            (
                std::path::Path::new("/sys/fs/cgroup/cpu").join(&name),
                vec![
                    ("cpu.cfs_period_us", "100000".to_string()),
                    ("cpu.cfs_quota_us", quota_us.to_string()),
                ],
            )
        } else {
            return Err("no cgroup cpu controller (v2 cpu.max or v1 cpu)".into());
        };
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let g = CpuCgroup { dir };
        for (f, v) in files {
            std::fs::write(g.dir.join(f), v).map_err(|e| format!("{f}: {e}"))?;
        }
        Ok(g)
    }
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A server held to 3 % of a core is found: "server process at its CPU limit".
#[test]
fn server_at_its_cpu_quota_is_found() {
    let _serial = timing_lock();
    let what = "server under a CPU quota";
    if !require_root(what) {
        return;
    }
    let cg = match CpuCgroup::new(3000) {
        Ok(c) => c,
        Err(why) => {
            skip(&format!("{what}: {why}"));
            return;
        }
    };
    // The shell enters the cgroup, then becomes the server; the kernel picks its port and
    // its log names it (a probed free port can be taken by another program meanwhile).
    let procs = cg.dir.join("cgroup.procs");
    let log = std::env::temp_dir().join(format!("nsperf-quota-{}.log", std::process::id()));
    let script = format!(
        "echo $$ > {} && exec {} server -B 127.0.0.1 -p 0",
        procs.display(),
        nsperf_bin()
    );
    let mut server = KillOnDrop(
        std::process::Command::new("sh")
            .args(["-c", &script])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let port = wait_listening_in(&mut server, &log);
    let p = port.to_string();
    let r = run(&["net", "127.0.0.1", "-p", &p, "-t", "3", "--json"]);
    let exited = server.0.try_wait().ok().flatten();
    drop(server);
    let server_log = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    assert_eq!(
        r.code,
        Some(0),
        "net failed: {}\nserver exited: {exited:?}, its log:\n{server_log}",
        r.stderr
    );
    let j = r.json();
    let f = findings(&j);
    let l = f
        .iter()
        .find(|f| f["id"] == "cpu_limited")
        .unwrap_or_else(|| panic!("no cpu_limited: {f:?}"));
    let msg = l["message"].as_str().unwrap();
    assert!(
        msg.starts_with("server process at its CPU limit (3 % of a core"),
        "{msg}"
    );
    assert!(
        j["summary"]["one_host"].as_bool().unwrap(),
        "{}",
        j["summary"]
    );
}
