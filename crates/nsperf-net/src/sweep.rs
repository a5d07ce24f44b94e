//! The NetPIPE message-size sweep (`--sweep`), done as NPtcp does it: one message is sent
//! whole and received whole before the reply starts, so the two directions never overlap and
//! the one-way time of a message is half the round trip.
//!
//! On the data connection, per message size, the client sends a block header (size and
//! number of round trips, 8 bytes) and the server echoes it back (NPtcp's `Sync` and
//! `SendRepeat`); neither is timed. Then `count` round trips: the client writes `size` bytes,
//! the server reads all `size` bytes and only then writes `size` bytes back, which the client
//! reads whole. A size is measured as up to eight untimed warm-up blocks of one round trip
//! (their median sets the trial length) and [`TRIALS`] timed blocks; like NetPIPE the figure
//! is the best trial's mean round trip (`throughput = size / (rtt / 2)`), the median of all
//! timed round trips is kept beside it.
//!
//! The trial length matters for small messages: while both ends still run on one CPU a
//! round trip is about twice as fast as once the scheduler has spread them over two (2.1
//! against 4.2 µs one way for 256 B on loopback here, pinned either way), and an unpinned
//! pair moves from the first regime to the second within a few thousand round trips. Trials
//! of the same length are comparable; NPtcp's length follows its own first estimate.

use std::io;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nsperf_core::stats::LatencyHistogram;

use crate::meter::StreamMeter;
use crate::results::SweepPoint;
use crate::rr::{read_full, write_full};
use crate::tcp::{Control, POLL};

/// Timed trials per message size (NetPIPE's `TRIALS`); the best one is the figure.
pub const TRIALS: u32 = 3;

/// Most round trips the client asks for in one block (the server refuses more).
pub const MAX_BLOCK: u32 = 1 << 20;

/// The header of one block of round trips at one message size (big-endian on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepBlock {
    /// Message size, bytes.
    pub size: u32,
    /// Round trips that follow.
    pub count: u32,
}

impl SweepBlock {
    /// Bytes on the wire.
    pub const LEN: usize = 8;

    /// The wire form.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&self.size.to_be_bytes());
        b[4..].copy_from_slice(&self.count.to_be_bytes());
        b
    }

    /// Parses a header sent by a client whose test asked for sizes `min..=max`.
    pub fn decode(b: &[u8; Self::LEN], min: u32, max: u32) -> Result<SweepBlock, String> {
        let size = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let count = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        if size < min || size > max {
            return Err(format!(
                "sweep block of {size}-byte messages outside the test's range {min}..{max}"
            ));
        }
        if count == 0 || count > MAX_BLOCK {
            return Err(format!(
                "sweep block of {count} round trips (1..{MAX_BLOCK} allowed)"
            ));
        }
        Ok(SweepBlock { size, count })
    }
}

/// The message sizes of a sweep: each power of two in range with its ±3 byte neighbours
/// (NetPIPE's perturbations), plus both ends of the range, ascending and distinct.
pub fn sweep_sizes(min: u32, max: u32) -> Vec<u32> {
    let mut v = vec![min, max];
    let mut p: u64 = 1;
    while p <= max as u64 {
        for s in [p.saturating_sub(3), p, p + 3] {
            if s >= min as u64 && s <= max as u64 {
                v.push(s as u32);
            }
        }
        p *= 2;
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Round trips per trial so that [`TRIALS`] trials last about `per_size`, from the round
/// trip time expected at this size (NetPIPE's `nrepeat`).
pub fn round_trips_per_trial(per_size: Duration, expected_rtt: Duration) -> u32 {
    let rtt = expected_rtt.as_secs_f64().max(1e-9);
    let n = per_size.as_secs_f64() / TRIALS as f64 / rtt;
    (n.round() as u64).clamp(1, MAX_BLOCK as u64) as u32
}

/// One size's figures from its trials (total time in ns, round trips) and the histogram of
/// every timed round trip.
pub fn point(size: u32, trials: &[(u64, u32)], hist: &LatencyHistogram) -> SweepPoint {
    let best = trials
        .iter()
        .map(|&(ns, n)| ns as f64 / n.max(1) as f64)
        .fold(f64::INFINITY, f64::min);
    let best = if best.is_finite() { best } else { 0.0 };
    let sum = hist.summary();
    SweepPoint {
        size_bytes: size,
        round_trips: hist.count(),
        rtt_p50_ns: sum.p50_ns,
        rtt_mean_ns: sum.mean_ns,
        rtt_best_ns: best,
        // NetPIPE: the message crossed once each way, one after the other.
        throughput_bps: if best > 0.0 {
            size as f64 * 8.0 / (best / 2.0 / 1e9)
        } else {
            0.0
        },
    }
}

/// Server side of `--sweep`: reads each block header, echoes it, then for each round trip
/// reads a whole message before sending it back. Ends at the client's end of stream.
pub fn reply(meter: &StreamMeter, sock: &TcpStream, min: u32, max: u32, ctl: &Control) {
    let _ = sock.set_read_timeout(Some(POLL));
    let _ = sock.set_write_timeout(Some(POLL));
    let mut buf = vec![0u8; max as usize];
    let mut moved = 0u64;
    let mut messages = 0u64;
    let err = 'blocks: loop {
        let mut head = [0u8; SweepBlock::LEN];
        match read_full(sock, &mut head, ctl) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
        let block = match SweepBlock::decode(&head, min, max) {
            Ok(b) => b,
            Err(e) => break Some(e),
        };
        match write_full(sock, &head, ctl) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
        let msg = &mut buf[..block.size as usize];
        for _ in 0..block.count {
            // The client may stop between round trips: an end of stream here is clean.
            match read_full(sock, msg, ctl) {
                Ok(true) => {}
                Ok(false) => break 'blocks None,
                Err(e) => break 'blocks Some(e.to_string()),
            }
            match write_full(sock, msg, ctl) {
                Ok(true) => {}
                Ok(false) => break 'blocks None,
                Err(e) => break 'blocks Some(e.to_string()),
            }
            moved += block.size as u64;
            messages += 1;
            meter.bytes.store(moved, Ordering::Relaxed);
            meter.messages.store(messages, Ordering::Relaxed);
        }
    };
    meter.finish(err);
}

/// The client's end of one connection during a sweep.
struct Pinger<'a> {
    sock: &'a TcpStream,
    out: Vec<u8>,
    inb: Vec<u8>,
    ctl: &'a Control,
}

