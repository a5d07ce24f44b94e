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

use nsperf_core::data_path::{Completion, DataOp};
use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::NfsError;
use crate::proto::{self, FileHandle, NfsStat, Stable, proc3};
use crate::rpc::{self, AuthSys, RpcError};
use crate::rpc_conn::{RpcConn, initial_xid, lost};
use crate::send_queue::SendQueue;
use crate::v4::Lease;
use crate::v4::wire::{self, Compound, Results, SessionId, Stateid, op};
use crate::xdr::{XdrReader, pad4, put_u32, put_u64};

/// Most calls in flight on one connection (the xid holds the slot in 12 bits).
pub const MAX_DEPTH: usize = 4096;
const SLOT_BITS: u32 = 12;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Longest reply head parsed from the receive buffer (RPC header with the longest verifier,
/// status, attributes and counts).
const HEAD_MAX: usize = 1024;
const RBUF: usize = 256 << 10;
/// A READ larger than this lands in the caller's buffer straight from the socket: while one
/// is in flight, a reply's record mark and head are read on their own (at most
/// `HEAD_MAX + 4` bytes), so its data does not pass through the receive buffer first.
const BIG_READ: u32 = 16 << 10;
/// The most READ data the kernel queues before it wakes the pipeline (`SO_RCVLOWAT`), as the
/// net receiver's single-stream cap (`nsperf-net`'s `mark_cap`): a megabyte reply wakes the
/// reader a few times instead of once per arriving segment, and on a busy host the wake-ups
/// saved are CPU left to the server and the link.
const WAKE_MAX: usize = 256 << 10;
/// How long in-flight calls may drain after Ctrl-C before the run gives up on them.
const DRAIN_AFTER_INTERRUPT: Duration = Duration::from_secs(2);

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

impl Recv {
    /// Once `done` bytes of a READ's `count` have landed in its slot's buffer: the rest of
    /// the data, or its XDR padding when the data is whole (the call finishes after it).
    fn data_landed(slot: u32, done: usize, count: usize, pad: usize) -> Recv {
        if done == count {
            Recv::Skip {
                left: pad,
                then: Some((slot, count as i32)),
            }
        } else {
            Recv::Data {
                slot,
                done,
                count,
                pad,
            }
        }
    }
}

/// What the calls of a connection speak.
#[derive(Debug)]
enum Dialect {
    /// NFSv3 READ and WRITE procedures.
    V3,
    /// NFSv4 COMPOUNDs of PUTFH and READ or WRITE; in 4.1 after a SEQUENCE on a session of
    /// this connection, slot N of the session for slot N of the pipeline.
    V4(Box<V4>),
}

#[derive(Debug)]
struct V4 {
    /// 4.1's session; none in 4.0.
    session: Option<Session41>,
    stateid: Stateid,
}

#[derive(Debug)]
struct Session41 {
    sid: SessionId,
    /// Each slot's last sequence id.
    seqs: Vec<u32>,
}

impl V4 {
    /// Starts a COMPOUND for `slot`: in 4.1 its SEQUENCE.
    fn begin<'a>(&self, hdr: &'a mut Vec<u8>, slot: u32) -> Compound<'a> {
        let mut c = Compound::begin(hdr, u32::from(self.session.is_some()));
        if let Some(s) = &self.session {
            let highest = (s.seqs.len() - 1) as u32;
            c.sequence(&s.sid, s.seqs[slot as usize].wrapping_add(1), slot, highest);
        }
        c
    }

    /// Reads a reply's SEQUENCE result (4.1), moving the slot's sequence on when it
    /// succeeded; its failed status, if it failed.
    fn sequence_done(
        &mut self,
        res: &mut Results<'_, '_>,
        slot: u32,
    ) -> Result<Option<NfsStat>, NfsError> {
        let Some(s) = &mut self.session else {
            return Ok(None);
        };
        let st = res.status_of(op::SEQUENCE)?;
        if st != NfsStat::OK {
            return Ok(Some(st));
        }
        res.sequence_rest(slot)?;
        s.seqs[slot as usize] = s.seqs[slot as usize].wrapping_add(1);
        Ok(None)
    }
}

