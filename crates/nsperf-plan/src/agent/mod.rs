//! Many hosts: `nsperf agent` runs step specifications for a coordinator (`nsperf run` with
//! `[hosts]`), and the coordinator drives many agents on one clock.
//!
//! - `proto`: the messages and their framing (fuzzed).
//! - `session`: the agent's end of a session as a pure state machine (key, allow list, steps).
//! - `clock`: an agent's clock against the coordinator's, with its error bound.
//! - `service`: the agent's shell (connections, `nsperf step` children, CPU sampling).
//! - `fleet`: the coordinator's side (sessions, clocks, start barriers, outcomes).
//! - `launch`: reaching an agent (TCP), or starting one (ssh, this host).
//! - `batch`: one agent per task of a Slurm allocation, one per pod of a Kubernetes Indexed Job.

mod batch;
mod clock;
mod fleet;
mod launch;
mod proto;
mod service;
mod session;
#[cfg(test)]
mod tests;

pub use batch::{
    Announcement, AnnouncementError, Hostlist, HostlistError, K8S_AGENT_PORT, K8S_PSK_PATH,
    K8sAgents, K8sDeployment, K8sError, Kubectl, MAX_HOSTS, SlurmAgents, SlurmJob, SlurmScript,
    SlurmScriptError, SrunStep, fuzz_hostlist, k8s_links, slurm_links,
};
pub use clock::{ClockOffset, ClockSample};
pub use fleet::{Agent, AgentLink, CLOCK_PROBES, Fleet, HostFailure, StepId, StepOutcome};
pub(crate) use launch::stdio_link;
pub use launch::{
    AgentOptions, CONNECT_TIMEOUT, Launch, SshTarget, ensure_binary, file_hash, open,
};
pub use proto::{
    AGENT_PROTOCOL_VERSION, AgentProtoError, FromAgent, ProcessUse, StepClass, StepEnd, ToAgent,
    fuzz_frames,
};
pub use service::{
    ChildStepRunner, Event, MAX_SESSIONS, MockStepRunner, RunningStep, SILENT_COORDINATOR,
    SessionEnd, StepRunner, serve_listener, serve_session,
};
pub use session::{AgentAction, AgentPolicy, AgentSession, StepSignal, auth_answer};

/// A launcher program's result (ssh, kubectl): its trimmed standard output when it succeeded,
/// otherwise `"{what} failed ({status}): {its last non-empty error line}"`.
fn stdout_or_last_error(out: std::process::Output, what: &str) -> Result<String, String> {
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(format!("{what} failed ({}): {}", out.status, last.trim()))
}
