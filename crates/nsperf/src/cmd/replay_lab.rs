//! `nsperf replay CAPTURE --lab [--check] [--server ganesha|samba]` (issue 25 items 2 and
//! 4): a two-site lab built with the lab library (as `lab up` builds one), a server in site
//! b — nsperf's embedded NFSv3 server (as `lab serve LAB b nfs DIR` runs it, here on a
//! thread of this process inside the site's namespace), nfs-ganesha (`lab serve LAB b nfs
//! DIR --server ganesha`, run as that command) or Samba's smbd for an SMB2 capture (`lab
//! serve LAB b smb DIR`, likewise) — and the capture's workload replayed from site a at
//! each asked RTT (`--check`: at the capture's own RTT first), an NFSv4 capture over
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
use nsperf_smb::replay as smb;
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
    /// The TCP window each way, bytes: in the lab, whole segments of [`LAB_MSS`] (see
    /// [`lock_window`]); the model's too.
    pub window_bytes: Option<u64>,
    /// Replay at the capture's own RTT first.
    pub check: bool,
    /// The server in site b: embedded or ganesha.
    pub server: ServerKind,
    /// The capture is NFSv4's: replayed over NFSv4.1 (ganesha only).
    pub v4: bool,
}

/// The workload replayed: an NFS capture's script or an SMB2 capture's.
#[derive(Clone, Copy)]
pub(crate) enum LabScript<'a> {
    /// Against the embedded server or ganesha.
    Nfs(&'a Script),
    /// Against smbd.
    Smb(&'a smb::Script),
}

/// The lab's server, as the replay reaches it from site a.
enum Target {
    Nfs(NfsUrl),
    Smb(nsperf_smb::SmbUrl, nsperf_smb::Credentials),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Nfs(u) => u.fmt(f),
            Target::Smb(u, _) => u.fmt(f),
        }
    }
}

/// The payload of a full segment on the lab's link: its MTU (1500) less the IPv4 and TCP
/// headers and the timestamp option.
const LAB_MSS: u64 = 1448;

/// The SMB port the lab's smbd listens on.
const SMB_PORT: u16 = 445;

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
    sc: LabScript<'_>,
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
    let (_server, url) = match ask.server {
        ServerKind::Samba => (None, serve_samba(&lab_name, &export.0)?),
        ServerKind::Ganesha => {
            serve_ganesha(&lab_name, &export.0)?;
            (None, nfs_url(&export.0, ask)?)
        }
        _ => (Some(serve(&lab_name, &export.0)?), nfs_url(&export.0, ask)?),
    };
    let port = match url {
        Target::Nfs(_) => nsperf_nfs::proto::NFS_PORT,
        Target::Smb(..) => SMB_PORT,
    };
    let window = match ask.window_bytes {
        Some(w) => Some(lock_window(&lab_name, w, port)?),
        None => None,
    };
    let mut report = LabReport {
        lab: lab_name.clone(),
        server: ask.server.to_string(),
        check: None,
        runs: Vec::new(),
    };
    if ask.check {
        let rtt = captured_rtt_ms(ws);
        report.check = Some(replay_at(&lab_name, &url, ws, sc, rtt, ask, window)?);
    }
    for &rtt in &ask.rtts_ms {
        report
            .runs
            .push(replay_at(&lab_name, &url, ws, sc, rtt, ask, window)?);
    }
    Ok(report)
}

/// The URL of the lab's NFS server exporting `dir`: NFSv4.1 for an NFSv4 capture, NFSv3
/// else.
fn nfs_url(dir: &std::path::Path, ask: &LabAsk) -> anyhow::Result<Target> {
    let version = match (ask.server, ask.v4) {
        (_, true) => "?version=4.1",
        (ServerKind::Ganesha, false) => "?version=3",
        _ => "",
    };
    format!("nfs://10.77.0.2{}{version}", dir.display())
        .parse()
        .map(Target::Nfs)
        .map_err(|e| anyhow::anyhow!("the lab server's URL: {e}"))
}

