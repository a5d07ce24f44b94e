//! `nsperf replay CAPTURE`: the storage workload a capture holds, per client connection, and
//! the model's prediction of it over an RTT axis (issue 25 items 1 and 3); with `--against
//! nfs://…` or `smb://…`, an NFS or SMB2 workload replayed against a server over the path as
//! it is (item 2's engine); with `--lab` (`--check`), an NFS workload replayed through a lab
//! at each asked RTT beside the model (items 2 and 4, `replay_lab.rs`). Arguments and
//! printing only; the extraction, the model and the comparison are `nsperf_trace::replay`'s,
//! the replay `nsperf_nfs::replay`'s and `nsperf_smb::replay`'s.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use nsperf_core::Failure;
use nsperf_core::Report;
use nsperf_core::report::Command;
use nsperf_core::table::Table;
use nsperf_core::units::{BitRate, Bytes};
use nsperf_lab::config::parse_rate;
use nsperf_lab::service::ServerKind;
use nsperf_nfs::NfsUrl;
use nsperf_nfs::replay::{self as engine, Options};
use nsperf_trace::proto::requests::DEFAULT_MAX_REQUESTS;
use nsperf_trace::proto::requests::Protocol;
use nsperf_trace::replay::against::{AgainstReport, LabReport, OpAgainst, against};
use nsperf_trace::replay::report::{CaptureGaps, ClientReport, ReplaySpec, ReplaySummary, summary};
use nsperf_trace::replay::script::{NotReplayable, protocol, script, smb_script};
use nsperf_trace::replay::workloads;
use nsperf_trace::{DEFAULT_IDLE_NS, TraceConfig};

use crate::exit::classified;
use crate::output::print_json;

/// A rate or `None` for unlimited (a newtype: clap treats `Option<Option<_>>` specially).
#[derive(Debug, Clone, Copy)]
struct RateArg(Option<f64>);

/// Arguments of `nsperf replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The capture: pcap or pcapng, plain or compressed (gzip, zstd, xz); `-` for stdin.
    pub capture: PathBuf,
    /// Round-trip times to predict at, ms, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,1,2,5,10,20,50,100,200",
        value_parser = parse_rtt_ms
    )]
    pub rtt: Vec<f64>,
    /// Link rate each way, as `lab up --rate` takes it (`45mbit`, `1g`); default: each
    /// transfer as long as it was in the capture.
    #[arg(long, value_parser = |s: &str| parse_rate(s).map(RateArg))]
    rate: Option<RateArg>,
    /// TCP window bounding the bytes in flight each way (`64k`, `4m`); default: each
    /// connection's largest advertised windows in the capture. With --lab the lab's routes
    /// bound the replay to it each way (whole segments), and the model beside each replay;
    /// with --against nfs://, the replay's socket buffers (about).
    #[arg(long)]
    pub window: Option<Bytes>,
    /// Replay the workload against this server, in a fresh directory under the URL's, and
    /// report it beside the capture: an NFS capture against `nfs://HOST[:PORT]/DIR`
    /// (`?version=4.1`, `4.0`, `4`: over NFSv4; else NFSv3), an SMB2 capture against
    /// `smb://HOST[:PORT]/SHARE[/PATH]`.
    #[arg(long, value_name = "URL")]
    pub against: Option<AgainstUrl>,
    /// With --against smb://: who to log on as, an smbclient authentication file (default:
    /// $NSPERF_SMB_USER/$NSPERF_SMB_PASSWORD, else a guest session).
    #[arg(long, value_name = "FILE", requires = "against")]
    pub credentials: Option<PathBuf>,
    /// With --against: leave the replay's directory and files on the server.
    #[arg(long, requires = "against")]
    pub keep: bool,
    /// Replay the workload through a two-site lab built for it, against --server in site b,
    /// at each --rtt (and --rate, --loss); needs root.
    #[arg(long, conflicts_with = "against")]
    pub lab: bool,
    /// With --lab: the server, embedded (nsperf's NFSv3 server, the default for NFS
    /// captures; NFSv3 captures), ganesha (nfs-ganesha: NFSv4 captures over NFSv4.1, NFSv3
    /// over NFSv3) or samba (Samba's smbd, the default for SMB2 captures).
    #[arg(long, value_name = "embedded|ganesha|samba")]
    pub server: Option<ServerKind>,
    /// With the lab (implies --lab): replay at the capture's own RTT first and report the
    /// replay's own error against the captured duration.
    #[arg(long, conflicts_with = "against")]
    pub check: bool,
    /// With --lab: the lab's random loss each way (`1%`, as `lab up --loss` takes it).
    #[arg(long)]
    pub loss: Option<String>,
    /// Only these client connections, by id as this report and `nsperf trace` number them
    /// (comma-separated): one client of a capture with several.
    #[arg(long, value_delimiter = ',', value_name = "ID")]
    pub conn: Vec<u32>,
    /// Print the report as JSON (docs/schema.md) and nothing else.
    #[arg(long, short = 'J')]
    pub json: bool,
}

