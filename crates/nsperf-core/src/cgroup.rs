//! The CPU limit of this process's cgroup and how often it was throttled: cgroup v2
//! `cpu.max` / `cpu.stat`, or the v1 cpu controller's `cpu.cfs_quota_us` /
//! `cpu.cfs_period_us` / `cpu.stat`. The tightest quota of the process's cgroup and its
//! ancestors applies; its `cpu.stat` counts the scheduler periods in which the group ran out
//! of quota. A limit that cannot be read is absent, never guessed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A CPU quota that applies to this process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuQuota {
    /// The cgroup whose quota applies (path below the controller's mount).
    pub cgroup: String,
    /// The quota in cores (quota / period): 0.03 is 3 % of one core.
    pub cores: f64,
    /// Which interface gave it: `cpu.max` (v2) or `cpu.cfs_quota_us` (v1).
    pub source: String,
    /// Directory of that cgroup (to read its `cpu.stat`).
    #[serde(skip)]
    pub dir: PathBuf,
}

/// Throttling counters of a cgroup's `cpu.stat` (cumulative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuThrottling {
    /// Scheduler periods in which the group could run.
    pub periods: u64,
    /// Periods in which it ran out of quota.
    pub throttled: u64,
}

impl CpuThrottling {
    /// Parses `cpu.stat` (v1 and v2 name the two counters alike).
    pub fn parse(text: &str) -> Option<CpuThrottling> {
        let get = |k: &str| {
            text.lines().find_map(|l| {
                let (name, v) = l.split_once(' ')?;
                (name == k).then(|| v.trim().parse::<u64>().ok())?
            })
        };
        Some(CpuThrottling {
            periods: get("nr_periods")?,
            throttled: get("nr_throttled")?,
        })
    }

    /// Counter growth from `before` to `self`.
    pub fn since(&self, before: &CpuThrottling) -> CpuThrottling {
        CpuThrottling {
            periods: self.periods.saturating_sub(before.periods),
            throttled: self.throttled.saturating_sub(before.throttled),
        }
    }
}

/// Parses cgroup v2 `cpu.max` ("max 100000" or "3000 100000") into cores.
pub fn parse_cpu_max(text: &str) -> Option<f64> {
    let mut it = text.split_ascii_whitespace();
    let quota = it.next()?.parse::<f64>().ok()?;
    let period = it
        .next()
        .map_or(Some(100_000.0), |p| p.parse::<f64>().ok())?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// Parses v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us` (-1 = no quota) into cores.
pub fn parse_cfs(quota: &str, period: &str) -> Option<f64> {
    let q = quota.trim().parse::<f64>().ok()?;
    let p = period.trim().parse::<f64>().ok()?;
    (q > 0.0 && p > 0.0).then(|| q / p)
}

/// From `/proc/self/cgroup`: the v2 path (`0::/path`) and the v1 cpu controller's path.
pub fn parse_proc_cgroup(text: &str) -> (Option<String>, Option<String>) {
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(ctrl), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" && ctrl.is_empty() {
            v2 = Some(path.to_string());
        } else if ctrl.split(',').any(|c| c == "cpu") {
            v1 = Some(path.to_string());
        }
    }
    (v2, v1)
}

/// From `/proc/self/mountinfo`: the cgroup2 mount point and the v1 cpu controller's.
pub fn parse_mountinfo(text: &str) -> (Option<PathBuf>, Option<PathBuf>) {
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mount) = left.split(' ').nth(4) else {
            continue;
        };
        let mut r = right.split(' ');
        let (fstype, _src, opts) = (r.next(), r.next(), r.next().unwrap_or(""));
        match fstype {
            Some("cgroup2") if v2.is_none() => v2 = Some(PathBuf::from(mount)),
            Some("cgroup") if opts.split(',').any(|o| o == "cpu") => {
                v1 = Some(PathBuf::from(mount))
            }
            _ => {}
        }
    }
    (v2, v1)
}

