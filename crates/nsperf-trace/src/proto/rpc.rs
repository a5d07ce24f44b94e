//! ONC RPC record marking (RFC 5531 §11) over one direction's byte stream: a 4-byte mark
//! (top bit: last fragment; low 31 bits: length) before each fragment, marks and fragments
//! split anywhere across TCP segments. The framer keeps the first [`HEAD`] bytes of each
//! record (the RPC header and the arguments or result that matter) and the last [`TAIL`]
//! bytes of its last fragment (what follows a WRITE's data in an NFSv4 COMPOUND), and counts
//! the rest without keeping it: a 1 MiB READ reply costs nothing beyond its header and tail.
//!
//! After a gap (bytes the capture missed) or at a stream picked up in the middle, the framer
//! hunts: it takes a chunk that starts with a plausible record mark and RPC header (the way
//! tshark's heuristic finds RPC on TCP) and drops the bytes before it, counted.

use nsperf_nfs::rpc::{CALL, MAX_FRAGMENT, REPLY, RPC_VERSION, parse_mark};

use super::stream::Chunk;

/// Bytes kept of each record: RPC header, credentials and verifier (400 bytes each at most),
/// and the head of the arguments or result.
pub const HEAD: usize = 1024;

/// Bytes kept of the end of each record's last fragment.
pub const TAIL: usize = 256;

/// One record, complete: its head, its length, and when its first and last bytes passed.
#[derive(Debug)]
pub struct Record<'a> {
    /// The first [`HEAD`] bytes (fewer when the record is shorter).
    pub head: &'a [u8],
    /// The record's last bytes, contiguous to its end: at most [`TAIL`], fewer when its last
    /// fragment was shorter or the capture missed bytes in it (they follow the gap).
    pub tail: &'a [u8],
    /// Length of the record, all fragments, marks excluded.
    pub len: u64,
    /// Capture time of the segment carrying its first byte (of its first record mark), ns.
    pub first_ns: i64,
    /// Capture time of the segment carrying its last byte, ns.
    pub last_ns: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Looking for a record boundary.
    Hunting,
    /// Reading a record mark: bytes of it so far.
    Mark(usize),
    /// Inside a fragment: bytes of it still to come, and whether it is the last one.
    Fragment(u64, bool),
}

/// The framer of one direction.
#[derive(Debug)]
pub struct RecordFramer {
    state: State,
    mark: [u8; 4],
    head: Box<[u8; HEAD]>,
    head_len: usize,
    tail: Box<[u8; TAIL]>,
    /// Where the bytes kept in `tail` start (they run to its end once the record is
    /// complete); None: none kept.
    tail_from: Option<usize>,
    record_len: u64,
    first_ns: i64,
    /// Bytes dropped while hunting for a record boundary.
    pub skipped_bytes: u64,
    /// Times the framer lost its place (a gap) and hunted.
    pub resyncs: u64,
}

impl Default for RecordFramer {
    fn default() -> Self {
        RecordFramer {
            state: State::Mark(0),
            mark: [0; 4],
            head: Box::new([0; HEAD]),
            head_len: 0,
            tail: Box::new([0; TAIL]),
            tail_from: None,
            record_len: 0,
            first_ns: 0,
            skipped_bytes: 0,
            resyncs: 0,
        }
    }
}

/// True when `b` starts with a record mark and an RPC call or reply header.
pub fn looks_like_record(b: &[u8]) -> bool {
    let w = |i: usize| {
        b.get(i..i + 4)
            .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
    };
    let (Some(mark), Some(kind), Some(next)) = (w(0), w(8), w(12)) else {
        return false;
    };
    let (_, len) = parse_mark(mark.to_be_bytes());
    (12..=MAX_FRAGMENT).contains(&len)
        && match kind {
            CALL => next == RPC_VERSION,
            // reply_stat: MSG_ACCEPTED or MSG_DENIED
            REPLY => next <= 1,
            _ => false,
        }
}

