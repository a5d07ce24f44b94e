//! Linux "cooked" capture headers (SLL and SLL2, what `tcpdump -i any` writes) and the BSD
//! loopback/null header.

use super::{Result, WireError, be16};

mod field {
    // SLL (LINKTYPE_LINUX_SLL, 16 bytes): packet type, ARPHRD, address length, address (8),
    // protocol.
    pub const SLL_PROTOCOL: usize = 14;
    pub const SLL_LEN: usize = 16;
    // SLL2 (LINKTYPE_LINUX_SLL2, 20 bytes): protocol, reserved, interface index, ARPHRD,
    // packet type, address length, address (8).
    pub const SLL2_PROTOCOL: usize = 0;
    pub const SLL2_IFINDEX: usize = 4;
    pub const SLL2_LEN: usize = 20;
    // BSD null/loopback: a 4-byte address family.
    pub const NULL_LEN: usize = 4;
}

/// A view of a Linux cooked capture v1 header.
#[derive(Debug, Clone, Copy)]
pub struct SllHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SllHeader<T> {
    /// Wraps `buffer` after checking the 16-byte header is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < field::SLL_LEN {
            return Err(WireError::Truncated);
        }
        Ok(SllHeader { buffer })
    }

    /// The protocol (an EtherType for IP).
    pub fn protocol(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SLL_PROTOCOL)
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::SLL_LEN..]
    }
}

/// A view of a Linux cooked capture v2 header.
#[derive(Debug, Clone, Copy)]
pub struct Sll2Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Sll2Header<T> {
    /// Wraps `buffer` after checking the 20-byte header is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < field::SLL2_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Sll2Header { buffer })
    }

    /// The protocol (an EtherType for IP).
    pub fn protocol(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SLL2_PROTOCOL)
    }

    /// The capturing interface's index.
    pub fn ifindex(&self) -> u32 {
        super::be32(self.buffer.as_ref(), field::SLL2_IFINDEX)
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::SLL2_LEN..]
    }
}

/// A view of the BSD loopback/null header: the address family in the byte order of the
/// capturing host (`LINKTYPE_NULL`) or big-endian (`LINKTYPE_LOOP`).
#[derive(Debug, Clone, Copy)]
pub struct NullHeader<T: AsRef<[u8]>> {
    buffer: T,
}

/// What a BSD null header says follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullFamily {
    /// AF_INET.
    Ipv4,
    /// One of the AF_INET6 values of the BSDs and Linux (10, 24, 28, 30).
    Ipv6,
    /// Anything else.
    Other(u32),
}

impl<T: AsRef<[u8]>> NullHeader<T> {
    /// Wraps `buffer` after checking the 4-byte header is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < field::NULL_LEN {
            return Err(WireError::Truncated);
        }
        Ok(NullHeader { buffer })
    }

    /// The address family, read in whichever byte order gives a small number.
    pub fn family(&self) -> NullFamily {
        let b = self.buffer.as_ref();
        let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let be = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let v = if le <= 0xffff { le } else { be };
        match v {
            2 => NullFamily::Ipv4,
            10 | 24 | 28 | 30 => NullFamily::Ipv6,
            x => NullFamily::Other(x),
        }
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::NULL_LEN..]
    }
}

impl<'a> SllHeader<&'a [u8]> {
    /// The bytes after the header, borrowed for the buffer's lifetime.
    pub fn into_payload(self) -> &'a [u8] {
        &self.buffer[field::SLL_LEN..]
    }
}

impl<'a> Sll2Header<&'a [u8]> {
    /// The bytes after the header, borrowed for the buffer's lifetime.
    pub fn into_payload(self) -> &'a [u8] {
        &self.buffer[field::SLL2_LEN..]
    }
}

impl<'a> NullHeader<&'a [u8]> {
    /// The bytes after the header, borrowed for the buffer's lifetime.
    pub fn into_payload(self) -> &'a [u8] {
        &self.buffer[field::NULL_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sll() {
        let mut h = [0u8; 17];
        h[14] = 0x08;
        h[16] = 0x45;
        let s = SllHeader::new_checked(&h[..]).unwrap();
        assert_eq!(s.protocol(), 0x0800);
        assert_eq!(s.payload(), &[0x45]);
        for n in 0..16 {
            assert_eq!(
                SllHeader::new_checked(&h[..n]).unwrap_err(),
                WireError::Truncated
            );
        }
    }

    #[test]
    fn sll2() {
        let mut h = [0u8; 21];
        h[0] = 0x86;
        h[1] = 0xdd;
        h[7] = 3;
        h[20] = 0x60;
        let s = Sll2Header::new_checked(&h[..]).unwrap();
        assert_eq!(s.protocol(), 0x86dd);
        assert_eq!(s.ifindex(), 3);
        assert_eq!(s.payload(), &[0x60]);
        assert!(Sll2Header::new_checked(&h[..19]).is_err());
    }

    #[test]
    fn null_both_orders() {
        let le = [2u8, 0, 0, 0, 0x45];
        let be = [0u8, 0, 0, 30];
        assert_eq!(
            NullHeader::new_checked(&le[..]).unwrap().family(),
            NullFamily::Ipv4
        );
        assert_eq!(
            NullHeader::new_checked(&be[..]).unwrap().family(),
            NullFamily::Ipv6
        );
        assert_eq!(
            NullHeader::new_checked(&[7u8, 0, 0, 0][..])
                .unwrap()
                .family(),
            NullFamily::Other(7)
        );
        assert!(NullHeader::new_checked(&le[..3]).is_err());
    }
}
