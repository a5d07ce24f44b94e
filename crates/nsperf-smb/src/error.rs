//! The errors of the SMB client, each with its failure class (hence exit code), the same
//! classes as the NFS engine's: server unreachable (connect), share or path missing (not
//! found), logon refused (auth), access denied (permission), the server gone mid-run (peer
//! lost).

use nsperf_core::Failure;
use nsperf_core::failure::Classify;
use smb2::ErrorKind;

use crate::creds::CredError;
use crate::url::UrlError;

/// What went wrong talking to an SMB server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SmbError {
    /// The target is not a valid `smb://` URL.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The credentials file or environment could not be used.
    #[error(transparent)]
    Credentials(#[from] CredError),
    /// The server could not be reached, or did not negotiate SMB 2/3.
    #[error("cannot reach the SMB server at {addr}: {source}")]
    Connect {
        /// `HOST:PORT`.
        addr: String,
        /// Why.
        source: smb2::Error,
    },
    /// The server refused the logon (wrong user name or password, account disabled).
    #[error("the SMB server refused the logon of {user}: {source}")]
    Logon {
        /// The user (`guest` for a guest session).
        user: String,
        /// Why.
        source: smb2::Error,
    },
    /// TREE_CONNECT to the share failed.
    #[error("share '{share}' on {host}: {source}")]
    Share {
        /// The share.
        share: String,
        /// The server.
        host: String,
        /// Why (not found, access denied).
        source: smb2::Error,
    },
    /// An operation on a file or directory failed.
    #[error("SMB {op} {path}: {source}")]
    Op {
        /// The operation (`CREATE`, `READ`, …).
        op: &'static str,
        /// What it was done on (path inside the share).
        path: String,
        /// Why.
        source: smb2::Error,
    },
    /// The path exists but is not a directory.
    #[error("{0} is not a directory on the server")]
    NotADirectory(String),
    /// The connection broke or the server stopped answering after the run had started.
    #[error("the SMB server went away during {what}: {source}")]
    Lost {
        /// What was being done.
        what: &'static str,
        /// How.
        source: smb2::Error,
    },
    /// Interrupted by Ctrl-C while waiting for the server.
    #[error("interrupted while waiting for the SMB server")]
    Interrupted,
    /// The session was set up but the client kept no negotiated dialect.
    #[error("the SMB server at {0} settled no dialect")]
    NoDialect(String),
}

/// True when an error of the smb2 crate means the connection is gone.
pub(crate) fn is_lost(e: &smb2::Error) -> bool {
    matches!(e.kind(), ErrorKind::ConnectionLost | ErrorKind::TimedOut)
}

fn kind_class(k: ErrorKind) -> Failure {
    match k {
        ErrorKind::NotFound | ErrorKind::NotADirectory | ErrorKind::IsADirectory => {
            Failure::NotFound
        }
        ErrorKind::AccessDenied | ErrorKind::SigningRequired => Failure::Permission,
        ErrorKind::AuthRequired | ErrorKind::GuestSessionRefused => Failure::Auth,
        ErrorKind::ConnectionLost | ErrorKind::TimedOut | ErrorKind::SessionExpired => {
            Failure::PeerLost
        }
        ErrorKind::InvalidData | ErrorKind::SignatureInvalid => Failure::Protocol,
        ErrorKind::Unsupported => Failure::Unsupported,
        _ => Failure::Runtime,
    }
}

impl SmbError {
    /// An operation's error: [`SmbError::Lost`] when the connection went, else
    /// [`SmbError::Op`].
    pub(crate) fn op(op: &'static str, path: &str, source: smb2::Error) -> SmbError {
        if is_lost(&source) {
            SmbError::Lost { what: op, source }
        } else {
            SmbError::Op {
                op,
                path: path.to_string(),
                source,
            }
        }
    }

    /// The `errno` closest to this error, for engines that report errors as `io::Error`.
    pub fn errno(&self) -> i32 {
        match self.failure() {
            Failure::NotFound => libc::ENOENT,
            Failure::Permission | Failure::Auth => libc::EACCES,
            Failure::PeerLost => libc::ECONNRESET,
            Failure::Connect => libc::ECONNREFUSED,
            Failure::Interrupted => libc::EINTR,
            Failure::Protocol => libc::EPROTO,
            _ => match self {
                SmbError::Op { source, .. } if source.kind() == ErrorKind::DiskFull => libc::ENOSPC,
                _ => libc::EIO,
            },
        }
    }
}

impl Classify for SmbError {
    fn failure(&self) -> Failure {
        match self {
            SmbError::Url(_) => Failure::Usage,
            SmbError::Credentials(_) => Failure::Input,
            SmbError::Connect { .. } => Failure::Connect,
            SmbError::Logon { source, .. } => match source.kind() {
                ErrorKind::ConnectionLost | ErrorKind::TimedOut => Failure::Connect,
                ErrorKind::AccessDenied => Failure::Auth,
                k => match kind_class(k) {
                    Failure::Runtime => Failure::Auth,
                    f => f,
                },
            },
            SmbError::Share { source, .. } => match source.kind() {
                ErrorKind::ConnectionLost | ErrorKind::TimedOut => Failure::Connect,
                k => kind_class(k),
            },
            SmbError::Op { source, .. } => kind_class(source.kind()),
            SmbError::NotADirectory(_) => Failure::NotFound,
            SmbError::Lost { .. } => Failure::PeerLost,
            SmbError::Interrupted => Failure::Interrupted,
            SmbError::NoDialect(_) => Failure::Protocol,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let lost = SmbError::op("READ", "f", smb2::Error::Disconnected);
        assert!(matches!(lost, SmbError::Lost { .. }));
        assert_eq!(lost.failure(), Failure::PeerLost);
        assert_eq!(lost.errno(), libc::ECONNRESET);
        assert!(!lost.to_string().contains('\n'));
        let nf = SmbError::NotADirectory("x".into());
        assert_eq!(nf.failure(), Failure::NotFound);
        assert_eq!(SmbError::Interrupted.failure(), Failure::Interrupted);
        let none = SmbError::NoDialect("10.0.0.1:445".into());
        assert_eq!(none.failure(), Failure::Protocol);
        assert_eq!(
            none.to_string(),
            "the SMB server at 10.0.0.1:445 settled no dialect"
        );
    }
}
