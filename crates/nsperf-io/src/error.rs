//! The errors of the I/O engine, each with its failure class (hence exit code).

use std::path::PathBuf;

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

/// What went wrong in an I/O run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// A parameter combination the engine cannot run (found before any I/O).
    #[error("{0}")]
    Config(String),
    /// The target directory is missing or not a directory.
    #[error("target directory {path}: {source}")]
    TargetDir {
        /// The directory given.
        path: PathBuf,
        /// Why it cannot be used.
        source: std::io::Error,
    },
    /// A device or file given with `--device` without `--destructive`, or one that is mounted.
    #[error("{0}")]
    Unsafe(String),
    /// The file system or kernel refuses what was asked (O_DIRECT on tmpfs, io_uring off).
    #[error("{0}")]
    Unsupported(String),
    /// The target's file system has less room (bytes or inodes) than the run needs.
    #[error("{0}")]
    NoSpace(String),
    /// A fio job file that cannot be read or uses what nsperf does not have.
    #[error("{0}")]
    JobFile(String),
    /// Dropping the page cache needs root.
    #[error("--drop-caches needs root (writing /proc/sys/vm/drop_caches): {0}")]
    DropCaches(std::io::Error),
    /// Ctrl-C arrived before the measured pass started (while laying out files).
    #[error("interrupted before the measurement started")]
    Interrupted,
    /// The NFS client failed before or around the measured pass (mount, create, remove).
    #[error(transparent)]
    Nfs(#[from] nsperf_nfs::NfsError),
    /// The SMB client failed before or around the measured pass (log on, share, create).
    #[error(transparent)]
    Smb(#[from] nsperf_smb::SmbError),
    /// An op on a remote file failed during the run.
    #[error("{what} {path}: {source}")]
    Remote {
        /// The operation.
        what: &'static str,
        /// The file (`nfs://HOST/EXPORT/PATH/.nsperf-…`, `smb://HOST/SHARE/PATH/.nsperf-…`).
        path: String,
        /// The error; an [`nsperf_nfs::NfsError`] or [`nsperf_smb::SmbError`] inside when the
        /// protocol failed.
        source: std::io::Error,
    },
    /// A system call failed during the run.
    #[error("{what} {path}: {source}")]
    Os {
        /// The operation (`open`, `pread`, `fsync`, …).
        what: &'static str,
        /// The file it was done on.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl IoError {
    /// An [`IoError::Remote`].
    pub(crate) fn remote(what: &'static str, path: String, source: std::io::Error) -> IoError {
        // Messages read better without the io::Error wrapper's own text around an NFS error.
        IoError::Remote { what, path, source }
    }

    /// An [`IoError::Os`] from the current `errno`.
    pub(crate) fn last_os(what: &'static str, path: &std::path::Path) -> IoError {
        IoError::Os {
            what,
            path: path.to_path_buf(),
            source: std::io::Error::last_os_error(),
        }
    }

    /// An [`IoError::Os`] from an error value.
    pub(crate) fn os(
        what: &'static str,
        path: &std::path::Path,
        source: std::io::Error,
    ) -> IoError {
        IoError::Os {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

impl Classify for IoError {
    fn failure(&self) -> Failure {
        match self {
            IoError::Config(_) => Failure::Usage,
            IoError::TargetDir { .. } => Failure::Input,
            IoError::Unsafe(_) => Failure::Unsafe,
            IoError::Unsupported(_) => Failure::Unsupported,
            IoError::NoSpace(_) => Failure::Usage,
            IoError::JobFile(_) => Failure::Input,
            IoError::DropCaches(_) => Failure::Permission,
            IoError::Interrupted => Failure::Interrupted,
            IoError::Nfs(e) => e.failure(),
            IoError::Smb(e) => e.failure(),
            IoError::Remote { source, .. } | IoError::Os { source, .. } => match source
                .raw_os_error()
            {
                Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => Failure::Permission,
                Some(libc::EINTR) => Failure::Interrupted,
                _ => match source.get_ref() {
                    Some(e) if e.is::<crate::mirror::MirrorError>() => e
                        .downcast_ref::<crate::mirror::MirrorError>()
                        .map_or(Failure::Runtime, Classify::failure),
                    Some(e) if e.is::<nsperf_nfs::NfsError>() => e
                        .downcast_ref::<nsperf_nfs::NfsError>()
                        .map_or(Failure::Runtime, Classify::failure),
                    Some(e) => e
                        .downcast_ref::<nsperf_smb::SmbError>()
                        .map_or(Failure::Runtime, Classify::failure),
                    None => Failure::Runtime,
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(IoError::Unsafe("x".into()).failure(), Failure::Unsafe);
        assert_eq!(IoError::Config("x".into()).failure(), Failure::Usage);
        let e = IoError::os(
            "open",
            std::path::Path::new("/x"),
            std::io::Error::from_raw_os_error(libc::EACCES),
        );
        assert_eq!(e.failure(), Failure::Permission);
        assert!(e.to_string().starts_with("open /x: "));
    }
}
