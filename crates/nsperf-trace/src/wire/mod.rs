//! Checked zero-copy views over packet bytes, the smoltcp way.
//!
//! Each protocol has a `Packet<T: AsRef<[u8]>>` (or `Frame`) view whose field byte ranges live
//! in a private `mod field`. The contract: once `new_checked` has returned `Ok`, no accessor
//! can panic, whatever the bytes are. `new_checked` verifies every length the accessors rely
//! on; values that are only plausible or not (a header checksum, say) are not checked.
//!
//! Captured packets are often cut short by the snapshot length: the views distinguish the
//! length a header *claims* (used for payload byte counts, as on the wire) from the bytes
//! actually captured (never read past).

pub mod ethernet;
pub mod fddi;
pub mod ipv4;
pub mod ipv6;
pub mod link;
pub mod sll;
pub mod tcp;
pub mod udp;

/// Why a view could not be built over some bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer bytes than the fixed header needs.
    #[error("truncated header")]
    Truncated,
    /// A length or version field that cannot be right (header longer than the packet, IHL < 5).
    #[error("malformed header")]
    Malformed,
}

/// Result of building a view.
pub type Result<T> = core::result::Result<T, WireError>;

#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