/// The tightest quota from `dir` up to `root`, read with `read(dir) -> cores`.
fn tightest(
    root: &Path,
    cgroup: &str,
    source: &str,
    read: impl Fn(&Path) -> Option<f64>,
) -> Option<CpuQuota> {
    let mut best: Option<CpuQuota> = None;
    let mut rel = PathBuf::from(cgroup.trim_start_matches('/'));
    loop {
        let dir = root.join(&rel);
        if let Some(cores) = read(&dir)
            && best.as_ref().is_none_or(|b| cores < b.cores)
        {
            best = Some(CpuQuota {
                cgroup: format!("/{}", rel.display()),
                cores,
                source: source.to_string(),
                dir,
            });
        }
        if !rel.pop() {
            return best;
        }
    }
}

impl CpuQuota {
    /// The CPU quota that applies to this process, if any (v2 first, then v1).
    pub fn of_this_process() -> Option<CpuQuota> {
        let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let (v2_path, v1_path) = parse_proc_cgroup(&cg);
        let (v2_mount, v1_mount) = parse_mountinfo(&mi);
        let read = |p: PathBuf| std::fs::read_to_string(p).ok();
        if let (Some(path), Some(mount)) = (&v2_path, &v2_mount)
            && let Some(q) = tightest(mount, path, "cpu.max", |d| {
                parse_cpu_max(&read(d.join("cpu.max"))?)
            })
        {
            return Some(q);
        }
        let (path, mount) = (v1_path?, v1_mount?);
        tightest(&mount, &path, "cpu.cfs_quota_us", |d| {
            parse_cfs(
                &read(d.join("cpu.cfs_quota_us"))?,
                &read(d.join("cpu.cfs_period_us"))?,
            )
        })
    }

    /// The throttling counters of the cgroup whose quota applies.
    pub fn throttling(&self) -> Option<CpuThrottling> {
        CpuThrottling::parse(&std::fs::read_to_string(self.dir.join("cpu.stat")).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_parse() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("3000 100000\n"), Some(0.03));
        assert_eq!(parse_cpu_max("200000 100000"), Some(2.0));
        assert_eq!(parse_cpu_max("garbage"), None);
        assert_eq!(parse_cfs("-1\n", "100000\n"), None);
        assert_eq!(parse_cfs("3000\n", "100000\n"), Some(0.03));
    }

    #[test]
    fn cgroup_paths_and_mounts() {
        let cg = "4:memory:/x\n1:cpu,cpuacct:/lim\n0::/user.slice/a\n";
        assert_eq!(
            parse_proc_cgroup(cg),
            (Some("/user.slice/a".into()), Some("/lim".into()))
        );
        let mi = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
31 25 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 25 0:28 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
";
        assert_eq!(
            parse_mountinfo(mi),
            (
                Some(PathBuf::from("/sys/fs/cgroup/unified")),
                Some(PathBuf::from("/sys/fs/cgroup/cpu"))
            )
        );
    }

    #[test]
    fn throttling_parses_and_subtracts() {
        let t = CpuThrottling::parse(
            "usage_usec 5\nnr_periods 120\nnr_throttled 100\nthrottled_usec 9\n",
        )
        .unwrap();
        assert_eq!(
            t,
            CpuThrottling {
                periods: 120,
                throttled: 100
            }
        );
        let before = CpuThrottling {
            periods: 20,
            throttled: 10,
        };
        assert_eq!(t.since(&before).throttled, 90);
        assert!(CpuThrottling::parse("nr_periods 1\n").is_none());
    }

    #[test]
    fn tightest_quota_up_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/cpu.max"), "5000 100000").unwrap();
        std::fs::write(root.join("a/b/cpu.max"), "max 100000").unwrap();
        let q = tightest(root, "/a/b", "cpu.max", |d| {
            parse_cpu_max(&std::fs::read_to_string(d.join("cpu.max")).ok()?)
        })
        .unwrap();
        assert_eq!(q.cgroup, "/a");
        assert_eq!(q.cores, 0.05);
    }
}
