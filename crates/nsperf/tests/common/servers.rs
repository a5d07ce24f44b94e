//! The file servers of the `io`, `doctor`, `trace` and `run` tests, one copy each: nsperf's
//! embedded NFS server on loopback, and Samba's smbd in a lab site (`nsperf lab serve`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use super::scratch::Scratch;
use super::{KillOnDrop, nsperf, run};

/// `nsperf lab nfsd DIR EXTRA` on loopback, killed on drop; returns its URL (from its
/// "ready URL" line).
pub fn embedded_nfs(dir: impl AsRef<Path>, extra: &[&str]) -> (KillOnDrop, String) {
    let mut c = nsperf(["lab", "nfsd"]);
    c.arg(dir.as_ref())
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("ready ")
        .expect("ready line")
        .to_string();
    (KillOnDrop(child), url)
}

/// The port of an `nfs://HOST:PORT/…` URL.
pub fn url_port(url: &str) -> u16 {
    url.trim_start_matches("nfs://")
        .split(['/', ':'])
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("port in the URL")
}

/// `nsperf lab serve LAB SITE nfs EXPORT [--server SERVER]` (the embedded server when
/// `server` is None): the server's URL as `lab serve` printed it
/// (`nfs://SITE-ADDRESS/CANONICAL-EXPORT`, no version).
pub fn serve_nfs_in_site(lab: &str, site: &str, export: &Path, server: Option<&str>) -> String {
    let mut a = vec!["lab", "serve", lab, site, "nfs", export.to_str().unwrap()];
    if let Some(s) = server {
        a.extend(["--server", s]);
    }
    let r = run(&a).ok();
    r.stdout
        .split_whitespace()
        .find(|w| w.starts_with("nfs://"))
        .unwrap_or_else(|| panic!("no URL from lab serve: {}", r.stdout))
        .to_string()
}

/// smbd serving a directory in site b (10.77.0.2) of a lab with sites a and b.
pub struct Smbd {
    /// `smb://10.77.0.2/SHARE`.
    pub url: String,
    /// The share's name.
    pub share: String,
    /// The credentials file `lab serve` wrote.
    pub creds: String,
}

/// `nsperf lab serve LAB b smb DIR`: smbd in site b of `lab` sharing `dir`; the URL it
/// printed is checked and the credentials file it printed is read from its output.
pub fn serve_smb(lab: &str, dir: &Scratch) -> Smbd {
    let r = run(&["lab", "serve", lab, "b", "smb", dir.path()]).ok();
    let share = nsperf_lab::samba::share_name(&dir.0);
    let url = format!("smb://10.77.0.2/{share}");
    assert!(r.stdout.contains(&url), "{}", r.stdout);
    let creds = creds_of(&r.stdout);
    Smbd { url, share, creds }
}

/// The credentials file `nsperf lab serve … smb` printed.
pub fn creds_of(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("credentials: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no credentials line: {stdout}"))
        .to_string()
}

/// Every workload of `nsperf io run`, as the NFS and SMB tests run them all.
pub const WORKLOADS: [&str; 14] = [
    "seqwrite",
    "rewrite",
    "seqread",
    "reread",
    "randread",
    "randwrite",
    "randrw",
    "bkwdread",
    "strideread",
    "recrewrite",
    "charwrite",
    "charread",
    "seeks",
    "meta",
];

/// FNV-1a 64 of `data`: the checksum the NFS and SMB tests compare the server's copy with.
pub fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}
