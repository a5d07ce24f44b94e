//! Many clients at one instant in a lab (issue 21): a plan's steps `on` a group of lab sites
//! run on every site at once, each site through its own agent (started in the site's
//! namespace once the lab is up), behind the start barrier and on the clock of `[hosts]`, and
//! merged as `[hosts]` runs are. Root, TUN and `ip`; skipped with a printed reason otherwise.

use crate::common;
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
        let clients: Vec<_> = parts
            .iter()
            .filter(|h| h.role != nsperf_results::HostRole::Server)
            .collect();
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
    let all = store.hosts(nfs.id).unwrap();
    // Through the embedded NFS server: its own count is a part of its own, beside the clients.
    let (server, parts): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|h| h.role == nsperf_results::HostRole::Server);
    assert_eq!(server.len(), 1, "{server:?}");
    assert!(nfs.metrics["server_vs_clients_pct"].is_finite());
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

/// Issue 21's "done when": 8 client sites write at once through a 200 Mbit/s star port to
/// the embedded NFS server in the server's site. The clients' aggregate (over the window
/// every client measured) is within 5 % of the server's own count over that window and at
/// or below the port's payload rate; every client got a share (Jain's index reported); and
/// every client's first measured interval began within 10 ms of the others' (the start
/// barrier is taken after each client's mount and file creation).
#[test]
fn eight_client_sites_through_one_port_agree_with_the_servers_count() {
    let what = "8 client sites against the embedded NFS server";
    if !require_lab(what) {
        return;
    }
    let dir = Scratch::new(TMPFS, "run-many-nfs");
    let export = Path::new(dir.path()).join("export");
    std::fs::create_dir(&export).unwrap();
    let plan = write_plan(
        &dir,
        &format!(
            r#"name = "eight"
repetitions = 1
[lab]
sites = ["nas"]
clients = 8
topology = "star"
rate = "200mbit"
access_rate = "1g"
[[service]]
name = "nfs"
site = "nas"
dir = "{export}"
[[step]]
name = "write"
type = "io"
on = "clients"
service = "nfs"
workload = "seqwrite"
size = "64m"
bs = "1m"
iodepth = 2
time = "5s"
"#,
            export = export.display(),
        ),
    );
    let db = Path::new(dir.path()).join("r.db").display().to_string();
    let r = run_with_limit(
        nsperf(["run", &plan, "--db", &db, "--no-report", "--json"]),
        Duration::from_secs(240),
    )
    .ok();
    let out = r.json();
    assert_eq!(out["measured"], 1, "{}\n{}", r.stdout, r.stderr);
    let store = Store::open(Path::new(&db)).unwrap();
    let runs = store.runs(store.experiment("latest").unwrap().id).unwrap();
    let run = &runs[0];
    assert_eq!(run.status, RunStatus::Ok, "{:?}", run.error);
    let m = &run.metrics;
    let value = run.value.expect("a value");
    let parts = store.hosts(run.id).unwrap();
    let clients: Vec<_> = parts
        .iter()
        .filter(|h| h.role != nsperf_results::HostRole::Server)
        .collect();
    let server: Vec<_> = parts
        .iter()
        .filter(|h| h.role == nsperf_results::HostRole::Server)
        .collect();
    assert_eq!(clients.len(), 8, "{parts:?}");
    assert_eq!(
        server.len(),
        1,
        "the server's own count is a part: {parts:?}"
    );
    eprintln!(
        "8 clients: aggregate {:.2} MiB/s over {:.2} s (server {:.2} MiB/s, {:+.2} %), Jain {:.3}, start skew {:.2} ms, shares {:?}",
        value / 1048576.0,
        m["common_window_s"],
        server[0].value / 1048576.0,
        m["server_vs_clients_pct"],
        m["fairness_jain"],
        m["start_skew_ns"] / 1e6,
        clients
            .iter()
            .map(|c| format!("{}:{:.1}%", c.host, c.metrics["share_pct"]))
            .collect::<Vec<_>>()
    );
    // The server's own count over the clients' common window against their sum.
    let diff = m["server_vs_clients_pct"];
    assert!(diff.abs() <= 5.0, "server vs clients {diff:+.2} %: {m:?}");
    // At or below what the port carries of TCP payload: 200 Mbit/s of 1514-byte frames
    // holding 1448 bytes each (MTU 1500, TCP timestamps).
    // Within the 1 % the clients' intervals can tell (a request's bytes are placed evenly
    // over the time it moved: a saturated port reads 99.9–100.1 %).
    let ceiling = 200e6 / 8.0 * 1448.0 / 1514.0;
    assert!(
        value <= ceiling * 1.01,
        "aggregate {value:.0} B/s above the port's payload rate {ceiling:.0} B/s"
    );
    // Every interval of the aggregate too: an interval never shows more than crossed the
    // port in it, though each client's 1 MiB writes complete in lumps of 1 MiB (counted at
    // completion, the sum of 8 clients' intervals was up to a third above the port).
    let (peak, sustained) = (m["peak_interval"], m["sustained_mean"]);
    eprintln!(
        "peak interval {:.2} MB/s, sustained {:.2} MB/s, port payload {:.2} MB/s",
        peak / 1e6,
        sustained / 1e6,
        ceiling / 1e6
    );
    assert!(
        peak <= ceiling * 1.03 && sustained <= ceiling * 1.01,
        "peak interval {peak:.0} B/s, sustained {sustained:.0} B/s against the port's {ceiling:.0} B/s"
    );
    // The server's interfaces over the same window: what arrived is about the clients'
    // payload (the veth counts GRO-coalesced packets, one set of headers per 64 KiB: it
    // read 23.92 MB/s with the clients' 23.90) and at most the port's rate.
    let nic = m["server.nic_rx_bytes_per_s"];
    eprintln!(
        "server NIC {:.2} MB/s in, CPU {:.0} % of a core, cores {:.0} % busy",
        nic / 1e6,
        m["server.cpu_pct"],
        m["server.cores_mean_busy_pct"]
    );
    assert!(
        nic >= value * 0.99 && nic <= 200e6 / 8.0 * 1.01,
        "server NIC {nic:.0} B/s against the clients' {value:.0} and the port's 25e6"
    );
    assert!(m["server.cpu_s"] > 0.0, "{m:?}");
    // The run says so itself: the port's figures beside the aggregate.
    let pct = m["port.payload_pct"];
    assert!((pct - value / ceiling * 100.0).abs() < 0.01, "{pct} {m:?}");
    let finding = |id: &str| run.findings.iter().any(|f| f.id == id);
    assert!(finding("port_utilisation") && !finding("above_port_rate"));
    assert!(!finding("server_count_differs"));
    assert_eq!(
        run.metric.as_ref().map(nsperf_results::Metric::as_str),
        Some("throughput_bytes_per_s")
    );
    // Every client got a share, and the shares add up.
    let jain = m["fairness_jain"];
    assert!((0.125..=1.0).contains(&jain), "{jain}");
    for c in &clients {
        assert!(c.error.is_none() && c.value > 0.0, "{c:?}");
        assert!(c.metrics["share_pct"] > 0.0, "{c:?}");
    }
    let shares: f64 = clients.iter().map(|c| c.metrics["share_pct"]).sum();
    assert!((shares - 100.0).abs() < 1e-6, "{shares}");
    // The barrier held: every client's first measured interval began within 10 ms of the
    // others' (their starts on the coordinator's clock).
    let starts: Vec<u64> = clients.iter().map(|c| c.started_unix_ns).collect();
    let skew = starts.iter().max().unwrap() - starts.iter().min().unwrap();
    assert_eq!(skew as f64, m["start_skew_ns"]);
    assert!(skew <= 10_000_000, "start skew {:.2} ms", skew as f64 / 1e6);
}

