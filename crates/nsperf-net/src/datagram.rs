//! The UDP datagram format and the receiver's sequence bookkeeping: pure code over byte
//! slices and numbers, no sockets (the data path is in `udp`).
//!
//! Every datagram starts with a [`HEADER_LEN`]-byte header; the payload after it is filler.

/// Bytes of the header at the start of every datagram: sequence number (u64), send time in
/// ns of CLOCK_REALTIME (u64), stream id (u32), test cookie low bits (u32), big endian.
pub const HEADER_LEN: usize = 24;

/// Sequence number of the hello datagrams that tell the server where the client's socket is.
pub const HELLO_SEQ: u64 = u64::MAX;

/// The header of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Sequence number within the stream, from 0.
    pub seq: u64,
    /// Send time, ns of CLOCK_REALTIME.
    pub tx_ns: u64,
    /// Stream id.
    pub stream: u32,
    /// Low 32 bits of the test cookie.
    pub cookie: u32,
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `b` (which must be that long).
    pub fn write(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..16].copy_from_slice(&self.tx_ns.to_be_bytes());
        b[16..20].copy_from_slice(&self.stream.to_be_bytes());
        b[20..24].copy_from_slice(&self.cookie.to_be_bytes());
    }

    /// Reads a header; `None` when `b` is shorter than [`HEADER_LEN`].
    pub fn read(b: &[u8]) -> Option<Header> {
        let b = b.get(..HEADER_LEN)?;
        Some(Header {
            seq: u64::from_be_bytes(b[0..8].try_into().ok()?),
            tx_ns: u64::from_be_bytes(b[8..16].try_into().ok()?),
            stream: u32::from_be_bytes(b[16..20].try_into().ok()?),
            cookie: u32::from_be_bytes(b[20..24].try_into().ok()?),
        })
    }
}

/// Encodes a hello datagram for `stream` of the test `cookie`.
pub fn hello(stream: u32, cookie: u64) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    Header {
        seq: HELLO_SEQ,
        tx_ns: 0,
        stream,
        cookie: cookie as u32,
    }
    .write(&mut b);
    b
}

/// How a datagram carries its sequence number and send time: the same send and receive
/// loops serve nsperf peers and iperf3 peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// nsperf's [`Header`], with the stream id and the test cookie's low bits.
    Nsperf {
        /// Stream id.
        stream: u32,
        /// Low 32 bits of the test cookie.
        cookie: u32,
    },
    /// iperf3's (`iperf_udp_send`): seconds and microseconds of the send time (`u32` each),
    /// then the sequence number counted from 1 (`u32`, or `u64` with 64-bit counters), big
    /// endian.
    Iperf3 {
        /// 64-bit sequence numbers (`--udp-counters-64bit`).
        counters_64bit: bool,
    },
}

impl Format {
    /// Bytes of the header, the smallest datagram of this format.
    pub fn header_len(self) -> usize {
        match self {
            Format::Nsperf { .. } => HEADER_LEN,
            Format::Iperf3 { counters_64bit } => {
                if counters_64bit {
                    16
                } else {
                    12
                }
            }
        }
    }

    /// Writes the header of datagram `seq` (from 0) sent at `tx_ns` into the front of `b`
    /// (at least [`Format::header_len`] bytes).
    #[inline]
    pub fn write(self, seq: u64, tx_ns: u64, b: &mut [u8]) {
        match self {
            Format::Nsperf { stream, cookie } => Header {
                seq,
                tx_ns,
                stream,
                cookie,
            }
            .write(b),
            Format::Iperf3 { counters_64bit } => {
                let secs = (tx_ns / 1_000_000_000) as u32;
                let usecs = (tx_ns % 1_000_000_000 / 1000) as u32;
                b[0..4].copy_from_slice(&secs.to_be_bytes());
                b[4..8].copy_from_slice(&usecs.to_be_bytes());
                if counters_64bit {
                    b[8..16].copy_from_slice(&(seq + 1).to_be_bytes());
                } else {
                    b[8..12].copy_from_slice(&((seq + 1) as u32).to_be_bytes());
                }
            }
        }
    }

