//! Errors of the lab engine, each with its failure class (hence exit code).

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

/// What went wrong in a lab operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// A bad value for a link flag or name (exit 2).
    #[error("invalid {what} '{input}': {reason}")]
    Value {
        /// What was being parsed.
        what: &'static str,
        /// The text given.
        input: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A bad request that is not about one value (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A schedule file is malformed (exit 3).
    #[error("schedule {file}, line {line}: {message}")]
    Schedule {
        /// The file name as given.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A lab of that name already exists (exit 2).
    #[error("lab '{0}' already exists (remove it with `nsperf lab down {0}`)")]
    Exists(String),
    /// No lab of that name (exit 2).
    #[error("no lab named '{0}' (see `nsperf lab list`)")]
    NotFound(String),
    /// The lab belongs to another live process (exit 10).
    #[error(
        "lab '{lab}' belongs to {owner}, which is still running (add --force to remove it anyway)"
    )]
    Owned {
        /// The lab.
        lab: String,
        /// Its owner.
        owner: nsperf_core::process::ProcessId,
    },
    /// Labs need root (exit 4).
    #[error("{0} needs root (network namespaces and TUN devices)")]
    NeedsRoot(&'static str),
    /// The kernel lacks something a lab needs (exit 9).
    #[error("{0}")]
    Unsupported(String),
    /// An external command (`ip`) failed (exit 1).
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its error output, one line.
        stderr: String,
    },
    /// The lab's emulator is not running or did not answer (exit 1).
    #[error("the emulator of lab '{lab}' {problem}")]
    Emulator {
        /// The lab.
        lab: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A system call or file operation failed (exit 1, or 4 for permission).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl LabError {
    /// A bad value.
    pub fn value(what: &'static str, input: &str, reason: &'static str) -> Self {
        LabError::Value {
            what,
            input: input.to_string(),
            reason,
        }
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        LabError::Io {
            context: context.into(),
            source,
        }
    }
}

impl Classify for LabError {
    fn failure(&self) -> Failure {
        match self {
            LabError::Value { .. }
            | LabError::Usage(_)
            | LabError::Exists(_)
            | LabError::NotFound(_) => Failure::Usage,
            LabError::Schedule { .. } => Failure::Input,
            LabError::Owned { .. } => Failure::Unsafe,
            LabError::NeedsRoot(_) => Failure::Permission,
            LabError::Unsupported(_) => Failure::Unsupported,
            LabError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                Failure::Permission
            }
            LabError::Command { .. } | LabError::Emulator { .. } | LabError::Io { .. } => {
                Failure::Runtime
            }
        }
    }
}

/// Result of lab operations.
pub type Result<T, E = LabError> = std::result::Result<T, E>;
