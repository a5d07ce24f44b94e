//! Frames captured twice. A capture on a routing host (`tcpdump -i any`), a mirror port that
//! copies a link on both sides of a router, or a capture on a bridge and its member records
//! every packet of a direction twice: the same IP ID, sequence and acknowledgment numbers,
//! flags, window, length and TCP timestamp, the TTL one lower and other MACs on the second
//! copy, and in a real capture up to a dozen milliseconds and many frames apart. tcptrace
//! calls them "hardware duplicates" (same IPv4 ID and sequence number, neither zero, among
//! the last 8 segments of the direction); they are not retransmissions and must not count as
//! loss.
//!
//! nsperf recognises them as tcptrace does but at any distance a capture produces: every
//! frame of the last [`HORIZON_NS`] of capture time is remembered (up to [`MAX_SLOTS`] per
//! direction), in a small set-associative table that grows with the rate and never
//! allocates once it has its size. A real retransmission carries another IP ID (and another
//! timestamp), so nothing repeated by the sender is taken for a copy. IPv6 has no
//! identification outside fragments: its copies cannot be told from retransmissions.

/// Copies are recognised up to this long after the original, capture time: far beyond the
/// forwarding delay of any router, below the smallest retransmission timeout of Linux.
pub const HORIZON_NS: i64 = 200_000_000;
/// Frames remembered per direction at most (the table's largest size, 32 bytes a slot).
pub const MAX_SLOTS: usize = 8192;
/// Slots per set.
const WAYS: usize = 8;

/// What identifies one frame of a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameKey {
    /// IPv4 identification (never 0: tcptrace's rule, since stacks that send 0 repeat it).
    pub ip_id: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags.
    pub flags: u8,
    /// Raw window.
    pub window: u16,
    /// Payload length.
    pub len: u32,
    /// TSval of the timestamps option (0 without it).
    pub tsval: u32,
}

impl FrameKey {
    /// The set a key lives in, among `sets` (a power of two): the low bits of a hash.
    fn set(&self, sets: usize) -> usize {
        let a = (u64::from(self.seq) << 32 | u64::from(self.ack)) ^ u64::from(self.tsval) << 7;
        let b = u64::from(self.ip_id) << 48
            | u64::from(self.window) << 32
            | u64::from(self.len) << 8
            | u64::from(self.flags);
        // splitmix64's finaliser (Steele, Lea, Flood 2014): every input bit moves the index.
        let mut z = a ^ b.rotate_left(29);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        ((z ^ (z >> 31)) as usize) & (sets - 1)
    }
}

/// The frames of one direction seen within the last [`HORIZON_NS`].
#[derive(Debug, Default)]
pub struct RecentFrames {
    /// `sets × WAYS` slots, set by set; empty until the first IPv4 frame.
    slots: Vec<Option<(FrameKey, i64)>>,
}

impl RecentFrames {
    /// True when `key` repeats a frame seen within [`HORIZON_NS`] (a copy); otherwise
    /// remembers it.
    pub fn is_copy(&mut self, key: FrameKey, t: i64) -> bool {
        if key.ip_id == 0 {
            return false;
        }
        if self.slots.is_empty() {
            self.slots = vec![None; WAYS];
        }
        let live =
            |s: &Option<(FrameKey, i64)>| s.is_some_and(|(_, at)| (t - at).abs() < HORIZON_NS);
        let set = self.set_of(&key);
        if self.slots[set.clone()]
            .iter()
            .any(|s| live(s) && s.is_some_and(|(k, _)| k == key))
        {
            return true;
        }
        let mut set = set;
        // All eight may land in the same half of a split set: grow until there is room.
        while self.slots[set.clone()].iter().all(live) && self.slots.len() < MAX_SLOTS {
            self.grow();
            set = self.set_of(&key);
        }
        // An empty or expired slot, else the oldest of the set.
        let slot = self.slots[set.clone()]
            .iter()
            .position(|s| !live(s))
            .unwrap_or_else(|| {
                let oldest = self.slots[set.clone()]
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, s)| s.map_or(i64::MIN, |(_, at)| at));
                oldest.map_or(0, |(i, _)| i)
            });
        self.slots[set.start + slot] = Some((key, t));
        false
    }

    /// Slots held now.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn set_of(&self, key: &FrameKey) -> std::ops::Range<usize> {
        let start = key.set(self.slots.len() / WAYS) * WAYS;
        start..start + WAYS
    }

    /// Twice the sets; each old set splits into two, so no set overflows.
    fn grow(&mut self) {
        let old = std::mem::replace(&mut self.slots, vec![None; 0]);
        self.slots = vec![None; old.len() * 2];
        for (k, at) in old.into_iter().flatten() {
            let set = self.set_of(&k);
            if let Some(i) = self.slots[set.clone()].iter().position(Option::is_none) {
                self.slots[set.start + i] = Some((k, at));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> FrameKey {
        FrameKey {
            ip_id: (i % 65535 + 1) as u16,
            seq: 1000 + i * 1448,
            ack: 77,
            flags: 0x10,
            window: 500,
            len: 1448,
            tsval: i / 10,
        }
    }

    #[test]
    fn copies_at_any_distance_within_the_horizon() {
        let mut r = RecentFrames::default();
        let k = key(7);
        assert!(!r.is_copy(k, 0));
        assert!(r.is_copy(k, 5_000));
        // 15 ms and 1000 other frames later (67 000 frames a second, 800 Mbit/s of full
        // segments): still a copy
        for i in 100..1100 {
            assert!(!r.is_copy(key(i), 1_000 + i64::from(i) * 15_000));
        }
        assert!(r.is_copy(k, 15_000_000));
        for i in 100..1100 {
            assert!(r.is_copy(key(i), 15_000_000 + i64::from(i) * 15_000), "{i}");
        }
        assert!(r.capacity() <= MAX_SLOTS);
        // a retransmission after the horizon is not a copy, nor a frame with another IP ID
        // or another timestamp
        assert!(!r.is_copy(k, HORIZON_NS + 1));
        assert!(!r.is_copy(FrameKey { ip_id: 9999, ..k }, HORIZON_NS + 2));
        assert!(!r.is_copy(FrameKey { tsval: 9, ..k }, HORIZON_NS + 3));
        // IP ID 0 is never judged
        let z = FrameKey { ip_id: 0, ..k };
        assert!(!r.is_copy(z, 1));
        assert!(!r.is_copy(z, 2));
    }

    #[test]
    fn memory_is_bounded_and_follows_the_rate() {
        let mut slow = RecentFrames::default();
        // 100 frames a second: 20 within the horizon, a few hundred bytes held
        for i in 0..10_000 {
            slow.is_copy(key(i), i64::from(i) * 10_000_000);
        }
        assert!(slow.capacity() <= 128, "{}", slow.capacity());
        let mut fast = RecentFrames::default();
        // 10^6 frames a second: the table stops at its bound and still finds near copies
        for i in 0..400_000 {
            let t = i64::from(i) * 1_000;
            fast.is_copy(key(i), t);
            if i % 1000 == 999 {
                assert!(fast.is_copy(key(i - 100), t + 1), "{i}");
            }
        }
        assert_eq!(fast.capacity(), MAX_SLOTS);
    }
}
