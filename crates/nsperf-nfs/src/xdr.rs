//! XDR (RFC 4506) the smoltcp way: [`XdrReader`] is a checked cursor over untrusted bytes —
//! every accessor returns `Err` on a short buffer or an impossible length and none can
//! panic — and the `put_*` functions append to a caller-owned `Vec` that is cleared and
//! reused, so encoding allocates nothing once the vector has grown.

/// Why bytes are not valid XDR of what was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum XdrError {
    /// The bytes end before the item.
    #[error("truncated XDR (needed {need} more bytes at offset {at})")]
    Truncated {
        /// Offset of the item.
        at: usize,
        /// Bytes missing.
        need: usize,
    },
    /// A variable-length item longer than its declared maximum.
    #[error("XDR item of {len} bytes exceeds its limit of {max}")]
    TooLong {
        /// Length given.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// A boolean or union discriminant with a value the protocol does not define.
    #[error("invalid XDR discriminant {0}")]
    Discriminant(u32),
}

/// Rounds `n` up to the XDR unit of 4 bytes.
#[inline]
pub const fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// A checked reading cursor over XDR bytes.
#[derive(Debug, Clone)]
pub struct XdrReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> XdrReader<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        XdrReader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The bytes not consumed yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// `n` raw bytes (no padding).
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], XdrError> {
        if n > self.remaining() {
            return Err(XdrError::Truncated {
                at: self.pos,
                need: n - self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), XdrError> {
        self.take(n).map(|_| ())
    }

    /// An unsigned 32-bit integer.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, XdrError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An unsigned 64-bit integer (hyper).
    #[inline]
    pub fn u64(&mut self) -> Result<u64, XdrError> {
        Ok(((self.u32()? as u64) << 32) | self.u32()? as u64)
    }

    /// A boolean: 0 or 1, anything else is an error.
    pub fn bool(&mut self) -> Result<bool, XdrError> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(XdrError::Discriminant(v)),
        }
    }

    /// Fixed-length opaque data of `n` bytes (padded to 4).
    pub fn fixed(&mut self, n: usize) -> Result<&'a [u8], XdrError> {
        let s = self.take(n)?;
        self.skip(pad4(n) - n)?;
        Ok(s)
    }

    /// Variable-length opaque data or string of at most `max` bytes (padded to 4).
    pub fn opaque(&mut self, max: usize) -> Result<&'a [u8], XdrError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(XdrError::TooLong { len, max });
        }
        self.fixed(len)
    }
}

/// Appends a 32-bit integer.
#[inline]
pub fn put_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_be_bytes());
}

/// Appends a 64-bit integer.
#[inline]
pub fn put_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_be_bytes());
}

/// Appends a boolean.
#[inline]
pub fn put_bool(buf: &mut Vec<u8>, v: bool) {
    put_u32(buf, v as u32);
}

/// Appends fixed-length opaque data, padded to 4 bytes.
pub fn put_fixed(buf: &mut Vec<u8>, data: &[u8]) {
    buf.extend_from_slice(data);
    buf.resize(buf.len() + pad4(data.len()) - data.len(), 0);
}

/// Appends variable-length opaque data or a string: length, bytes, padding.
pub fn put_opaque(buf: &mut Vec<u8>, data: &[u8]) {
    put_u32(buf, data.len() as u32);
    put_fixed(buf, data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = Vec::new();
        put_u32(&mut b, 7);
        put_u64(&mut b, 0x0102_0304_0506_0708);
        put_bool(&mut b, true);
        put_opaque(&mut b, b"abcde");
        put_fixed(&mut b, b"xy");
        assert_eq!(b.len(), 4 + 8 + 4 + 4 + 8 + 4);
        let mut r = XdrReader::new(&b);
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.u64().unwrap(), 0x0102_0304_0506_0708);
        assert!(r.bool().unwrap());
        assert_eq!(r.opaque(8).unwrap(), b"abcde");
        assert_eq!(r.fixed(2).unwrap(), b"xy");
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn truncated_and_impossible() {
        let mut r = XdrReader::new(&[0, 0, 0]);
        assert!(matches!(r.u32(), Err(XdrError::Truncated { .. })));
        let mut r = XdrReader::new(&[0, 0, 0, 2]);
        assert_eq!(r.bool(), Err(XdrError::Discriminant(2)));
        // A length larger than the buffer, and one over the limit.
        let mut r = XdrReader::new(&[0xff, 0xff, 0xff, 0xff, 1, 2]);
        assert!(matches!(
            r.opaque(usize::MAX),
            Err(XdrError::Truncated { .. })
        ));
        let mut r = XdrReader::new(&[0, 0, 0, 65]);
        assert_eq!(r.opaque(64), Err(XdrError::TooLong { len: 65, max: 64 }));
    }
}
