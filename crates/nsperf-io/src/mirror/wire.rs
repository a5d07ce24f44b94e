//! The mirror's wire format: a hello, then fixed 24-byte frames from the writer to the peer
//! (a WRITE's data follows its frame) and fixed 24-byte acks back. Little-endian, no
//! allocation to encode or decode; every decoder checks what it reads (the peer's input is
//! untrusted, and so is the writer's for the peer).

use super::Protocol;

/// The first bytes of a hello.
pub(crate) const MAGIC: [u8; 4] = *b"NSPM";
/// Version of this format.
pub(crate) const VERSION: u8 = 1;
/// Bytes of a hello before the file name.
pub(crate) const HELLO_LEN: usize = 20;
/// Bytes of a frame and of an ack.
pub(crate) const MSG_LEN: usize = 24;
/// Longest file name a hello carries.
pub(crate) const NAME_MAX: usize = 255;
/// Largest write a peer accepts (the writer's block size must not exceed it).
pub(crate) const BLOCK_MAX: u32 = 64 << 20;

/// What the writer asks of the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameKind {
    /// `len` bytes of data follow; write them at `offset`.
    Write = 1,
    /// Make what was written durable (fsync), then ack.
    Flush = 2,
    /// Answer the CRC-32 of the file's first `offset` bytes.
    Check = 3,
}

/// A frame: what, which (`seq`), where and how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    pub kind: FrameKind,
    pub len: u32,
    pub seq: u64,
    pub offset: u64,
}

/// What the peer answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckKind {
    /// The hello was accepted (`status` 0) or refused (`status` an errno).
    Hello = 0,
    /// The write's data arrived (protocols A and B).
    Received = 1,
    /// The write is in the peer's file (protocol C); `value` is the peer's write time, ns.
    Written = 2,
    /// The flush is done; `value` is its time, ns.
    Flushed = 3,
    /// `value` is the CRC-32 asked for.
    Checked = 4,
}

/// An ack: `status` 0 or the errno of the peer's failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ack {
    pub kind: AckKind,
    pub status: i32,
    pub seq: u64,
    pub value: u64,
}

/// What a hello carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hello {
    pub protocol: Protocol,
    pub file_len: u64,
    pub block_max: u32,
    pub name: String,
}

/// A message that is none of this format's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Not a mirror hello (another program on the port?).
    #[error("not an nsperf mirror peer or writer (bad magic)")]
    Magic,
    /// Another version of the format.
    #[error("mirror format version {0}, this nsperf speaks {VERSION}")]
    Version(u8),
    /// A field outside its range.
    #[error("bad mirror message: {0}")]
    Bad(&'static str),
}

impl Hello {
    /// The hello's fixed part into `out[..HELLO_LEN]`, the name after it; returns the length.
    pub(crate) fn encode(&self, out: &mut [u8; HELLO_LEN + NAME_MAX]) -> usize {
        out[..4].copy_from_slice(&MAGIC);
        out[4] = VERSION;
        out[5] = self.protocol.code();
        let n = self.name.len().min(NAME_MAX);
        out[6..8].copy_from_slice(&(n as u16).to_le_bytes());
        out[8..16].copy_from_slice(&self.file_len.to_le_bytes());
        out[16..20].copy_from_slice(&self.block_max.to_le_bytes());
        out[HELLO_LEN..HELLO_LEN + n].copy_from_slice(&self.name.as_bytes()[..n]);
        HELLO_LEN + n
    }

    /// The fixed part: protocol, file length, largest block and the name's length.
    pub(crate) fn decode_head(
        b: &[u8; HELLO_LEN],
    ) -> Result<(Protocol, u64, u32, usize), WireError> {
        if b[..4] != MAGIC {
            return Err(WireError::Magic);
        }
        if b[4] != VERSION {
            return Err(WireError::Version(b[4]));
        }
        let protocol = Protocol::of_code(b[5]).ok_or(WireError::Bad("protocol"))?;
        let n = usize::from(u16::from_le_bytes([b[6], b[7]]));
        if n == 0 || n > NAME_MAX {
            return Err(WireError::Bad("file name length"));
        }
        let file_len = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let block_max = u32::from_le_bytes(b[16..20].try_into().expect("4 bytes"));
        if block_max == 0 || block_max > BLOCK_MAX {
            return Err(WireError::Bad("block size"));
        }
        Ok((protocol, file_len, block_max, n))
    }

