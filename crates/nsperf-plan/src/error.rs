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
    /// Anything else.
    #[error("{0}")]
    Other(String),
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