impl RecordFramer {
    /// Feeds one chunk of the stream, from a segment captured at `t`; `done` gets each
    /// record whose last byte is in it.
    pub fn feed(&mut self, chunk: Chunk<'_>, t: i64, done: &mut dyn FnMut(Record<'_>)) {
        let mut b = match chunk {
            Chunk::Gap(0) => {
                self.state = State::Hunting;
                return;
            }
            Chunk::Gap(n) => {
                match self.state {
                    // A gap inside a fragment's data, past the head: the record goes on.
                    State::Fragment(left, last) if n <= left && self.head_len == HEAD => {
                        self.record_len += n;
                        // The tail holds bytes contiguous to the end: those after the gap.
                        self.tail_from = None;
                        self.state = State::Fragment(left - n, last);
                        if left == n {
                            if last {
                                self.finish(t, done);
                            } else {
                                self.state = State::Mark(0);
                            }
                        }
                    }
                    State::Hunting => {}
                    _ => {
                        self.resyncs += 1;
                        self.state = State::Hunting;
                    }
                }
                return;
            }
            Chunk::Data(b) => b,
        };
        if self.state == State::Hunting {
            if !looks_like_record(b) {
                self.skipped_bytes += b.len() as u64;
                return;
            }
            self.state = State::Mark(0);
            self.head_len = 0;
            self.record_len = 0;
        }
        while !b.is_empty() {
            match self.state {
                State::Hunting => return,
                State::Mark(have) => {
                    if have == 0 && self.record_len == 0 && self.head_len == 0 {
                        // The record's first byte.
                        self.first_ns = t;
                    }
                    let n = (4 - have).min(b.len());
                    self.mark[have..have + n].copy_from_slice(&b[..n]);
                    b = &b[n..];
                    if have + n < 4 {
                        self.state = State::Mark(have + n);
                        continue;
                    }
                    let (last, len) = parse_mark(self.mark);
                    if len > MAX_FRAGMENT {
                        self.resyncs += 1;
                        self.skipped_bytes += b.len() as u64;
                        self.state = State::Hunting;
                        return;
                    }
                    self.state = State::Fragment(len as u64, last);
                    self.tail_from = None;
                    if len == 0 && last {
                        self.finish(t, done);
                    }
                }
                State::Fragment(left, last) => {
                    let n = (left as usize).min(b.len());
                    let keep = (HEAD - self.head_len).min(n);
                    self.head[self.head_len..self.head_len + keep].copy_from_slice(&b[..keep]);
                    self.head_len += keep;
                    if last {
                        self.keep_tail(left, &b[..n]);
                    }
                    self.record_len += n as u64;
                    b = &b[n..];
                    self.state = State::Fragment(left - n as u64, last);
                    if left == n as u64 {
                        if last {
                            self.finish(t, done);
                        } else {
                            self.state = State::Mark(0);
                        }
                    }
                }
            }
        }
    }

    /// When a record is passing (some of its bytes seen, not all): the capture time of its
    /// first byte.
    pub fn open_since(&self) -> Option<i64> {
        match self.state {
            State::Hunting => None,
            State::Mark(0) if self.record_len == 0 && self.head_len == 0 => None,
            _ => Some(self.first_ns),
        }
    }

    /// Of `b`, the next bytes of the last fragment with `left` bytes still to come, keeps
    /// those among its last [`TAIL`].
    fn keep_tail(&mut self, left: u64, b: &[u8]) {
        let start = left.saturating_sub(TAIL as u64);
        if start >= b.len() as u64 {
            return;
        }
        let start = start as usize;
        // Byte i of b is (left - i) bytes from the end.
        let at = TAIL - (left as usize - start);
        let n = b.len() - start;
        self.tail[at..at + n].copy_from_slice(&b[start..]);
        self.tail_from.get_or_insert(at);
    }

    fn finish(&mut self, t: i64, done: &mut dyn FnMut(Record<'_>)) {
        done(Record {
            head: &self.head[..self.head_len],
            tail: &self.tail[self.tail_from.unwrap_or(TAIL)..],
            len: self.record_len,
            first_ns: self.first_ns,
            last_ns: t,
        });
        self.head_len = 0;
        self.record_len = 0;
        self.state = State::Mark(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(xid: u32, body: usize) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((12 + body) as u32 | 0x8000_0000).to_be_bytes());
        v.extend_from_slice(&xid.to_be_bytes());
        v.extend_from_slice(&0u32.to_be_bytes());
        v.extend_from_slice(&2u32.to_be_bytes());
        v.extend(std::iter::repeat_n(7u8, body));
        v
    }

    fn feed_all(f: &mut RecordFramer, chunks: &[&[u8]]) -> Vec<(u32, u64, usize, i64)> {
        let mut out = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            f.feed(Chunk::Data(c), i as i64, &mut |r| {
                let xid = u32::from_be_bytes(r.head[..4].try_into().unwrap());
                out.push((xid, r.len, r.head.len(), r.last_ns));
            });
        }
        out
    }

    #[test]
    fn records_split_anywhere() {
        let mut s = record(1, 20);
        s.extend(record(2, 5000));
        s.extend(record(3, 0));
        // every split point of the first record's mark and header, and segment sizes
        for size in [1, 3, 4, 5, 13, 1448, 9000] {
            let chunks: Vec<&[u8]> = s.chunks(size).collect();
            let out = feed_all(&mut RecordFramer::default(), &chunks);
            assert_eq!(out.len(), 3, "{size}");
            assert_eq!((out[0].0, out[0].1, out[0].2), (1, 32, 32));
            assert_eq!((out[1].0, out[1].1, out[1].2), (2, 5012, HEAD));
            assert_eq!((out[2].0, out[2].1), (3, 12));
        }
        // two fragments make one record
        let mut two = Vec::new();
        two.extend_from_slice(&8u32.to_be_bytes());
        two.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 0]);
        two.extend_from_slice(&(4u32 | 0x8000_0000).to_be_bytes());
        two.extend_from_slice(&[0, 0, 0, 2]);
        let out = feed_all(&mut RecordFramer::default(), &[&two]);
        assert_eq!(out, [(9, 12, 12, 0)]);
    }

    /// The tail is the record's last bytes wherever the segments split it; after a gap,
    /// those after the gap; a record of two fragments keeps the last one's.
    #[test]
    fn tail_is_the_records_end() {
        let mut r = record(1, 3000);
        for (i, x) in r[16..].iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        let want = r[r.len() - TAIL..].to_vec();
        let mut short = record(2, 20);
        short[20] = 99;
        for size in [1, 5, 100, 255, 256, 257, 1448, 9000] {
            let mut f = RecordFramer::default();
            let mut got = Vec::new();
            for c in r.chunks(size).chain(short.chunks(size)) {
                f.feed(Chunk::Data(c), 0, &mut |x| got.push(x.tail.to_vec()));
            }
            assert_eq!(got, [want.clone(), short[4..].to_vec()], "{size}");
        }
        let mut f = RecordFramer::default();
        let mut got = Vec::new();
        f.feed(Chunk::Data(&r[..2900]), 0, &mut |_| panic!());
        f.feed(Chunk::Gap(50), 1, &mut |_| panic!());
        f.feed(Chunk::Data(&r[2950..]), 2, &mut |x| {
            got.push(x.tail.to_vec())
        });
        assert_eq!(got, [r[2950..].to_vec()]);
    }

    #[test]
    fn gaps_in_the_data_keep_the_place_and_elsewhere_hunt() {
        let mut f = RecordFramer::default();
        let r = record(5, 4000);
        let out = std::cell::RefCell::new(Vec::new());
        let mut cb = |r: Record<'_>| out.borrow_mut().push((r.len, r.first_ns, r.last_ns));
        f.feed(Chunk::Data(&r[..2000]), 1, &mut cb);
        // bytes of the data missed: the record still ends where its mark says
        f.feed(Chunk::Gap(1000), 2, &mut cb);
        f.feed(Chunk::Data(&r[3000..]), 3, &mut cb);
        assert_eq!(*out.borrow(), [(4012, 1, 3)]);
        // a gap across a mark: hunt, drop what does not start a record, then go on
        f.feed(Chunk::Data(&r[..2]), 4, &mut cb);
        f.feed(Chunk::Gap(10), 5, &mut cb);
        f.feed(Chunk::Data(&r[100..200]), 6, &mut cb);
        f.feed(Chunk::Data(&record(6, 8)), 7, &mut cb);
        assert_eq!(out.borrow().len(), 2);
        assert_eq!(out.borrow()[1], (20, 7, 7));
        assert_eq!((f.resyncs, f.skipped_bytes), (1, 100));
        // impossible fragment length: hunt
        let mut f = RecordFramer::default();
        f.feed(
            Chunk::Data(&[0xff, 0xff, 0xff, 0xff, 1, 2]),
            0,
            &mut |_| panic!(),
        );
        assert_eq!(f.resyncs, 1);
    }
}