/// A reply's head as both dialects give it.
enum Head {
    Read {
        count: usize,
    },
    Write {
        count: u32,
        committed: Stable,
        verf: u64,
    },
}

/// A data connection to the NFS service.
#[derive(Debug)]
pub struct Pipeline {
    sock: TcpStream,
    dialect: Dialect,
    fh: FileHandle,
    cred: AuthSys,
    seq: u32,
    stable: Stable,
    timeout: Duration,
    slots: Vec<Slot>,
    inflight: usize,
    tx: SendQueue,
    rbuf: Box<[u8]>,
    rpos: usize,
    rend: usize,
    state: Recv,
    verf: Option<u64>,
    uncommitted: bool,
    /// READs larger than [`BIG_READ`] in flight.
    big_reads: usize,
    /// The socket's `SO_RCVLOWAT` now: 1, or while a READ's data arrives the bytes of it
    /// the reader waits for ([`Pipeline::wake_when`]).
    lowat: usize,
    /// READ data that was copied out of the receive buffer (the rest went straight from the
    /// socket to the caller's buffer). Counted for the tests.
    #[cfg(test)]
    staged: u64,
    /// The highest `SO_RCVLOWAT` set. Kept for the tests.
    #[cfg(test)]
    max_lowat: usize,
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
        Pipeline::on(sock, Dialect::V3, fh, depth, stable, timeout)
    }

    /// Connects to the server of `lease` for I/O on `fh` (opened as `stateid`) with up to
    /// `depth` COMPOUNDs in flight, each moving up to `max_io` bytes; writes are sent with
    /// `stable`. In 4.1 the connection gets a session of its own (and fewer slots than
    /// `depth` when the server grants fewer).
    pub fn connect_v4(
        lease: &Arc<Lease>,
        fh: FileHandle,
        stateid: Stateid,
        depth: usize,
        max_io: u32,
        stable: Stable,
    ) -> Result<Pipeline, NfsError> {
        let mut conn = RpcConn::connect_within("NFS", lease.addr, lease.timeouts)?;
        let mut depth = depth.clamp(1, MAX_DEPTH);
        let v = if lease.minor == 0 {
            V4 {
                session: None,
                stateid,
            }
        } else {
            let (sid, granted) = lease.create_session(&mut conn, depth as u32, max_io)?;
            depth = granted as usize;
            V4 {
                session: Some(Session41 {
                    sid,
                    seqs: vec![0; depth],
                }),
                stateid: stateid.current(),
            }
        };
        let sock = conn.into_stream();
        sock.set_read_timeout(None).ok();
        sock.set_write_timeout(None).ok();
        let d = Dialect::V4(Box::new(v));
        Pipeline::on(sock, d, fh, depth, stable, lease.timeouts.reply)
    }

    fn on(
        sock: TcpStream,
        dialect: Dialect,
        fh: FileHandle,
        depth: usize,
        stable: Stable,
        timeout: Duration,
    ) -> Result<Pipeline, NfsError> {
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
            dialect,
            fh,
            cred: AuthSys::current(),
            seq: initial_xid() >> SLOT_BITS,
            stable,
            timeout,
            slots: vec![slot; depth],
            inflight: 0,
            tx: SendQueue::with_capacity(depth * 3, depth * 160),
            rbuf: vec![0u8; RBUF].into_boxed_slice(),
            rpos: 0,
            rend: 0,
            state: Recv::Mark,
            verf: None,
            uncommitted: false,
            big_reads: 0,
            lowat: 1,
            #[cfg(test)]
            staged: 0,
            #[cfg(test)]
            max_lowat: 1,
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

    /// Bytes of READ data that passed through the receive buffer (a copy more than the
    /// socket's): at most a reply head's worth per large READ.
    #[cfg(test)]
    pub(crate) fn staged_read_bytes(&self) -> u64 {
        self.staged
    }

    #[cfg(test)]
    pub(crate) fn max_lowat(&self) -> usize {
        self.max_lowat
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
        let s = *s;
        self.seq = self.seq.wrapping_add(1);
        let xid = (self.seq << SLOT_BITS) | slot;
        let start = self.tx.hdr().len();
        let extra = match op {
            DataOp::Read => 0,
            DataOp::Write => pad4(len),
        };
        let rec = self.encode_call(op, xid, slot, offset, len as u32);
        rpc::finish_record(self.tx.hdr(), rec, extra);
        self.tx.mark(start);
        if op == DataOp::Write {
            // SAFETY: the slot's buffer stays valid while its call is in flight
            // (set_buffer's contract), and the call is in flight until its reply.
            unsafe { self.tx.push_payload(s.ptr, len) };
        }
        let s = &mut self.slots[slot as usize];
        s.busy = true;
        s.op = op;
        s.xid = xid;
        s.len = len as u32;
        self.inflight += 1;
        if op == DataOp::Read && s.len > BIG_READ {
            self.big_reads += 1;
        }
        Ok(())
    }

    /// Sends what is queued and waits until at least `min` calls have finished (fewer when
    /// fewer are in flight), appending every finished call to `out`.
    pub fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), NfsError> {
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
            self.wake_when();
            let mut events = libc::POLLIN;
            if self.tx.pending() {
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

    /// Before a wait: while a READ's data is arriving, the kernel wakes the pipeline once the
    /// rest of it (up to [`WAKE_MAX`], and a quarter of the receive buffer so that the kernel
    /// neither grows the buffer nor clamps the window for the mark) has arrived; otherwise at
    /// the first byte. The mark never exceeds the bytes still to come of the record being
    /// received, so no reply waits on it. A system call when the mark moves: about three per
    /// large READ, none for other replies.
    fn wake_when(&mut self) {
        let rest = match self.state {
            Recv::Data {
                done, count, pad, ..
            } => count - done + pad,
            _ => 1,
        };
        let mark = if rest <= 1 {
            1
        } else if self.lowat > 1 {
            // Only down while the same data arrives (the cap was taken on the way in).
            rest.min(self.lowat)
        } else {
            let cap = (crate::sock::rcvbuf(self.sock.as_raw_fd()) / 4).min(WAKE_MAX);
            rest.min(cap).max(1)
        };
        if mark != self.lowat && crate::sock::set_rcvlowat(self.sock.as_raw_fd(), mark).is_ok() {
            self.lowat = mark;
            #[cfg(test)]
            {
                self.max_lowat = self.max_lowat.max(mark);
            }
        }
    }

    /// The kernel wakes the pipeline at the first byte again (before a blocking read).
    fn wake_when_any(&mut self) {
        if self.lowat != 1 && crate::sock::set_rcvlowat(self.sock.as_raw_fd(), 1).is_ok() {
            self.lowat = 1;
        }
    }

    /// Waits for every call in flight, then COMMITs what was written unstably since the last
    /// COMMIT. Finished calls are appended to `out`.
    pub fn commit(&mut self, out: &mut Vec<Completion>) -> Result<(), NfsError> {
        if !self.uncommitted && self.stable != Stable::Unstable {
            // Stable writes leave nothing to commit: no need to drain the calls in flight.
            return Ok(());
        }
        while self.inflight > 0 || self.tx.pending() {
            self.reap(self.inflight.max(1), out)?;
        }
        if !self.uncommitted {
            return Ok(());
        }
        // A COMMIT on this connection, synchronously: nothing else is in flight (so slot 0
        // of an NFSv4.1 session is free).
        self.seq = self.seq.wrapping_add(1);
        let xid = self.seq << SLOT_BITS | SLOT_MASK;
        self.tx.clear();
        match &self.dialect {
            Dialect::V3 => {
                let rec = rpc::begin_call(
                    self.tx.hdr(),
                    xid,
                    proto::NFS_PROG,
                    proto::NFS_VERS,
                    proc3::COMMIT,
                    &self.cred,
                );
                self.fh.encode(self.tx.hdr());
                put_u64(self.tx.hdr(), 0);
                put_u32(self.tx.hdr(), 0);
                rpc::finish_record(self.tx.hdr(), rec, 0);
            }
            Dialect::V4(v) => {
                let rec = rpc::begin_call(
                    self.tx.hdr(),
                    xid,
                    proto::NFS_PROG,
                    wire::NFS_V4,
                    wire::PROC_COMPOUND,
                    &self.cred,
                );
                let mut c = v.begin(self.tx.hdr(), 0);
                c.putfh(&self.fh);
                c.commit();
                c.finish();
                rpc::finish_record(self.tx.hdr(), rec, 0);
            }
        }
        // A blocking read waits for SO_RCVLOWAT's bytes: the reply is small.
        self.wake_when_any();
        self.sock
            .set_nonblocking(false)
            .map_err(|e| lost("COMMIT", e))?;
        self.sock.set_read_timeout(Some(self.timeout)).ok();
        let r = self.commit_blocking(xid);
        self.tx.clear();
        self.sock
            .set_nonblocking(true)
            .map_err(|e| lost("COMMIT", e))?;
        r
    }

    fn commit_blocking(&mut self, xid: u32) -> Result<(), NfsError> {
        use std::io::Write;
        self.sock
            .write_all(self.tx.hdr())
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
        match &mut self.dialect {
            Dialect::V3 => {
                let st = NfsStat(r.u32().map_err(xe)?);
                proto::skip_wcc_data(&mut r).map_err(xe)?;
                if st != NfsStat::OK {
                    return Err(NfsError::nfs("COMMIT", "", st));
                }
            }
            Dialect::V4(v) => {
                let mut res = Results::begin(&mut r, "COMMIT")?;
                if let Some(stat) = v.sequence_done(&mut res, 0)? {
                    return Err(NfsError::nfs4("SEQUENCE", "", stat));
                }
                res.next(op::PUTFH, "")?;
                res.next(op::COMMIT, "")?;
            }
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

    /// Appends the call of `op` (its WRITE data excluded) to the header buffer; returns the
    /// record's start for [`rpc::finish_record`].
    fn encode_call(&mut self, op: DataOp, xid: u32, slot: u32, offset: u64, len: u32) -> usize {
        let (vers, proc_) = match (&self.dialect, op) {
            (Dialect::V3, DataOp::Read) => (proto::NFS_VERS, proc3::READ),
            (Dialect::V3, DataOp::Write) => (proto::NFS_VERS, proc3::WRITE),
            (Dialect::V4(_), _) => (wire::NFS_V4, wire::PROC_COMPOUND),
        };
        let rec = rpc::begin_call(self.tx.hdr(), xid, proto::NFS_PROG, vers, proc_, &self.cred);
        match &self.dialect {
            Dialect::V3 => {
                self.fh.encode(self.tx.hdr());
                put_u64(self.tx.hdr(), offset);
                put_u32(self.tx.hdr(), len);
                if op == DataOp::Write {
                    put_u32(self.tx.hdr(), self.stable.to_wire());
                    put_u32(self.tx.hdr(), len);
                }
            }
            Dialect::V4(v) => {
                let mut c = v.begin(self.tx.hdr(), slot);
                c.putfh(&self.fh);
                match op {
                    DataOp::Read => c.read(&v.stateid, offset, len),
                    DataOp::Write => c.write_head(&v.stateid, offset, self.stable, len),
                }
                c.finish();
            }
        }
        rec
    }

    /// Reads a reply's results up to the data (after the RPC header): the status of the
    /// first operation that failed, or the head of the READ or WRITE result. In NFSv4.1 a
    /// SEQUENCE that succeeded moves its slot's sequence on.
    fn parse_head(
        dialect: &mut Dialect,
        r: &mut XdrReader<'_>,
        slot: u32,
        op: DataOp,
    ) -> Result<Result<Head, NfsStat>, NfsError> {
        let xe = |e| NfsError::Rpc {
            what: "READ/WRITE",
            source: RpcError::Xdr(e),
        };
        if let Dialect::V4(v) = dialect {
            let mut res = Results::begin(r, "READ/WRITE")?;
            if let Some(st) = v.sequence_done(&mut res, slot)? {
                return Ok(Err(st));
            }
            let which = match op {
                DataOp::Read => op::READ,
                DataOp::Write => op::WRITE,
            };
            for o in [op::PUTFH, which] {
                let st = res.status_of(o)?;
                if st != NfsStat::OK {
                    return Ok(Err(st));
                }
            }
            return Ok(Ok(match op {
                DataOp::Read => {
                    r.bool().map_err(xe)?;
                    Head::Read {
                        count: r.u32().map_err(xe)? as usize,
                    }
                }
                DataOp::Write => {
                    let (count, committed, verf) = wire::decode_write(r).map_err(xe)?;
                    Head::Write {
                        count,
                        committed,
                        verf,
                    }
                }
            }));
        }
        Ok(match op {
            DataOp::Read => proto::decode_read_head(r).map_err(xe)?.map(|h| Head::Read {
                count: h.count as usize,
            }),
            DataOp::Write => proto::decode_write(r).map_err(xe)?.map(|w| Head::Write {
                count: w.count,
                committed: w.committed,
                verf: w.verf,
            }),
        })
    }

    /// Sends queued bytes until done or the socket is full; true when some were sent.
    fn send(&mut self) -> Result<bool, NfsError> {
        self.tx
            .send(self.sock.as_raw_fd())
            .map_err(|e| lost("WRITE", e))
    }

    /// Receives and parses what the socket holds; true when bytes arrived.
    fn recv(&mut self, out: &mut Vec<Completion>) -> Result<bool, NfsError> {
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
                        self.state = Recv::data_landed(slot, done + n, count, pad);
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
            // With a large READ in flight, the next reply may be its head and a megabyte of
            // data: read the head alone, and the data straight into its buffer (above).
            let room = if self.big_reads > 0 {
                (HEAD_MAX + 4)
                    .saturating_sub(self.rend - self.rpos)
                    .max(4)
                    .min(RBUF - self.rend)
            } else {
                RBUF - self.rend
            };
            match self.sock.read(&mut self.rbuf[self.rend..self.rend + room]) {
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

    fn finish(&mut self, slot: u32, result: i32, out: &mut Vec<Completion>) {
        let s = &mut self.slots[slot as usize];
        s.busy = false;
        if s.op == DataOp::Read && s.len > BIG_READ {
            self.big_reads -= 1;
        }
        self.inflight -= 1;
        out.push(Completion { slot, result });
    }

    /// Advances the receive state machine over buffered bytes; false when it needs more.
    fn step(&mut self, out: &mut Vec<Completion>) -> Result<bool, NfsError> {
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
                #[cfg(test)]
                {
                    self.staged += n as u64;
                }
                self.state = Recv::data_landed(slot, done + n, count, pad);
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
    fn head(&mut self, len: usize, out: &mut Vec<Completion>) -> Result<(), NfsError> {
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
        if s.op == DataOp::Write && len > HEAD_MAX {
            return Err(bad("WRITE", "reply too long"));
        }
        let head = Pipeline::parse_head(&mut self.dialect, &mut r, slot, s.op)?;
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
            Ok(Head::Read { count }) => {
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
            Ok(Head::Write {
                count,
                committed,
                verf,
            }) => {
                self.rpos += len;
                self.state = Recv::Mark;
                self.check_verf(verf)?;
                if committed == Stable::Unstable {
                    self.uncommitted = true;
                }
                self.finish(slot, count.min(s.len) as i32, out);
            }
        }
        Ok(())
    }
}

impl Drop for Pipeline {
    /// An NFSv4.1 connection ends its session (best effort, one second at most): the client
    /// is destroyed later only when it holds no session.
    fn drop(&mut self) {
        let Dialect::V4(v) = &self.dialect else {
            return;
        };
        let Some(s) = &v.session else {
            return;
        };
        let mut b = Vec::with_capacity(128);
        let xid = self.seq.wrapping_add(1) << SLOT_BITS | SLOT_MASK;
        let rec = rpc::begin_call(
            &mut b,
            xid,
            proto::NFS_PROG,
            wire::NFS_V4,
            wire::PROC_COMPOUND,
            &self.cred,
        );
        let mut c = Compound::begin(&mut b, 1);
        c.destroy_session(&s.sid);
        c.finish();
        rpc::finish_record(&mut b, rec, 0);
        self.wake_when_any();
        if self.sock.set_nonblocking(false).is_err() {
            return;
        }
        let second = Some(Duration::from_secs(1));
        self.sock.set_write_timeout(second).ok();
        self.sock.set_read_timeout(second).ok();
        if std::io::Write::write_all(&mut self.sock, &b).is_ok() {
            // The reply (or whatever was still coming) is read and dropped: the server has
            // acted on the call once it answers.
            let mut sink = [0u8; 512];
            let _ = self.sock.read(&mut sink);
        }
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
