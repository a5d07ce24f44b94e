//! Ethernet II frames and IEEE 802.1Q / 802.1ad VLAN tags.

use super::{Result, WireError, be16};

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: usize = 14;
    // Inside a VLAN tag (4 bytes): TCI, then the inner EtherType.
    pub const VLAN_TCI: usize = 0;
    pub const VLAN_ETHERTYPE: usize = 2;
    pub const VLAN_LEN: usize = 4;
}

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType of an 802.1ad (QinQ) service tag.
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
/// Pre-standard QinQ tag still seen in the field.
pub const ETHERTYPE_QINQ_OLD: u16 = 0x9100;

/// True for the EtherTypes that introduce a VLAN tag.
pub fn is_vlan(ethertype: u16) -> bool {
    matches!(
        ethertype,
        ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD
    )
}

/// A view of an Ethernet II frame.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` after checking that the 14-byte header is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < field::PAYLOAD {
            return Err(WireError::Truncated);
        }
        Ok(EthernetFrame { buffer })
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }

    /// The EtherType (or 802.3 length) field.
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

/// A view of one VLAN tag (the 4 bytes after a VLAN EtherType).
#[derive(Debug, Clone, Copy)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Wraps `buffer` after checking the 4-byte tag is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < field::VLAN_LEN {
            return Err(WireError::Truncated);
        }
        Ok(VlanTag { buffer })
    }

    /// The VLAN identifier (12 bits).
    pub fn vlan_id(&self) -> u16 {
        be16(self.buffer.as_ref(), field::VLAN_TCI) & 0x0fff
    }

    /// The EtherType of what follows the tag.
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::VLAN_ETHERTYPE)
    }

    /// The bytes after the tag.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::VLAN_LEN..]
    }
}

impl<'a> EthernetFrame<&'a [u8]> {
    /// The bytes after the header, borrowed for the buffer's lifetime.
    pub fn into_payload(self) -> &'a [u8] {
        &self.buffer[field::PAYLOAD..]
    }
}

impl<'a> VlanTag<&'a [u8]> {
    /// The bytes after the header, borrowed for the buffer's lifetime.
    pub fn into_payload(self) -> &'a [u8] {
        &self.buffer[field::VLAN_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 18] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // dst
        0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, // src
        0x08, 0x00, // IPv4
        0x45, 0x00, 0x00, 0x14, // first payload bytes
    ];

    #[test]
    fn deconstruct() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst_addr(), [0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(f.src_addr(), [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);
        assert_eq!(f.ethertype(), ETHERTYPE_IPV4);
        assert_eq!(f.payload(), &[0x45, 0x00, 0x00, 0x14]);
    }

    #[test]
    fn truncated() {
        for n in 0..14 {
            assert_eq!(
                EthernetFrame::new_checked(&FRAME[..n]).unwrap_err(),
                WireError::Truncated
            );
        }
        assert!(
            EthernetFrame::new_checked(&FRAME[..14])
                .unwrap()
                .payload()
                .is_empty()
        );
    }

    #[test]
    fn vlan_tag() {
        let tag = [0x20, 0x64, 0x86, 0xdd, 0x60];
        let t = VlanTag::new_checked(&tag[..]).unwrap();
        assert_eq!(t.vlan_id(), 100);
        assert_eq!(t.ethertype(), ETHERTYPE_IPV6);
        assert_eq!(t.payload(), &[0x60]);
        assert!(VlanTag::new_checked(&tag[..3]).is_err());
        assert!(is_vlan(0x8100) && is_vlan(0x88a8) && !is_vlan(0x0800));
    }
}
