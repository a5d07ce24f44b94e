//! `nsperf doctor TARGET`: storage at the server, network to it, protocol end to end, and
//! the verdict. Arguments and printing only; everything else is in `nsperf-doctor`.

use std::time::Duration;

use clap::Args;
use nsperf_core::table::Table;
use nsperf_core::units::{BitRate, Bytes};
use nsperf_doctor::model::{NetDirection, PassCpu};
use nsperf_doctor::verdict::rate;
use nsperf_doctor::{DoctorConfig, DoctorReport, Layer, ServerTarget};
use nsperf_io::CacheMode;

use crate::exit::usage;

/// Arguments of `nsperf doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The file server's target: `nfs://HOST[:PORT]/EXPORT/PATH` or
    /// `smb://HOST[:PORT]/SHARE/PATH` (a directory nsperf may create its own `.nsperf-*`
    /// files in).
    #[arg(value_name = "URL")]
    pub target: String,
    /// smb:// targets: smbclient-style authentication file (else NSPERF_SMB_USER and
    /// NSPERF_SMB_PASSWORD, or USER with PASSWD, from the environment; else a guest).
    #[arg(long, short = 'A', value_name = "FILE")]
    pub credentials: Option<std::path::PathBuf>,
    /// The lab whose site serves the target (found by itself when only one does, or when
    /// doctor runs inside one of its sites).
    #[arg(long)]
    pub lab: Option<String>,
    /// The lab site to run the client side from (default: the site doctor runs in under
    /// `lab exec`, else the lab's first site other than the server's).
    #[arg(long, value_name = "SITE")]
    pub from: Option<String>,
    /// An nsperf server for the network test, HOST[:PORT] (default: one started in the
    /// server's lab site, or the target host's port 5301).
    #[arg(long, value_name = "HOST[:PORT]")]
    pub net_server: Option<String>,
    /// Bytes of each test file (storage and protocol).
    #[arg(long, short = 's', default_value = "256m", value_parser = Bytes::parse)]
    pub size: Bytes,
    /// Record size of the storage test and RPC size of the protocol test.
    #[arg(long, short = 'b', default_value = "1m", value_parser = Bytes::parse)]
    pub bs: Bytes,
    /// RPCs in flight on the protocol test's connection.
    #[arg(long, default_value_t = 8)]
    pub iodepth: u32,
    /// Longest measured pass of each storage and protocol test.
    #[arg(long, short = 't', default_value = "5s", value_parser = nsperf_core::parse_duration)]
    pub time: Duration,
    /// Measured time of each network direction (after a 1 s warm-up).
    #[arg(long, default_value = "3s", value_parser = nsperf_core::parse_duration)]
    pub net_time: Duration,
    /// Give up connecting to a server (the file server's portmapper, MOUNT, NFS or SMB
    /// service, the nsperf server) after this long.
    #[arg(long, default_value = "5s", value_parser = nsperf_core::parse_duration)]
    pub connect_timeout: Duration,
    /// Cache phase of the protocol read: cold (the server's copy evicted: its storage is in
    /// the path; needs root and a lab server) or remote-warm (the server's cache holds it).
    /// Default: cold where possible.
    #[arg(long, value_parser = parse_cache)]
    pub cache: Option<CacheMode>,
    /// Print the result as JSON (the documented schema) and nothing else.
    #[arg(long, short = 'J')]
    pub json: bool,
    /// No progress lines on stderr (printed only to a terminal anyway).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

fn parse_cache(s: &str) -> Result<CacheMode, String> {
    match s.parse() {
        Ok(c @ (CacheMode::Cold | CacheMode::RemoteWarm)) => Ok(c),
        _ => Err(format!("cache phase '{s}' (cold, remote-warm)")),
    }
}

