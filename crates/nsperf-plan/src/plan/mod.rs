//! Plan files: what to build (a lab, or nothing), the parameter matrix, the steps of each
//! cell, repetitions, and what to record beside.
//!
//! A plan is parsed strictly: an unknown key, a value of the wrong type, an unknown template
//! variable or a value that does not parse in any cell is an error naming the place, found
//! before anything runs. Every cell of the matrix is resolved at load time into the engines'
//! own configuration types and checked with the engines' own rules (the lab's names, link
//! flags and MTU; the network test's and the io run's `validate`), so a plan that passes
//! `nsperf run --dry-run` is one the engines accept. The format is documented in
//! `docs/run.md`.
//!
//! Inside: `raw` (the TOML as written), `build` (matrix expansion and the lab), `resolve`
//! (one step of one cell, per step type).

mod build;
mod ctx;
mod hosts;
mod raw;
mod resolve;
mod route;
mod service;

use std::collections::BTreeMap;
use std::time::Duration;

use nsperf_io::RunConfig;
use nsperf_lab::lab::UpConfig;
use nsperf_lab::service::ServiceConfig;
use nsperf_lab::{LinkSetup, Topology};
use nsperf_net::TestParams;
use nsperf_results::{IoShape, ParamValue, RunConditions};
pub use nsperf_results::{Phase, RunKey};

use crate::error::PlanError;
pub use hosts::{BatchGroup, HostSpec, Hosts, OnHosts};
pub use raw::Param;
pub use service::service_target;

/// Most runs one plan may expand to.
pub const MAX_RUNS: usize = 100_000;

/// What to record beside each run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// CPU use per core, sampled each second.
    pub cpu: bool,
    /// NIC counters before and after (wire bytes beside payload bytes).
    pub nic: bool,
}

/// The lab a plan builds (its link may be templated per cell).
#[derive(Debug, Clone, PartialEq)]
pub struct LabSpec {
    /// The name the plan gives (`[lab] name`); without one each run makes a unique name
    /// ([`LabSpec::name_for_run`]), so two runs of one plan never share a lab.
    pub name: Option<String>,
    /// Site names in order, the `clients` sites `c1`..`cN` included; site `i` has address
    /// `10.77.0.(i+1)`.
    pub sites: Vec<String>,
    /// What only `lab up` sets: the topology, the emulator's memory, the seed.
    pub shape: LabShape,
}

/// What a lab is built with that stays the same for the whole run of a plan (`lab up`
/// only): how the sites are joined, the memory of the delay lines, the impairments' seed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabShape {
    /// How the sites are joined (defaults filled in: a star's server, a dumbbell's left).
    pub topology: Topology,
    /// Most bytes the emulator's delay lines may hold; `None`: the lab's default.
    pub memory_bytes: Option<u64>,
    /// Seed of the impairments' random numbers; `None`: a fresh one from the OS.
    pub seed: Option<u64>,
}

