//! The errors of plan loading and running, each with its exit-code class.

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

/// Why a plan file was refused. The message names the place in the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The bytes are not valid UTF-8.
    #[error("plan is not UTF-8 text")]
    NotUtf8,
    /// The TOML does not parse, or has an unknown key or a value of the wrong type.
    #[error("{0}")]
    Syntax(String),
    /// The TOML parses but says something impossible.
    #[error("{0}")]
    Invalid(String),
}

impl Classify for PlanError {
    fn failure(&self) -> Failure {
        Failure::Input
    }
}

/// A failure of one step's run (the runner records it and goes on with the plan).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// A child process could not be started.
    #[error("could not start `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The child ran but failed (exit status not 0).
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Exit status as printed.
        status: String,
        /// The last line of its stderr.
        stderr: String,
    },
    /// The child ran longer than its timeout and was killed.
    #[error("`{command}` ran past its timeout of {timeout_s} s and was killed")]
    Timeout {
        /// The command line.
        command: String,
        /// The timeout.
        timeout_s: f64,
    },
    /// A step child's report (its JSON lines of [`crate::step::StepReport`]) could not be read.
    #[error("could not read the JSON of `{command}`: {reason}")]
    Output {
        /// The command line.
        command: String,
        /// Why.
        reason: String,
    },
    /// The step needs something this host lacks (root, a program); the run is skipped.
    #[error("{0}")]
    Skip(String),
    /// Interrupted by a signal.
    #[error("interrupted")]
    Interrupted,
    /// The plan's lab name is taken by a lab another live process owns (another `nsperf
    /// run` of a plan with the same `[lab] name`, say): that lab is never touched.
    #[error(
        "lab {lab} belongs to another running process (pid {pid}); give the plan another [lab] name or leave it out"
    )]
    LabTaken {
        /// The lab name.
        lab: String,
        /// The owner's process id.
        pid: u32,
    },
    /// A host of `[hosts]` could not be reached, refused, or was lost.
    #[error("{0}")]
    Host(#[from] crate::agent::HostFailure),
    /// The lab failed (up, set, down, a site's command) for a reason other than root.
    #[error("{0}")]
    Lab(nsperf_lab::LabError),
    /// The binary running now cannot be found (to start step children).
    #[error("cannot find the nsperf binary: {0}")]
    SelfExe(std::io::Error),
    /// A step's request could not be serialised for its child.
    #[error("cannot write the step spec: {0}")]
    StepSpec(serde_json::Error),
    /// Waiting for a child failed.
    #[error("waiting for a child: {0}")]
    Wait(std::io::Error),
    /// An exec step with no program.
    #[error("empty command")]
    EmptyCommand,
    /// Something that runs in a lab site, with no lab up (`what` says what).
    #[error("{0} needs the lab up")]
    NeedsLab(String),
    /// The step runs on lab sites' agents, and the lab is not up.
    #[error("the lab is not up")]
    LabNotUp,
    /// A server did not report listening in time.
    #[error("{what} did not start listening within {secs} s")]
    NotListening {
        /// The server.
        what: String,
        /// The time it had.
        secs: u64,
    },
    /// A service's directory does not resolve.
    #[error("{what} did not start: directory {dir}: {source}")]
    ServiceDir {
        /// The service.
        what: String,
        /// Its directory as the plan gives it.
        dir: String,
        /// Why.
        source: std::io::Error,
    },
    /// A service (or a server) ended or never answered while starting.
    #[error("{what} did not start ({why})")]
    DidNotStart {
        /// The service.
        what: String,
        /// Its exit status and last error line, or the time it had.
        why: String,
    },
    /// A step goes through a service that is not running.
    #[error("service {0} is not running")]
    ServiceNotRunning(String),
    /// A service's answer (its URL) cannot be a step's target.
    #[error("service {name}: {reason}")]
    ServiceTarget {
        /// The service.
        name: String,
        /// Why.
        reason: String,
    },
    /// A running service ended.
    #[error("{what} stopped ({how})")]
    Stopped {
        /// The service.
        what: String,
        /// Its exit status and last error line.
        how: String,
    },
    /// A lab or service failed earlier; every later step that needs it fails with the same
    /// one-line reason.
    #[error("{0}")]
    FailedBefore(String),
    /// A step names hosts, and the plan's hosts are not connected.
    #[error("the plan's hosts are not connected")]
    HostsNotConnected,
    /// A step names a host the fleet does not hold.
    #[error("host {0} is not connected")]
    HostNotConnected(String),
    /// The agent of a lab site could not be started.
    #[error("starting the agent of lab site {site}: {source}")]
    SiteAgent {
        /// The site.
        site: String,
        /// Why.
        source: nsperf_lab::LabError,
    },
    /// Every host's part of a step failed (their errors, joined).
    #[error("every host failed: {0}")]
    EveryHostFailed(String),
    /// A step on `[hosts]` that cannot run there as written.
    #[error("{0}")]
    NotOnHosts(&'static str),
    /// The server host of a network step on `[hosts]` did not listen.
    #[error("the server on {host} did not start listening: {why}")]
    HostServer {
        /// The server host.
        host: String,
        /// Its answer.
        why: String,
    },
    /// Analysing a step's capture failed.
    #[error("capture analysis: {0}")]
    Capture(#[from] nsperf_trace::TraceError),
    /// Writing a step's capture analysis failed.
    #[error("capture analysis: {0}")]
    CaptureFindings(std::io::Error),
    /// The capture analysis could not be put in the report.
    #[error("capture analysis: {0}")]
    CaptureJson(serde_json::Error),
    /// A failure the mock executor plays (`--features mock`).
    #[error("{0}")]
    Mock(String),
}

impl Classify for ExecError {
    fn failure(&self) -> Failure {
        match self {
            ExecError::Interrupted => Failure::Interrupted,
            ExecError::Skip(_) => Failure::Permission,
            ExecError::LabTaken { .. } => Failure::Unsafe,
            ExecError::Host(h) => h.class(),
            _ => Failure::Runtime,
        }
    }
}

/// Why a plan's execution stopped before it began or could not be stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The result store failed.
    #[error(transparent)]
    Store(#[from] nsperf_results::StoreError),
    /// The run was refused before any step: nothing was written to the store.
    #[error(transparent)]
    Refused(ExecError),
}

impl Classify for RunError {
    fn failure(&self) -> Failure {
        match self {
            RunError::Store(e) => e.failure(),
            RunError::Refused(e) => e.failure(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed variants say what `ExecError::Other` said, word for word, and keep its exit
    /// class (a runtime failure).
    #[test]
    fn typed_errors_keep_the_one_line_messages_and_the_class() {
        let io = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let cases = [
            (ExecError::EmptyCommand, "empty command".to_string()),
            (
                ExecError::NeedsLab("a capture".into()),
                "a capture needs the lab up".into(),
            ),
            (ExecError::LabNotUp, "the lab is not up".into()),
            (
                ExecError::NotListening {
                    what: "server".into(),
                    secs: 10,
                },
                "server did not start listening within 10 s".into(),
            ),
            (
                ExecError::ServiceDir {
                    what: "service s".into(),
                    dir: "/x".into(),
                    source: io(),
                },
                format!("service s did not start: directory /x: {}", io()),
            ),
            (
                ExecError::DidNotStart {
                    what: "service s".into(),
                    why: "exit 3".into(),
                },
                "service s did not start (exit 3)".into(),
            ),
            (
                ExecError::ServiceNotRunning("s".into()),
                "service s is not running".into(),
            ),
            (
                ExecError::Stopped {
                    what: "service s".into(),
                    how: "exit 1".into(),
                },
                "service s stopped (exit 1)".into(),
            ),
            (
                ExecError::HostsNotConnected,
                "the plan's hosts are not connected".into(),
            ),
            (
                ExecError::HostNotConnected("h".into()),
                "host h is not connected".into(),
            ),
            (
                ExecError::EveryHostFailed("h: no".into()),
                "every host failed: h: no".into(),
            ),
            (
                ExecError::HostServer {
                    host: "h".into(),
                    why: "no answer".into(),
                },
                "the server on h did not start listening: no answer".into(),
            ),
            (
                ExecError::SelfExe(io()),
                format!("cannot find the nsperf binary: {}", io()),
            ),
            (
                ExecError::Wait(io()),
                format!("waiting for a child: {}", io()),
            ),
            (
                ExecError::CaptureFindings(io()),
                format!("capture analysis: {}", io()),
            ),
            (
                ExecError::Lab(nsperf_lab::LabError::Usage("bad".into())),
                nsperf_lab::LabError::Usage("bad".into()).to_string(),
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
            assert_eq!(e.failure(), Failure::Runtime, "{e}");
        }
    }
}
