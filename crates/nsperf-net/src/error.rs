//! Errors of the network engine and their exit-code classes.

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

use crate::proto::session::ClientSessionError;
use crate::proto::{ProtoError, RefuseReason};

/// Everything that can end a `net` or `server` run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// Host name did not resolve.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// The name.
        host: String,
        /// Why.
        reason: String,
    },
    /// Connecting failed (refused, unreachable, timed out).
    #[error("cannot connect to {addr}: {reason}")]
    Connect {
        /// Where.
        addr: String,
        /// Why.
        reason: String,
        /// The I/O error's kind, where one caused it.
        kind: Option<std::io::ErrorKind>,
    },
    /// The server could not listen.
    #[error("cannot listen on {addr}: {reason}")]
    Listen {
        /// Where.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The server wants a key and none was given.
    #[error("server requires a pre-shared key: pass --psk-file")]
    KeyRequired,
    /// The server refused the key.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// Protocol violation or version mismatch.
    #[error("{0}")]
    Proto(#[from] ProtoError),
    /// The server refused the test (capacity, caps).
    #[error("server refused the test: {0}")]
    Refused(String),
    /// The server refused the parameters.
    #[error("server rejected the parameters: {0}")]
    BadRequest(String),
    /// Invalid parameters found locally.
    #[error("{0}")]
    Usage(String),
    /// The kernel lacks a feature.
    #[error("{0}")]
    Unsupported(String),
    /// Unknown congestion control.
    #[error("congestion control '{name}' is not available ({reason}); available: {available}")]
    UnknownCongestion {
        /// Asked for.
        name: String,
        /// What the kernel has.
        available: String,
        /// The kernel's error.
        reason: String,
    },
    /// A socket call failed.
    #[error("socket error: {0}")]
    Socket(String),
    /// The control connection failed mid-test.
    #[error("control connection: {0}")]
    Control(String),
    /// The server died or stopped answering during the test (exit 12).
    #[error("{0}")]
    PeerLost(String),
    /// The server reported an error.
    #[error("server error: {0}")]
    Server(String),
    /// The key file is unusable.
    #[error("key file {path}: {reason}")]
    KeyFile {
        /// Path.
        path: String,
        /// Why.
        reason: String,
    },
    /// Ctrl-C.
    #[error("interrupted")]
    Interrupted,
    /// The server answered in iperf3's protocol (its first state byte); the client retries
    /// speaking iperf3 unless told to speak nsperf only.
    #[error("the server at {addr} is an iperf3 server{}", if *.busy { " (busy with another test)" } else { "" })]
    PeerIsIperf3 {
        /// The server.
        addr: String,
        /// It answered ACCESS_DENIED (busy) rather than PARAM_EXCHANGE.
        busy: bool,
    },
    /// The server closed the connection before answering the greeting: not an nsperf server.
    #[error(
        "the server closed the connection without answering nsperf's greeting (not an nsperf or iperf3 server?): {0}"
    )]
    GreetingDropped(String),
    /// An iperf3 peer failed or broke its protocol.
    #[error("{0}")]
    Iperf3(#[from] crate::iperf3::wire::Iperf3Error),
}

impl NetError {
    /// A connect error from an I/O error.
    pub fn connect(addr: &std::net::SocketAddr, e: std::io::Error) -> Self {
        NetError::Connect {
            addr: addr.to_string(),
            reason: e.to_string(),
            kind: Some(e.kind()),
        }
    }

    /// A connection the server refused or reset before a byte was exchanged: what a server
    /// between two listening sockets answers (iperf3 reopens its listener after each test, and
    /// a connection queued on the old one is reset when it closes).
    pub fn is_refused_or_reset(&self) -> bool {
        matches!(
            self,
            NetError::Connect {
                kind: Some(
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset
                ),
                ..
            }
        )
    }
}

impl From<ClientSessionError> for NetError {
    fn from(e: ClientSessionError) -> Self {
        match e {
            ClientSessionError::KeyRequired => NetError::KeyRequired,
            ClientSessionError::Refused { reason, message } => match reason {
                RefuseReason::Auth => NetError::Auth(message),
                RefuseReason::Capacity | RefuseReason::Limits => NetError::Refused(message),
                RefuseReason::BadRequest => NetError::BadRequest(message),
                RefuseReason::Unsupported => NetError::Unsupported(message),
            },
            ClientSessionError::Server(m) => NetError::Server(m),
            ClientSessionError::Proto(p) => NetError::Proto(p),
        }
    }
}

impl Classify for NetError {
    fn failure(&self) -> Failure {
        match self {
            NetError::Resolve { .. } | NetError::Connect { .. } => Failure::Connect,
            NetError::KeyRequired | NetError::Auth(_) => Failure::Auth,
            NetError::Proto(_) => Failure::Protocol,
            NetError::Refused(_) => Failure::Refused,
            NetError::BadRequest(_) | NetError::Usage(_) => Failure::Usage,
            NetError::Unsupported(_) | NetError::UnknownCongestion { .. } => Failure::Unsupported,
            NetError::KeyFile { .. } => Failure::Input,
            NetError::Interrupted => Failure::Interrupted,
            NetError::PeerLost(_) => Failure::PeerLost,
            NetError::PeerIsIperf3 { .. } | NetError::GreetingDropped(_) => Failure::Protocol,
            NetError::Iperf3(e) => {
                use crate::iperf3::wire::Iperf3Error as E;
                match e {
                    E::Busy | E::Server { .. } => Failure::Refused,
                    E::ServerTerminated | E::ClientTerminated | E::Timeout { .. } => {
                        Failure::PeerLost
                    }
                    _ => Failure::Protocol,
                }
            }
            NetError::Listen { reason, .. } if reason.contains("ermission") => Failure::Permission,
            NetError::Listen { .. }
            | NetError::Socket(_)
            | NetError::Control(_)
            | NetError::Server(_) => Failure::Runtime,
        }
    }
}

/// Reads a pre-shared key file: its bytes with surrounding white space trimmed; empty is an
/// error.
pub fn read_key_file(path: &std::path::Path) -> Result<Vec<u8>, NetError> {
    let err = |reason: String| NetError::KeyFile {
        path: path.display().to_string(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let trimmed = bytes.trim_ascii();
    if trimmed.is_empty() {
        return Err(err("empty key".into()));
    }
    Ok(trimmed.to_vec())
}