impl LabSpec {
    /// The lab name of the run of process `pid` started at `unix_ns`: the plan's name, or
    /// `r` + the pid and the start time in base 36 (at most 11 of the lab's 12 characters).
    pub fn name_for_run(&self, pid: u32, unix_ns: u64) -> String {
        if let Some(n) = &self.name {
            return n.clone();
        }
        let tick = (unix_ns / 1_000_000) % 36u64.pow(4);
        format!("r{}_{:0>4}", base36(u64::from(pid)), base36(tick))
    }
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut v = Vec::new();
    loop {
        v.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    v.reverse();
    String::from_utf8(v).unwrap_or_default()
}

/// The lab link of a cell: parsed by the lab's own parser (the flags of `nsperf lab up`).
pub type LinkSettings = LinkSetup;

/// The `lab up` configuration of a plan's lab named `name` with one cell's link (no
/// schedule, no owner: the executor sets the owner).
pub fn up_config(name: &str, sites: &[String], shape: &LabShape, link: &LinkSettings) -> UpConfig {
    let d = UpConfig::default();
    UpConfig {
        name: name.to_string(),
        sites: sites.to_vec(),
        clients: 0,
        mtu: link.mtu(),
        topology: shape.topology.clone(),
        link: link.change.clone(),
        access: link.access.clone(),
        memory_bytes: shape.memory_bytes.unwrap_or(d.memory_bytes),
        seed: shape.seed,
        ..d
    }
}

/// Rate of a lab link in bit/s, when limited.
pub fn link_rate_bps(l: &LinkSettings) -> Option<f64> {
    l.change.rate_bps.filter(|r| *r > 0.0)
}

/// Round-trip time of a lab link (twice the one-way delay), when set.
pub fn link_rtt(l: &LinkSettings) -> Option<Duration> {
    l.change
        .delay_ns
        .map(|d| Duration::from_nanos(d.saturating_mul(2)))
}

/// The bandwidth-delay product in bytes, when rate and RTT are both known.
pub fn bdp_bytes(l: &LinkSettings) -> Option<u64> {
    Some((link_rate_bps(l)? / 8.0 * link_rtt(l)?.as_secs_f64()).ceil() as u64)
}

/// The link in the spelling of `nsperf lab up` flags, for people.
pub fn describe_link(l: &LinkSettings) -> String {
    let mut s = l.change.to_flags();
    if !l.access.is_empty() {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(&l.access.to_flags().replace("--", "--access-"));
    }
    if let Some(m) = l.mtu {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(&format!("--mtu {m}"));
    }
    s
}

pub use nsperf_results::StepKind;

/// Where a network test's server runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// In the client's process, on 127.0.0.1 (`nsperf net --loopback`).
    Loopback,
    /// A server already running (started by the user), by name or address.
    Host(String),
    /// Client and server in two sites of the plan's lab.
    Lab {
        /// Site where the client runs.
        client: String,
        /// Site where the server runs.
        server: String,
        /// Index of the server site (its address is `10.77.0.(i+1)`).
        server_index: usize,
    },
}

/// A network step (`type = "net"`, `"rr"` or `"sweep"`), resolved for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct NetStep {
    /// Where the server is.
    pub target: Target,
    /// The server's port.
    pub port: u16,
    /// The test, as the network engine takes it (checked by its `validate`).
    pub params: TestParams,
    /// Take a capture during the step and analyse it.
    pub capture: Option<CapturePoint>,
}

/// Where a network or io step's capture is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapturePoint {
    /// tcpdump on every interface of this site (`capture = "SITE"`).
    Site(String),
    /// On this emulated link, both directions, by the lab's emulator (`capture = "link"`:
    /// the bottleneck of the step's path).
    Link(String),
}

/// A file-system step (`type = "io"`), resolved for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct IoStep {
    /// Lab site to run in, if any.
    pub site: Option<String>,
    /// The run, as the io engine takes it (checked by its `validate`); a cache phase
    /// overrides its cache mode. Through a service, its `nfs://` or `smb://` target is the service's
    /// address as known at load time; the runner puts the running service's URL in.
    pub config: RunConfig,
    /// The plan's service it goes through, if any.
    pub service: Option<ServiceUse>,
    /// The plan's mirror peer its writes are replicated to (`replicate`): its
    /// `config.replicate` holds the peer site's address (port 0), and the runner puts in the
    /// address and port the running peer listens on.
    pub peer: Option<PeerUse>,
    /// Take a capture of its protocol's packets during the step and analyse it.
    pub capture: Option<CapturePoint>,
}

impl IoStep {
    /// True when the target is reached through a network file protocol (a service, an
    /// `nfs://` or `smb://` URL): the engine sets the cache phase itself (it has no client cache; it
    /// evicts the server's copy after laying the file out, or reads it through once).
    pub fn is_remote(&self) -> bool {
        self.config.target.is_remote()
    }
}

/// A bonnie++-style suite (`type = "bonnie"`), resolved for one cell: per-char and block
/// output, rewrite, per-char and block input, random seeks and the metadata test in one
/// directory, as `nsperf io bonnie` runs them.
#[derive(Debug, Clone, PartialEq)]
pub struct BonnieStep {
    /// Lab site to run in, if any.
    pub site: Option<String>,
    /// The suite, as the io engine takes it.
    pub config: nsperf_io::bonnie::BonnieConfig,
}

/// An io step's use of a service: which one, and the directory inside its export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceUse {
    /// The service's name.
    pub name: String,
    /// A relative path inside the export (empty: its top).
    pub path: String,
}

