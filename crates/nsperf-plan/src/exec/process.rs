//! The real executor: runs the `nsperf` binary itself as child processes and reads their
//! `--json`; external commands run as they are, inside a lab site through
//! `nsperf lab exec LAB SITE -- …`.
//!
//! Every child runs in its own process group, so a timeout or Ctrl-C kills it together with
//! whatever it started. CPU use per core is sampled each second while a step runs; NIC
//! counters are read before and after in every site (or on this host without a lab).

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nsperf_core::cpu::CpuSampler;
use nsperf_core::nic::{NicCounters, parse_proc_net_dev};
use nsperf_core::report::CpuInterval;
use serde_json::Value;

use super::{Executor, Measurement, NicDelta, RunContext, SeriesPoint};
use crate::error::ExecError;
use crate::plan::{
    Action, ExecStep, IoStep, LabSpec, LinkSettings, NetMode, NetStep, Payload, Phase,
    ResolvedStep, Target,
};

/// Runs steps through the `nsperf` binary and external programs.
#[derive(Debug)]
pub struct ProcessExecutor {
    exe: PathBuf,
    captures: u32,
}

/// Exit code of `nsperf net` when it cannot connect (see `docs/exit-codes.md`).
const EXIT_CONNECT: i32 = 5;

impl ProcessExecutor {
    /// An executor that runs this very binary (`std::env::current_exe()`).
    pub fn current() -> Result<Self, ExecError> {
        let exe = std::env::current_exe()
            .map_err(|e| ExecError::Other(format!("cannot find the nsperf binary: {e}")))?;
        // A binary replaced while it runs (a rebuild) reads as "… (deleted)": the kernel's
        // link to the running image still starts the very same program.
        let exe = if exe.exists() {
            exe
        } else {
            PathBuf::from("/proc/self/exe")
        };
        Ok(Self::with_binary(exe))
    }

    /// An executor that runs the given `nsperf` binary.
    pub fn with_binary(exe: PathBuf) -> Self {
        ProcessExecutor { exe, captures: 0 }
    }

    fn exe(&self) -> String {
        self.exe.to_string_lossy().into_owned()
    }

    /// `argv`, wrapped in `nsperf lab exec LAB SITE --` when a site is given.
    fn in_site(&self, lab: Option<&LabSpec>, site: Option<&str>, argv: Vec<String>) -> Vec<String> {
        match (lab, site) {
            (Some(l), Some(s)) => {
                let mut v = vec![
                    self.exe(),
                    "lab".into(),
                    "exec".into(),
                    l.name.clone(),
                    s.to_string(),
                    "--".into(),
                ];
                v.extend(argv);
                v
            }
            _ => argv,
        }
    }

    fn nsperf_ok(&self, args: &[String], timeout: Duration) -> Result<ChildRun, ExecError> {
        let mut argv = vec![self.exe()];
        argv.extend(args.iter().cloned());
        let r = run_child(&argv, timeout, false)?;
        r.check(&argv)?;
        Ok(r)
    }

    fn read_nic(&self, lab: Option<&LabSpec>) -> Vec<(String, Vec<NicCounters>)> {
        match lab {
            None => vec![("local".into(), nsperf_core::nic::read_nic_counters())],
            Some(l) => l
                .sites
                .iter()
                .map(|s| {
                    let argv =
                        self.in_site(Some(l), Some(s), vec!["cat".into(), "/proc/net/dev".into()]);
                    let text = run_child(&argv, Duration::from_secs(10), false)
                        .ok()
                        .filter(|r| r.status.success())
                        .map(|r| String::from_utf8_lossy(&r.stdout).into_owned())
                        .unwrap_or_default();
                    (s.clone(), parse_proc_net_dev(&text))
                })
                .collect(),
        }
    }

