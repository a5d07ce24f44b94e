//! `nsperf host`: the facts nsperf records about this machine with every result, and CPU use
//! per core over a short sample.

use std::time::{Duration, Instant};

use clap::Args;
use nsperf_core::cpu::{CpuSample, CpuSampler};
use nsperf_core::host::HostFacts;
use nsperf_core::table::Table;
use nsperf_core::units::Bytes;
use serde::Serialize;

use crate::output::{Format, OutputArgs, print_json};

/// Arguments of `nsperf host`.
#[derive(Debug, Args)]
pub struct HostArgs {
    /// How long to sample CPU use per core (e.g. 500ms, 2s).
    #[arg(long, default_value = "500ms", value_parser = nsperf_core::parse_duration)]
    pub sample: Duration,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Serialize)]
struct HostOutput {
    schema_version: u32,
    facts: HostFacts,
    cpu_sample_s: f64,
    cpu: CpuSample,
}

/// Runs `nsperf host`.
pub fn run(args: HostArgs) -> anyhow::Result<()> {
    let facts = HostFacts::collect();
    let mut sampler = CpuSampler::new();
    let t0 = Instant::now();
    std::thread::sleep(args.sample.min(Duration::from_secs(60)));
    let secs = t0.elapsed().as_secs_f64();
    let cpu = sampler.sample(secs);
    let out = HostOutput {
        schema_version: nsperf_core::SCHEMA_VERSION,
        facts,
        cpu_sample_s: secs,
        cpu,
    };
    match args.output.format() {
        Format::Json | Format::JsonStream => print_json(&out),
        Format::Human | Format::Csv => {
            print_human(&out);
            Ok(())
        }
    }
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map(T::to_string)
        .unwrap_or_else(|| "unknown".into())
}

fn print_human(o: &HostOutput) {
    let f = &o.facts;
    println!(
        "host      {} ({} {}, kernel {})",
        f.hostname,
        f.arch,
        opt(&f.cpu_model),
        f.kernel
    );
    println!(
        "memory    {} total, {} available; {} CPUs",
        opt(&f.mem_total_bytes.map(Bytes)),
        opt(&f.mem_available_bytes.map(Bytes)),
        f.cpus
    );
    let t = &f.tcp;
    let list = |v: &[u64]| {
        v.iter()
            .map(|&b| Bytes(b).to_string())
            .collect::<Vec<_>>()
            .join(" / ")
    };
    println!(
        "tcp_rmem  {}   (rmem_max {})",
        list(&t.rmem_bytes),
        opt(&t.rmem_max_bytes.map(Bytes))
    );
    println!(
        "tcp_wmem  {}   (wmem_max {})",
        list(&t.wmem_bytes),
        opt(&t.wmem_max_bytes.map(Bytes))
    );
    println!(
        "tcp       congestion control {} (available: {}); SACK {}, window scaling {}, timestamps {}",
        opt(&t.congestion_control),
        t.available_congestion_control.join(", "),
        opt(&t.sack.map(on_off)),
        opt(&t.window_scaling.map(on_off)),
        opt(&t.timestamps.map(on_off)),
    );
    println!();
    let mut ifs = Table::new(["interface", "mtu", "speed"]);
    for i in &f.interfaces {
        ifs.row([
            i.name.clone(),
            opt(&i.mtu),
            i.speed_mbps
                .map(|s| format!("{s} Mbit/s"))
                .unwrap_or_default(),
        ]);
    }
    print!("{}", ifs.render());
    println!();
    let mut cpu = Table::new(["core", "busy %", "user %", "sys %", "softirq %", "iowait %"]);
    for c in &o.cpu.per_core {
        cpu.row([
            format!("cpu{}", c.core),
            format!("{:.1}", c.busy_pct),
            format!("{:.1}", c.user_pct),
            format!("{:.1}", c.sys_pct),
            format!("{:.1}", c.softirq_pct),
            format!("{:.1}", c.iowait_pct),
        ]);
    }
    println!("CPU use over {:.2} s:", o.cpu_sample_s);
    print!("{}", cpu.render());
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}
