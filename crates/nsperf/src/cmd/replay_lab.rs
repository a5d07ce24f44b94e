//! `nsperf replay CAPTURE --lab [--check] [--server ganesha]` (issue 25 items 2 and 4): a
//! two-site lab built with the lab library (as `lab up` builds one), a server in site b —
//! nsperf's embedded NFSv3 server (as `lab serve LAB b nfs DIR` runs it, here on a thread
//! of this process inside the site's namespace) or nfs-ganesha (`lab serve LAB b nfs DIR
//! --server ganesha`, run as that command) — and the capture's workload replayed from site
//! a at each asked RTT (`--check`: at the capture's own RTT first), an NFSv4 capture over
//! NFSv4.1. The lab is removed afterwards (its services with it), on error too.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use nsperf_core::process::ProcessId;
use nsperf_lab::LabError;
use nsperf_lab::config::LossModel;
use nsperf_lab::lab::{self, UpConfig, netns_name};
use nsperf_lab::service::ServerKind;
use nsperf_lab::{LinkChange, netns};
use nsperf_nfs::NfsUrl;
use nsperf_nfs::replay::{self as engine, Options, Script};
use nsperf_nfs::server::{Server, ServerConfig, ServerHandle};
use nsperf_trace::replay::Workload;
use nsperf_trace::replay::against::{LabLink, LabReport, LabRun, lab_run};

/// What `--lab` is asked: the RTTs, rate and loss of the lab's link.
pub(crate) struct LabAsk {
    /// RTTs to replay at, ms.
    pub rtts_ms: Vec<f64>,
    /// The link's rate each way; None: not limited.
    pub rate_bps: Option<f64>,
    /// The link's loss as given (`1%`).
    pub loss: Option<String>,
    /// The replay connections' TCP window (socket buffers), bytes; the model's too.
    pub window_bytes: Option<u64>,
    /// Replay at the capture's own RTT first.
    pub check: bool,
    /// The server in site b: embedded or ganesha.
    pub server: ServerKind,
    /// The capture is NFSv4's: replayed over NFSv4.1 (ganesha only).
    pub v4: bool,
}

/// Most RTTs one `--lab` replays at (a replay each).
pub(crate) const MAX_LAB_RTTS: usize = 16;

/// The lab, removed when dropped (however the replay ends).
struct LabGuard(String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = lab::down(&self.0, true);
    }
}

/// The embedded server in a site, stopped from inside the site when dropped (its stop
/// wakes its listeners by connecting to them, which only works from their namespace).
struct SiteServer(Option<ServerHandle>, String);

impl Drop for SiteServer {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = netns::run_in(&self.1, move || {
                drop(h);
                Ok(())
            });
        }
    }
}

/// The export directory, removed when dropped.
struct ExportDir(PathBuf);

