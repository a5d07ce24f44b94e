//! Many hosts for real (issue 10, "Done when"): a lab of 8 client sites, a server site and a
//! coordinator site; OpenSSH servers started by the test in every host site with keys the
//! test makes; `nsperf run` in the coordinator's site reaches each host through ssh (the
//! binary copied over ssh, the agent started there), runs 8 clients × 4 streams against the
//! server at one instant, and io on every client. The merged client total must equal the
//! server's own count of bytes received (±0.1 %), the start skew across agents is recorded,
//! and the io step has per-host and aggregate figures with peak and sustained.
//! Root, TUN, `ip`, ssh, sshd and ssh-keygen; skipped with a printed reason otherwise.

use crate::common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nsperf_results::{RunStatus, Store};

const SSHD: &str = "/usr/sbin/sshd";

/// The lab, its sshd processes, and the binary copied into ~/.cache, all gone on drop.
struct SshLab {
    name: String,
    sshd: Vec<Child>,
    dir: PathBuf,
    copied: Option<PathBuf>,
}

impl Drop for SshLab {
    fn drop(&mut self) {
        for c in &mut self.sshd {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = run(&["lab", "down", &self.name]);
        if let Some(p) = &self.copied {
            let _ = std::fs::remove_file(p);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "ssh-keygen failed");
}

#[test]
fn eight_clients_by_four_streams_through_ssh_agree_with_the_servers_count() {
    let what = "many hosts through ssh in a lab";
    if !require_lab(what) || !require_program("ssh", what) || !require_program("ssh-keygen", what) {
        return;
    }
    if !Path::new(SSHD).exists() {
        skip(&format!("{what}: {SSHD} is not installed (openssh-server)"));
        return;
    }
    let name = format!("h{}", std::process::id() % 100_000);
    let dir = std::env::temp_dir().join(format!("nsperf-test-hosts-lab-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The agent binary lands in ~/.cache/nsperf/nsperf-HASH: removed after unless it was there.
    let hash = nsperf_plan::agent::file_hash(Path::new(nsperf_bin())).unwrap();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or("/root".into());
    let cached = home.join(format!(".cache/nsperf/nsperf-{hash}"));
    let mut lab = SshLab {
        name: name.clone(),
        sshd: Vec::new(),
        dir: dir.clone(),
        copied: (!cached.exists()).then_some(cached),
    };
    keygen(&dir.join("hostkey"));
    keygen(&dir.join("userkey"));
    std::fs::copy(dir.join("userkey.pub"), dir.join("authorized_keys")).unwrap();
    std::fs::write(
        dir.join("sshd_config"),
        format!(
            "HostKey {d}/hostkey\nAuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n",
            d = dir.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all("/run/sshd").unwrap();
    run(&[
        "lab",
        "up",
        &name,
        "--topology",
        "star",
        "--sites",
        "srv,coord",
        "--clients",
        "8",
    ])
    .ok();
    // srv is 10.77.0.1, coord .2, c1..c8 .3 to .10.
    let hosts: Vec<(String, u32)> = std::iter::once(("srv".to_string(), 1))
        .chain((1..=8).map(|i| (format!("c{i}"), i + 2)))
        .collect();
    for (site, a) in &hosts {
        let child = nsperf(["lab", "exec", &name, site, "--", SSHD, "-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .arg("-o")
            .arg(format!("ListenAddress=10.77.0.{a}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        lab.sshd.push(child);
    }
    let mut plan = String::from("name = \"eight-by-four\"\nrepetitions = 1\n");
    for (site, a) in &hosts {
        plan.push_str(&format!(
            "[hosts.{site}]\nssh = \"root@10.77.0.{a}\"\nssh_identity = \"{}\"\nssh_options = [\"StrictHostKeyChecking=no\", \"UserKnownHostsFile=/dev/null\", \"LogLevel=ERROR\"]\n",
            dir.join("userkey").display()
        ));
    }
    plan.push_str(&format!(
        r#"[groups]
clients = ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"]
[[step]]
name = "upload"
type = "net"
on = "clients"
server = "srv"
streams = 4
time = "4s"
[[step]]
name = "write"
type = "io"
on = "clients"
dir = "{}"
workload = "seqwrite"
size = "16m"
bs = "1m"
time = "3s"
"#,
        dir.display()
    ));
    let plan_path = dir.join("plan.toml");
    std::fs::write(&plan_path, plan).unwrap();
    let db = dir.join("r.db");
    // sshd takes a moment to listen, longer on a loaded machine: wait for every one.
    for (site, a) in &hosts {
        wait_sshd(&name, site, &format!("10.77.0.{a}:22"));
    }
    let r = run_with_limit(
        {
            let mut c = nsperf(["lab", "exec", &name, "coord", "--", nsperf_bin(), "run"]);
            c.arg(&plan_path)
                .arg("--db")
                .arg(&db)
                .args(["--no-report", "--json"]);
            c
        },
        Duration::from_secs(240),
    )
    .ok();
    if r.json()["measured"] != 2 {
        panic!(
            "{}\n{}\nwhat the store holds: {}",
            r.stdout,
            r.stderr,
            stored_failures(&db)
        );
    }

    let store = Store::open(&db).unwrap();
    let runs = store.runs(store.experiment("latest").unwrap().id).unwrap();
    let net = runs.iter().find(|r| r.step == "upload").unwrap();
    assert_eq!(net.status, RunStatus::Ok);
    let m = &net.metrics;
    assert_eq!(m["hosts_measured"], 8.0);
    assert_eq!(m["server.tests_completed"], 8.0);
    let diff = m["server_vs_clients_pct"].abs();
    assert!(
        diff <= 0.1,
        "clients sent {} bytes, the server received {} ({diff} %)",
        m["clients.sent_bytes"],
        m["server.received_bytes"]
    );
    // The start skew across agents is measured (each host's engine start, on the
    // coordinator's clock) and recorded with the clocks' error bound.
    assert!(
        m["start_skew_ns"] > 0.0 && m["start_skew_ns"] < 1e9,
        "{m:?}"
    );
    assert!(m["clock_error_max_ns"] > 0.0);
    let parts = store.hosts(net.id).unwrap();
    assert_eq!(parts.len(), 9, "8 clients and the server");
    for p in parts
        .iter()
        .filter(|p| p.role == nsperf_results::HostRole::Client)
    {
        assert!(p.error.is_none() && p.value > 0.0, "{p:?}");
        let streams: usize = serde_json::from_str::<serde_json::Value>(
            p.report_json.as_ref().unwrap(),
        )
        .unwrap()["spec"]["streams"]
            .as_u64()
            .unwrap() as usize;
        assert_eq!(streams, 4);
        // The agent's own figures of its host: the step process's CPU, and the site's NIC
        // carried at least the payload it sent (headers on top).
        assert!(p.metrics["process.cpu_s"] > 0.0, "{:?}", p.metrics);
        assert!(
            p.metrics["nic.tx_bytes"] >= p.metrics["sent_bytes"],
            "{:?}",
            p.metrics
        );
    }

    let io = runs.iter().find(|r| r.step == "write").unwrap();
    assert_eq!(io.status, RunStatus::Ok);
    assert_eq!(store.hosts(io.id).unwrap().len(), 8);
    for k in ["peak_interval", "sustained_mean", "start_skew_ns"] {
        assert!(
            io.metrics.get(k).is_some_and(|v| *v > 0.0),
            "{k}: {:?}",
            io.metrics
        );
    }
    assert!(!store.series(io.id).unwrap().is_empty());
}

/// Waits (at most 20 s) until the sshd of `site` listens on `addr`.
fn wait_sshd(lab: &str, site: &str, addr: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let out = nsperf(["lab", "exec", lab, site, "--", "ss", "-Hltn"])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&out.stdout).contains(addr) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sshd in {site} does not listen on {addr} after 20 s: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every run's and host part's error the store holds, for a failure message.
fn stored_failures(db: &Path) -> String {
    let Ok(store) = Store::open(db) else {
        return "no store".into();
    };
    let Ok(exp) = store.experiment("latest") else {
        return "no experiment".into();
    };
    let mut out = String::new();
    for run in store.runs(exp.id).unwrap_or_default() {
        out.push_str(&format!("\n{}: {:?} {:?}", run.step, run.status, run.error));
        for p in store.hosts(run.id).unwrap_or_default() {
            if let Some(e) = &p.error {
                out.push_str(&format!("\n  {}: {e}", p.host));
            }
        }
    }
    out
}