/// An io step's mirror peer (`replicate = { peer = "SITE" }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerUse {
    /// The service's name, `mirror.SITE`.
    pub name: String,
    /// The lab site it runs in.
    pub site: String,
    /// Where it makes its directory (absolute): `replicate.dir`, or the step's own.
    pub dir: std::path::PathBuf,
    /// True when the path from the step's site crosses the lab's link (`rate`, `rtt`: a
    /// mesh's pair link, a star's port, a dumbbell's WAN); false when it crosses only access
    /// links (two sites of one dumbbell group: `access_rate`, `access_delay`).
    pub crosses_link: bool,
}

/// Network streams the runner keeps between two lab sites while a step runs (`load`): the
/// clients' traffic the step's path shares, iperf3's cross traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    /// The sending site.
    pub from: String,
    /// The receiving site (its one-off server listens there).
    pub to: String,
    /// Its index: its address is `10.77.0.(to_index + 1)`.
    pub to_index: usize,
    /// The server's port.
    pub port: u16,
    /// The streams (`duration_ns` is set when it runs: the step's timeout; it is stopped
    /// when the step ends).
    pub params: TestParams,
    /// How long it runs before the step starts (its streams at their share).
    pub ramp: Duration,
    /// What it shares with the step's own traffic.
    pub shared: SharedPath,
}

impl std::fmt::Display for LoadSpec {
    /// `2 streams ha -> dr (port 5302), from 1 s before the step; shares link wan (45 Mbit/s) with it`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.params.streams;
        write!(
            f,
            "{n} stream{} {} -> {} (port {}), from {:.1} s before the step; ",
            if n == 1 { "" } else { "s" },
            self.from,
            self.to,
            self.port,
            self.ramp.as_secs_f64()
        )?;
        match &self.shared {
            SharedPath::Link { name, rate_bps } => {
                let rate = rate_bps.map_or("its rate not set".into(), |r| {
                    nsperf_core::units::BitRate(r).to_string()
                });
                write!(f, "shares link {name} ({rate}) with it")
            }
            SharedPath::Apart => f.write_str("crosses no link direction the step's traffic does"),
            SharedPath::Unknown => f.write_str("the step's own path is not known"),
        }
    }
}

/// The link a load and a step's own traffic both cross in one direction.
#[derive(Debug, Clone, PartialEq)]
pub enum SharedPath {
    /// They share this link (the narrowest when several), of this rate in the cell when
    /// limited.
    Link {
        /// The lab's name of the link (`wan`, `a-b`, a site's access link).
        name: String,
        /// Its rate, bit/s, in this cell.
        rate_bps: Option<f64>,
    },
    /// They cross no link direction in common.
    Apart,
    /// The step's own path cannot be told (a command, a step on hosts, a URL).
    Unknown,
}

/// A service of the plan: a file server (`[[service]]`), or the mirror peer of the io steps
/// that replicate to a lab site (`replicate = { peer = "SITE" }`). Started when the first step
/// that goes through it comes, health-checked, and stopped when the plan ends (or its lab is
/// rebuilt).
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceSpec {
    /// Its name in the plan (a mirror peer's is `mirror.SITE`).
    pub name: String,
    /// The lab site it runs in; `None`: this host's loopback, on a free port.
    pub site: Option<String>,
    /// Index of the site in the lab (its address is `10.77.0.(i+1)`).
    pub site_index: Option<usize>,
    /// What it is.
    pub kind: ServiceKind,
}

/// What a plan's service runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ServiceKind {
    /// A file server: what it serves and with which server (the lab's own type, checked by
    /// its rules).
    Files(ServiceConfig),
    /// `nsperf io peer`: the receiving end of the mirror of io steps with `replicate`, in a
    /// directory `.nsperf-PID-peer` it makes inside `dir` (and removes when it stops), on a
    /// free port of its site.
    MirrorPeer {
        /// Where its directory is made (absolute).
        dir: std::path::PathBuf,
    },
}

impl ServiceSpec {
    /// For people: `nas (embedded nfs of /srv/x in site server)`, `mirror.b (mirror peer
    /// writing under /data in site b)`.
    pub fn describe(&self) -> String {
        let place = self
            .site
            .as_ref()
            .map(|s| format!(" in site {s}"))
            .unwrap_or_else(|| " on this host's loopback".into());
        match &self.kind {
            ServiceKind::Files(c) => format!(
                "{} ({} {} of {}{place})",
                self.name,
                c.server,
                c.protocol,
                c.dir.display(),
            ),
            ServiceKind::MirrorPeer { dir } => format!(
                "{} (mirror peer writing under {}{place})",
                self.name,
                dir.display()
            ),
        }
    }
}