/// The server `--against` names.
#[derive(Debug, Clone)]
pub enum AgainstUrl {
    /// An NFS server.
    Nfs(NfsUrl),
    /// An SMB server.
    Smb(nsperf_smb::SmbUrl),
}

impl std::str::FromStr for AgainstUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<AgainstUrl, String> {
        if nsperf_smb::SmbUrl::is_smb_url(s) {
            return s.parse().map(AgainstUrl::Smb).map_err(|e| format!("{e}"));
        }
        s.parse().map(AgainstUrl::Nfs).map_err(|e| format!("{e}"))
    }
}

impl std::fmt::Display for AgainstUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgainstUrl::Nfs(u) => u.fmt(f),
            AgainstUrl::Smb(u) => u.fmt(f),
        }
    }
}

/// An RTT in ms: a number from 0 to 60000.
fn parse_rtt_ms(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=60_000.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is no RTT in ms from 0 to 60000")),
    }
}

/// Runs `nsperf replay`.
pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    if args.window.is_some_and(|w| w.0 == 0) {
        return Err(classified(
            Failure::Usage,
            "replay: --window 0 holds no byte",
        ));
    }
    let lab = args.lab || args.check;
    if args.server.is_some() && !lab {
        return Err(classified(
            Failure::Usage,
            "replay --server: only with --lab",
        ));
    }
    let server = args.server.unwrap_or(ServerKind::Embedded);
    if lab && !nsperf_lab::netns::is_root() {
        return Err(nsperf_lab::LabError::NeedsRoot("replay --lab").into());
    }
    if let Some(l) = &args.loss {
        if !lab {
            return Err(classified(Failure::Usage, "replay --loss: only with --lab"));
        }
        l.parse::<nsperf_lab::config::LossModel>()?;
    }
    if lab && args.rtt.len() > super::replay_lab::MAX_LAB_RTTS {
        return Err(classified(
            Failure::Usage,
            format!(
                "replay --lab: {} RTTs, at most {} (a replay each)",
                args.rtt.len(),
                super::replay_lab::MAX_LAB_RTTS
            ),
        ));
    }
    let t0 = std::time::Instant::now();
    let name = args.capture.display().to_string();
    let cfg = TraceConfig {
        idle_ns: DEFAULT_IDLE_NS,
        ..TraceConfig::default()
    };
    let (mut trace, mut stream) =
        nsperf_trace::requests_file(&args.capture, cfg, DEFAULT_MAX_REQUESTS)
            .with_context(|| format!("replay {name}"))?;
    if stream.dropped > 0 {
        return Err(classified(
            Failure::Refused,
            format!(
                "replay {name}: the capture holds more than {DEFAULT_MAX_REQUESTS} storage requests, the most replay keeps in memory; cut it (editcap -c) into parts"
            ),
        ));
    }
    if !args.conn.is_empty() {
        stream.keep_connections(&args.conn).map_err(|id| {
            let ids: Vec<String> = stream.connections.iter().map(|c| c.id.to_string()).collect();
            classified(
                Failure::Usage,
                format!(
                    "replay {name} --conn {id}: no client connection {id} in the capture (its storage connections: {})",
                    ids.join(", ")
                ),
            )
        })?;
        // what the capture lacks, of those connections only
        trace.connections.retain(|c| args.conn.contains(&c.id));
    }
    if stream.requests.is_empty() {
        return Err(classified(
            Failure::NotFound,
            format!("replay {name}: no NFS or SMB2 request matched to its reply in the capture"),
        ));
    }
    let spec = ReplaySpec {
        capture: name.clone(),
        rtt_axis_ms: args.rtt.clone(),
        rate_bps: args.rate.and_then(|r| r.0),
        window_bytes: args.window.map(|w| w.0),
        connections: args.conn.clone(),
    };
    let mut sum = summary(&spec, &stream, CaptureGaps::of(&trace));
    if args.against.is_some() || lab {
        let flag = if lab { "--lab" } else { "--against" };
        let ws = workloads(&stream.requests, &stream.connections);
        let usage =
            |e: NotReplayable| classified(Failure::Usage, format!("replay {name} {flag}: {e}"));
        let proto = protocol(&ws).map_err(usage)?;
        if proto == Protocol::Smb2 {
            if lab {
                sum.lab = Some(lab_smb(
                    &name,
                    &args,
                    &ws,
                    args.server.unwrap_or(ServerKind::Samba),
                )?);
            } else {
                let Some(AgainstUrl::Smb(url)) = &args.against else {
                    return Err(usage(NotReplayable::Protocol(proto)));
                };
                sum.against = Some(against_smb(&name, url, &args, &ws)?);
            }
        } else {
            if let Some(AgainstUrl::Smb(_)) = &args.against {
                return Err(usage(NotReplayable::Protocol(proto)));
            }
            if lab && server == ServerKind::Samba {
                return Err(classified(
                    Failure::Usage,
                    format!(
                        "replay {name} --lab --server samba: an NFS capture, and smbd serves SMB: --server embedded or ganesha"
                    ),
                ));
            }
            if args.credentials.is_some() {
                return Err(classified(
                    Failure::Usage,
                    "replay --credentials: only with --against smb://",
                ));
            }
            let sc = script(&ws).map_err(usage)?;
            replay_nfs(&name, &args, &ws, &sc, lab, server, &mut sum)?;
        }
    }
    let mut r: ReplayReport = Report::new(Command::Replay, spec, sum);
    r.duration_ns = t0.elapsed().as_nanos() as u64;
    if args.json {
        return print_json(&r);
    }
    print!("{}", human(&r));
    Ok(())
}

