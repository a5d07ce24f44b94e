//! Slurm: one agent per task of the allocation this process runs in (under `salloc` or in an
//! `sbatch` script), started by `srun` as one job step, and the `sbatch` script that runs a
//! plan's coordinator on an allocation.
//!
//! Each task runs `nsperf agent --listen 0.0.0.0:PORT --psk-file F --announce`; `srun
//! --label` prefixes every line with the task's number, so the coordinator reads each task's
//! address from srun's standard output, then connects to it over TCP with the key. The step
//! lives as long as the returned [`SrunStep`]: stopping it sends SIGTERM to srun, which
//! forwards it to every task, and the agents end (their steps with them).

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::num::NonZeroU32;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Announcement, Hostlist};
use crate::agent::fleet::{AgentLink, HostFailure};
use crate::agent::launch::{AgentOptions, Launch, open};
use crate::agent::proto::StepClass;

/// The host name of failures that concern the whole launch.
const SLURM: &str = "slurm";
/// Lines of srun's standard error kept for the error message.
const STDERR_TAIL: usize = 20;

/// The allocation this process runs in, from the environment Slurm gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmJob {
    /// `SLURM_JOB_ID`.
    pub job_id: String,
    /// `SLURM_JOB_NODELIST`, expanded.
    pub nodes: Hostlist,
    /// `SLURM_NTASKS`, when the allocation was made with a task count.
    pub tasks: Option<NonZeroU32>,
}

impl SlurmJob {
    /// The allocation of this process's environment; fails when there is none.
    pub fn from_env() -> Result<Self, HostFailure> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// The allocation described by `var` (a lookup of Slurm's environment variables).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, HostFailure> {
        let fail = |reason: String| HostFailure::Unreachable {
            host: SLURM.into(),
            reason,
        };
        let job_id = var("SLURM_JOB_ID").filter(|j| !j.trim().is_empty()).ok_or_else(|| {
            fail("not inside a Slurm allocation (no SLURM_JOB_ID): run under salloc, or submit the script of `nsperf agent slurm-script` with sbatch".into())
        })?;
        let job_id = job_id.trim().to_string();
        if !job_id.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
            return Err(fail(format!("SLURM_JOB_ID {job_id:?} is not a job id")));
        }
        let list = var("SLURM_JOB_NODELIST")
            .or_else(|| var("SLURM_NODELIST"))
            .ok_or_else(|| fail(format!("job {job_id}: no SLURM_JOB_NODELIST")))?;
        let nodes = list
            .parse::<Hostlist>()
            .map_err(|e| fail(format!("job {job_id}: SLURM_JOB_NODELIST: {e}")))?;
        let tasks = var("SLURM_NTASKS").and_then(|t| t.trim().parse().ok());
        Ok(SlurmJob {
            job_id,
            nodes,
            tasks,
        })
    }
}

/// Agents for a plan on the allocation: what to run and how long to wait for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmAgents {
    /// Agents to start; `None`: one per task of the allocation (`SLURM_NTASKS`), or one per
    /// node when the allocation has no task count.
    pub tasks: Option<NonZeroU32>,
    /// The port each agent listens on; 0 (the default) picks a free one on each node, so
    /// tasks sharing a node never collide.
    pub port: u16,
    /// The key file, at a path every node reads (a shared file system): the agents need it,
    /// and the coordinator proves it.
    pub psk_file: PathBuf,
    /// Step classes the agents run.
    pub allow: Vec<StepClass>,
    /// The nsperf binary the tasks run, at a path every node reads.
    pub exe: PathBuf,
    /// How long srun has to start every agent (the allocation may be busy).
    pub timeout: Duration,
}

impl SlurmAgents {
    /// The default wait for srun to start every agent.
    pub const TIMEOUT: Duration = Duration::from_secs(60);

    /// One agent per task of the allocation on a free port, running the default step
    /// classes.
    pub fn new(psk_file: PathBuf, exe: PathBuf) -> Self {
        SlurmAgents {
            tasks: None,
            port: 0,
            psk_file,
            allow: StepClass::DEFAULT.to_vec(),
            exe,
            timeout: Self::TIMEOUT,
        }
    }

