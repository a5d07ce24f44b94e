//! `nsperf lab serve LAB SITE nfs|smb DIR`: a file server in a lab site, and the two hidden
//! commands behind it — `lab service` (the supervisor, run inside the site's namespace) and
//! `lab nfsd` (the embedded NFSv3 server in the current namespace, for tests and by hand).
//! Process management is in `nsperf_lab::service`, the server in `nsperf_nfs::server`.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use nsperf_lab::LabError;
use nsperf_lab::service::{
    self, NfsVersions, Protocol, ServerKind, ServiceConfig, ServiceRecord, Stopped,
};
use nsperf_lab::state::{LabState, process_start_ticks};
use nsperf_nfs::server::{Server, ServerConfig};

/// Arguments of `lab serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Lab name.
    pub lab: String,
    /// Site the server runs in.
    pub site: String,
    /// File protocol: nfs or smb.
    pub protocol: Protocol,
    /// Directory to export (NFS: its path is also the export's name; SMB: its last
    /// component is the share's name).
    pub dir: PathBuf,
    /// Server program: for nfs, embedded (nsperf's own NFSv3 server, nothing to install,
    /// the default) or ganesha (nfs-ganesha with its own rpcbind in the site); for smb,
    /// samba (Samba's smbd, the default).
    #[arg(long)]
    pub server: Option<ServerKind>,
    /// Refuse writes (embedded server, samba).
    #[arg(long)]
    pub read_only: bool,
    /// NFS versions ganesha offers: 3,4 (the default), 3, or 4 (a server that speaks only
    /// NFSv4, as many NAS boxes and Kubernetes volumes do: MOUNT is not registered, and
    /// clients without `?version=` find v4 by themselves). The embedded server speaks 3.
    #[arg(long, value_name = "3,4|3|4")]
    pub nfs_versions: Option<NfsVersions>,
}

impl ServeArgs {
    /// The service these arguments ask for.
    fn config(&self, dir: PathBuf) -> ServiceConfig {
        ServiceConfig {
            protocol: self.protocol,
            server: self.server.unwrap_or(self.protocol.default_server()),
            dir,
            read_only: self.read_only,
            nfs_versions: self.nfs_versions,
        }
    }
}

/// Arguments of the hidden `lab service` (the supervisor inside the site).
#[derive(Debug, Args)]
pub struct ServiceArgs {
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Arguments of the hidden `lab nfsd`.
#[derive(Debug, Args)]
pub struct NfsdArgs {
    /// Directory to export.
    pub dir: PathBuf,
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Refuse writes.
    #[arg(long)]
    pub read_only: bool,
    /// Also answer the portmapper on port 111.
    #[arg(long)]
    pub portmap: bool,
}

const READY: &str = "ready ";

/// `lab serve`: starts the supervisor in the site and waits until the server answers.
pub fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let state = LabState::load(&a.lab)?;
    let site = state
        .sites
        .iter()
        .find(|s| s.name == a.site)
        .ok_or_else(|| LabError::Usage(format!("lab '{}' has no site '{}'", a.lab, a.site)))?;
    if !nsperf_lab::netns::is_root() {
        return Err(LabError::NeedsRoot("lab serve").into());
    }
    if !state.emulator_running() {
        return Err(LabError::Usage(format!(
            "lab '{}' is not running (lab down it, then up)",
            a.lab
        ))
        .into());
    }
    let server = a.server.unwrap_or(a.protocol.default_server());
    if !a.protocol.served_by(server) {
        return Err(LabError::Usage(format!(
            "--server {server} does not serve {} (nfs: embedded, ganesha; smb: samba)",
            a.protocol
        ))
        .into());
    }
    if let Some(r) = ServiceRecord::load_all(&a.lab)
        .into_iter()
        .find(|r| r.site == a.site && r.protocol == a.protocol && r.running())
    {
        return Err(LabError::Usage(format!(
            "site {} of lab {} already runs an {} server ({}, {}): one per site (its ports are taken)",
            a.site, a.lab, r.protocol, r.server, r.url
        ))
        .into());
    }
    let dir = a
        .dir
        .canonicalize()
        .with_context(|| format!("directory to serve {}", a.dir.display()))?;
    a.config(dir.clone()).validate(true)?;
    let exe = std::env::current_exe().context("finding the nsperf binary")?;
    let dir_s = dir.to_str().context("the directory's path is not UTF-8")?;
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &site.netns])
        .arg(&exe)
        .args([
            "lab",
            "service",
            &a.lab,
            &a.site,
            &a.protocol.to_string(),
            dir_s,
        ])
        .args(["--server", &server.to_string()]);
    if a.read_only {
        c.arg("--read-only");
    }
    if let Some(v) = a.nfs_versions {
        c.args(["--nfs-versions", &v.to_string()]);
    }
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setsid is async-signal-safe: the supervisor leaves the terminal's session, so
    // Ctrl-C in this shell does not stop the server.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = c.spawn().context("starting the server's supervisor")?;
    let out = child.stdout.take().context("supervisor stdout")?;
    let err = child.stderr.take().context("supervisor stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
    match line.trim().strip_prefix(READY.trim()) {
        Some(rest) => {
            let mut words = rest.split_whitespace();
            let url = words.next().unwrap_or_default();
            println!(
                "{} server ({server}) in site {} of lab {}: {url}",
                a.protocol, a.site, a.lab
            );
            // The site's address is only reachable inside the lab: test from another site.
            let from = state
                .sites
                .iter()
                .find(|s| s.name != a.site)
                .unwrap_or(site);
            let test = format!(
                "test it:  nsperf lab exec {} {} -- nsperf io run {url} -w seqread -s 64m",
                a.lab, from.name
            );
            match words.next() {
                Some(creds) => {
                    println!(
                        "credentials: {creds} (user {}; guests may connect too)",
                        nsperf_lab::samba::USER
                    );
                    println!("{test} --credentials {creds}");
                }
                None => println!("{test}"),
            }
            println!("stops with: nsperf lab down {}", a.lab);
            Ok(())
        }
        None => {
            let _ = child.kill();
            let _ = child.wait();
            let mut msg = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(err), &mut msg);
            let msg = msg
                .lines()
                .last()
                .unwrap_or("no message")
                .trim()
                .to_string();
            Err(LabError::Usage(format!("the {server} server did not start: {msg}")).into())
        }
    }
}