/// How a block ended.
enum Block {
    /// All round trips done: total time, ns.
    Done(u64),
    /// Stopped or aborted (round trips done so far are in the histogram).
    Stopped,
}

impl Pinger<'_> {
    fn halted(&self) -> bool {
        self.ctl.stop.load(Ordering::Relaxed) || self.ctl.abort.load(Ordering::Relaxed)
    }

    /// Sends a block header and waits for its echo, then does its round trips, each timed
    /// into `hist` when given.
    fn block(
        &mut self,
        b: SweepBlock,
        mut hist: Option<&mut LatencyHistogram>,
    ) -> io::Result<Block> {
        let head = b.encode();
        let mut echo = [0u8; SweepBlock::LEN];
        if !write_full(self.sock, &head, self.ctl)? || !read_full(self.sock, &mut echo, self.ctl)? {
            return Ok(Block::Stopped);
        }
        if echo != head {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the server answered a sweep block header with other bytes",
            ));
        }
        let s = b.size as usize;
        let t0 = Instant::now();
        for _ in 0..b.count {
            if self.halted() {
                return Ok(Block::Stopped);
            }
            let t1 = Instant::now();
            if !write_full(self.sock, &self.out[..s], self.ctl)? {
                return Ok(Block::Stopped);
            }
            if !read_full(self.sock, &mut self.inb[..s], self.ctl)? {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the sweep",
                ));
            }
            if let Some(h) = hist.as_deref_mut() {
                h.record_ns(t1.elapsed().as_nanos() as u64);
            }
        }
        Ok(Block::Done(t0.elapsed().as_nanos() as u64))
    }
}

/// Most warm-up round trips per size.
const WARM_TRIPS: u64 = 8;

/// The warm-up of a size takes at most this share of its time (one round trip at least).
const WARM_SHARE: u32 = 20;

impl Pinger<'_> {
    /// Warm-up round trips of one size, each its own block, until [`WARM_TRIPS`] are done or
    /// `budget` has passed: their median round trip (ns) and how many there were; `None` when
    /// stopped. The median, because the first round trip after a pause is often several
    /// times slower (the ends asleep, their caches cold): taken alone it would make the
    /// trials far shorter than asked, and short trials measure a different regime (the two
    /// ends still on one CPU: twice as fast on loopback here).
    fn warm_up(&mut self, size: u32, budget: Duration) -> io::Result<Option<(u64, u64)>> {
        let t0 = Instant::now();
        let mut rtts = [0u64; WARM_TRIPS as usize];
        let mut n = 0;
        while n < rtts.len() && (n == 0 || t0.elapsed() < budget) {
            match self.block(SweepBlock { size, count: 1 }, None)? {
                Block::Done(ns) => rtts[n] = ns,
                Block::Stopped => return Ok(None),
            }
            n += 1;
        }
        let got = &mut rtts[..n];
        got.sort_unstable();
        Ok(Some((got[n / 2], n as u64)))
    }
}

