//! File servers inside a lab's sites (`nsperf lab serve`): the record of each running
//! service, the supervisor that keeps a server alive until the lab goes away, nfs-ganesha's
//! start-up (with its own rpcbind in the site), and the clean-up `lab down` does.
//!
//! Lifetime: a service runs under a supervisor process (a hidden `nsperf lab service`) started
//! in the site's namespace and its own session. The supervisor records itself before anything
//! else, holds its server processes with `PR_SET_PDEATHSIG` (they die with it, even on
//! `kill -9`), and exits when asked (SIGTERM), when a server exits, or when the lab's emulator
//! is gone. `lab down` stops recorded supervisors and then kills every process still inside
//! the lab's namespaces, so nothing is left behind whatever was killed first.

use std::fmt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use nsperf_core::process::ProcessId;
use serde::{Deserialize, Serialize};

use crate::error::{LabError, Result};
use crate::state::{lab_dir, process_start_ticks, write_atomic};

/// The file protocol a service offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// NFSv3 (with MOUNT and the portmapper).
    Nfs,
    /// SMB 2/3 (Samba's smbd).
    Smb,
}

impl FromStr for Protocol {
    type Err = LabError;
    fn from_str(s: &str) -> Result<Protocol> {
        match s.to_ascii_lowercase().as_str() {
            "nfs" | "nfs3" => Ok(Protocol::Nfs),
            "smb" | "cifs" => Ok(Protocol::Smb),
            _ => Err(LabError::Usage(format!(
                "unknown file protocol '{s}' (nfs, smb)"
            ))),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Nfs => "nfs",
            Protocol::Smb => "smb",
        })
    }
}

/// Which server program serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// nsperf's own NFSv3 server (nothing to install).
    Embedded,
    /// nfs-ganesha (Debian nfs-ganesha, nfs-ganesha-vfs) with its own rpcbind in the site.
    Ganesha,
    /// Samba's smbd (Debian samba), the server of `smb`.
    Samba,
}

impl Protocol {
    /// The server of this protocol when none is named.
    pub fn default_server(self) -> ServerKind {
        match self {
            Protocol::Nfs => ServerKind::Embedded,
            Protocol::Smb => ServerKind::Samba,
        }
    }

    /// Whether `server` serves this protocol.
    pub fn served_by(self, server: ServerKind) -> bool {
        match self {
            Protocol::Nfs => matches!(server, ServerKind::Embedded | ServerKind::Ganesha),
            Protocol::Smb => server == ServerKind::Samba,
        }
    }
}

impl FromStr for ServerKind {
    type Err = LabError;
    fn from_str(s: &str) -> Result<ServerKind> {
        match s.to_ascii_lowercase().as_str() {
            "embedded" | "nsperf" => Ok(ServerKind::Embedded),
            "ganesha" | "nfs-ganesha" => Ok(ServerKind::Ganesha),
            "samba" | "smbd" => Ok(ServerKind::Samba),
            _ => Err(LabError::Usage(format!(
                "unknown server '{s}' (embedded, ganesha, samba)"
            ))),
        }
    }
}

impl fmt::Display for ServerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerKind::Embedded => "embedded",
            ServerKind::Ganesha => "ganesha",
            ServerKind::Samba => "samba",
        })
    }
}

/// The NFS versions a ganesha service offers (`lab serve --nfs-versions`, ganesha's
/// `Protocols`): both, or one, to stand in for a server that speaks only NFSv3 or only
/// NFSv4 (many NAS boxes and Kubernetes volumes). rpcbind runs in the site either way, as it
/// does beside a real server; with NFSv4 only, MOUNT is not registered with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NfsVersions {
    /// NFSv3 (with MOUNT) and NFSv4.
    #[serde(rename = "3,4")]
    Both,
    /// NFSv3 only.
    #[serde(rename = "3")]
    V3,
    /// NFSv4 (4.0 and 4.1) only.
    #[serde(rename = "4")]
    V4,
}

impl NfsVersions {
    /// Whether NFSv3 (and MOUNT) is offered.
    pub fn v3(self) -> bool {
        self != NfsVersions::V4
    }

    /// Whether NFSv4 is offered.
    pub fn v4(self) -> bool {
        self != NfsVersions::V3
    }
}

