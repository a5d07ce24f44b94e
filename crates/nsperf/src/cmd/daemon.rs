//! `nsperf server -D` and `--pidfile`: the server detached from the terminal, as iperf3's
//! `-D`/`-I` (and `daemon(3)`): one fork, a new session, `/` as working directory, standard
//! input from `/dev/null`, output to `--logfile` or `/dev/null`. The foreground process
//! returns only once the daemon has written its pid file, so a script that reads the file
//! right after finds it.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::Context;
use nsperf_core::Failure;

use crate::exit::classified;

/// A pid file that is removed when dropped (the server's clean exit, SIGTERM included).
#[derive(Debug)]
pub struct PidFile(Option<PathBuf>);

impl PidFile {
    /// No pid file (`-D` without `--pidfile`).
    pub fn none() -> PidFile {
        PidFile(None)
    }

    /// Writes this process's id into `path`; refuses when the file names another live
    /// process (a server already running).
    pub fn create(path: &Path) -> anyhow::Result<PidFile> {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse::<libc::pid_t>()
            && pid > 0
            && pid != std::process::id() as libc::pid_t
            // SAFETY: signal 0 only checks that the process exists.
            && unsafe { libc::kill(pid, 0) } == 0
        {
            return Err(classified(
                Failure::Usage,
                format!(
                    "--pidfile {}: process {pid} is running (another server?)",
                    path.display()
                ),
            ));
        }
        std::fs::write(path, format!("{}\n", std::process::id()))
            .with_context(|| format!("--pidfile {}", path.display()))
            .map_err(|e| classified(Failure::Input, format!("{e:#}")))?;
        Ok(PidFile(Some(path.to_path_buf())))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// An absolute path for `p`, so it still means the same after the daemon's `chdir("/")`.
pub fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("{}", p.display()))
}

/// Detaches this process (call it before any thread starts). Returns in the daemon, after
/// `ready` (which writes the pid file) succeeded; the foreground process exits 0 then, or
/// with the daemon's one-line error. `logfile` (absolute) receives the daemon's output.
pub fn daemonize(
    logfile: Option<&Path>,
    ready: impl FnOnce() -> anyhow::Result<PidFile>,
) -> anyhow::Result<PidFile> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("-D: pipe");
    }
    // SAFETY: both descriptors are fresh and ours.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    std::io::stdout().flush()?;
    // SAFETY: the process has one thread here (the caller's contract), so the child may run
    // any code after fork.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()).context("-D: fork"),
        0 => {
            drop(rd);
            let mut wr = std::fs::File::from(wr);
            match detach(logfile).and_then(|()| ready()) {
                Ok(pid) => {
                    let _ = wr.write_all(b"\n");
                    Ok(pid)
                }
                Err(e) => {
                    let _ = write!(wr, "{}", crate::one_line(&e));
                    // SAFETY: leave without running the parent's exit handlers twice.
                    unsafe { libc::_exit(1) }
                }
            }
        }
        _ => {
            drop(wr);
            let mut msg = String::new();
            let _ = std::fs::File::from(rd).read_to_string(&mut msg);
            if msg == "\n" {
                // SAFETY: the daemon runs on; the foreground process ends here.
                unsafe { libc::_exit(0) }
            }
            Err(classified(
                Failure::Runtime,
                if msg.is_empty() {
                    "-D: the daemon ended before it was ready".to_string()
                } else {
                    format!("-D: {msg}")
                },
            ))
        }
    }
}

/// The daemon's side: new session, `/`, standard descriptors redirected.
fn detach(logfile: Option<&Path>) -> anyhow::Result<()> {
    // SAFETY: setsid in a child that is not a process group leader.
    if unsafe { libc::setsid() } < 0 {
        return Err(std::io::Error::last_os_error()).context("-D: setsid");
    }
    std::env::set_current_dir("/").context("-D: chdir /")?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .context("-D: /dev/null")?;
    // SAFETY: dup2 of an open descriptor onto a standard one.
    if unsafe { libc::dup2(null.as_raw_fd(), libc::STDIN_FILENO) } < 0 {
        return Err(std::io::Error::last_os_error()).context("-D: stdin");
    }
    match logfile {
        Some(f) => crate::output::log_to_file(f)?,
        None => {
            for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
                // SAFETY: as above.
                if unsafe { libc::dup2(null.as_raw_fd(), fd) } < 0 {
                    return Err(std::io::Error::last_os_error()).context("-D: stdout");
                }
            }
        }
    }
    Ok(())
}
