//! The real executor. The lab is built, changed and removed through the lab library, in this
//! process (which owns it); every step runs in a child process, `nsperf step`, given a typed
//! [`StepSpec`] on its standard input and answering a typed [`StepReport`] on its standard
//! output. A user's command (an `exec` step) runs as it is, through `nsperf step` when it
//! must enter a lab site. The capture of a network or io step is tcpdump in a site (a
//! `capture` step) or the emulator on a link; its analysis runs here, through the trace
//! library.
//!
//! CPU use per core is sampled each second while a step runs; NIC counters are read before
//! and after in every site (or on this host without a lab).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use nsperf_core::process::ProcessId;
use nsperf_lab::events::LinkEvent;
use nsperf_lab::lab::{self, UpConfig};
use nsperf_lab::stats::LabStats;
use nsperf_lab::{LabError, LinkChange, Schedule};
use nsperf_net::{ClientConfig, ServerConfig};

use super::child::{self, Background, ChildRun, is_root};
use super::hosts::HostRunner;
use super::measure;
use super::served::{self, ServiceCounts};
use super::{CommandRole, Executor, Lab, Measurement, RunContext, ServiceAnswer};
use crate::error::ExecError;
use crate::plan::{
    Action, BonnieStep, CapturePoint, ExecStep, Hosts, IoStep, LinkSettings, NetStep, Payload,
    Phase, ResolvedStep, ServiceSpec, Target,
};
use crate::step::{NetClient, SiteRef, StepReport, StepRequest, StepSpec};

/// Makes the command that runs a lab's emulator process (`nsperf lab emulate NAME`).
pub type EmulatorCommand = fn(&str) -> Command;

/// Runs steps through `nsperf step` children and external programs.
#[derive(Debug)]
pub struct ProcessExecutor {
    /// The `nsperf` binary whose hidden `step` subcommand runs a step.
    exe: PathBuf,
    emulator: EmulatorCommand,
    captures: u32,
    /// Where captures are kept (`nsperf run --keep-captures`); without it they are removed
    /// once analysed.
    keep_captures: Option<PathBuf>,
    /// The plan's `[hosts]`, once connected.
    hosts: Option<HostRunner>,
    /// The plan's services that were started, by name.
    services: BTreeMap<String, RunningService>,
}

/// A service step running in the background.
struct RunningService {
    bg: Background,
    /// For people: the service as the plan describes it.
    what: String,
    /// Its own count of what it served, as it prints it (the embedded NFS server).
    counts: ServiceCounts,
}

impl RunningService {
    /// Takes the count samples printed so far and keeps the last as a step's start.
    fn before_step(&mut self) {
        let bg = &mut self.bg;
        self.counts.take(std::iter::from_fn(|| bg.try_line()));
        self.counts.restart();
    }

    /// Sets the service's count over the clients' window beside what they measured (when
    /// the service counts: the embedded NFS server).
    fn after_step(&mut self, name: &str, m: &mut Measurement) {
        let Some(w) = served::clients_window(m) else {
            return;
        };
        let bg = &mut self.bg;
        self.counts.take_until(w.end_ns, || bg.try_line());
        if let Some(s) = self.counts.within(w) {
            served::beside_clients(m, name, w, s);
        }
        if let Some(h) = self.counts.host_within(w) {
            served::host_use(m, &h);
        }
    }
}

impl std::fmt::Debug for RunningService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

/// Bytes of each packet a network step's capture keeps: the link, IP and TCP headers with
/// their options (at most 16 + 60 + 60 with tcpdump's `-i any`), all the TCP analysis reads.
const HEADERS_SNAPLEN: u32 = 256;

/// Bytes of each packet an io step's capture keeps: all of it (tcpdump's own largest
/// snapshot length, what `-s 0` means). The storage protocol's decoder needs every record
/// mark and header, and they fall anywhere in a segment: an RPC record (or an SMB2 message)
/// starts right after the previous one's last byte, mid-segment whenever calls go back to
/// back (`iodepth` > 1), and a lab site's segments are TSO/GRO super-packets up to 64 KiB. A
/// record mark cut off by the snapshot length makes the decoder hunt for the next record
/// that starts a segment, losing the calls in between (docs/trace.md#the-storage-protocol),
/// as tshark loses them; with whole packets it matches what tshark matches. The price is a
/// capture as large as the data the step moves (plus headers).
const PROTOCOL_SNAPLEN: u32 = 262_144;

