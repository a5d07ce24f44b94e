//! FDDI frames with an 802.2 LLC/SNAP header (how IP travels on FDDI, RFC 1188).

use super::{Result, WireError, be16};

mod field {
    pub const LLC: usize = 13;
    pub const SNAP_ETHERTYPE: usize = 19;
    pub const PAYLOAD: usize = 21;
}

/// A view of an FDDI frame: frame control, two MAC addresses, LLC/SNAP.
#[derive(Debug, Clone, Copy)]
pub struct FddiFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FddiFrame<T> {
    /// Wraps `buffer` after checking the 21-byte header with a SNAP LLC is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < field::PAYLOAD {
            return Err(WireError::Truncated);
        }
        if b[field::LLC] != 0xaa || b[field::LLC + 1] != 0xaa || b[field::LLC + 2] != 0x03 {
            return Err(WireError::Malformed);
        }
        Ok(FddiFrame { buffer })
    }

    /// The EtherType of the SNAP header.
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SNAP_ETHERTYPE)
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<'a> FddiFrame<&'a [u8]> {
    /// The bytes after the header, borrowed for the buffer's lifetime.
    pub fn into_payload(self) -> &'a [u8] {
        &self.buffer[field::PAYLOAD..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deconstruct_truncated_impossible() {
        let mut f = vec![0x50u8];
        f.extend_from_slice(&[1; 12]);
        f.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00, 0x45]);
        let v = FddiFrame::new_checked(&f[..]).unwrap();
        assert_eq!(v.ethertype(), 0x0800);
        assert_eq!(v.payload(), &[0x45]);
        for n in 0..21 {
            assert_eq!(
                FddiFrame::new_checked(&f[..n]).unwrap_err(),
                WireError::Truncated
            );
        }
        f[13] = 0xf0;
        assert_eq!(
            FddiFrame::new_checked(&f[..]).unwrap_err(),
            WireError::Malformed
        );
    }
}