/// An SMB2 capture's workloads `ws` replayed against `url`, beside the capture.
fn against_smb(
    name: &str,
    url: &nsperf_smb::SmbUrl,
    args: &ReplayArgs,
    ws: &[nsperf_trace::replay::Workload],
) -> anyhow::Result<AgainstReport> {
    use nsperf_smb::replay as smb;
    if args.window.is_some() {
        return Err(classified(
            Failure::Usage,
            format!(
                "replay {name} --against smb://: --window is not built for the SMB replay's own sockets (--lab bounds it by the lab's routes)"
            ),
        ));
    }
    let sc = smb_script(ws)
        .map_err(|e| classified(Failure::Usage, format!("replay {name} --against: {e}")))?;
    if sc.conns.len() > smb::MAX_CONNECTIONS {
        return Err(classified(
            Failure::Refused,
            format!(
                "replay {name} --against: {} client connections, the replay runs at most {} (a thread and a session each)",
                sc.conns.len(),
                smb::MAX_CONNECTIONS
            ),
        ));
    }
    let (creds, _) = nsperf_smb::Credentials::resolve(args.credentials.as_deref())
        .map_err(nsperf_smb::SmbError::from)?;
    let opt = smb::Options {
        timeout: Duration::from_secs(30),
        keep: args.keep,
    };
    let done = smb::run(url, &creds, &sc, opt)
        .with_context(|| format!("replay {name} --against {url}"))?;
    Ok(against(&url.to_string(), ws, &done))
}

