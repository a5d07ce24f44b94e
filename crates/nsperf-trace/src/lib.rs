//! Packet-capture TCP analysis for nsperf: `nsperf trace FILE`.
//!
//! Layers, each usable alone: [`reader`] streams packets out of pcap/pcapng files (plain or
//! compressed); [`wire`] holds checked zero-copy views of the protocol headers (nothing can
//! panic after `new_checked`); [`decode`] walks a frame to its TCP or UDP header; [`tcp`]
//! tracks each connection (retransmissions, duplicate ACKs, windows with scaling, RTT, bytes
//! in flight) and diagnoses what limited it, wherever the capture was taken; [`proto`]
//! decodes the storage protocol above it (ONC RPC: NFS, MOUNT; SMB2/3; requests matched to
//! replies, per-operation response times, requests in flight, and on request the stream of
//! the requests themselves); [`replay`] derives the workload a capture holds from that
//! stream and predicts it at another RTT; [`analyzer`]
//! ties them together into the [`model`] that `--json` prints, and [`findings`] says what the
//! figures mean.
//!
//! Memory is bounded by the live connections, not by the file: packets are never stored,
//! per-connection state is a few small bounded structures, and a finished connection is
//! summarised into a [`ConnectionStore`] and released (a [`ConnectionSpool`] keeps the
//! summaries on disk).
#![deny(missing_docs)]

mod analyzer;
pub mod decode;
mod error;
mod filter;
pub mod findings;
mod kinds;
pub mod model;
pub mod proto;
pub mod reader;
pub mod replay;
mod series;
mod store;
mod tcp;
/// Capture writers and a TCP path simulator for tests (this crate's and the binary's, with
/// the `testkit` feature); not part of the API.
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod wire;

use std::path::Path;

pub use analyzer::{Analyzer, DEFAULT_IDLE_NS, TraceConfig};
pub use error::TraceError;
pub use filter::Filter;
pub use model::{Limit, LiveInterval, TraceInterval, TraceSpec, TraceSummary};
pub use reader::CaptureReader;
pub use store::{ConnectionSpool, ConnectionStore};

/// Reads and analyses a whole capture file (`-` for standard input), connections in memory.
pub fn analyze_file(
    path: &Path,
    cfg: TraceConfig,
) -> Result<(TraceSummary, Vec<TraceInterval>), TraceError> {
    let reader = CaptureReader::open(path)?;
    analyze_reader(reader, cfg, Vec::new())
}

/// Reads and analyses a whole capture file with the finished connections spooled to a
/// temporary file: memory bounded by the live connections whatever the capture holds.
pub fn analyze_file_spooled(
    path: &Path,
    cfg: TraceConfig,
) -> Result<(TraceSummary<ConnectionSpool>, Vec<TraceInterval>), TraceError> {
    let reader = CaptureReader::open(path)?;
    analyze_reader(reader, cfg, ConnectionSpool::new())
}

/// Analyses every packet of an open reader into `store`.
pub fn analyze_reader<S: ConnectionStore>(
    mut reader: CaptureReader,
    cfg: TraceConfig,
    store: S,
) -> Result<(TraceSummary<S>, Vec<TraceInterval>), TraceError> {
    let mut an = Analyzer::new(cfg, store);
    reader.for_each_packet(|p| an.packet(p))?;
    Ok(an.finish(reader.stats().clone()))
}

/// Reads and analyses a whole capture file (`-` for standard input) keeping each storage
/// request matched to its reply (at most `cap`): the input of [`replay`].
pub fn requests_file(
    path: &Path,
    cfg: TraceConfig,
    cap: usize,
) -> Result<(TraceSummary, proto::requests::RequestStream), TraceError> {
    let mut reader = CaptureReader::open(path)?;
    let mut an = Analyzer::new(cfg, Vec::new());
    an.log_requests(cap);
    reader.for_each_packet(|p| an.packet(p))?;
    let (s, _, requests) = an.finish_with_requests(reader.stats().clone());
    Ok((s, requests))
}

/// Analyses capture bytes in memory (tests, fuzzing). Never panics.
pub fn analyze_bytes(
    bytes: &[u8],
    cfg: TraceConfig,
) -> Result<(TraceSummary, Vec<TraceInterval>), TraceError> {
    let reader = CaptureReader::from_reader(std::io::Cursor::new(bytes.to_vec()))?;
    analyze_reader(reader, cfg, Vec::new())
}

#[cfg(test)]
mod api_tests;