/// Samba's smbd in site b of `lab`, sharing `dir` (`nsperf lab serve LAB b smb DIR`); its
/// URL and the credentials file it wrote, from what that command printed. It stops with
/// the lab.
fn serve_samba(lab: &str, dir: &std::path::Path) -> anyhow::Result<Target> {
    let exe = std::env::current_exe().context("finding the nsperf binary")?;
    let out = std::process::Command::new(exe)
        .args(["lab", "serve", lab, "b", "smb"])
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .context("replay --lab: starting smbd")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(
            "replay --lab: smbd did not start: {}",
            err.lines().last().unwrap_or("no message").trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let word_after = |tag: &str| {
        text.lines()
            .find_map(|l| l.split_once(tag).map(|(_, r)| r.trim()))
            .and_then(|r| r.split_whitespace().next().map(str::to_string))
    };
    let url = text
        .lines()
        .find_map(|l| l.split_whitespace().find(|w| w.starts_with("smb://")))
        .context("replay --lab: smbd's URL not in lab serve's output")?;
    let url: nsperf_smb::SmbUrl = url
        .parse()
        .map_err(|e| anyhow::anyhow!("the lab server's URL: {e}"))?;
    let creds = match word_after("credentials:") {
        Some(path) => nsperf_smb::Credentials::from_file(std::path::Path::new(&path))?,
        None => nsperf_smb::Credentials::guest(),
    };
    Ok(Target::Smb(url, creds))
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

/// `--window W` in the lab, exact each way: the congestion window of each site's route to
/// the other locked at W's whole segments (at least 2), so that neither side has more than
/// that many unacknowledged. The sockets' buffers cannot do it: Linux 6.x sets a receive
/// window clamp from the buffer's space as it measures it (`SO_RCVBUF` 64 KiB with
/// `TCP_WINDOW_CLAMP` 64 KiB read back 87,040 bytes, and a 2 MiB read at 24 ms ran at
/// 87 KB a round trip, 2026-12-08), and the send buffer counts memory, not bytes. The
/// kernel takes a locked congestion window from its TCP metrics entry for the peer, which
/// it makes from the route when a connection to the peer ends: one connection to the
/// server, opened and closed, makes the entries on both sides. The window in bytes.
fn lock_window(lab: &str, window: u64, port: u16) -> anyhow::Result<u64> {
    let segments = (window / LAB_MSS).max(2);
    let n = segments.to_string();
    let sites = [("a", "10.77.0.2"), ("b", "10.77.0.1")];
    for (site, peer) in sites {
        let ns = netns_name(lab, site);
        let dst = format!("{peer}/32");
        netns::ip(&["-n", &ns, "tcp_metrics", "flush", "all"]).ok();
        netns::ip(&[
            "-n",
            &ns,
            "route",
            "replace",
            &dst,
            "dev",
            nsperf_lab::emulator::LINK_DEV,
            "cwnd",
            "lock",
            &n,
        ])
        .context("replay --lab --window: locking the route's congestion window")?;
    }
    let server = std::net::SocketAddr::from(([10, 77, 0, 2], port));
    netns::with_netns(&netns_name(lab, "a"), move || {
        std::net::TcpStream::connect_timeout(&server, Duration::from_secs(5))
            .map(drop)
            .map_err(anyhow::Error::from)
    })
    .context("replay --lab --window: a connection to the server")?;
    let made = |(site, peer): (&str, &str)| {
        std::process::Command::new("ip")
            .args(["-n", &netns_name(lab, site), "tcp_metrics", "show", peer])
            .output()
            .is_ok_and(|o| !o.stdout.is_empty())
    };
    let until = std::time::Instant::now() + Duration::from_secs(3);
    while !sites.into_iter().all(made) {
        anyhow::ensure!(
            std::time::Instant::now() < until,
            "replay --lab --window: the kernel made no TCP metrics entry for the lab's peers within 3 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(segments * LAB_MSS)
}

/// Sets the lab's link to `rtt_ms` (and the asked rate), replays the script from site a;
/// the window, when asked, is the lab's routes' ([`lock_window`]), in bytes.
fn replay_at(
    lab: &str,
    url: &Target,
    ws: &[Workload],
    sc: LabScript<'_>,
    rtt_ms: f64,
    ask: &LabAsk,
    window: Option<u64>,
) -> anyhow::Result<LabRun> {
    let change = LinkChange {
        delay_ns: Some(half_ns(rtt_ms)),
        ..LinkChange::default()
    };
    lab::set(lab, &change, None)
        .with_context(|| format!("replay --lab: setting RTT {rtt_ms} ms"))?;
    // the change reaches the forwarders within a packet or two: let it settle
    std::thread::sleep(Duration::from_millis(50));
    let site = netns_name(lab, "a");
    let done = match (url, sc) {
        (Target::Nfs(u), LabScript::Nfs(s)) => {
            let (u, s) = (u.clone(), s.clone());
            let opt = Options {
                timeout: nsperf_nfs::client::DEFAULT_TIMEOUT,
                keep: false,
                // The window is the routes': the sockets' buffers are left to the kernel.
                window_bytes: None,
            };
            netns::with_netns(&site, move || {
                engine::run(&u, &s, opt).map_err(anyhow::Error::from)
            })
        }
        (Target::Smb(u, c), LabScript::Smb(s)) => {
            let (u, c, s) = (u.clone(), c.clone(), s.clone());
            let opt = smb::Options {
                timeout: Duration::from_secs(30),
                keep: false,
            };
            netns::with_netns(&site, move || {
                smb::run(&u, &c, &s, opt).map_err(anyhow::Error::from)
            })
        }
        _ => Err(anyhow::anyhow!(
            "the capture's protocol is not the lab server's"
        )),
    }
    .with_context(|| format!("replay --lab at RTT {rtt_ms} ms against {url}"))?;
    let link = LabLink {
        rtt_ms,
        rate_bps: ask.rate_bps,
        loss: ask.loss.clone(),
        window_bytes: window,
    };
    Ok(lab_run(&url.to_string(), ws, &done, link))
}
