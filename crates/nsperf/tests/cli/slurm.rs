//! Slurm for real, on a one-node cluster the test makes: munged, slurmctld and slurmd (Debian's
//! `munge` and `slurm-wlm`) run in the foreground as the test's children, their key,
//! configuration, state and sockets in a temporary directory, their ports picked free. Then:
//! - agents started with srun inside an allocation (`slurm_links`, run by this very test binary
//!   re-executed under `salloc`), a server step on one and a client step on the other, the
//!   step stopped by SIGTERM to srun;
//! - srun failing (a binary the nodes lack): a clear error at once, not a timeout;
//! - the script of `nsperf agent slurm-script` submitted with sbatch and run to its end.
//!
//! Every agent's command line names the test's directory, so the test can tell that none
//! outlived its step.

use crate::common;

use std::net::{TcpListener, ToSocketAddrs};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nsperf_plan::agent::{Announcement, Fleet, SlurmAgents, StepClass, slurm_links};
use nsperf_plan::step::{NetClient, StepReport, StepSpec};

/// A one-node Slurm cluster; dropping it cancels its jobs and ends its daemons.
struct MiniSlurm {
    dir: tempfile::TempDir,
    conf: PathBuf,
    daemons: Vec<common::KillOnDrop>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_until(limit: Duration, what: &str, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl MiniSlurm {
    fn start(node: &str) -> MiniSlurm {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        for sub in ["state", "spool", "run"] {
            std::fs::create_dir(d.join(sub)).unwrap();
        }
        let mut key = vec![0u8; 1024];
        getrandom_fill(&mut key);
        std::fs::write(d.join("munge.key"), &key).unwrap();
        std::fs::set_permissions(d.join("munge.key"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let sock = d.join("run/munge.sock");
        let mut daemons = Vec::new();
        let quiet = |mut c: Command| {
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            common::KillOnDrop(c.spawn().unwrap())
        };
        let mut munged = Command::new("munged");
        munged
            .arg("--foreground")
            .arg("--force")
            .arg(format!("--key-file={}", d.join("munge.key").display()))
            .arg(format!("--socket={}", sock.display()))
            .arg(format!("--pid-file={}", d.join("run/munged.pid").display()))
            .arg(format!("--log-file={}", d.join("munged.log").display()))
            .arg(format!("--seed-file={}", d.join("munge.seed").display()));
        daemons.push(quiet(munged));
        wait_until(Duration::from_secs(10), "munged's socket", || sock.exists());

        let conf = d.join("slurm.conf");
        let p = |s: &str| d.join(s).display().to_string();
        std::fs::write(
            &conf,
            format!(
                "ClusterName=nsperftest\nSlurmctldHost={node}(127.0.0.1)\nSlurmctldPort={cp}\n\
                 SlurmdPort={dp}\nSlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\n\
                 CredType=cred/munge\nAuthInfo=socket={sock}\nStateSaveLocation={state}\n\
                 SlurmdSpoolDir={spool}\nSlurmctldPidFile={run}/slurmctld.pid\n\
                 SlurmdPidFile={run}/slurmd.pid\nSlurmctldLogFile={log}/slurmctld.log\n\
                 SlurmdLogFile={log}/slurmd.log\nProctrackType=proctrack/pgid\n\
                 TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n\
                 AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\n\
                 SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nMpiDefault=none\n\
                 ReturnToService=2\nSchedulerType=sched/builtin\n\
                 NodeName={node} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n\
                 PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n",
                cp = free_port(),
                dp = free_port(),
                sock = sock.display(),
                state = p("state"),
                spool = p("spool"),
                run = p("run"),
                log = d.display(),
            ),
        )
        .unwrap();
        let mut ctld = Command::new("slurmctld");
        ctld.args(["-D", "-i", "-f"]).arg(&conf);
        daemons.push(quiet(ctld));
        let mut slurmd = Command::new("slurmd");
        slurmd.args(["-D", "-N", node, "-f"]).arg(&conf);
        daemons.push(quiet(slurmd));
        let s = MiniSlurm { dir, conf, daemons };
        wait_until(Duration::from_secs(30), "the node idle in sinfo", || {
            s.command("sinfo")
                .args(["-h", "-o", "%t"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        });
        s
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The processes whose command line names this cluster's directory (its agents).
    fn own_processes(&self) -> Vec<(u32, String)> {
        let mark = self.path().display().to_string();
        let mut v = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(&mark) && cmd.contains(" agent ") {
                v.push((pid, cmd));
            }
        }
        v
    }
}

impl Drop for MiniSlurm {
    fn drop(&mut self) {
        let _ = self.command("scancel").args(["--user=root"]).status();
        std::thread::sleep(Duration::from_millis(500));
        // Agents of a failed test, named by pid (their command lines hold our directory).
        for (pid, _) in self.own_processes() {
            // SAFETY: kill() of a process this test started (found by its unique path).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        for d in self.daemons.iter_mut().rev() {
            // SAFETY: kill() of our own child.
            unsafe { libc::kill(d.0.id() as libc::pid_t, libc::SIGTERM) };
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = d.0.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.daemons.clear();
    }
}

fn getrandom_fill(buf: &mut [u8]) {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(buf)
        .unwrap();
}

/// The inner test's full name in this binary (`MODULE::inside_a_slurm_allocation`: the
/// tests of an area share one binary, one module per file), for `--exact`.
fn inner_test_name() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    format!("{module}::inside_a_slurm_allocation")
}

/// Runs the inner test below in an allocation of `tasks` tasks, in `mode`.
fn inside_allocation(slurm: &MiniSlurm, mode: &str, tasks: u32) -> common::Run {
    let mut c = slurm.command("salloc");
    c.arg(format!("--ntasks={tasks}"))
        .args(["--time=5", "--job-name=nsperf-test", "--"])
        .arg(std::env::current_exe().unwrap())
        .arg(inner_test_name())
        .args(["--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env("NSPERF_TEST_SLURM_MODE", mode)
        .env("NSPERF_TEST_SLURM_DIR", slurm.path());
    common::run_with_limit(c, Duration::from_secs(180))
}

#[test]
fn slurm_for_real() {
    let what = "Slurm for real (a one-node cluster)";
    if !common::require_root(what) {
        return;
    }
    for p in [
        "munged",
        "slurmctld",
        "slurmd",
        "srun",
        "salloc",
        "sbatch",
        "sinfo",
        "scontrol",
        "scancel",
    ] {
        if !common::require_program(p, what) {
            return;
        }
    }
    let node = Announcement::here(1).host;
    if (node.as_str(), 0).to_socket_addrs().is_err() {
        common::skip(&format!(
            "{what}: this host's name {node:?} does not resolve"
        ));
        return;
    }
    let t0 = Instant::now();
    let slurm = MiniSlurm::start(&node);
    println!(
        "one-node Slurm cluster up in {:.2} s",
        t0.elapsed().as_secs_f64()
    );

    // Agents through srun, a server step on one and a client step on the other.
    let r = inside_allocation(&slurm, "links", 2);
    assert!(
        r.code == Some(0) && r.stdout.contains("1 passed"),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    // (The harness prints "test NAME ... " before the test's own lines.)
    for l in r.stdout.lines().filter_map(|l| l.split_once("slurm: ")) {
        println!("slurm: {}", l.1);
    }
    assert!(
        slurm.own_processes().is_empty(),
        "agents outlived their step: {:?}",
        slurm.own_processes()
    );

    // srun that cannot start the agents: the error at once, with srun's reason.
    let r = inside_allocation(&slurm, "bad-exe", 1);
    assert!(
        r.code == Some(0) && r.stdout.contains("1 passed"),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    for l in r.stdout.lines().filter_map(|l| l.split_once("slurm: ")) {
        println!("slurm: {}", l.1);
    }

    // The sbatch script, run to its end.
    let d = slurm.path();
    let plan = d.join("plan.toml");
    std::fs::write(
        &plan,
        "name = \"t\"\n[[step]]\nname = \"nothing\"\ntype = \"exec\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let script = d.join("job.sh");
    let db = d.join("r.db");
    let out = d.join("job-%j.out");
    common::run(&[
        "agent",
        "slurm-script",
        plan.to_str().unwrap(),
        "--tasks-per-node",
        "2",
        "--time",
        "5",
        "--job-output",
        out.to_str().unwrap(),
        "-o",
        script.to_str().unwrap(),
        "--",
        "--db",
        db.to_str().unwrap(),
        "--no-report",
        "-q",
    ])
    .ok();
    let o = slurm
        .command("sbatch")
        .arg("--parsable")
        .arg(format!("--chdir={}", d.display()))
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let job = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let mut state = String::new();
    wait_until(Duration::from_secs(90), "the batch job's end", || {
        let o = slurm
            .command("scontrol")
            .args(["show", "job", &job])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        state = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("JobState="))
            .unwrap_or("")
            .to_string();
        !matches!(
            state.as_str(),
            "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING" | ""
        )
    });
    let log = std::fs::read_to_string(d.join(format!("job-{job}.out"))).unwrap_or_default();
    assert_eq!(state, "COMPLETED", "job output:\n{log}");
    assert!(
        log.contains(&format!("nsperf: job {job} on {node}, 2 task(s)")),
        "{log}"
    );
    assert!(db.exists(), "the plan's results: {log}");
}

/// Run by [`slurm_for_real`] inside the allocation it makes (`salloc … THIS-BINARY
/// inside_a_slurm_allocation --ignored`); does nothing elsewhere.
#[test]
#[ignore = "run by slurm_for_real inside the allocation it makes"]
fn inside_a_slurm_allocation() {
    let (Ok(mode), Some(dir)) = (
        std::env::var("NSPERF_TEST_SLURM_MODE"),
        std::env::var_os("NSPERF_TEST_SLURM_DIR"),
    ) else {
        println!("not inside slurm_for_real's allocation: nothing to do");
        return;
    };
    let dir = PathBuf::from(dir);
    let key = dir.join("agent.psk");
    std::fs::write(&key, "a key for this test\n").unwrap();
    let mut agents = SlurmAgents::new(key, PathBuf::from(common::nsperf_bin()));
    agents.timeout = Duration::from_secs(60);
    match mode.as_str() {
        "links" => links_for_real(agents),
        "bad-exe" => {
            agents.exe = dir.join("no-such-nsperf");
            let t0 = Instant::now();
            let e = slurm_links(&agents).unwrap_err();
            let took = t0.elapsed();
            let msg = e.to_string();
            assert!(msg.contains("srun ended"), "{msg}");
            assert!(msg.contains("0 of 1"), "{msg}");
            assert!(took < Duration::from_secs(30), "{took:?}: {msg}");
            println!(
                "slurm: srun failing reported in {:.2} s: {msg}",
                took.as_secs_f64()
            );
        }
        other => panic!("unknown mode {other}"),
    }
}

fn links_for_real(mut agents: SlurmAgents) {
    agents.tasks = NonZeroU32::new(2);
    agents.allow = StepClass::DEFAULT.to_vec();
    let t0 = Instant::now();
    let (links, mut step) = slurm_links(&agents).unwrap();
    let started = t0.elapsed();
    let names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["slurm-0", "slurm-1"]);
    let mut fleet = Fleet::new();
    fleet.connect(links, Duration::from_secs(20)).unwrap();
    let (server, addr) = common::fleet::start_server(&mut fleet, 0, "0.0.0.0");
    let config = nsperf_net::ClientConfig {
        host: fleet.agents()[0].host.hostname.clone(),
        port: addr.port(),
        params: nsperf_net::TestParams {
            duration_ns: 1_000_000_000,
            streams: 2,
            ..nsperf_net::TestParams::default()
        },
        psk: None,
        connect_timeout: Duration::from_secs(10),
        server_kind: nsperf_net::ServerKind::Nsperf,
        local: nsperf_net::LocalEnd::default(),
    };
    let client = fleet.start(
        1,
        StepSpec::Net {
            site: None,
            client: NetClient::Server { config },
        },
        None,
    );
    let out = fleet.wait(&[client], Duration::from_secs(60));
    fleet.stop(server);
    let served = fleet.wait(&[server], Duration::from_secs(20));
    fleet.close(Duration::from_secs(2));
    let end = out[0].end.as_ref().expect("the client step ended");
    assert!(end.ok(), "{end:?}");
    let Some(StepReport::Net(r)) = out[0].reports.last() else {
        panic!("no net report: {:?}", out[0]);
    };
    let Some(StepReport::Served(totals)) = served[0].reports.last() else {
        panic!("no served report: {:?}", served[0]);
    };
    let sent = r.summary.sent_bytes;
    assert!(sent > 0);
    let diff = (totals.received_bytes as f64 - sent as f64).abs() / sent as f64;
    assert!(
        diff <= 0.001,
        "served {} sent {sent}",
        totals.received_bytes
    );

    let t1 = Instant::now();
    let status = step.stop(Duration::from_secs(20));
    let stopped = t1.elapsed();
    assert!(status.is_some());
    assert!(
        stopped < Duration::from_secs(15),
        "srun took {stopped:?} to end"
    );
    println!(
        "slurm: 2 agents through srun connected in {:.2} s; client sent {sent} B, the server counted {} B; step ended {:.2} s after SIGTERM",
        started.as_secs_f64(),
        totals.received_bytes,
        stopped.as_secs_f64()
    );
}
