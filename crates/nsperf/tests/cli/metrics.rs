//! `--metrics-listen`: each command serves its live figures in OpenMetrics text while it runs.
//! Scraped during the run with a plain `TcpStream` client (and with curl when installed), the
//! text must parse as OpenMetrics, counters must not go back between scrapes, and the figures
//! must agree with the command's final JSON within its last interval.

use crate::common;
use common::*;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdout, Stdio};
use std::time::{Duration, Instant};

/// One parsed exposition: every sample by `name{labels}`, and each family's type.
#[derive(Debug, Default)]
struct Exposition {
    samples: BTreeMap<String, f64>,
    types: BTreeMap<String, String>,
}

impl Exposition {
    /// Samples of `name` (exactly, labels aside) whose labels contain every `k="v"` of `with`.
    fn values(&self, name: &str, with: &[&str]) -> Vec<f64> {
        self.samples
            .iter()
            .filter(|(k, _)| {
                k.split('{').next() == Some(name) && with.iter().all(|w| k.contains(w))
            })
            .map(|(_, v)| *v)
            .collect()
    }

    fn sum(&self, name: &str, with: &[&str]) -> f64 {
        self.values(name, with).iter().sum()
    }

    fn one(&self, name: &str, with: &[&str]) -> f64 {
        let v = self.values(name, with);
        assert_eq!(v.len(), 1, "{name} {with:?}: {v:?}");
        v[0]
    }
}

/// Checks the OpenMetrics text format (the parts a scraper relies on) and parses it: it ends
/// with `# EOF`, every family has HELP and TYPE lines before its samples, a UNIT line's unit
/// ends the family name, each sample belongs to the family before it with the suffixes its
/// type allows, and every value is a number.
fn parse(text: &str) -> Exposition {
    assert!(text.ends_with("# EOF\n"), "no # EOF at the end:\n{text}");
    let mut e = Exposition::default();
    let mut family: Option<(String, String)> = None;
    for line in text.lines() {
        if line == "# EOF" {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut w = rest.splitn(3, ' ');
            let (kind, name, arg) = (w.next().unwrap(), w.next().unwrap(), w.next());
            match kind {
                "HELP" => family = None,
                "TYPE" => {
                    let ty = arg.expect("a TYPE line names a type").to_string();
                    assert!(
                        ["counter", "gauge", "histogram", "info"].contains(&ty.as_str()),
                        "{line}"
                    );
                    e.types.insert(name.to_string(), ty.clone());
                    family = Some((name.to_string(), ty));
                }
                "UNIT" => {
                    let unit = arg.expect("a UNIT line names a unit");
                    assert!(name.ends_with(&format!("_{unit}")), "{line}");
                }
                _ => panic!("unknown descriptor line: {line}"),
            }
            continue;
        }
        let (fam, ty) = family
            .as_ref()
            .unwrap_or_else(|| panic!("sample without TYPE: {line}"));
        let (key, value) = line.rsplit_once(' ').expect("a sample has a value");
        let name = key.split('{').next().unwrap();
        let suffixes: &[&str] = match ty.as_str() {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "info" => &["_info"],
            _ => &[""],
        };
        assert!(
            suffixes.iter().any(|s| name == format!("{fam}{s}")),
            "{line} is not of family {fam} ({ty})"
        );
        if key.contains('{') {
            assert!(key.ends_with('}'), "{line}");
        }
        let v: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("not a number: {line}")),
        };
        e.samples.insert(key.to_string(), v);
    }
    e
}

/// Every counter sample of `before` is still there and no smaller in `after`.
fn counters_never_go_back(before: &Exposition, after: &Exposition) {
    for (k, v) in &before.samples {
        let name = k.split('{').next().unwrap();
        if !name.ends_with("_total") {
            continue;
        }
        let family = name.trim_end_matches("_total");
        // A running test's counters leave with the test: only the families that stay.
        if family.starts_with("nsperf_server_test") {
            continue;
        }
        let now = after
            .samples
            .get(k)
            .unwrap_or_else(|| panic!("{k} vanished"));
        assert!(now >= v, "{k} went back from {v} to {now}");
    }
}

/// `GET /metrics` over a plain TCP connection: the body of a 200 answer in OpenMetrics text.
fn scrape(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8(raw).expect("UTF-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("headers end");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    body.to_string()
}

/// The same with curl, `None` (and a skip line) when curl is not installed.
fn scrape_curl(addr: SocketAddr, what: &str) -> Option<String> {
    if !require_program("curl", what) {
        return None;
    }
    let o = std::process::Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "10"])
        .arg(format!("http://{addr}/metrics"))
        .output()
        .expect("run curl");
    assert!(
        o.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(String::from_utf8(o.stdout).unwrap())
}

