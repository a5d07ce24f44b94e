//! `nsperf server`: serves `nsperf net` clients, many at once, until Ctrl-C (or after one
//! test with `--one-off`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use nsperf_net::config::{DEFAULT_PORT, ServerConfig};
use nsperf_net::server::Server;

/// Arguments of `nsperf server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Port for control and TCP data connections.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on (default: every IPv6 and IPv4 address).
    #[arg(short = 'B', long)]
    pub bind: Option<IpAddr>,
    /// Serve one client, then exit.
    #[arg(short = '1', long)]
    pub one_off: bool,
    /// Most clients served at the same time; more are refused (exit 8 on their side).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_clients: u32,
    /// Most streams per test.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=8192))]
    pub max_streams: u32,
    /// Longest test accepted, warm-up included (e.g. 60, 5m).
    #[arg(long, value_parser = nsperf_core::parse_duration)]
    pub max_time: Option<Duration>,
    /// File holding a pre-shared key that clients must prove (challenge/response; the key is
    /// never sent).
    #[arg(long)]
    pub psk_file: Option<PathBuf>,
    /// Ignore clients' --awake: do not hold this host's CPUs out of deep idle for them (their
    /// report then says the server did not).
    #[arg(long)]
    pub deny_awake: bool,
    /// No log lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// Runs `nsperf server`.
pub fn run(a: ServerArgs) -> anyhow::Result<()> {
    let psk = match &a.psk_file {
        Some(p) => Some(nsperf_net::error::read_key_file(p)?),
        None => None,
    };
    let quiet = a.quiet;
    let log: nsperf_net::server::Logger = Arc::new(move |line: &str| {
        if !quiet {
            eprintln!("nsperf server: {line}");
        }
    });
    let mut cfg = ServerConfig {
        bind: a.bind.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
        port: a.port,
        max_clients: a.max_clients,
        max_streams: a.max_streams,
        max_time: a.max_time,
        psk,
        one_off: a.one_off,
        deny_awake: a.deny_awake,
    };
    let server = match Server::bind(cfg.clone(), log.clone()) {
        Ok(s) => s,
        // No IPv6 on this host: the IPv4 wildcard.
        Err(_) if a.bind.is_none() => {
            cfg.bind = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
            Server::bind(cfg, log.clone())?
        }
        Err(e) => return Err(e.into()),
    };
    log(&format!(
        "listening on {} (protocol version {}){}",
        server.local_addr(),
        nsperf_net::proto::PROTOCOL_VERSION,
        if a.psk_file.is_some() {
            ", pre-shared key required"
        } else {
            ""
        }
    ));
    let stop = AtomicBool::new(false);
    server.serve(&stop).context("server")?;
    Ok(())
}
