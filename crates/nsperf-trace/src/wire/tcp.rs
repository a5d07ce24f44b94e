//! TCP headers and options.

use super::{Result, WireError, be16, be32};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const OFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: usize = 14;
    pub const MIN_HEADER: usize = 20;
}

/// TCP flag bits.
pub mod flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
    /// URG.
    pub const URG: u8 = 0x20;
}

/// A view of a TCP segment. After `new_checked`: the data offset is at least 5 and the whole
/// header, options included, is captured.
#[derive(Debug, Clone, Copy)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps `buffer` after checking the header and options are present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < field::MIN_HEADER {
            return Err(WireError::Truncated);
        }
        let hl = usize::from(b[field::OFF] >> 4) * 4;
        if hl < field::MIN_HEADER {
            return Err(WireError::Malformed);
        }
        if b.len() < hl {
            return Err(WireError::Truncated);
        }
        Ok(TcpPacket { buffer })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ)
    }

    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK)
    }

    /// Header length in bytes, options included (20..=60).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::OFF] >> 4) * 4
    }

    /// The flag bits (see [`flags`]).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The raw (unscaled) window field.
    pub fn window(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WINDOW)
    }

    /// The option bytes.
    pub fn option_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[field::MIN_HEADER..self.header_len()]
    }

    /// The options this segment carries; malformed options end the walk.
    pub fn options(&self) -> TcpOptions {
        TcpOptions::parse(self.option_bytes())
    }

    /// The captured payload (may be shorter than on the wire).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// Most SACK blocks one option can hold (40 option bytes).
pub const MAX_SACK_BLOCKS: usize = 4;

/// The TCP options nsperf reads, parsed without allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// Maximum segment size (kind 2).
    pub mss: Option<u16>,
    /// Window scale shift (kind 3), as sent (RFC 7323 caps its use at 14).
    pub window_scale: Option<u8>,
    /// SACK permitted (kind 4).
    pub sack_permitted: bool,
    /// Timestamps (kind 8): TSval, TSecr.
    pub timestamps: Option<(u32, u32)>,
    /// SACK blocks (kind 5): left and right edges.
    pub sack: [(u32, u32); MAX_SACK_BLOCKS],
    /// How many entries of `sack` are used.
    pub sack_blocks: u8,
    /// True when the option list was malformed (a length running past the header).
    pub malformed: bool,
}

impl TcpOptions {
    /// Parses an option list; stops at End-of-list or at the first malformed option.
    pub fn parse(mut b: &[u8]) -> Self {
        let mut o = TcpOptions::default();
        while let Some(&kind) = b.first() {
            match kind {
                0 => break,
                1 => {
                    b = &b[1..];
                    continue;
                }
                _ => {}
            }
            let Some(&len) = b.get(1) else {
                o.malformed = true;
                break;
            };
            let len = usize::from(len);
            if len < 2 || len > b.len() {
                o.malformed = true;
                break;
            }
            let v = &b[2..len];
            match (kind, v.len()) {
                (2, 2) => o.mss = Some(be16(v, 0)),
                (3, 1) => o.window_scale = Some(v[0]),
                (4, 0) => o.sack_permitted = true,
                (5, n) if n % 8 == 0 => {
                    for (i, blk) in v.chunks_exact(8).take(MAX_SACK_BLOCKS).enumerate() {
                        o.sack[i] = (be32(blk, 0), be32(blk, 4));
                        o.sack_blocks = i as u8 + 1;
                    }
                }
                (8, 8) => o.timestamps = Some((be32(v, 0), be32(v, 4))),
                _ => {}
            }
            b = &b[len..];
        }
        o
    }

    /// The SACK blocks carried.
    pub fn sack_blocks(&self) -> &[(u32, u32)] {
        &self.sack[..usize::from(self.sack_blocks).min(MAX_SACK_BLOCKS)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SYN from port 34552 to 79 with MSS 1460, SACK permitted, timestamps, NOP, wscale 7.
    const SYN: [u8; 40] = [
        0x86, 0xf8, 0x00, 0x4f, 0x00, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0x00, 0x00, 0x00, 0x00, // fixed header
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x04, 0x02, // SACK permitted
        0x08, 0x0a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, // TS 1, 0
        0x01, // NOP
        0x03, 0x03, 0x07, // wscale 7
    ];

    #[test]
    fn deconstruct() {
        let t = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!(t.src_port(), 34552);
        assert_eq!(t.dst_port(), 79);
        assert_eq!(t.seq(), 100);
        assert_eq!(t.ack(), 0);
        assert_eq!(t.header_len(), 40);
        assert_eq!(t.flags(), flags::SYN);
        assert_eq!(t.window(), 64240);
        assert!(t.payload().is_empty());
        let o = t.options();
        assert_eq!(o.mss, Some(1460));
        assert_eq!(o.window_scale, Some(7));
        assert!(o.sack_permitted);
        assert_eq!(o.timestamps, Some((1, 0)));
        assert!(!o.malformed);
    }

    #[test]
    fn sack_blocks() {
        let opts = [
            1, 1, 5, 18, 0, 0, 0, 10, 0, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0, 40,
        ];
        let o = TcpOptions::parse(&opts);
        assert_eq!(o.sack_blocks(), &[(10, 20), (30, 40)]);
    }

    #[test]
    fn truncated_and_impossible() {
        for n in 0..20 {
            assert_eq!(
                TcpPacket::new_checked(&SYN[..n]).unwrap_err(),
                WireError::Truncated
            );
        }
        // options cut by the snapshot length
        assert_eq!(
            TcpPacket::new_checked(&SYN[..30]).unwrap_err(),
            WireError::Truncated
        );
        let mut bad = SYN;
        bad[12] = 0x40; // data offset 4
        assert_eq!(
            TcpPacket::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        // option lengths 0, 1 and past the end
        for opts in [&[2u8, 0][..], &[2, 1, 5], &[3, 9, 1], &[8]] {
            let o = TcpOptions::parse(opts);
            assert!(o.malformed, "{opts:?}");
        }
    }
}