impl FromStr for NfsVersions {
    type Err = LabError;
    fn from_str(s: &str) -> Result<NfsVersions> {
        let mut v = (false, false);
        for p in s.split(',').map(str::trim) {
            match p {
                "3" => v.0 = true,
                "4" => v.1 = true,
                _ => {
                    return Err(LabError::Usage(format!(
                        "NFS versions '{s}': a list of 3 and 4 (3,4 / 3 / 4)"
                    )));
                }
            }
        }
        Ok(match v {
            (true, true) => NfsVersions::Both,
            (true, false) => NfsVersions::V3,
            _ => NfsVersions::V4,
        })
    }
}

impl fmt::Display for NfsVersions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NfsVersions::Both => "3,4",
            NfsVersions::V3 => "3",
            NfsVersions::V4 => "4",
        })
    }
}

impl ServerKind {
    /// The protocol this server program offers.
    pub fn protocol(self) -> Protocol {
        match self {
            ServerKind::Embedded | ServerKind::Ganesha => Protocol::Nfs,
            ServerKind::Samba => Protocol::Smb,
        }
    }

    /// True when the server can run outside a lab site, on this host's loopback on a free
    /// port (nsperf's own server); the others need a site of their own (fixed ports, their
    /// own rpcbind).
    pub fn runs_on_loopback(self) -> bool {
        matches!(self, ServerKind::Embedded)
    }
}

/// A file service to start: what `nsperf lab serve` and a plan's `[[service]]` ask for. It
/// runs in a lab site (its ports on the site's address) or, for a server that can, on this
/// host's loopback on a free port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    /// Protocol offered.
    pub protocol: Protocol,
    /// Server program.
    pub server: ServerKind,
    /// Directory served (absolute; its path is also the export's name).
    pub dir: PathBuf,
    /// Refuse writes (embedded server).
    #[serde(default)]
    pub read_only: bool,
    /// The NFS versions offered (ganesha; the embedded server speaks NFSv3 only). `None`:
    /// every version the server speaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs_versions: Option<NfsVersions>,
}

impl ServiceConfig {
    /// Checks the combination; `in_site` is true when it runs in a lab site. One line.
    pub fn validate(&self, in_site: bool) -> Result<()> {
        if !self.protocol.served_by(self.server) {
            return Err(LabError::Usage(format!(
                "the {} server offers {}, not {}",
                self.server,
                self.server.protocol(),
                self.protocol
            )));
        }
        if !in_site && !self.server.runs_on_loopback() {
            return Err(LabError::Usage(format!(
                "the {} server runs in a lab site (it needs its own ports and rpcbind): give it a site",
                self.server
            )));
        }
        if self.read_only && self.server == ServerKind::Ganesha {
            return Err(LabError::Usage(
                "read-only is a setting of the embedded server and samba, not of ganesha".into(),
            ));
        }
        match (self.server, self.nfs_versions) {
            (_, None) | (ServerKind::Ganesha, Some(_)) => {}
            (ServerKind::Embedded, Some(NfsVersions::V3)) => {}
            (ServerKind::Embedded, Some(v)) => {
                return Err(LabError::Usage(format!(
                    "NFS versions {v}: the embedded server speaks NFSv3 only (ganesha serves NFSv4)"
                )));
            }
            (ServerKind::Samba, Some(_)) => {
                return Err(LabError::Usage(
                    "NFS versions are a setting of the NFS servers, not of samba".into(),
                ));
            }
        }
        if !self.dir.is_absolute() {
            return Err(LabError::Usage(format!(
                "the directory to serve must be an absolute path, not {}",
                self.dir.display()
            )));
        }
        Ok(())
    }
}

/// One running service, as recorded under the lab's directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceRecord {
    /// Site it runs in.
    pub site: String,
    /// Protocol offered.
    pub protocol: Protocol,
    /// Server program.
    pub server: ServerKind,
    /// Directory served.
    pub dir: PathBuf,
    /// The target clients use (`nfs://10.77.0.2/DIR`).
    pub url: String,
    /// Supervisor process id.
    pub pid: u32,
    /// Its start time in clock ticks (a recycled pid is never signalled).
    pub start_ticks: u64,
    /// The servers' log file.
    pub log: PathBuf,
}

/// Directory of a lab's service records and server files.
pub fn services_dir(lab: &str) -> PathBuf {
    lab_dir(lab).join("services")
}

