//! `nsperf lab`: WAN labs of network namespaces joined by the userspace link emulator.
//! Arguments only; everything else is in the `nsperf-lab` crate.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use nsperf_core::Report;
use nsperf_core::process::ProcessId;
use nsperf_core::table::Table;
use nsperf_lab::config::{
    JitterDist, LinkChange, LossModel, QueueLimit, parse_delay, parse_link_name, parse_probability,
    parse_rate,
};
use nsperf_lab::lab::{self, LabSummary, UpConfig};
use nsperf_lab::topology::{Topology, TopologyKind};
use nsperf_lab::{LabError, Schedule};
use serde::Serialize;

use crate::output::print_json;

/// Arguments of `nsperf lab`.
#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

/// The `lab` subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Create a lab: one network namespace per site, joined by the emulated link.
    Up(Box<UpArgs>),
    /// Run a command inside a site's namespace: `nsperf lab exec t3 a -- ping 10.77.0.2`.
    Exec(ExecArgs),
    /// Change a running lab's link (and/or start a fault schedule).
    Set(Box<SetArgs>),
    /// Remove a lab (works after a crash); `--all` removes every lab.
    Down(DownArgs),
    /// List the labs with their sites and addresses.
    List(JsonArg),
    /// Counters, queue occupancy and events of a lab's links, per link and per queue.
    Stats(StatsArgs),
    /// Capture what crosses one link into a pcapng file (the emulator's drops and delays as
    /// packet comments): `nsperf lab capture t3 a-b -w wan.pcapng -t 10s`.
    Capture(CaptureArgs),
    /// Every change of the lab's links with its time (schedule, `lab set`, partitions).
    Events(StatsArgs),
    /// Start a file server in a site: `nsperf lab serve t3 b nfs /srv/data` (stops with the lab).
    Serve(super::lab_serve::ServeArgs),
    /// (internal) The supervisor of a server, run in the site by `lab serve`.
    #[command(hide = true)]
    Service(super::lab_serve::ServiceArgs),
    /// (internal) The embedded NFSv3 server in this namespace, in the foreground.
    #[command(hide = true)]
    Nfsd(super::lab_serve::NfsdArgs),
    /// (internal) The emulator process of a lab, started by `lab up`.
    #[command(hide = true)]
    Emulate {
        /// Lab name.
        name: String,
    },
}

/// A rate or `None` for unlimited (a newtype: clap treats `Option<Option<_>>` specially).
#[derive(Debug, Clone, Copy)]
struct RateArg(Option<f64>);

/// Link flags shared by `lab up`, `lab set` and schedule files.
#[derive(Debug, Clone, Default, Args)]
pub struct LinkFlags {
    /// Bottleneck rate per direction (`45mbit`, `1g`; `0` = unlimited).
    #[arg(long, value_parser = |s: &str| parse_rate(s).map(RateArg))]
    rate: Option<RateArg>,
    /// Bottleneck queue: `1000` packets, or bytes with a unit (`256k`); drop-tail.
    #[arg(long)]
    queue: Option<QueueLimit>,
    /// One-way delay per direction (`25ms`).
    #[arg(long, value_parser = |s: &str| parse_delay("delay", s), conflicts_with = "rtt")]
    delay: Option<u64>,
    /// Round-trip time: half of it is added each way (`50ms`).
    #[arg(long, value_parser = |s: &str| parse_delay("rtt", s))]
    rtt: Option<u64>,
    /// Jitter added to the delay (`5ms`); never reorders unless --jitter-reorder.
    #[arg(long, value_parser = |s: &str| parse_delay("jitter", s))]
    jitter: Option<u64>,
    /// Jitter distribution: uniform, normal or pareto.
    #[arg(long)]
    jitter_dist: Option<JitterDist>,
    /// Let jitter reorder packets.
    #[arg(long)]
    jitter_reorder: bool,
    /// Random loss: `1%`, or Gilbert-Elliott bursts `ge:P%,R%[,BAD%[,GOOD%]]`; `0` for none.
    #[arg(long)]
    loss: Option<LossModel>,
    /// Share of packets that skip the delay, overtaking earlier ones (`1%`).
    #[arg(long, value_parser = |s: &str| parse_probability("reorder", s))]
    reorder: Option<f64>,
    /// Share of packets delivered twice (`1%`).
    #[arg(long, value_parser = |s: &str| parse_probability("duplicate", s))]
    duplicate: Option<f64>,
    /// Share of packets with one flipped bit (`0.1%`).
    #[arg(long, value_parser = |s: &str| parse_probability("corrupt", s))]
    corrupt: Option<f64>,
    /// Only this link: `a-b` (mesh), a site's access link or port (star, dumbbell), `wan`,
    /// `access` (every access link) or `all`; default: every link of a mesh, the server's
    /// port of a star, the WAN of a dumbbell.
    #[arg(long, value_parser = parse_link_name)]
    link: Option<String>,
    /// Only the directions carrying traffic from this site.
    #[arg(long)]
    from: Option<String>,
    /// Only the directions carrying traffic to this site.
    #[arg(long)]
    to: Option<String>,
}

