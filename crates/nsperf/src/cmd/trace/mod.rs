//! `nsperf trace FILE`: per-connection TCP analysis of a pcap/pcapng capture; `-i IFACE`
//! or `-` (a pipe) analyses live ([`live`]).

mod args;
pub(super) mod live;
mod output;

use std::time::{Duration, Instant};

use anyhow::Context;
use nsperf_trace::{Filter, TraceConfig, TraceSpec};

pub use args::TraceArgs;
use output::report;
pub(super) use output::{build_report, print_report};

use crate::output::Format;

/// Runs `nsperf trace`.
pub fn run(args: TraceArgs) -> anyhow::Result<()> {
    if args.write.is_some() && args.interface.is_none() {
        return Err(crate::exit::classified(
            nsperf_core::Failure::Usage,
            "trace: -w FILE writes the packets of a live capture: it needs -i IFACE",
        ));
    }
    let (cfg, spec) = config(&args)?;
    let file = args.file.clone().unwrap_or_default();
    if args.interface.is_some() || file.as_os_str() == "-" {
        return live::run(&args, cfg, spec);
    }
    let t0 = Instant::now();
    let (summary, intervals) = nsperf_trace::analyze_file_spooled(&file, cfg)
        .with_context(|| format!("trace {}", file.display()))?;
    report(args.output.format(), spec, summary, intervals, t0)
}

/// The analysis' configuration and the spec of its report, from the flags.
fn config(args: &TraceArgs) -> anyhow::Result<(TraceConfig, TraceSpec)> {
    let filter = match &args.filter {
        Some(f) => Filter::parse(f)?,
        None => Filter::default(),
    };
    let mut bin = args.bin.unwrap_or_default();
    if args.output.format() == Format::Csv && bin.is_zero() {
        bin = Duration::from_secs(1);
    }
    let ns = |d: Duration| d.as_nanos().min(i64::MAX as u128) as i64;
    let cfg = TraceConfig {
        filter,
        bin_ns: ns(bin),
        series_connections: args.top,
        idle_ns: ns(args.idle_timeout),
    };
    let spec = TraceSpec {
        file: match (&args.file, &args.interface) {
            (Some(f), _) => f.display().to_string(),
            (None, Some(i)) => format!("-i {i}"),
            (None, None) => String::new(),
        },
        filter: args.filter.clone(),
        bin_s: bin.as_secs_f64(),
        top: args.top,
        interface: args.interface.clone(),
        idle_timeout_s: args.idle_timeout.as_secs_f64(),
    };
    Ok((cfg, spec))
}
