//! The control protocol between `nsperf net` and `nsperf server`, without any I/O.
//!
//! One control connection per client carries framed messages ([`frame`]); the data flows on
//! separate connections that start with a [`frame::DataHello`] naming the test's cookie.
//! The order of messages is enforced by the state machines in [`session`]:
//!
//! ```text
//! client                              server
//! Hello{version}            ->
//!                           <-        Challenge{nonce}        (only with --psk-file)
//! Auth{mac}                 ->
//!                           <-        Welcome | Refused
//! Request{params}           ->
//!                           <-        Accepted{cookie, udp ports, facts} | Refused
//! (data connections / UDP hellos)
//!                           <-        Start
//! Stop                      ->        (the client's clock ended the test)
//!                           <-        Results{side}
//! ```
//!
//! Time and randomness (the challenge nonce, the cookie) are inputs, so the machines are
//! tested in memory.

pub mod frame;
pub mod session;

use serde::{Deserialize, Serialize};

use crate::config::TestParams;
use crate::results::SideResults;

pub use frame::{DataHello, FrameDecoder, ProtoError, encode};

/// The control protocol version; a peer with another version gets a clear error.
pub const PROTOCOL_VERSION: u16 = 1;

/// Why the server refused a client or a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefuseReason {
    /// Authentication failed or was required and missing.
    Auth,
    /// The server serves `--max-clients` already.
    Capacity,
    /// The test asks for more than the server's caps allow.
    Limits,
    /// The parameters are invalid.
    BadRequest,
    /// The server's kernel lacks what was asked (a congestion control, say).
    Unsupported,
}

/// The server's answer to a test request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accepted {
    /// Names the test on its data connections.
    pub cookie: u64,
    /// For UDP: the server's port of each stream, in stream order.
    pub udp_ports: Vec<u16>,
    /// The server's host facts.
    pub facts: nsperf_core::host::HostFacts,
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)]
pub enum Msg {
    /// Client → server, first message.
    Hello {
        /// The client's nsperf version (informational).
        software: String,
    },
    /// Server → client: prove knowledge of the key.
    Challenge {
        /// 32 random bytes, hex.
        nonce: String,
    },
    /// Client → server: HMAC-SHA256(key, nonce), hex.
    Auth {
        /// The MAC.
        mac: String,
    },
    /// Server → client: the session is open.
    Welcome {
        /// The server's nsperf version (informational).
        software: String,
    },
    /// Client → server: the test to run.
    Request(TestParams),
    /// Server → client: test accepted.
    Accepted(Accepted),
    /// Server → client: refused, the session ends.
    Refused {
        /// The class of refusal.
        reason: RefuseReason,
        /// One line for the user.
        message: String,
    },
    /// Server → client: every data connection is in, start the clocks.
    Start,
    /// Client → server: the test time is over, stop sending.
    Stop,
    /// Server → client: the server side's measurements.
    Results(SideResults),
    /// Either way: a fatal error, the session ends.
    Error {
        /// One line.
        message: String,
    },
}

const KINDS: [&str; 11] = [
    "hello",
    "challenge",
    "auth",
    "welcome",
    "request",
    "accepted",
    "refused",
    "start",
    "stop",
    "results",
    "error",
];

impl Msg {
    /// The kind byte of the frame header.
    pub fn kind(&self) -> u8 {
        match self {
            Msg::Hello { .. } => 0,
            Msg::Challenge { .. } => 1,
            Msg::Auth { .. } => 2,
            Msg::Welcome { .. } => 3,
            Msg::Request(_) => 4,
            Msg::Accepted(_) => 5,
            Msg::Refused { .. } => 6,
            Msg::Start => 7,
            Msg::Stop => 8,
            Msg::Results(_) => 9,
            Msg::Error { .. } => 10,
        }
    }