/// The same scene through SMB: a plan's Samba service in the server's site, three client sites
/// writing through it at once (checked blocks), one site reading back through it cold and
/// remote-warm, and every site reading cold at once; each client's part measured, its data
/// through its own site's link, the shares reported, and nothing left in the share after.
#[test]
fn client_sites_through_a_samba_service_of_the_plan() {
    let what = "client sites through a plan's Samba service";
    if !require_lab(what) || !require_program("smbd", what) {
        return;
    }
    let dir = Scratch::new(TMPFS, "run-many-smb");
    let export = Path::new(dir.path()).join("Share");
    std::fs::create_dir(&export).unwrap();
    let plan = write_plan(
        &dir,
        &format!(
            r#"name = "smb-sites"
repetitions = 1
[lab]
sites = ["srv"]
clients = 3
topology = "star"
rate = "200mbit"
access_rate = "1g"
[[service]]
name = "nas"
kind = "smb"
site = "srv"
dir = "{export}"
[[step]]
name = "write"
type = "io"
on = "clients"
service = "nas"
workload = "seqwrite"
size = "8m"
bs = "64k"
iodepth = 4
verify = "crc32"
time = "2s"
[[step]]
name = "read"
type = "io"
site = "c1"
service = "nas"
workload = "seqread"
size = "8m"
bs = "1m"
iodepth = 4
verify = "crc32"
phases = ["cold", "remote-warm"]
[[step]]
name = "read-all"
type = "io"
on = "clients"
service = "nas"
workload = "seqread"
size = "8m"
bs = "1m"
iodepth = 4
phases = ["cold"]
"#,
            export = export.display(),
        ),
    );
    let db = Path::new(dir.path()).join("r.db").display().to_string();
    let r = run_with_limit(
        nsperf(["run", &plan, "--db", &db, "--no-report", "--json"]),
        Duration::from_secs(180),
    )
    .ok();
    assert_eq!(r.json()["measured"], 4, "{}\n{}", r.stdout, r.stderr);
    let store = Store::open(Path::new(&db)).unwrap();
    let runs = store.runs(store.experiment("latest").unwrap().id).unwrap();
    // A cold phase on sites: each client's engine evicted the server's copy after laying its
    // file out, before the start barrier.
    let all = runs.iter().find(|r| r.step == "read-all").unwrap();
    for p in store.hosts(all.id).unwrap() {
        let report: serde_json::Value =
            serde_json::from_str(p.report_json.as_deref().unwrap()).unwrap();
        assert_eq!(report["spec"]["cache"], "cold", "{report}");
        let ids: Vec<&str> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["id"].as_str())
            .collect();
        assert!(ids.contains(&"server_cache_dropped"), "{ids:?}");
    }
    let write = runs.iter().find(|r| r.step == "write").unwrap();
    assert_eq!(write.status, RunStatus::Ok, "{:?}", write.error);
    let parts = store.hosts(write.id).unwrap();
    assert_eq!(parts.len(), 3, "{parts:?}");
    for p in &parts {
        assert!(p.error.is_none() && p.value > 0.0, "{p:?}");
        // Each client's data went out through its own site's link.
        assert!(
            p.metrics["nic.tx_bytes"] >= p.payload_bytes.unwrap() as f64,
            "{p:?}"
        );
    }
    let sum: u64 = parts.iter().filter_map(|h| h.payload_bytes).sum();
    assert_eq!(write.payload_bytes, Some(sum));
    // At most the port's rate (200 Mbit/s of frames: 25 MB/s), every client a share.
    assert!(write.value.unwrap() <= 25e6, "{:?}", write.value);
    assert!(write.metrics["fairness_jain"] > 0.5, "{:?}", write.metrics);
    // Samba keeps no count: no server part, no comparison with one; its site's counters over
    // the clients' window instead: the data arrived through its link, smbd used CPU.
    assert!(
        parts
            .iter()
            .all(|p| p.role != nsperf_results::HostRole::Server)
    );
    assert!(!write.metrics.contains_key("server_vs_clients_pct"));
    let m = &write.metrics;
    assert!(m["server.cpu_s"] > 0.0, "{m:?}");
    // The window is the one every client measured in, a little shorter than each pass.
    assert!(
        m["server.nic_rx_bytes_per_s"] >= 0.9 * write.value.unwrap(),
        "{m:?}"
    );
    let reads: Vec<_> = runs.iter().filter(|r| r.step == "read").collect();
    assert_eq!(reads.len(), 2);
    for r in reads {
        assert_eq!(r.status, RunStatus::Ok, "{:?} {:?}", r.phase, r.error);
        assert_eq!(r.payload_bytes, Some(8 << 20), "{:?}", r.phase);
    }
    // nsperf's files are gone from the share.
    let left: Vec<_> = std::fs::read_dir(&export).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}
