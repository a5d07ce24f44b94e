//! The errors of the NFS client, each with its failure class (hence exit code): the server
//! unreachable (connect), an export or path missing (not found), permission denied
//! (permission), the server gone mid-run (peer lost).

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

use crate::proto::NfsStat;
use crate::rpc::RpcError;
use crate::url::UrlError;

/// What went wrong talking to an NFS server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NfsError {
    /// The target is not a valid `nfs://` URL.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The server could not be reached.
    #[error("cannot reach {what} at {addr}: {source}")]
    Connect {
        /// The service (`portmapper`, `MOUNT`, `NFS`).
        what: &'static str,
        /// Where.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The server's portmapper does not know the service.
    #[error(
        "the portmapper of {host} has no {what} v3 over TCP registered: is an NFS server running there?"
    )]
    NotRegistered {
        /// The service.
        what: &'static str,
        /// The host.
        host: String,
    },
    /// The server spoke something this client cannot accept.
    #[error("{what}: {source}")]
    Rpc {
        /// The call.
        what: &'static str,
        /// Why.
        source: RpcError,
    },
    /// MOUNT refused the export.
    #[error("the server refused to mount {path}: {stat}")]
    Mount {
        /// The export path.
        path: String,
        /// MOUNT's status.
        stat: NfsStat,
    },
    /// An NFS procedure failed.
    #[error("NFS {op} {path}: {stat}")]
    Nfs {
        /// The procedure.
        op: &'static str,
        /// What it was done on (path relative to the export, or a file name).
        path: String,
        /// The status.
        stat: NfsStat,
    },
    /// An NFSv4 operation failed (its status shown with NFSv4's names).
    #[error("NFSv4 {op} {path}: {}", stat.v4())]
    Nfs4 {
        /// The operation.
        op: &'static str,
        /// What it was done on (path relative to the export, or a file name).
        path: String,
        /// The status.
        stat: NfsStat,
    },
    /// The path exists but is not a directory.
    #[error("{0} is not a directory on the server")]
    NotADirectory(String),
    /// The connection broke or the server stopped answering after the run had started.
    #[error("the NFS server went away during {what}: {why}")]
    Lost {
        /// What was being done.
        what: &'static str,
        /// How it went away (`connection reset`, `no reply for 30 s`, …).
        why: String,
    },
    /// Interrupted by Ctrl-C while waiting for the server.
    #[error("interrupted while waiting for the NFS server")]
    Interrupted,
}

impl NfsError {
    /// An NFS status error on `path`.
    pub fn nfs(op: &'static str, path: &str, stat: NfsStat) -> NfsError {
        NfsError::Nfs {
            op,
            path: path.to_string(),
            stat,
        }
    }

    /// An NFSv4 status error on `path`.
    pub fn nfs4(op: &'static str, path: &str, stat: NfsStat) -> NfsError {
        NfsError::Nfs4 {
            op,
            path: path.to_string(),
            stat,
        }
    }

    /// The NFS status of an NFS error (either version), `None` for other errors.
    pub fn status(&self) -> Option<NfsStat> {
        match self {
            NfsError::Nfs { stat, .. } | NfsError::Nfs4 { stat, .. } => Some(*stat),
            _ => None,
        }
    }

    /// The `errno` closest to this error, for engines that report errors as `io::Error`.
    pub fn errno(&self) -> i32 {
        match self {
            NfsError::Nfs { stat, .. }
            | NfsError::Nfs4 { stat, .. }
            | NfsError::Mount { stat, .. } => match *stat {
                NfsStat::PERM => libc::EPERM,
                NfsStat::NOENT => libc::ENOENT,
                NfsStat::ACCES => libc::EACCES,
                NfsStat::NOSPC => libc::ENOSPC,
                NfsStat::ROFS => libc::EROFS,
                NfsStat::DQUOT => libc::EDQUOT,
                NfsStat::STALE => libc::ESTALE,
                _ => libc::EIO,
            },
            NfsError::Lost { .. } => libc::ECONNRESET,
            NfsError::Interrupted => libc::EINTR,
            NfsError::Connect { .. } => libc::ECONNREFUSED,
            _ => libc::EPROTO,
        }
    }
}

fn status_class(stat: NfsStat) -> Failure {
    match stat {
        NfsStat::NOENT | NfsStat::NOTDIR => Failure::NotFound,
        NfsStat::PERM | NfsStat::ACCES | NfsStat::ROFS => Failure::Permission,
        NfsStat::STALE | NfsStat::BADHANDLE => Failure::PeerLost,
        _ => Failure::Runtime,
    }
}

impl Classify for NfsError {
    fn failure(&self) -> Failure {
        match self {
            NfsError::Url(_) => Failure::Usage,
            NfsError::Connect { .. } | NfsError::NotRegistered { .. } => Failure::Connect,
            NfsError::Rpc { source, .. } => match source {
                RpcError::Denied(_) => Failure::Permission,
                _ => Failure::Protocol,
            },
            NfsError::Mount { stat, .. }
            | NfsError::Nfs { stat, .. }
            | NfsError::Nfs4 { stat, .. } => status_class(*stat),
            NfsError::NotADirectory(_) => Failure::NotFound,
            NfsError::Lost { .. } => Failure::PeerLost,
            NfsError::Interrupted => Failure::Interrupted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let e = NfsError::Mount {
            path: "/x".into(),
            stat: NfsStat::NOENT,
        };
        assert_eq!(e.failure(), Failure::NotFound);
        assert_eq!(
            NfsError::nfs("CREATE", "a", NfsStat::ACCES).failure(),
            Failure::Permission
        );
        let lost = NfsError::Lost {
            what: "READ",
            why: "connection reset".into(),
        };
        assert_eq!(lost.failure(), Failure::PeerLost);
        assert!(!lost.to_string().contains('\n'));
    }
}
