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
    let path = format!("{NETNS_DIR}/{name}");
    std::thread::spawn(move || {
        let file =
            std::fs::File::open(&path).map_err(|e| LabError::io(format!("opening {path}"), e))?;
        use std::os::fd::AsRawFd;
        // SAFETY: setns on a valid namespace fd; affects only this thread.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(LabError::io(
                format!("entering {path}"),
                std::io::Error::last_os_error(),
            ));
        }
        f()
    })
    .join()
    .map_err(|_| LabError::Usage("namespace thread panicked".into()))?
}

/// Whether the process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