/// An SMB2 capture's workloads `ws` replayed through a lab against smbd (`--lab --server
/// samba`).
fn lab_smb(
    name: &str,
    args: &ReplayArgs,
    ws: &[nsperf_trace::replay::Workload],
    server: ServerKind,
) -> anyhow::Result<nsperf_trace::replay::against::LabReport> {
    let usage = |why: &str| classified(Failure::Usage, format!("replay {name} --lab: {why}"));
    if server != ServerKind::Samba {
        return Err(usage(
            "an SMB2 capture, replayed against Samba's smbd: add --server samba",
        ));
    }
    let sc = smb_script(ws).map_err(|e| usage(&e.to_string()))?;
    if sc.conns.len() > nsperf_smb::replay::MAX_CONNECTIONS {
        return Err(classified(
            Failure::Refused,
            format!(
                "replay {name} --lab: {} client connections, the replay runs at most {}",
                sc.conns.len(),
                nsperf_smb::replay::MAX_CONNECTIONS
            ),
        ));
    }
    let ask = super::replay_lab::LabAsk {
        rtts_ms: args.rtt.clone(),
        rate_bps: args.rate.and_then(|r| r.0),
        loss: args.loss.clone(),
        window_bytes: args.window.map(|w| w.0),
        check: args.check,
        server,
        v4: false,
    };
    super::replay_lab::run(name, ws, super::replay_lab::LabScript::Smb(&sc), &ask)
}

/// An NFS capture's script `sc` replayed through a lab (`--lab`) and against a server
/// (`--against`), into `sum`.
fn replay_nfs(
    name: &str,
    args: &ReplayArgs,
    ws: &[nsperf_trace::replay::Workload],
    sc: &nsperf_nfs::replay::Script,
    lab: bool,
    server: ServerKind,
    sum: &mut ReplaySummary,
) -> anyhow::Result<()> {
    let flag = if lab { "--lab" } else { "--against" };
    let v4 = protocol(ws) == Ok(Protocol::Nfs4);
    if lab && v4 && server == ServerKind::Embedded {
        return Err(classified(
            Failure::Usage,
            format!(
                "replay {name} --lab: an NFSv4 capture, and the embedded server speaks NFSv3 only: add --server ganesha"
            ),
        ));
    }
    if sc.conns.len() > engine::MAX_CONNECTIONS {
        return Err(classified(
            Failure::Refused,
            format!(
                "replay {name} {flag}: {} client connections, the replay runs at most {} (a thread each)",
                sc.conns.len(),
                engine::MAX_CONNECTIONS
            ),
        ));
    }
    if lab {
        let ask = super::replay_lab::LabAsk {
            rtts_ms: args.rtt.clone(),
            rate_bps: args.rate.and_then(|r| r.0),
            loss: args.loss.clone(),
            window_bytes: args.window.map(|w| w.0),
            check: args.check,
            server,
            v4,
        };
        sum.lab = Some(super::replay_lab::run(
            name,
            ws,
            super::replay_lab::LabScript::Nfs(sc),
            &ask,
        )?);
    }
    if let Some(AgainstUrl::Nfs(url)) = &args.against {
        let opt = Options {
            timeout: nsperf_nfs::client::DEFAULT_TIMEOUT,
            keep: args.keep,
            // the report's model at the path RTT takes the captured windows
            window_bytes: None,
        };
        let done =
            engine::run(url, sc, opt).with_context(|| format!("replay {name} --against {url}"))?;
        sum.against = Some(against(&url.to_string(), ws, &done));
    }
    Ok(())
}

/// The `--json` document: the envelope of every command around the replay's spec and
/// summary (no intervals).
type ReplayReport = Report<ReplaySpec, (), ReplaySummary>;

/// The report for a person.
fn human(r: &ReplayReport) -> String {
    let (spec, s) = (&r.spec, &r.summary);
    let link = match (spec.rate_bps, spec.window_bytes) {
        (Some(b), Some(w)) => format!("{} each way, window {}", BitRate(b), Bytes(w)),
        (Some(b), None) => format!("{} each way, the captured windows", BitRate(b)),
        (None, Some(w)) => format!("transfers as captured, window {}", Bytes(w)),
        (None, None) => "transfers as captured, the captured windows".to_string(),
    };
    let mut out = format!(
        "replay {}: {} storage requests on {} client connection(s); model: {link}\n",
        spec.capture,
        s.requests,
        s.clients.len()
    );
    let g = s.capture_gaps;
    if g.any() {
        out.push_str(&format!(
            "warning: the capture lacks part of the exchanges: {} call(s) without their reply, {} reply(ies) without their call, {} of the streams missing; those requests are not in the workload, so the model and any replay describe less than the client did (a capture started or stopped mid-exchange, or one that dropped packets: tcpdump -B gives it a larger buffer)\n",
            g.unanswered_calls,
            g.replies_without_call,
            Bytes(g.missing_bytes)
        ));
    }
    for c in &s.clients {
        out.push('\n');
        out.push_str(&client(c));
    }
    if let Some(a) = &s.against {
        out.push('\n');
        out.push_str(&replayed(a));
    }
    if let Some(l) = &s.lab {
        out.push('\n');
        out.push_str(&through_lab(l));
    }
    out.push_str(&format!("\nnote: {}.\n", s.not_built));
    out
}

