//! Step child processes, the one mechanism under the plan executor's children
//! (`exec/child.rs`) and the agent's `nsperf step` children (`agent/service.rs`): each starts
//! in its own process group (killing the group takes whatever it started along), optionally
//! tied to this process's life, its output pipes drained by threads so it never blocks, its
//! CPU use per core sampled about once a second while it runs.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nsperf_core::cpu::CpuSampler;
use nsperf_core::report::CpuInterval;

/// Starts `cmd` in its own process group with its standard output and error piped, and its
/// standard input piped when `stdin` (else `/dev/null`). `tied`: the child is killed when this
/// process dies, even by `kill -9` (`PR_SET_PDEATHSIG`).
pub(crate) fn spawn(mut cmd: Command, stdin: bool, tied: bool) -> std::io::Result<Child> {
    cmd.stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if tied {
        // SAFETY: getpid before the fork; prctl, getppid and kill are async-signal-safe and
        // nothing else runs between fork and exec.
        let parent = unsafe { libc::getpid() };
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died between the fork and the prctl: go now.
                if libc::getppid() != parent {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
                Ok(())
            });
        }
    }
    cmd.spawn()
}

/// Sends `sig` to the process group of child `pid` (started by [`spawn`], so its group id is
/// its pid).
pub(crate) fn kill_group(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; the group is the child's own.
    unsafe {
        libc::kill(-(pid as libc::pid_t), sig);
    }
}

/// Reads `r` to its end (at most `max` bytes kept; reading stops there) on a thread.
pub(crate) fn drain(r: impl Read + Send + 'static, max: u64) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.take(max).read_to_end(&mut v);
        v
    })
}

/// The last line of `text` that is not blank, trimmed ("" when there is none): what a failed
/// child's standard error says last.
pub(crate) fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// CPU use per core while a child runs: one [`CpuInterval`] per second or more.
pub(crate) struct CpuTicker {
    sampler: CpuSampler,
    role: &'static str,
    t0: Instant,
    last: Instant,
}

impl CpuTicker {
    /// Starts at `t0`, the child's start; intervals carry `role`.
    pub(crate) fn new(role: &'static str, t0: Instant) -> Self {
        CpuTicker {
            sampler: CpuSampler::new(),
            role,
            t0,
            last: t0,
        }
    }

    /// Appends an interval to `cpu` when a second or more passed since the last one.
    pub(crate) fn tick(&mut self, cpu: &mut Vec<CpuInterval>) {
        let since = self.last.elapsed();
        if since >= Duration::from_secs(1) {
            cpu.push(CpuInterval {
                role: self.role.into(),
                start_s: self.last.duration_since(self.t0).as_secs_f64(),
                length_s: since.as_secs_f64(),
                cpu: self.sampler.sample(since.as_secs_f64()),
            });
            self.last = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drained_output_stops_at_its_limit_and_last_line_skips_blanks() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "printf 'one\\ntwo  \\n\\n  \\n'"]);
        let mut child = spawn(cmd, false, false).unwrap();
        let all = drain(child.stdout.take().unwrap(), u64::MAX);
        let _ = child.wait();
        let all = all.join().unwrap();
        assert_eq!(last_line(&String::from_utf8_lossy(&all)), "two");
        assert_eq!(last_line(""), "");
        let short = drain(&b"abcdef"[..], 3).join().unwrap();
        assert_eq!(short, b"abc");
    }
}
