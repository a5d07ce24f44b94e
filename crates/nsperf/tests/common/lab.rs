//! Labs for the tests: a name unique to this test process, `nsperf lab up`, and `lab down`
//! when the guard drops, however the test ends. One copy for every test binary: the tests
//! of one area share a process, so a name made of the pid alone would be taken twice.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{KillOnDrop, Run, nsperf, nsperf_bin, run};

/// A lab name unique among this process's labs and (by its pid) among concurrent test
/// processes: `t`, the pid's last five digits, `tag` (1-4 of `a-z`, ending with a letter so
/// the counter after it cannot run into it) and a counter; at most the lab's 12 characters.
pub fn lab_name(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    assert!(
        (1..=4).contains(&tag.len())
            && tag
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && tag.ends_with(|c: char| c.is_ascii_lowercase()),
        "lab tag {tag:?}: 1-4 of a-z 0-9 ending with a letter"
    );
    let n = N.fetch_add(1, Ordering::Relaxed) % 100;
    format!("t{}{tag}{n}", std::process::id() % 100_000)
}

/// Runs `f` on a thread inside site `site` of lab `lab` (sockets it opens stay there); a
/// panic in `f` fails the caller.
pub fn within<T: Send + 'static>(
    lab: &str,
    site: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    nsperf_lab::netns::run_in(&format!("nsp-{lab}-{site}"), move || Ok(f())).unwrap()
}

/// A lab removed (`nsperf lab down NAME --force`) when dropped, however the test ends.
pub struct Lab(pub String);

impl Lab {
    /// `nsperf lab up NAME FLAGS` under a fresh [`lab_name`]; the guard exists before the lab
    /// does, so a half-made lab is removed too.
    pub fn up(tag: &str, flags: &[&str]) -> Lab {
        Lab::up_named(lab_name(tag), flags)
    }

    /// `nsperf lab up NAME FLAGS` under the name given.
    pub fn up_named(name: String, flags: &[&str]) -> Lab {
        let lab = Lab(name);
        let mut args = vec!["lab", "up", lab.0.as_str()];
        args.extend_from_slice(flags);
        run(&args).ok();
        lab
    }

    /// The lab's name.
    pub fn name(&self) -> &str {
        &self.0
    }

    /// The network namespace of site `site`.
    pub fn ns(&self, site: &str) -> String {
        format!("nsp-{}-{site}", self.0)
    }

    /// `nsperf lab set NAME FLAGS`.
    pub fn set(&self, flags: &[&str]) {
        let mut args = vec!["lab", "set", self.0.as_str()];
        args.extend_from_slice(flags);
        run(&args).ok();
    }

    /// `nsperf lab stats NAME --json`.
    pub fn stats(&self) -> serde_json::Value {
        run(&["lab", "stats", &self.0, "--json"]).ok().json()
    }

    /// Runs `f` on a thread inside site `site`'s namespace (sockets it opens stay there).
    pub fn within<T: Send + 'static>(
        &self,
        site: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        within(&self.0, site, f)
    }

    /// Runs `CMD` in site `site` to its end.
    pub fn exec(&self, site: &str, cmd: &[&str]) -> Run {
        let mut args = vec!["lab", "exec", self.0.as_str(), site, "--"];
        args.extend_from_slice(cmd);
        run(&args)
    }

    /// Starts `CMD` in site `site` in the background.
    pub fn spawn(&self, site: &str, cmd: &[&str]) -> KillOnDrop {
        let mut args = vec!["lab", "exec", self.0.as_str(), site, "--"];
        args.extend_from_slice(cmd);
        KillOnDrop(
            nsperf(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn in lab"),
        )
    }

    /// Segmentation offloads off on `wan0` of these sites: real-sized segments in a
    /// capture, as on a wire.
    pub fn offloads_off(&self, sites: &[&str]) {
        for site in sites {
            let _ = Command::new("ip")
                .args(["netns", "exec", &self.ns(site), "ethtool", "-K"])
                .args(["wan0", "gso", "off", "tso", "off", "gro", "off"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = run(&["lab", "down", &self.0, "--force"]);
    }
}

/// `nsperf ARGS…` run to its end in site `site` of lab `lab` (this build's binary).
pub fn nsperf_in_site(lab: &str, site: &str, args: &[&str]) -> Run {
    let mut a = vec!["lab", "exec", lab, site, "--", nsperf_bin()];
    a.extend_from_slice(args);
    run(&a)
}

/// `nsperf io run URL ARGS…` run to its end in site `site` of lab `lab`.
pub fn io_in_site(lab: &str, site: &str, url: &str, args: &[&str]) -> Run {
    let mut a = vec!["io", "run", url];
    a.extend_from_slice(args);
    nsperf_in_site(lab, site, &a)
}

/// Timing tests run one at a time in a test binary: on a 2-core machine, two labs forwarding
/// at once would measure each other. One lock for every module of the binary (each module
/// had its own when each file was its own binary).
pub fn timing_lock() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