    /// How many agents on `job`, and whether one per node.
    fn count(&self, job: &SlurmJob) -> (u32, bool) {
        match self.tasks.or(job.tasks) {
            Some(n) => (n.get(), false),
            None => (job.nodes.len().max(1) as u32, true),
        }
    }

    /// The `srun` command that starts the agents on `job`.
    pub fn srun_command(&self, job: &SlurmJob) -> Command {
        let (n, per_node) = self.count(job);
        let mut c = Command::new("srun");
        c.arg(format!("--jobid={}", job.job_id))
            .arg("--job-name=nsperf-agents")
            .arg(format!("--ntasks={n}"));
        if per_node {
            c.arg("--ntasks-per-node=1");
        }
        // --overlap: the agents' step shares the allocation's CPUs with other steps;
        // --cpu-bind=none: an agent is not pinned to one CPU (its steps use the node).
        c.args([
            "--label",
            "--kill-on-bad-exit=1",
            "--overlap",
            "--cpu-bind=none",
        ]);
        c.arg(&self.exe).args(self.agent_args());
        c
    }

    fn agent_args(&self) -> Vec<String> {
        let mut v = vec![
            "agent".to_string(),
            "--listen".into(),
            format!("0.0.0.0:{}", self.port),
            "--psk-file".into(),
            self.psk_file.display().to_string(),
            "--announce".into(),
        ];
        if !self.allow.is_empty() {
            v.push("--allow".into());
            v.push(
                self.allow
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        v
    }
}

/// The job step running the agents (srun). Dropping it stops them.
#[derive(Debug)]
pub struct SrunStep {
    child: Child,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// Told when srun's standard error ended.
    stderr_end: Option<Receiver<()>>,
}

impl SrunStep {
    /// srun's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// srun's status, once it ended.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last lines srun (and the agents) wrote on standard error.
    pub fn last_messages(&self) -> Vec<String> {
        self.stderr
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Ends the step: SIGTERM to srun, which forwards it to every agent; SIGKILL after
    /// `grace`.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.try_wait() {
            return Some(s);
        }
        // SAFETY: kill() on our own child's pid, which is not reaped yet.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if let Some(s) = self.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }

    /// A failure of the launch with srun's most telling line: its last error that is not
    /// the summary of the tasks' ends (the error that made them end comes before it).
    fn failure(&mut self, what: String) -> HostFailure {
        if let Some(end) = self.stderr_end.take() {
            let _ = end.recv_timeout(Duration::from_secs(1));
        }
        let last = self.last_messages();
        let summary = |l: &str| l.contains("Exited with exit code") || l.ends_with("Killed");
        let telling = last
            .iter()
            .rev()
            .find(|l| l.contains("error") && !summary(l))
            .or(last.last());
        let reason = match telling {
            Some(l) => format!("{what}: {}", l.trim()),
            None => what,
        };
        HostFailure::Unreachable {
            host: SLURM.into(),
            reason,
        }
    }
}

impl Drop for SrunStep {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// `N: nsperf-agent HOST PORT` (srun `--label`'s prefix, then the announcement).
fn labelled(line: &str) -> Option<(u32, Announcement)> {
    let (task, rest) = line.split_once(':')?;
    Some((task.trim().parse().ok()?, rest.parse().ok()?))
}

/// Calls `each` with every line `from` gives (invalid UTF-8 replaced) until it ends, on a
/// thread of its own; the reader drains the pipe to its end even once `each` returned false
/// (so srun never writes into a closed pipe), then calls `end`.
fn spawn_lines(
    from: impl Read + Send + 'static,
    mut each: impl FnMut(String) -> bool + Send + 'static,
    end: impl FnOnce() + Send + 'static,
) {
    std::thread::spawn(move || {
        let mut r = BufReader::new(from);
        let mut buf = Vec::new();
        let mut wanted = true;
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if wanted {
                        let line = String::from_utf8_lossy(&buf);
                        wanted = each(line.trim_end_matches(['\n', '\r']).to_string());
                    }
                }
            }
        }
        end();
    });
}