fn client(c: &ClientReport) -> String {
    let win = |w: Option<u64>| w.map_or("unknown".to_string(), |w| Bytes(w).to_string());
    let mut out = format!(
        "client {} -> server {} (connection {})\n  {} requests: read {}, written {}; in flight max {}, mean {:.2}; dependent {:.0} %, think time {:.3} ms mean\n  captured: {:.3} s at RTT {:.3} ms (capture point to client {:.3} ms, to server {:.3} ms); windows: client {}, server {}; {} file(s)\n",
        c.client,
        c.server,
        c.connection,
        c.requests,
        Bytes(c.read_bytes),
        Bytes(c.written_bytes),
        c.in_flight_max,
        c.in_flight_mean,
        c.dependent_fraction * 100.0,
        c.think_mean_ms,
        c.captured_duration_s,
        c.captured_rtt_ms,
        c.rtt_client_ms,
        c.rtt_server_ms,
        win(c.window_client_bytes),
        win(c.window_server_bytes),
        c.file_count,
    );
    let mut ops = Table::new([
        "op",
        "requests",
        "errors",
        "data",
        "service mean ms",
        "max ms",
    ]);
    for o in &c.ops {
        ops.row([
            o.op.clone(),
            o.requests.to_string(),
            o.errors.to_string(),
            Bytes(o.data_bytes).to_string(),
            format!("{:.3}", o.service_mean_ms),
            format!("{:.3}", o.service_max_ms),
        ]);
    }
    out.push_str(&indent(&ops.render()));
    out.push_str(&format!(
        "  model at the capture's own RTT and transfers: {:.3} s ({:+.1} % from the captured {:.3} s)\n",
        c.model_at_capture_s, c.model_error_pct, c.captured_duration_s
    ));
    let mut t = Table::new([
        "RTT ms",
        "predicted s",
        "throughput",
        "latency s",
        "link s",
        "server s",
        "client s",
        "bound",
    ]);
    for p in &c.predictions {
        let mark = if Some(p.rtt_ms) == c.latency_bound_from_ms {
            " <- latency-bound from here"
        } else {
            ""
        };
        t.row([
            format!("{}", p.rtt_ms),
            format!("{:.3}", p.duration_s),
            BitRate(p.throughput_bps).to_string(),
            format!("{:.3}", p.latency_s),
            format!("{:.3}", p.link_s),
            format!("{:.3}", p.server_s),
            format!("{:.3}", p.client_s),
            format!("{}{mark}", p.bound),
        ]);
    }
    out.push_str(&indent(&t.render()));
    out
}

/// The replay against a server beside the capture and the model.
fn replayed(a: &AgainstReport) -> String {
    let smb = a.url.starts_with("smb://");
    let mut out = format!(
        "replayed against {} (directory {}, path RTT {:.3} ms: mean of {} {})\n  all connections: captured {:.4} s, replayed {:.4} s ({:+.1} %); throughput captured {}, replayed {}; read {}, written {}\n",
        a.url,
        a.directory,
        a.path_rtt_ms,
        if smb {
            nsperf_smb::replay::ECHO_PROBES
        } else {
            engine::NULL_PROBES
        },
        if smb { "ECHOs" } else { "NULL calls" },
        a.captured_duration_s,
        a.replayed_duration_s,
        a.duration_error_pct,
        BitRate(a.captured_throughput_bps),
        BitRate(a.replayed_throughput_bps),
        Bytes(a.read_bytes),
        Bytes(a.written_bytes),
    );
    out.push_str(&indent(&ops_table(&a.ops)));
    let mut t = Table::new([
        "connection",
        "start s",
        "captured s",
        "replayed s",
        "error",
        "model s",
        "in flight",
        "throughput captured",
        "replayed",
    ]);
    for c in &a.clients {
        t.row([
            c.connection.to_string(),
            format!("{:.4}", c.start_s),
            format!("{:.4}", c.captured_duration_s),
            format!("{:.4}", c.replayed_duration_s),
            format!("{:+.1} %", c.duration_error_pct),
            format!("{:.4}", c.model_at_path_rtt_s),
            match c.session_slots {
                Some(s) => format!(
                    "{}/{} ({s} slots)",
                    c.captured_in_flight_max, c.replayed_in_flight_max
                ),
                None => format!("{}/{}", c.captured_in_flight_max, c.replayed_in_flight_max),
            },
            BitRate(c.captured_throughput_bps).to_string(),
            BitRate(c.replayed_throughput_bps).to_string(),
        ]);
    }
    out.push_str(&format!(
        "  per connection (model: at the path RTT {:.3} ms, transfers as captured; in flight: most, captured/replayed, and the NFSv4.1 session's slots when the server granted fewer)\n",
        a.path_rtt_ms
    ));
    out.push_str(&indent(&t.render()));
    out
}

