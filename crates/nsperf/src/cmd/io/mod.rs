//! `nsperf io`: file-system and block I/O. `run` does one workload (fio-style), `auto` the
//! iozone-style matrix, `bonnie` the bonnie++-style suite. The engine is `nsperf-io`; this
//! module only parses, builds the typed config and prints.

pub mod args;
pub mod auto;
pub mod bonnie;
mod live;
pub mod output;
mod peer;
pub mod run;

use clap::{Args, Subcommand};
use nsperf_core::units::Bytes;

/// Arguments of `nsperf io`.
#[derive(Debug, Args)]
pub struct IoArgs {
    #[command(subcommand)]
    pub command: IoCommand,
}

/// The `io` subcommands.
#[derive(Debug, Subcommand)]
pub enum IoCommand {
    /// One workload (seqread, randwrite, …) with a chosen engine and cache state, like fio.
    Run(Box<args::RunArgs>),
    /// The iozone-style matrix: file size × record size for each test.
    Auto(auto::AutoArgs),
    /// The bonnie++-style suite: per-char and block I/O, rewrite, seeks, metadata.
    Bonnie(bonnie::BonnieArgs),
    /// The receiving side of `io run --replicate`: writes each mirrored file into DIR.
    Peer(peer::PeerArgs),
}

/// What a run does about the directory before it starts.
#[derive(Debug, Clone, Args)]
pub struct DirCareArgs {
    /// Also remove the stale `.nsperf-*` files nsperf cannot prove dead (another host's, or
    /// a local PID not running here); those of this host's dead runs are always removed.
    #[arg(long)]
    pub clean: bool,
    /// Start even when the file system has less free space than the run needs.
    #[arg(long)]
    pub no_space_check: bool,
}

/// Runs `nsperf io …`.
pub fn run(args: IoArgs) -> anyhow::Result<()> {
    match args.command {
        IoCommand::Run(a) => run::run(*a),
        IoCommand::Auto(a) => auto::run(a),
        IoCommand::Peer(a) => peer::run(a),
        IoCommand::Bonnie(a) => bonnie::run(a),
    }
}

/// For an `nfs://` or `smb://` target at the address of a lab site, run from another site of
/// that lab (`lab exec`): the server runs on this host, and the path carries at most the
/// lab's configured rate, not the speed the site's device reports. Unknown otherwise.
fn lab_path(target: &nsperf_io::Target) -> nsperf_io::NetworkPath {
    let host = match target {
        nsperf_io::Target::Nfs { url } => &url.host,
        nsperf_io::Target::Smb { url, .. } => &url.host,
        _ => return Default::default(),
    };
    let Some(p) = host
        .trim_matches(['[', ']'])
        .parse()
        .ok()
        .and_then(nsperf_lab::path::path_from_here)
    else {
        return Default::default();
    };
    nsperf_io::NetworkPath {
        server_on_this_host: Some(true),
        ceiling: p
            .rate_bps
            .map(|rate_bps| nsperf_io::PathCeiling::LabLink { rate_bps }),
    }
}

/// Prints an `io` report in the chosen format (JSON, CSV or the table), then turns an
/// interrupted run into the interrupted exit with `what_ran` (what the output covers).
fn print_report<R: serde::Serialize>(
    rep: &R,
    format: crate::output::Format,
    csv: fn(&R) -> String,
    human: fn(&R) -> String,
    interrupted: bool,
    what_ran: &str,
) -> anyhow::Result<()> {
    use crate::output::Format;
    match format {
        Format::Json => crate::output::print_json(rep)?,
        Format::JsonStream => {
            crate::output::print_json_line(&serde_json::json!({"event": "result", "report": rep}))?
        }
        Format::Csv => print!("{}", csv(rep)),
        Format::Human => print!("{}", human(rep)),
    }
    if interrupted {
        return Err(crate::exit::classified(
            nsperf_core::Failure::Interrupted,
            format!("interrupted: {what_ran}; created files were removed"),
        ));
    }
    Ok(())
}

/// `12.3 GiB/s` (binary units, as the sizes).
pub fn rate(bytes_per_s: f64) -> String {
    if !bytes_per_s.is_finite() || bytes_per_s <= 0.0 {
        return "0 B/s".into();
    }
    let b = Bytes(bytes_per_s.round() as u64);
    // Three significant digits read better than exact multiples for rates.
    let units = [
        (Bytes::GIB as f64 * 1024.0, "TiB"),
        (Bytes::GIB as f64, "GiB"),
        (Bytes::MIB as f64, "MiB"),
        (Bytes::KIB as f64, "KiB"),
    ];
    for (size, name) in units {
        if bytes_per_s >= size {
            let x = bytes_per_s / size;
            return if x < 10.0 {
                format!("{x:.2} {name}/s")
            } else if x < 100.0 {
                format!("{x:.1} {name}/s")
            } else {
                format!("{x:.0} {name}/s")
            };
        }
    }
    format!("{b}/s")
}

/// `850 ns`, `12.3 µs`, `4.56 ms`, `1.20 s`.
pub fn dur_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// `1.23 M`, `45.6 k`, `789` ops per second.
pub fn ops(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(rate(1.5 * 1024.0 * 1024.0 * 1024.0), "1.50 GiB/s");
        assert_eq!(rate(0.0), "0 B/s");
        assert_eq!(rate(500.0), "500 B/s");
        assert_eq!(dur_ns(1500.0), "1.5 µs");
        assert_eq!(ops(783_000.0), "783.0 k");
    }
}
