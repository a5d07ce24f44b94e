//! Length-prefixed frames on a byte stream: the one codec under nsperf's two control
//! protocols (`net`'s client–server protocol and the agent's coordinator–agent protocol).
//!
//! A frame is a header and a body:
//!
//! ```text
//! 0..4   magic, fixed per protocol (b"NSPF", b"NSPA")
//! 4..6   protocol version, big endian
//! 6      message kind           } only when the format has a kind byte;
//! 7      reserved, 0            } the length then starts at 8, else at 6
//! ..+4   body length, big endian, at most the format's `max_body`
//! ..     body (both protocols put one JSON object there)
//! ```
//!
//! Invariant: [`FrameDecoder`] never panics and never buffers more than one header plus
//! `max_body` for a frame, whatever bytes it is fed; every malformed header is a
//! [`FrameError`]. A wrong magic is judged on the first byte that differs, so a peer that is
//! not nsperf (an iperf3 server answers one byte and waits) is refused at once.
//! Decoding copies nothing: a [`Frame`] borrows the decoder's buffer.

use serde::Serialize;

/// The shape of one protocol's frames.
#[derive(Debug, Clone, Copy)]
pub struct FrameFormat {
    /// First bytes of every frame.
    pub magic: [u8; 4],
    /// The version this end speaks; a frame of another version is refused.
    pub version: u16,
    /// `Some(known)`: the header carries a kind byte (and a reserved one), and `known` says
    /// which kinds exist; `None`: no kind byte.
    pub kind: Option<fn(u8) -> bool>,
    /// Largest body accepted.
    pub max_body: usize,
}

/// Why a frame's header is not acceptable. Exhaustive on purpose: each protocol maps every
/// case to its own error with its own wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The bytes do not start with the format's magic (bytes not yet read are 0).
    #[error("bad magic {0:02x?}")]
    BadMagic([u8; 4]),
    /// The peer speaks another version.
    #[error("protocol version mismatch: peer speaks {theirs}, this end speaks {ours}")]
    Version {
        /// Ours.
        ours: u16,
        /// The peer's.
        theirs: u16,
    },
    /// The announced body is longer than the format's `max_body`.
    #[error("frame of {0} bytes is over the limit")]
    TooLong(u32),
    /// The kind byte names no known message.
    #[error("unknown message kind {0}")]
    BadKind(u8),
}

/// One whole frame, borrowed from the decoder until its next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The kind byte (0 for a format without one).
    pub kind: u8,
    /// The body.
    pub body: &'a [u8],
}

impl FrameFormat {
    /// Length of a frame header.
    pub const fn header_len(&self) -> usize {
        if self.kind.is_some() { 12 } else { 10 }
    }

    /// Where the body length sits in the header.
    const fn len_at(&self) -> usize {
        self.header_len() - 4
    }

    /// Appends one frame of `kind` (ignored without a kind byte) whose body is `msg` as JSON,
    /// serialised straight into `out`. If `msg` cannot be serialised the frame goes out with
    /// an empty body and the error is returned.
    pub fn encode_json<T: Serialize + ?Sized>(
        &self,
        kind: u8,
        msg: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), serde_json::Error> {
        let start = out.len();
        out.extend_from_slice(&self.magic);
        out.extend_from_slice(&self.version.to_be_bytes());
        if self.kind.is_some() {
            out.extend_from_slice(&[kind, 0]);
        }
        out.extend_from_slice(&[0; 4]);
        let body_at = out.len();
        let written = serde_json::to_writer(&mut *out, msg);
        if written.is_err() {
            out.truncate(body_at);
        }
        let len = (out.len() - body_at) as u32;
        let at = start + self.len_at();
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
        written
    }
}

/// Accumulates bytes from the stream and yields whole frames of one [`FrameFormat`].
#[derive(Debug)]
pub struct FrameDecoder {
    format: FrameFormat,
    buf: Vec<u8>,
    /// Bytes of the frame last returned, dropped at the next call.
    consumed: usize,
}

impl FrameDecoder {
    /// An empty decoder for `format`.
    pub fn new(format: FrameFormat) -> Self {
        FrameDecoder {
            format,
            buf: Vec::new(),
            consumed: 0,
        }
    }

    fn compact(&mut self) {
        if self.consumed > 0 {
            self.buf.drain(..self.consumed);
            self.consumed = 0;
        }
    }

