//! Seeded randomness for offsets: a SplitMix64 generator and a full-period permutation of
//! block numbers, so a size-bound random run touches every block exactly once (as fio's
//! random map does) without a bitmap.

/// SplitMix64 (Steele, Lea & Flood 2014): fast, statistically good, seedable.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator with this seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (n > 0), by Lemire's multiply-shift (bias below 2^-32 for our n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// A permutation of `0..n`: a full-period linear congruential sequence modulo the next power
/// of two (Hull–Dobell: c odd, a ≡ 1 mod 4), skipping values ≥ n.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    mask: u64,
    a: u64,
    c: u64,
    x: u64,
    emitted: u64,
}

impl Permutation {
    /// A permutation of `0..n` chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Self {
        let m = n.max(1).next_power_of_two();
        let mut r = SplitMix64::new(seed);
        Permutation {
            n: n.max(1),
            mask: m - 1,
            a: (r.next_u64() & !3) | 1 | 4, // ≡ 1 mod 4 (and not 1, for better mixing)
            c: r.next_u64() | 1,
            x: r.next_u64() & (m - 1),
            emitted: 0,
        }
    }

    /// The next value; after `n` values the same sequence starts again.
    #[inline]
    pub fn next_value(&mut self) -> u64 {
        if self.emitted == self.n {
            self.emitted = 0;
        }
        loop {
            self.x = (self.a.wrapping_mul(self.x).wrapping_add(self.c)) & self.mask;
            if self.x < self.n {
                self.emitted += 1;
                return self.x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_covers_every_block_once() {
        for n in [1u64, 2, 3, 7, 64, 1000, 4097] {
            let mut p = Permutation::new(n, n * 31);
            let mut seen = vec![false; n as usize];
            for _ in 0..n {
                let v = p.next_value() as usize;
                assert!(!seen[v], "n={n} v={v} twice");
                seen[v] = true;
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn below_in_range() {
        let mut r = SplitMix64::new(7);
        for _ in 0..1000 {
            assert!(r.below(10) < 10);
        }
    }
}