/// Client side of `--sweep`: each size for about `per_size` (warm-up round trips and
/// [`TRIALS`] timed trials). `progress` is called after each size with the point and the
/// number of round trips done at that size, warm-up included.
pub fn sweep(
    sock: &TcpStream,
    sizes: &[u32],
    per_size: Duration,
    ctl: &Control,
    mut progress: impl FnMut(&SweepPoint, u64),
) -> io::Result<Vec<SweepPoint>> {
    let _ = sock.set_read_timeout(Some(POLL));
    let _ = sock.set_write_timeout(Some(POLL));
    let max = sizes.iter().copied().max().unwrap_or(1) as usize;
    let mut p = Pinger {
        sock,
        out: vec![0x5au8; max],
        inb: vec![0u8; max],
        ctl,
    };
    let mut points: Vec<SweepPoint> = Vec::with_capacity(sizes.len());
    'sizes: for &size in sizes {
        // The warm-up round trips and the previous (smaller) size tell how many round trips
        // fill the time; the larger of the two, as a smaller message is no slower.
        let Some((warm, warm_trips)) = p.warm_up(size, per_size / WARM_SHARE)? else {
            break;
        };
        let prev = points.last().map_or(0.0, |q| q.rtt_best_ns);
        let mut expected = Duration::from_nanos((warm as f64).max(prev) as u64);
        let mut hist = LatencyHistogram::new();
        let mut trials = Vec::with_capacity(TRIALS as usize);
        for _ in 0..TRIALS {
            let count = round_trips_per_trial(per_size, expected);
            match p.block(SweepBlock { size, count }, Some(&mut hist))? {
                Block::Done(ns) => {
                    trials.push((ns, count));
                    // The next trial's length from this one's round trips: a closer estimate
                    // than the warm-up's, so the trials last what was asked.
                    expected = Duration::from_nanos(ns / count.max(1) as u64);
                }
                Block::Stopped => {
                    progress(&point(size, &[], &hist), warm_trips + hist.count());
                    break 'sizes;
                }
            }
        }
        let pt = point(size, &trials, &hist);
        progress(&pt, warm_trips + pt.round_trips);
        points.push(pt);
    }
    let _ = sock.shutdown(std::net::Shutdown::Write);
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_sizes_have_perturbations() {
        let v = sweep_sizes(1, 64);
        assert_eq!(
            v,
            vec![1, 2, 4, 5, 7, 8, 11, 13, 16, 19, 29, 32, 35, 61, 64]
        );
        let v = sweep_sizes(1000, 5000);
        assert_eq!(
            v,
            vec![
                1000, 1021, 1024, 1027, 2045, 2048, 2051, 4093, 4096, 4099, 5000
            ]
        );
    }

    #[test]
    fn block_header_round_trips_and_is_checked() {
        let b = SweepBlock {
            size: 16384,
            count: 7,
        };
        assert_eq!(SweepBlock::decode(&b.encode(), 1, 1 << 20), Ok(b));
        assert!(SweepBlock::decode(&b.encode(), 1, 1024).is_err());
        let zero = SweepBlock { size: 8, count: 0 };
        assert!(SweepBlock::decode(&zero.encode(), 1, 64).is_err());
        let huge = [0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff];
        assert!(SweepBlock::decode(&huge, 1, 64).is_err());
    }

    #[test]
    fn trials_fill_the_time_per_size() {
        let per = Duration::from_millis(300);
        assert_eq!(round_trips_per_trial(per, Duration::from_millis(1)), 100);
        assert_eq!(round_trips_per_trial(per, Duration::from_millis(500)), 1);
        assert_eq!(round_trips_per_trial(per, Duration::ZERO), MAX_BLOCK);
    }

    #[test]
    fn point_uses_the_best_trial() {
        let mut h = LatencyHistogram::new();
        for ns in [200_000u64, 210_000, 190_000, 400_000, 205_000, 195_000] {
            h.record_ns(ns);
        }
        // Two round trips per trial; the best trial took 390 µs: 195 µs per round trip.
        let pt = point(12_500, &[(410_000, 2), (605_000, 2), (390_000, 2)], &h);
        assert_eq!(pt.rtt_best_ns, 195_000.0);
        assert_eq!(pt.round_trips, 6);
        // 12 500 B one way in 97.5 µs = 1.026 Gbit/s.
        assert!((pt.throughput_bps - 1.0256e9).abs() < 1e6, "{pt:?}");
        assert_eq!(point(8, &[], &h).throughput_bps, 0.0);
        // Trials of different lengths: the best mean round trip, not the shortest trial.
        let pt = point(12_500, &[(400_000, 2), (500_000, 4)], &h);
        assert_eq!(pt.rtt_best_ns, 125_000.0);
    }

    /// A connected loopback pair (client end, server end).
    fn pair() -> (TcpStream, TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        for x in [&c, &s] {
            x.set_nodelay(true).unwrap();
            // A broken test fails instead of hanging.
            x.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        }
        (c, s)
    }

    /// Bytes waiting to be read on `s` right now.
    fn pending(s: &TcpStream) -> usize {
        let mut b = [0u8; 4096];
        s.set_nonblocking(true).unwrap();
        let n: usize = std::io::Read::read(&mut &*s, &mut b).unwrap_or_default();
        s.set_nonblocking(false).unwrap();
        n
    }

    #[test]
    fn server_replies_only_to_a_whole_message() {
        use std::io::{Read, Write};
        let (mut c, s) = pair();
        let s = std::sync::Arc::new(s);
        let meter = StreamMeter::new(0, false, crate::meter::StreamSocket::Tcp(s.clone()));
        let server = std::thread::spawn(move || reply(&meter, &s, 1, 1 << 16, &Control::default()));
        let head = SweepBlock {
            size: 20_000,
            count: 1,
        }
        .encode();
        c.write_all(&head).unwrap();
        let mut echo = [0u8; SweepBlock::LEN];
        c.read_exact(&mut echo).unwrap();
        assert_eq!(echo, head);
        // Half a message: nothing may come back yet (the old echo server answered at once,
        // overlapping the two directions).
        c.write_all(&[7u8; 10_000]).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(pending(&c), 0, "the server answered half a message");
        c.write_all(&[7u8; 10_000]).unwrap();
        let mut back = vec![0u8; 20_000];
        c.read_exact(&mut back).unwrap();
        assert!(back.iter().all(|&b| b == 7));
        c.shutdown(std::net::Shutdown::Write).unwrap();
        server.join().unwrap();
    }

    #[test]
    fn server_refuses_a_block_outside_the_range() {
        use std::io::{Read, Write};
        let (mut c, s) = pair();
        let s = std::sync::Arc::new(s);
        let meter = StreamMeter::new(0, false, crate::meter::StreamSocket::Tcp(s.clone()));
        let m2 = meter.clone();
        let server = std::thread::spawn(move || reply(&m2, &s, 1, 1024, &Control::default()));
        c.write_all(
            &SweepBlock {
                size: 4096,
                count: 1,
            }
            .encode(),
        )
        .unwrap();
        server.join().unwrap();
        let err = meter.error.lock().unwrap().clone().unwrap();
        assert!(err.contains("outside the test's range 1..1024"), "{err}");
        // Nothing was echoed: the connection closes without a byte once the meter is gone.
        drop(meter);
        let mut b = [0u8; 1];
        assert_eq!(c.read(&mut b).unwrap_or(0), 0);
    }

    #[test]
    fn client_sends_nothing_before_the_whole_reply() {
        use std::io::{Read, Write};
        let (c, mut s) = pair();
        const SIZE: usize = 30_000;
        let peer = std::thread::spawn(move || {
            let mut msg = vec![0u8; SIZE];
            let mut round_trips = 0u32;
            let mut head = [0u8; SweepBlock::LEN];
            while s.read_exact(&mut head).is_ok() {
                let b = SweepBlock::decode(&head, 1, SIZE as u32).unwrap();
                s.write_all(&head).unwrap();
                for _ in 0..b.count {
                    s.read_exact(&mut msg).unwrap();
                    // The reply in two halves: meanwhile the client must wait.
                    s.write_all(&msg[..SIZE / 2]).unwrap();
                    std::thread::sleep(Duration::from_millis(5));
                    assert_eq!(pending(&s), 0, "the client sent before the reply was whole");
                    s.write_all(&msg[SIZE / 2..]).unwrap();
                    round_trips += 1;
                }
            }
            round_trips
        });
        let mut seen = 0;
        let pts = sweep(
            &c,
            &[SIZE as u32],
            Duration::from_millis(60),
            &Control::default(),
            |_, n| seen += n,
        )
        .unwrap();
        drop(c);
        let served = peer.join().unwrap();
        assert_eq!(pts.len(), 1);
        let pt = &pts[0];
        assert_eq!(pt.round_trips + 1, served as u64);
        assert_eq!(seen, served as u64);
        // Every round trip waited for the 5 ms pause.
        assert!(pt.rtt_best_ns >= 5e6, "{pt:?}");
        assert!(pt.throughput_bps <= SIZE as f64 * 8.0 / 2.5e-3, "{pt:?}");
    }
}