    fn net(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        n: &NetStep,
    ) -> Result<Measurement, ExecError> {
        let mut args: Vec<String> = vec!["net".into()];
        let addr = match &n.target {
            Target::Loopback => {
                args.push("--loopback".into());
                None
            }
            Target::Host(h) => {
                args.push(h.clone());
                None
            }
            Target::Lab { server_index, .. } => {
                let a = site_addr(*server_index).to_string();
                args.push(a.clone());
                Some(a)
            }
        };
        if let Some(p) = n.port {
            args.extend(["-p".into(), p.to_string()]);
        }
        args.extend(["-t".into(), secs(n.time)]);
        if let Some(o) = n.omit {
            args.extend(["-O".into(), secs(o)]);
        }
        if let Some(w) = n.window {
            args.extend(["-w".into(), w.0.to_string()]);
        }
        if n.streams != 1 {
            args.extend(["-P".into(), n.streams.to_string()]);
        }
        if let Some(c) = &n.cc {
            args.extend(["-C".into(), c.clone()]);
        }
        if let Some(l) = n.length {
            args.extend(["-l".into(), l.0.to_string()]);
        }
        if n.reverse {
            args.push("-R".into());
        }
        if n.awake {
            args.push("--awake".into());
        }
        let headline: &[&str] = match n.mode {
            NetMode::Stream => &["throughput_bps"],
            NetMode::Rr(sz) => {
                args.extend(["--rr".into(), sz.0.to_string()]);
                &["transactions_per_s", "throughput_bps"]
            }
            NetMode::Sweep(a, b) => {
                args.extend(["--sweep".into(), format!("{}..{}", a.0, b.0)]);
                &["throughput_bps", "peak_throughput_bps"]
            }
        };
        args.push("--json".into());
        let mut client = vec![self.exe()];
        client.extend(args);
        let timeout = step.timeout;
        let (server, client_site) = match &n.target {
            Target::Lab { client, server, .. } => {
                let mut sv = vec![self.exe(), "server".into(), "--one-off".into()];
                if let Some(p) = n.port {
                    sv.extend(["--port".into(), p.to_string()]);
                }
                let sv = self.in_site(ctx.lab, Some(server), sv);
                (Some(sv), Some(client.as_str()))
            }
            _ => (None, None),
        };
        let client = self.in_site(ctx.lab, client_site, client);
        let _ = addr;
        let capture = match &n.capture {
            Some(site) => Some(self.start_capture(ctx.lab, site)?),
            None => None,
        };
        let nic_before = ctx.record.nic.then(|| self.read_nic(ctx.lab));
        let server_child = match &server {
            Some(sv) => Some(Background::spawn(sv)?),
            None => None,
        };
        let mut tries = 0;
        let run = loop {
            let r = run_child(&client, timeout, ctx.record.cpu)?;
            tries += 1;
            // The server may not listen yet: retry a refused connection for up to 5 s.
            if server_child.is_some() && r.status.code() == Some(EXIT_CONNECT) && tries < 50 {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            break r;
        };
        if let Some(s) = server_child {
            s.finish(Duration::from_secs(3));
        }
        let trace_json = match capture {
            Some(c) => self.finish_capture(c),
            None => None,
        };
        run.check(&client)?;
        let mut m = measurement_from_json(&run, &client, headline, &["throughput_bps"])?;
        m.payload_bytes = m
            .metrics
            .get("received_bytes")
            .or_else(|| m.metrics.get("sent_bytes"))
            .map(|&b| b as u64);
        if let Some(before) = nic_before {
            self.attach_nic(&mut m, &before, ctx.lab);
        }
        m.trace_json = trace_json;
        m.spec = spec_of(step);
        Ok(m)
    }

    fn attach_nic(
        &self,
        m: &mut Measurement,
        before: &[(String, Vec<NicCounters>)],
        lab: Option<&LabSpec>,
    ) {
        let after = self.read_nic(lab);
        let mut wire = 0u64;
        for (site, now) in &after {
            let Some((_, prev)) = before.iter().find(|(s, _)| s == site) else {
                continue;
            };
            for c in now {
                if c.name == "lo" {
                    continue;
                }
                if let Some(p) = prev.iter().find(|p| p.name == c.name) {
                    let d = c.since(p);
                    wire = wire.max(d.tx_bytes);
                    m.nic.push(NicDelta {
                        site: site.clone(),
                        counters: d,
                    });
                }
            }
        }
        if !m.nic.is_empty() {
            m.wire_bytes = Some(wire);
        }
    }

    fn io(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        io: &IoStep,
    ) -> Result<Measurement, ExecError> {
        let mut argv = vec![
            self.exe(),
            "io".into(),
            "run".into(),
            io.dir.clone(),
            "--workload".into(),
            io.workload.clone(),
            "--size".into(),
            io.size.0.to_string(),
            "--bs".into(),
            io.bs.0.to_string(),
        ];
        let cache = match ctx.phase {
            Phase::Cold => Some("cold".to_string()),
            Phase::Warm => Some("warm".to_string()),
            _ => io.cache.clone(),
        };
        for (flag, v) in [
            ("--cache", cache),
            ("--fsync", io.fsync.clone()),
            ("--engine", io.engine.clone()),
            ("--iodepth", io.iodepth.map(|d| d.to_string())),
        ] {
            if let Some(v) = v {
                argv.extend([flag.to_string(), v]);
            }
        }
        argv.push("--json".into());
        let argv = self.in_site(ctx.lab, io.site.as_deref(), argv);
        let r = run_child(&argv, step.timeout, ctx.record.cpu)?;
        r.check(&argv)?;
        let mut m = measurement_from_json(
            &r,
            &argv,
            &["throughput_bytes_per_s"],
            &["throughput_bytes_per_s"],
        )?;
        m.payload_bytes = ["bytes", "total_bytes", "moved_bytes"]
            .iter()
            .find_map(|k| m.metrics.get(*k))
            .map(|&b| b as u64)
            .or(Some(io.size.0));
        m.spec = spec_of(step);
        Ok(m)
    }

    fn exec(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        e: &ExecStep,
    ) -> Result<Measurement, ExecError> {
        let argv = self.in_site(ctx.lab, e.site.as_deref(), e.command.clone());
        let nic_before = ctx.record.nic.then(|| self.read_nic(ctx.lab));
        let r = run_child(&argv, step.timeout, ctx.record.cpu)?;
        r.check(&argv)?;
        let secs = r.elapsed.as_secs_f64();
        let payload = match &e.payload {
            Payload::Unknown => None,
            Payload::Declared(b) => Some(b.0),
            Payload::Parsed(re) => {
                let out = String::from_utf8_lossy(&r.stdout);
                let err = String::from_utf8_lossy(&r.stderr);
                let found = re
                    .captures(&out)
                    .or_else(|| re.captures(&err))
                    .and_then(|c| c.get(1))
                    .map(|g| g.as_str().to_string());
                match found {
                    None => {
                        return Err(ExecError::Output {
                            command: argv.join(" "),
                            reason: format!("payload_regex \"{}\" matched nothing", re.as_str()),
                        });
                    }
                    Some(t) => Some(
                        nsperf_core::Bytes::parse(&t)
                            .map_err(|e| ExecError::Output {
                                command: argv.join(" "),
                                reason: format!("payload_regex matched \"{t}\": {e}"),
                            })?
                            .0,
                    ),
                }
            }
        };
        let mut m = Measurement {
            duration_ns: r.elapsed.as_nanos() as u64,
            cpu: r.cpu.clone(),
            payload_bytes: payload,
            spec: spec_of(step),
            ..Default::default()
        };
        m.metrics.insert("elapsed_s".into(), secs);
        match payload {
            Some(b) if secs > 0.0 => {
                m.metric = "throughput_bytes_per_s".into();
                m.value = b as f64 / secs;
                m.metrics.insert("payload_bytes".into(), b as f64);
            }
            _ => {
                m.metric = "elapsed_s".into();
                m.value = secs;
            }
        }
        if let Some(before) = nic_before {
            self.attach_nic(&mut m, &before, ctx.lab);
        }
        Ok(m)
    }

    fn start_capture(&mut self, lab: Option<&LabSpec>, site: &str) -> Result<Capture, ExecError> {
        if !program_on_path("tcpdump") {
            return Err(ExecError::Skip(
                "a capture needs tcpdump, which is not installed".into(),
            ));
        }
        self.captures += 1;
        let file = std::env::temp_dir().join(format!(
            ".nsperf-capture-{}-{}.pcap",
            std::process::id(),
            self.captures
        ));
        let argv = self.in_site(
            lab,
            Some(site),
            vec![
                "tcpdump".into(),
                "-i".into(),
                "any".into(),
                "-s".into(),
                "256".into(),
                "-U".into(),
                "-w".into(),
                file.to_string_lossy().into_owned(),
                "tcp".into(),
            ],
        );
        let bg = Background::spawn(&argv)?;
        std::thread::sleep(Duration::from_millis(500));
        Ok(Capture { bg, file })
    }

    fn finish_capture(&mut self, c: Capture) -> Option<String> {
        std::thread::sleep(Duration::from_millis(200));
        c.bg.interrupt(Duration::from_secs(3));
        let argv = vec![
            self.exe(),
            "trace".into(),
            c.file.to_string_lossy().into_owned(),
            "--json".into(),
        ];
        let out = run_child(&argv, Duration::from_secs(120), false)
            .ok()
            .filter(|r| r.status.success())
            .map(|r| String::from_utf8_lossy(&r.stdout).into_owned());
        let _ = std::fs::remove_file(&c.file);
        out
    }
}

struct Capture {
    bg: Background,
    file: PathBuf,
}

fn program_on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

/// Address of lab site `i`: `10.77.0.(i+1)` (the lab's fixed interface).
fn site_addr(i: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(10, 77, 0, (i + 1).min(254) as u8)
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s}")
    }
}

