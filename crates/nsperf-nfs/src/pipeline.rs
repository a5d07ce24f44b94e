//! The data path: READ and WRITE calls on one connection with up to `depth` in flight.
//!
//! No allocation in steady state and no copy of write data: calls are encoded into a reused
//! header buffer and sent with one `writev` per batch, each WRITE's data taken straight from
//! the caller's buffer. Replies are parsed from a receive buffer; a READ's data is copied
//! from what the last `recv` brought and the rest is received straight into the caller's
//! buffer. The socket is non-blocking and one `poll` waits for both directions, so a large
//! batch of WRITEs cannot deadlock against replies the server is trying to send.
//!
//! Invariants: a slot has at most one call in flight; its xid carries the slot number in
//! its low 12 bits, and a reply whose xid matches no call in flight is a protocol error
//! (never a write into a buffer that is not waiting for data).

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::client::{initial_xid, lost};
use crate::error::NfsError;
use crate::proto::{self, FileHandle, NfsStat, Stable, proc3};
use crate::rpc::{self, AuthSys, RpcError};
use crate::xdr::{XdrReader, pad4, put_u32, put_u64};

/// Most calls in flight on one connection (the xid holds the slot in 12 bits).
pub const MAX_DEPTH: usize = 4096;
const SLOT_BITS: u32 = 12;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Longest reply head parsed from the receive buffer (RPC header with the longest verifier,
/// status, attributes and counts).
const HEAD_MAX: usize = 1024;
const RBUF: usize = 256 << 10;
/// How long in-flight calls may drain after Ctrl-C before the run gives up on them.
const DRAIN_AFTER_INTERRUPT: Duration = Duration::from_secs(2);

/// Direction of a data call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataOp {
    /// READ into the slot's buffer.
    Read,
    /// WRITE from the slot's buffer.
    Write,
}

/// One finished call: the slot and the bytes moved, or a negative errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// The slot given to [`Pipeline::queue`].
    pub slot: u32,
    /// Bytes moved, or `-errno` for an NFS error status.
    pub result: i32,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    busy: bool,
    op: DataOp,
    xid: u32,
    len: u32,
    ptr: *mut u8,
    cap: usize,
}

#[derive(Debug, Clone, Copy)]
enum Seg {
    Head { start: usize, end: usize },
    Data { slot: u32, len: usize },
}

#[derive(Debug, Clone, Copy)]
enum Recv {
    Mark,
    Head {
        len: usize,
    },
    Data {
        slot: u32,
        done: usize,
        count: usize,
        pad: usize,
    },
    Skip {
        left: usize,
        then: Option<(u32, i32)>,
    },
}

/// A data connection to the NFS service.
#[derive(Debug)]
pub struct Pipeline {
    sock: TcpStream,
    fh: FileHandle,
    cred: AuthSys,
    seq: u32,
    stable: Stable,
    timeout: Duration,
    slots: Vec<Slot>,
    inflight: usize,
    hdr: Vec<u8>,
    segs: Vec<Seg>,
    seg_at: usize,
    seg_off: usize,
    iov: Vec<libc::iovec>,
    rbuf: Box<[u8]>,
    rpos: usize,
    rend: usize,
    state: Recv,
    verf: Option<u64>,
    uncommitted: bool,
    /// The last NFS error status seen on a reply, for messages.
    pub last_status: Option<NfsStat>,
}

// SAFETY: the raw buffer pointers are only dereferenced by the thread owning the pipeline,
// inside calls whose caller guarantees the buffers outlive the calls in flight.
unsafe impl Send for Pipeline {}

impl Pipeline {
    /// Connects to `addr` for I/O on `fh` with up to `depth` calls in flight; writes are sent
    /// with `stable`.
    pub fn connect(
        addr: SocketAddr,
        fh: FileHandle,
        depth: usize,
        stable: Stable,
        timeout: Duration,
    ) -> Result<Pipeline, NfsError> {
        let sock = crate::sock::connect(addr, timeout).map_err(|source| NfsError::Connect {
            what: "NFS",
            addr: addr.to_string(),
            source,
        })?;
        sock.set_nonblocking(true).map_err(|e| lost("connect", e))?;
        let depth = depth.clamp(1, MAX_DEPTH);
        let slot = Slot {
            busy: false,
            op: DataOp::Read,
            xid: 0,
            len: 0,
            ptr: std::ptr::null_mut(),
            cap: 0,
        };
        Ok(Pipeline {
            sock,
            fh,
            cred: AuthSys::current(),
            seq: initial_xid() >> SLOT_BITS,
            stable,
            timeout,
            slots: vec![slot; depth],
            inflight: 0,
            hdr: Vec::with_capacity(depth * 160),
            segs: Vec::with_capacity(depth * 2),
            seg_at: 0,
            seg_off: 0,
            iov: Vec::with_capacity(depth * 2),
            rbuf: vec![0u8; RBUF].into_boxed_slice(),
            rpos: 0,
            rend: 0,
            state: Recv::Mark,
            verf: None,
            uncommitted: false,
            last_status: None,
        })
    }

