//! A synchronous mirror, the way DRBD replicates a block device: every write of a run goes to
//! the local file and, over one TCP connection per job, to a peer (`nsperf io peer DIR`) that
//! writes it to its own copy of the file. A write completes by the chosen [`Protocol`]:
//! **A** once it is written locally and sent (handed to the connection, within the bytes in
//! flight allowed), **B** once the peer has received it, **C** once the peer has written it.
//! A flush (`--fsync end|each`) makes both copies durable in every protocol: the local fsync
//! and the peer's, after all earlier writes. Reads are served by the local file.
//!
//! [`wire`] is the format; [`peer`] the receiving side; the writing side is an I/O engine
//! that wraps the local one (`engine`).

pub(crate) mod engine;
pub(crate) mod grid;
pub mod peer;
pub mod wire;

use std::fmt;
use std::io;
use std::str::FromStr;

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

use serde::{Deserialize, Serialize};

pub use grid::MirrorInterval;

/// Most writes in flight to the peer on one connection, whatever the bytes allow (their acks
/// must fit the socket buffers without being read).
pub const MAX_WRITES_IN_FLIGHT: usize = 1024;

/// When a mirrored write completes (DRBD's replication protocols).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Protocol {
    /// Written locally and sent to the peer (asynchronous replication).
    A,
    /// Written locally and received by the peer (memory-synchronous).
    B,
    /// Written locally and written by the peer (synchronous).
    C,
}

impl Protocol {
    pub(crate) fn code(self) -> u8 {
        match self {
            Protocol::A => b'A',
            Protocol::B => b'B',
            Protocol::C => b'C',
        }
    }

    pub(crate) fn of_code(c: u8) -> Option<Protocol> {
        match c {
            b'A' => Some(Protocol::A),
            b'B' => Some(Protocol::B),
            b'C' => Some(Protocol::C),
            _ => None,
        }
    }
}

/// `A`, `B`, `C`; pads to a width.
impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Protocol::A => "A",
            Protocol::B => "B",
            Protocol::C => "C",
        })
    }
}

/// A protocol name that is none of A, B, C.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown replication protocol {0:?} (A: sent, B: received by the peer, C: written by the peer)"
)]
pub struct UnknownProtocol(pub String);

/// `A`, `B`, `C`, in any case.
impl FromStr for Protocol {
    type Err = UnknownProtocol;
    fn from_str(s: &str) -> Result<Protocol, UnknownProtocol> {
        match s.trim() {
            "a" | "A" => Ok(Protocol::A),
            "b" | "B" => Ok(Protocol::B),
            "c" | "C" => Ok(Protocol::C),
            _ => Err(UnknownProtocol(s.to_string())),
        }
    }
}

/// Default bytes in flight to the peer (DRBD's default max-buffers of 2048 × 4 KiB pages).
pub const DEFAULT_MAX_IN_FLIGHT: u64 = 8 << 20;

/// A run's mirror: where, which protocol, how much may be on its way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replicate {
    /// The peer, `HOST:PORT` (`nsperf io peer` listening there).
    pub peer: String,
    /// When a write completes.
    pub protocol: Protocol,
    /// Bytes sent to the peer and not yet acknowledged, at most (DRBD's max-buffers or
    /// sndbuf-size): a write waits for room.
    pub max_in_flight_bytes: u64,
    /// After the run, compare each job's file with the peer's copy (CRC-32 of the whole
    /// file, untimed).
    #[serde(default)]
    pub check: bool,
    /// TCP congestion control of the connections (`cubic`, `bbr`); the system's default
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// Run the same workload without the mirror first, for the side-by-side comparison
    /// (`ReplicationFacts::native`).
    #[serde(default)]
    pub compare: bool,
}

/// The native run's figures beside the mirrored one's (`--replicate-compare`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NativeFigures {
    /// Bytes per second.
    pub throughput_bytes_per_s: f64,
    /// Operations per second.
    pub iops: f64,
    /// Latency: mean, median, 99th percentile, largest, ns.
    pub lat_mean_ns: f64,
    /// Median.
    pub lat_p50_ns: u64,
    /// 99th percentile.
    pub lat_p99_ns: u64,
    /// Largest.
    pub lat_max_ns: u64,
}

impl NativeFigures {
    /// The figures of a run's summary.
    pub fn of(s: &crate::IoSummary) -> NativeFigures {
        NativeFigures {
            throughput_bytes_per_s: s.throughput_bytes_per_s,
            iops: s.iops,
            lat_mean_ns: s.lat_mean_ns,
            lat_p50_ns: s.lat_p50_ns,
            lat_p99_ns: s.lat_p99_ns,
            lat_max_ns: s.lat_max_ns,
        }
    }
}