/// Where the payload byte count of an external command comes from.
#[derive(Debug, Clone)]
pub enum Payload {
    /// Not known: only the elapsed time is recorded.
    Unknown,
    /// Declared in the plan.
    Declared(nsperf_core::Bytes),
    /// The first capture group of this regex over stdout then stderr (a byte count).
    Parsed(regex::Regex),
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Payload::Unknown, Payload::Unknown) => true,
            (Payload::Declared(a), Payload::Declared(b)) => a == b,
            (Payload::Parsed(a), Payload::Parsed(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

/// An external command (`type = "exec"`), resolved for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecStep {
    /// Lab site to run it in, if any.
    pub site: Option<String>,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Payload bytes.
    pub payload: Payload,
    /// Command run before a `remote-warm` phase.
    pub prime: Option<Vec<String>>,
}

/// A captured NFSv3 workload replayed through the lab (`type = "replay"`), resolved for one
/// cell: from a lab site against the plan's NFS service in another, as `nsperf replay
/// --lab` replays it, beside the model at the cell's link.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayStep {
    /// The lab site the replayer runs in.
    pub site: String,
    /// The plan's NFS service it replays against (in another site).
    pub service: String,
    /// The capture (absolute), checked at load to hold an NFSv3 or NFSv4 workload.
    pub capture: std::path::PathBuf,
    /// What the capture lacks of its exchanges, found at load: requests without both ends
    /// are not replayed nor modelled (stored with each run, a finding when any).
    pub capture_gaps: nsperf_trace::replay::report::CaptureGaps,
    /// The replayed connections' TCP window (their socket buffers), bytes; None: the
    /// kernel's autotuning (and the model's windows as captured).
    pub window_bytes: Option<u64>,
    /// The capture is NFSv4's: replayed over NFSv4.1 (the service is ganesha offering v4).
    pub v4: bool,
    /// The round trip of the path to the service's site and back in this cell, ms: the
    /// one-way delays of the links crossed both ways, summed (what the model is given).
    pub rtt_ms: f64,
    /// The narrowest rate of those links, bit/s, when one is limited.
    pub rate_bps: Option<f64>,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Network test.
    Net(NetStep),
    /// File-system test (boxed: the largest by far).
    Io(Box<IoStep>),
    /// The bonnie++-style suite.
    Bonnie(BonnieStep),
    /// External command.
    Exec(ExecStep),
    /// A captured workload replayed through the lab.
    Replay(ReplayStep),
}

/// One step resolved for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedStep {
    /// Step name (unique in the plan).
    pub name: String,
    /// Its type.
    pub kind: StepKind,
    /// Cache phases in order; `[Phase::None]` when none were asked.
    pub phases: Vec<Phase>,
    /// Kill the step after this long.
    pub timeout: Duration,
    /// The matrix parameters this step depends on, with this cell's values resolved (a
    /// `{bdp}` replaced by its byte count, the template kept beside) and typed.
    pub params: Vec<(String, ParamValue)>,
    /// What it does.
    pub action: Action,
    /// The `[hosts]` it runs on (through their agents), when it names some; a network step's
    /// target is then its server host's address.
    pub on: Option<OnHosts>,
    /// A fault schedule played on the lab's links while the step runs, its times from the
    /// step's start (stopped, and the cell's link restored, when the step ends).
    pub schedule: Option<nsperf_lab::Schedule>,
    /// Command run once in the cell before the step's first run (where the step runs).
    pub setup: Option<Vec<String>>,
    /// Command run once in the cell after the step's last run, when its setup succeeded.
    pub teardown: Option<Vec<String>>,
    /// Network streams kept on the lab's links while the step runs.
    pub load: Option<LoadSpec>,
}

impl ResolvedStep {
    /// Whether the step runs in the plan's lab (so it needs the lab up).
    pub fn needs_lab(&self, plan_has_lab: bool) -> bool {
        if self.load.is_some() {
            return true;
        }
        if let Some(on) = &self.on {
            return on.in_lab;
        }
        match &self.action {
            Action::Net(n) => matches!(n.target, Target::Lab { .. }),
            Action::Io(io) => io.site.is_some(),
            Action::Bonnie(b) => b.site.is_some(),
            Action::Exec(e) => e.site.is_some() || e.prime.is_some() && plan_has_lab,
            Action::Replay(_) => true,
        }
    }

