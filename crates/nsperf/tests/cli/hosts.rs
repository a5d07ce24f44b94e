//! Plans with `[hosts]`: agents started on this host (`local = true`, the way ssh starts them
//! elsewhere), steps `on` a group at one instant, results merged per host and in aggregate,
//! the server's own count beside the clients' sum; faults (an unreachable host, a host lost
//! mid-step) and load-time errors.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::scratch::{Scratch, TMPFS};
use nsperf_results::{RunStatus, Store};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write_plan(dir: &Scratch, text: &str) -> String {
    let p = Path::new(dir.path()).join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn hosts_block(clients: usize) -> String {
    let mut s = String::from("[hosts.srv]\nlocal = true\n");
    let mut names = Vec::new();
    for i in 1..=clients {
        s.push_str(&format!("[hosts.c{i}]\nlocal = true\n"));
        names.push(format!("\"c{i}\""));
    }
    s.push_str(&format!("[groups]\nclients = [{}]\n", names.join(", ")));
    s
}

#[test]
fn clients_on_a_group_against_one_server_agree_with_its_count_and_io_runs_per_host() {
    let dir = Scratch::new(TMPFS, "hosts-plan");
    let port = free_port();
    let plan = write_plan(
        &dir,
        &format!(
            r#"name = "hosts-local"
repetitions = 1
{}
[[step]]
name = "upload"
type = "net"
on = "clients"
server = "srv"
port = {port}
streams = 2
time = "2s"

[[step]]
name = "write"
type = "io"
on = "clients"
dir = "{}"
workload = "seqwrite"
size = "8m"
bs = "1m"
"#,
            hosts_block(3),
            dir.path()
        ),
    );
    let db = Path::new(dir.path()).join("r.db").display().to_string();
    let r = common::run_with_limit(
        common::nsperf(["run", &plan, "--db", &db, "--no-report", "--json"]),
        Duration::from_secs(120),
    )
    .ok();
    assert_eq!(r.json()["measured"], 2, "{}", r.stdout);

    let store = Store::open(Path::new(&db)).unwrap();
    let runs = store.runs(store.experiment("latest").unwrap().id).unwrap();
    let net = runs.iter().find(|r| r.step == "upload").unwrap();
    assert_eq!(net.status, RunStatus::Ok);
    let parts = store.hosts(net.id).unwrap();
    let clients: Vec<_> = parts
        .iter()
        .filter(|h| h.role == nsperf_results::HostRole::Client)
        .collect();
    assert_eq!(clients.len(), 3, "{parts:?}");
    // The aggregate is the sum of the clients' rates over the window all of them measured.
    let sum: f64 = clients
        .iter()
        .map(|h| h.metrics.get("window_rate").copied().unwrap_or(h.value))
        .sum();
    assert!((net.value.unwrap() - sum).abs() < 1e-6 * sum.max(1.0));
    // The server's own count of bytes received equals what the clients sent (±0.1 %).
    let m = &net.metrics;
    let diff = m["server_vs_clients_pct"].abs();
    assert!(diff <= 0.1, "server vs clients {diff} %: {m:?}");
    assert_eq!(m["server.tests_completed"], 3.0);
    // The clients started at one instant: within 50 ms of each other on one host.
    assert!(m["start_skew_ns"] < 50e6, "skew {} ns", m["start_skew_ns"]);
    assert!(m.contains_key("peak_interval") && m.contains_key("sustained_mean"));
    assert!(!store.series(net.id).unwrap().is_empty());
    report_draws_the_clients(&dir, &db, net, &parts);

    let io = runs.iter().find(|r| r.step == "write").unwrap();
    assert_eq!(io.status, RunStatus::Ok);
    let parts = store.hosts(io.id).unwrap();
    assert_eq!(parts.len(), 3);
    assert!(parts.iter().all(|h| h.error.is_none() && h.value > 0.0));
    assert_eq!(io.payload_bytes, Some(3 * (8 << 20)));
    assert!(dir.leftovers().is_empty(), "{:?}", dir.leftovers());
}

/// Issue 21 item 3: the report of a step on three clients draws each client's line beside
/// the aggregate and their shares as bars, with the stored peak, sustained mean and Jain's
/// index (not figures computed again).
fn report_draws_the_clients(
    dir: &Scratch,
    db: &str,
    net: &nsperf_results::RunRecord,
    parts: &[nsperf_results::HostPart],
) {
    let html = Path::new(dir.path()).join("r.html").display().to_string();
    common::run(&["report", "latest", "--db", db, "-o", &html]).ok();
    let html = std::fs::read_to_string(&html).unwrap();
    let (time, shares) = html
        .split_once("data-chart=\"client-shares\"")
        .expect("a chart of the clients' shares");
    let time = time
        .split_once("data-chart=\"clients-over-time\"")
        .expect("a chart of the clients over time")
        .1;
    // Each client's own series is stored on the run's clock and drawn as its line.
    for c in ["c1", "c2", "c3"] {
        let h = parts.iter().find(|h| h.host == c).unwrap();
        assert!(!h.series.is_empty(), "{c}: no series stored");
        assert!(time.contains(&format!(">{c}</text>")), "{c}: {time}");
        let share = h.metrics["share_pct"];
        assert!(
            shares.contains(&format!("{c} ({share:.1} %)")),
            "{c}: {shares}"
        );
    }
    assert!(
        time.contains(">aggregate of the 3 clients</text>"),
        "{time}"
    );
    let m = &net.metrics;
    let f = |k: &str| nsperf_results::Metric::THROUGHPUT_BPS.format(m[k]);
    let stated = format!(
        "aggregate: peak interval {}, sustained mean {} (from {:.1} s)",
        f("peak_interval"),
        f("sustained_mean"),
        m["steady_start_s"]
    );
    assert!(time.contains(&stated), "{stated}: {time}");
    let jain = format!("Jain's fairness index {:.3}", m["fairness_jain"]);
    assert!(shares.contains(&jain), "{jain}: {shares}");
    assert!(shares.contains("slowest: c"), "{shares}");
}

#[test]
fn an_unreachable_host_fails_the_plan_before_any_run() {
    let dir = Scratch::new(TMPFS, "hosts-unreachable");
    // A port nothing listens on.
    let port = free_port();
    let plan = write_plan(
        &dir,
        &format!(
            r#"name = "unreachable"
repetitions = 1
[hosts.a]
agent = "127.0.0.1:{port}"
[[step]]
name = "w"
type = "io"
on = "a"
dir = "{}"
workload = "seqwrite"
size = "1m"
"#,
            dir.path()
        ),
    );
    let db = Path::new(dir.path()).join("r.db").display().to_string();
    let t0 = std::time::Instant::now();
    let r = common::run_with_limit(
        common::nsperf(["run", &plan, "--db", &db, "--no-report"]),
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(5), "{}", r.stderr);
    assert!(
        r.stderr.contains("a: cannot reach the agent"),
        "{}",
        r.stderr
    );
    assert!(t0.elapsed() < Duration::from_secs(15));
}

#[test]
fn plan_errors_about_hosts_are_found_at_load() {
    let dir = Scratch::new(TMPFS, "hosts-errors");
    let cases = [
        (
            "[hosts.a]\nlocal = true\nssh = \"x\"\n",
            "on = \"a\"",
            "exactly one of",
        ),
        ("[hosts.a]\nlocal = true\n", "on = \"b\"", "neither a host"),
        (
            "[hosts.a]\nlocal = true\nallow = [\"net\"]\n",
            "on = \"a\"",
            "runs io on this host",
        ),
        ("", "on = \"a\"", "the plan has no [hosts]"),
        (
            "[hosts.a]\nagent = \"192.0.2.1:7000\"\n",
            "on = \"a\"\nphases = [\"cold\"]",
            "which lab sites and local agents share but host a does not",
        ),
        (
            "[hosts.a]\nlocal = true\n[groups]\ng = [\"a\", \"z\"]\n",
            "on = \"a\"",
            "not in [hosts]",
        ),
    ];
    for (hosts, on, want) in cases {
        let plan = write_plan(
            &dir,
            &format!(
                "name = \"e\"\n{hosts}\n[[step]]\nname = \"w\"\ntype = \"io\"\n{on}\nworkload = \"seqwrite\"\nsize = \"1m\"\n"
            ),
        );
        let r = common::run(&["run", &plan, "--dry-run"]);
        assert_eq!(r.code, Some(3), "{hosts} {on}: {}", r.stderr);
        assert!(r.stderr.contains(want), "want {want}: {}", r.stderr);
    }
    // A network step on hosts needs its server host, not one of the clients.
    let plan = write_plan(
        &dir,
        "name = \"e\"\n[hosts.a]\nlocal = true\n[hosts.b]\nlocal = true\n[[step]]\nname = \"n\"\ntype = \"net\"\non = \"a\"\nserver = \"a\"\n",
    );
    let r = common::run(&["run", &plan, "--dry-run"]);
    assert!(r.stderr.contains("also one of the clients"), "{}", r.stderr);
}

/// Issue 21: an io step on hosts through a `[[service]]` on this host's loopback reaches the
/// service at the port it listens on (the hosts were told the portmapper at 127.0.0.1:111,
/// and every host failed), and a plan giving such a step to a host that is not on this host
/// is refused at load.
#[test]
fn a_step_on_hosts_through_a_loopback_service_reaches_it_at_its_port() {
    let dir = Scratch::new(TMPFS, "hosts-service");
    let export = Path::new(dir.path()).join("export");
    std::fs::create_dir(&export).unwrap();
    let plan_text = |hosts: &str| {
        format!(
            r#"name = "hosts-service"
repetitions = 1
{hosts}
[[service]]
name = "nas"
dir = "{}"
[[step]]
name = "write"
type = "io"
on = "clients"
service = "nas"
workload = "seqwrite"
size = "2m"
bs = "64k"
"#,
            export.display()
        )
    };
    let plan = write_plan(&dir, &plan_text(&hosts_block(2)));
    let db = Path::new(dir.path()).join("r.db").display().to_string();
    let r = common::run_with_limit(
        common::nsperf(["run", &plan, "--db", &db, "--no-report", "--json"]),
        Duration::from_secs(120),
    )
    .ok();
    assert_eq!(r.json()["measured"], 1, "{}\n{}", r.stdout, r.stderr);
    let store = Store::open(Path::new(&db)).unwrap();
    let runs = store.runs(store.experiment("latest").unwrap().id).unwrap();
    assert_eq!(runs[0].status, RunStatus::Ok, "{:?}", runs[0].error);
    // The two hosts' parts, and the service's own count beside them.
    let (servers, parts): (Vec<_>, Vec<_>) = store
        .hosts(runs[0].id)
        .unwrap()
        .into_iter()
        .partition(|h| h.role == nsperf_results::HostRole::Server);
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(servers.len(), 1, "{servers:?}");
    for p in &parts {
        assert!(p.error.is_none() && p.value > 0.0, "{p:?}");
        let report: serde_json::Value =
            serde_json::from_str(p.report_json.as_ref().unwrap()).unwrap();
        // The service's own port (a free one), not the portmapper's.
        let port = report["spec"]["target"]["url"]["port"].as_u64();
        assert!(
            port.is_some_and(|p| p != 111),
            "{}",
            report["spec"]["target"]
        );
        assert_eq!(
            report["summary"]["remote"]["server"],
            format!("127.0.0.1:{}", port.unwrap())
        );
    }
    assert_eq!(runs[0].payload_bytes, Some(2 * (2 << 20)));

    let remote = plan_text(
        "[hosts.c1]\nlocal = true\n[hosts.c2]\nagent = \"10.0.0.9:5400\"\n[groups]\nclients = [\"c1\", \"c2\"]\n",
    );
    let plan = write_plan(&dir, &remote);
    let r = common::run(&["run", &plan, "--dry-run"]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "listens on this host's loopback, which host c2 (not local = true) cannot reach"
        ),
        "{}",
        r.stderr
    );
}

