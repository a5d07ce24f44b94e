//! One direction of a TCP connection as a byte stream, for the protocol decoders: segments
//! in, in-order bytes out, each byte once, with the bytes the capture never saw reported as
//! gaps (so a decoder knows it lost its place instead of reading garbage).
//!
//! Retransmitted bytes are dropped; a segment beyond a hole waits in a bounded buffer (one
//! reused byte arena, [`MAX_HELD_BYTES`]) until the hole is filled; the hole is declared lost
//! when the buffer is full or when the receiver acknowledges past it (it got bytes this
//! capture missed). Payload cut by the snapshot length is a gap too.

/// Bytes held beyond a hole at most, per direction.
pub const MAX_HELD_BYTES: usize = 256 * 1024;
/// Segments held beyond a hole at most.
const MAX_HELD_SEGMENTS: usize = 256;

/// What the stream hands up.
#[derive(Debug, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// The next bytes of the stream.
    Data(&'a [u8]),
    /// This many bytes were not captured (0: the stream's start was not seen).
    Gap(u64),
}

/// A segment held beyond a hole: its sequence number and its bytes in the arena.
#[derive(Debug, Clone, Copy)]
struct Held {
    seq: u32,
    at: usize,
    len: usize,
    /// Payload bytes on the wire beyond those captured (snapshot length).
    cut: u32,
}

/// The reassembly of one direction.
#[derive(Debug, Default)]
pub struct Stream {
    /// Sequence number of the next byte to hand up; `None` before the first segment.
    next: Option<u32>,
    held: Vec<Held>,
    arena: Vec<u8>,
    /// Sequence number of the FIN, once seen (it takes one number and no byte).
    fin: Option<u32>,
    /// Bytes never captured (holes declared lost and payload cut by the snapshot length).
    pub missing_bytes: u64,
}

/// Signed distance from `b` to `a` in sequence space.
fn diff(a: u32, b: u32) -> i64 {
    i64::from(a.wrapping_sub(b) as i32)
}

impl Stream {
    /// Bytes held beyond a hole now.
    pub fn held_bytes(&self) -> usize {
        self.arena.len()
    }

    /// The SYN of this direction: the stream starts right after `isn`.
    pub fn syn(&mut self, isn: u32) {
        if self.next.is_none() {
            self.next = Some(isn.wrapping_add(1));
        }
    }

