//! UDP headers.

use super::{Result, WireError, be16};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const HEADER_LEN: usize = 8;
}

/// A view of a UDP datagram. After `new_checked` the 8-byte header is captured.
#[derive(Debug, Clone, Copy)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps `buffer` after checking the header is present and its length field possible.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < field::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let len = usize::from(be16(b, field::LENGTH));
        if len != 0 && len < field::HEADER_LEN {
            return Err(WireError::Malformed);
        }
        Ok(UdpPacket { buffer })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Payload length claimed by the header (0 for a jumbogram's zero length field).
    pub fn payload_len(&self) -> usize {
        usize::from(be16(self.buffer.as_ref(), field::LENGTH)).saturating_sub(field::HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deconstruct_truncated_impossible() {
        let d = [0x13, 0x89, 0x00, 0x35, 0x00, 0x0c, 0, 0, 1, 2, 3, 4];
        let u = UdpPacket::new_checked(&d[..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.payload_len()), (5001, 53, 4));
        for n in 0..8 {
            assert_eq!(
                UdpPacket::new_checked(&d[..n]).unwrap_err(),
                WireError::Truncated
            );
        }
        let mut bad = d;
        bad[5] = 4;
        assert_eq!(
            UdpPacket::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
    }
}