/// Starts srun and its readers.
fn start_srun(
    agents: &SlurmAgents,
    job: &SlurmJob,
) -> Result<(SrunStep, Receiver<Option<String>>), HostFailure> {
    let mut cmd = agents.srun_command(job);
    // Its own process group: Ctrl-C reaches the coordinator, which ends the step itself.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| HostFailure::Unreachable {
        host: SLURM.into(),
        reason: format!("cannot start srun: {e}"),
    })?;
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let (end_tx, end_rx) = channel();
    let step = SrunStep {
        child,
        stderr: Arc::new(Mutex::new(VecDeque::new())),
        stderr_end: Some(end_rx),
    };
    let (tx, rx) = channel();
    if let Some(out) = out {
        let end = tx.clone();
        spawn_lines(
            out,
            move |l| tx.send(Some(l)).is_ok(),
            move || {
                let _ = end.send(None);
            },
        );
    }
    if let Some(err) = err {
        let tail = step.stderr.clone();
        spawn_lines(
            err,
            move |l| {
                eprintln!("{l}");
                if let Ok(mut t) = tail.lock() {
                    if t.len() == STDERR_TAIL {
                        t.pop_front();
                    }
                    t.push_back(l);
                }
                true
            },
            move || {
                let _ = end_tx.send(());
            },
        );
    }
    Ok((step, rx))
}

/// Reads announcements until every task of `0..n` gave one.
fn announcements(
    step: &mut SrunStep,
    rx: &Receiver<Option<String>>,
    n: u32,
    timeout: Duration,
) -> Result<BTreeMap<u32, Announcement>, HostFailure> {
    let mut got = BTreeMap::new();
    let deadline = Instant::now() + timeout;
    while (got.len() as u32) < n {
        if nsperf_core::signal::interrupted() {
            return Err(step.failure("interrupted while srun started the agents".into()));
        }
        if Instant::now() >= deadline {
            return Err(HostFailure::Timeout {
                host: SLURM.into(),
                seconds: timeout.as_secs_f64(),
                waiting_for: format!("srun to start the agents ({} of {n} announced)", got.len()),
            });
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(line)) => {
                if let Some((task, a)) = labelled(&line)
                    && task < n
                {
                    got.insert(task, a);
                }
            }
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                let status = step.stop(Duration::from_secs(2));
                let how = status.map_or("ended".to_string(), |s| format!("ended ({s})"));
                return Err(step.failure(format!(
                    "srun {how} before every agent announced itself ({} of {n})",
                    got.len()
                )));
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some(s) = step.try_wait() {
                    // Lines still in the pipe come first.
                    while let Ok(Some(line)) = rx.try_recv() {
                        if let Some((task, a)) = labelled(&line)
                            && task < n
                        {
                            got.insert(task, a);
                        }
                    }
                    if (got.len() as u32) < n {
                        return Err(step.failure(format!(
                            "srun ended ({s}) before every agent announced itself ({} of {n})",
                            got.len()
                        )));
                    }
                }
            }
        }
    }
    Ok(got)
}

