//! Lab state on disk, under `/run/nsperf/labs/NAME/` (tmpfs: gone after a reboot, like the
//! namespaces it describes). `state.json` is written before anything is created, so
//! `lab down` can remove a lab whose `lab up` or emulator was killed at any point.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{LabError, Result};

/// Where labs are recorded.
pub const LABS_DIR: &str = "/run/nsperf/labs";

/// One site of a lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiteState {
    /// Site name (`a`, `b`, `c1`, …).
    pub name: String,
    /// Network namespace name (`nsp-LAB-SITE`).
    pub netns: String,
    /// The site's IPv4 address inside its namespace.
    pub addr: Ipv4Addr,
}

/// What `lab up` recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    /// Lab name.
    pub name: String,
    /// Sites in `--sites` order (clients last).
    pub sites: Vec<SiteState>,
    /// MTU of every site's link device.
    pub mtu: u32,
    /// Wall-clock time of `lab up`, ns since the Unix epoch.
    pub created_unix_ns: u64,
    /// Emulator process id, once started.
    pub emulator_pid: Option<u32>,
    /// Its start time in clock ticks since boot (`/proc/PID/stat` field 22), so that a
    /// recycled pid is never signalled.
    pub emulator_start_ticks: Option<u64>,
}

/// The directory of lab `name`.
pub fn lab_dir(name: &str) -> PathBuf {
    Path::new(LABS_DIR).join(name)
}

impl LabState {
    /// Path of this lab's state file.
    pub fn path(name: &str) -> PathBuf {
        lab_dir(name).join("state.json")
    }

    /// Reads the state of lab `name`.
    pub fn load(name: &str) -> Result<LabState> {
        let p = Self::path(name);
        let bytes = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(LabError::NotFound(name.to_string()));
            }
            Err(e) => return Err(LabError::io(format!("reading {}", p.display()), e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            LabError::io(
                format!("reading {}", p.display()),
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })
    }

    /// Writes the state atomically (temporary file, then rename).
    pub fn save(&self) -> Result<()> {
        let dir = lab_dir(&self.name);
        std::fs::create_dir_all(&dir)
            .map_err(|e| LabError::io(format!("creating {}", dir.display()), e))?;
        write_atomic(
            &Self::path(&self.name),
            &serde_json::to_vec_pretty(self).unwrap_or_default(),
        )
    }

    /// Names of every recorded lab.
    pub fn list_names() -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(LABS_DIR)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.path().is_dir())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// True when the recorded emulator process is alive (and is the one recorded).
    pub fn emulator_running(&self) -> bool {
        match (self.emulator_pid, self.emulator_start_ticks) {
            (Some(pid), Some(ticks)) => process_start_ticks(pid) == Some(ticks),
            _ => false,
        }
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)
        .map_err(|e| LabError::io(format!("writing {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| LabError::io(format!("writing {}", path.display()), e))
}

/// Start time of a live (not zombie) process in clock ticks since boot.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); start time is field 22.
    if fields.first() == Some(&"Z") || fields.first() == Some(&"X") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_ticks_are_readable() {
        let me = std::process::id();
        assert!(process_start_ticks(me).is_some());
        assert_eq!(process_start_ticks(u32::MAX), None);
    }
}