    /// Gives slot `slot` the buffer `ptr[..cap]`.
    ///
    /// # Safety
    /// The buffer must stay valid, and not be touched by the caller, while a call on this
    /// slot is in flight (from [`Pipeline::queue`] until the slot comes back from
    /// [`Pipeline::reap`]).
    pub unsafe fn set_buffer(&mut self, slot: u32, ptr: *mut u8, cap: usize) {
        if let Some(s) = self.slots.get_mut(slot as usize) {
            s.ptr = ptr;
            s.cap = cap;
        }
    }

    /// Number of slots.
    pub fn depth(&self) -> usize {
        self.slots.len()
    }

    /// Calls in flight.
    pub fn inflight(&self) -> usize {
        self.inflight
    }

    /// Queues a READ or WRITE of `len` bytes at `offset` on `slot`; sent by the next
    /// [`Pipeline::reap`].
    pub fn queue(
        &mut self,
        op: DataOp,
        offset: u64,
        len: usize,
        slot: u32,
    ) -> Result<(), NfsError> {
        let s = self
            .slots
            .get(slot as usize)
            .filter(|s| !s.busy && !s.ptr.is_null() && len <= s.cap && len <= u32::MAX as usize)
            .ok_or(NfsError::Rpc {
                what: "queue",
                source: RpcError::Bad("slot busy, without a buffer, or too small"),
            })?;
        let _ = s;
        self.seq = self.seq.wrapping_add(1);
        let xid = (self.seq << SLOT_BITS) | slot;
        let start = self.hdr.len();
        let (proc_, extra) = match op {
            DataOp::Read => (proc3::READ, 0),
            DataOp::Write => (proc3::WRITE, len + (pad4(len) - len)),
        };
        let rec = rpc::begin_call(
            &mut self.hdr,
            xid,
            proto::NFS_PROG,
            proto::NFS_VERS,
            proc_,
            &self.cred,
        );
        self.fh.encode(&mut self.hdr);
        put_u64(&mut self.hdr, offset);
        put_u32(&mut self.hdr, len as u32);
        if op == DataOp::Write {
            put_u32(&mut self.hdr, self.stable.to_wire());
            put_u32(&mut self.hdr, len as u32);
        }
        rpc::finish_record(&mut self.hdr, rec, extra);
        self.segs.push(Seg::Head {
            start,
            end: self.hdr.len(),
        });
        if op == DataOp::Write {
            self.segs.push(Seg::Data { slot, len });
            if pad4(len) != len {
                let p = self.hdr.len();
                self.hdr.extend_from_slice(&[0u8; 3][..pad4(len) - len]);
                self.segs.push(Seg::Head {
                    start: p,
                    end: self.hdr.len(),
                });
            }
        }
        let s = &mut self.slots[slot as usize];
        s.busy = true;
        s.op = op;
        s.xid = xid;
        s.len = len as u32;
        self.inflight += 1;
        Ok(())
    }