fn config(a: &DoctorArgs) -> anyhow::Result<DoctorConfig> {
    let target = if nsperf_smb::SmbUrl::is_smb_url(&a.target) {
        nsperf_smb::Credentials::resolve(a.credentials.as_deref())
            .map_err(nsperf_smb::SmbError::from)?;
        ServerTarget::Smb {
            url: a
                .target
                .parse()
                .map_err(|e: nsperf_smb::url::UrlError| usage(e.to_string()))?,
            credentials: a.credentials.clone(),
        }
    } else {
        if a.credentials.is_some() {
            return Err(usage("--credentials goes with an smb:// target"));
        }
        ServerTarget::Nfs(
            a.target
                .parse::<nsperf_nfs::NfsUrl>()
                .map_err(|e| usage(e.to_string()))?,
        )
    };
    let mut c = DoctorConfig::new(target);
    c.lab = a.lab.clone();
    c.from_site = a.from.clone();
    c.net_server = match &a.net_server {
        None => None,
        Some(s) => Some(match s.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.starts_with('[') => (
                h.trim_matches(['[', ']']).to_string(),
                p.parse()
                    .map_err(|_| usage(format!("--net-server {s}: bad port '{p}'")))?,
            ),
            _ => (s.clone(), nsperf_net::DEFAULT_PORT),
        }),
    };
    c.size_bytes = a.size.0;
    c.bs_bytes = a.bs.0;
    c.iodepth = a.iodepth;
    c.pass_time = a.time;
    c.net_time = a.net_time;
    c.connect_timeout = a.connect_timeout;
    c.read_cache = a.cache;
    Ok(c)
}

/// Runs `nsperf doctor`.
pub fn run(a: DoctorArgs) -> anyhow::Result<()> {
    let cfg = config(&a)?;
    let quiet = a.quiet || a.json || !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let rep = nsperf_doctor::run(&cfg, &mut |line| {
        if !quiet {
            eprintln!("doctor: {line} …");
        }
    })?;
    if a.json {
        crate::output::print_json(&rep)?;
    } else {
        print!("{}", render(&rep));
    }
    if rep.findings.iter().any(|f| f.id == "interrupted") {
        return Err(crate::exit::classified(
            nsperf_core::Failure::Interrupted,
            "interrupted: the figures above are what was measured before Ctrl-C",
        ));
    }
    Ok(())
}

fn cell<T>(l: &Layer<T>, f: impl Fn(&T) -> String) -> String {
    match l {
        Layer::Measured(t) => f(t),
        Layer::NotMeasured { .. } => "not measured".into(),
        Layer::Failed { .. } => "failed".into(),
    }
}

fn why<T>(l: &Layer<T>, f: impl Fn(&T) -> String) -> String {
    match l {
        Layer::Measured(t) => f(t),
        Layer::NotMeasured { reason } => reason.clone(),
        Layer::Failed { error } => error.clone(),
    }
}

fn ms(ns: f64) -> String {
    nsperf_core::units::format_duration(Duration::from_nanos(ns.max(0.0) as u64))
}

fn net_cell(d: &NetDirection) -> String {
    format!("{} ({})", BitRate(d.throughput_bps), rate(d.bytes_per_s()))
}

fn cpu_line(c: &PassCpu) -> String {
    let mut s = format!(
        "client CPU {:.0} % (waited {:.0} % for a CPU), host {:.0} % mean",
        c.client_process_pct, c.client_cpu_wait_pct, c.host_mean_pct
    );
    if let Some(sv) = &c.server {
        s.push_str(&format!(
            ", server {:.0} % (busiest thread {} at {:.0} %, waited {:.0} %)",
            sv.process_pct, sv.busiest_thread, sv.busiest_thread_pct, sv.cpu_wait_pct
        ));
    }
    s
}