    /// The sequence number (from 0) and send time of a data datagram of this format;
    /// `None` for anything else (too short, another test's cookie, a hello).
    #[inline]
    pub fn read(self, b: &[u8]) -> Option<(u64, u64)> {
        match self {
            Format::Nsperf { cookie, .. } => {
                let h = Header::read(b)?;
                (h.cookie == cookie && h.seq != HELLO_SEQ).then_some((h.seq, h.tx_ns))
            }
            Format::Iperf3 { counters_64bit } => {
                let b = b.get(..self.header_len())?;
                let secs = u32::from_be_bytes(b[0..4].try_into().ok()?) as u64;
                let usecs = u32::from_be_bytes(b[4..8].try_into().ok()?) as u64;
                let count = if counters_64bit {
                    u64::from_be_bytes(b[8..16].try_into().ok()?)
                } else {
                    u32::from_be_bytes(b[8..12].try_into().ok()?) as u64
                };
                let seq = count.checked_sub(1)?;
                Some((seq, secs * 1_000_000_000 + usecs.min(999_999) * 1000))
            }
        }
    }
}

/// Receive-side bookkeeping of one stream: distinct datagrams, loss by sequence numbers,
/// late arrivals, duplicates (within a window of [`SequenceTracker::WINDOW`] sequence
/// numbers) and RFC 3550 interarrival jitter.
#[derive(Debug, Clone)]
pub struct SequenceTracker {
    /// Highest sequence seen + 1.
    pub expected: u64,
    /// Distinct datagrams.
    pub received: u64,
    /// Arrivals with a sequence below one already seen.
    pub out_of_order: u64,
    /// Datagrams seen twice.
    pub duplicates: u64,
    /// RFC 3550 jitter estimate, ns.
    pub jitter_ns: f64,
    last_transit: Option<i64>,
    seen: Box<[u64]>,
}

impl Default for SequenceTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SequenceTracker {
    /// Sequence numbers remembered for duplicate detection.
    pub const WINDOW: u64 = 1 << 16;

    /// A fresh tracker.
    pub fn new() -> Self {
        SequenceTracker {
            expected: 0,
            received: 0,
            out_of_order: 0,
            duplicates: 0,
            jitter_ns: 0.0,
            last_transit: None,
            seen: vec![0u64; (Self::WINDOW / 64) as usize].into_boxed_slice(),
        }
    }