    /// Sends what is queued and waits until at least `min` calls have finished (fewer when
    /// fewer are in flight), appending every finished call to `out`.
    pub fn reap(&mut self, min: usize, out: &mut Vec<Done>) -> Result<(), NfsError> {
        let want = out.len() + min.min(self.inflight);
        let mut last_progress = Instant::now();
        let mut interrupted_at: Option<Instant> = None;
        loop {
            let sent = self.send()?;
            let got = self.recv(out)?;
            if out.len() >= want {
                return Ok(());
            }
            let now = Instant::now();
            if sent || got {
                last_progress = now;
            } else if now.duration_since(last_progress) >= self.timeout {
                return Err(NfsError::Lost {
                    what: "READ/WRITE",
                    why: format!("no reply for {} s", self.timeout.as_secs()),
                });
            }
            if nsperf_core::signal::interrupted() {
                let t = *interrupted_at.get_or_insert(now);
                if now.duration_since(t) >= DRAIN_AFTER_INTERRUPT {
                    return Err(NfsError::Interrupted);
                }
            }
            let mut events = libc::POLLIN;
            if self.seg_at < self.segs.len() {
                events |= libc::POLLOUT;
            }
            let mut p = libc::pollfd {
                fd: self.sock.as_raw_fd(),
                events,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut p, 1, 500) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(lost("poll", e));
                }
            }
        }
    }

    /// Waits for every call in flight, then COMMITs what was written unstably since the last
    /// COMMIT. Finished calls are appended to `out`.
    pub fn commit(&mut self, out: &mut Vec<Done>) -> Result<(), NfsError> {
        if !self.uncommitted && self.stable != Stable::Unstable {
            // Stable writes leave nothing to commit: no need to drain the calls in flight.
            return Ok(());
        }
        while self.inflight > 0 || self.seg_at < self.segs.len() {
            self.reap(self.inflight.max(1), out)?;
        }
        if !self.uncommitted {
            return Ok(());
        }
        // A COMMIT on this connection, synchronously: nothing else is in flight.
        self.seq = self.seq.wrapping_add(1);
        let xid = self.seq << SLOT_BITS | SLOT_MASK;
        self.hdr.clear();
        let rec = rpc::begin_call(
            &mut self.hdr,
            xid,
            proto::NFS_PROG,
            proto::NFS_VERS,
            proc3::COMMIT,
            &self.cred,
        );
        self.fh.encode(&mut self.hdr);
        put_u64(&mut self.hdr, 0);
        put_u32(&mut self.hdr, 0);
        rpc::finish_record(&mut self.hdr, rec, 0);
        self.sock
            .set_nonblocking(false)
            .map_err(|e| lost("COMMIT", e))?;
        self.sock.set_read_timeout(Some(self.timeout)).ok();
        let r = self.commit_blocking(xid);
        self.hdr.clear();
        self.sock
            .set_nonblocking(true)
            .map_err(|e| lost("COMMIT", e))?;
        r
    }

    fn commit_blocking(&mut self, xid: u32) -> Result<(), NfsError> {
        use std::io::Write;
        self.sock
            .write_all(&self.hdr)
            .map_err(|e| lost("COMMIT", e))?;
        // Nothing else is in flight and the last reply was consumed to its end (a READ's
        // padding included: it completes only after it), so what follows is this reply.
        let mut have = self.rend - self.rpos;
        self.rbuf.copy_within(self.rpos..self.rend, 0);
        self.rpos = 0;
        while have < 4 {
            have += read_some(&mut self.sock, &mut self.rbuf[have..], "COMMIT")?;
        }
        let (_, len) = rpc::parse_mark([self.rbuf[0], self.rbuf[1], self.rbuf[2], self.rbuf[3]]);
        if len > HEAD_MAX {
            return Err(bad("COMMIT", "reply too long"));
        }
        while have < 4 + len {
            have += read_some(&mut self.sock, &mut self.rbuf[have..], "COMMIT")?;
        }
        let mut r = XdrReader::new(&self.rbuf[4..4 + len]);
        let got = rpc::parse_reply(&mut r).map_err(|source| NfsError::Rpc {
            what: "COMMIT",
            source,
        })?;
        if got != xid {
            return Err(bad("COMMIT", "reply to another call (xid mismatch)"));
        }
        let xe = |e| NfsError::Rpc {
            what: "COMMIT",
            source: RpcError::Xdr(e),
        };
        let st = NfsStat(r.u32().map_err(xe)?);
        proto::skip_wcc_data(&mut r).map_err(xe)?;
        if st != NfsStat::OK {
            return Err(NfsError::nfs("COMMIT", "", st));
        }
        let verf = r.u64().map_err(xe)?;
        self.check_verf(verf)?;
        self.rpos = 4 + len;
        self.rend = have;
        self.uncommitted = false;
        Ok(())
    }

    fn check_verf(&mut self, v: u64) -> Result<(), NfsError> {
        match self.verf {
            Some(old) if old != v => Err(NfsError::Lost {
                what: "WRITE",
                why: "the server restarted (its write verifier changed): unstable writes were lost"
                    .into(),
            }),
            _ => {
                self.verf = Some(v);
                Ok(())
            }
        }
    }

    /// Sends queued bytes until done or the socket is full; true when some were sent.
    fn send(&mut self) -> Result<bool, NfsError> {
        let mut any = false;
        while self.seg_at < self.segs.len() {
            self.iov.clear();
            for (i, seg) in self.segs[self.seg_at..].iter().enumerate().take(1024) {
                let skip = if i == 0 { self.seg_off } else { 0 };
                let (ptr, len) = match *seg {
                    Seg::Head { start, end } => (self.hdr[start..end].as_ptr(), end - start),
                    Seg::Data { slot, len } => (self.slots[slot as usize].ptr as *const u8, len),
                };
                self.iov.push(libc::iovec {
                    // SAFETY: skip < len for the first segment (advanced below).
                    iov_base: unsafe { ptr.add(skip) } as *mut libc::c_void,
                    iov_len: len - skip,
                });
            }
            // SAFETY: the iovecs point into `hdr` and into slot buffers whose owners keep them
            // valid while their calls are in flight (set_buffer's contract).
            let n = unsafe {
                libc::writev(
                    self.sock.as_raw_fd(),
                    self.iov.as_ptr(),
                    self.iov.len() as i32,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(any),
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(lost("WRITE", e)),
                }
            }
            any = true;
            let mut n = n as usize;
            while n > 0 && self.seg_at < self.segs.len() {
                let len = match self.segs[self.seg_at] {
                    Seg::Head { start, end } => end - start,
                    Seg::Data { len, .. } => len,
                } - self.seg_off;
                if n >= len {
                    n -= len;
                    self.seg_at += 1;
                    self.seg_off = 0;
                } else {
                    self.seg_off += n;
                    n = 0;
                }
            }
        }
        self.segs.clear();
        self.hdr.clear();
        self.seg_at = 0;
        self.seg_off = 0;
        Ok(any)
    }

    /// Receives and parses what the socket holds; true when bytes arrived.
    fn recv(&mut self, out: &mut Vec<Done>) -> Result<bool, NfsError> {
        let mut any = false;
        loop {
            // Parse what is buffered.
            while self.step(out)? {}
            if let Recv::Data {
                slot,
                done,
                count,
                pad,
            } = self.state
            {
                // Straight into the caller's buffer.
                let s = self.slots[slot as usize];
                // SAFETY: done < count <= s.cap (checked when the head was parsed); the buffer
                // is valid while the call is in flight (set_buffer's contract).
                let dst = unsafe { std::slice::from_raw_parts_mut(s.ptr.add(done), count - done) };
                match self.sock.read(dst) {
                    Ok(0) => return Err(lost("READ", io::ErrorKind::UnexpectedEof.into())),
                    Ok(n) => {
                        any = true;
                        self.state = if done + n == count {
                            Recv::Skip {
                                left: pad,
                                then: Some((slot, count as i32)),
                            }
                        } else {
                            Recv::Data {
                                slot,
                                done: done + n,
                                count,
                                pad,
                            }
                        };
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(any),
                    Err(e) => return Err(lost("READ", e)),
                }
            }
            if self.rpos > 0 && (self.rpos == self.rend || self.rpos > RBUF / 2) {
                self.rbuf.copy_within(self.rpos..self.rend, 0);
                self.rend -= self.rpos;
                self.rpos = 0;
            }
            match self.sock.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    return Err(lost("READ/WRITE", io::ErrorKind::UnexpectedEof.into()));
                }
                Ok(n) => {
                    any = true;
                    self.rend += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(any),
                Err(e) => return Err(lost("READ/WRITE", e)),
            }
        }
    }

    fn finish(&mut self, slot: u32, result: i32, out: &mut Vec<Done>) {
        self.slots[slot as usize].busy = false;
        self.inflight -= 1;
        out.push(Done { slot, result });
    }

    /// Advances the receive state machine over buffered bytes; false when it needs more.
    fn step(&mut self, out: &mut Vec<Done>) -> Result<bool, NfsError> {
        let have = self.rend - self.rpos;
        match self.state {
            Recv::Mark => {
                if have < 4 {
                    return Ok(false);
                }
                let m = &self.rbuf[self.rpos..self.rpos + 4];
                let (last, len) = rpc::parse_mark([m[0], m[1], m[2], m[3]]);
                if !last {
                    return Err(bad("READ/WRITE", "fragmented reply on the data path"));
                }
                if len > rpc::MAX_FRAGMENT {
                    return Err(bad("READ/WRITE", "reply longer than 4 MiB"));
                }
                self.rpos += 4;
                self.state = Recv::Head { len };
                Ok(true)
            }
            Recv::Head { len } => {
                if have < len.min(HEAD_MAX) {
                    return Ok(false);
                }
                self.head(len, out)?;
                Ok(true)
            }
            Recv::Data {
                slot,
                done,
                count,
                pad,
            } => {
                if have == 0 {
                    return Ok(false);
                }
                let n = have.min(count - done);
                let s = self.slots[slot as usize];
                // SAFETY: done + n <= count <= s.cap; the buffer is valid while in flight.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.rbuf[self.rpos..].as_ptr(),
                        s.ptr.add(done),
                        n,
                    );
                }
                self.rpos += n;
                self.state = if done + n == count {
                    Recv::Skip {
                        left: pad,
                        then: Some((slot, count as i32)),
                    }
                } else {
                    Recv::Data {
                        slot,
                        done: done + n,
                        count,
                        pad,
                    }
                };
                Ok(true)
            }
            Recv::Skip { left, then } => {
                if left == 0 {
                    if let Some((slot, result)) = then {
                        self.finish(slot, result, out);
                    }
                    self.state = Recv::Mark;
                    return Ok(true);
                }
                if have == 0 {
                    return Ok(false);
                }
                let n = have.min(left);
                self.rpos += n;
                self.state = Recv::Skip {
                    left: left - n,
                    then,
                };
                Ok(true)
            }
        }
    }

    /// Parses a reply head of a record of `len` bytes (at least `min(len, HEAD_MAX)` bytes
    /// are buffered).
    fn head(&mut self, len: usize, out: &mut Vec<Done>) -> Result<(), NfsError> {
        let avail = len.min(self.rend - self.rpos);
        let rec = &self.rbuf[self.rpos..self.rpos + avail];
        let mut r = XdrReader::new(rec);
        let xid = rpc::parse_reply(&mut r).map_err(|source| NfsError::Rpc {
            what: "READ/WRITE",
            source,
        })?;
        let slot = xid & SLOT_MASK;
        let s = match self.slots.get(slot as usize) {
            Some(s) if s.busy && s.xid == xid => *s,
            _ => {
                return Err(bad(
                    "READ/WRITE",
                    "reply to no call in flight (unknown xid)",
                ));
            }
        };
        let xe = |e| NfsError::Rpc {
            what: "READ/WRITE",
            source: RpcError::Xdr(e),
        };
        match s.op {
            DataOp::Read => {
                let head = proto::decode_read_head(&mut r).map_err(xe)?;
                let used = r.position();
                match head {
                    Err(st) => {
                        self.last_status = Some(st);
                        self.rpos += used;
                        self.state = Recv::Skip {
                            left: len - used,
                            then: Some((slot, -status_errno(st))),
                        };
                    }
                    Ok(h) => {
                        let count = h.count as usize;
                        if count > s.len as usize || used + pad4(count) != len {
                            return Err(bad("READ", "data length does not match the reply"));
                        }
                        self.rpos += used;
                        self.state = Recv::Data {
                            slot,
                            done: 0,
                            count,
                            pad: pad4(count) - count,
                        };
                        if count == 0 {
                            self.state = Recv::Skip {
                                left: 0,
                                then: Some((slot, 0)),
                            };
                        }
                    }
                }
            }
            DataOp::Write => {
                if len > HEAD_MAX {
                    return Err(bad("WRITE", "reply too long"));
                }
                let res = proto::decode_write(&mut r).map_err(xe)?;
                self.rpos += len;
                self.state = Recv::Mark;
                match res {
                    Err(st) => {
                        self.last_status = Some(st);
                        self.finish(slot, -status_errno(st), out);
                    }
                    Ok(w) => {
                        self.check_verf(w.verf)?;
                        if w.committed == Stable::Unstable {
                            self.uncommitted = true;
                        }
                        self.finish(slot, w.count.min(s.len) as i32, out);
                    }
                }
            }
        }
        Ok(())
    }
}

fn read_some(s: &mut TcpStream, buf: &mut [u8], what: &'static str) -> Result<usize, NfsError> {
    if buf.is_empty() {
        return Err(bad(what, "reply too long"));
    }
    match s.read(buf) {
        Ok(0) => Err(lost(what, io::ErrorKind::UnexpectedEof.into())),
        Ok(n) => Ok(n),
        Err(e) => Err(lost(what, e)),
    }
}

fn bad(what: &'static str, why: &'static str) -> NfsError {
    NfsError::Rpc {
        what,
        source: RpcError::Bad(why),
    }
}

/// The errno reported for an NFS status on the data path.
pub fn status_errno(st: NfsStat) -> i32 {
    NfsError::nfs("", "", st).errno()
}