    /// Appends bytes read from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered but not yet returned in a frame.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.consumed
    }

    /// How many more bytes are needed before [`FrameDecoder::next_frame`] can make progress
    /// (at least 1), so a reader never reads past the current frame.
    pub fn wanted(&self) -> usize {
        let have = &self.buf[self.consumed..];
        let header = self.format.header_len();
        if have.len() < header {
            return header - have.len();
        }
        let at = self.format.len_at();
        let len = u32::from_be_bytes([have[at], have[at + 1], have[at + 2], have[at + 3]]);
        (header + (len as usize).min(self.format.max_body))
            .saturating_sub(have.len())
            .max(1)
    }

    /// The next whole frame, `Ok(None)` when more bytes are needed. The header is judged as
    /// soon as it is here, before its body. After an error the stream is unusable: the caller
    /// drops the connection.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, FrameError> {
        self.compact();
        let f = self.format;
        let seen = self.buf.len().min(4);
        if self.buf[..seen] != f.magic[..seen] {
            let mut m = [0u8; 4];
            m[..seen].copy_from_slice(&self.buf[..seen]);
            return Err(FrameError::BadMagic(m));
        }
        let header = f.header_len();
        if self.buf.len() < header {
            return Ok(None);
        }
        let h = &self.buf[..header];
        let version = u16::from_be_bytes([h[4], h[5]]);
        if version != f.version {
            return Err(FrameError::Version {
                ours: f.version,
                theirs: version,
            });
        }
        let at = f.len_at();
        let len = u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
        if len as usize > f.max_body {
            return Err(FrameError::TooLong(len));
        }
        let kind = match f.kind {
            Some(known) if !known(h[6]) => return Err(FrameError::BadKind(h[6])),
            Some(_) => h[6],
            None => 0,
        };
        let end = header + len as usize;
        if self.buf.len() < end {
            return Ok(None);
        }
        self.consumed = end;
        Ok(Some(Frame {
            kind,
            body: &self.buf[header..end],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(k: u8) -> bool {
        k < 10
    }

    const KINDED: FrameFormat = FrameFormat {
        magic: *b"TEST",
        version: 3,
        kind: Some(known),
        max_body: 64,
    };
    const PLAIN: FrameFormat = FrameFormat {
        magic: *b"PLAI",
        version: 1,
        kind: None,
        max_body: 64,
    };

    #[test]
    fn headers_are_laid_out_as_documented() {
        let mut out = Vec::new();
        KINDED.encode_json(7, &"ab", &mut out).unwrap();
        assert_eq!(out, b"TEST\x00\x03\x07\x00\x00\x00\x00\x04\"ab\"");
        out.clear();
        PLAIN.encode_json(7, &1u8, &mut out).unwrap();
        assert_eq!(out, b"PLAI\x00\x01\x00\x00\x00\x011");
    }

    #[test]
    fn frames_come_back_split_anywhere() {
        for format in [KINDED, PLAIN] {
            let mut wire = Vec::new();
            for (k, body) in [(1u8, "x"), (2, "yy"), (9, "")] {
                format.encode_json(k, body, &mut wire).unwrap();
            }
            for split in 1..wire.len() {
                let mut d = FrameDecoder::new(format);
                let mut got = Vec::new();
                for c in wire.chunks(split) {
                    d.push(c);
                    while let Some(f) = d.next_frame().unwrap() {
                        got.push((f.kind, f.body.to_vec()));
                    }
                }
                let kinds: Vec<u8> = if format.kind.is_some() {
                    vec![1, 2, 9]
                } else {
                    vec![0, 0, 0]
                };
                assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), kinds);
                assert_eq!(got[1].1, b"\"yy\"");
                assert_eq!(d.buffered(), 0);
            }
        }
    }

    #[test]
    fn bad_headers_are_errors() {
        let mut d = FrameDecoder::new(KINDED);
        d.push(b"X");
        assert_eq!(d.next_frame(), Err(FrameError::BadMagic(*b"X\0\0\0")));
        let mut d = FrameDecoder::new(KINDED);
        d.push(b"TEST\x00\x04\x01\x00\x00\x00\x00\x00");
        assert_eq!(
            d.next_frame(),
            Err(FrameError::Version { ours: 3, theirs: 4 })
        );
        let mut d = FrameDecoder::new(KINDED);
        d.push(b"TEST\x00\x03\x01\x00\x00\x00\x00\x41");
        assert_eq!(d.next_frame(), Err(FrameError::TooLong(65)));
        assert_eq!(d.wanted(), 64 + 12 - 12);
        let mut d = FrameDecoder::new(KINDED);
        d.push(b"TEST\x00\x03\x0a\x00\x00\x00\x00\x01");
        assert_eq!(d.next_frame(), Err(FrameError::BadKind(10)));
    }

    #[test]
    fn wanted_stops_at_the_frame_end() {
        let mut wire = Vec::new();
        PLAIN.encode_json(0, "abc", &mut wire).unwrap();
        let mut d = FrameDecoder::new(PLAIN);
        assert_eq!(d.wanted(), 10);
        d.push(&wire[..3]);
        assert_eq!(d.wanted(), 7);
        d.push(&wire[3..10]);
        assert_eq!(d.wanted(), 5);
        d.push(&wire[10..]);
        assert!(d.next_frame().unwrap().is_some());
        assert_eq!(d.wanted(), 10);
    }
}
