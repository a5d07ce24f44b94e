//! The errors of the result store, each with its exit-code class.

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

/// A result-store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite refused an operation.
    #[error("result store {path}: {error}")]
    Sqlite {
        /// The database file.
        path: String,
        /// The SQLite error, in the message only: its own cause repeats it in other words
        /// ("file is not a database: … File opened that is not a database file").
        error: rusqlite::Error,
    },
    /// No experiment with that id (or none at all for `latest`).
    #[error("no experiment {0} in the result store")]
    NoExperiment(String),
    /// `--resume` found nothing to resume.
    #[error("nothing to resume: {0}")]
    NothingToResume(String),
    /// `--resume` found the experiment, but the run that owns it is still alive.
    #[error("experiment {experiment} is still running (pid {pid})")]
    StillRunning {
        /// The experiment id.
        experiment: i64,
        /// The process running it.
        pid: u32,
    },
    /// A stored value could not be decoded.
    #[error("result store holds a bad value: {0}")]
    Corrupt(String),
}

impl Classify for StoreError {
    fn failure(&self) -> Failure {
        match self {
            StoreError::NoExperiment(_)
            | StoreError::NothingToResume(_)
            | StoreError::StillRunning { .. } => Failure::Usage,
            StoreError::Corrupt(_) => Failure::Input,
            StoreError::Sqlite { .. } => Failure::Runtime,
        }
    }
}
