//! Files left by nsperf runs that died without cleaning up (SIGKILL, a crash, a power cut, a
//! server that went away mid-run): `.nsperf-OWNER-…` entries of a target directory whose run
//! is over. Every run looks for them before it starts — in a local directory and through
//! `nfs://` and `smb://` alike ([`sweep`] over a [`Listing`]) — names them, and removes those
//! it can prove dead.
//!
//! The owner in a name is `PID` (a local directory's files) or `PID@HOST` (files made through
//! NFS or SMB), where HOST is 12 hex digits of a hash of this boot's id and this process's PID
//! namespace ([`host_tag`]). A file is then:
//! - **dead**, removed by any run: its HOST is ours and no process has its PID here (or, in a
//!   local directory, the process with that PID started after the file last changed: the PID
//!   was reused). The same boot and PID namespace make the PID check certain.
//! - **unknown**, named and left unless `--clean`: another HOST's (another machine, a
//!   container, or this machine before a reboot), a name without HOST seen through NFS or SMB,
//!   or a name without HOST in a local directory whose PID does not run here (a run in another
//!   PID namespace sharing the directory looks dead from here).
//! - **running**: ours, or a live process's; never touched.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nsperf_core::units::Bytes;

use crate::error::IoError;
use crate::target::FILE_PREFIX;

/// Whose an nsperf name is: the PID, and the host tag when the name has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The PID of the run that made it.
    pub pid: u32,
    /// [`host_tag`] of that run's host, for names made through NFS or SMB.
    pub host: Option<String>,
}

/// Hex digits of a host tag.
const TAG_LEN: usize = 12;

impl Owner {
    /// The owner in a name `.nsperf-PID-…` or `.nsperf-PID@HOST-…`; `None` for any other name.
    pub fn of(name: &str) -> Option<Owner> {
        let rest = name.strip_prefix(FILE_PREFIX)?;
        let (owner, tail) = rest.split_once('-')?;
        let (digits, host) = match owner.split_once('@') {
            Some((d, h)) => (d, Some(h)),
            None => (owner, None),
        };
        if digits.is_empty() || tail.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if host.is_some_and(|h| {
            h.len() != TAG_LEN || !h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        }) {
            return None;
        }
        Some(Owner {
            pid: digits.parse().ok()?,
            host: host.map(str::to_string),
        })
    }
}

/// This host's tag: 12 hex digits of a hash (FNV-1a) of the boot id and of this process's
/// PID namespace — the same for every nsperf run of this boot in this PID namespace (lab
/// sites included: they share it), different on another machine, in a container, or after
/// a reboot. `None` when either cannot be read.
pub fn host_tag() -> Option<&'static str> {
    static TAG: OnceLock<Option<String>> = OnceLock::new();
    TAG.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in boot
            .trim()
            .bytes()
            .chain([0])
            .chain(ns.as_os_str().as_encoded_bytes().iter().copied())
        {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        Some(format!("{:012x}", h >> 16))
    })
    .as_deref()
}

/// What a run made through NFS or SMB puts after `.nsperf-`: `PID@HOST` (`PID` when this
/// host has no tag).
pub fn remote_owner() -> String {
    let pid = std::process::id();
    match host_tag() {
        Some(t) => format!("{pid}@{t}"),
        None => pid.to_string(),
    }
}

/// One `.nsperf-*` entry of a directory, as a [`Listing`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// True for a directory (the metadata test's).
    pub is_dir: bool,
    /// A file's size.
    pub bytes: u64,
    /// When it last changed, in seconds since the epoch on this host's clock (a local
    /// directory only: a server's clock is not comparable with a process's start time).
    pub changed_s: Option<u64>,
}

/// A directory stale files are looked for in: local, or through NFS or SMB.
pub trait Listing {
    /// The directory, for messages (a path or a URL).
    fn dir(&self) -> String;
    /// True for a local directory, where a PID in a name without host tag can be checked.
    fn local(&self) -> bool;
    /// Its entries whose name starts with `.nsperf-`.
    fn entries(&mut self) -> Result<Vec<Entry>, IoError>;
    /// The bytes of the files directly in directory entry `name`, when they can be counted.
    fn dir_bytes(&mut self, name: &str) -> Option<u64>;
    /// Removes an entry (a directory with the files in it); one already gone is removed.
    fn remove(&mut self, e: &Entry) -> Result<(), IoError>;
}