    /// One segment: `seq`, the payload bytes captured, and the payload length on the wire.
    /// `up` gets the in-order chunks.
    pub fn segment(
        &mut self,
        seq: u32,
        captured: &[u8],
        wire_len: u32,
        up: &mut dyn FnMut(Chunk<'_>),
    ) {
        if wire_len == 0 {
            return;
        }
        let captured = &captured[..captured.len().min(wire_len as usize)];
        let cut = wire_len - captured.len() as u32;
        let Some(next) = self.next else {
            // Started mid-stream: the decoder must find its place.
            up(Chunk::Gap(0));
            self.next = Some(seq);
            self.deliver(seq, captured, cut, up);
            return;
        };
        let off = diff(seq, next);
        if off > 0 {
            if !self.hold(seq, captured, cut) {
                // No room to wait for the hole: it is lost.
                self.lose_until(self.held.first().map_or(seq, |h| h.seq), up);
                self.drain(up);
                self.lose_until(seq, up);
                self.deliver(seq, captured, cut, up);
                self.drain(up);
            }
            return;
        }
        self.deliver(seq, captured, cut, up);
        self.drain(up);
    }

    /// The FIN of this direction, at `seq` (after the segment's payload).
    pub fn fin(&mut self, seq: u32) {
        self.fin = Some(seq);
    }

    /// The peer acknowledged up to `ack`: bytes below it that were never captured are lost.
    pub fn acknowledged(&mut self, ack: u32, up: &mut dyn FnMut(Chunk<'_>)) {
        let Some(next) = self.next else { return };
        let ack = match self.fin {
            Some(f) if diff(ack, f) > 0 => f,
            _ => ack,
        };
        if diff(ack, next) > 0 {
            let until = match self.held.first() {
                Some(h) if diff(h.seq, ack) < 0 => h.seq,
                _ => ack,
            };
            self.lose_until(until, up);
            self.drain(up);
        }
    }

    /// Hands up the new part of a segment at `seq` (not beyond `next`).
    fn deliver(&mut self, seq: u32, captured: &[u8], cut: u32, up: &mut dyn FnMut(Chunk<'_>)) {
        let Some(next) = self.next else { return };
        let skip = (-diff(seq, next)).max(0) as u64;
        let wire = captured.len() as u64 + u64::from(cut);
        if skip >= wire {
            return;
        }
        if (skip as usize) < captured.len() {
            up(Chunk::Data(&captured[skip as usize..]));
        }
        let lost = u64::from(cut).min(wire - skip);
        if lost > 0 {
            self.missing_bytes += lost;
            up(Chunk::Gap(lost));
        }
        self.next = Some(next.wrapping_add((wire - skip) as u32));
    }

    /// Keeps a segment beyond a hole; false when there is no room.
    fn hold(&mut self, seq: u32, captured: &[u8], cut: u32) -> bool {
        if self.held.len() >= MAX_HELD_SEGMENTS
            || self.arena.len() + captured.len() > MAX_HELD_BYTES
        {
            return false;
        }
        let at = self.arena.len();
        self.arena.extend_from_slice(captured);
        let h = Held {
            seq,
            at,
            len: captured.len(),
            cut,
        };
        let i = self.held.partition_point(|x| diff(x.seq, seq) <= 0);
        self.held.insert(i, h);
        true
    }

    /// Declares the bytes from `next` to `until` lost.
    fn lose_until(&mut self, until: u32, up: &mut dyn FnMut(Chunk<'_>)) {
        let Some(next) = self.next else { return };
        let n = diff(until, next);
        if n > 0 {
            self.missing_bytes += n as u64;
            up(Chunk::Gap(n as u64));
            self.next = Some(until);
        }
    }

    /// Hands up the held segments that are now in order.
    fn drain(&mut self, up: &mut dyn FnMut(Chunk<'_>)) {
        let mut taken = 0;
        while let (Some(h), Some(next)) = (self.held.get(taken).copied(), self.next) {
            if diff(h.seq, next) > 0 {
                break;
            }
            taken += 1;
            let bytes = std::mem::take(&mut self.arena);
            self.deliver(h.seq, &bytes[h.at..h.at + h.len], h.cut, up);
            self.arena = bytes;
        }
        self.held.drain(..taken);
        if self.held.is_empty() {
            self.arena.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(s: &mut Stream, seq: u32, data: &[u8], wire: u32) -> Vec<String> {
        let mut out = Vec::new();
        s.segment(seq, data, wire, &mut |c| {
            out.push(match c {
                Chunk::Data(d) => String::from_utf8_lossy(d).into_owned(),
                Chunk::Gap(n) => format!("<gap {n}>"),
            })
        });
        out
    }

    #[test]
    fn in_order_retransmitted_reordered_cut_and_lost() {
        let mut s = Stream::default();
        s.syn(99);
        assert_eq!(run(&mut s, 100, b"abc", 3), ["abc"]);
        // a retransmission, then one that overlaps and brings new bytes
        assert!(run(&mut s, 100, b"abc", 3).is_empty());
        assert_eq!(run(&mut s, 102, b"cde", 3), ["de"]);
        // a hole: held, then filled
        assert!(run(&mut s, 108, b"ij", 2).is_empty());
        assert_eq!(run(&mut s, 105, b"fgh", 3), ["fgh", "ij"]);
        // payload cut by the snapshot length
        assert_eq!(run(&mut s, 110, b"k", 4), ["k", "<gap 3>"]);
        // a hole the receiver acknowledged past: lost
        assert!(run(&mut s, 120, b"uv", 2).is_empty());
        let mut out = Vec::new();
        s.acknowledged(122, &mut |c| out.push(format!("{c:?}")));
        assert_eq!(out, ["Gap(6)", "Data([117, 118])"]);
        assert_eq!(s.missing_bytes, 9);
        // the FIN takes a sequence number, not a byte
        s.fin(122);
        s.acknowledged(123, &mut |_| panic!("the FIN is no byte"));
        assert_eq!(s.missing_bytes, 9);
        // sequence numbers wrap
        let mut s = Stream::default();
        s.syn(u32::MAX - 1);
        assert_eq!(run(&mut s, u32::MAX, b"ab", 2), ["ab"]);
        assert_eq!(run(&mut s, 1, b"c", 1), ["c"]);
    }

    #[test]
    fn mid_stream_start_and_a_hole_too_long_to_wait_for() {
        let mut s = Stream::default();
        assert_eq!(run(&mut s, 5000, b"xy", 2), ["<gap 0>", "xy"]);
        let big = vec![b'z'; 1000];
        let mut seq = 6002;
        let mut held = 0;
        loop {
            let out = run(&mut s, seq, &big, 1000);
            if !out.is_empty() {
                // the hole (5002..6002) is declared lost, then everything held comes up
                assert_eq!(out[0], "<gap 1000>");
                assert_eq!(out.len(), held + 2);
                break;
            }
            held += 1;
            seq += 1000;
            assert!(held <= MAX_HELD_SEGMENTS);
        }
    }
}
