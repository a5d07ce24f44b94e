//! The workloads: what is read or written, in which order, and how the offsets of a pass are
//! generated.

use nsperf_core::data_path::DataOp;
use serde::{Deserialize, Serialize};

use crate::rng::{Permutation, SplitMix64};

/// One workload of `nsperf io run`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Sequential write of a new file (iozone "write").
    #[default]
    SeqWrite,
    /// Sequential write over an existing file (iozone "rewrite").
    Rewrite,
    /// Sequential read (iozone "read").
    SeqRead,
    /// Sequential read of a file read just before (iozone "re-read").
    Reread,
    /// Random reads of whole records.
    RandRead,
    /// Random writes of whole records over an existing file.
    RandWrite,
    /// Random reads and writes mixed (`--rwmix` % reads).
    RandRw,
    /// Sequential reads and writes mixed (`--rwmix` % reads): fio's `rw`/`readwrite`.
    SeqRw,
    /// Sequential read from the end of the file to its start.
    BkwdRead,
    /// Read one record, skip `--stride` bytes, wrapping around the file.
    StrideRead,
    /// Write the same record over and over (iozone "record rewrite").
    RecRewrite,
    /// Write one byte per call through a user-space buffer (bonnie++ "per char" output).
    CharWrite,
    /// Read one byte per call through a user-space buffer (bonnie++ "per char" input).
    CharRead,
    /// Random lseek + read of a record, one in ten rewritten (bonnie++ "random seeks").
    Seeks,
    /// Create, stat, read and delete many small files, in sequential and random order.
    Meta,
}

impl Workload {
    /// Every workload, in the order of `--help`.
    pub const ALL: [Workload; 15] = [
        Workload::SeqWrite,
        Workload::Rewrite,
        Workload::SeqRead,
        Workload::Reread,
        Workload::RandRead,
        Workload::RandWrite,
        Workload::RandRw,
        Workload::SeqRw,
        Workload::BkwdRead,
        Workload::StrideRead,
        Workload::RecRewrite,
        Workload::CharWrite,
        Workload::CharRead,
        Workload::Seeks,
        Workload::Meta,
    ];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Workload::SeqWrite => "seqwrite",
            Workload::Rewrite => "rewrite",
            Workload::SeqRead => "seqread",
            Workload::Reread => "reread",
            Workload::RandRead => "randread",
            Workload::RandWrite => "randwrite",
            Workload::RandRw => "randrw",
            Workload::SeqRw => "seqrw",
            Workload::BkwdRead => "bkwdread",
            Workload::StrideRead => "strideread",
            Workload::RecRewrite => "recrewrite",
            Workload::CharWrite => "charwrite",
            Workload::CharRead => "charread",
            Workload::Seeks => "seeks",
            Workload::Meta => "meta",
        }
    }

    /// Parses a name; also accepts the iozone and fio spellings (`write`, `read`, `randrw`,
    /// `mixed`, `backward`, …). fio's `rw` and `readwrite` are *sequential* mixed I/O.
    pub fn parse(s: &str) -> Option<Workload> {
        let s = s.to_ascii_lowercase();
        Some(match s.as_str() {
            "seqwrite" | "write" => Workload::SeqWrite,
            "rewrite" => Workload::Rewrite,
            "seqread" | "read" => Workload::SeqRead,
            "reread" => Workload::Reread,
            "randread" => Workload::RandRead,
            "randwrite" => Workload::RandWrite,
            "randrw" | "mixed" => Workload::RandRw,
            "seqrw" | "rw" | "readwrite" => Workload::SeqRw,
            "bkwdread" | "backward" | "backread" => Workload::BkwdRead,
            "strideread" | "stride" => Workload::StrideRead,
            "recrewrite" | "record-rewrite" => Workload::RecRewrite,
            "charwrite" | "putc" => Workload::CharWrite,
            "charread" | "getc" => Workload::CharRead,
            "seeks" | "seek" => Workload::Seeks,
            "meta" | "metadata" => Workload::Meta,
            _ => return None,
        })
    }

    /// True when the measured pass writes (entirely or partly).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Workload::SeqWrite
                | Workload::Rewrite
                | Workload::RandWrite
                | Workload::RandRw
                | Workload::SeqRw
                | Workload::RecRewrite
                | Workload::CharWrite
                | Workload::Seeks
                | Workload::Meta
        )
    }

    /// True when the file must exist with its full size before the measured pass.
    pub fn needs_layout(self) -> bool {
        !matches!(
            self,
            Workload::SeqWrite | Workload::CharWrite | Workload::Meta
        )
    }

    /// True when the measured pass reads (entirely or partly).
    pub fn reads(self) -> bool {
        matches!(
            self,
            Workload::SeqRead
                | Workload::Reread
                | Workload::RandRead
                | Workload::RandRw
                | Workload::SeqRw
                | Workload::BkwdRead
                | Workload::StrideRead
                | Workload::CharRead
                | Workload::Seeks
                | Workload::Meta
        )
    }

    /// True when reads and writes are mixed in one pass (`--rwmix` applies).
    pub fn mixed(self) -> bool {
        matches!(self, Workload::RandRw | Workload::SeqRw)
    }

    /// True for workloads done by the block engines (record-sized I/O through `--engine`).
    pub fn is_block(self) -> bool {
        !matches!(
            self,
            Workload::CharWrite | Workload::CharRead | Workload::Meta
        )
    }
}