impl ServiceRecord {
    /// Writes the record (`services/PID.json`).
    pub fn save(&self, lab: &str) -> Result<()> {
        let dir = services_dir(lab);
        std::fs::create_dir_all(&dir)
            .map_err(|e| LabError::io(format!("creating {}", dir.display()), e))?;
        write_atomic(
            &dir.join(format!("{}.json", self.pid)),
            &serde_json::to_vec_pretty(self).unwrap_or_default(),
        )
    }

    /// Every recorded service of a lab.
    pub fn load_all(lab: &str) -> Vec<ServiceRecord> {
        let mut v: Vec<ServiceRecord> = std::fs::read_dir(services_dir(lab))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by_key(|r| r.pid);
        v
    }

    /// True while the recorded supervisor is alive.
    pub fn running(&self) -> bool {
        process_start_ticks(self.pid) == Some(self.start_ticks)
    }
}

/// Processes whose network namespace is the named one (never the caller or its ancestors:
/// see [`crate::netns::processes_in`]).
pub fn pids_in_netns(netns: &str) -> Vec<u32> {
    crate::netns::processes_in(netns)
        .into_iter()
        .map(|p| p.pid)
        .collect()
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; callers checked the pid's identity.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Stops a lab's services (their supervisors stop rpcbind and ganesha in order), then every
/// process left in its namespaces: SIGTERM, SIGKILL after `grace` (see
/// [`crate::netns::stop_processes`]). Returns how many processes were still running when
/// asked.
pub fn stop_all(lab: &str, netns: &[String], grace: Duration) -> usize {
    let services: Vec<ProcessId> = ServiceRecord::load_all(lab)
        .iter()
        .filter(|r| r.running())
        .map(|r| ProcessId {
            pid: r.pid,
            start_ticks: r.start_ticks,
        })
        .collect();
    let mut n = crate::netns::stop_processes(&services, grace).len();
    let left: Vec<ProcessId> = netns
        .iter()
        .flat_map(|ns| crate::netns::processes_in(ns))
        .collect();
    n += crate::netns::stop_processes(&left, grace).len();
    let _ = std::fs::remove_dir_all(services_dir(lab));
    n
}

/// Starts `cmd` so that it dies with this process (`PR_SET_PDEATHSIG`), its output appended
/// to `log`.
pub fn spawn_child(cmd: &mut Command, log: &Path) -> Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| LabError::io(format!("opening {}", log.display()), e))?;
    let err = out.try_clone().map_err(|e| LabError::io("log file", e))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let name = cmd.get_program().to_string_lossy().into_owned();
    cmd.spawn()
        .map_err(|e| LabError::io(format!("starting {name} (is it installed?)"), e))
}

/// Why a supervisor stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// SIGTERM or SIGINT.
    Asked,
    /// The lab's emulator is gone.
    LabGone,
    /// A server process exited (its name and status).
    ServerExited(String),
}

/// Waits until asked to stop, the emulator (`pid`, `ticks`) is gone, or a child exits; then
/// stops the children (SIGTERM, SIGKILL after 2 s).
pub fn supervise(children: &mut [(String, Child)], emulator: Option<(u32, u64)>) -> Stopped {
    supervise_ticking(children, emulator, Duration::from_millis(200), &mut || {})
}