    /// The lab site the step's own process runs in (a network step's client), if any.
    pub fn site(&self) -> Option<&str> {
        match &self.action {
            Action::Net(n) => match &n.target {
                Target::Lab { client, .. } => Some(client),
                _ => None,
            },
            Action::Io(io) => io.site.as_deref(),
            Action::Bonnie(b) => b.site.as_deref(),
            Action::Exec(e) => e.site.as_deref(),
            Action::Replay(r) => Some(&r.site),
        }
    }

    /// Where the step takes a capture, if it does (a network step, or an io step through a
    /// lab).
    pub fn capture(&self) -> Option<&CapturePoint> {
        match &self.action {
            Action::Net(n) => n.capture.as_ref(),
            Action::Io(io) => io.capture.as_ref(),
            Action::Bonnie(_) | Action::Exec(_) | Action::Replay(_) => None,
        }
    }

    /// The plan's service the step goes through (a file server, or the mirror peer it
    /// replicates to), if any.
    pub fn service(&self) -> Option<&str> {
        match &self.action {
            Action::Io(io) => io
                .service
                .as_ref()
                .map(|s| s.name.as_str())
                .or(io.peer.as_ref().map(|p| p.name.as_str())),
            Action::Replay(r) => Some(&r.service),
            _ => None,
        }
    }

    /// True for an io step through a network file protocol, whose engine sets the cache
    /// phase itself: the runner neither drops the page cache nor primes for it.
    pub fn engine_sets_cache(&self) -> bool {
        matches!(&self.action, Action::Io(io) if io.is_remote())
    }
}

/// One cell of the matrix: a value for every parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Position in the expansion order.
    pub index: usize,
    /// `(parameter, value)` in matrix order.
    pub params: Vec<(String, String)>,
    /// Link settings for this cell (when the plan has a lab).
    pub link: Option<LinkSettings>,
    /// The steps, resolved.
    pub steps: Vec<ResolvedStep>,
}

impl Cell {
    /// Stable key of the cell: `rtt=50ms,window=default` (`-` for a plan without a matrix).
    pub fn key(&self) -> String {
        if self.params.is_empty() {
            return "-".into();
        }
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// What `step` runs under in this cell: the lab link it crosses, the window it asks
    /// for, the shape of its io.
    pub fn conditions(&self, step: &ResolvedStep) -> RunConditions {
        let mut c = RunConditions::default();
        // A step on lab sites: its clients together (their windows add up).
        let on_sites = step.on.as_ref().filter(|o| o.in_lab);
        let clients = on_sites.map_or(1, |o| o.hosts.len() as u64);
        match &step.action {
            Action::Net(n) => {
                c.in_lab = matches!(n.target, Target::Lab { .. }) || on_sites.is_some();
                c.window_bytes = n.params.window.map(|w| w.saturating_mul(clients));
                if c.in_lab
                    && let Some(l) = &self.link
                {
                    c.link_rate_bps = link_rate_bps(l);
                    c.rtt_s = link_rtt(l).map(|t| t.as_secs_f64());
                }
            }
            Action::Io(io) => {
                c.io = Some(IoShape {
                    workload: io.config.workload,
                    size_bytes: io.config.size_bytes,
                    bs_bytes: io.config.bs_bytes,
                });
                // Through a file service across the lab's link: the link's ceilings, and the
                // protocol's window, the data of the RPCs in flight (iodepth x bs).
                if io.is_remote()
                    && (io.site.is_some() || on_sites.is_some())
                    && let Some(l) = &self.link
                {
                    c.in_lab = true;
                    c.link_rate_bps = link_rate_bps(l);
                    c.rtt_s = link_rtt(l).map(|t| t.as_secs_f64());
                    c.window_bytes = Some(
                        u64::from(io.config.iodepth)
                            .saturating_mul(io.config.bs_bytes)
                            .saturating_mul(u64::from(io.config.jobs))
                            .saturating_mul(clients),
                    );
                }
                // Mirrored to a peer across the lab's link: its ceilings, and the mirror's
                // window, the writes in flight to the peer (protocol A: the bytes in flight
                // allowed, its writes complete once sent).
                if let (Some(p), Some(r), Some(l)) = (&io.peer, &io.config.replicate, &self.link) {
                    c.in_lab = true;
                    if p.crosses_link {
                        c.link_rate_bps = link_rate_bps(l);
                        c.rtt_s = link_rtt(l).map(|t| t.as_secs_f64());
                    } else {
                        // Out through one access link and in through the peer's.
                        c.link_rate_bps = l.access.rate_bps.filter(|r| *r > 0.0);
                        c.rtt_s = l.access.delay_ns.map(|d| d as f64 * 4.0 / 1e9);
                    }
                    let queued = u64::from(io.config.iodepth).saturating_mul(io.config.bs_bytes);
                    let per_job = match r.protocol {
                        nsperf_io::mirror::Protocol::A => r.max_in_flight_bytes,
                        _ => queued.min(r.max_in_flight_bytes),
                    };
                    c.window_bytes = Some(per_job.saturating_mul(u64::from(io.config.jobs)));
                }
            }
            Action::Replay(r) => {
                // Across the lab's links to the service's site: the path's ceilings (what
                // the model is given), and the window asked of the replayed connections.
                c.in_lab = true;
                c.window_bytes = r.window_bytes;
                c.link_rate_bps = r.rate_bps;
                c.rtt_s = (r.rtt_ms > 0.0).then(|| r.rtt_ms / 1e3);
            }
            Action::Bonnie(_) | Action::Exec(_) => {}
        }
        c
    }
}

/// A parsed, fully validated plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Plan name.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// Repetitions of each (cell, step, phase).
    pub repetitions: u32,
    /// The lab to build, if any.
    pub lab: Option<LabSpec>,
    /// The hosts its steps run on through agents, if any.
    pub hosts: Option<Hosts>,
    /// File services its steps go through.
    pub services: Vec<ServiceSpec>,
    /// Matrix parameters in order, with their values.
    pub matrix: Vec<(String, Vec<String>)>,
    /// What to record beside.
    pub record: Record,
    /// Every cell, resolved.
    pub cells: Vec<Cell>,
    /// The plan text as given.
    pub source: String,
}

