//! The network engine of nsperf: `nsperf server` and `nsperf net`.
//!
//! - [`proto`]: the control protocol as pure state machines (no I/O, tested in memory);
//! - [`server`]: serves many clients at once on one port, with caps and optional pre-shared
//!   key authentication;
//! - [`client`]: runs a test against a server and collects both ends' measurements;
//! - [`tcp`], [`udp`], [`rr`]: the data paths (bulk TCP, UDP datagrams, request/response and
//!   the message-size sweep);
//! - [`report`] and [`findings`]: the result model and what the figures mean.
//!
//! Both ends sample their streams (bytes, `TCP_INFO`) and CPU per interval with the same
//! code ([`meter`]); the server sends its samples to the client at the end.
#![deny(missing_docs)]

pub mod client;
pub mod config;
pub mod control;
pub mod error;
pub mod findings;
pub mod loopback;
pub mod meter;
pub mod proto;
pub mod report;
pub mod results;
pub mod rr;
pub mod server;
pub mod sock;
pub mod tcp;
pub mod tcpinfo;
pub mod udp;

pub use config::{ClientConfig, Direction, Mode, Protocol, ServerConfig, TestParams};
pub use error::NetError;
pub use report::{NetReport, NetSpec};

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
        false,
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