/// Issue 21: a run in which every host's part failed is stored as failed with the hosts'
/// errors (it was stored as partial, with a headline of 0.000 s).
#[test]
fn a_run_in_which_every_host_failed_is_stored_as_failed() {
    let dir = Scratch::new(TMPFS, "hosts-all-failed");
    let plan = write_plan(
        &dir,
        r#"name = "all-failed"
repetitions = 1
[hosts.c1]
local = true
[hosts.c2]
local = true
[groups]
clients = ["c1", "c2"]
[[step]]
name = "fails"
type = "exec"
on = "clients"
command = ["false"]
"#,
    );
    let db = Path::new(dir.path()).join("r.db").display().to_string();
    let r = common::run_with_limit(
        common::nsperf(["run", &plan, "--db", &db, "--no-report", "--json"]),
        Duration::from_secs(60),
    )
    .ok();
    assert_eq!(r.json()["failed"], 1, "{}\n{}", r.stdout, r.stderr);
    let store = Store::open(Path::new(&db)).unwrap();
    let runs = store.runs(store.experiment("latest").unwrap().id).unwrap();
    assert_eq!(runs[0].status, RunStatus::Failed);
    let why = runs[0].error.as_deref().unwrap_or_default();
    assert!(
        why.contains("every host failed") && why.contains("c1:") && why.contains("c2:"),
        "{why}"
    );
    assert_eq!(runs[0].value, None, "a failed run has no headline");
}

