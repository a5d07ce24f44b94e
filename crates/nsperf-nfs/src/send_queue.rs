//! The bytes queued for one non-blocking socket: RPC records whose headers are encoded in
//! place into one buffer and whose WRITE payloads point at the caller's memory, sent in
//! batches with `writev` and advanced past what the kernel took. The data pipeline and the
//! replay engine both send through it; nothing is allocated per call once the buffers have
//! grown to the connection's depth.

use std::io;
use std::os::fd::RawFd;

use crate::xdr::pad4;

/// At most this many segments go into one `writev` (below Linux's `IOV_MAX` of 1024).
const IOV_BATCH: usize = 1024;

#[derive(Debug, Clone, Copy)]
enum Seg {
    /// Bytes `start..end` of the header buffer.
    Head { start: usize, end: usize },
    /// `len` bytes at `ptr`, owned by the caller (see [`SendQueue::push_payload`]).
    Data { ptr: *const u8, len: usize },
}

impl Seg {
    fn len(self) -> usize {
        match self {
            Seg::Head { start, end } => end - start,
            Seg::Data { len, .. } => len,
        }
    }
}

/// Records waiting to be sent on one socket, in order.
#[derive(Debug)]
pub(crate) struct SendQueue {
    hdr: Vec<u8>,
    segs: Vec<Seg>,
    /// The first segment not fully sent, and how much of it was.
    at: usize,
    off: usize,
    iov: Vec<libc::iovec>,
}

impl SendQueue {
    /// A queue sized for about `segs` segments and `hdr` header bytes in flight.
    pub(crate) fn with_capacity(segs: usize, hdr: usize) -> Self {
        Self {
            hdr: Vec::with_capacity(hdr),
            segs: Vec::with_capacity(segs),
            at: 0,
            off: 0,
            iov: Vec::with_capacity(segs.min(IOV_BATCH)),
        }
    }

    /// True while bytes wait to be sent.
    pub(crate) fn pending(&self) -> bool {
        self.at < self.segs.len()
    }

    /// The header buffer, to encode a record's header at its end; [`Self::mark`] from the
    /// length it had before makes those bytes the next segment.
    pub(crate) fn hdr(&mut self) -> &mut Vec<u8> {
        &mut self.hdr
    }

    /// Queues the header bytes encoded since the header buffer was `start` long.
    pub(crate) fn mark(&mut self, start: usize) {
        let end = self.hdr.len();
        if end > start {
            self.segs.push(Seg::Head { start, end });
        }
    }

    /// Queues `len` payload bytes at `ptr` and their XDR padding to 4 bytes.
    ///
    /// # Safety
    /// `ptr..ptr + len` must stay valid and unchanged until [`Self::send`] has sent it (or
    /// the queue is dropped or [`Self::clear`]ed).
    pub(crate) unsafe fn push_payload(&mut self, ptr: *const u8, len: usize) {
        if len == 0 {
            return;
        }
        self.segs.push(Seg::Data { ptr, len });
        let pad = pad4(len) - len;
        if pad > 0 {
            let start = self.hdr.len();
            self.hdr.extend_from_slice(&[0u8; 3][..pad]);
            self.mark(start);
        }
    }

    /// Forgets everything queued (the header buffer too), to encode a record by hand.
    pub(crate) fn clear(&mut self) {
        self.segs.clear();
        self.hdr.clear();
        self.at = 0;
        self.off = 0;
    }

    /// Sends queued bytes on `fd` until all are sent or the socket is full (`Ok(false)` when
    /// nothing could be sent); the socket's other errors are returned.
    pub(crate) fn send(&mut self, fd: RawFd) -> io::Result<bool> {
        let mut any = false;
        while self.pending() {
            self.iov.clear();
            for (i, seg) in self.segs[self.at..].iter().enumerate().take(IOV_BATCH) {
                let skip = if i == 0 { self.off } else { 0 };
                let ptr = match *seg {
                    Seg::Head { start, .. } => self.hdr[start..].as_ptr(),
                    Seg::Data { ptr, .. } => ptr,
                };
                self.iov.push(libc::iovec {
                    // SAFETY: skip < the segment's length (the advance below keeps it so).
                    iov_base: unsafe { ptr.add(skip) } as *mut libc::c_void,
                    iov_len: seg.len() - skip,
                });
            }
            // SAFETY: the iovecs point into `hdr`, unchanged during the call, and at payloads
            // push_payload's callers keep valid until sent.
            let n = unsafe { libc::writev(fd, self.iov.as_ptr(), self.iov.len() as i32) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(any),
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            }
            any = true;
            self.advance(n as usize);
        }
        self.clear();
        Ok(any)
    }

    /// Moves past `n` bytes the kernel took.
    fn advance(&mut self, mut n: usize) {
        while n > 0 && self.pending() {
            let left = self.segs[self.at].len() - self.off;
            if n >= left {
                n -= left;
                self.at += 1;
                self.off = 0;
            } else {
                self.off += n;
                n = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn queue_record(q: &mut SendQueue, head: &[u8], payload: &[u8]) {
        let start = q.hdr().len();
        q.hdr().extend_from_slice(head);
        q.mark(start);
        // SAFETY: the payloads outlive the sends of these tests.
        unsafe { q.push_payload(payload.as_ptr(), payload.len()) };
    }

    #[test]
    fn sends_heads_payloads_and_padding_in_order() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut q = SendQueue::with_capacity(8, 64);
        let p1 = *b"hello";
        let p2 = [7u8; 8];
        queue_record(&mut q, b"H1", &p1);
        queue_record(&mut q, b"H2", &p2);
        queue_record(&mut q, b"H3", &[]);
        assert!(q.pending());
        assert!(q.send(a.as_raw_fd()).unwrap());
        assert!(!q.pending());
        drop(a);
        let mut got = Vec::new();
        b.read_to_end(&mut got).unwrap();
        let mut want = b"H1hello\0\0\0H2".to_vec();
        want.extend_from_slice(&p2);
        want.extend_from_slice(b"H3");
        assert_eq!(got, want);
        // Nothing queued: nothing sent, not an error.
        let (a, _b) = UnixStream::pair().unwrap();
        assert!(!q.send(a.as_raw_fd()).unwrap());
    }

    #[test]
    fn a_full_socket_keeps_the_rest_and_resumes_mid_segment() {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let big = vec![0xA5u8; 4 << 20];
        let mut q = SendQueue::with_capacity(8, 64);
        queue_record(&mut q, b"HEAD", &big[..big.len() - 1]);
        // More than a Unix socket buffer holds: the first send stops short.
        assert!(q.send(a.as_raw_fd()).unwrap());
        assert!(q.pending());
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            got
        });
        let mut rounds = 0;
        while q.pending() {
            rounds += 1;
            assert!(rounds < 100_000, "the queue never drained");
            if !q.send(a.as_raw_fd()).unwrap() {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        drop(a);
        let got = reader.join().unwrap();
        assert_eq!(got.len(), 4 + big.len());
        assert_eq!(&got[..4], b"HEAD");
        assert!(got[4..4 + big.len() - 1].iter().all(|&x| x == 0xA5));
        assert_eq!(got[got.len() - 1], 0, "the XDR pad");
    }

    #[test]
    fn a_closed_peer_is_an_error() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        let mut q = SendQueue::with_capacity(2, 16);
        queue_record(&mut q, b"x", &[]);
        assert!(q.send(a.as_raw_fd()).is_err());
    }
}