/// Whose a stale entry is, as far as this host can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// This host's (same boot, same PID namespace), its process gone: certainly over.
    Dead,
    /// A local name without host tag whose PID does not run here.
    NotRunningHere,
    /// Another host's tag (another machine, a container, or before a reboot).
    OtherHost,
    /// A name without host tag seen through NFS or SMB.
    UnknownHost,
}

impl std::fmt::Display for Whose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Whose::Dead => "dead",
            Whose::NotRunningHere => "not running here",
            Whose::OtherHost => "of another host",
            Whose::UnknownHost => "of an unknown host",
        })
    }
}

/// `None` while the run that made an entry can still be going.
fn judge(o: &Owner, changed_s: Option<u64>, local: bool) -> Option<Whose> {
    match (&o.host, host_tag()) {
        (Some(h), Some(t)) if h == t => {}
        (Some(_), _) => return Some(Whose::OtherHost),
        (None, _) if !local => return Some(Whose::UnknownHost),
        (None, _) => {}
    }
    if o.pid == std::process::id() || !pid_over(o.pid, changed_s) {
        return None;
    }
    Some(if o.host.is_some() {
        Whose::Dead
    } else {
        Whose::NotRunningHere
    })
}

/// One stale file or directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleFile {
    /// Its name in the directory.
    pub name: String,
    /// The PID in its name.
    pub pid: u32,
    /// Whose it is: [`Whose::Dead`] when its run is certainly over, otherwise why nsperf
    /// cannot tell.
    pub whose: Whose,
    /// Its size (a directory: the sum of the files directly in it; `None`: not counted).
    pub bytes: Option<u64>,
    /// True when it was removed.
    pub removed: bool,
}

/// What looking for stale files in a directory found, and what became of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sweep {
    /// The directory (a path or a URL).
    pub dir: String,
    /// The stale files, by name.
    pub files: Vec<StaleFile>,
    /// Why the directory could not be listed, when it could not.
    pub unlisted: Option<String>,
}

impl Sweep {
    /// Bytes held by the stale files left in place.
    pub fn left_bytes(&self) -> u64 {
        self.files
            .iter()
            .filter(|f| !f.removed)
            .filter_map(|f| f.bytes)
            .sum()
    }
}