fn spec_of(step: &ResolvedStep) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = step.params.iter().cloned().collect();
    m.insert("type".into(), step.kind.clone());
    m
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Executor for ProcessExecutor {
    fn lab_up(&mut self, lab: &LabSpec, link: &LinkSettings) -> Result<(), ExecError> {
        if !is_root() {
            return Err(ExecError::Skip(
                "the lab needs root (network namespaces)".into(),
            ));
        }
        // A lab left over by a killed run of the same plan is replaced.
        let _ = self.nsperf_ok(
            &["lab".into(), "down".into(), lab.name.clone()],
            Duration::from_secs(30),
        );
        let mut args = vec![
            "lab".into(),
            "up".into(),
            lab.name.clone(),
            "--sites".into(),
            lab.sites.join(","),
        ];
        args.extend(link.args());
        self.nsperf_ok(&args, Duration::from_secs(60)).map(|_| ())
    }

    fn lab_set(&mut self, lab: &LabSpec, link: &LinkSettings) -> Result<(), ExecError> {
        let mut args = vec!["lab".into(), "set".into(), lab.name.clone()];
        args.extend(link.args());
        self.nsperf_ok(&args, Duration::from_secs(60)).map(|_| ())
    }

    fn lab_down(&mut self, lab: &LabSpec) {
        if let Err(e) = self.nsperf_ok(
            &["lab".into(), "down".into(), lab.name.clone()],
            Duration::from_secs(60),
        ) {
            eprintln!("nsperf: lab down {}: {e}", lab.name);
        }
    }

    fn drop_caches(&mut self) -> Result<(), ExecError> {
        if !is_root() {
            return Err(ExecError::Skip(
                "a cold cache needs root (/proc/sys/vm/drop_caches)".into(),
            ));
        }
        // SAFETY: sync has no preconditions.
        unsafe { libc::sync() };
        std::fs::write("/proc/sys/vm/drop_caches", "3")
            .map_err(|e| ExecError::Skip(format!("cannot drop the page cache: {e}")))
    }

    fn prime(
        &mut self,
        ctx: &RunContext<'_>,
        site: Option<&str>,
        command: &[String],
    ) -> Result<(), ExecError> {
        let argv = self.in_site(ctx.lab, site, command.to_vec());
        run_child(&argv, Duration::from_secs(600), false)?.check(&argv)
    }

    fn measure(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
    ) -> Result<Measurement, ExecError> {
        let t0 = Instant::now();
        let mut m = match &step.action {
            Action::Net(n) => self.net(ctx, step, n)?,
            Action::Io(io) => self.io(ctx, step, io)?,
            Action::Exec(e) => self.exec(ctx, step, e)?,
        };
        if m.duration_ns == 0 {
            m.duration_ns = t0.elapsed().as_nanos() as u64;
        }
        Ok(m)
    }
}

