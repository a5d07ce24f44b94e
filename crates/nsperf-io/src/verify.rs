//! Block verification (fio `verify`): every block written carries a header — a magic number,
//! its own offset, its length and the run's seed — and a CRC-32 of the whole block after the
//! checksum field; every block read is checked against it. A block that is missing its
//! header, sits at the wrong offset, belongs to another run or fails its checksum is a
//! failure, counted and reported with the first one's offset and kind.
//!
//! Stamping and checking work in place on the job's buffer: no allocation per I/O.
//!
//! Header layout (little-endian): `magic u32 | crc32 u32 | offset u64 | seed u64 | len u32 |
//! reserved u32`; the CRC covers bytes 8.. of the block.

use serde::{Deserialize, Serialize};

/// Bytes of the header at the start of every verified block.
pub const HEADER_BYTES: usize = 32;
const MAGIC: u32 = 0x6e73_7066; // "nspf"

/// Why a block failed its check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mismatch {
    /// No nsperf header: the block was never written by a verified run (or was overwritten).
    NoHeader,
    /// The header names another offset: the data landed at the wrong place.
    WrongOffset,
    /// The header is from another run (its seed differs).
    OtherRun,
    /// The header names another block length.
    WrongLength,
    /// The checksum does not match: the data was changed or torn.
    Checksum,
    /// The read returned fewer bytes than the block.
    ShortRead,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mismatch::NoHeader => "no nsperf block header",
            Mismatch::WrongOffset => "header of another offset (misplaced write)",
            Mismatch::OtherRun => "header of another run",
            Mismatch::WrongLength => "header of another block length",
            Mismatch::Checksum => "checksum mismatch (data changed or torn)",
            Mismatch::ShortRead => "short read",
        })
    }
}

/// Writes the header and checksum of the block at `offset` into `block`.
#[inline]
pub fn stamp(block: &mut [u8], offset: u64, seed: u64) {
    if block.len() < HEADER_BYTES {
        return;
    }
    block[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    block[8..16].copy_from_slice(&offset.to_le_bytes());
    block[16..24].copy_from_slice(&seed.to_le_bytes());
    let len = block.len() as u32;
    block[24..28].copy_from_slice(&len.to_le_bytes());
    block[28..32].copy_from_slice(&0u32.to_le_bytes());
    let crc = crc32fast::hash(&block[8..]);
    block[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Checks a block read from `offset` (`block.len()` bytes were read).
#[inline]
pub fn check(block: &[u8], expect_len: usize, offset: u64, seed: u64) -> Result<(), Mismatch> {
    if block.len() < expect_len || block.len() < HEADER_BYTES {
        return Err(Mismatch::ShortRead);
    }
    let word = |r: std::ops::Range<usize>| -> u64 {
        let mut b = [0u8; 8];
        b[..r.len()].copy_from_slice(&block[r]);
        u64::from_le_bytes(b)
    };
    if word(0..4) != MAGIC as u64 {
        return Err(Mismatch::NoHeader);
    }
    if word(8..16) != offset {
        return Err(Mismatch::WrongOffset);
    }
    if word(16..24) != seed {
        return Err(Mismatch::OtherRun);
    }
    if word(24..28) != block.len() as u64 {
        return Err(Mismatch::WrongLength);
    }
    if word(4..8) != crc32fast::hash(&block[8..]) as u64 {
        return Err(Mismatch::Checksum);
    }
    Ok(())
}

/// Counts of one job's (or a run's) checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Blocks checked.
    pub checked: u64,
    /// Blocks that failed.
    pub failed: u64,
    /// The first failure: offset and kind.
    pub first: Option<(u64, Mismatch)>,
}

impl Tally {
    /// Records one check.
    #[inline]
    pub fn record(&mut self, offset: u64, r: Result<(), Mismatch>) {
        self.checked += 1;
        if let Err(m) = r {
            self.failed += 1;
            if self.first.is_none() {
                self.first = Some((offset, m));
            }
        }
    }

    /// Adds another tally (keeps the first failure already seen, else takes its).
    pub fn merge(&mut self, o: &Tally) {
        self.checked += o.checked;
        self.failed += o.failed;
        if self.first.is_none() {
            self.first = o.first;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_then_check_and_every_mismatch() {
        let mut b = vec![0xABu8; 4096];
        stamp(&mut b, 8192, 7);
        assert_eq!(check(&b, 4096, 8192, 7), Ok(()));
        assert_eq!(check(&b, 4096, 4096, 7), Err(Mismatch::WrongOffset));
        assert_eq!(check(&b, 4096, 8192, 8), Err(Mismatch::OtherRun));
        assert_eq!(check(&b[..100], 4096, 8192, 7), Err(Mismatch::ShortRead));
        let mut c = b.clone();
        c[4000] ^= 1;
        assert_eq!(check(&c, 4096, 8192, 7), Err(Mismatch::Checksum));
        let mut c = b.clone();
        c[0] = 0;
        assert_eq!(check(&c, 4096, 8192, 7), Err(Mismatch::NoHeader));
        let mut c = b.clone();
        c[24] = 1;
        assert_eq!(check(&c, 4096, 8192, 7), Err(Mismatch::WrongLength));
        let mut t = Tally::default();
        t.record(0, Ok(()));
        t.record(4096, Err(Mismatch::Checksum));
        t.record(8192, Err(Mismatch::NoHeader));
        assert_eq!(
            (t.checked, t.failed, t.first),
            (3, 2, Some((4096, Mismatch::Checksum)))
        );
    }
}
