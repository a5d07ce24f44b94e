//! `nsperf lab`: WAN labs of network namespaces joined by the userspace link emulator.
//! Arguments only; everything else is in the `nsperf-lab` crate.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use nsperf_core::Report;
use nsperf_core::table::Table;
use nsperf_core::units::Bytes;
use nsperf_lab::config::{
    JitterDist, LinkChange, LossModel, QueueLimit, parse_delay, parse_probability, parse_rate,
};
use nsperf_lab::emulator::{DirectionStats, EventRecord, LabStats, QueueSample};
use nsperf_lab::lab::{self, LabSummary, UpConfig};
use nsperf_lab::state::SiteState;
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
    /// Counters, queue occupancy and events of a lab's link.
    Stats(StatsArgs),
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
    #[arg(long, value_parser = QueueLimit::parse)]
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
    #[arg(long, value_parser = JitterDist::parse)]
    jitter_dist: Option<JitterDist>,
    /// Let jitter reorder packets.
    #[arg(long)]
    jitter_reorder: bool,
    /// Random loss: `1%`, or Gilbert-Elliott bursts `ge:P%,R%[,BAD%[,GOOD%]]`; `0` for none.
    #[arg(long, value_parser = LossModel::parse)]
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
    /// Only the directions leaving this site.
    #[arg(long)]
    from: Option<String>,
    /// Only the directions entering this site.
    #[arg(long)]
    to: Option<String>,
}

impl LinkFlags {
    fn change(&self) -> LinkChange {
        LinkChange {
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
}

/// `--json` alone.
#[derive(Debug, Args)]
pub struct JsonArg {
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
                let names = lab::down_all()?;
                eprintln!("removed {} lab(s)", names.len());
            } else if let Some(n) = a.name {
                lab::down(&n)?;
            }
            Ok(())
        }
        LabCommand::List(a) => list(a.json),
        LabCommand::Stats(a) => stats(&a.name, a.json),
        LabCommand::Emulate { name } => Ok(nsperf_lab::emulator::run(&name)?),
    }
}

fn up(a: UpArgs) -> anyhow::Result<()> {
    let cfg = UpConfig {
        name: a.name.clone(),
        sites: a.sites,
        clients: a.clients,
        mtu: a.mtu,
        link: a.link.change(),
        schedule: read_schedule(&a.schedule)?,
        allow_deep_idle: a.allow_deep_idle,
    };
    let exe = std::env::current_exe().context("finding the nsperf binary")?;
    let mut emu = std::process::Command::new(exe);
    emu.args(["lab", "emulate", &a.name]);
    let state = lab::up(&cfg, emu)?;
    if a.json {
        return print_json(&state);
    }
    let mut t = Table::new(["site", "namespace", "address"]);
    for s in &state.sites {
        t.row([s.name.clone(), s.netns.clone(), s.addr.to_string()]);
    }
    println!(
        "lab {} is up (emulator pid {}); link {}",
        state.name,
        state.emulator_pid.unwrap_or(0),
        describe_link(&cfg.link)
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
        let r: Report<ListSpec, (), ListSummary> =
            Report::new("lab", ListSpec {}, ListSummary { labs });
        return print_json(&r);
    }
    let mut t = Table::new(["lab", "site", "namespace", "address", "emulator"]);
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

#[derive(Serialize)]
struct StatsSpec {
    lab: String,
    sites: Vec<SiteState>,
    mtu: u32,
}

#[derive(Serialize)]
struct StatsSummary {
    uptime_s: f64,
    directions: Vec<DirectionStats>,
    events: Vec<EventRecord>,
    unroutable_packets: u64,
    write_errors: u64,
}

fn stats(name: &str, json: bool) -> anyhow::Result<()> {
    let state = nsperf_lab::state::LabState::load(name)?;
    let s: LabStats = lab::stats(name)?;
    if json {
        let mut r: Report<StatsSpec, QueueSample, StatsSummary> = Report::new(
            "lab",
            StatsSpec {
                lab: state.name,
                sites: state.sites,
                mtu: state.mtu,
            },
            StatsSummary {
                uptime_s: s.uptime_s,
                directions: s.directions,
                events: s.events,
                unroutable_packets: s.unroutable_packets,
                write_errors: s.write_errors,
            },
        );
        r.duration_ns = (r.summary.uptime_s * 1e9) as u64;
        r.intervals = s.queue_series;
        return print_json(&r);
    }
    println!("lab {name}, up {:.1} s", s.uptime_s);
    let mut t = Table::new([
        "direction",
        "forwarded",
        "bytes",
        "drop queue",
        "drop loss",
        "drop down",
        "dup",
        "corrupt",
        "reorder",
        "queue now",
        "queue max",
    ]);
    for d in &s.directions {
        let c = &d.counters;
        t.row([
            format!("{} -> {}", d.from, d.to),
            c.forwarded_packets.to_string(),
            Bytes(c.forwarded_bytes).to_string(),
            c.dropped_queue_packets.to_string(),
            c.dropped_loss_packets.to_string(),
            c.dropped_link_down_packets.to_string(),
            c.duplicated_packets.to_string(),
            c.corrupted_packets.to_string(),
            c.reordered_packets.to_string(),
            format!("{} pkts", d.queue_packets),
            format!("{} pkts", c.queue_max_packets),
        ]);
    }
    print!("{}", t.render());
    for d in &s.directions {
        println!("{} -> {}: {}", d.from, d.to, d.params.describe());
    }
    if !s.events.is_empty() {
        println!("events:");
        for e in &s.events {
            println!("  {:>9.3} s  {:<8} {}", e.t_s, e.source, e.text);
        }
    }
    Ok(())
}