impl std::str::FromStr for Workload {
    type Err = crate::IoError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Workload::parse(s).ok_or_else(|| {
            let names: Vec<_> = Workload::ALL.iter().map(|w| w.name()).collect();
            crate::IoError::Config(format!(
                "unknown workload '{s}' (one of {})",
                names.join(", ")
            ))
        })
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The offsets (and directions) of one pass over a region of `blocks` records of `bs` bytes.
#[derive(Debug, Clone)]
pub struct OpStream {
    base: u64,
    bs: u64,
    blocks: u64,
    i: u64,
    order: Order,
    mix_read_pct: u64,
    rng: SplitMix64,
}

#[derive(Debug, Clone)]
enum Order {
    Forward,
    Backward,
    Stride(u64),
    Same,
    Random(Permutation),
}

impl OpStream {
    /// The op stream of `w` over `[base, base + blocks * bs)`. `stride_blocks` is used by
    /// strided reads, `mix_read_pct` by mixed random I/O.
    pub fn new(
        w: Workload,
        base: u64,
        bs: u64,
        blocks: u64,
        stride_blocks: u64,
        mix_read_pct: u8,
        seed: u64,
    ) -> Self {
        let order = match w {
            Workload::BkwdRead => Order::Backward,
            Workload::StrideRead => Order::Stride(stride_blocks.max(1)),
            Workload::RecRewrite => Order::Same,
            Workload::RandRead | Workload::RandWrite | Workload::RandRw | Workload::Seeks => {
                Order::Random(Permutation::new(blocks, seed))
            }
            _ => Order::Forward,
        };
        let mix_read_pct = match w {
            Workload::RandRw | Workload::SeqRw => mix_read_pct.min(100) as u64,
            // bonnie++: one seek in ten rewrites the block it read.
            Workload::Seeks => 90,
            w if w.writes() => 0,
            _ => 100,
        };
        OpStream {
            base,
            bs,
            blocks: blocks.max(1),
            i: 0,
            order,
            mix_read_pct,
            rng: SplitMix64::new(seed ^ 0x5EED),
        }
    }

    /// The next op: direction and byte offset. Wraps around after a full pass.
    #[inline]
    pub fn next_op(&mut self) -> (DataOp, u64) {
        // `i` counts within the pass and wraps without a division on the per-op path.
        let i = self.i;
        self.i = if i + 1 == self.blocks { 0 } else { i + 1 };
        let block = match &mut self.order {
            Order::Forward => i,
            Order::Backward => self.blocks - 1 - i,
            Order::Stride(s) => {
                // Visit i*stride mod blocks; when that revisits, shift by one (covers all).
                let g = gcd(*s, self.blocks);
                let per_cycle = self.blocks / g;
                ((i % per_cycle) * *s + i / per_cycle) % self.blocks
            }
            Order::Same => 0,
            Order::Random(p) => p.next_value(),
        };
        let kind = match self.mix_read_pct {
            100 => DataOp::Read,
            0 => DataOp::Write,
            pct => {
                if self.rng.below(100) < pct {
                    DataOp::Read
                } else {
                    DataOp::Write
                }
            }
        };
        (kind, self.base + block * self.bs)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(w: Workload, blocks: u64, stride: u64) -> Vec<u64> {
        let mut s = OpStream::new(w, 1000, 10, blocks, stride, 50, 3);
        (0..blocks).map(|_| s.next_op().1).collect()
    }

    #[test]
    fn names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(Workload::parse(w.name()), Some(w));
        }
        assert_eq!(Workload::parse("mixed"), Some(Workload::RandRw));
        // fio: rw and readwrite are sequential mixed I/O, not random.
        assert_eq!(Workload::parse("rw"), Some(Workload::SeqRw));
        assert_eq!(Workload::parse("readwrite"), Some(Workload::SeqRw));
        assert_eq!(Workload::parse("trim"), None);
        assert_eq!(Workload::parse("nope"), None);
    }

    #[test]
    fn orders() {
        assert_eq!(offsets(Workload::SeqRead, 3, 1), vec![1000, 1010, 1020]);
        assert_eq!(offsets(Workload::BkwdRead, 3, 1), vec![1020, 1010, 1000]);
        assert_eq!(offsets(Workload::RecRewrite, 3, 1), vec![1000, 1000, 1000]);
        let mut st = offsets(Workload::StrideRead, 6, 2);
        assert_eq!(st[..3], [1000, 1020, 1040]);
        st.sort();
        assert_eq!(st, vec![1000, 1010, 1020, 1030, 1040, 1050]);
        let mut r = offsets(Workload::RandRead, 50, 1);
        r.sort();
        assert_eq!(r, (0..50).map(|b| 1000 + b * 10).collect::<Vec<_>>());
    }

    #[test]
    fn seqrw_is_sequential_and_mixed() {
        let mut s = OpStream::new(Workload::SeqRw, 0, 10, 100, 1, 50, 9);
        let ops: Vec<(DataOp, u64)> = (0..100).map(|_| s.next_op()).collect();
        assert!(ops.iter().enumerate().all(|(i, o)| o.1 == i as u64 * 10));
        let reads = ops.iter().filter(|o| o.0 == DataOp::Read).count();
        assert!((30..70).contains(&reads), "{reads}");
    }

    #[test]
    fn mix_is_near_the_ratio() {
        let mut s = OpStream::new(Workload::RandRw, 0, 4096, 1000, 1, 70, 9);
        let reads = (0..10_000)
            .filter(|_| s.next_op().0 == DataOp::Read)
            .count();
        assert!((6500..7500).contains(&reads), "{reads}");
        let mut w = OpStream::new(Workload::RandWrite, 0, 4096, 10, 1, 70, 9);
        assert_eq!(w.next_op().0, DataOp::Write);
    }
}