    fn bit(&self, seq: u64) -> bool {
        let i = (seq % Self::WINDOW) as usize;
        self.seen[i / 64] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, seq: u64, on: bool) {
        let i = (seq % Self::WINDOW) as usize;
        if on {
            self.seen[i / 64] |= 1 << (i % 64);
        } else {
            self.seen[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Datagrams missing so far (by sequence numbers; late arrivals reduce it).
    #[cfg(test)]
    pub fn lost(&self) -> u64 {
        self.expected.saturating_sub(self.received)
    }

    /// Accounts one datagram sent at `tx_ns` and received at `rx_ns`.
    pub fn record(&mut self, seq: u64, tx_ns: u64, rx_ns: u64) {
        if seq >= self.expected {
            // Clear the bits of the sequence numbers skipped (they are missing for now).
            let gap = seq - self.expected;
            if gap >= Self::WINDOW {
                self.seen.fill(0);
            } else {
                for s in self.expected..seq {
                    self.set(s, false);
                }
            }
            self.set(seq, true);
            // A hostile peer may send the last sequence number: saturate, never wrap.
            self.expected = seq.saturating_add(1);
            self.received += 1;
        } else if self.expected - seq >= Self::WINDOW {
            // Too old to tell a duplicate: count it as a late arrival.
            self.out_of_order += 1;
            self.received += 1;
        } else if self.bit(seq) {
            self.duplicates += 1;
            return;
        } else {
            self.set(seq, true);
            self.out_of_order += 1;
            self.received += 1;
        }
        // RFC 3550 §6.4.1 and A.8: J += (|D| - J) / 16 over the transit-time differences.
        // Two hosts' clocks: the transit may be negative; the peer's timestamp may be anything.
        let transit = rx_ns.wrapping_sub(tx_ns) as i64;
        if let Some(prev) = self.last_transit {
            let d = transit.wrapping_sub(prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_sequence_numbers_and_timestamps_do_not_overflow() {
        // Found by the `datagram` fuzz target: the last sequence number overflowed `expected`.
        let mut t = SequenceTracker::new();
        t.record(u64::MAX, u64::MAX, 0);
        // Wrapping would have made every later datagram "new" from sequence 0 again.
        assert_eq!(t.expected, u64::MAX);
        t.record(3, i64::MAX as u64, i64::MIN as u64);
        t.record(u64::MAX - 1, 1 << 63, 1);
        assert_eq!(t.expected, u64::MAX);
        assert!(t.jitter_ns.is_finite());
    }

    #[test]
    fn header_round_trips_and_short_is_none() {
        let h = Header {
            seq: 5,
            tx_ns: 77,
            stream: 3,
            cookie: 9,
        };
        let mut b = [0u8; 30];
        h.write(&mut b);
        assert_eq!(Header::read(&b), Some(h));
        assert_eq!(Header::read(&b[..23]), None);
    }

    #[test]
    fn formats_round_trip_and_reject_strangers() {
        let mut b = [0u8; 64];
        for f in [
            Format::Nsperf {
                stream: 2,
                cookie: 7,
            },
            Format::Iperf3 {
                counters_64bit: false,
            },
            Format::Iperf3 {
                counters_64bit: true,
            },
        ] {
            f.write(41, 1_700_000_000_123_456_000, &mut b);
            assert_eq!(f.read(&b), Some((41, 1_700_000_000_123_456_000)));
            assert_eq!(f.read(&b[..f.header_len() - 1]), None);
        }
        // iperf3 counts from 1 on the wire.
        Format::Iperf3 {
            counters_64bit: false,
        }
        .write(0, 0, &mut b);
        assert_eq!(&b[8..12], &[0, 0, 0, 1]);
        // Another test's cookie and the hello are not data.
        let f = Format::Nsperf {
            stream: 0,
            cookie: 7,
        };
        f.write(3, 0, &mut b);
        assert_eq!(
            Format::Nsperf {
                stream: 0,
                cookie: 8
            }
            .read(&b),
            None
        );
        assert_eq!(f.read(&hello(0, 7)), None);
    }

    #[test]
    fn tracker_counts_loss_reorder_duplicates() {
        let mut t = SequenceTracker::new();
        for s in [0, 1, 2, 5, 3, 3, 7] {
            t.record(s, 0, 0);
        }
        // 0,1,2,3,5,7 distinct; 4 and 6 missing; 3 late and once duplicated.
        assert_eq!(t.received, 6);
        assert_eq!(t.expected, 8);
        assert_eq!(t.lost(), 2);
        assert_eq!(t.out_of_order, 1);
        assert_eq!(t.duplicates, 1);
        // A jump beyond the window and an ancient straggler do not panic.
        t.record(1 << 40, 0, 0);
        t.record(10, 0, 0);
        assert_eq!(t.out_of_order, 2);
    }

    #[test]
    fn jitter_follows_rfc3550() {
        let mut t = SequenceTracker::new();
        // Constant transit: no jitter. Then one 1.6 ms excursion: J = 1.6 ms / 16.
        for i in 0..10u64 {
            t.record(i, i * 1_000_000, i * 1_000_000 + 500);
        }
        assert_eq!(t.jitter_ns, 0.0);
        t.record(10, 10_000_000, 10_000_000 + 500 + 1_600_000);
        assert!((t.jitter_ns - 100_000.0).abs() < 1e-6, "{}", t.jitter_ns);
    }

    #[test]
    fn fuzz_body_survives_hostile_bytes() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..2000 {
            let len = (next() % 300) as usize;
            let mut v: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if round % 2 == 0 && len >= 8 {
                // Sequence numbers near the ends of the range.
                v[..8].copy_from_slice(&(u64::MAX - (next() % 3)).to_be_bytes());
            }
            crate::fuzz_datagram(&v);
        }
    }
}
