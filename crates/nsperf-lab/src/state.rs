//! Lab state on disk, under `/run/nsperf/labs/NAME/` (tmpfs: gone after a reboot, like the
//! namespaces it describes). `state.json` is written before anything is created, so
//! `lab down` can remove a lab whose `lab up` or emulator was killed at any point.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

pub use nsperf_core::process::start_ticks as process_start_ticks;
use nsperf_core::process::{ProcessId, start_ticks};
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
    /// The process the lab belongs to (a plan run, a script, the shell that ran `lab up`):
    /// while it lives, `lab down` by anyone else refuses without `--force`. `None` for labs
    /// recorded before owners were.
    #[serde(default)]
    pub owner: Option<ProcessId>,
    /// How the sites are joined (defaults filled in).
    #[serde(default)]
    pub topology: crate::topology::Topology,
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
            (Some(pid), Some(ticks)) => start_ticks(pid) == Some(ticks),
            _ => false,
        }
    }

    /// The lab's owner while it is alive (`None` when it has exited or was never recorded).
    pub fn live_owner(&self) -> Option<ProcessId> {
        self.owner.filter(ProcessId::is_alive)
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)
        .map_err(|e| LabError::io(format!("writing {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| LabError::io(format!("writing {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_is_optional_in_old_state_files() {
        let old = r#"{"name":"t","sites":[],"mtu":1500,"created_unix_ns":1,
            "emulator_pid":null,"emulator_start_ticks":null}"#;
        let s: LabState = serde_json::from_str(old).unwrap();
        assert_eq!(s.owner, None);
        assert_eq!(s.live_owner(), None);
        let mut s = s;
        s.owner = Some(ProcessId::current());
        assert_eq!(s.live_owner(), Some(ProcessId::current()));
    }
}
