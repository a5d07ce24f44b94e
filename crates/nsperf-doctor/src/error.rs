//! What can stop `doctor` before it has a report: a bad combination of options, a target the
//! protocol cannot reach (with the protocol's own failure class), a lab it cannot enter.

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

/// Why `doctor` could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DoctorError {
    /// A bad option or combination (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The target's server could not be reached or refused it (its class decides the code).
    #[error(transparent)]
    Nfs(#[from] nsperf_nfs::NfsError),
    /// The SMB server could not be reached, refused the logon or has no such share.
    #[error(transparent)]
    Smb(#[from] nsperf_smb::SmbError),
    /// The lab could not be used (entering a site, reading its state).
    #[error(transparent)]
    Lab(#[from] nsperf_lab::LabError),
    /// The path is not served (a lab's server exports another directory, or the directory
    /// is missing) (exit 11).
    #[error("{0}")]
    NotFound(String),
    /// Interrupted by Ctrl-C.
    #[error("interrupted")]
    Interrupted,
}

impl Classify for DoctorError {
    fn failure(&self) -> Failure {
        match self {
            DoctorError::Usage(_) => Failure::Usage,
            DoctorError::NotFound(_) => Failure::NotFound,
            DoctorError::Nfs(e) => e.failure(),
            DoctorError::Smb(e) => e.failure(),
            DoctorError::Lab(e) => e.failure(),
            DoctorError::Interrupted => Failure::Interrupted,
        }
    }
}
