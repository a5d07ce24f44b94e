//! Samba's smbd in a lab site (`nsperf lab serve LAB SITE smb DIR`): a minimal smb.conf in
//! the service's own directory (private, lock, state, cache and pid directories, log,
//! passdb), one share of DIR, a user `nsperf` with a password made for this service (mapped
//! to root, so no account is added to the system), and guest access.
//!
//! The share's name is DIR's last component (letters, digits, `-`, `_`, `.`; `share` when
//! none is left). The credentials are written to `credentials` beside smb.conf, in
//! smbclient's authentication-file format (mode 0600), for `nsperf io --credentials`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::error::{LabError, Result};
use crate::service::spawn_child;

/// The SMB user every lab server has.
pub const USER: &str = "nsperf";

/// What a started smbd serves.
#[derive(Debug)]
pub struct SambaServer {
    /// The share's name.
    pub share: String,
    /// The credentials file of [`USER`].
    pub credentials: PathBuf,
    /// The smbd process (dies with the caller).
    pub child: Child,
}

/// The share name for `dir`.
pub fn share_name(dir: &Path) -> String {
    let s: String = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(64)
        .collect();
    // `[global]` is smb.conf's own section; `$` (IPC$) is filtered out above.
    if s.is_empty() || s.eq_ignore_ascii_case("global") {
        "share".into()
    } else {
        s
    }
}

/// smb.conf for a standalone server on port 445 sharing `dir` as `share` (refusing writes
/// when `read_only`), with every directory it writes under `work`.
pub fn smb_config(dir: &Path, share: &str, work: &Path, read_only: bool) -> String {
    let (d, w) = (dir.display(), work.display());
    let ro = if read_only { "yes" } else { "no" };
    format!(
        r#"[global]
  server role = standalone server
  workgroup = NSPERF
  netbios name = NSPERF-LAB
  # The site's namespace has only its lab address (a point-to-point TUN link, which
  # Samba's interface list does not take) and loopback: listen on all of them.
  bind interfaces only = no
  smb ports = 445
  disable netbios = yes
  server min protocol = SMB2_02
  private dir = {w}/private
  lock directory = {w}/lock
  state directory = {w}/state
  cache directory = {w}/cache
  pid directory = {w}
  ncalrpc dir = {w}/ncalrpc
  log file = {w}/smbd.log
  max log size = 10000
  logging = file
  passdb backend = tdbsam:{w}/private/passdb.tdb
  username map = {w}/users.map
  map to guest = bad user
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
[{share}]
  path = {d}
  read only = {ro}
  guest ok = yes
  force user = root
"#
    )
}

fn random_password() -> Result<String> {
    let mut b = [0u8; 12];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").map_err(|e| LabError::io("/dev/urandom", e))?,
        &mut b,
    )
    .map_err(|e| LabError::io("/dev/urandom", e))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Writes the configuration, the user and its credentials file under `work`, then starts
/// smbd in the foreground in the current (site) namespace.
pub fn start_samba(dir: &Path, work: &Path, read_only: bool) -> Result<SambaServer> {
    for d in ["private", "lock", "state", "cache", "ncalrpc"] {
        std::fs::create_dir_all(work.join(d))
            .map_err(|e| LabError::io(format!("creating {}", work.join(d).display()), e))?;
    }
    let share = share_name(dir);
    let conf = work.join("smb.conf");
    std::fs::write(&conf, smb_config(dir, &share, work, read_only))
        .map_err(|e| LabError::io("writing smb.conf", e))?;
    // SMB user nsperf is the system's root inside the lab: nothing is added to /etc/passwd.
    std::fs::write(work.join("users.map"), format!("root = {USER}\n"))
        .map_err(|e| LabError::io("writing users.map", e))?;
    let password = random_password()?;
    let log = work.join("server.log");
    let mut p = Command::new("pdbedit");
    p.arg("-s").arg(&conf).args(["-a", "-u", "root", "-t"]);
    p.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = p
        .spawn()
        .map_err(|e| LabError::io("starting pdbedit (is samba installed?)", e))?;
    if let Some(mut i) = child.stdin.take() {
        let _ = write!(i, "{password}\n{password}\n");
    }
    let out = child
        .wait_with_output()
        .map_err(|e| LabError::io("pdbedit", e))?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr);
        return Err(LabError::Usage(format!(
            "pdbedit could not add the lab user: {}",
            msg.lines().last().unwrap_or("no message").trim()
        )));
    }
    let credentials = work.join("credentials");
    write_private(
        &credentials,
        &format!("username = {USER}\npassword = {password}\ndomain = NSPERF\n"),
    )?;
    let mut smbd = Command::new("smbd");
    smbd.args([
        "--foreground",
        "--no-process-group",
        "--debug-stdout",
        "-d",
        "1",
    ])
    .arg("-s")
    .arg(&conf);
    let child = spawn_child(&mut smbd, &log)?;
    Ok(SambaServer {
        share,
        credentials,
        child,
    })
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| LabError::io(format!("writing {}", path.display()), e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| LabError::io(format!("writing {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_and_share_name() {
        assert_eq!(share_name(Path::new("/srv/lab data!")), "labdata");
        assert_eq!(share_name(Path::new("/")), "share");
        assert_eq!(share_name(Path::new("/x/Global")), "share");
        assert_eq!(share_name(Path::new("/x/IPC$")), "IPC");
        let c = smb_config(Path::new("/srv/x"), "x", Path::new("/w"), false);
        assert!(c.contains("[x]\n  path = /srv/x\n  read only = no"));
        assert!(c.contains("private dir = /w/private"));
    }
}
