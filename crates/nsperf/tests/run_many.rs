//! Many clients at one instant in a lab (issue 21): a plan's steps `on` a group of lab sites
//! run on every site at once, each site through its own agent (started in the site's
//! namespace once the lab is up), behind the start barrier and on the clock of `[hosts]`, and
//! merged as `[hosts]` runs are. Root, TUN and `ip`; skipped with a printed reason otherwise.

mod common;
use common::scratch::{Scratch, TMPFS};
use common::*;

use std::path::Path;
use std::time::Duration;

use nsperf_results::{RunStatus, Store};

fn write_plan(dir: &Scratch, text: &str) -> String {
    let p = Path::new(dir.path()).join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Net, io (through a file service in the server's site, and in each site's own directory)
/// and exec steps on four client sites of a star: every site measured, each in its own
/// namespace (its own address, its own NIC counters), the clients' total equal to the
/// server's own count, and the lab gone after.
#[test]
fn steps_on_lab_sites_run_on_every_site_at_one_instant() {
    let what = "steps on lab sites";
    if !require_lab(what) {
        return;
    }
    let dir = Scratch::new(TMPFS, "run-many");
    let export = Path::new(dir.path()).join("export");
    let local = Path::new(dir.path()).join("local");
    std::fs::create_dir(&export).unwrap();
    std::fs::create_dir(&local).unwrap();
    let addrs = Path::new(dir.path()).join("addrs");
    let plan = write_plan(
        &dir,
        &format!(
            r#"name = "sites"
repetitions = 1
[lab]
sites = ["srv"]
clients = 4
topology = "star"
rate = "200mbit"
access_rate = "1g"
[[service]]
name = "nas"
site = "srv"
dir = "{export}"
[[step]]
name = "nfs"
type = "io"
on = "clients"
service = "nas"
workload = "seqwrite"
size = "8m"
bs = "64k"
iodepth = 4
time = "2s"
[[step]]
name = "local"
type = "io"
on = "clients"
dir = "{local}"
workload = "seqwrite"
size = "4m"
bs = "1m"
[[step]]
name = "tcp"
type = "net"
on = "clients"
server = "srv"
time = "2s"
[[step]]
name = "where"
type = "exec"
on = "clients"
command = ["sh", "-c", "ip -o -4 addr show dev wan0 | awk '{{{{print $4}}}}' >> {addrs}"]
"#,
            export = export.display(),
            local = local.display(),
            addrs = addrs.display(),
        ),
    );
    let dry = run(&["run", &plan, "--dry-run"]).ok();
    assert!(
        dry.stdout
            .contains("host c4: address 10.77.0.5, agent started in lab site c4 once the lab is up, runs net, io, exec")
            && dry.stdout.contains("group clients: c1, c2, c3, c4"),
        "{}",
        dry.stdout
    );
    let db = Path::new(dir.path()).join("r.db").display().to_string();
    let r = run_with_limit(
        nsperf(["run", &plan, "--db", &db, "--no-report", "--json"]),
        Duration::from_secs(180),
    )
    .ok();
    let out = r.json();
    assert_eq!(out["measured"], 4, "{}\n{}", r.stdout, r.stderr);

    let store = Store::open(Path::new(&db)).unwrap();
    let runs = store.runs(store.experiment("latest").unwrap().id).unwrap();
    for run in &runs {
        assert_eq!(run.status, RunStatus::Ok, "{}: {:?}", run.step, run.error);
        let parts = store.hosts(run.id).unwrap();
        let clients: Vec<_> = parts.iter().filter(|h| h.role != "server").collect();
        assert_eq!(clients.len(), 4, "{}: {parts:?}", run.step);
        assert!(
            clients.iter().all(|h| h.error.is_none() && h.value > 0.0),
            "{}: {clients:?}",
            run.step
        );
        let m = &run.metrics;
        assert_eq!(m["hosts_measured"], 4.0);
        // One instant: the barrier's skew is measured; the issue's bound is the test of
        // run_many_nfs (here only that it was recorded and is below a second).
        assert!(m["start_skew_ns"] < 1e9, "{}: {m:?}", run.step);
    }
    let by = |s: &str| runs.iter().find(|r| r.step == s).unwrap();
    let nfs = by("nfs");
    let parts = store.hosts(nfs.id).unwrap();
    let sum: u64 = parts.iter().filter_map(|h| h.payload_bytes).sum();
    assert_eq!(nfs.payload_bytes, Some(sum));
    assert!(!store.series(nfs.id).unwrap().is_empty());
    // How evenly the clients shared the port: Jain's index, each one's share.
    let jain = nfs.metrics["fairness_jain"];
    assert!((0.25..=1.0).contains(&jain), "{jain}");
    let shares: f64 = parts.iter().map(|p| p.metrics["share_pct"]).sum();
    assert!((shares - 100.0).abs() < 1e-6, "{shares}");
    for p in &parts {
        // Each client wrote through its own site's link: its wan0 sent at least its data.
        assert!(
            p.metrics["nic.tx_bytes"] >= p.payload_bytes.unwrap() as f64,
            "{p:?}"
        );
    }
    assert_eq!(by("local").payload_bytes, Some(4 * (4 << 20)));
    let tcp = by("tcp");
    let diff = tcp.metrics["server_vs_clients_pct"].abs();
    assert!(diff <= 0.1, "server vs clients {diff} %: {:?}", tcp.metrics);
    // Each command ran in its own site: four different addresses.
    let mut seen: Vec<String> = std::fs::read_to_string(&addrs)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "10.77.0.2/24",
            "10.77.0.3/24",
            "10.77.0.4/24",
            "10.77.0.5/24"
        ]
    );
    // The lab went with the run, the agents in its sites with it.
    let lab = out["lab"].as_str().unwrap().to_string();
    let list = run(&["lab", "list"]);
    assert!(!list.stdout.contains(&lab), "{}", list.stdout);
}
