//! Network namespaces and the `ip` commands that configure them (control path only).

use std::process::Command;

use crate::error::{LabError, Result};

/// Directory of named network namespaces (`ip netns`).
pub const NETNS_DIR: &str = "/run/netns";

/// Runs `ip ARGS`, turning a failure into a one-line error.
pub fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| LabError::io("running `ip` (is iproute2 installed?)", e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LabError::Command {
            command: format!("ip {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr)
                .trim()
                .replace('\n', " "),
        })
    }
}

/// Creates a namespace with its loopback up.
pub fn create(name: &str) -> Result<()> {
    ip(&["netns", "add", name])?;
    ip(&["-n", name, "link", "set", "lo", "up"])
}

/// Deletes a namespace if it exists.
pub fn delete(name: &str) -> Result<()> {
    if exists(name) {
        ip(&["netns", "del", name])?;
    }
    Ok(())
}

/// True when the named namespace exists.
pub fn exists(name: &str) -> bool {
    std::path::Path::new(NETNS_DIR).join(name).exists()
}

/// Every named namespace starting with `prefix`.
pub fn with_prefix(prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs `f` on a new thread that has entered namespace `name`; the calling thread's
/// namespace is untouched. File descriptors opened inside (a TUN device) stay valid.
pub fn run_in<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    with_netns(name, f)
}

/// [`run_in`] for closures that borrow from the caller and return their own error type:
/// `f` runs on a scoped thread that entered namespace `name` (threads it starts are in the
/// namespace too); the caller waits for it.
pub fn with_netns<T: Send, E: From<LabError> + Send>(
    name: &str,
    f: impl FnOnce() -> std::result::Result<T, E> + Send,
) -> std::result::Result<T, E> {
    let path = format!("{NETNS_DIR}/{name}");
    let file =
        std::fs::File::open(&path).map_err(|e| LabError::io(format!("opening {path}"), e))?;
    std::thread::scope(|s| {
        s.spawn(move || {
            use std::os::fd::AsRawFd;
            // SAFETY: setns on a valid namespace fd; affects only this thread.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(LabError::io(
                    format!("entering {path}"),
                    std::io::Error::last_os_error(),
                )
                .into());
            }
            f()
        })
        .join()
        .map_err(|_| E::from(LabError::Usage("namespace thread panicked".into())))?
    })
}

/// True when the calling thread is in namespace `name`.
pub fn thread_is_in(name: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (
        std::fs::metadata(std::path::Path::new(NETNS_DIR).join(name)),
        std::fs::metadata("/proc/thread-self/ns/net"),
    ) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    }
}

/// Moves the calling process into namespace `name` for good, as `ip netns exec` does: its
/// network namespace, and a private mount namespace whose `/sys` shows that network
/// namespace's devices. Call it before any thread is started (threads started later inherit
/// the namespace; threads started before keep theirs).
pub fn enter(name: &str) -> Result<()> {
    let path = format!("{NETNS_DIR}/{name}");
    let file =
        std::fs::File::open(&path).map_err(|e| LabError::io(format!("opening {path}"), e))?;
    let os = |what: String| LabError::io(what, std::io::Error::last_os_error());
    use std::os::fd::AsRawFd;
    // SAFETY: setns on a valid namespace fd; unshare and mount take valid C strings.
    unsafe {
        if libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
            return Err(os(format!("entering {path}")));
        }
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(os("unsharing the mount namespace".into()));
        }
        // Keep the host's mounts from seeing ours, then mount a /sys of this namespace.
        let root = c"/";
        let sys = c"/sys";
        let sysfs = c"sysfs";
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_SLAVE | libc::MS_REC,
            std::ptr::null(),
        ) != 0
        {
            return Err(os("making / a slave mount".into()));
        }
        if libc::umount2(sys.as_ptr(), libc::MNT_DETACH) == 0
            && libc::mount(
                sysfs.as_ptr(),
                sys.as_ptr(),
                sysfs.as_ptr(),
                0,
                std::ptr::null(),
            ) != 0
        {
            return Err(os("mounting /sys for the namespace".into()));
        }
    }
    Ok(())
}

/// Whether the process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The processes living in namespace `name` (judged by their main thread, so a process that
/// only sent one thread in, like a test harness, is not one of them), never the caller or
/// its ancestors.
pub fn processes_in(name: &str) -> Vec<nsperf_core::process::ProcessId> {
    use std::os::unix::fs::MetadataExt;
    let Ok(ns) = std::fs::metadata(std::path::Path::new(NETNS_DIR).join(name)) else {
        return Vec::new();
    };
    let spared = nsperf_core::process::ancestors();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut v: Vec<_> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| !spared.contains(pid))
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| m.ino() == ns.ino() && m.dev() == ns.dev())
        })
        .filter_map(nsperf_core::process::ProcessId::of)
        .collect();
    v.sort_by_key(|p| p.pid);
    v
}

/// Stops `procs`: SIGTERM, up to `grace` to exit, then SIGKILL. Returns those that were
/// still running when asked (a pid reused meanwhile is never signalled).
pub fn stop_processes(
    procs: &[nsperf_core::process::ProcessId],
    grace: std::time::Duration,
) -> Vec<nsperf_core::process::ProcessId> {
    use std::time::{Duration, Instant};
    let signal = |sig| {
        procs
            .iter()
            .filter(|p| p.is_alive())
            // SAFETY: kill with a pid we just saw alive with its recorded start time.
            .filter(|p| unsafe { libc::kill(p.pid as libc::pid_t, sig) } == 0)
            .copied()
            .collect::<Vec<_>>()
    };
    let asked = signal(libc::SIGTERM);
    let t0 = Instant::now();
    while asked.iter().any(|p| p.is_alive()) && t0.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(5));
    }
    signal(libc::SIGKILL);
    let t1 = Instant::now();
    while asked.iter().any(|p| p.is_alive()) && t1.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    asked
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_processes_in_a_namespace_that_does_not_exist() {
        assert!(super::processes_in("nsperf-no-such-namespace").is_empty());
    }
}
