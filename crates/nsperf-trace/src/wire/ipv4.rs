//! IPv4 headers.

use std::net::Ipv4Addr;

use super::{Result, WireError, be16};

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
    pub const MIN_HEADER: usize = 20;
}

/// A view of an IPv4 packet. After `new_checked`: version is 4, the header length is at least
/// 20 and fully captured, and the total length is at least the header length (or 0, as with
/// segmentation offload, when the captured length is used).
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` after checking every length the accessors rely on.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < field::MIN_HEADER {
            return Err(WireError::Truncated);
        }
        if b[field::VER_IHL] >> 4 != 4 {
            return Err(WireError::Malformed);
        }
        let hl = usize::from(b[field::VER_IHL] & 0x0f) * 4;
        if hl < field::MIN_HEADER {
            return Err(WireError::Malformed);
        }
        if b.len() < hl {
            return Err(WireError::Truncated);
        }
        let total = usize::from(be16(b, field::TOTAL_LEN));
        if total != 0 && total < hl {
            return Err(WireError::Malformed);
        }
        Ok(Ipv4Packet { buffer })
    }

    /// Header length in bytes (20..=60).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Total length as claimed by the header; the captured length when the field is 0.
    pub fn total_len(&self) -> usize {
        match usize::from(be16(self.buffer.as_ref(), field::TOTAL_LEN)) {
            0 => self.buffer.as_ref().len(),
            n => n,
        }
    }

    /// Payload length as on the wire (from the header, not the capture).
    pub fn payload_len(&self) -> usize {
        self.total_len() - self.header_len()
    }

    /// Identification field.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    /// Fragment offset in bytes; non-zero for every fragment but the first.
    pub fn frag_offset(&self) -> usize {
        usize::from(be16(self.buffer.as_ref(), field::FLAGS_FRAG) & 0x1fff) * 8
    }

    /// True when more fragments follow.
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLAGS_FRAG) & 0x2000 != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// The payload protocol number (6 TCP, 17 UDP).
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = self.buffer.as_ref();
        Ipv4Addr::new(
            b[field::SRC],
            b[field::SRC + 1],
            b[field::SRC + 2],
            b[field::SRC + 3],
        )
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = self.buffer.as_ref();
        Ipv4Addr::new(
            b[field::DST],
            b[field::DST + 1],
            b[field::DST + 2],
            b[field::DST + 3],
        )
    }

    /// The captured payload: at most `payload_len()` bytes, fewer when the capture was cut.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = self.total_len().min(b.len());
        &b[self.header_len()..end]
    }
}

impl<'a> Ipv4Packet<&'a [u8]> {
    /// The captured payload, borrowed for the buffer's lifetime.
    pub fn into_payload(self) -> &'a [u8] {
        let end = self.total_len().min(self.buffer.len());
        &self.buffer[self.header_len()..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PKT: [u8; 24] = [
        0x45, 0x00, 0x00, 0x18, 0x12, 0x34, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 10, 0, 0, 1, 10, 0,
        0, 2, 0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn deconstruct() {
        let p = Ipv4Packet::new_checked(&PKT[..]).unwrap();
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 24);
        assert_eq!(p.payload_len(), 4);
        assert_eq!(p.protocol(), 6);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.frag_offset(), 0);
        assert!(!p.more_frags());
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
    }

    #[test]
    fn snaplen_cut_keeps_wire_length() {
        let p = Ipv4Packet::new_checked(&PKT[..22]).unwrap();
        assert_eq!(p.payload_len(), 4);
        assert_eq!(p.payload(), &[0xde, 0xad]);
    }

    #[test]
    fn truncated_and_impossible() {
        for n in 0..20 {
            assert_eq!(
                Ipv4Packet::new_checked(&PKT[..n]).unwrap_err(),
                WireError::Truncated
            );
        }
        let mut bad = PKT;
        bad[0] = 0x44; // IHL 4
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        let mut bad = PKT;
        bad[0] = 0x65; // version 6
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        let mut bad = PKT;
        bad[0] = 0x4f; // IHL 60 > captured
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Truncated
        );
        let mut bad = PKT;
        bad[3] = 10; // total length < header length
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        let mut tso = PKT;
        tso[2] = 0;
        tso[3] = 0; // total length 0: offloaded, use the capture
        assert_eq!(Ipv4Packet::new_checked(&tso[..]).unwrap().payload_len(), 4);
    }
}
