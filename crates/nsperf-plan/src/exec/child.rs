//! Child processes of the executor: each in its own process group (a timeout or Ctrl-C kills
//! it together with whatever it started), its standard input fed, its output collected, CPU
//! use per core sampled each second while it runs. The spawning, the group and the sampling
//! are [`crate::process_group`]'s, shared with the agent's step runner.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use nsperf_core::Failure;
use nsperf_core::report::CpuInterval;

use crate::error::ExecError;
use crate::process_group::{CpuTicker, drain, kill_group, last_line};

/// How long an interrupted child may take to clean up before it is killed.
const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// A finished child.
#[derive(Debug)]
pub(super) struct ChildRun {
    pub(super) status: ExitStatus,
    pub(super) stdout: Vec<u8>,
    pub(super) stderr: Vec<u8>,
    pub(super) elapsed: Duration,
    pub(super) cpu: Vec<CpuInterval>,
}

impl ChildRun {
    /// `Ok` for exit 0; otherwise the failure, named by its [`Failure`] class. A child that
    /// needs root ([`Failure::Permission`]) while we are not root is a skip.
    pub(super) fn check(&self, what: &str) -> Result<(), ExecError> {
        if self.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&self.stderr);
        let last = last_line(&err);
        let failure = self.status.code().and_then(Failure::from_exit_code);
        if failure == Some(Failure::Permission) && !is_root() {
            return Err(ExecError::Skip(format!("needs root: {last}")));
        }
        Err(ExecError::Failed {
            command: what.to_string(),
            status: exit_status(self.status),
            stderr: last.chars().take(300).collect(),
        })
    }
}

/// Whether this process runs as root.
pub(super) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// How a child ended, named by its [`Failure`] class when its exit code is one.
fn exit_status(status: ExitStatus) -> String {
    match (
        status.code(),
        status.code().and_then(Failure::from_exit_code),
    ) {
        (Some(c), Some(f)) => format!("exit {c}, {f:?}"),
        (Some(c), None) => format!("exit {c}"),
        (None, _) => "killed by a signal".into(),
    }
}

/// Starts `cmd` in its own process group with `input` on its standard input; `tied`: it is
/// killed when this process dies, even by `kill -9`.
fn spawn(cmd: Command, input: Option<Vec<u8>>, what: &str, tied: bool) -> Result<Child, ExecError> {
    let mut child = crate::process_group::spawn(cmd, input.is_some(), tied).map_err(|source| {
        ExecError::Spawn {
            program: what.to_string(),
            source,
        }
    })?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        // A child that dies before reading shows in its exit status, not here.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    Ok(child)
}

/// Runs `cmd` to completion with a timeout, sampling CPU per core each second when asked.
/// Ctrl-C kills its group and gives [`ExecError::Interrupted`].
pub(super) fn run(
    cmd: Command,
    input: Option<Vec<u8>>,
    what: &str,
    timeout: Duration,
    sample_cpu: bool,
) -> Result<ChildRun, ExecError> {
    run_child(cmd, input, what, timeout, sample_cpu, true)
}

/// Runs `cmd` to completion with a timeout, even after Ctrl-C (a teardown that cleans up).
pub(super) fn run_to_end(
    cmd: Command,
    input: Option<Vec<u8>>,
    what: &str,
    timeout: Duration,
) -> Result<ChildRun, ExecError> {
    run_child(cmd, input, what, timeout, false, false)
}

fn run_child(
    cmd: Command,
    input: Option<Vec<u8>>,
    what: &str,
    timeout: Duration,
    sample_cpu: bool,
    stop_on_interrupt: bool,
) -> Result<ChildRun, ExecError> {
    let mut child = spawn(cmd, input, what, false)?;
    let to = drain(child.stdout.take().expect("piped"), u64::MAX);
    let te = drain(child.stderr.take().expect("piped"), u64::MAX);
    let t0 = Instant::now();
    let pid = child.id();
    // A waiter thread takes the exit time exactly; this loop only polls for it.
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let s = child.wait();
        let _ = tx.send((s, Instant::now()));
    });
    let mut sampler = sample_cpu.then(|| CpuTicker::new("host", t0));
    let mut cpu = Vec::new();
    let (status, ended) = loop {
        match rx.recv_timeout(Duration::from_millis(10)) {
            Ok((Ok(s), at)) => break (s, at),
            Ok((Err(e), _)) => return Err(ExecError::Wait(e)),
            Err(_) => {}
        }
        if stop_on_interrupt && nsperf_core::signal::interrupted() {
            // SIGINT first: an engine stops at a safe point and removes what it created
            // (its files, on a server too); SIGKILL for whatever is still there after.
            kill_group(pid, libc::SIGINT);
            let _ = rx.recv_timeout(INTERRUPT_GRACE);
            kill_group(pid, libc::SIGKILL);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            return Err(ExecError::Interrupted);
        }
        if t0.elapsed() > timeout {
            kill_group(pid, libc::SIGKILL);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            return Err(ExecError::Timeout {
                command: what.to_string(),
                timeout_s: timeout.as_secs_f64(),
            });
        }
        if let Some(s) = sampler.as_mut() {
            s.tick(&mut cpu);
        }
    };
    // Whatever the child left running in its group goes with it.
    kill_group(pid, libc::SIGKILL);
    Ok(ChildRun {
        status,
        stdout: to.join().unwrap_or_default(),
        stderr: te.join().unwrap_or_default(),
        elapsed: ended.duration_since(t0),
        cpu,
    })
}