/// The pids of `nsperf agent --stdio` children of `parent`.
fn agents_of(parent: u32) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) && cmd.split(|b| *b == 0).any(|a| a == b"--stdio") {
            v.push(pid);
        }
    }
    v.sort();
    v
}

#[test]
fn an_agent_killed_mid_step_makes_the_run_partial_and_resume_completes_it() {
    let dir = Scratch::new(TMPFS, "hosts-killed");
    let plan = write_plan(
        &dir,
        r#"name = "killed"
repetitions = 1
[hosts.a]
local = true
[hosts.b]
local = true
[groups]
both = ["a", "b"]
[[step]]
name = "nap"
type = "exec"
on = "both"
command = ["sleep", "2"]
"#,
    );
    let db = Path::new(dir.path()).join("r.db").display().to_string();
    let child = common::nsperf(["run", &plan, "--db", &db, "--no-report", "-q"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Both agents up and the step running, then one agent killed.
    let t0 = std::time::Instant::now();
    let agents = loop {
        let a = agents_of(child.id());
        if a.len() == 2 || t0.elapsed() > Duration::from_secs(20) {
            break a;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(agents.len(), 2, "agents did not start");
    std::thread::sleep(Duration::from_millis(1200));
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's child.
    unsafe { libc::kill(agents[1] as libc::pid_t, libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");

    let store = Store::open(Path::new(&db)).unwrap();
    let exp = store.experiment("latest").unwrap();
    let run = &store.runs(exp.id).unwrap()[0];
    assert_eq!(run.status, RunStatus::Partial, "{run:?}");
    let e = run.error.as_deref().unwrap_or("");
    assert!(e.contains("agent lost"), "{e}");
    let parts = store.hosts(run.id).unwrap();
    assert_eq!(
        parts.iter().filter(|h| h.error.is_none()).count(),
        1,
        "{parts:?}"
    );
    assert!(run.value.unwrap() >= 1.9, "the other host's figure is kept");
    assert_eq!(exp.status.to_string(), "partial");
    drop(store);

    // --resume runs the partial run again, now on both hosts.
    common::run_with_limit(
        common::nsperf(["run", &plan, "--db", &db, "--no-report", "--resume", "-q"]),
        Duration::from_secs(60),
    )
    .ok();
    let store = Store::open(Path::new(&db)).unwrap();
    let runs = store.runs(exp.id).unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, RunStatus::Ok);
    assert_eq!(store.hosts(runs[0].id).unwrap().len(), 2);
}

#[test]
fn batch_groups_of_slurm_and_kubernetes_expand_at_load() {
    let dir = Scratch::new(TMPFS, "hosts-batch");
    let plan = write_plan(
        &dir,
        r#"name = "batch"
[hosts.srv]
ssh = "root@10.0.0.1"
[slurm]
group = "nodes"
tasks = 3
psk_file = "/shared/key"
[kubernetes]
group = "pods"
count = 2
image = "registry.example/nsperf:0.1"
psk_file = "key"
[[step]]
name = "up"
type = "net"
on = "nodes"
server = "srv"
[[step]]
name = "w"
type = "io"
on = "pods"
workload = "seqwrite"
size = "1m"
"#,
    );
    let r = common::run(&["run", &plan, "--dry-run"]).ok();
    for want in [
        "host nodes-2: address , agent 2 of batch group nodes, runs net",
        "host pods-1: address pods-1.pods.default.svc, agent 1 of batch group pods, runs io",
        "host srv: address 10.0.0.1, agent started through ssh root@10.0.0.1, runs server",
        "group nodes: nodes-0, nodes-1, nodes-2",
        "up (net) phases - on nodes, server srv",
    ] {
        assert!(r.stdout.contains(want), "want {want}:\n{}", r.stdout);
    }
    // A Slurm task cannot be a server: its address is known only once it runs.
    let plan = write_plan(
        &dir,
        "name = \"b\"\n[hosts.c]\nlocal = true\n[slurm]\ngroup = \"n\"\ntasks = 2\npsk_file = \"k\"\n[[step]]\nname = \"x\"\ntype = \"net\"\non = \"c\"\nserver = \"n-0\"\n",
    );
    let r = common::run(&["run", &plan, "--dry-run"]);
    assert_eq!(r.code, Some(3));
    assert!(r.stderr.contains("is a Slurm task"), "{}", r.stderr);
}
