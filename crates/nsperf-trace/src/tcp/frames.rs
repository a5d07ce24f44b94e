//! Frames captured twice. A mirror port that copies a link on both sides of a router, or a
//! capture on a bridge and its member, records every packet of a direction twice: the same IP
//! ID, sequence and acknowledgment numbers, flags, window and length, microseconds apart (the
//! TTL often one lower on the second copy). tcptrace calls them "hardware duplicates" (same
//! sequence number and IP ID); they are not retransmissions and must not count as loss.

/// Copies of one frame arrive within this time of each other.
const DUPLICATE_WINDOW_NS: i64 = 1_000_000;
/// Frames remembered per direction.
const REMEMBERED: usize = 16;

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
}

/// The last few frames of one direction.
#[derive(Debug, Default)]
pub struct RecentFrames {
    ring: [Option<(FrameKey, i64)>; REMEMBERED],
    next: usize,
}

impl RecentFrames {
    /// True when `key` repeats a frame seen within the last millisecond (a copy); otherwise
    /// remembers it.
    pub fn is_copy(&mut self, key: FrameKey, t: i64) -> bool {
        if key.ip_id == 0 {
            return false;
        }
        let copy = self
            .ring
            .iter()
            .flatten()
            .any(|&(k, seen)| k == key && (t - seen).abs() <= DUPLICATE_WINDOW_NS);
        if !copy {
            self.ring[self.next] = Some((key, t));
            self.next = (self.next + 1) % REMEMBERED;
        }
        copy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_within_a_millisecond_only() {
        let mut r = RecentFrames::default();
        let k = FrameKey {
            ip_id: 7,
            seq: 100,
            len: 10,
            ..FrameKey::default()
        };
        assert!(!r.is_copy(k, 0));
        assert!(r.is_copy(k, 5_000));
        // a retransmission an RTT later is not a copy, nor a frame with another IP ID
        assert!(!r.is_copy(k, 200_000_000));
        assert!(!r.is_copy(FrameKey { ip_id: 8, ..k }, 200_000_001));
        // IP ID 0 is never judged
        let z = FrameKey { ip_id: 0, ..k };
        assert!(!r.is_copy(z, 1));
        assert!(!r.is_copy(z, 2));
    }
}