/// [`supervise`], calling `tick` every `every` (at most 1 s) while it waits.
pub fn supervise_ticking(
    children: &mut [(String, Child)],
    emulator: Option<(u32, u64)>,
    every: Duration,
    tick: &mut dyn FnMut(),
) -> Stopped {
    let every = every.min(Duration::from_secs(1));
    let mut next = Instant::now();
    let why = loop {
        let now = Instant::now();
        if now >= next {
            tick();
            next += every;
            if next < now {
                next = now + every;
            }
        }
        if nsperf_core::signal::interrupted() {
            break Stopped::Asked;
        }
        if let Some((pid, ticks)) = emulator {
            if process_start_ticks(pid) != Some(ticks) {
                break Stopped::LabGone;
            }
        }
        if let Some((name, st)) = children
            .iter_mut()
            .find_map(|(n, c)| c.try_wait().ok().flatten().map(|s| (n.clone(), s)))
        {
            break Stopped::ServerExited(format!("{name} exited ({st})"));
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    };
    for (_, c) in children.iter_mut() {
        signal(c.id(), libc::SIGTERM);
    }
    let t0 = Instant::now();
    for (_, c) in children.iter_mut() {
        while c.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
    why
}

/// The ganesha configuration serving `dir` over the NFS `versions` at `addr`, MOUNT on a
/// fixed port (when NFSv3 is offered), no NLM/RQUOTA, root not squashed (the lab's clients
/// run as root), VFS backend.
pub fn ganesha_config(
    dir: &Path,
    addr: std::net::Ipv4Addr,
    run_dir: &Path,
    versions: NfsVersions,
) -> String {
    let protocols = match versions {
        NfsVersions::Both => "3, 4",
        NfsVersions::V3 => "3",
        NfsVersions::V4 => "4",
    };
    let d = dir.display();
    let r = run_dir.display();
    let plugins = [
        "/usr/lib/x86_64-linux-gnu/ganesha",
        "/usr/lib/aarch64-linux-gnu/ganesha",
        "/usr/lib64/ganesha",
        "/usr/lib/ganesha",
    ]
    .iter()
    .find(|p| Path::new(p).join("libfsalvfs.so").exists())
    .map(|p| format!("\n    Plugins_Dir = \"{p}\";"))
    .unwrap_or_default();
    format!(
        r#"NFS_CORE_PARAM {{
    Protocols = {protocols};
    NFS_Port = 2049;
    MNT_Port = 20048;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Bind_addr = {addr};{plugins}
}}
NFSV4 {{
    Graceless = true;
    RecoveryBackend = fs;
    RecoveryRoot = "{r}/recovery";
}}
NFS_KRB5 {{ Active_krb5 = false; }}
EXPORT {{
    Export_Id = 1;
    Path = "{d}";
    Pseudo = "{d}";
    Protocols = {protocols};
    Transports = TCP;
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    Disable_ACL = true;
    FSAL {{ Name = VFS; }}
}}
LOG {{ Default_Log_Level = WARN; }}
"#
    )
}

