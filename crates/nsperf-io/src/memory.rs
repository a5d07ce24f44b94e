//! The memory a test can really fill with page cache: free RAM (`MemAvailable`), or less
//! when the process sits in a cgroup with a memory limit — the page cache is charged to the
//! cgroup, so a 192 MiB `memory.max` puts the page-cache cliff at about 192 MiB whatever the
//! machine's free RAM.
//!
//! cgroup v2: the tightest `memory.max` of the process's cgroup and its ancestors, less what
//! that cgroup holds that is not page cache (`memory.current` − `file` of `memory.stat`).
//! cgroup v1: `memory.limit_in_bytes` of the memory controller's cgroup.

use std::path::{Path, PathBuf};

use nsperf_core::units::Bytes;
use serde::{Deserialize, Serialize};

/// What limits the page cache of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheLimit {
    /// Free RAM of the machine.
    FreeRam,
    /// The memory limit of the process's cgroup.
    Cgroup,
}

/// Memory facts of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryFacts {
    /// Free RAM (`MemAvailable`).
    pub mem_available_bytes: Option<u64>,
    /// The cgroup whose limit applies (path below the cgroup mount), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// Its memory limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_memory_max_bytes: Option<u64>,
    /// What that cgroup holds besides page cache (anonymous and kernel memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_other_bytes: Option<u64>,
    /// Memory the page cache of this run can use: the smaller of free RAM and the cgroup's
    /// room.
    pub cache_usable_bytes: Option<u64>,
    /// Which of the two is smaller.
    pub cache_limited_by: Option<CacheLimit>,
}

impl MemoryFacts {
    /// Reads the facts of this process.
    pub fn read(mem_available: Option<u64>) -> Self {
        let cg = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        Self::from_parts(
            mem_available,
            cgroup_limit(Path::new("/sys/fs/cgroup"), &cg),
        )
    }

    /// Combines free RAM with a cgroup limit `(cgroup, max, other)`.
    pub fn from_parts(mem_available: Option<u64>, cg: Option<(String, u64, u64)>) -> Self {
        let mut f = MemoryFacts {
            mem_available_bytes: mem_available,
            cache_usable_bytes: mem_available,
            cache_limited_by: mem_available.map(|_| CacheLimit::FreeRam),
            ..Default::default()
        };
        if let Some((path, max, other)) = cg {
            let room = max.saturating_sub(other);
            f.cgroup = Some(path);
            f.cgroup_memory_max_bytes = Some(max);
            f.cgroup_other_bytes = Some(other);
            if mem_available.is_none_or(|a| room < a) {
                f.cache_usable_bytes = Some(room);
                f.cache_limited_by = Some(CacheLimit::Cgroup);
            }
        }
        f
    }

    /// "free RAM (22.4 GiB)" or "the cgroup's memory.max (192 MiB, 12 MiB of it in use)".
    pub fn describe(&self) -> String {
        match (self.cache_limited_by, self.cache_usable_bytes) {
            (Some(CacheLimit::Cgroup), Some(_)) => format!(
                "the memory its cgroup allows (memory.max {} of {}, {} of it held by other memory)",
                Bytes(self.cgroup_memory_max_bytes.unwrap_or(0)),
                self.cgroup.as_deref().unwrap_or("?"),
                Bytes(self.cgroup_other_bytes.unwrap_or(0))
            ),
            (_, Some(u)) => format!("free RAM ({})", Bytes(u)),
            _ => "free RAM (unknown)".into(),
        }
    }
}