/// The hidden `lab service`: runs inside the site's namespace until the lab goes.
pub fn service(a: ServiceArgs) -> anyhow::Result<()> {
    let a = a.serve;
    nsperf_core::signal::install_interrupt_handler();
    let cfg = a.config(a.dir.clone());
    run_service(&cfg, Some((&a.lab, &a.site)), &mut ready, None)
}

/// Runs a file service in the current namespace until asked to stop (SIGINT, SIGTERM), its
/// lab goes away, or its server dies (an error). In a lab site (`site` = lab and site
/// names, the caller already inside its namespace) it serves on the site's address and is
/// recorded under the lab, so `lab down` stops it; without one (a server that can) on
/// 127.0.0.1 on a free port. `on_ready` gets the URL clients use once a client's MOUNT
/// and FSINFO succeed (with the credentials file of a Samba share); then `on_count`, when
/// given, is called every `SERVICE_COUNT_EVERY` with the server's own count of what it served
/// (the embedded server), or `None` for a server that keeps none (ganesha, Samba), so the
/// caller reads the host's counters beside it. The
/// one place that starts each kind of server: `lab serve` and a plan's `[[service]]`
/// (`nsperf step`) both come here.
pub fn run_service(
    cfg: &ServiceConfig,
    site: Option<(&str, &str)>,
    on_ready: &mut dyn FnMut(&str, Option<&Path>) -> anyhow::Result<()>,
    on_count: Option<&mut OnCount<'_>>,
) -> anyhow::Result<()> {
    cfg.validate(site.is_some())?;
    let me = std::process::id();
    let (addr, work, emulator, lab) = match site {
        Some((lab, site)) => {
            let state = LabState::load(lab)?;
            let s = state
                .sites
                .iter()
                .find(|s| s.name == site)
                .ok_or_else(|| LabError::Usage(format!("no site '{site}'")))?;
            let work = service::services_dir(lab).join(format!("{}-{me}", cfg.server));
            let emulator = state.emulator_pid.zip(state.emulator_start_ticks);
            (s.addr, work, emulator, Some((lab, site)))
        }
        None => {
            let work = std::env::temp_dir().join(format!(".nsperf-service-{me}"));
            (Ipv4Addr::LOCALHOST, work, None, None)
        }
    };
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let _work_gone = lab.is_none().then(|| RemoveOnDrop(work.clone()));
    let mut rec = ServiceRecord {
        site: lab.map(|(_, s)| s.to_string()).unwrap_or_default(),
        protocol: cfg.protocol,
        server: cfg.server,
        dir: cfg.dir.clone(),
        url: match cfg.protocol {
            Protocol::Nfs => format!("nfs://{addr}{}", cfg.dir.display()),
            Protocol::Smb => format!("smb://{addr}/{}", nsperf_lab::samba::share_name(&cfg.dir)),
        },
        pid: me,
        start_ticks: process_start_ticks(me).unwrap_or(0),
        log: work.join("server.log"),
    };
    if let Some((lab, _)) = lab {
        rec.save(lab)?;
    }
    let stopped = match cfg.server {
        ServerKind::Embedded => {
            // In a site: the NFS port and the portmapper, as a real server; on loopback: a
            // free port serving MOUNT and NFS (no root needed).
            let bind = match lab {
                Some(_) => SocketAddr::new(addr.into(), nsperf_nfs::proto::NFS_PORT),
                None => SocketAddr::new(addr.into(), 0),
            };
            let srv = Server::bind(&ServerConfig {
                dir: cfg.dir.clone(),
                bind,
                read_only: cfg.read_only,
                portmap_111: lab.is_some(),
            })
            .context("starting the embedded NFS server")?;
            if lab.is_none() {
                let a = srv.local_addr();
                rec.url = format!("nfs://{}:{}{}", a.ip(), a.port(), srv.export());
            }
            let running = srv.spawn();
            answers(&rec, NfsVersions::V3, &mut [])?;
            on_ready(&rec.url, None)?;
            match on_count {
                Some(count) => service::supervise_ticking(
                    &mut [],
                    emulator,
                    nsperf_plan::step::SERVICE_COUNT_EVERY,
                    &mut || count(Some(&running.served())),
                ),
                None => service::supervise(&mut [], emulator),
            }
        }
        ServerKind::Ganesha => {
            let versions = cfg.nfs_versions.unwrap_or(NfsVersions::Both);
            let mut kids = service::start_ganesha(&cfg.dir, addr, &work, versions)?;
            if versions.v3() {
                wait_for_mount(addr, &mut kids, &rec)?;
            }
            answers(&rec, versions, &mut kids)?;
            on_ready(&rec.url, None)?;
            supervise_uncounted(&mut kids, emulator, on_count)
        }
        ServerKind::Samba => {
            let smb = nsperf_lab::samba::start_samba(&cfg.dir, &work, cfg.read_only)?;
            let creds = smb.credentials.clone();
            let mut kids = vec![("smbd".to_string(), smb.child)];
            wait_for_share(&rec.url, &creds, &mut kids, &rec)?;
            on_ready(&rec.url, Some(&creds))?;
            supervise_uncounted(&mut kids, emulator, on_count)
        }
    };
    if let Some((lab, _)) = lab {
        let _ = std::fs::remove_file(service::services_dir(lab).join(format!("{me}.json")));
    }
    match stopped {
        Stopped::ServerExited(why) => Err(anyhow::anyhow!("{why}")),
        _ => Ok(()),
    }
}

