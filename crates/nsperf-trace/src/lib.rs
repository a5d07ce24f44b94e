//! Packet-capture TCP analysis for nsperf: `nsperf trace FILE`.
//!
//! Layers, each usable alone: [`reader`] streams packets out of pcap/pcapng files (plain or
//! compressed); [`wire`] holds checked zero-copy views of the protocol headers (nothing can
//! panic after `new_checked`); [`decode`] walks a frame to its TCP or UDP header; [`tcp`]
//! tracks each connection (retransmissions, duplicate ACKs, windows with scaling, RTT, bytes
//! in flight) and diagnoses what limited it; [`analyzer`] ties them together into the
//! [`model`] that `--json` prints.
//!
//! Memory is bounded by the live connections, not by the file: packets are never stored,
//! and per-connection state is a few small bounded structures.
#![deny(missing_docs)]

pub mod analyzer;
pub mod decode;
pub mod error;
pub mod filter;
pub mod model;
pub mod reader;
pub mod tcp;
pub mod testkit;
pub mod wire;

use std::path::Path;

pub use analyzer::{Analyzer, TraceConfig};
pub use error::TraceError;
pub use filter::Filter;
pub use model::{TraceInterval, TraceSpec, TraceSummary};
pub use reader::CaptureReader;

/// Reads and analyses a whole capture file (`-` for standard input).
pub fn analyze_file(
    path: &Path,
    cfg: TraceConfig,
) -> Result<(TraceSummary, Vec<TraceInterval>), TraceError> {
    let reader = CaptureReader::open(path)?;
    analyze_reader(reader, cfg)
}

/// Analyses every packet of an open reader.
pub fn analyze_reader(
    mut reader: CaptureReader,
    cfg: TraceConfig,
) -> Result<(TraceSummary, Vec<TraceInterval>), TraceError> {
    let mut an = Analyzer::new(cfg);
    reader.for_each_packet(|p| an.packet(p))?;
    Ok(an.finish(reader.stats().clone()))
}

/// Analyses capture bytes in memory (tests, fuzzing). Never panics.
pub fn analyze_bytes(
    bytes: &[u8],
    cfg: TraceConfig,
) -> Result<(TraceSummary, Vec<TraceInterval>), TraceError> {
    let reader = CaptureReader::from_reader(std::io::Cursor::new(bytes.to_vec()))?;
    analyze_reader(reader, cfg)
}