/// A finished child.
#[derive(Debug)]
struct ChildRun {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    elapsed: Duration,
    cpu: Vec<CpuInterval>,
}

impl ChildRun {
    fn check(&self, argv: &[String]) -> Result<(), ExecError> {
        if self.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&self.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        let status = match self.status.code() {
            Some(c) => format!("exit {c}"),
            None => "killed by a signal".into(),
        };
        // Exit 4 (permission) from an nsperf engine is a skip: it needs root.
        if self.status.code() == Some(4) && !is_root() {
            return Err(ExecError::Skip(format!("needs root: {last}")));
        }
        Err(ExecError::Failed {
            command: short_command(argv),
            status,
            stderr: last.chars().take(300).collect(),
        })
    }
}

fn short_command(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.ends_with("/nsperf") || a.contains("/deps/nsperf-") || a == "/proc/self/exe" {
                "nsperf"
            } else {
                a.as_str()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn kill_group(child: &mut Child, sig: libc::c_int) {
    kill_pid_group(child.id(), sig);
}

fn kill_pid_group(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; the group is the child's own (it was
    // started with process_group(0), so its group id is its pid).
    unsafe {
        libc::kill(-(pid as libc::pid_t), sig);
    }
}

fn spawn(argv: &[String], capture: bool) -> Result<Child, ExecError> {
    let (prog, args) = argv
        .split_first()
        .ok_or_else(|| ExecError::Other("empty command".into()))?;
    let mut cmd = Command::new(prog);
    cmd.args(args).stdin(Stdio::null()).process_group(0);
    if capture {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    } else {
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    }
    cmd.spawn().map_err(|source| ExecError::Spawn {
        program: prog.clone(),
        source,
    })
}

/// Runs `argv` to completion with a timeout, sampling CPU per core each second when asked.
fn run_child(argv: &[String], timeout: Duration, sample_cpu: bool) -> Result<ChildRun, ExecError> {
    let mut child = spawn(argv, true)?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let to = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let te = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let t0 = Instant::now();
    let pid = child.id();
    // A waiter thread takes the exit time exactly; this loop only polls for it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let s = child.wait();
        let _ = tx.send((s, Instant::now()));
    });
    let mut sampler = sample_cpu.then(CpuSampler::new);
    let mut last_sample = t0;
    let mut cpu = Vec::new();
    let (status, ended) = loop {
        match rx.recv_timeout(Duration::from_millis(10)) {
            Ok((Ok(s), at)) => break (s, at),
            Ok((Err(e), _)) => return Err(ExecError::Other(format!("waiting for a child: {e}"))),
            Err(_) => {}
        }
        if nsperf_core::signal::interrupted() {
            kill_pid_group(pid, libc::SIGKILL);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            return Err(ExecError::Interrupted);
        }
        if t0.elapsed() > timeout {
            kill_pid_group(pid, libc::SIGKILL);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            return Err(ExecError::Timeout {
                command: short_command(argv),
                timeout_s: timeout.as_secs_f64(),
            });
        }
        if let Some(s) = sampler.as_mut() {
            let since = last_sample.elapsed();
            if since >= Duration::from_secs(1) {
                cpu.push(CpuInterval {
                    role: "host".into(),
                    start_s: last_sample.duration_since(t0).as_secs_f64(),
                    length_s: since.as_secs_f64(),
                    cpu: s.sample(since.as_secs_f64()),
                });
                last_sample = Instant::now();
            }
        }
    };
    let elapsed = ended.duration_since(t0);
    // Whatever the child left running in its group goes with it.
    kill_pid_group(pid, libc::SIGKILL);
    Ok(ChildRun {
        status,
        stdout: to.join().unwrap_or_default(),
        stderr: te.join().unwrap_or_default(),
        elapsed,
        cpu,
    })
}

