//! `nsperf io` under faults (issue #13, issue #11 "io figures", issue #12 item 5): a size
//! larger than the file system, a run killed with SIGKILL, a mount that vanishes mid-run,
//! a cgroup memory limit, a pass too short to mean much. Root-only cases skip with a reason.

use crate::common;
use common::scratch::*;
use common::*;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmpfs mounted by the test, unmounted (lazily) on drop.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: PathBuf, size: &str) -> Option<Mount> {
        std::fs::create_dir_all(&at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mount(at))
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Free bytes of the file system holding `dir`, from `df` (an independent reference).
fn df_free_bytes(dir: &str) -> u64 {
    let out = Command::new("df")
        .args(["-B1", "--output=avail", dir])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn size_beyond_free_space_fails_fast() {
    let d = Scratch::new(TMPFS, "nospace");
    // More than the file system has, whatever this machine has.
    let size = format!("{}", df_free_bytes(d.path()) + (1 << 30));
    let t = Instant::now();
    let r = run(&[
        "io",
        "run",
        d.path(),
        "-w",
        "seqwrite",
        "-s",
        &size,
        "-b",
        "1m",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--no-space-check"), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(d.leftovers().is_empty());
    // The matrix and the bonnie suite check too.
    let r = run(&[
        "io",
        "auto",
        d.path(),
        "--max-file",
        &size,
        "--records",
        "1m",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let r = run(&["io", "bonnie", d.path(), "-s", &size]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
}

/// Issue #13: `io run -s 4t` on a 5 MiB tmpfs took 53 s at 100 % CPU and 1 GB of memory
/// before ENOSPC (mincore over the whole size). Now it fails at once, and when told to go
/// on anyway (`--no-space-check`) the cost is bounded by what exists on disk.
#[test]
fn four_tib_on_a_five_mib_tmpfs() {
    if !require_root("4 TiB on a 5 MiB tmpfs (mount)") {
        return;
    }
    let d = Scratch::new(&disk_base(), "tiny");
    let Some(m) = Mount::tmpfs(d.0.join("mnt"), "5m") else {
        skip("4 TiB on a 5 MiB tmpfs: mount -t tmpfs failed");
        return;
    };
    let t = Instant::now();
    let r = run(&["io", "run", m.path(), "-s", "4t", "-w", "seqwrite"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("4 TiB") && r.stderr.contains("5 MiB"),
        "{}",
        r.stderr
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    for w in ["seqwrite", "randwrite"] {
        let t = Instant::now();
        let r = run(&[
            "io",
            "run",
            m.path(),
            "-s",
            "4t",
            "-w",
            w,
            "--no-space-check",
        ]);
        assert_eq!(r.code, Some(1), "{w}: {}", r.stderr);
        assert!(r.stderr.contains("No space left"), "{w}: {}", r.stderr);
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{w}: {:?}",
            t.elapsed()
        );
    }
    // A mapped write past the space would be SIGBUS: refused even with the flag.
    let r = run(&[
        "io",
        "run",
        m.path(),
        "-s",
        "4t",
        "-w",
        "seqwrite",
        "-e",
        "mmap",
        "--no-space-check",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("SIGBUS"), "{}", r.stderr);
    assert!(std::fs::read_dir(&m.0).unwrap().next().is_none());
}

#[test]
fn sigkill_leaves_a_file_the_next_run_names_and_clean_removes() {
    let d = Scratch::new(TMPFS, "kill9");
    let mut cmd = nsperf([
        "io",
        "run",
        d.path(),
        "-w",
        "randread",
        "-s",
        "2m",
        "-b",
        "4k",
        "--time",
        "30s",
        "--json",
    ]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let t0 = Instant::now();
    // Killed once the file is laid out (2 MiB).
    let full = || {
        d.leftovers()
            .first()
            .and_then(|n| std::fs::metadata(d.0.join(n)).ok())
            .is_some_and(|m| m.len() == 2 << 20)
    };
    while !full() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no file appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let left = d.leftovers();
    assert_eq!(left.len(), 1, "{left:?}");
    // The next run names it (stderr and a finding) and leaves it alone.
    let r = run(&["io", "run", d.path(), "-s", "64k", "-b", "4k", "--json"]).ok();
    assert!(
        r.stderr.contains(&left[0]) && r.stderr.contains("--clean"),
        "{}",
        r.stderr
    );
    let j = r.json();
    let f = j["findings"].as_array().unwrap();
    let stale = f.iter().find(|f| f["id"] == "stale_files").unwrap();
    assert_eq!(stale["evidence"]["stale_bytes"], (2 << 20) as f64);
    assert_eq!(d.leftovers(), left);
    // --clean removes it, and says so.
    let j = io_json(&[d.path(), "-s", "64k", "-b", "4k", "--clean"]);
    assert!(j["findings"].to_string().contains("stale_files_removed"));
    assert!(d.leftovers().is_empty());
}

#[test]
fn short_pass_is_flagged_and_target_fs_recorded() {
    let d = Scratch::new(TMPFS, "short");
    let j = io_json(&[d.path(), "-s", "64k", "-b", "4k"]);
    let f = j["findings"].as_array().unwrap();
    assert!(f.iter().any(|f| f["id"] == "short_pass"), "{f:?}");
    let fs = &j["summary"]["target_fs"];
    assert_eq!(fs["fs_type"], "tmpfs", "{fs}");
    assert_eq!(fs["network"], false);
    assert_eq!(fs["mount_point"], "/dev/shm");
    // A pass of a second or more is not flagged.
    let j = io_json(&[d.path(), "-s", "64k", "-b", "4k", "--time", "1s"]);
    let f = j["findings"].to_string();
    assert!(!f.contains("short_pass"), "{f}");
    // The matrix flags its short cells.
    let r = run(&[
        "io",
        "auto",
        d.path(),
        "--max-file",
        "128k",
        "--records",
        "4k",
        "--json",
    ])
    .ok();
    assert!(r.stdout.contains("short_cells"), "{}", r.stdout);
}

#[test]
fn mount_vanishing_mid_run_is_named() {
    if !require_root("mount vanishing mid-run (mount, umount)") {
        return;
    }
    let d = Scratch::new(&disk_base(), "vanish");
    let Some(m) = Mount::tmpfs(d.0.join("mnt"), "64m") else {
        skip("mount vanishing mid-run: mount -t tmpfs failed");
        return;
    };
    let mut cmd = nsperf([
        "io",
        "run",
        m.path(),
        "-w",
        "randread",
        "-s",
        "1m",
        "-b",
        "4k",
        "--time",
        "2s",
        "--json",
    ]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        Command::new("umount")
            .arg("-l")
            .arg(&m.0)
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    let r = Run::from(out).ok();
    let j = r.json();
    assert_eq!(j["summary"]["target_fs"]["fs_type"], "tmpfs");
    let f = j["findings"].as_array().unwrap();
    let mc = f.iter().find(|f| f["id"] == "mount_changed");
    assert!(mc.is_some(), "{f:?}");
    assert!(r.stderr.contains("changed during the run"), "{}", r.stderr);
}

/// A cgroup with a memory limit (v2 `memory.max`, or the v1 memory controller's
/// `memory.limit_in_bytes` on a v1 or hybrid host), removed on drop (after its processes
/// ended).
struct Cgroup(PathBuf);

impl Cgroup {
    fn new(max: &str) -> Result<Cgroup, String> {
        let root = std::path::Path::new("/sys/fs/cgroup");
        let name = format!("nsperf-test-{}", std::process::id());
        let (p, file) = match std::fs::read_to_string(root.join("cgroup.subtree_control")) {
            Ok(ctl) => {
                if !ctl.split_whitespace().any(|c| c == "memory") {
                    std::fs::write(root.join("cgroup.subtree_control"), "+memory")
                        .map_err(|e| format!("cannot enable the memory controller: {e}"))?;
                }
                (root.join(name), "memory.max")
            }
            Err(_) if root.join("memory/memory.limit_in_bytes").exists() => {
                (root.join("memory").join(name), "memory.limit_in_bytes")
            }
            Err(e) => return Err(format!("no cgroup v2 nor v1 memory controller: {e}")),
        };
        std::fs::create_dir(&p).map_err(|e| format!("mkdir {}: {e}", p.display()))?;
        let cg = Cgroup(p);
        std::fs::write(cg.0.join(file), max).map_err(|e| format!("{file}: {e}"))?;
        Ok(cg)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Issue #11: a 192 MiB cgroup showed the page-cache cliff and the finding said "cause not
/// identified". The findings now know the cgroup's `memory.max`.
#[test]
fn page_cache_findings_know_the_cgroup_limit() {
    if !require_root("cgroup memory.max") {
        return;
    }
    let cg = match Cgroup::new("48M") {
        Ok(c) => c,
        Err(why) => {
            skip(&format!("cgroup memory limit: {why}"));
            return;
        }
    };
    let d = Scratch::new(&disk_base(), "cgroup");
    let procs = cg.0.join("cgroup.procs");
    let script = format!(
        "echo $$ > {} && exec {} io run {} -w seqread -s 96m -b 1m --json",
        procs.display(),
        nsperf_bin(),
        d.path()
    );
    let r = run_with_limit(
        {
            let mut c = Command::new("sh");
            c.args(["-c", &script]);
            c
        },
        Duration::from_secs(120),
    )
    .ok();
    let j = r.json();
    let m = &j["summary"]["memory"];
    assert_eq!(m["cache_limited_by"], "cgroup", "{m}");
    assert_eq!(m["cgroup_memory_max_bytes"], 48 << 20, "{m}");
    assert!(m["cache_usable_bytes"].as_u64().unwrap() <= 48 << 20, "{m}");
    let f = j["findings"].as_array().unwrap();
    let cliff = f.iter().find(|f| f["id"] == "page_cache_cliff");
    let cliff = cliff.unwrap_or_else(|| panic!("{f:?}"));
    assert!(
        cliff["message"]
            .as_str()
            .unwrap()
            .contains("memory.max 48 MiB"),
        "{cliff}"
    );
    // The page cache really was bounded by the cgroup: the file was not all resident.
    assert!(j["summary"]["cache_resident_pct"].as_f64().unwrap() < 75.0);
}
