//! How each workload reads and writes: the offsets (and directions) of a pass. The workloads
//! themselves ([`Workload`]: names, what each reads and writes) are the shared ground's,
//! `nsperf_core::workload`, since the result model records them too; re-exported here.

use nsperf_core::data_path::DataOp;
pub use nsperf_core::workload::Workload;

use crate::rng::{Permutation, SplitMix64};

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