/// A background child (a server, a capture), killed with its group when finished.
struct Background {
    child: Child,
}

impl Background {
    fn spawn(argv: &[String]) -> Result<Self, ExecError> {
        let mut child = spawn(argv, false)?;
        // Drain stderr so the child never blocks on a full pipe.
        if let Some(mut e) = child.stderr.take() {
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                let _ = e.read_to_end(&mut sink);
            });
        }
        Ok(Background { child })
    }

    /// Waits up to `grace` for the child to end by itself, then kills its group.
    fn finish(mut self, grace: Duration) {
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_group(&mut self.child, libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// Sends SIGINT to the group (a capture flushes its file), then finishes.
    fn interrupt(mut self, grace: Duration) {
        kill_group(&mut self.child, libc::SIGINT);
        self.finish(grace);
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill_group(&mut self.child, libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Flattens the numbers of a JSON object: `{"a": {"b": 1}}` gives `a.b = 1`.
fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, f64>) {
    match v {
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.insert(prefix.to_string(), x);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        _ => {}
    }
}

/// Reads an engine's `--json` report: the summary's numbers, the headline (the first of
/// `headline` found), and the aggregate interval series of the first of `interval_keys`.
fn measurement_from_json(
    r: &ChildRun,
    argv: &[String],
    headline: &[&str],
    interval_keys: &[&str],
) -> Result<Measurement, ExecError> {
    let bad = |reason: String| ExecError::Output {
        command: short_command(argv),
        reason,
    };
    let text = String::from_utf8_lossy(&r.stdout);
    let doc: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let summary = doc.get("summary").ok_or_else(|| bad("no summary".into()))?;
    let mut metrics = BTreeMap::new();
    flatten("", summary, &mut metrics);
    let (metric, value) = headline
        .iter()
        .find_map(|k| metrics.get(*k).map(|v| (k.to_string(), *v)))
        .ok_or_else(|| bad(format!("summary has none of {}", headline.join(", "))))?;
    let mut series = Vec::new();
    if let Some(Value::Array(iv)) = doc.get("intervals") {
        let key = interval_keys
            .iter()
            .find(|k| iv.iter().any(|e| e.get(**k).is_some()));
        if let Some(key) = key {
            let aggregate: Vec<&Value> = iv
                .iter()
                .filter(|e| e.get("stream").is_none_or(Value::is_null))
                .collect();
            let mut by_start: BTreeMap<u64, SeriesPoint> = BTreeMap::new();
            let src: Vec<&Value> = if aggregate.is_empty() {
                iv.iter().collect()
            } else {
                aggregate
            };
            for e in src {
                let (Some(s), Some(l), Some(v)) = (
                    e.get("start_s").and_then(Value::as_f64),
                    e.get("length_s").and_then(Value::as_f64),
                    e.get(*key).and_then(Value::as_f64),
                ) else {
                    continue;
                };
                let p = by_start.entry((s * 1e6) as u64).or_insert(SeriesPoint {
                    start_s: s,
                    length_s: l,
                    value: 0.0,
                });
                p.value += v;
            }
            series = by_start.into_values().collect();
        }
    }
    Ok(Measurement {
        metric,
        value,
        metrics,
        series,
        cpu: r.cpu.clone(),
        duration_ns: r.elapsed.as_nanos() as u64,
        report_json: Some(text.into_owned()),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(stdout: &str) -> ChildRun {
        ChildRun {
            status: std::os::unix::process::ExitStatusExt::from_raw(0),
            stdout: stdout.as_bytes().to_vec(),
            stderr: Vec::new(),
            elapsed: Duration::from_secs(3),
            cpu: Vec::new(),
        }
    }

    #[test]
    fn reads_net_json_aggregate_series() {
        let j = r#"{"summary": {"throughput_bps": 4.2e7, "peak_interval_bps": 4.5e7,
            "received_bytes": 15750000, "lat": {"p99_ns": 7}},
            "intervals": [
              {"start_s": 0, "length_s": 1, "throughput_bps": 2e7, "stream": 1},
              {"start_s": 0, "length_s": 1, "throughput_bps": 4e7},
              {"start_s": 1, "length_s": 1, "throughput_bps": 4.5e7}
            ]}"#;
        let m =
            measurement_from_json(&fake(j), &[], &["throughput_bps"], &["throughput_bps"]).unwrap();
        assert_eq!(m.metric, "throughput_bps");
        assert_eq!(m.value, 4.2e7);
        assert_eq!(m.metrics["lat.p99_ns"], 7.0);
        assert_eq!(m.series.len(), 2);
        assert_eq!(m.series[0].value, 4e7);
    }

    #[test]
    fn per_stream_only_series_is_summed() {
        let j = r#"{"summary": {"throughput_bps": 2},
            "intervals": [
              {"start_s": 0, "length_s": 1, "throughput_bps": 1, "stream": 1},
              {"start_s": 0, "length_s": 1, "throughput_bps": 1, "stream": 2}
            ]}"#;
        let m =
            measurement_from_json(&fake(j), &[], &["throughput_bps"], &["throughput_bps"]).unwrap();
        assert_eq!(m.series.len(), 1);
        assert_eq!(m.series[0].value, 2.0);
    }

    #[test]
    fn bad_json_is_an_output_error() {
        let e = measurement_from_json(&fake("nope"), &[], &["x"], &["x"]).unwrap_err();
        assert!(matches!(e, ExecError::Output { .. }));
        let e =
            measurement_from_json(&fake(r#"{"summary": {}}"#), &[], &["x"], &["x"]).unwrap_err();
        assert!(e.to_string().contains("none of x"));
    }

    #[test]
    fn child_timeout_kills() {
        let argv: Vec<String> = ["sleep", "5"].iter().map(|s| s.to_string()).collect();
        let t0 = Instant::now();
        let e = run_child(&argv, Duration::from_millis(200), false).unwrap_err();
        assert!(matches!(e, ExecError::Timeout { .. }));
        assert!(t0.elapsed() < Duration::from_secs(3));
    }
}
