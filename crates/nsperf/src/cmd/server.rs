//! `nsperf server`: serves `nsperf net` clients, many at once, until Ctrl-C or SIGTERM (or
//! after one test with `--one-off`); in the background with `-D`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use nsperf_net::{DEFAULT_PORT, Server, ServerConfig};

use super::daemon::{PidFile, absolute, daemonize};
use crate::exit::usage;

/// Arguments of `nsperf server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Port for control and TCP data connections.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on (default: every IPv6 and IPv4 address).
    #[arg(short = 'B', long)]
    pub bind: Option<IpAddr>,
    /// IPv4 clients only (listen on 0.0.0.0).
    #[arg(short = '4', long = "version4", conflicts_with = "version6")]
    pub version4: bool,
    /// IPv6 clients only (listen on [::] without IPv4-mapped clients).
    #[arg(short = '6', long = "version6")]
    pub version6: bool,
    /// Serve one client, then exit.
    #[arg(short = '1', long)]
    pub one_off: bool,
    /// Run in the background (iperf3's -D): detached from the terminal, output to --logfile
    /// or nowhere; stop it with SIGTERM (kill).
    #[arg(short = 'D', long)]
    pub daemon: bool,
    /// Write the server's process id to FILE, removed when it exits (iperf3's -I).
    #[arg(short = 'I', long, value_name = "FILE")]
    pub pidfile: Option<PathBuf>,
    /// Append the log lines (and errors) to FILE instead of stderr.
    #[arg(long, value_name = "FILE")]
    pub logfile: Option<PathBuf>,
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
    /// End a test whose client has gone silent (no stop and no data moving, or no stop this
    /// long past its planned end: a stopped or vanished client) and drop the client.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = silent_timeout)]
    pub silent_timeout: Duration,
    /// Ignore clients' --awake: do not hold this host's CPUs out of deep idle for them (their
    /// report then says the server did not).
    #[arg(long)]
    pub deny_awake: bool,
    /// No log lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
}

/// `--silent-timeout`: a duration of 1 s to 1 h.
fn silent_timeout(s: &str) -> Result<Duration, String> {
    let d = nsperf_core::parse_duration(s).map_err(|e| e.to_string())?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(3600) {
        return Err(format!("{s} is outside 1s..1h"));
    }
    Ok(d)
}

/// The address to listen on from `-B`, `-4`, `-6`.
fn listen_address(a: &ServerArgs) -> anyhow::Result<IpAddr> {
    match (a.bind, a.version4, a.version6) {
        (Some(b), true, _) if !b.is_ipv4() => Err(usage(format!("-B {b} is not IPv4 (-4)"))),
        (Some(b), _, true) if !b.is_ipv6() => Err(usage(format!("-B {b} is not IPv6 (-6)"))),
        (Some(b), _, _) => Ok(b),
        (None, true, _) => Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        (None, _, _) => Ok(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
    }
}

/// A long-running server gives memory back once its clients are gone: glibc's allocator
/// would otherwise raise its thresholds after the first large buffers are freed and keep
/// every thread arena's freed memory (an idle server measured 6 MiB before a soak of 50
/// faulty clients and 24-32 MiB after; 10-11 MiB with these and the idle trim of
/// `nsperf_net`). Fixed thresholds keep large buffers in their own mappings, returned when
/// freed, and let arena tops shrink (musl returns memory by itself).
fn return_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets allocator parameters; called before any client thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
    }
}

/// Runs `nsperf server`.
pub fn run(a: ServerArgs) -> anyhow::Result<()> {
    return_freed_memory();
    // Paths mean the same after the daemon's chdir("/").
    let logfile = a.logfile.as_deref().map(absolute).transpose()?;
    let pidfile = a.pidfile.as_deref().map(absolute).transpose()?;
    if let Some(f) = logfile.as_deref().filter(|_| !a.daemon) {
        crate::output::log_to_file(f)?;
    }
    let psk = match &a.psk_file {
        Some(p) => Some(nsperf_net::read_key_file(p)?),
        None => None,
    };
    let quiet = a.quiet;
    let log: nsperf_net::Logger = Arc::new(move |line: &str| {
        if !quiet {
            eprintln!("nsperf server: {line}");
        }
    });
    let mut cfg = ServerConfig {
        bind: listen_address(&a)?,
        port: a.port,
        max_clients: a.max_clients,
        max_streams: a.max_streams,
        max_time: a.max_time,
        psk,
        one_off: a.one_off,
        deny_awake: a.deny_awake,
        ipv6_only: a.version6,
        silent_client: a.silent_timeout,
    };
    // Bound in the foreground, so a port in use is reported where the user is.
    let server = match Server::bind(cfg.clone(), log.clone()) {
        Ok(s) => s,
        // No IPv6 on this host: the IPv4 wildcard.
        Err(_) if a.bind.is_none() && !a.version6 => {
            cfg.bind = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
            Server::bind(cfg, log.clone())?
        }
        Err(e) => return Err(e.into()),
    };
    let metrics = a.metrics.bind()?;
    let _pid = match (&pidfile, a.daemon) {
        (_, true) => Some(daemonize(logfile.as_deref(), || match &pidfile {
            Some(p) => PidFile::create(p),
            None => Ok(PidFile::none()),
        })?),
        (Some(p), false) => Some(PidFile::create(p)?),
        (None, false) => None,
    };
    log(&format!(
        "listening on {} (protocol version {}){}{}",
        server.local_addr(),
        nsperf_net::PROTOCOL_VERSION,
        if a.psk_file.is_some() {
            ", pre-shared key required"
        } else {
            ""
        },
        if a.daemon {
            format!(", in the background as process {}", std::process::id())
        } else {
            String::new()
        }
    ));
    // Served after the daemon's fork (threads do not survive it), bound before it.
    let _endpoint = match metrics {
        Some(l) => Some(l.serve(crate::metrics::ServerMetrics::new(server.counters()))?),
        None => None,
    };
    let stop = AtomicBool::new(false);
    server.serve(&stop).context("server")?;
    Ok(())
}