/// What the mirror did in a run, summed over its jobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicationFacts {
    /// The peer's address.
    pub peer: String,
    /// The protocol.
    pub protocol: Option<Protocol>,
    /// Bytes in flight allowed per connection.
    pub max_in_flight_bytes: u64,
    /// TCP congestion control of the connections, as the kernel reports it.
    #[serde(default)]
    pub congestion: String,
    /// Writes sent to the peer.
    pub writes: u64,
    /// Their data bytes.
    pub bytes: u64,
    /// The local write's time, mean, ns (the local engine's part of a write).
    #[serde(default)]
    pub local_write_mean_ns: f64,
    /// The peer's time to write one (protocol C; 0 otherwise), mean, ns.
    pub peer_write_mean_ns: f64,
    /// The round trip to the peer: each connection's least of 3 empty requests answered at
    /// connect (before the run), mean over the jobs, µs.
    #[serde(default)]
    pub rtt_us: f64,
    /// The peer's flushes.
    pub flushes: u64,
    /// Their time at the peer, mean, ns.
    pub peer_flush_mean_ns: f64,
    /// Writes that waited for room (the bytes in flight at the limit).
    pub waited_for_room: u64,
    /// The same workload without the mirror, run just before (`--replicate-compare`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeFigures>,
    /// Each job's file compared with the peer's copy after the run (CRC-32 of the whole file):
    /// `Some(true)` when all are equal, `None` when not checked.
    pub copies_equal: Option<bool>,
    /// The mirror over the run's intervals (the same start and length, row by row): the
    /// acks' bytes and rate, their wait, and the peer's write time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<MirrorInterval>,
}

/// What went wrong with the peer; carried inside the `io::Error` of the engine's calls.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// The peer could not be reached.
    #[error("mirror peer {peer}: {source}")]
    Connect {
        /// `HOST:PORT`.
        peer: String,
        /// Why.
        source: io::Error,
    },
    /// The peer refused the copy (its directory, its disk).
    #[error("mirror peer {peer} refused the copy: {source}")]
    Refused {
        /// `HOST:PORT`.
        peer: String,
        /// The peer's errno.
        source: io::Error,
    },
    /// The other end is no mirror peer, or broke the format.
    #[error("mirror peer {peer}: {reason}")]
    Protocol {
        /// `HOST:PORT`.
        peer: String,
        /// What was wrong.
        reason: String,
    },
    /// The connection broke during the run.
    #[error("mirror peer {peer}: {source}")]
    Lost {
        /// `HOST:PORT`.
        peer: String,
        /// Why.
        source: io::Error,
    },
    /// The congestion control asked for is not available here.
    #[error("--replicate-congestion {name}: {source}")]
    Congestion {
        /// The name asked for.
        name: String,
        /// The kernel's refusal.
        source: io::Error,
    },
    /// The peer could not write or flush its copy.
    #[error("mirror peer {peer} failed to write its copy: {source}")]
    PeerFailed {
        /// `HOST:PORT`.
        peer: String,
        /// The peer's errno.
        source: io::Error,
    },
}

impl Classify for MirrorError {
    fn failure(&self) -> Failure {
        match self {
            MirrorError::Connect { .. } => Failure::Connect,
            MirrorError::Refused { .. } => Failure::Refused,
            MirrorError::Protocol { .. } => Failure::Protocol,
            MirrorError::Lost { .. } => Failure::PeerLost,
            MirrorError::PeerFailed { .. } => Failure::Runtime,
            MirrorError::Congestion { .. } => Failure::Unsupported,
        }
    }
}

impl From<MirrorError> for io::Error {
    fn from(e: MirrorError) -> io::Error {
        let kind = match &e {
            MirrorError::Connect { source, .. } | MirrorError::Lost { source, .. } => source.kind(),
            MirrorError::Protocol { .. } => io::ErrorKind::InvalidData,
            MirrorError::Refused { .. }
            | MirrorError::PeerFailed { .. }
            | MirrorError::Congestion { .. } => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

#[cfg(test)]
mod api_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names() {
        for (p, s) in [(Protocol::A, "A"), (Protocol::B, "B"), (Protocol::C, "C")] {
            assert_eq!(p.to_string(), s);
            assert_eq!(s.parse::<Protocol>(), Ok(p));
            assert_eq!(s.to_lowercase().parse::<Protocol>(), Ok(p));
            assert_eq!(Protocol::of_code(p.code()), Some(p));
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{s}\""));
        }
        assert!("D".parse::<Protocol>().is_err());
        assert_eq!(format!("{:>3}|", Protocol::C), "  C|");
    }
}