/// The access links of a star or dumbbell (`lab up` only).
#[derive(Debug, Clone, Default, Args)]
pub struct AccessFlags {
    /// Rate of every access link, each direction (`1g`).
    #[arg(long, value_parser = |s: &str| parse_rate(s).map(RateArg))]
    access_rate: Option<RateArg>,
    /// Queue of every access link (`1000` packets or `256k`).
    #[arg(long)]
    access_queue: Option<QueueLimit>,
    /// One-way delay of every access link (`1ms`).
    #[arg(long, value_parser = |s: &str| parse_delay("delay", s))]
    access_delay: Option<u64>,
}

impl AccessFlags {
    fn change(&self) -> LinkChange {
        LinkChange {
            rate_bps: self.access_rate.map(|r| r.0.unwrap_or(0.0)),
            queue: self.access_queue,
            delay_ns: self.access_delay,
            ..LinkChange::default()
        }
    }
}

impl LinkFlags {
    fn change(&self) -> LinkChange {
        LinkChange {
            link: self.link.clone(),
            from: self.from.clone(),
            to: self.to.clone(),
            rate_bps: self.rate.map(|r| r.0.unwrap_or(0.0)),
            queue: self.queue,
            delay_ns: self.delay.or(self.rtt.map(|r| r / 2)),
            jitter_ns: self.jitter,
            jitter_dist: self.jitter_dist,
            jitter_reorder: self.jitter_reorder.then_some(true),
            loss: self.loss,
            reorder: self.reorder,
            duplicate: self.duplicate,
            corrupt: self.corrupt,
            up: None,
        }
    }
}

/// Arguments of `lab up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Lab name (1-12 of a-z 0-9 _); namespaces are named nsp-NAME-SITE.
    name: String,
    /// Site names, comma-separated; site i gets 10.77.0.(i+1).
    #[arg(long, value_delimiter = ',', default_value = "a,b")]
    sites: Vec<String>,
    /// Add N client sites c1..cN after the named sites.
    #[arg(long, default_value_t = 0)]
    clients: usize,
    /// How the sites are joined: mesh (every pair its own link), star (every site on its
    /// access link into one switch, the server's port shared), dumbbell (two groups joined
    /// by one WAN link). The link flags set the mesh's links, the star's port, the
    /// dumbbell's WAN; --access-* set the access links.
    #[arg(long, default_value = "mesh")]
    topology: TopologyKind,
    /// The star's server: the site behind the shared port (default: the first site).
    #[arg(long)]
    server: Option<String>,
    /// The dumbbell's left group, comma-separated (default: the first half of the sites).
    #[arg(long, value_delimiter = ',')]
    left: Vec<String>,
    #[command(flatten)]
    access: AccessFlags,
    /// MTU of every site's link device (576-9000).
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// A fault schedule file to start once the lab is up (see docs/lab.md).
    #[arg(long)]
    schedule: Option<PathBuf>,
    /// Let idle CPUs enter deep idle states while the lab is up (by default the emulator
    /// holds /dev/cpu_dma_latency at 0, as cyclictest does, so that waking a forwarder does
    /// not add the idle-exit latency to every packet).
    #[arg(long)]
    allow_deep_idle: bool,
    /// Most memory the emulator's delay lines may hold (packets in flight: rate × delay;
    /// 10 Gbit/s × 100 ms is 125 MB); beyond it packets are dropped and counted as overruns.
    #[arg(long, default_value = "1g", value_parser = parse_memory)]
    memory: u64,
    /// Seed of the impairments' random numbers (loss, jitter, reorder, duplicate, corrupt), so
    /// that a run can be repeated with the same drops (default: a fresh seed from the OS).
    #[arg(long)]
    seed: Option<u64>,
    /// The process the lab belongs to (default: the one that ran `nsperf lab up`, e.g. the
    /// shell, script or plan run). While it runs, `lab down` from anywhere else refuses
    /// without --force; `--owner 0` gives the lab no owner.
    #[arg(long, value_name = "PID")]
    owner: Option<u32>,
    #[command(flatten)]
    link: LinkFlags,
    /// Print the lab as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `lab exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Lab name.
    name: String,
    /// Site name.
    site: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// Arguments of `lab set`.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// Lab name.
    name: String,
    /// Start this fault schedule now.
    #[arg(long)]
    schedule: Option<PathBuf>,
    #[command(flatten)]
    link: LinkFlags,
}