/// The human report: the layer table, the details, the verdict.
pub fn render(rep: &DoctorReport) -> String {
    let spec = &rep.spec;
    let f = &rep.summary.figures;
    let mut out = format!("nsperf doctor {}\n", spec.target);
    let smb = spec.target.starts_with("smb://");
    let (name, req, empty, sync) = if smb {
        ("SMB", "requests", "ECHO", "FLUSH")
    } else {
        ("NFS", "RPCs", "NULL RPC", "COMMIT")
    };
    if let Some(p) = &spec.place {
        out.push_str(&format!(
            "server: {} {name} in site {} of lab {}{}\n",
            p.server,
            p.site,
            p.lab,
            p.client_site
                .as_ref()
                .map(|c| format!("; client side from site {c}"))
                .unwrap_or_default()
        ));
    }
    out.push('\n');
    let mut t = Table::new(["layer", "read", "write", "how"]);
    t.row([
        "storage at the server".to_string(),
        cell(&f.storage, |s| rate(s.read.bytes_per_s)),
        cell(&f.storage, |s| rate(s.write.bytes_per_s)),
        why(&f.storage, |s| {
            format!(
                "{} ({}), {} in {} records, cold read, fsync at the end",
                s.dir.display(),
                s.fs,
                Bytes(spec.size_bytes),
                Bytes(spec.bs_bytes)
            )
        }),
    ]);
    t.row([
        "network (TCP, 1 stream)".to_string(),
        cell(&f.network, |n| net_cell(&n.to_client)),
        cell(&f.network, |n| net_cell(&n.to_server)),
        why(&f.network, |n| {
            format!(
                "nsperf server {}{}",
                n.server,
                if n.started_by_doctor {
                    " (started by doctor in the server's site)"
                } else {
                    ""
                }
            )
        }),
    ]);
    t.row([
        format!("{name} end to end"),
        cell(&f.protocol, |p| rate(p.read.bytes_per_s)),
        cell(&f.protocol, |p| rate(p.write.bytes_per_s)),
        why(&f.protocol, |p| {
            format!(
                "{} at {}, {} {req}, {} in flight, {} connection(s); {} read, {sync} at the end",
                p.protocol,
                p.server,
                Bytes(p.rpc_bytes),
                p.rpcs_in_flight,
                p.connections,
                p.read_cache
            )
        }),
    ]);
    out.push_str(&t.render());
    out.push('\n');
    if let Some(n) = f.network.measured() {
        let mss = n.to_client.mss_bytes.or(n.to_server.mss_bytes);
        out.push_str(&format!(
            "network: idle RTT {} (1-byte request/response, median); under load {} / {}; MSS {}{}; receive window {} / {}; retransmits {} / {} (read / write direction)\n",
            ms(n.rtt_idle_ns as f64),
            opt_us(n.to_client.rtt_loaded_us),
            opt_us(n.to_server.rtt_loaded_us),
            mss.map(|m| format!("{m} B")).unwrap_or_else(|| "?".into()),
            n.lab_mtu_bytes
                .map(|m| format!(" (lab MTU {m})"))
                .unwrap_or_default(),
            opt_bytes(n.to_client.peer_window_bytes),
            opt_bytes(n.to_server.peer_window_bytes),
            n.to_client.retransmits,
            n.to_server.retransmits,
        ));
    }
    if let Some(p) = f.protocol.measured() {
        out.push_str(&format!(
            "{name}: {empty} round trip {} (median); read p50 {} p99 {}, {}; write p50 {} p99 {}, {}\n",
            ms(p.null_rtt_ns as f64),
            ms(p.read.lat_p50_ns as f64),
            ms(p.read.lat_p99_ns as f64),
            cpu_line(&p.read.cpu),
            ms(p.write.lat_p50_ns as f64),
            ms(p.write.lat_p99_ns as f64),
            cpu_line(&p.write.cpu),
        ));
    }
    out.push_str("\nverdict\n");
    let d = &rep.summary.diagnosis;
    for v in [&d.read, &d.write] {
        out.push_str(&format!("  {}: {}\n", v.direction, v.message));
        for i in &v.inconsistent {
            out.push_str(&format!("    note: {i}\n"));
        }
    }
    let other: Vec<_> = rep.findings.iter().filter(|f| f.id.contains('.')).collect();
    if !other.is_empty() {
        out.push_str("\nfindings of the layers\n");
        for f in other {
            out.push_str(&format!("  {}: {}\n", f.id, f.message));
        }
    }
    out
}

fn opt_us(us: Option<f64>) -> String {
    us.map(|u| ms(u * 1e3)).unwrap_or_else(|| "?".into())
}

fn opt_bytes(b: Option<u64>) -> String {
    b.map(|b| Bytes(b).to_string())
        .unwrap_or_else(|| "?".into())
}
