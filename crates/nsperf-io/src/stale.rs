//! Files left by nsperf runs that died without cleaning up (SIGKILL, a crash, a power cut):
//! `.nsperf-PID-…` entries of a directory whose process is gone. A run names them before it
//! starts and removes them only when asked (`--clean`).
//!
//! A file is stale when its PID is not running here, or when the process with that PID
//! started after the file last changed (so it cannot be the one that created it: the PID was
//! reused). A run in another PID namespace sharing the directory looks dead from here, which
//! is why nothing is removed without `--clean`.

use std::path::{Path, PathBuf};

use nsperf_core::units::Bytes;
use serde::Serialize;

use crate::target::FILE_PREFIX;

/// One stale file or directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaleFile {
    /// Its path.
    pub path: PathBuf,
    /// The PID in its name (a process that no longer runs).
    pub pid: u32,
    /// Its size (a directory: the sum of the files directly in it).
    pub bytes: u64,
}

/// The PID in a name `.nsperf-PID-…`, or `None` for any other name.
pub fn pid_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(FILE_PREFIX)?;
    let (digits, tail) = rest.split_once('-')?;
    if digits.is_empty() || tail.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The stale nsperf files of `dir` (none when it cannot be read).
pub fn scan(dir: &Path) -> Vec<StaleFile> {
    let me = std::process::id();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let boot = boot_time_s();
    let mut out: Vec<StaleFile> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let pid = pid_of(e.file_name().to_str()?)?;
            let md = e.path().symlink_metadata().ok()?;
            if pid == me || !is_stale(pid, &md, boot) {
                return None;
            }
            let bytes = if md.is_dir() {
                std::fs::read_dir(e.path())
                    .map(|d| {
                        d.filter_map(|x| x.ok()?.metadata().ok())
                            .map(|m| m.len())
                            .sum()
                    })
                    .unwrap_or(0)
            } else {
                md.len()
            };
            Some(StaleFile {
                path: e.path(),
                pid,
                bytes,
            })
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn is_stale(pid: u32, md: &std::fs::Metadata, boot: Option<u64>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(pid_t) = libc::pid_t::try_from(pid) else {
        return true;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let alive = unsafe { libc::kill(pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !alive {
        return true;
    }
    // Alive: stale only if that process started after the file last changed (PID reuse).
    let changed = md.ctime().max(0) as u64;
    match (boot, process_start_ticks(pid)) {
        (Some(boot), Some(ticks)) => {
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

/// Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat).
fn process_start_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces.
    let after = &s[s.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Removes stale files; returns the ones that could not be removed, with why.
pub fn remove(files: &[StaleFile]) -> Vec<(PathBuf, std::io::Error)> {
    files
        .iter()
        .filter_map(|f| {
            let md = f.path.symlink_metadata().ok()?;
            let r = if md.is_dir() {
                std::fs::remove_dir_all(&f.path)
            } else {
                std::fs::remove_file(&f.path)
            };
            r.err().map(|e| (f.path.clone(), e))
        })
        .collect()
}

/// One line naming the stale files (at most five by name).
pub fn describe(dir: &Path, files: &[StaleFile]) -> String {
    let total: u64 = files.iter().map(|f| f.bytes).sum();
    let mut names: Vec<String> = files
        .iter()
        .take(5)
        .map(|f| {
            format!(
                "{} (pid {}, {})",
                f.path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                f.pid,
                Bytes(f.bytes)
            )
        })
        .collect();
    if files.len() > 5 {
        names.push(format!("and {} more", files.len() - 5));
    }
    format!(
        "{} stale nsperf file{} of dead processes in {} ({}): {}",
        files.len(),
        if files.len() == 1 { "" } else { "s" },
        dir.display(),
        Bytes(total),
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(pid_of(".nsperf-123-seqread-1"), Some(123));
        assert_eq!(pid_of(".nsperf-123-"), None);
        assert_eq!(pid_of(".nsperf-cache-test-5"), None);
        assert_eq!(pid_of(".nsperf-12a-x"), None);
        assert_eq!(pid_of("nsperf-123-x"), None);
        assert_eq!(pid_of(".nsperf-99999999999999-x"), None);
    }

    #[test]
    fn dead_pid_is_stale_live_one_is_not() {
        let dir = std::env::temp_dir().join(format!("nsperf-stale-t-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A child that has exited: its PID is free (or reused by a later process).
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let dead = c.id();
        c.wait().unwrap();
        std::fs::write(dir.join(format!(".nsperf-{dead}-seqread-1")), b"abc").unwrap();
        std::fs::create_dir(dir.join(format!(".nsperf-{dead}-meta-2"))).unwrap();
        std::fs::write(dir.join(format!(".nsperf-{dead}-meta-2/f0")), b"12345").unwrap();
        // Our own file, a live process's file, and a user file are never stale.
        let me = std::process::id();
        std::fs::write(dir.join(format!(".nsperf-{me}-x-1")), b"").unwrap();
        std::fs::write(dir.join(".nsperf-1-init-1"), b"").unwrap();
        std::fs::write(dir.join("user.dat"), b"keep").unwrap();
        let s = scan(&dir);
        let pids: Vec<u32> = s.iter().map(|f| f.pid).collect();
        assert_eq!(pids, vec![dead, dead], "{s:?}");
        assert_eq!(s.iter().map(|f| f.bytes).sum::<u64>(), 8);
        let line = describe(&dir, &s);
        assert!(line.starts_with("2 stale nsperf files"), "{line}");
        assert!(remove(&s).is_empty());
        assert!(scan(&dir).is_empty());
        assert!(dir.join(".nsperf-1-init-1").exists() && dir.join("user.dat").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