/// Starts one agent per task of the allocation this process runs in and connects to each:
/// the links (named `slurm-TASK`, in task order) and the step that runs the agents (keep it
/// for as long as the agents are needed; dropping it stops them). Fails fast outside an
/// allocation, when the key cannot be read, when srun fails, or when an agent cannot be
/// reached.
pub fn slurm_links(agents: &SlurmAgents) -> Result<(Vec<AgentLink>, SrunStep), HostFailure> {
    let job = SlurmJob::from_env()?;
    let psk =
        nsperf_net::read_key_file(&agents.psk_file).map_err(|e| HostFailure::Unreachable {
            host: SLURM.into(),
            reason: e.to_string(),
        })?;
    let (n, _) = agents.count(&job);
    let (mut step, rx) = start_srun(agents, &job)?;
    let found = announcements(&mut step, &rx, n, agents.timeout)?;
    let opts = AgentOptions {
        allow: agents.allow.clone(),
    };
    let mut links = Vec::with_capacity(found.len());
    for (task, a) in found {
        let launch = Launch::Tcp { addr: a.addr() };
        links.push(open(
            &format!("slurm-{task}"),
            &launch,
            &opts,
            Some(psk.clone()),
            &agents.exe,
        )?);
    }
    Ok((links, step))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn the_job_comes_from_slurms_environment() {
        let j = SlurmJob::from_vars(vars(&[
            ("SLURM_JOB_ID", "4242"),
            ("SLURM_JOB_NODELIST", "node[01-03],gpu7"),
            ("SLURM_NTASKS", "8"),
        ]))
        .unwrap();
        assert_eq!(j.job_id, "4242");
        assert_eq!(j.nodes.hosts(), ["node01", "node02", "node03", "gpu7"]);
        assert_eq!(j.tasks, NonZeroU32::new(8));

        let outside = SlurmJob::from_vars(vars(&[])).unwrap_err();
        assert!(
            outside
                .to_string()
                .contains("not inside a Slurm allocation"),
            "{outside}"
        );
        assert_eq!(outside.class(), nsperf_core::Failure::Connect);
        let bad = SlurmJob::from_vars(vars(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NODELIST", "n[1-"),
        ]))
        .unwrap_err();
        assert!(bad.to_string().contains("never closed"), "{bad}");
        let bad = SlurmJob::from_vars(vars(&[("SLURM_JOB_ID", "7; rm")])).unwrap_err();
        assert!(bad.to_string().contains("not a job id"), "{bad}");
    }

    fn args(c: &Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn srun_starts_one_announcing_agent_per_task() {
        let job = SlurmJob::from_vars(vars(&[
            ("SLURM_JOB_ID", "99"),
            ("SLURM_JOB_NODELIST", "n[1-3]"),
        ]))
        .unwrap();
        let mut a = SlurmAgents::new("/home/u/.nsperf.psk".into(), "/sw/nsperf".into());
        a.allow = vec![StepClass::Net, StepClass::Io];
        let c = a.srun_command(&job);
        assert_eq!(c.get_program(), "srun");
        assert_eq!(
            args(&c),
            [
                "--jobid=99",
                "--job-name=nsperf-agents",
                "--ntasks=3",
                "--ntasks-per-node=1",
                "--label",
                "--kill-on-bad-exit=1",
                "--overlap",
                "--cpu-bind=none",
                "/sw/nsperf",
                "agent",
                "--listen",
                "0.0.0.0:0",
                "--psk-file",
                "/home/u/.nsperf.psk",
                "--announce",
                "--allow",
                "net,io",
            ]
        );
        // A task count (the plan's, else the allocation's) replaces one per node.
        a.tasks = NonZeroU32::new(6);
        a.port = 5400;
        let v = args(&a.srun_command(&job));
        assert!(v.contains(&"--ntasks=6".to_string()));
        assert!(!v.iter().any(|x| x.starts_with("--ntasks-per-node")));
        assert!(v.contains(&"0.0.0.0:5400".to_string()));
        let job8 = SlurmJob {
            tasks: NonZeroU32::new(8),
            ..job
        };
        a.tasks = None;
        assert!(args(&a.srun_command(&job8)).contains(&"--ntasks=8".to_string()));
    }

    #[test]
    fn labelled_lines_name_their_task() {
        assert_eq!(
            labelled("0: nsperf-agent node01 40123"),
            Some((
                0,
                Announcement {
                    host: "node01".into(),
                    port: 40123
                }
            ))
        );
        // srun pads the label when there are ten tasks or more.
        assert_eq!(labelled(" 7: nsperf-agent n 5").map(|(t, _)| t), Some(7));
        assert_eq!(labelled("nsperf-agent n 5"), None);
        assert_eq!(labelled("0: nsperf agent: listening"), None);
        assert_eq!(labelled("x: nsperf-agent n 5"), None);
    }

    #[test]
    fn outside_an_allocation_nothing_is_started() {
        if std::env::var_os("SLURM_JOB_ID").is_some() {
            return;
        }
        let a = SlurmAgents::new("/nonexistent".into(), "/nonexistent".into());
        let e = slurm_links(&a).unwrap_err();
        assert!(matches!(e, HostFailure::Unreachable { .. }));
        assert!(e.to_string().contains("SLURM_JOB_ID"), "{e}");
    }
}
