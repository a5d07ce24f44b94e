//! Errors of the trace engine.

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

/// Why a capture could not be analysed at all. Damage later in a file is not an error: the
/// packets before it are analysed and the damage is reported in the summary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Open {
        /// The path given.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The bytes are not a pcap or pcapng capture (nor a compressed one).
    #[error("not a pcap or pcapng capture (byte offset {offset}: {reason})")]
    NotACapture {
        /// Offset in the (decompressed) stream where reading failed.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// A live capture could not start or failed (`trace -i`).
    #[error("cannot capture on {iface}: {source}")]
    Capture {
        /// The interface named.
        iface: String,
        /// Why: `NotFound` for no such interface, `PermissionDenied` without root.
        source: std::io::Error,
    },
    /// A bad filter expression.
    #[error("bad filter '{0}': expected host ADDR, port N, or both joined by 'and'")]
    Filter(String),
}

impl Classify for TraceError {
    fn failure(&self) -> Failure {
        match self {
            TraceError::Filter(_) => Failure::Usage,
            TraceError::Capture { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound => Failure::Input,
                std::io::ErrorKind::PermissionDenied => Failure::Permission,
                std::io::ErrorKind::Unsupported => Failure::Unsupported,
                _ => Failure::Runtime,
            },
            _ => Failure::Input,
        }
    }
}