/// How long a service may take to answer (ganesha with its rpcbind takes seconds).
const SERVICE_READY: Duration = Duration::from_secs(60);

/// How long a server step may take to start listening.
const SERVER_READY: Duration = Duration::from_secs(15);

impl ProcessExecutor {
    /// Keeps every capture in `dir` (made when needed) instead of removing it once
    /// analysed; the run records the file's path.
    pub fn keep_captures_in(&mut self, dir: PathBuf) {
        self.keep_captures = Some(dir);
    }

    /// An executor whose steps run `exe step` and whose labs' emulators are `emulator`.
    pub fn new(exe: PathBuf, emulator: EmulatorCommand) -> Self {
        ProcessExecutor {
            exe,
            emulator,
            captures: 0,
            keep_captures: None,
            hosts: None,
            services: BTreeMap::new(),
        }
    }

    /// The binary running now (`std::env::current_exe()`), as the step runner.
    pub fn current(emulator: EmulatorCommand) -> Result<Self, ExecError> {
        let exe = std::env::current_exe().map_err(ExecError::SelfExe)?;
        // A binary replaced while it runs (a rebuild) reads as "… (deleted)": the kernel's
        // link to the running image still starts the very same program.
        let exe = if exe.exists() {
            exe
        } else {
            PathBuf::from("/proc/self/exe")
        };
        Ok(Self::new(exe, emulator))
    }

    /// Reaches or starts the agent of every host of the plan and opens their sessions
    /// (before any run: a host that cannot be reached fails the plan at once).
    pub fn connect_hosts(&mut self, hosts: &Hosts) -> Result<(), ExecError> {
        self.hosts = Some(HostRunner::connect(hosts, &self.exe)?);
        Ok(())
    }