/// Arguments of `lab down`.
#[derive(Debug, Args)]
pub struct DownArgs {
    /// Lab name.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    name: Option<String>,
    /// Remove every lab.
    #[arg(long)]
    all: bool,
    /// Remove the lab even while the process it belongs to still runs.
    #[arg(long)]
    force: bool,
}

/// `--json` alone.
#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `lab capture`.
#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Lab name.
    name: String,
    /// The link (`a-b`, a site's access link or port, `wan`; see `lab stats`).
    link: String,
    /// The pcapng file to write.
    #[arg(short = 'w', long = "write")]
    file: PathBuf,
    /// Stop after this long (`10s`); default: until Ctrl-C.
    #[arg(short = 't', long = "time", value_parser = |s: &str| parse_delay("time", s))]
    time: Option<u64>,
    /// Analyse the link while it is captured, as `nsperf trace -i` does: per-connection
    /// figures and verdicts every `--interval`, then the analysis of the whole file.
    #[arg(long, alias = "analyze")]
    analyse: bool,
    /// With `--analyse`: print every this long (0: only the final analysis).
    #[arg(long, value_parser = nsperf_core::parse_duration, default_value = "1s", requires = "analyse")]
    interval: std::time::Duration,
    /// With `--analyse`: connections shown per interval and in detail at the end.
    #[arg(long, default_value_t = 3, requires = "analyse")]
    top: usize,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `lab stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Lab name.
    name: String,
    /// Print the result as JSON (the documented schema).
    #[arg(long)]
    json: bool,
}

fn read_schedule(path: &Option<PathBuf>) -> anyhow::Result<Option<Schedule>> {
    let Some(p) = path else { return Ok(None) };
    let bytes = std::fs::read(p).map_err(|e| LabError::Schedule {
        file: p.display().to_string(),
        line: 0,
        message: format!("cannot read: {e}"),
    })?;
    Ok(Some(Schedule::parse(&p.display().to_string(), &bytes)?))
}

/// Runs `nsperf lab`.
pub fn run(args: LabArgs) -> anyhow::Result<()> {
    match args.command {
        LabCommand::Up(a) => up(*a),
        LabCommand::Exec(a) => {
            let mut c = lab::exec_command(&a.name, &a.site, &a.command)?;
            let e = c.exec();
            Err(e).context(format!("running {}", a.command[0]))
        }
        LabCommand::Set(a) => {
            let schedule = read_schedule(&a.schedule)?;
            lab::set(&a.name, &a.link.change(), schedule)?;
            Ok(())
        }
        LabCommand::Down(a) => {
            if a.all {
                let done = lab::down_all(a.force)?;
                for (name, r) in &done {
                    report_stopped(name, r);
                }
                eprintln!("removed {} lab(s)", done.len());
            } else if let Some(n) = a.name {
                report_stopped(&n, &lab::down(&n, a.force)?);
            }
            Ok(())
        }
        LabCommand::List(a) => list(a.json),
        LabCommand::Stats(a) => super::lab_report::stats(&a.name, a.json),
        LabCommand::Capture(a) => {
            let analyse = a.analyse.then_some(super::lab_report::Analyse {
                interval: a.interval,
                top: a.top,
            });
            super::lab_report::capture(&a.name, &a.link, &a.file, a.time, a.json, analyse)
        }
        LabCommand::Events(a) => super::lab_report::events(&a.name, a.json),
        LabCommand::Emulate { name } => Ok(nsperf_lab::emulator::run(&name)?),
        LabCommand::Serve(a) => super::lab_serve::serve(a),
        LabCommand::Service(a) => super::lab_serve::service(a),
        LabCommand::Nfsd(a) => super::lab_serve::nfsd(a),
    }
}

fn parse_memory(s: &str) -> Result<u64, LabError> {
    nsperf_core::units::Bytes::parse(s)
        .map(|b| b.0)
        .map_err(|e| LabError::value("memory", s, e.reason))
}

fn report_stopped(lab: &str, r: &lab::DownReport) {
    for p in &r.stopped {
        eprintln!("nsperf: lab {lab}: stopped {p}, still running inside the lab");
    }
}

fn topology(a: &UpArgs) -> Result<Topology, LabError> {
    Topology::of_kind(a.topology, a.server.clone(), a.left.clone())
}

/// The command that runs lab `name`'s emulator process (`nsperf lab emulate NAME`), for
/// `lab up` and for the labs of `nsperf run`.
pub fn emulator_command(name: &str) -> std::process::Command {
    let exe = nsperf_core::process::running_binary().unwrap_or_else(|_| "/proc/self/exe".into());
    let mut emu = std::process::Command::new(exe);
    emu.args(["lab", "emulate", name]);
    emu
}

fn up(a: UpArgs) -> anyhow::Result<()> {
    let owner = match a.owner {
        Some(0) => None,
        Some(pid) => Some(ProcessId::of(pid).ok_or_else(|| {
            LabError::Usage(format!("--owner {pid}: no such process is running"))
        })?),
        None => ProcessId::parent(),
    };
    let cfg = UpConfig {
        name: a.name.clone(),
        sites: a.sites.clone(),
        clients: a.clients,
        mtu: a.mtu,
        topology: topology(&a)?,
        link: a.link.change(),
        access: a.access.change(),
        schedule: read_schedule(&a.schedule)?,
        allow_deep_idle: a.allow_deep_idle,
        memory_bytes: a.memory,
        seed: a.seed,
        owner,
    };
    let state = lab::up(&cfg, emulator_command(&a.name))?;
    if a.json {
        return print_json(&state);
    }
    let mut t = Table::new(["site", "namespace", "address"]);
    for s in &state.sites {
        t.row([s.name.clone(), s.netns.clone(), s.addr.to_string()]);
    }
    let shape = match &state.topology {
        Topology::Mesh => format!("link {}", describe_link(&cfg.link)),
        Topology::Star { server } => format!(
            "star, port of {}: {}; access links: {}",
            server.as_deref().unwrap_or("?"),
            describe_link(&cfg.link),
            describe_link(&cfg.access)
        ),
        Topology::Dumbbell { left } => format!(
            "dumbbell, left {}: wan {}; access links: {}",
            left.join(","),
            describe_link(&cfg.link),
            describe_link(&cfg.access)
        ),
    };
    println!(
        "lab {} is up (emulator pid {}, MTU {}); {shape}",
        state.name,
        state.emulator_pid.unwrap_or(0),
        state.mtu,
    );
    print!("{}", t.render());
    println!(
        "run a command in a site:  nsperf lab exec {} {} -- CMD",
        state.name, state.sites[0].name
    );
    println!("remove the lab:           nsperf lab down {}", state.name);
    Ok(())
}

fn describe_link(c: &LinkChange) -> String {
    let mut p = nsperf_lab::LinkParams::default();
    c.apply(&mut p);
    p.describe()
}

#[derive(Serialize)]
struct ListSpec {}

#[derive(Serialize)]
struct ListSummary {
    labs: Vec<LabSummary>,
}

fn list(json: bool) -> anyhow::Result<()> {
    let labs = lab::list();
    if json {
        let r: Report<ListSpec, (), ListSummary> = Report::new(
            nsperf_core::report::Command::Lab,
            ListSpec {},
            ListSummary { labs },
        );
        return print_json(&r);
    }
    let mut t = Table::new(["lab", "site", "namespace", "address", "emulator", "owner"]);
    for l in &labs {
        for s in &l.sites {
            t.row([
                l.name.clone(),
                s.name.clone(),
                s.netns.clone(),
                s.addr.to_string(),
                if l.running {
                    format!("pid {}", l.emulator_pid.unwrap_or(0))
                } else {
                    "NOT RUNNING (lab down it)".into()
                },
                l.owner.map_or("-".into(), |o| o.to_string()),
            ]);
        }
    }
    if labs.is_empty() {
        println!("no labs");
    } else {
        print!("{}", t.render());
    }
    Ok(())
}
