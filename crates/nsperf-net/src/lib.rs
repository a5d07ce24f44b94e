//! The network engine of nsperf: `nsperf server` and `nsperf net`.
//!
//! The API: [`Server`] serves many clients at once on one port, with caps and optional
//! pre-shared key authentication; [`run_client`] runs a test ([`ClientConfig`], its
//! [`TestParams`]) against a server and collects both ends' measurements ([`ClientRun`]);
//! [`run_loopback`] does both in one process; [`build_report`] turns a run into the
//! [`NetReport`] with its findings.
//!
//! Inside, modules depend in one direction (each only on those above it):
//! - `snmp` (the kernel's UDP counters), `datagram` (the UDP datagram format), `results` (one end's measurements);
//! - `config` (typed parameters), `proto` (the control protocol as pure state machines, no
//!   I/O, tested in memory), `error`;
//! - `sock` (socket options), `meter` (per-stream counters and the interval sampler, the same
//!   code on both ends), `control` (the control connection);
//! - the data paths `tcp`, `udp`, `rr` (request/response), `sweep` (the NetPIPE
//!   message-size sweep);
//! - `connect` (the client's sockets) and `drive` (the client run's model, its data paths
//!   and interval loop), shared by both client shells;
//! - `iperf3::client` (iperf3's protocol), then `client` (nsperf's, and the choice between
//!   them), `server`, `loopback`;
//! - `summary` (the report's model), `findings` (what the figures mean), `iperf3::report`,
//!   then `report`.
//!
//! `iperf3::wire`, `iperf3::session` and `iperf3::params` sit with `proto`. The direction is
//! checked file by file (`crate::`/`super::` uses outside test modules) by
//! `nsperf-core/tests/module_direction.rs` (every crate of the workspace).
#![deny(missing_docs)]

mod bulk;
mod client;
mod config;
mod connect;
mod control;
mod datagram;
mod drive;
mod error;
mod findings;
mod iperf3;
mod loopback;
mod meter;
mod poller;
mod proto;
mod report;
mod results;
mod rr;
mod server;
mod snmp;
mod sock;
mod summary;
mod sweep;
mod tcp;
use nsperf_core::tcpinfo;
mod udp;

pub use client::run as run_client;
pub use config::{
    ClientConfig, DEFAULT_PORT, Direction, IpVersion, LocalEnd, MAX_BURST, MAX_DATAGRAM,
    MAX_MESSAGE, MAX_STREAMS, MIN_DATAGRAM, Mode, Protocol, ServerConfig, ServerKind, TestParams,
};
pub use drive::{ClientRun, LiveInterval};
pub use error::{NetError, read_key_file};
pub use iperf3::compat::document as iperf3_document;
pub use iperf3::{Iperf3Shared, Results as Iperf3Results, StreamResult as Iperf3StreamResult};
pub use loopback::run as run_loopback;
pub use proto::PROTOCOL_VERSION;
pub use report::build as build_report;
pub use results::{
    IntervalMark, STALL_TIMEOUT, SideResults, StopReason, StreamRecord, StreamSample, SweepPoint,
    UdpCounters,
};
pub use server::{
    LiveTest, LiveTotals, Logger, MAX_TEST_RECORDS, ServedTest, Server, ServerCounters,
    ServerTotals,
};
pub use snmp::UdpHostCounters;
pub use summary::{
    DirectionSummary, LossSite, NetInterval, NetReport, NetSpec, NetSummary, Peer, StreamDirection,
    StreamWindow, UdpSummary,
};
pub use tcpinfo::TcpInfoSample;

/// Feeds arbitrary bytes to the parsers of the data plane's outside bytes: a connection's data
/// hello, UDP datagram headers (at every segment offset, as GRO batches arrive) and the
/// receiver's sequence bookkeeping (the body of the fuzz target, also run by unit tests).
/// Never panics.
pub fn fuzz_datagram(data: &[u8]) {
    if let Some(hello) = data.first_chunk::<{ proto::DataHello::LEN }>() {
        let _ = proto::DataHello::decode(hello);
    }
    let mut t = datagram::SequenceTracker::new();
    let seg = data.first().map_or(1, |&b| 1 + b as usize % 64);
    for chunk in data.chunks(seg.max(datagram::HEADER_LEN)) {
        if let Some(h) = datagram::Header::read(chunk) {
            t.record(h.seq, h.tx_ns, h.tx_ns.wrapping_add(h.cookie as u64));
        }
    }
}

/// Feeds arbitrary bytes to both iperf3 session machines in each of their waiting states (the
/// body of the `net_iperf3` fuzz target, also run by unit tests). Never panics.
pub fn fuzz_iperf3_decoder(data: &[u8]) {
    iperf3::session::fuzz(data)
}

/// Feeds arbitrary bytes to the control-protocol decoder and to both session state machines
/// (the body of the fuzz target, also run by unit tests). Never panics.
pub fn fuzz_control_decoder(data: &[u8]) {
    let mut d = proto::FrameDecoder::new();
    // Split the input in two pushes to exercise partial frames.
    let cut = data
        .first()
        .map(|&b| b as usize % (data.len() + 1))
        .unwrap_or(0);
    d.push(&data[..cut]);
    let _ = d.wanted();
    let mut server = proto::session::ServerSession::new(
        proto::session::ServerPolicy {
            psk: Some(b"k".to_vec()),
            max_streams: 4,
            max_time_ns: 1_000_000_000,
        },
        [0; 32],
    );
    let (mut client, _) = proto::session::ClientSession::new(TestParams::default(), None);
    let mut feed = |d: &mut proto::FrameDecoder| {
        for _ in 0..64 {
            match d.next_msg() {
                Ok(Some(m)) => {
                    let _ = server.on_msg(m.clone());
                    let _ = client.on_msg(m);
                }
                Ok(None) | Err(_) => break,
            }
        }
    };
    feed(&mut d);
    d.push(&data[cut..]);
    feed(&mut d);
}
