//! The errors of plan loading, running and storing, each with its exit-code class.

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
    /// The child's `--json` output could not be read.
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
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl Classify for ExecError {
    fn failure(&self) -> Failure {
        match self {
            ExecError::Interrupted => Failure::Interrupted,
            ExecError::Skip(_) => Failure::Permission,
            _ => Failure::Runtime,
        }
    }
}

/// A result-store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite refused an operation.
    #[error("result store {path}: {source}")]
    Sqlite {
        /// The database file.
        path: String,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// No experiment with that id (or none at all for `latest`).
    #[error("no experiment {0} in the result store")]
    NoExperiment(String),
    /// `--resume` found nothing to resume.
    #[error("nothing to resume: {0}")]
    NothingToResume(String),
    /// A stored value could not be decoded.
    #[error("result store holds a bad value: {0}")]
    Corrupt(String),
}

impl Classify for StoreError {
    fn failure(&self) -> Failure {
        match self {
            StoreError::NoExperiment(_) | StoreError::NothingToResume(_) => Failure::Usage,
            StoreError::Corrupt(_) => Failure::Input,
            StoreError::Sqlite { .. } => Failure::Runtime,
        }
    }
}