/// The tightest memory limit over the process's cgroup and its ancestors:
/// `(cgroup path, limit, non-cache bytes held)`. `proc_cgroup` is `/proc/self/cgroup`.
pub fn cgroup_limit(root: &Path, proc_cgroup: &str) -> Option<(String, u64, u64)> {
    // cgroup v2: "0::/path".
    if let Some(path) = proc_cgroup.lines().find_map(|l| l.strip_prefix("0::")) {
        let mut best: Option<(String, u64, u64)> = None;
        let mut p = PathBuf::from(path.trim());
        loop {
            let dir = root.join(p.strip_prefix("/").unwrap_or(&p));
            if let Some(max) = read_limit(&dir.join("memory.max")) {
                if best.as_ref().is_none_or(|b| max < b.1) {
                    let other = other_bytes(&dir);
                    best = Some((p.display().to_string(), max, other));
                }
            }
            if !p.pop() {
                break;
            }
        }
        // A hybrid host lists "0::/" beside the v1 controllers: the memory controller may
        // still be v1's, so look there when v2 gave no limit.
        if best.is_some() {
            return best;
        }
    }
    // cgroup v1: "N:memory:/path" (or "N:cpu,memory:/path"); v1's hierarchy also limits a
    // cgroup by its ancestors', so the tightest over the chain.
    let path = proc_cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        ctrl.split(',')
            .any(|c| c == "memory")
            .then(|| path.trim().to_string())
    })?;
    let mut best: Option<(String, u64, u64)> = None;
    let mut p = PathBuf::from(&path);
    loop {
        let dir = root.join("memory").join(p.strip_prefix("/").unwrap_or(&p));
        // v1 reports "no limit" as a huge page-rounded number.
        if let Some(max) = read_limit(&dir.join("memory.limit_in_bytes")).filter(|&m| m < 1 << 60)
            && best.as_ref().is_none_or(|b| max < b.1)
        {
            best = Some((p.display().to_string(), max, 0));
        }
        if !p.pop() {
            break;
        }
    }
    best
}

fn read_limit(p: &Path) -> Option<u64> {
    let s = std::fs::read_to_string(p).ok()?;
    let s = s.trim();
    if s == "max" {
        return None;
    }
    s.parse().ok()
}

fn other_bytes(dir: &Path) -> u64 {
    let current: u64 = std::fs::read_to_string(dir.join("memory.current"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let file: u64 = std::fs::read_to_string(dir.join("memory.stat"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("file ")?.trim().parse().ok())
        })
        .unwrap_or(0);
    current.saturating_sub(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hybrid host (this project's CI machine): "0::/" beside a v1 memory controller.
    #[test]
    fn v1_limit_behind_a_hybrid_unified_line() {
        let dir = std::env::temp_dir().join(format!("nsperf-cg-v1-{}", std::process::id()));
        let root = dir.as_path();
        let leaf = root.join("memory/jobs/run");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(root.join("memory/jobs/memory.limit_in_bytes"), "50331648\n").unwrap();
        std::fs::write(leaf.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        let l = cgroup_limit(root, "9:name=systemd:/\n4:memory:/jobs/run\n0::/\n").unwrap();
        assert_eq!(l, ("/jobs".to_string(), 48 << 20, 0));
        assert!(cgroup_limit(root, "4:memory:/\n0::/\n").is_none());
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn tightest_limit_of_the_chain() {
        let root = std::env::temp_dir().join(format!("nsperf-cg-t-{}", std::process::id()));
        let leaf = root.join("a/b");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(root.join("a/memory.max"), "201326592\n").unwrap();
        std::fs::write(root.join("a/memory.current"), "50000000\n").unwrap();
        std::fs::write(root.join("a/memory.stat"), "anon 1000\nfile 40000000\n").unwrap();
        std::fs::write(leaf.join("memory.max"), "max\n").unwrap();
        let l = cgroup_limit(&root, "0::/a/b\n").unwrap();
        assert_eq!(l, ("/a".to_string(), 201_326_592, 10_000_000));
        let f = MemoryFacts::from_parts(Some(20 << 30), Some(l));
        assert_eq!(f.cache_limited_by, Some(CacheLimit::Cgroup));
        assert_eq!(f.cache_usable_bytes, Some(201_326_592 - 10_000_000));
        assert!(
            f.describe().contains("memory.max 192 MiB"),
            "{}",
            f.describe()
        );
        // No limit anywhere: free RAM.
        std::fs::write(root.join("a/memory.max"), "max\n").unwrap();
        assert!(cgroup_limit(&root, "0::/a/b\n").is_none());
        let f = MemoryFacts::from_parts(Some(1 << 30), None);
        assert_eq!(f.cache_limited_by, Some(CacheLimit::FreeRam));
        assert_eq!(f.describe(), "free RAM (1 GiB)");
        // cgroup v1.
        std::fs::create_dir_all(root.join("memory/x")).unwrap();
        std::fs::write(root.join("memory/x/memory.limit_in_bytes"), "1048576\n").unwrap();
        assert_eq!(
            cgroup_limit(&root, "5:memory:/x\n"),
            Some(("/x".into(), 1 << 20, 0))
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