/// The replays through the lab beside the capture and the model.
fn through_lab(l: &LabReport) -> String {
    let mut out = format!(
        "replayed through lab {} ({} in site b, from site a; the lab removed afterwards)\n",
        l.lab,
        match l.server.as_str() {
            "ganesha" => "nfs-ganesha",
            "samba" => "Samba's smbd",
            _ => "embedded NFSv3 server",
        }
    );
    let mut t = Table::new([
        "",
        "RTT ms",
        "rate",
        "loss",
        "window",
        "path RTT ms",
        "replayed s",
        "model s",
        "replay vs model",
        "captured s",
        "replay vs captured",
    ]);
    let rows = l.check.iter().map(|r| ("check", r));
    for (what, r) in rows.chain(l.runs.iter().map(|r| ("", r))) {
        t.row([
            what.to_string(),
            format!("{:.3}", r.rtt_ms),
            r.rate_bps
                .map_or("-".to_string(), |b| BitRate(b).to_string()),
            r.loss.clone().unwrap_or_else(|| "-".into()),
            r.window_bytes
                .map_or("-".to_string(), |w| Bytes(w).to_string()),
            format!("{:.3}", r.replay.path_rtt_ms),
            format!("{:.4}", r.replayed_duration_s),
            format!("{:.4}", r.model_duration_s),
            format!("{:+.1} %", r.replay_vs_model_pct),
            format!("{:.4}", r.captured_duration_s),
            format!("{:+.1} %", r.replay_vs_captured_pct),
        ]);
    }
    out.push_str(&indent(&t.render()));
    if let Some(c) = &l.check {
        out.push_str(&format!(
            "  the replay's own error at the capture's RTT {:.3} ms: {:+.1} % ({:.4} s replayed, {:.4} s captured)\n",
            c.rtt_ms, c.replay_vs_captured_pct, c.replayed_duration_s, c.captured_duration_s
        ));
    }
    out
}

/// Per operation: captured and replayed requests, errors and latency.
fn ops_table(ops: &[OpAgainst]) -> String {
    let mut t = Table::new([
        "op",
        "captured",
        "errors",
        "service ms",
        "latency ms",
        "replayed",
        "errors",
        "latency ms",
        "p50",
        "p99",
        "max",
    ]);
    for o in ops {
        let name = if o.replayed_as_getattr {
            let stand_in = if o.op.starts_with("smb2:") {
                "ECHO"
            } else {
                "GETATTR"
            };
            format!("{} (replayed as {stand_in})", o.op)
        } else {
            o.op.clone()
        };
        let errors = if o.replayed_error_statuses.is_empty() {
            o.replayed_errors.to_string()
        } else {
            let names: Vec<String> = o
                .replayed_error_statuses
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect();
            names.join(", ")
        };
        t.row([
            name,
            o.captured_requests.to_string(),
            o.captured_errors.to_string(),
            format!("{:.3}", o.captured_service_mean_ms),
            format!("{:.3}", o.captured_latency_mean_ms),
            o.replayed_requests.to_string(),
            errors,
            format!("{:.3}", o.replayed_latency_mean_ms),
            format!("{:.3}", o.replayed_latency_p50_ms),
            format!("{:.3}", o.replayed_latency_p99_ms),
            format!("{:.3}", o.replayed_latency_max_ms),
        ]);
    }
    t.render()
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}
