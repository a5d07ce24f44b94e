//! A small seeded random number generator (xoshiro256**, seeded through splitmix64) and the
//! distributions the link model draws from. The model takes the generator as an input, so a
//! seed reproduces a run exactly.

/// xoshiro256** (Blackman & Vigna, "Scrambled linear pseudorandom number generators", 2018).
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn seeded(seed: u64) -> Self {
        let mut x = seed;
        Rng {
            s: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
        }
    }

    /// A generator seeded from the clock and the process id (for the running emulator).
    pub fn from_entropy() -> Self {
        let t = nsperf_core::clock::unix_time_ns();
        Rng::seeded(t ^ (u64::from(std::process::id()) << 32))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (0 never draws, so a zero setting costs nothing).
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// Uniform integer in [0, n); 0 when n is 0.
    #[cfg(test)]
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
        }
    }

    /// Standard normal by the Box–Muller transform.
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Pareto with shape `alpha` and scale 1 (values >= 1), by inversion.
    pub fn pareto(&mut self, alpha: f64) -> f64 {
        let u = 1.0 - self.unit(); // (0, 1]
        u.powf(-1.0 / alpha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::seeded(7);
        let mut b = Rng::seeded(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::seeded(8).next_u64(), Rng::seeded(7).next_u64());
    }

    #[test]
    fn distributions_have_their_moments() {
        let mut r = Rng::seeded(1);
        let n = 200_000;
        let u: f64 = (0..n).map(|_| r.unit()).sum::<f64>() / n as f64;
        assert!((u - 0.5).abs() < 0.01, "{u}");
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
        assert!(m.abs() < 0.01 && (v - 1.0).abs() < 0.02, "{m} {v}");
        // Pareto(alpha=3): mean alpha/(alpha-1) = 1.5
        let p: f64 = (0..n).map(|_| r.pareto(3.0)).sum::<f64>() / n as f64;
        assert!((p - 1.5).abs() < 0.02, "{p}");
        assert!((0..1000).all(|_| r.below(10) < 10));
        assert!(!r.chance(0.0));
    }
}