    /// The name of a kind byte, `None` when unknown.
    pub fn kind_name(kind: u8) -> Option<&'static str> {
        KINDS.get(kind as usize).copied()
    }

    /// This message's kind name.
    pub fn name(&self) -> &'static str {
        KINDS[self.kind() as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_msgs() -> Vec<Msg> {
        vec![
            Msg::Hello {
                software: "0.1.0".into(),
            },
            Msg::Challenge {
                nonce: "00ff".into(),
            },
            Msg::Request(TestParams::default()),
            Msg::Start,
            Msg::Stop,
            Msg::Results(SideResults::default()),
            Msg::Refused {
                reason: RefuseReason::Capacity,
                message: "busy".into(),
            },
        ]
    }

    #[test]
    fn frames_round_trip_byte_by_byte() {
        let mut wire = Vec::new();
        for m in sample_msgs() {
            encode(&m, &mut wire);
        }
        let mut d = FrameDecoder::new();
        let mut got = Vec::new();
        for b in &wire {
            d.push(std::slice::from_ref(b));
            while let Some(m) = d.next_msg().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got, sample_msgs());
        assert_eq!(d.buffered(), 0);
    }

    /// The shared codec writes the bytes the protocol's own encoder wrote before it: the
    /// reference below is that encoder, spelled out.
    #[test]
    fn frames_are_byte_identical_to_the_documented_layout() {
        let mut wire = Vec::new();
        encode(&Msg::Start, &mut wire);
        assert_eq!(
            wire,
            b"NSPF\x00\x01\x07\x00\x00\x00\x00\x10{\"type\":\"start\"}"
        );
        for m in sample_msgs() {
            let body = serde_json::to_vec(&m).unwrap();
            let mut want = b"NSPF".to_vec();
            want.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
            want.extend_from_slice(&[m.kind(), 0]);
            want.extend_from_slice(&(body.len() as u32).to_be_bytes());
            want.extend_from_slice(&body);
            let mut got = Vec::new();
            encode(&m, &mut got);
            assert_eq!(got, want);
        }
    }

    #[test]
    fn version_mismatch_is_named() {
        let mut wire = Vec::new();
        frame::encode_with_version(&Msg::Start, 9, &mut wire);
        let mut d = FrameDecoder::new();
        d.push(&wire);
        assert_eq!(
            d.next_msg(),
            Err(ProtoError::Version {
                ours: PROTOCOL_VERSION,
                theirs: 9
            })
        );
    }

    #[test]
    fn hostile_headers_are_errors() {
        let mut d = FrameDecoder::new();
        d.push(b"GET / HTTP/1.1\r\n");
        assert!(matches!(d.next_msg(), Err(ProtoError::BadMagic(_))));
        let mut d = FrameDecoder::new();
        d.push(&[b'N', b'S', b'P', b'F', 0, 1, 7, 0, 0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(d.next_msg(), Err(ProtoError::TooLong(_))));
        let mut d = FrameDecoder::new();
        d.push(&[b'N', b'S', b'P', b'F', 0, 1, 200, 0, 0, 0, 0, 2, b'{', b'}']);
        assert!(matches!(d.next_msg(), Err(ProtoError::BadKind(200))));
        // kind byte says "stop" but the body is a start
        let mut d = FrameDecoder::new();
        d.push(&[b'N', b'S', b'P', b'F', 0, 1, 8, 0, 0, 0, 0, 16]);
        d.push(br#"{"type":"start"}"#);
        assert!(matches!(d.next_msg(), Err(ProtoError::BadKind(8))));
    }

    /// A tiny xorshift generator: deterministic random bytes without a dependency.
    fn xorshift(state: &mut u64) -> u64 {
        let mut x = *state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *state = x;
        x
    }

    /// Random, truncated and mutated frames never panic the decoder (the fuzz target's
    /// inputs, run in CI without a nightly toolchain).
    #[test]
    fn decoder_survives_random_and_mutated_bytes() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut valid = Vec::new();
        for m in sample_msgs() {
            encode(&m, &mut valid);
        }
        for round in 0..20_000 {
            let mut input: Vec<u8> = if round % 2 == 0 {
                let n = (xorshift(&mut seed) % 256) as usize;
                (0..n).map(|_| xorshift(&mut seed) as u8).collect()
            } else {
                let mut v = valid.clone();
                let flips = 1 + xorshift(&mut seed) % 4;
                for _ in 0..flips {
                    let i = (xorshift(&mut seed) as usize) % v.len();
                    v[i] = xorshift(&mut seed) as u8;
                }
                let cut = (xorshift(&mut seed) as usize) % (v.len() + 1);
                v.truncate(cut);
                v
            };
            if round % 3 == 0 && input.len() >= 4 {
                input[..4].copy_from_slice(&frame::MAGIC);
            }
            crate::fuzz_control_decoder(&input);
        }
    }

    #[test]
    fn data_hello_round_trips() {
        let h = DataHello {
            cookie: 0xdead_beef_0102_0304,
            stream: 199,
        };
        assert_eq!(DataHello::decode(&h.encode()), Some(h));
        assert_eq!(DataHello::decode(&[0u8; 16]), None);
    }
}