/// What a service's count goes to: the embedded server's own count, or `None` for a server
/// that keeps none.
pub type OnCount<'a> = dyn FnMut(Option<&nsperf_nfs::server::Served>) + 'a;

/// Supervises a server that keeps no count of its own, ticking `on_count` (when given) with
/// none, so the host's counters are read beside it.
fn supervise_uncounted(
    kids: &mut [(String, std::process::Child)],
    emulator: Option<(u32, u64)>,
    on_count: Option<&mut OnCount<'_>>,
) -> Stopped {
    match on_count {
        Some(count) => service::supervise_ticking(
            kids,
            emulator,
            nsperf_plan::step::SERVICE_COUNT_EVERY,
            &mut || count(None),
        ),
        None => service::supervise(kids, emulator),
    }
}

/// Removes a directory when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The health check: waits until a client mounts the export and reads its FSINFO (45 s at
/// most), as the io engine will.
fn answers(
    rec: &ServiceRecord,
    versions: NfsVersions,
    kids: &mut [(String, std::process::Child)],
) -> anyhow::Result<()> {
    let mut url: nsperf_nfs::NfsUrl = rec.url.parse()?;
    let t0 = std::time::Instant::now();
    loop {
        let t = Duration::from_secs(2);
        let answered = if versions.v3() {
            nsperf_nfs::Session::open(&url, t).map(drop)
        } else {
            url.version = Some(nsperf_nfs::NfsVersion::V4_1);
            nsperf_nfs::v4::Client4::connect(&url, nsperf_nfs::Timeouts::new(t), 1).map(drop)
        };
        let err = match answered {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if let Some((name, st)) = kids
            .iter_mut()
            .find_map(|(n, c)| c.try_wait().ok().flatten().map(|s| (n.clone(), s)))
        {
            anyhow::bail!("{name} exited ({st}); see {}", rec.log.display());
        }
        if nsperf_core::signal::interrupted() {
            anyhow::bail!("interrupted before the server answered");
        }
        if t0.elapsed() > Duration::from_secs(45) {
            anyhow::bail!("{} did not answer within 45 s: {err}", rec.url);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `lab serve`'s line from the supervisor: the URL, then the credentials file its clients
/// use (Samba).
fn ready(url: &str, credentials: Option<&Path>) -> anyhow::Result<()> {
    let mut o = std::io::stdout();
    match credentials {
        Some(c) => writeln!(o, "{READY}{url} {}", c.display())?,
        None => writeln!(o, "{READY}{url}")?,
    }
    o.flush()?;
    // Nothing more goes to the pipe: the parent stops reading once the server is up.
    // SAFETY: replacing fd 1 with /dev/null; no Rust handle caches it beyond `Stdout`.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if null >= 0 {
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
    Ok(())
}

/// Waits until ganesha's MOUNT is registered with rpcbind and lists the export (when it
/// offers NFSv3; with NFSv4 only, [`answers`] alone waits).
fn wait_for_mount(
    addr: Ipv4Addr,
    kids: &mut [(String, std::process::Child)],
    rec: &ServiceRecord,
) -> anyhow::Result<()> {
    let t0 = std::time::Instant::now();
    let host = addr.to_string();
    loop {
        if let Ok(p) = nsperf_nfs::client::getport(
            &host,
            nsperf_nfs::proto::MOUNT_PROG,
            3,
            Duration::from_secs(1),
        ) {
            let listed = nsperf_nfs::client::RpcConn::connect(
                "MOUNT",
                SocketAddr::new(addr.into(), p),
                Duration::from_secs(1),
            )
            .and_then(|mut c| nsperf_nfs::client::exports(&mut c));
            if listed.is_ok_and(|l| l.iter().any(|e| Path::new(e) == rec.dir)) {
                return Ok(());
            }
        }
        if let Some((name, st)) = kids
            .iter_mut()
            .find_map(|(n, c)| c.try_wait().ok().flatten().map(|s| (n.clone(), s)))
        {
            anyhow::bail!("{name} exited ({st}); see {}", rec.log.display());
        }
        if t0.elapsed() > Duration::from_secs(45) {
            anyhow::bail!(
                "ganesha did not answer within 45 s; see {}",
                rec.log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until smbd lets the lab user connect to the share.
fn wait_for_share(
    url: &str,
    creds: &Path,
    kids: &mut [(String, std::process::Child)],
    rec: &ServiceRecord,
) -> anyhow::Result<()> {
    let t0 = std::time::Instant::now();
    let url: nsperf_smb::SmbUrl = url.parse()?;
    let creds = nsperf_smb::Credentials::from_file(creds)?;
    loop {
        match nsperf_smb::Client::connect(&url, &creds, Duration::from_secs(2)) {
            Ok(_) => return Ok(()),
            Err(e) if t0.elapsed() > Duration::from_secs(45) => {
                anyhow::bail!(
                    "smbd did not answer within 45 s ({e}); see {}",
                    rec.log.display()
                )
            }
            Err(_) => {}
        }
        if let Some((name, st)) = kids
            .iter_mut()
            .find_map(|(n, c)| c.try_wait().ok().flatten().map(|s| (n.clone(), s)))
        {
            anyhow::bail!("{name} exited ({st}); see {}", rec.log.display());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The hidden `lab nfsd`: the embedded server in this namespace, in the foreground.
pub fn nfsd(a: NfsdArgs) -> anyhow::Result<()> {
    nsperf_core::signal::install_interrupt_handler();
    let srv = Server::bind(&ServerConfig {
        dir: a.dir.clone(),
        bind: a.listen,
        read_only: a.read_only,
        portmap_111: a.portmap,
    })
    .with_context(|| format!("serving {}", a.dir.display()))?;
    let addr = srv.local_addr();
    let url = format!("nfs://{}:{}{}", addr.ip(), addr.port(), srv.export());
    let h = srv.spawn();
    println!("{READY}{url}");
    std::io::stdout().flush()?;
    while !nsperf_core::signal::interrupted() {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(h);
    Ok(())
}
