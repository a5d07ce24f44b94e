//! Processes named so that a recycled pid is never mistaken for the one recorded: a pid
//! together with its start time (`/proc/PID/stat` field 22, clock ticks since boot). Used by
//! everything that records an owner or a helper process on disk (labs, experiments, stale
//! files) and later decides whether it still runs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The binary of the calling process, for starting more of itself directly
/// (`Command::new(running_binary()?)`).
///
/// A binary replaced or removed while it runs (a rebuild; another host's upload of the same
/// cached file) reads from `current_exe` as "PATH (deleted)", a path that no longer exists:
/// then `/proc/self/exe`, the kernel's link to the running image, which the new process
/// resolves as its own parent's image at `execve` and so starts the very same program. That
/// fallback is only right for a direct start, not as an argument handed to another program
/// (`ip netns exec … /proc/self/exe` would start `ip`).
pub fn running_binary() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(if exe.exists() {
        exe
    } else {
        PathBuf::from("/proc/self/exe")
    })
}

/// One process, identified by pid and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcessId {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks since boot.
    pub start_ticks: u64,
}

impl ProcessId {
    /// The live process `pid`, or `None` when there is none (or it is a zombie).
    pub fn of(pid: u32) -> Option<ProcessId> {
        start_ticks(pid).map(|start_ticks| ProcessId { pid, start_ticks })
    }

    /// The calling process.
    pub fn current() -> ProcessId {
        let pid = std::process::id();
        ProcessId {
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
        }
    }

    /// The parent of the calling process (`None` once the parent is gone).
    pub fn parent() -> Option<ProcessId> {
        // SAFETY: getppid has no preconditions.
        let ppid = unsafe { libc::getppid() };
        u32::try_from(ppid).ok().and_then(ProcessId::of)
    }

    /// True while this very process runs (not a later process that got the same pid).
    pub fn is_alive(&self) -> bool {
        start_ticks(self.pid) == Some(self.start_ticks)
    }

    /// The process's command name (`/proc/PID/comm`), for messages.
    pub fn command_name(&self) -> Option<String> {
        let c = std::fs::read_to_string(format!("/proc/{}/comm", self.pid)).ok()?;
        Some(c.trim().to_string())
    }
}

impl std::fmt::Display for ProcessId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.command_name() {
            Some(c) if self.is_alive() => write!(f, "pid {} ({c})", self.pid),
            _ => write!(f, "pid {}", self.pid),
        }
    }
}

/// Start time of a live (not zombie) process in clock ticks since boot.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // rest starts at field 3 (state); the start time is field 22.
    if matches!(fields.next(), Some("Z" | "X") | None) {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// The calling process and its ancestors up to init, nearest first.
pub fn ancestors() -> Vec<u32> {
    let mut v = vec![std::process::id()];
    while let Some(&pid) = v.last() {
        let Some(ppid) = parent_of(pid) else { break };
        if ppid == 0 || v.contains(&ppid) || v.len() > 64 {
            break;
        }
        v.push(ppid);
    }
    v
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_process_is_alive_and_a_changed_start_is_not() {
        let me = ProcessId::current();
        assert!(me.start_ticks > 0);
        assert!(me.is_alive());
        let recycled = ProcessId {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!recycled.is_alive());
        assert_eq!(ProcessId::of(u32::MAX), None);
        assert!(ProcessId::parent().is_some());
        let a = ancestors();
        assert_eq!(a[0], std::process::id());
        assert!(a.len() >= 2);
    }
}