/// Looks for stale nsperf files in `l`: removes the dead ones (and with `clean` the unknown
/// ones too) and returns them all. With `clean` a removal that fails is the error; without
/// it, a dead file that cannot be removed is named as left. A directory that cannot be
/// listed is not an error (the run that follows says what is wrong with it).
pub fn sweep<L: Listing + ?Sized>(l: &mut L, clean: bool) -> Result<Sweep, IoError> {
    let mut out = Sweep {
        dir: l.dir(),
        ..Sweep::default()
    };
    let entries = match l.entries() {
        Ok(e) => e,
        Err(IoError::Interrupted) => return Err(IoError::Interrupted),
        Err(e) => {
            out.unlisted = Some(e.to_string());
            return Ok(out);
        }
    };
    let local = l.local();
    for e in entries {
        let Some(o) = Owner::of(&e.name) else {
            continue;
        };
        let Some(whose) = judge(&o, e.changed_s, local) else {
            continue;
        };
        let dead = whose == Whose::Dead;
        let bytes = if e.is_dir {
            l.dir_bytes(&e.name)
        } else {
            Some(e.bytes)
        };
        let mut f = StaleFile {
            name: e.name.clone(),
            pid: o.pid,
            whose,
            bytes,
            removed: false,
        };
        if dead || clean {
            match l.remove(&e) {
                Ok(()) => f.removed = true,
                Err(err) if clean || matches!(err, IoError::Interrupted) => return Err(err),
                Err(_) => {}
            }
        }
        out.files.push(f);
    }
    out.files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// True when the process `pid` is not running here, or (with `changed_s`, the file's last
/// change on this host's clock) started after the file last changed: the PID was reused.
fn pid_over(pid: u32, changed_s: Option<u64>) -> bool {
    let Ok(pid_t) = libc::pid_t::try_from(pid) else {
        return true;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let alive = unsafe { libc::kill(pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !alive {
        return true;
    }
    let (state, start) = process_state(pid).unzip();
    // A killed process not reaped yet (zombie, or dead) holds its PID but runs no more.
    if matches!(state, Some('Z' | 'X' | 'x')) {
        return true;
    }
    match (changed_s, boot_time_s(), start) {
        (Some(changed), Some(boot), Some(ticks)) => {
            // SAFETY: sysconf has no preconditions.
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
            boot + ticks / hz > changed + 1
        }
        _ => false,
    }
}

/// Seconds since the epoch at boot (`btime` of /proc/stat).
fn boot_time_s() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The state letter of a process and its start time in clock ticks since boot (fields 3
/// and 22 of /proc/PID/stat).
fn process_state(pid: u32) -> Option<(char, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces.
    let mut after = s[s.rfind(')')? + 1..].split_whitespace();
    let state = after.next()?.chars().next()?;
    Some((state, after.nth(18)?.parse().ok()?))
}

/// A local directory.
pub struct LocalDir<'a>(pub &'a Path);

impl LocalDir<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Listing for LocalDir<'_> {
    fn dir(&self) -> String {
        self.0.display().to_string()
    }

    fn local(&self) -> bool {
        true
    }

    fn entries(&mut self) -> Result<Vec<Entry>, IoError> {
        use std::os::unix::fs::MetadataExt;
        let rd = std::fs::read_dir(self.0).map_err(|e| IoError::os("read_dir", self.0, e))?;
        Ok(rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                if !name.starts_with(FILE_PREFIX) {
                    return None;
                }
                let md = e.path().symlink_metadata().ok()?;
                Some(Entry {
                    name,
                    is_dir: md.is_dir(),
                    bytes: md.len(),
                    changed_s: Some(md.ctime().max(0) as u64),
                })
            })
            .collect())
    }

    fn dir_bytes(&mut self, name: &str) -> Option<u64> {
        let d = std::fs::read_dir(self.path(name)).ok()?;
        Some(
            d.filter_map(|x| x.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum(),
        )
    }

    fn remove(&mut self, e: &Entry) -> Result<(), IoError> {
        let p = self.path(&e.name);
        let r = if e.is_dir {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        match r {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(IoError::os("remove stale file", &p, err))
            }
            _ => Ok(()),
        }
    }
}

/// One line naming `files` of `dir` (at most five by name), with their total size.
pub fn describe(dir: &str, files: &[&StaleFile]) -> String {
    let known: u64 = files.iter().filter_map(|f| f.bytes).sum();
    let total = if files.iter().any(|f| f.bytes.is_none()) {
        format!("at least {}", Bytes(known))
    } else {
        Bytes(known).to_string()
    };
    let mut names: Vec<String> = files
        .iter()
        .take(5)
        .map(|f| {
            let size = f
                .bytes
                .map_or("a directory".to_string(), |b| Bytes(b).to_string());
            format!("{} (pid {} {}, {size})", f.name, f.pid, f.whose)
        })
        .collect();
    if files.len() > 5 {
        names.push(format!("and {} more", files.len() - 5));
    }
    format!(
        "{} stale nsperf file{} in {dir} ({total}): {}",
        files.len(),
        if files.len() == 1 { "" } else { "s" },
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let o = |pid, host: Option<&str>| {
            Some(Owner {
                pid,
                host: host.map(str::to_string),
            })
        };
        assert_eq!(Owner::of(".nsperf-123-seqread-1"), o(123, None));
        assert_eq!(
            Owner::of(".nsperf-123@0a1b2c3d4e5f-seqread-1"),
            o(123, Some("0a1b2c3d4e5f"))
        );
        assert_eq!(Owner::of(".nsperf-123-"), None);
        assert_eq!(Owner::of(".nsperf-cache-test-5"), None);
        assert_eq!(Owner::of(".nsperf-12a-x"), None);
        assert_eq!(Owner::of("nsperf-123-x"), None);
        assert_eq!(Owner::of(".nsperf-99999999999999-x"), None);
        assert_eq!(Owner::of(".nsperf-1@0A1B2C3D4E5F-x"), None);
        assert_eq!(Owner::of(".nsperf-1@0a1b-x"), None);
        assert_eq!(Owner::of(".nsperf-@0a1b2c3d4e5f-x"), None);
        // This host's own names parse back to this process.
        let me = Owner::of(&format!("{FILE_PREFIX}{}-seqwrite-1", remote_owner())).unwrap();
        assert_eq!(me.pid, std::process::id());
        assert_eq!(me.host.as_deref(), host_tag());
        assert!(host_tag().is_some_and(|t| t.len() == TAG_LEN));
    }

    #[test]
    fn dead_pid_is_stale_live_one_is_not() {
        let dir = std::env::temp_dir().join(format!("nsperf-stale-t-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A child that has exited: its PID is free (or reused by a later process).
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let dead = c.id();
        c.wait().unwrap();
        let tag = host_tag().unwrap();
        std::fs::write(dir.join(format!(".nsperf-{dead}-seqread-1")), b"abc").unwrap();
        std::fs::create_dir(dir.join(format!(".nsperf-{dead}-meta-2"))).unwrap();
        std::fs::write(dir.join(format!(".nsperf-{dead}-meta-2/f0")), b"12345").unwrap();
        // This host's, process gone: dead, removed without being asked.
        let mine = format!(".nsperf-{dead}@{tag}-seqwrite-3");
        std::fs::write(dir.join(&mine), b"1234567").unwrap();
        // Another host's: unknown, named and left.
        let other = format!(".nsperf-{dead}@{}-seqwrite-4", "0".repeat(TAG_LEN));
        std::fs::write(dir.join(&other), b"12").unwrap();
        // Our own file, a live process's file (local and tagged), and a user file are never
        // stale.
        let me = std::process::id();
        std::fs::write(dir.join(format!(".nsperf-{me}-x-1")), b"").unwrap();
        std::fs::write(dir.join(format!(".nsperf-{me}@{tag}-x-1")), b"").unwrap();
        std::fs::write(dir.join(".nsperf-1-init-1"), b"").unwrap();
        std::fs::write(dir.join(format!(".nsperf-1@{tag}-init-1")), b"").unwrap();
        std::fs::write(dir.join("user.dat"), b"keep").unwrap();
        let s = sweep(&mut LocalDir(&dir), false).unwrap();
        let got: Vec<(&str, Whose, Option<u64>, bool)> = s
            .files
            .iter()
            .map(|f| (f.name.as_str(), f.whose, f.bytes, f.removed))
            .collect();
        let meta = format!(".nsperf-{dead}-meta-2");
        let read = format!(".nsperf-{dead}-seqread-1");
        assert_eq!(
            got,
            [
                (meta.as_str(), Whose::NotRunningHere, Some(5), false),
                (read.as_str(), Whose::NotRunningHere, Some(3), false),
                (other.as_str(), Whose::OtherHost, Some(2), false),
                (mine.as_str(), Whose::Dead, Some(7), true),
            ],
            "{s:?}"
        );
        assert!(!dir.join(&mine).exists() && dir.join(&other).exists());
        assert_eq!(s.left_bytes(), 10);
        let left: Vec<&StaleFile> = s.files.iter().filter(|f| !f.removed).collect();
        let line = describe(&s.dir, &left);
        assert!(line.starts_with("3 stale nsperf files in "), "{line}");
        assert!(
            line.contains("(10 B)") && line.contains("of another host"),
            "{line}"
        );
        // --clean removes the rest, and nothing of a live run or the user's.
        let s = sweep(&mut LocalDir(&dir), true).unwrap();
        assert!(
            s.files.len() == 3 && s.files.iter().all(|f| f.removed),
            "{s:?}"
        );
        assert!(sweep(&mut LocalDir(&dir), false).unwrap().files.is_empty());
        assert!(dir.join(".nsperf-1-init-1").exists() && dir.join("user.dat").exists());
        assert!(dir.join(format!(".nsperf-1@{tag}-init-1")).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_killed_process_not_reaped_yet_is_dead() {
        let dir = std::env::temp_dir().join(format!("nsperf-stale-z-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A child that exited and is not waited for: a zombie holding its PID.
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let t0 = std::time::Instant::now();
        while process_state(c.id()).is_some_and(|(st, _)| st != 'Z') {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let name = format!(".nsperf-{}@{}-seqwrite-1", c.id(), host_tag().unwrap());
        std::fs::write(dir.join(&name), b"x").unwrap();
        let s = sweep(&mut LocalDir(&dir), false).unwrap();
        c.wait().unwrap();
        assert_eq!(s.files.len(), 1, "{s:?}");
        assert!(
            s.files[0].removed && s.files[0].whose == Whose::Dead,
            "{s:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unreadable_directory_is_named_not_an_error() {
        let s = sweep(&mut LocalDir(Path::new("/nonexistent-nsperf-dir")), true).unwrap();
        assert!(s.files.is_empty());
        assert!(s.unlisted.is_some_and(|w| w.contains("read_dir")));
    }
}