    /// The file name: one plain component (no `/`, not `.` or `..`, no NUL).
    pub(crate) fn decode_name(b: &[u8]) -> Result<String, WireError> {
        let s = std::str::from_utf8(b).map_err(|_| WireError::Bad("file name is not UTF-8"))?;
        if s.is_empty() || s == "." || s == ".." || s.contains(['/', '\0']) {
            return Err(WireError::Bad("file name is not one plain component"));
        }
        Ok(s.to_string())
    }
}

impl Frame {
    pub(crate) fn encode(&self) -> [u8; MSG_LEN] {
        let mut b = [0u8; MSG_LEN];
        b[0] = self.kind as u8;
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8; MSG_LEN]) -> Result<Frame, WireError> {
        let kind = match b[0] {
            1 => FrameKind::Write,
            2 => FrameKind::Flush,
            3 => FrameKind::Check,
            _ => return Err(WireError::Bad("frame kind")),
        };
        Ok(Frame {
            kind,
            len: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            seq: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            offset: u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
        })
    }
}

impl Ack {
    pub(crate) fn encode(&self) -> [u8; MSG_LEN] {
        let mut b = [0u8; MSG_LEN];
        b[0] = self.kind as u8;
        b[4..8].copy_from_slice(&self.status.to_le_bytes());
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.value.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Result<Ack, WireError> {
        let b: &[u8; MSG_LEN] = b.try_into().map_err(|_| WireError::Bad("ack length"))?;
        let kind = match b[0] {
            0 => AckKind::Hello,
            1 => AckKind::Received,
            2 => AckKind::Written,
            3 => AckKind::Flushed,
            4 => AckKind::Checked,
            _ => return Err(WireError::Bad("ack kind")),
        };
        Ok(Ack {
            kind,
            status: i32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            seq: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            value: u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
        })
    }
}

/// Decodes whatever bytes as a hello, frames and acks: never panics (the fuzz target's body).
pub fn fuzz_decode(data: &[u8]) {
    if let Some(h) = data.get(..HELLO_LEN) {
        let h: &[u8; HELLO_LEN] = h.try_into().expect("HELLO_LEN bytes");
        if let Ok((_, _, _, n)) = Hello::decode_head(h) {
            if let Some(name) = data.get(HELLO_LEN..HELLO_LEN + n) {
                let _ = Hello::decode_name(name);
            }
        }
    }
    for c in data.chunks_exact(MSG_LEN) {
        let _ = Frame::decode(c.try_into().expect("MSG_LEN bytes"));
        let _ = Ack::decode(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let f = Frame {
            kind: FrameKind::Write,
            len: 1 << 20,
            seq: 77,
            offset: 3 << 30,
        };
        assert_eq!(Frame::decode(&f.encode()), Ok(f));
        let a = Ack {
            kind: AckKind::Written,
            status: -5,
            seq: 9,
            value: 123_456,
        };
        assert_eq!(Ack::decode(&a.encode()), Ok(a));
        let h = Hello {
            protocol: Protocol::B,
            file_len: 1 << 30,
            block_max: 1 << 20,
            name: ".nsperf-io-1-0".into(),
        };
        let mut buf = [0u8; HELLO_LEN + NAME_MAX];
        let n = h.encode(&mut buf);
        let head: &[u8; HELLO_LEN] = buf[..HELLO_LEN].try_into().unwrap();
        let (p, len, bmax, nl) = Hello::decode_head(head).unwrap();
        assert_eq!(
            (p, len, bmax, HELLO_LEN + nl),
            (Protocol::B, 1 << 30, 1 << 20, n)
        );
        assert_eq!(Hello::decode_name(&buf[HELLO_LEN..n]).unwrap(), h.name);
    }

    #[test]
    fn bad_input_is_refused() {
        let mut head = [0u8; HELLO_LEN];
        assert_eq!(Hello::decode_head(&head), Err(WireError::Magic));
        head[..4].copy_from_slice(&MAGIC);
        head[4] = 9;
        assert_eq!(Hello::decode_head(&head), Err(WireError::Version(9)));
        head[4] = VERSION;
        head[5] = b'C';
        head[6] = 1;
        head[16] = 1;
        assert!(Hello::decode_head(&head).is_ok());
        head[5] = b'D';
        assert_eq!(Hello::decode_head(&head), Err(WireError::Bad("protocol")));
        for bad in ["", ".", "..", "a/b", "../x", "a\0b"] {
            assert!(Hello::decode_name(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(Hello::decode_name(&[0xff, 0xfe]).is_err());
        assert!(Frame::decode(&[0u8; MSG_LEN]).is_err());
        assert!(Ack::decode(&[9u8; MSG_LEN]).is_err());
        assert!(Ack::decode(&[0u8; 3]).is_err());
        fuzz_decode(&[0xffu8; 1000]);
    }
}