/// A background child (a server, a capture), killed with its group when finished or
/// dropped. Its standard output is read line by line.
pub(super) struct Background {
    child: Child,
    lines: Receiver<String>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
}

impl Background {
    pub(super) fn spawn(
        cmd: Command,
        input: Option<Vec<u8>>,
        what: &str,
    ) -> Result<Self, ExecError> {
        Self::start(cmd, input, what, false)
    }

    /// As [`Background::spawn`], and the child is killed when this process dies, even by
    /// `kill -9` (a service must not outlive the run).
    pub(super) fn spawn_tied(
        cmd: Command,
        input: Option<Vec<u8>>,
        what: &str,
    ) -> Result<Self, ExecError> {
        Self::start(cmd, input, what, true)
    }

    fn start(
        cmd: Command,
        input: Option<Vec<u8>>,
        what: &str,
        tied: bool,
    ) -> Result<Self, ExecError> {
        let mut child = spawn(cmd, input, what, tied)?;
        // Drain stderr so the child never blocks on a full pipe; kept for `ended`.
        let stderr = Some(drain(child.stderr.take().expect("piped"), u64::MAX));
        let out = child.stdout.take().expect("piped");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Background {
            child,
            lines,
            stderr,
        })
    }

    /// `None` while the child runs; once it ended, its exit status and the last line of its
    /// stderr.
    pub(super) fn ended(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok().flatten()?;
        let err = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let err = String::from_utf8_lossy(&err);
        let last = match last_line(&err) {
            "" => String::new(),
            l => format!(": {l}"),
        };
        Some(format!("{}{last}", exit_status(status)))
    }

    /// The next line of its output, waiting up to `timeout`; `None` when it ended or the
    /// time ran out (or Ctrl-C).
    pub(super) fn next_line(&mut self, timeout: Duration) -> Option<String> {
        let t0 = Instant::now();
        while t0.elapsed() < timeout && !nsperf_core::signal::interrupted() {
            match self.lines.recv_timeout(Duration::from_millis(20)) {
                Ok(l) => return Some(l),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
        None
    }

    /// The next line of its output when one is there, without waiting.
    pub(super) fn try_line(&mut self) -> Option<String> {
        self.lines.try_recv().ok()
    }

    /// Waits up to `grace` for the child to end by itself, then kills its group.
    pub(super) fn finish(mut self, grace: Duration) {
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_group(self.child.id(), libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// Sends SIGINT to the group (a capture flushes its file), then finishes.
    pub(super) fn interrupt(self, grace: Duration) {
        kill_group(self.child.id(), libc::SIGINT);
        self.finish(grace);
    }

    /// Sends SIGINT to the group and reads the rest of what the child prints until it closes
    /// its output (at most `grace`; then its group is killed): a step child's report of what
    /// it did until then. Gives that output, and how the child ended (its exit status and
    /// the last line of its stderr) when it did.
    pub(super) fn interrupt_output(mut self, grace: Duration) -> (String, Option<String>) {
        kill_group(self.child.id(), libc::SIGINT);
        let t0 = Instant::now();
        let mut out = String::new();
        while t0.elapsed() < grace {
            match self.lines.recv_timeout(Duration::from_millis(20)) {
                Ok(l) => {
                    out.push_str(&l);
                    out.push('\n');
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        while t0.elapsed() < grace {
            if let Some(how) = self.ended() {
                return (out, Some(how));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let how = self.ended();
        self.finish(Duration::ZERO);
        (out, how)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill_group(self.child.id(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_timeout_kills() {
        let mut cmd = Command::new("sleep");
        cmd.arg("5");
        let t0 = Instant::now();
        let e = run(cmd, None, "sleep 5", Duration::from_millis(200), false).unwrap_err();
        assert!(matches!(e, ExecError::Timeout { .. }));
        assert!(t0.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn input_reaches_the_child_and_failures_are_classified() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "cat; exit 3"]);
        let r = run(
            cmd,
            Some(b"spec".to_vec()),
            "sh",
            Duration::from_secs(10),
            false,
        )
        .unwrap();
        assert_eq!(r.stdout, b"spec");
        let e = r.check("sh").unwrap_err().to_string();
        assert!(e.contains("exit 3, Input"), "{e}");
    }

    #[test]
    fn background_lines_arrive() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo ready; sleep 5"]);
        let mut bg = Background::spawn(cmd, None, "sh").unwrap();
        assert_eq!(
            bg.next_line(Duration::from_secs(5)).as_deref(),
            Some("ready")
        );
        let t0 = Instant::now();
        bg.finish(Duration::from_millis(50));
        assert!(t0.elapsed() < Duration::from_secs(2));
    }
}