impl Drop for ExportDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The capture's own RTT: the largest of its connections' (capture point to client plus
/// capture point to server), ms.
fn captured_rtt_ms(ws: &[Workload]) -> f64 {
    ws.iter()
        .map(|w| w.captured_rtt_ns() as f64 / 1e6)
        .fold(0.0, f64::max)
}

/// Builds the lab, serves, replays at each condition, removes the lab.
pub(crate) fn run(
    name: &str,
    ws: &[Workload],
    sc: &Script,
    ask: &LabAsk,
) -> anyhow::Result<LabReport> {
    let loss = match &ask.loss {
        Some(l) => Some(l.parse::<LossModel>()?),
        None => None,
    };
    let lab_name = format!("rp{}", std::process::id() % 1_000_000);
    let first_rtt = if ask.check {
        captured_rtt_ms(ws)
    } else {
        ask.rtts_ms.first().copied().unwrap_or(0.0)
    };
    let cfg = UpConfig {
        name: lab_name.clone(),
        link: LinkChange {
            delay_ns: Some(half_ns(first_rtt)),
            rate_bps: Some(ask.rate_bps.unwrap_or(0.0)),
            loss,
            ..LinkChange::default()
        },
        owner: Some(ProcessId::current()),
        ..UpConfig::default()
    };
    let _guard = LabGuard(lab_name.clone());
    lab::up(&cfg, super::lab::emulator_command(&lab_name))
        .with_context(|| format!("replay {name} --lab: building lab {lab_name}"))?;
    let dir = std::env::temp_dir().join(format!("nsperf-replay-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let export = ExportDir(dir.canonicalize()?);
    let _server = match ask.server {
        ServerKind::Ganesha => {
            serve_ganesha(&lab_name, &export.0)?;
            None
        }
        _ => Some(serve(&lab_name, &export.0)?),
    };
    let version = match (ask.server, ask.v4) {
        (_, true) => "?version=4.1",
        (ServerKind::Ganesha, false) => "?version=3",
        _ => "",
    };
    let url: NfsUrl = format!("nfs://10.77.0.2{}{version}", export.0.display())
        .parse()
        .map_err(|e| anyhow::anyhow!("the lab server's URL: {e}"))?;
    let mut report = LabReport {
        lab: lab_name.clone(),
        server: ask.server.to_string(),
        check: None,
        runs: Vec::new(),
    };
    if ask.check {
        let rtt = captured_rtt_ms(ws);
        report.check = Some(replay_at(&lab_name, &url, ws, sc, rtt, ask)?);
    }
    for &rtt in &ask.rtts_ms {
        report
            .runs
            .push(replay_at(&lab_name, &url, ws, sc, rtt, ask)?);
    }
    Ok(report)
}

/// Half a round trip, ns: the lab's one-way delay.
fn half_ns(rtt_ms: f64) -> u64 {
    (rtt_ms * 1e6 / 2.0).round() as u64
}

/// nsperf's embedded NFSv3 server in site b of `lab`, exporting `dir` on the NFS port with
/// the portmapper (as `lab serve LAB b nfs DIR` runs it); stopped when dropped.
fn serve(lab: &str, dir: &std::path::Path) -> anyhow::Result<SiteServer> {
    let cfg = ServerConfig {
        dir: dir.to_path_buf(),
        bind: std::net::SocketAddr::new(
            std::net::Ipv4Addr::new(10, 77, 0, 2).into(),
            nsperf_nfs::proto::NFS_PORT,
        ),
        read_only: false,
        portmap_111: true,
    };
    let ns = netns_name(lab, "b");
    let h = netns::run_in(&ns, move || {
        Server::bind(&cfg)
            .map(Server::spawn)
            .map_err(|e| LabError::io("starting the embedded NFS server in site b", e))
    })
    .context("replay --lab")?;
    Ok(SiteServer(Some(h), ns))
}

/// nfs-ganesha in site b of `lab`, exporting `dir` (`nsperf lab serve LAB b nfs DIR
/// --server ganesha`, which returns once a client mounts the export); it stops with the lab.
fn serve_ganesha(lab: &str, dir: &std::path::Path) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("finding the nsperf binary")?;
    let out = std::process::Command::new(exe)
        .args(["lab", "serve", lab, "b", "nfs"])
        .arg(dir)
        .args(["--server", "ganesha"])
        .stdin(std::process::Stdio::null())
        .output()
        .context("replay --lab: starting ganesha")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(
            "replay --lab: ganesha did not start: {}",
            err.lines().last().unwrap_or("no message").trim()
        );
    }
    Ok(())
}

/// Sets the lab's link to `rtt_ms` (and the asked rate), replays the script from site a.
fn replay_at(
    lab: &str,
    url: &NfsUrl,
    ws: &[Workload],
    sc: &Script,
    rtt_ms: f64,
    ask: &LabAsk,
) -> anyhow::Result<LabRun> {
    let change = LinkChange {
        delay_ns: Some(half_ns(rtt_ms)),
        ..LinkChange::default()
    };
    lab::set(lab, &change, None)
        .with_context(|| format!("replay --lab: setting RTT {rtt_ms} ms"))?;
    // the change reaches the forwarders within a packet or two: let it settle
    std::thread::sleep(Duration::from_millis(50));
    let (u, s) = (url.clone(), sc.clone());
    let opt = Options {
        timeout: nsperf_nfs::client::DEFAULT_TIMEOUT,
        keep: false,
        window_bytes: ask.window_bytes,
    };
    let done = netns::with_netns(&netns_name(lab, "a"), move || {
        engine::run(&u, &s, opt).map_err(anyhow::Error::from)
    })
    .with_context(|| format!("replay --lab at RTT {rtt_ms} ms against {url}"))?;
    let link = LabLink {
        rtt_ms,
        rate_bps: ask.rate_bps,
        loss: ask.loss.clone(),
        window_bytes: ask.window_bytes,
    };
    Ok(lab_run(&url.to_string(), ws, &done, link))
}