/// Starts rpcbind and nfs-ganesha in the current (site) namespace; the caller must already
/// be in a private mount namespace (`ip netns exec` gives one), where `/run` is replaced by a
/// private tmpfs so this rpcbind's socket and lock do not clash with the host's.
pub fn start_ganesha(
    dir: &Path,
    addr: std::net::Ipv4Addr,
    work: &Path,
    versions: NfsVersions,
) -> Result<Vec<(String, Child)>> {
    let log = work.join("server.log");
    let conf = work.join("ganesha.conf");
    std::fs::create_dir_all(work.join("recovery"))
        .map_err(|e| LabError::io("creating ganesha's directory", e))?;
    std::fs::write(&conf, ganesha_config(dir, addr, work, versions))
        .map_err(|e| LabError::io("writing ganesha.conf", e))?;
    private_run(work)?;
    let mut kids = Vec::new();
    let mut rpcbind = Command::new("rpcbind");
    rpcbind.args(["-f", "-w"]);
    kids.push(("rpcbind".to_string(), spawn_child(&mut rpcbind, &log)?));
    // rpcbind must answer before ganesha registers its programs.
    let t0 = Instant::now();
    while std::net::TcpStream::connect((addr, 111)).is_err() {
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(LabError::Usage(
                "rpcbind did not start in the site (see the log)".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut g = Command::new("ganesha.nfsd");
    g.arg("-F")
        .arg("-L")
        .arg(work.join("ganesha.log"))
        .arg("-f")
        .arg(&conf)
        .arg("-p")
        .arg(work.join("ganesha.pid"))
        .args(["-N", "NIV_WARN"]);
    kids.push(("ganesha.nfsd".to_string(), spawn_child(&mut g, &log)?));
    Ok(kids)
}

/// Replaces `/run` with a private tmpfs in this mount namespace, so this site's rpcbind
/// socket and lock do not clash with the host's, and binds `keep` (the service's files,
/// under the lab's directory in `/run`) back at its place.
fn private_run(keep: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let keep_fd = std::fs::File::open(keep)
        .map_err(|e| LabError::io(format!("opening {}", keep.display()), e))?;
    let c = |s: &str| std::ffi::CString::new(s).unwrap_or_default();
    let (run, tmpfs) = (c("/run"), c("tmpfs"));
    // SAFETY: mount with valid C strings; affects only this mount namespace, which
    // `ip netns exec` made a slave of the host's (nothing propagates back).
    if unsafe {
        libc::mount(
            tmpfs.as_ptr(),
            run.as_ptr(),
            tmpfs.as_ptr(),
            0,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(LabError::io(
            "mounting a private /run",
            std::io::Error::last_os_error(),
        ));
    }
    std::fs::create_dir_all(keep)
        .map_err(|e| LabError::io(format!("creating {}", keep.display()), e))?;
    let src = c(&format!("/proc/self/fd/{}", keep_fd.as_raw_fd()));
    let dst = std::ffi::CString::new(keep.as_os_str().as_encoded_bytes()).unwrap_or_default();
    // SAFETY: as above; a bind mount of a directory we hold open.
    if unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(LabError::io(
            "binding the service directory",
            std::io::Error::last_os_error(),
        ));
    }
    for d in ["/run/rpcbind", "/run/ganesha", "/run/lock"] {
        let _ = std::fs::create_dir_all(d);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_config_mentions_the_export() {
        for k in [ServerKind::Embedded, ServerKind::Ganesha, ServerKind::Samba] {
            assert_eq!(k.to_string().parse::<ServerKind>().unwrap(), k);
        }
        assert_eq!("NFS".parse::<Protocol>().unwrap(), Protocol::Nfs);
        assert_eq!("smb".parse::<Protocol>().unwrap(), Protocol::Smb);
        assert!("afp".parse::<Protocol>().is_err());
        assert!(Protocol::Smb.served_by(Protocol::Smb.default_server()));
        assert!(!Protocol::Nfs.served_by(ServerKind::Samba));
        let mut cfg = ServiceConfig {
            protocol: Protocol::Nfs,
            server: ServerKind::Ganesha,
            dir: "/srv/x".into(),
            read_only: false,
            nfs_versions: None,
        };
        assert!(cfg.validate(true).is_ok());
        assert!(
            cfg.validate(false)
                .unwrap_err()
                .to_string()
                .contains("lab site")
        );
        cfg.nfs_versions = Some(NfsVersions::V4);
        assert!(cfg.validate(true).is_ok());
        // As a plan's step contract carries it to `nsperf step`.
        let j = serde_json::to_string(&cfg).unwrap();
        assert!(j.contains("\"nfs_versions\":\"4\""), "{j}");
        assert_eq!(serde_json::from_str::<ServiceConfig>(&j).unwrap(), cfg);
        cfg.server = Protocol::Nfs.default_server();
        let e = cfg.validate(false).unwrap_err().to_string();
        assert!(e.contains("NFSv3 only"), "{e}");
        cfg.nfs_versions = Some(NfsVersions::V3);
        assert!(cfg.validate(false).is_ok());
        cfg.nfs_versions = None;
        assert!(cfg.validate(false).is_ok());
        cfg.dir = "rel".into();
        assert!(cfg.validate(true).is_err());
        let c = ganesha_config(
            Path::new("/srv/x"),
            "10.77.0.2".parse().unwrap(),
            Path::new("/w"),
            NfsVersions::Both,
        );
        assert!(c.contains("Path = \"/srv/x\"") && c.contains("Bind_addr = 10.77.0.2"));
        assert_eq!(c.matches("Protocols = 3, 4;").count(), 2, "{c}");
        let c4 = ganesha_config(
            Path::new("/srv/x"),
            "10.77.0.2".parse().unwrap(),
            Path::new("/w"),
            NfsVersions::V4,
        );
        assert_eq!(c4.matches("Protocols = 4;").count(), 2, "{c4}");
        for (s, v) in [
            ("3,4", NfsVersions::Both),
            ("4, 3", NfsVersions::Both),
            ("3", NfsVersions::V3),
            ("4", NfsVersions::V4),
        ] {
            assert_eq!(s.parse::<NfsVersions>().unwrap(), v, "{s}");
            assert_eq!(v.to_string().parse::<NfsVersions>().unwrap(), v);
        }
        for bad in ["", "2", "4.1", "3;4"] {
            assert!(bad.parse::<NfsVersions>().is_err(), "{bad}");
        }
        assert!(pids_in_netns("no-such-netns-here").is_empty());
    }
}
