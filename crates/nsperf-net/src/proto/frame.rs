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
//! Invariant: [`FrameDecoder`] never panics and never allocates more than `MAX_BODY` plus one
//! header for a frame, whatever bytes it is fed; every malformed input is a [`ProtoError`].
//! A data connection instead starts with the 16-byte [`DataHello`].

use super::{Msg, PROTOCOL_VERSION};

/// First bytes of every control frame.
pub const MAGIC: [u8; 4] = *b"NSPF";
/// First bytes of a data connection's hello.
pub const DATA_MAGIC: [u8; 4] = *b"NSPD";
/// Length of a frame header.
pub const HEADER_LEN: usize = 12;
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

/// Encodes `msg` as one frame, appending to `out`.
pub fn encode(msg: &Msg, out: &mut Vec<u8>) {
    encode_with_version(msg, PROTOCOL_VERSION, out)
}

/// Encodes with an explicit version (tests use it to play an older peer).
pub fn encode_with_version(msg: &Msg, version: u16, out: &mut Vec<u8>) {
    let body = serde_json::to_vec(msg).expect("messages always serialise");
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_be_bytes());
    out.push(msg.kind());
    out.push(0);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
}

/// Accumulates bytes from the stream and yields whole messages.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered but not yet decoded.
    #[cfg(test)]
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// How many more bytes are needed before [`FrameDecoder::next_msg`] can make progress (at
    /// least 1), so a reader never reads past the current frame.
    pub fn wanted(&self) -> usize {
        if self.buf.len() < HEADER_LEN {
            return HEADER_LEN - self.buf.len();
        }
        let len = u32::from_be_bytes([self.buf[8], self.buf[9], self.buf[10], self.buf[11]]);
        (HEADER_LEN + (len as usize).min(MAX_BODY))
            .saturating_sub(self.buf.len())
            .max(1)
    }

    /// The next whole message, `Ok(None)` when more bytes are needed. After an error the
    /// stream is unusable: the caller drops the connection.
    pub fn next_msg(&mut self) -> Result<Option<Msg>, ProtoError> {
        // Judged on the first byte already: an iperf3 server answers with one state byte and
        // waits.
        let seen = self.buf.len().min(4);
        if self.buf[..seen] != MAGIC[..seen] {
            let mut m = [0u8; 4];
            m[..seen].copy_from_slice(&self.buf[..seen]);
            return Err(ProtoError::BadMagic(m));
        }
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let h = &self.buf[..HEADER_LEN];
        let version = u16::from_be_bytes([h[4], h[5]]);
        let kind = h[6];
        let len = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
        if version != PROTOCOL_VERSION {
            return Err(ProtoError::Version {
                ours: PROTOCOL_VERSION,
                theirs: version,
            });
        }
        if len as usize > MAX_BODY {
            return Err(ProtoError::TooLong(len));
        }
        if Msg::kind_name(kind).is_none() {
            return Err(ProtoError::BadKind(kind));
        }
        let end = HEADER_LEN + len as usize;
        if self.buf.len() < end {
            return Ok(None);
        }
        let parsed: Result<Msg, _> = serde_json::from_slice(&self.buf[HEADER_LEN..end]);
        self.buf.drain(..end);
        let msg = parsed.map_err(|e| ProtoError::BadBody(e.to_string()))?;
        if msg.kind() != kind {
            return Err(ProtoError::BadKind(kind));
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
