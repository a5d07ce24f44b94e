//! IPv6 headers, with the extension-header chain walked to the upper-layer protocol.

use std::net::Ipv6Addr;

use super::{Result, WireError, be16};

mod field {
    pub const VER: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
    pub const HEADER_LEN: usize = 40;
}

/// Extension headers walked before giving up (a real chain has two or three).
const MAX_EXTENSION_HEADERS: usize = 8;

/// A view of an IPv6 packet. After `new_checked`: version is 6 and the 40-byte header is
/// captured. The extension-header walk in [`Ipv6Packet::upper_layer`] checks its own bounds.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// The upper-layer protocol of an IPv6 packet and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpperLayer {
    /// Protocol number (6 TCP, 17 UDP).
    pub protocol: u8,
    /// Offset of its header from the start of the IPv6 header.
    pub offset: usize,
    /// True when this is a non-first fragment (no upper-layer header here).
    pub later_fragment: bool,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` after checking the fixed header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < field::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b[field::VER] >> 4 != 6 {
            return Err(WireError::Malformed);
        }
        Ok(Ipv6Packet { buffer })
    }

    /// The payload length field; the captured length when 0 (jumbogram or offload).
    pub fn payload_len(&self) -> usize {
        match usize::from(be16(self.buffer.as_ref(), field::PAYLOAD_LEN)) {
            0 => self.buffer.as_ref().len() - field::HEADER_LEN,
            n => n,
        }
    }

    /// Length of the packet on the wire: header plus payload length.
    pub fn total_len(&self) -> usize {
        field::HEADER_LEN + self.payload_len()
    }

    /// The next-header field of the fixed header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC..field::SRC + 16]);
        Ipv6Addr::from(a)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST..field::DST + 16]);
        Ipv6Addr::from(a)
    }

    /// Walks hop-by-hop, routing, fragment and destination-options headers; `None` when the
    /// chain is cut by the capture or longer than 8 headers.
    pub fn upper_layer(&self) -> Option<UpperLayer> {
        let b = self.buffer.as_ref();
        let mut next = self.next_header();
        let mut off = field::HEADER_LEN;
        let mut later_fragment = false;
        for _ in 0..MAX_EXTENSION_HEADERS {
            match next {
                0 | 43 | 60 => {
                    let h = b.get(off..off + 2)?;
                    next = h[0];
                    off = off.checked_add((usize::from(h[1]) + 1) * 8)?;
                }
                44 => {
                    let h = b.get(off..off + 8)?;
                    next = h[0];
                    later_fragment = be16(h, 2) & 0xfff8 != 0;
                    off += 8;
                }
                p => {
                    return (off <= b.len()).then_some(UpperLayer {
                        protocol: p,
                        offset: off,
                        later_fragment,
                    });
                }
            }
        }
        None
    }

    /// The whole captured packet, header included.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<'a> Ipv6Packet<&'a [u8]> {
    /// The whole captured packet, borrowed for the buffer's lifetime.
    pub fn into_bytes(self) -> &'a [u8] {
        self.buffer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(next: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        p.push(next);
        p.push(64);
        p.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        p.extend_from_slice(&"fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn deconstruct() {
        let b = packet(6, &[1, 2, 3, 4]);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload_len(), 4);
        assert_eq!(p.total_len(), 44);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), Ipv6Addr::LOCALHOST);
        assert_eq!(p.dst_addr(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        let u = p.upper_layer().unwrap();
        assert_eq!((u.protocol, u.offset, u.later_fragment), (6, 40, false));
    }

    #[test]
    fn extension_chain() {
        // hop-by-hop (8 bytes) then fragment (offset 0) then TCP
        let mut ext = vec![44, 0, 0, 0, 0, 0, 0, 0];
        ext.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 1]);
        let b = packet(0, &ext);
        let u = Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!((u.protocol, u.offset, u.later_fragment), (6, 56, false));
        // a later fragment
        let b = packet(44, &[6, 0, 0x05, 0x00, 0, 0, 0, 1]);
        let u = Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert!(u.later_fragment);
    }

    #[test]
    fn truncated_and_impossible() {
        let b = packet(6, &[]);
        for n in 0..40 {
            assert_eq!(
                Ipv6Packet::new_checked(&b[..n]).unwrap_err(),
                WireError::Truncated
            );
        }
        let mut bad = b.clone();
        bad[0] = 0x40;
        assert_eq!(
            Ipv6Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        // a hop-by-hop header claiming 2 KiB: the walk stops, nothing panics
        let b = packet(0, &[6, 255]);
        assert!(
            Ipv6Packet::new_checked(&b[..])
                .unwrap()
                .upper_layer()
                .is_none()
        );
        // an endless chain of destination options
        let b = packet(60, &[60, 0, 0, 0, 0, 0, 0, 0].repeat(10));
        assert!(
            Ipv6Packet::new_checked(&b[..])
                .unwrap()
                .upper_layer()
                .is_none()
        );
    }
}