impl Plan {
    /// Parses and validates plan bytes.
    pub fn parse(bytes: &[u8]) -> Result<Plan, PlanError> {
        let text = std::str::from_utf8(bytes).map_err(|_| PlanError::NotUtf8)?;
        let raw: raw::RawPlan = toml::from_str(text).map_err(|e| {
            // "line L, column C: what", not toml's multi-line drawing of the line.
            let message = e.message().trim().replace('\n', " ");
            PlanError::Syntax(match e.span() {
                Some(span) => {
                    let before = &text[..span.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                    format!("line {line}, column {column}: {message}")
                }
                None => message,
            })
        })?;
        build::build(raw, text)
    }

    /// Number of runs of a whole experiment.
    pub fn total_runs(&self) -> usize {
        self.cells
            .iter()
            .map(|c| c.steps.iter().map(|s| s.phases.len()).sum::<usize>())
            .sum::<usize>()
            * self.repetitions as usize
    }

    /// Every run in execution order: cell by cell, repetition by repetition, step by step,
    /// phase by phase (so a warm phase follows its cold phase directly).
    pub fn runs(&self) -> Vec<(usize, usize, RunKey)> {
        let mut v = Vec::new();
        for (ci, c) in self.cells.iter().enumerate() {
            let key = c.key();
            for rep in 1..=self.repetitions {
                for (si, s) in c.steps.iter().enumerate() {
                    for &phase in &s.phases {
                        v.push((
                            ci,
                            si,
                            RunKey {
                                cell: key.clone(),
                                step: s.name.clone(),
                                phase,
                                repetition: rep,
                            },
                        ));
                    }
                }
            }
        }
        v
    }

    /// A stable fingerprint of the plan text (FNV-1a 64), to find the experiment to resume.
    pub fn fingerprint(&self) -> String {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in self.source.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        format!("{h:016x}")
    }
}

/// The default plan embedded in the binary (`plans/default.toml`).
pub const DEFAULT_PLAN: &str = include_str!("../../../../plans/default.toml");

/// The parameters of each cell as a map (for display and export).
pub fn params_map(c: &Cell) -> BTreeMap<String, String> {
    c.params.iter().cloned().collect()
}

#[cfg(test)]
mod load_tests;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod replicate_tests;
#[cfg(test)]
mod tests;
