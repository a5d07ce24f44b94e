//! Framing of control messages on the byte stream.
//!
//! A frame is a 12-byte header and a body:
//!
//! ```text
//! 0..4   magic  b"NSPF"
//! 4..6   protocol version, big endian
//! 6      message kind (see `Kind`)
//! 7      reserved, 0
//! 8..12  body length, big endian, at most MAX_BODY
//! 12..   body: one JSON object
//! ```
//!
//! The codec is `nsperf_core::frame`'s (shared with the agent's protocol); this module gives it
//! this protocol's magic, version, kind byte and limit, and turns bodies into [`Msg`]s.
//!
//! Invariant: [`FrameDecoder`] never panics and never allocates more than `MAX_BODY` plus one
//! header for a frame, whatever bytes it is fed; every malformed input is a [`ProtoError`].
//! A data connection instead starts with the 16-byte [`DataHello`].

use nsperf_core::frame::{FrameError, FrameFormat};

use super::{Msg, PROTOCOL_VERSION};

/// First bytes of every control frame.
pub const MAGIC: [u8; 4] = *b"NSPF";
/// First bytes of a data connection's hello.
pub const DATA_MAGIC: [u8; 4] = *b"NSPD";
/// Largest accepted body (a result document of a 200-stream test fits with room to spare).
pub const MAX_BODY: usize = 16 << 20;

/// Why bytes from the peer are not a valid control message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// The bytes do not start with the nsperf magic: the peer is not nsperf.
    #[error("peer is not an nsperf endpoint (bad magic {0:02x?})")]
    BadMagic([u8; 4]),
    /// The peer speaks another protocol version.
    #[error("protocol version mismatch: peer speaks version {theirs}, this nsperf speaks {ours}")]
    Version {
        /// Our version.
        ours: u16,
        /// The peer's version.
        theirs: u16,
    },
    /// The announced body is longer than [`MAX_BODY`].
    #[error("control message of {0} bytes is over the {MAX_BODY}-byte limit")]
    TooLong(u32),
    /// The kind byte is unknown or does not match the body.
    #[error("unknown control message kind {0}")]
    BadKind(u8),
    /// The body is not a valid message.
    #[error("malformed control message: {0}")]
    BadBody(String),
    /// A message arrived that is not allowed in the session's current state.
    #[error("unexpected control message {got} while {state}")]
    Unexpected {
        /// The message kind received.
        got: &'static str,
        /// What the session was waiting for.
        state: &'static str,
    },
}

impl From<FrameError> for ProtoError {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::BadMagic(m) => ProtoError::BadMagic(m),
            FrameError::Version { ours, theirs } => ProtoError::Version { ours, theirs },
            FrameError::TooLong(n) => ProtoError::TooLong(n),
            FrameError::BadKind(k) => ProtoError::BadKind(k),
        }
    }
}

/// This protocol's frames in the shared codec: a kind byte, only the kinds [`Msg`] has.
const FORMAT: FrameFormat = FrameFormat {
    magic: MAGIC,
    version: PROTOCOL_VERSION,
    kind: Some(known_kind),
    max_body: MAX_BODY,
};

fn known_kind(kind: u8) -> bool {
    Msg::kind_name(kind).is_some()
}

/// Encodes `msg` as one frame, appending to `out`.
pub fn encode(msg: &Msg, out: &mut Vec<u8>) {
    encode_with_version(msg, PROTOCOL_VERSION, out)
}

/// Encodes with an explicit version (tests use it to play an older peer).
pub fn encode_with_version(msg: &Msg, version: u16, out: &mut Vec<u8>) {
    FrameFormat { version, ..FORMAT }
        .encode_json(msg.kind(), msg, out)
        .expect("messages always serialise");
}

/// Accumulates bytes from the stream and yields whole messages.
#[derive(Debug)]
pub struct FrameDecoder {
    frames: nsperf_core::frame::FrameDecoder,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder {
            frames: nsperf_core::frame::FrameDecoder::new(FORMAT),
        }
    }
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        self.frames.push(bytes)
    }

    /// Bytes buffered but not yet decoded.
    #[cfg(test)]
    pub fn buffered(&self) -> usize {
        self.frames.buffered()
    }

    /// How many more bytes are needed before [`FrameDecoder::next_msg`] can make progress (at
    /// least 1), so a reader never reads past the current frame.
    pub fn wanted(&self) -> usize {
        self.frames.wanted()
    }

    /// The next whole message, `Ok(None)` when more bytes are needed. After an error the
    /// stream is unusable: the caller drops the connection.
    pub fn next_msg(&mut self) -> Result<Option<Msg>, ProtoError> {
        let Some(frame) = self.frames.next_frame()? else {
            return Ok(None);
        };
        let msg: Msg =
            serde_json::from_slice(frame.body).map_err(|e| ProtoError::BadBody(e.to_string()))?;
        if msg.kind() != frame.kind {
            return Err(ProtoError::BadKind(frame.kind));
        }
        Ok(Some(msg))
    }
}

/// The first 16 bytes a client sends on a data connection: which test and which stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHello {
    /// The test's cookie from [`super::Accepted`].
    pub cookie: u64,
    /// Stream index within the test.
    pub stream: u32,
}

impl DataHello {
    /// Encoded length.
    pub const LEN: usize = 16;

    /// The wire form.
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&DATA_MAGIC);
        b[4..12].copy_from_slice(&self.cookie.to_be_bytes());
        b[12..16].copy_from_slice(&self.stream.to_be_bytes());
        b
    }

    /// Parses the wire form; `None` unless the magic matches.
    pub fn decode(b: &[u8; 16]) -> Option<DataHello> {
        if b[..4] != DATA_MAGIC {
            return None;
        }
        Some(DataHello {
            cookie: u64::from_be_bytes(b[4..12].try_into().ok()?),
            stream: u32::from_be_bytes(b[12..16].try_into().ok()?),
        })
    }
}