    /// Each connected host: its name, clock offset and error bound (ns).
    pub fn host_clocks(&self) -> Vec<(String, i64, u64)> {
        self.hosts
            .as_ref()
            .map(|h| {
                h.fleet()
                    .agents()
                    .iter()
                    .map(|a| (a.name.clone(), a.clock.offset_ns, a.clock.error_ns))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Ends the hosts' agent sessions (the agents the plan started exit).
    pub fn close_hosts(&mut self) {
        if let Some(mut h) = self.hosts.take() {
            h.close();
        }
    }

    /// The command and input of a step child for `spec`.
    fn step(&self, spec: &StepSpec) -> Result<(Command, Vec<u8>), ExecError> {
        let input =
            serde_json::to_vec(&StepRequest::now(spec.clone())).map_err(ExecError::StepSpec)?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("step");
        Ok((cmd, input))
    }

    /// Runs a step child to its end and reads its report.
    fn run_step(
        &self,
        spec: &StepSpec,
        what: &str,
        timeout: Duration,
        sample_cpu: bool,
    ) -> Result<(StepReport, ChildRun), ExecError> {
        let (cmd, input) = self.step(spec)?;
        let r = child::run(cmd, Some(input), what, timeout, sample_cpu)?;
        r.check(what)?;
        let report = serde_json::from_slice(&r.stdout).map_err(|e| ExecError::Output {
            command: what.to_string(),
            reason: e.to_string(),
        })?;
        Ok((report, r))
    }

    /// Starts a step child in the background.
    fn background(&self, spec: &StepSpec, what: &str) -> Result<Background, ExecError> {
        let (cmd, input) = self.step(spec)?;
        Background::spawn(cmd, Some(input), what)
    }

    /// A user's command: run as it is, or through `nsperf step` inside a lab site.
    fn user_command(
        &self,
        lab: Option<&Lab>,
        site: Option<&str>,
        command: &[String],
    ) -> Result<(Command, Option<Vec<u8>>), ExecError> {
        match site_ref(lab, site) {
            Some(site) => {
                let (cmd, input) = self.step(&StepSpec::Exec {
                    site: Some(site),
                    command: command.to_vec(),
                })?;
                Ok((cmd, Some(input)))
            }
            None => {
                let (prog, args) = command.split_first().ok_or(ExecError::EmptyCommand)?;
                let mut cmd = Command::new(prog);
                cmd.args(args);
                Ok((cmd, None))
            }
        }
    }

    /// Runs a step through `run`, with a capture at `at` around it when given (keeping
    /// `snaplen` bytes of each packet): the run gets the capture's analysis
    /// (`trace_json`) and, with `--keep-captures`, the kept file's path. The one way a step
    /// takes a capture, network and io steps alike.
    fn captured(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        at: Option<&CapturePoint>,
        snaplen: u32,
        run: impl FnOnce(&mut Self) -> Result<Measurement, ExecError>,
    ) -> Result<Measurement, ExecError> {
        let Some(at) = at else {
            return run(self);
        };
        let keep = self
            .keep_captures
            .as_ref()
            .map(|dir| dir.join(capture_name(ctx, step, at)));
        let c = self.start_capture(ctx.lab, at, snaplen)?;
        let m = run(self);
        let (analysis, kept) = self.finish_capture(c, keep);
        let mut m = m?;
        m.trace_json = Some(analysis?);
        m.capture_path = kept;
        Ok(m)
    }

    fn net(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        n: &NetStep,
    ) -> Result<Measurement, ExecError> {
        self.captured(ctx, step, n.capture.as_ref(), HEADERS_SNAPLEN, |me| {
            me.net_run(ctx, step, n)
        })
    }

    fn net_run(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        n: &NetStep,
    ) -> Result<Measurement, ExecError> {
        let nic_before = ctx.record.nic.then(|| measure::read_nic(ctx.lab));
        let (client, client_site, server) = match &n.target {
            Target::Loopback => (
                NetClient::Loopback {
                    params: n.params.clone(),
                },
                None,
                None,
            ),
            Target::Host(h) => (server_client(h.clone(), n), None, None),
            Target::Lab {
                client,
                server,
                server_index,
            } => {
                let bg = self.start_server(ctx.lab, server, n.port)?;
                let addr = nsperf_lab::site_addr(*server_index).to_string();
                (
                    server_client(addr, n),
                    site_ref(ctx.lab, Some(client)),
                    Some(bg),
                )
            }
        };
        let spec = StepSpec::Net {
            site: client_site,
            client,
        };
        let what = format!("net step {}", step.name);
        let run = self.run_step(&spec, &what, step.timeout, ctx.record.cpu);
        if let Some(s) = server {
            s.finish(Duration::from_secs(3));
        }
        let (report, child) = run?;
        let StepReport::Net(report) = report else {
            return Err(unexpected(&what, &report));
        };
        let mut m = measure::from_net(&report);
        m.cpu = child.cpu;
        if let Some(before) = nic_before {
            measure::attach_nic(&mut m, &before, ctx.lab);
        }
        Ok(m)
    }

    /// Starts a one-off server step in a lab site and waits until it listens.
    fn start_server(
        &self,
        lab: Option<&Lab>,
        site: &str,
        port: u16,
    ) -> Result<Background, ExecError> {
        let spec = StepSpec::NetServer {
            site: site_ref(lab, Some(site)),
            server: ServerConfig {
                bind: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                port,
                one_off: true,
                ..ServerConfig::default()
            },
        };
        let what = format!("server step in {site}");
        let mut bg = self.background(&spec, &what)?;
        match bg.next_line(SERVER_READY) {
            Some(line) => match serde_json::from_str::<StepReport>(&line) {
                Ok(StepReport::Listening { .. }) => Ok(bg),
                Ok(other) => Err(unexpected(&what, &other)),
                Err(e) => Err(ExecError::Output {
                    command: what,
                    reason: e.to_string(),
                }),
            },
            None if nsperf_core::signal::interrupted() => Err(ExecError::Interrupted),
            None => Err(ExecError::NotListening {
                what: what.to_string(),
                secs: SERVER_READY.as_secs(),
            }),
        }
    }

    fn io(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        io: &IoStep,
    ) -> Result<Measurement, ExecError> {
        self.captured(ctx, step, io.capture.as_ref(), PROTOCOL_SNAPLEN, |me| {
            me.io_run(ctx, step, io)
        })
    }

    fn io_run(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        io: &IoStep,
    ) -> Result<Measurement, ExecError> {
        let config = ctx.io_config(io)?;
        let spec = StepSpec::Io {
            site: site_ref(ctx.lab, io.site.as_deref()),
            config,
        };
        let what = format!("io step {}", step.name);
        let (report, child) = self.run_step(&spec, &what, step.timeout, ctx.record.cpu)?;
        let StepReport::Io(report) = report else {
            return Err(unexpected(&what, &report));
        };
        let mut m = measure::from_io(&report);
        m.cpu = child.cpu;
        Ok(m)
    }

    fn bonnie(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        b: &BonnieStep,
    ) -> Result<Measurement, ExecError> {
        let spec = StepSpec::Bonnie {
            site: site_ref(ctx.lab, b.site.as_deref()),
            config: b.config.clone(),
        };
        let what = format!("bonnie step {}", step.name);
        let (report, child) = self.run_step(&spec, &what, step.timeout, ctx.record.cpu)?;
        let StepReport::Bonnie(report) = report else {
            return Err(unexpected(&what, &report));
        };
        let mut m = measure::from_bonnie(&report);
        m.cpu = child.cpu;
        Ok(m)
    }

    fn exec(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        e: &ExecStep,
    ) -> Result<Measurement, ExecError> {
        let what = e.command.join(" ");
        let (cmd, input) = self.user_command(ctx.lab, e.site.as_deref(), &e.command)?;
        let nic_before = ctx.record.nic.then(|| measure::read_nic(ctx.lab));
        let r = child::run(cmd, input, &what, step.timeout, ctx.record.cpu)?;
        r.check(&what)?;
        let payload = match &e.payload {
            Payload::Unknown => None,
            Payload::Declared(b) => Some(b.0),
            Payload::Parsed(re) => Some(parsed_payload(re, &r, &what)?),
        };
        let mut m = measure::from_exec(r.elapsed.as_secs_f64(), payload);
        m.duration_ns = r.elapsed.as_nanos() as u64;
        m.cpu = r.cpu;
        if let Some(before) = nic_before {
            measure::attach_nic(&mut m, &before, ctx.lab);
        }
        Ok(m)
    }

    /// Starts a capture at `at`; in a site, tcpdump keeps `snaplen` bytes of each packet (on
    /// the link, the emulator keeps whole packets).
    fn start_capture(
        &mut self,
        lab: Option<&Lab>,
        at: &CapturePoint,
        snaplen: u32,
    ) -> Result<Capture, ExecError> {
        let lab = lab.ok_or_else(|| ExecError::NeedsLab("a capture".into()))?;
        self.captures += 1;
        let file = std::env::temp_dir().join(format!(
            ".nsperf-capture-{}-{}.pcap{}",
            std::process::id(),
            self.captures,
            if matches!(at, CapturePoint::Link(_)) {
                "ng"
            } else {
                ""
            }
        ));
        let site = match at {
            CapturePoint::Link(link) => {
                // The emulator writes the file and starts recording before this returns.
                let c = lab::capture(&lab.name, link, &file).map_err(lab_error)?;
                return Ok(Capture::Link(c, file));
            }
            CapturePoint::Site(site) => site,
        };
        if !program_on_path("tcpdump") {
            return Err(ExecError::Skip(
                "a capture needs tcpdump, which is not installed".into(),
            ));
        }
        let spec = StepSpec::Capture {
            site: SiteRef {
                lab: lab.name.clone(),
                site: site.clone(),
            },
            file: file.clone(),
            snaplen,
        };
        let bg = self.background(&spec, "capture step")?;
        // tcpdump opens its capture a moment after it starts.
        std::thread::sleep(Duration::from_millis(500));
        Ok(Capture::Site(bg, file))
    }

    /// Stops a capture and analyses it: `nsperf trace --json` of the file; a capture on the
    /// link adds the emulator's summary (records and counters per direction) as
    /// `link_capture`.
    /// The file is kept as `keep` when given (`--keep-captures`); returns the analysis and
    /// where the file was kept.
    fn finish_capture(
        &mut self,
        c: Capture,
        keep: Option<PathBuf>,
    ) -> (Result<String, ExecError>, Option<String>) {
        std::thread::sleep(Duration::from_millis(200));
        let (file, summary) = match c {
            Capture::Site(bg, file) => {
                bg.interrupt(Duration::from_secs(3));
                (file, None)
            }
            Capture::Link(c, file) => match c.stop() {
                Ok(s) => (file, Some(s)),
                Err(e) => {
                    let _ = std::fs::remove_file(&file);
                    return (Err(lab_error(e)), None);
                }
            },
        };
        let out = measure::analyse_capture(&file, summary.as_ref());
        // The capture was written where its writer could (tcpdump drops privileges): a kept
        // one is moved beside the store once analysed.
        let kept = keep.and_then(|dest| match keep_file(&file, &dest) {
            Ok(()) => Some(dest.display().to_string()),
            Err(e) => {
                eprintln!(
                    "nsperf: the capture could not be kept as {}: {e}",
                    dest.display()
                );
                None
            }
        });
        let _ = std::fs::remove_file(&file);
        (out, kept)
    }
}

/// Moves `from` to `to` (copying across file systems), making `to`'s directory.
fn keep_file(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if std::fs::rename(from, to).is_err() {
        std::fs::copy(from, to)?;
    }
    Ok(())
}

/// The name of a kept capture: experiment, step, the resolved parameters, phase and
/// repetition (`e3-tcp-rtt=50ms,window=281600-r2.pcap`; `.pcapng` for a capture on a link),
/// with anything but letters, digits and `=,.-_` replaced by `_`.
fn capture_name(ctx: &RunContext<'_>, step: &ResolvedStep, at: &CapturePoint) -> String {
    let params: Vec<String> = step
        .params
        .iter()
        .map(|(k, v)| format!("{k}={}", v.value))
        .collect();
    let phase = match ctx.phase {
        Phase::None => String::new(),
        p => format!("-{p}"),
    };
    let ext = match at {
        CapturePoint::Link(_) => "pcapng",
        CapturePoint::Site(_) => "pcap",
    };
    let name: String = format!(
        "e{}-{}-{}{phase}-r{}",
        ctx.experiment,
        step.name,
        params.join(","),
        ctx.repetition
    )
    .chars()
    .map(|c| {
        if c.is_ascii_alphanumeric() || "=,.-_".contains(c) {
            c
        } else {
            '_'
        }
    })
    .collect();
    format!("{name}.{ext}")
}

/// A capture running during a step.
enum Capture {
    /// tcpdump in a site, writing this file.
    Site(Background, PathBuf),
    /// The emulator, on a link, writing this file.
    Link(lab::LinkCapture, PathBuf),
}

fn server_client(host: String, n: &NetStep) -> NetClient {
    NetClient::Server {
        config: ClientConfig {
            host,
            port: n.port,
            params: n.params.clone(),
            psk: None,
            connect_timeout: Duration::from_secs(10),
            // The runner starts nsperf's own server for the step.
            server_kind: nsperf_net::ServerKind::Nsperf,
            local: nsperf_net::LocalEnd::default(),
        },
    }
}

fn site_ref(lab: Option<&Lab>, site: Option<&str>) -> Option<SiteRef> {
    Some(SiteRef {
        lab: lab?.name.clone(),
        site: site?.to_string(),
    })
}

fn unexpected(what: &str, r: &StepReport) -> ExecError {
    let kind = serde_json::to_value(r)
        .ok()
        .and_then(|v| v.get("report").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_default();
    ExecError::Output {
        command: what.to_string(),
        reason: format!("answered a {kind} report"),
    }
}

fn parsed_payload(re: &regex::Regex, r: &ChildRun, what: &str) -> Result<u64, ExecError> {
    let out = String::from_utf8_lossy(&r.stdout);
    let err = String::from_utf8_lossy(&r.stderr);
    let found = re
        .captures(&out)
        .or_else(|| re.captures(&err))
        .and_then(|c| c.get(1))
        .map(|g| g.as_str().to_string());
    let bad = |reason: String| ExecError::Output {
        command: what.to_string(),
        reason,
    };
    let t =
        found.ok_or_else(|| bad(format!("payload_regex \"{}\" matched nothing", re.as_str())))?;
    nsperf_core::Bytes::parse(&t)
        .map(|b| b.0)
        .map_err(|e| bad(format!("payload_regex matched \"{t}\": {e}")))
}

fn program_on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

fn lab_error(e: LabError) -> ExecError {
    match e {
        LabError::NeedsRoot(_) => ExecError::Skip(e.to_string()),
        e => ExecError::Lab(e),
    }
}

impl Executor for ProcessExecutor {
    fn lab_available(&mut self, lab: &Lab) -> Result<(), ExecError> {
        match lab::live_owner(&lab.name) {
            Ok(Some(owner)) if owner != ProcessId::current() => Err(ExecError::LabTaken {
                lab: lab.name.clone(),
                pid: owner.pid,
            }),
            _ => Ok(()),
        }
    }

    fn lab_up(&mut self, lab: &Lab, link: &LinkSettings) -> Result<(), ExecError> {
        if !is_root() {
            return Err(ExecError::Skip(
                "the lab needs root (network namespaces)".into(),
            ));
        }
        let me = ProcessId::current();
        // A lab of this name left by a run that died is replaced; one whose owner lives is
        // never touched.
        self.lab_available(lab)?;
        match lab::down(&lab.name, false) {
            Ok(_) | Err(LabError::NotFound(_)) => {}
            Err(e) => return Err(lab_error(e)),
        }
        let cfg = UpConfig {
            owner: Some(me),
            ..crate::plan::up_config(&lab.name, &lab.sites, &lab.shape, link)
        };
        lab::up(&cfg, (self.emulator)(&lab.name))
            .map(|_| ())
            .map_err(lab_error)
    }

    fn lab_set(&mut self, lab: &Lab, link: &LinkSettings) -> Result<(), ExecError> {
        for change in link.from_default() {
            lab::set(&lab.name, &change, None).map_err(lab_error)?;
        }
        Ok(())
    }

    fn lab_down(&mut self, lab: &Lab) {
        // The agents in its sites first: they end their sessions rather than being killed.
        if let Some(h) = self.hosts.as_mut() {
            h.close_sites();
        }
        match lab::down(&lab.name, false) {
            Ok(_) | Err(LabError::NotFound(_)) => {}
            Err(e) => eprintln!("nsperf: lab down {}: {e}", lab.name),
        }
    }

    fn lab_stats(&mut self, lab: &Lab) -> Option<LabStats> {
        lab::stats(&lab.name).ok()
    }

    fn lab_events(&mut self, lab: &Lab) -> Vec<LinkEvent> {
        lab::events(&lab.name).unwrap_or_default()
    }

    fn lab_schedule(&mut self, lab: &Lab, schedule: &Schedule) -> Result<(), ExecError> {
        lab::set(&lab.name, &LinkChange::default(), Some(schedule.clone())).map_err(lab_error)
    }

    fn lab_stop_schedules(&mut self, lab: &Lab) {
        if let Err(e) = lab::stop_schedules(&lab.name) {
            eprintln!("nsperf: lab {}: stopping its schedules: {e}", lab.name);
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

    fn command(
        &mut self,
        ctx: &RunContext<'_>,
        site: Option<&str>,
        command: &[String],
        role: CommandRole,
    ) -> Result<(), ExecError> {
        let what = format!("{role} {}", command.join(" "));
        let (cmd, input) = self.user_command(ctx.lab, site, command)?;
        let timeout = Duration::from_secs(600);
        match role {
            CommandRole::Teardown => child::run_to_end(cmd, input, &what, timeout)?,
            CommandRole::Prime | CommandRole::Setup => {
                child::run(cmd, input, &what, timeout, false)?
            }
        }
        .check(&what)
    }

    fn service_start(
        &mut self,
        lab: Option<&Lab>,
        service: &ServiceSpec,
    ) -> Result<ServiceAnswer, ExecError> {
        self.service_stop(&service.name);
        let what = format!("service {}", service.describe());
        let mut config = service.config.clone();
        config.dir = config
            .dir
            .canonicalize()
            .map_err(|source| ExecError::ServiceDir {
                what: what.clone(),
                dir: service.config.dir.display().to_string(),
                source,
            })?;
        let site = match &service.site {
            Some(s) => {
                Some(site_ref(lab, Some(s)).ok_or_else(|| ExecError::NeedsLab(what.clone()))?)
            }
            None => None,
        };
        let spec = StepSpec::Service {
            site,
            service: config,
        };
        let (cmd, input) = self.step(&spec)?;
        let mut bg = Background::spawn_tied(cmd, Some(input), &what)?;
        let answer = match bg.next_line(SERVICE_READY) {
            Some(line) => match serde_json::from_str::<StepReport>(&line) {
                Ok(StepReport::Serving { url, credentials }) => ServiceAnswer { url, credentials },
                Ok(other) => return Err(unexpected(&what, &other)),
                Err(e) => {
                    return Err(ExecError::Output {
                        command: what,
                        reason: e.to_string(),
                    });
                }
            },
            None if nsperf_core::signal::interrupted() => return Err(ExecError::Interrupted),
            None => {
                let why = match bg.ended() {
                    Some(how) => how,
                    None => format!("no answer within {} s", SERVICE_READY.as_secs()),
                };
                bg.finish(Duration::ZERO);
                return Err(ExecError::DidNotStart { what, why });
            }
        };
        self.services.insert(
            service.name.clone(),
            RunningService {
                bg,
                what,
                counts: ServiceCounts::default(),
            },
        );
        Ok(answer)
    }

    fn service_check(&mut self, name: &str) -> Result<(), ExecError> {
        let s = self
            .services
            .get_mut(name)
            .ok_or_else(|| ExecError::ServiceNotRunning(name.to_string()))?;
        match s.bg.ended() {
            None => Ok(()),
            Some(how) => Err(ExecError::Stopped {
                what: s.what.clone(),
                how,
            }),
        }
    }

    fn service_stop(&mut self, name: &str) {
        if let Some(s) = self.services.remove(name) {
            // SIGINT: the server stops and its supervisor removes its record.
            s.bg.interrupt(Duration::from_secs(5));
        }
    }

    fn measure(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
    ) -> Result<Measurement, ExecError> {
        let t0 = Instant::now();
        let service = step.service().map(str::to_string);
        if let Some(s) = service.as_ref().and_then(|n| self.services.get_mut(n)) {
            s.before_step();
        }
        let mut m = match &step.action {
            _ if step.on.is_some() => self
                .hosts
                .as_mut()
                .ok_or(ExecError::HostsNotConnected)?
                .measure(ctx, step)?,
            Action::Net(n) => self.net(ctx, step, n)?,
            Action::Io(io) => self.io(ctx, step, io)?,
            Action::Bonnie(b) => self.bonnie(ctx, step, b)?,
            Action::Exec(e) => self.exec(ctx, step, e)?,
        };
        if let Some(name) = &service
            && let Some(s) = self.services.get_mut(name)
        {
            s.after_step(name, &mut m);
        }
        if m.duration_ns == 0 {
            m.duration_ns = t0.elapsed().as_nanos() as u64;
        }
        m.spec = step
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect();
        m.spec.insert("type".into(), step.kind.to_string());
        Ok(m)
    }
}