/// A command started with `--metrics-listen 127.0.0.1:0`, its endpoint's address read from
/// its stderr (the rest of which is kept), killed when dropped.
struct Metered {
    child: KillOnDrop,
    addr: SocketAddr,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: std::sync::mpsc::Receiver<String>,
    /// Every stderr line read so far.
    seen: Vec<String>,
}

impl Metered {
    fn start(args: &[&str]) -> Metered {
        let mut c = nsperf(args);
        c.args(["--metrics-listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child: Child = c.spawn().expect("spawn nsperf");
        let out: ChildStdout = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = BufReader::new(out).read_to_string(&mut s);
            s
        });
        let err = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut m = Metered {
            child: KillOnDrop(child),
            addr: "0.0.0.0:0".parse().unwrap(),
            stdout: Some(stdout),
            stderr: rx,
            seen: Vec::new(),
        };
        let line = m.wait_line("nsperf: metrics at http://", Duration::from_secs(20));
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.strip_suffix("/metrics"))
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        m.addr = addr.parse().unwrap();
        assert_ne!(m.addr.port(), 0);
        m
    }

    /// The first stderr line containing `pat`.
    fn wait_line(&mut self, pat: &str, limit: Duration) -> String {
        let t0 = Instant::now();
        loop {
            if let Some(l) = self.seen.iter().find(|l| l.contains(pat)) {
                return l.clone();
            }
            match self.stderr.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => self.seen.push(l),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => break,
            }
            if t0.elapsed() > limit {
                break;
            }
        }
        panic!(
            "no stderr line with {pat:?} within {limit:?}: {:?}",
            self.seen
        );
    }

    /// Scrapes until `ready` holds (at most `limit`), then returns that scrape.
    fn scrape_until(&self, limit: Duration, ready: impl Fn(&Exposition) -> bool) -> Exposition {
        let t0 = Instant::now();
        loop {
            let e = parse(&scrape(self.addr));
            if ready(&e) {
                return e;
            }
            assert!(t0.elapsed() < limit, "not ready within {limit:?}: {e:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the exit (at most `limit`): the exit code and stdout.
    fn finish(mut self, limit: Duration) -> (Option<i32>, String) {
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.0.try_wait().unwrap() {
                break s;
            }
            assert!(t0.elapsed() < limit, "still running after {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = self.stdout.take().unwrap().join().unwrap();
        (status.code(), out)
    }
}

/// Bytes the client sent in the report's first `k` intervals (rows are per stream and
/// interval, and a sum row without a stream: the streams' rows of the first `k` starts).
fn first_intervals(rows: &[serde_json::Value], k: usize) -> f64 {
    let rows: Vec<&serde_json::Value> = rows.iter().filter(|r| !r["stream"].is_null()).collect();
    let mut starts: Vec<f64> = rows
        .iter()
        .map(|i| i["start_s"].as_f64().unwrap())
        .collect();
    starts.dedup();
    let Some(&end) = starts.get(k) else {
        return rows.iter().map(|i| i["sent_bytes"].as_f64().unwrap()).sum();
    };
    rows.iter()
        .filter(|i| i["start_s"].as_f64().unwrap() < end)
        .map(|i| i["sent_bytes"].as_f64().unwrap())
        .sum()
}

#[test]
fn net_loopback_serves_the_intervals_it_prints() {
    let m = Metered::start(&[
        "net",
        "--loopback",
        "-t",
        "3",
        "-i",
        "0.5",
        "-P",
        "2",
        "--json",
    ]);
    let a = m.scrape_until(Duration::from_secs(10), |e| {
        e.sum("nsperf_net_intervals_total", &[]) >= 2.0
    });
    let b = m.scrape_until(Duration::from_secs(10), |e| {
        e.sum("nsperf_net_intervals_total", &[]) >= 4.0
    });
    counters_never_go_back(&a, &b);
    assert_eq!(b.types["nsperf_net_bytes"], "counter");
    assert_eq!(b.types["nsperf_net_throughput_bits_per_second"], "gauge");
    assert_eq!(
        b.values("nsperf_net_bytes_total", &["direction=\"up\""])
            .len(),
        2
    );
    assert!(b.sum("nsperf_net_bytes_total", &[]) > a.sum("nsperf_net_bytes_total", &[]));
    assert!(b.sum("nsperf_net_throughput_bits_per_second", &[]) > 0.0);
    assert!(
        b.values("nsperf_net_cwnd_bytes", &[])
            .iter()
            .all(|&c| c > 0.0)
    );
    if let Some(t) = scrape_curl(m.addr, "net --metrics-listen scraped with curl") {
        let c = parse(&t);
        counters_never_go_back(&b, &c);
    }
    let (code, out) = m.finish(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    // The live figures are the report's first intervals exactly: the same samples.
    let iv = j["intervals"].as_array().expect("intervals");
    assert!(iv.iter().all(|i| i["direction"] == "up"));
    for e in [&a, &b] {
        let k = e.one("nsperf_net_intervals_total", &[]) as usize;
        let want = first_intervals(iv, k);
        let got = e.sum("nsperf_net_bytes_total", &[]);
        assert_eq!(got, want, "after {k} intervals");
    }
    let total = j["summary"]["sent_bytes"].as_f64().unwrap();
    assert!(b.sum("nsperf_net_bytes_total", &[]) < total);
}

#[test]
fn io_run_serves_bytes_ops_and_latency_per_job() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let m = Metered::start(&[
        "io", "run", d, "-w", "randread", "-s", "16m", "-b", "4k", "-j", "2", "-t", "3", "-i",
        "0.5", "--json",
    ]);
    let a = m.scrape_until(Duration::from_secs(20), |e| {
        e.sum("nsperf_io_intervals_total", &[]) >= 2.0
    });
    let b = m.scrape_until(Duration::from_secs(10), |e| {
        e.sum("nsperf_io_intervals_total", &[]) >= 4.0
    });
    counters_never_go_back(&a, &b);
    assert_eq!(b.types["nsperf_io_latency_seconds"], "histogram");
    for job in ["job=\"0\"", "job=\"1\""] {
        let read = [job, "op=\"read\""];
        let ops = b.one("nsperf_io_ops_total", &read);
        assert!(ops > 0.0);
        assert_eq!(b.one("nsperf_io_ops_total", &[job, "op=\"write\""]), 0.0);
        assert_eq!(b.one("nsperf_io_bytes_total", &read), ops * 4096.0);
        // The histogram counts the same ops (published by the same op, read a moment apart).
        let count = b.one("nsperf_io_latency_seconds_count", &read);
        assert!((count - ops).abs() <= 16.0, "{count} latencies, {ops} ops");
        let inf = b.one(
            "nsperf_io_latency_seconds_bucket",
            &[job, "op=\"read\"", "le=\"+Inf\""],
        );
        assert_eq!(inf, count);
        let sum = b.one("nsperf_io_latency_seconds_sum", &read);
        assert!(sum > 0.0 && sum / count < 0.1, "mean {} s", sum / count);
    }
    if let Some(t) = scrape_curl(m.addr, "io run --metrics-listen scraped with curl") {
        counters_never_go_back(&b, &parse(&t));
    }
    let (code, out) = m.finish(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{out}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Sampled at `elapsed`: between the report's intervals that ended an interval before it
    // and those that started before an interval after it.
    let iv: Vec<&serde_json::Value> = j["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["job"].is_null())
        .collect();
    for e in [&a, &b] {
        let t = e.one("nsperf_io_elapsed_seconds", &[]);
        let got = e.sum("nsperf_io_bytes_total", &[]);
        let cum = |keep: &dyn Fn(f64, f64) -> bool| -> f64 {
            iv.iter()
                .filter(|i| {
                    keep(
                        i["start_s"].as_f64().unwrap(),
                        i["length_s"].as_f64().unwrap(),
                    )
                })
                .map(|i| i["bytes"].as_f64().unwrap())
                .sum()
        };
        let low = cum(&|s, l| s + l <= t - 0.5);
        let high = cum(&|s, _| s < t + 0.5);
        assert!(
            low <= got && got <= high,
            "{low} <= {got} <= {high} at {t} s"
        );
    }
    assert!(b.sum("nsperf_io_bytes_total", &[]) <= j["summary"]["bytes"].as_f64().unwrap());
}

#[test]
fn server_serves_totals_and_each_running_test() {
    let mut m = Metered::start(&["server", "-p", "0", "-B", "127.0.0.1"]);
    let line = m.wait_line("listening on ", Duration::from_secs(10));
    let port = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .port()
        .to_string();
    let idle = parse(&scrape(m.addr));
    assert_eq!(idle.one("nsperf_server_tests_running", &[]), 0.0);
    let client = std::thread::spawn(move || {
        run(&[
            "net",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "2.5",
            "-i",
            "0.5",
            "--json",
        ])
    });
    let a = m.scrape_until(Duration::from_secs(15), |e| {
        e.sum(
            "nsperf_server_test_bytes_total",
            &["direction=\"received\""],
        ) > 0.0
    });
    assert_eq!(a.one("nsperf_server_tests_running", &[]), 1.0);
    assert_eq!(a.one("nsperf_server_tests_started_total", &[]), 1.0);
    assert!(a.sum("nsperf_server_test_throughput_bits_per_second", &[]) > 0.0);
    let b = m.scrape_until(Duration::from_secs(15), |e| {
        e.one("nsperf_server_tests_ended_total", &["status=\"completed\""]) == 1.0
    });
    counters_never_go_back(&a, &b);
    assert_eq!(b.one("nsperf_server_tests_running", &[]), 0.0);
    assert!(b.values("nsperf_server_test_bytes_total", &[]).is_empty());
    let r = client.join().unwrap().ok();
    let j = r.json();
    // The server's own count is what it reported to the client.
    let server_rx = j["summary"]["received_bytes"]
        .as_f64()
        .expect("received bytes");
    assert_eq!(
        b.one("nsperf_server_bytes_total", &["direction=\"received\""]),
        server_rx
    );
    if let Some(t) = scrape_curl(m.addr, "server --metrics-listen scraped with curl") {
        counters_never_go_back(&b, &parse(&t));
    }
}

#[test]
fn run_serves_runs_by_status_and_the_run_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("p.toml");
    std::fs::write(
        &plan,
        "name = \"m\"\nrepetitions = 1\n[matrix]\nn = [1, 2, 3, 4, 5, 6]\n[[step]]\nname = \"nap\"\ntype = \"exec\"\ncommand = [\"sh\", \"-c\", \"sleep 0.4; echo {n}\"]\n",
    )
    .unwrap();
    let db = dir.path().join("r.db");
    let m = Metered::start(&[
        "run",
        plan.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--no-report",
        "--json",
    ]);
    let ok = "status=\"ok\"";
    let a = m.scrape_until(Duration::from_secs(20), |e| {
        e.one("nsperf_run_runs_total", &[ok]) >= 1.0
    });
    assert_eq!(a.one("nsperf_run_runs_planned", &[]), 6.0);
    let b = m.scrape_until(Duration::from_secs(20), |e| {
        e.one("nsperf_run_runs_total", &[ok]) >= 3.0
            && !e.values("nsperf_run_current_run_seconds", &[]).is_empty()
    });
    counters_never_go_back(&a, &b);
    assert!(b.one("nsperf_run_current_run_seconds", &["step=\"nap\""]) >= 0.0);
    let done = b.one("nsperf_run_step_runs_total", &["step=\"nap\"", ok]);
    assert_eq!(done, b.one("nsperf_run_runs_total", &[ok]));
    assert!(b.one("nsperf_run_step_run_seconds_total", &["step=\"nap\""]) >= 0.4 * done);
    let (code, out) = m.finish(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{out}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let measured = j["measured"].as_f64().unwrap();
    assert_eq!(measured, 6.0);
    assert!(done <= measured);
}

#[test]
fn a_port_in_use_is_a_one_line_error_before_anything_runs() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let r = run(&["net", "--loopback", "-t", "1", "--metrics-listen", &addr]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("--metrics-listen") && r.stderr.contains("in use"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty());
    let r = run(&["io", "run", "/tmp", "--metrics-listen", "not-an-address"]);
    assert_eq!(r.code, Some(2), "{r:?}");
}

#[test]
fn other_paths_and_methods_are_refused() {
    let m = Metered::start(&["server", "-p", "0", "-B", "127.0.0.1"]);
    let ask = |req: &str| {
        let mut s = TcpStream::connect(m.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = String::new();
        let _ = s.read_to_string(&mut raw);
        raw
    };
    assert!(ask("GET / HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
    assert!(ask("POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n").starts_with("HTTP/1.0 405"));
    // Garbage does not take the endpoint down.
    let _ = ask("\u{1}\u{2} nonsense\r\n\r\n");
    assert!(
        parse(&scrape(m.addr))
            .types
            .contains_key("nsperf_server_bytes")
    );
}
