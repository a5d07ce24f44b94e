//! The writing side of the mirror: an I/O engine over a synchronous local engine (psync,
//! mmap, null) and one connection to the peer. Queued (`--iodepth` writes in flight to the
//! peer): a WRITE is written locally at once, then its frame and data are handed to the
//! connection (one `writev`), after waiting for room when the bytes in flight would pass
//! the limit; it completes at once (A) or at the peer's ack (B: received, C: written). Acks
//! arrive in the order of the writes (the peer handles a connection in order), so the writes
//! awaiting one are a FIFO. READs are the local engine's.
//!
//! Steady state allocates nothing: the FIFO, the completions and the receive buffer are
//! sized at connect.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::grid::AckGrid;
use super::wire::{Ack, AckKind, Frame, FrameKind, HELLO_LEN, Hello, MSG_LEN, NAME_MAX};
use super::{MAX_WRITES_IN_FLIGHT, MirrorError, Protocol, Replicate, ReplicationFacts};
use crate::buffer::BufferPool;
use crate::engine::{Caps, Completion, IoEngine};
use nsperf_core::data_path::DataOp;

/// Acks received per `recv` at most.
const RBUF: usize = 256 * MSG_LEN;
/// How long connecting to the peer and its answer to the hello may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A write sent and not yet acknowledged.
#[derive(Debug, Clone, Copy)]
struct Sent {
    seq: u64,
    len: u32,
    /// The slot to complete at its ack (B, C); `None` when it completed already (A).
    slot: Option<u32>,
    /// Its local result (bytes or -errno).
    local: i32,
    /// When it was handed to the connection.
    at: Instant,
}

/// An op queued and not yet started.
#[derive(Debug, Clone, Copy)]
struct Todo {
    kind: DataOp,
    offset: u64,
    len: usize,
    slot: u32,
}

/// One job's mirror engine.
#[derive(Debug)]
pub(crate) struct Mirror<E> {
    inner: E,
    sock: TcpStream,
    peer: String,
    congestion: String,
    protocol: Protocol,
    max_bytes: u64,
    sent: VecDeque<Sent>,
    bytes_in_flight: u64,
    next_seq: u64,
    ready: Vec<Completion>,
    todo: Vec<Todo>,
    bufs: Vec<(*mut u8, usize)>,
    rbuf: Box<[u8; RBUF]>,
    rstart: usize,
    rend: usize,
    /// The last flush's or check's ack.
    special: Option<Ack>,
    facts: Facts,
    shared: Arc<Mutex<ReplicationFacts>>,
    fd: RawFd,
    file_len: u64,
    check: bool,
    /// The round trip measured at connect, ns.
    rtt_ns: u64,
    /// The acks over the run's intervals, once the job's clock is known.
    grid: Option<AckGrid>,
    /// The end of the last local write: the send time of its frame.
    stamp: Instant,
}

// SAFETY: the raw pointers are the job's buffer pool, which lives on the job's thread with
// the engine; they are only dereferenced there.
unsafe impl<E: Send> Send for Mirror<E> {}

/// This job's counts, added to the run's when the job detaches.
#[derive(Debug, Default, Clone, Copy)]
struct Facts {
    local_ns: u64,
    local_writes: u64,
    writes: u64,
    bytes: u64,
    write_ns: u64,
    flushes: u64,
    flush_ns: u64,
    waited: u64,
    checked: Option<bool>,
}

impl<E: IoEngine> Mirror<E> {
    /// Connects to the peer and opens its copy `name` of a `file_len`-byte file; the job's
    /// blocks are at most `block` bytes. With `rep.check` the copies are compared at detach.
    pub(crate) fn connect(
        inner: E,
        rep: &Replicate,
        name: &str,
        file_len: u64,
        block: usize,
        shared: Arc<Mutex<ReplicationFacts>>,
    ) -> io::Result<Self> {
        if name.is_empty() || name.len() > NAME_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "file name for the peer",
            ));
        }
        let peer = rep.peer.clone();
        let connect = |source: io::Error| MirrorError::Connect {
            peer: peer.clone(),
            source,
        };
        let addr = rep
            .peer
            .to_socket_addrs()
            .map_err(connect)?
            .next()
            .ok_or_else(|| connect(io::Error::new(io::ErrorKind::NotFound, "no address")))?;
        let mut refused_cc = None;
        let mut sock =
            nsperf_core::sockopt::connect_tcp(&addr, CONNECT_TIMEOUT, |fd| match &rep.congestion {
                Some(name) => nsperf_core::sockopt::set_congestion(fd, name).inspect_err(|e| {
                    refused_cc = Some(MirrorError::Congestion {
                        name: name.clone(),
                        source: io::Error::new(e.kind(), e.to_string()),
                    });
                }),
                None => Ok(()),
            })
            .map_err(|e| refused_cc.take().unwrap_or_else(|| connect(e)))?;
        let congestion = nsperf_core::sockopt::congestion(sock.as_raw_fd()).unwrap_or_default();
        let hello = Hello {
            protocol: rep.protocol,
            file_len,
            block_max: u32::try_from(block)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "block size"))?,
            name: name.to_string(),
        };
        let mut h = [0u8; HELLO_LEN + NAME_MAX];
        let n = hello.encode(&mut h);
        let mut a = [0u8; MSG_LEN];
        sock.set_nodelay(true)
            .and_then(|()| sock.write_all(&h[..n]))
            .and_then(|()| sock.set_read_timeout(Some(CONNECT_TIMEOUT)))
            .and_then(|()| sock.read_exact(&mut a))
            .and_then(|()| sock.set_read_timeout(None))
            .map_err(connect)?;
        let protocol = |reason: String| MirrorError::Protocol {
            peer: peer.clone(),
            reason,
        };
        let a = Ack::decode(&a).map_err(|e| protocol(e.to_string()))?;
        if a.kind != AckKind::Hello {
            return Err(protocol("no answer to the hello".into()).into());
        }
        if a.status != 0 {
            let source = io::Error::from_raw_os_error(a.status);
            return Err(match a.status {
                libc::EPROTO | libc::EINVAL => protocol(format!("it refused the hello ({source})")),
                _ => MirrorError::Refused { peer, source },
            }
            .into());
        }
        Mirror {
            inner,
            sock,
            peer,
            congestion,
            protocol: rep.protocol,
            max_bytes: rep.max_in_flight_bytes.max(1),
            sent: VecDeque::with_capacity(MAX_WRITES_IN_FLIGHT),
            bytes_in_flight: 0,
            next_seq: 0,
            ready: Vec::with_capacity(MAX_WRITES_IN_FLIGHT),
            todo: Vec::new(),
            bufs: Vec::new(),
            rbuf: Box::new([0u8; RBUF]),
            rstart: 0,
            rend: 0,
            special: None,
            facts: Facts::default(),
            shared,
            fd: -1,
            file_len,
            check: rep.check,
            rtt_ns: 0,
            grid: None,
            stamp: Instant::now(),
        }
        .probed()
    }

    /// Measures the round trip to the peer: the least of 3 empty checks (CRC of 0 bytes),
    /// each answered at once.
    fn probed(mut self) -> io::Result<Self> {
        let mut best = u64::MAX;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            self.round_trip(FrameKind::Check, 0)
                .map_err(|e| self.wrap(e))?;
            best = best.min(t.elapsed().as_nanos() as u64);
        }
        self.rtt_ns = best;
        Ok(self)
    }

    /// Reads acks: waits for at least one when `wait`, else takes what has arrived.
    fn take_acks(&mut self, wait: bool) -> io::Result<()> {
        if self.rstart > 0 {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
        loop {
            let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
            // SAFETY: the range is inside rbuf; the socket is ours.
            let r = unsafe {
                libc::recv(
                    self.sock.as_raw_fd(),
                    self.rbuf[self.rend..].as_mut_ptr().cast(),
                    RBUF - self.rend,
                    flags,
                )
            };
            if r == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection",
                ));
            }
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock if !wait => return Ok(()),
                    _ => return Err(e),
                }
            }
            self.rend += r as usize;
            if self.rend - self.rstart >= MSG_LEN || !wait {
                break;
            }
        }
        // One clock read per batch of acks, only when the grid needs it.
        let now = (self.grid.is_some() && self.rend - self.rstart >= MSG_LEN).then(Instant::now);
        while self.rend - self.rstart >= MSG_LEN {
            let a = Ack::decode(&self.rbuf[self.rstart..self.rstart + MSG_LEN])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            self.rstart += MSG_LEN;
            self.on_ack(a, now)?;
        }
        Ok(())
    }

    /// Takes one ack, arrived at `now` (when the grid wants the time).
    fn on_ack(&mut self, a: Ack, now: Option<Instant>) -> io::Result<()> {
        if a.status != 0 {
            return Err(MirrorError::PeerFailed {
                peer: self.peer.clone(),
                source: io::Error::from_raw_os_error(a.status),
            }
            .into());
        }
        match a.kind {
            AckKind::Received | AckKind::Written => {
                let s = self
                    .sent
                    .pop_front()
                    .filter(|s| s.seq == a.seq)
                    .ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidData, "an ack for no write in flight")
                    })?;
                self.bytes_in_flight -= u64::from(s.len);
                self.facts.write_ns += a.value;
                if let (Some(g), Some(now)) = (self.grid.as_mut(), now) {
                    g.ack(now, s.at, u64::from(s.len), a.value);
                }
                if let Some(slot) = s.slot {
                    self.ready.push(Completion {
                        slot,
                        result: s.local,
                    });
                }
            }
            AckKind::Flushed | AckKind::Checked => self.special = Some(a),
            AckKind::Hello => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a second hello"));
            }
        }
        Ok(())
    }

    /// Sends a write of `data` at `offset`; `slot` completes at its ack (None: already).
    fn send_write(
        &mut self,
        offset: u64,
        data: &[u8],
        slot: Option<u32>,
        local: i32,
    ) -> io::Result<()> {
        let len = data.len() as u64;
        let mut waited = false;
        while !self.sent.is_empty()
            && (self.bytes_in_flight + len > self.max_bytes
                || self.sent.len() >= MAX_WRITES_IN_FLIGHT)
        {
            waited = true;
            self.take_acks(true)?;
        }
        self.facts.waited += u64::from(waited);
        if waited {
            // Sent now, not when its local write ended: the wait for room is not the peer's.
            self.stamp = Instant::now();
        }
        // Acks that came in meanwhile: read so that they never fill the socket's buffers.
        self.take_acks(false)?;
        let seq = self.next_seq;
        self.next_seq += 1;
        let head = Frame {
            kind: FrameKind::Write,
            len: data.len() as u32,
            seq,
            offset,
        }
        .encode();
        let mut bufs = [IoSlice::new(&head), IoSlice::new(data)];
        let mut parts: &mut [IoSlice<'_>] = &mut bufs;
        while !parts.is_empty() {
            match self.sock.write_vectored(parts) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => IoSlice::advance_slices(&mut parts, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.sent.push_back(Sent {
            seq,
            len: data.len() as u32,
            slot,
            local,
            at: self.stamp,
        });
        self.bytes_in_flight += len;
        self.facts.writes += 1;
        self.facts.bytes += len;
        Ok(())
    }

    /// The local engine's op; a write's time is counted.
    fn local(&mut self, kind: DataOp, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        if kind == DataOp::Read {
            return self.inner.submit_sync(kind, offset, buf);
        }
        let t = Instant::now();
        let r = self.inner.submit_sync(kind, offset, buf);
        self.stamp = Instant::now();
        self.facts.local_ns += self.stamp.saturating_duration_since(t).as_nanos() as u64;
        self.facts.local_writes += 1;
        r
    }

    /// A queued op: the local I/O, then for a WRITE its frame to the peer; it completes now
    /// (READ, failed WRITE, protocol A) or at the peer's ack.
    fn start(&mut self, t: Todo) -> io::Result<()> {
        let (ptr, cap) = self.bufs[t.slot as usize];
        // SAFETY: the pool's buffer of `slot`, not in use by anything else until this op
        // completes; the runner keeps the pool alive while attached.
        let buf = unsafe { std::slice::from_raw_parts_mut(ptr, t.len.min(cap)) };
        let r = self.local(t.kind, t.offset, buf);
        let local = match &r {
            Ok(n) => *n as i32,
            Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
        };
        match (t.kind, r) {
            (DataOp::Write, Ok(n)) if n > 0 => {
                let wait = (self.protocol != Protocol::A).then_some(t.slot);
                self.send_write(t.offset, &buf[..n], wait, local)?;
                if wait.is_none() {
                    self.ready.push(Completion {
                        slot: t.slot,
                        result: local,
                    });
                }
            }
            _ => self.ready.push(Completion {
                slot: t.slot,
                result: local,
            }),
        }
        Ok(())
    }

    /// Sends a flush or check frame and waits for its ack (all writes before it are acked
    /// by then).
    fn round_trip(&mut self, kind: FrameKind, offset: u64) -> io::Result<Ack> {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.sock.write_all(
            &Frame {
                kind,
                len: 0,
                seq,
                offset,
            }
            .encode(),
        )?;
        self.special = None;
        loop {
            if let Some(a) = self.special.take() {
                if a.seq != seq {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "an ack out of order",
                    ));
                }
                return Ok(a);
            }
            self.take_acks(true)?;
        }
    }

    /// A failure of the connection as a [`MirrorError`] (those made already pass through).
    fn wrap(&self, e: io::Error) -> io::Error {
        if e.get_ref().is_some_and(|r| r.is::<MirrorError>()) {
            return e;
        }
        let peer = self.peer.clone();
        match e.kind() {
            io::ErrorKind::InvalidData => MirrorError::Protocol {
                peer,
                reason: e.to_string(),
            },
            _ => MirrorError::Lost { peer, source: e },
        }
        .into()
    }

    /// Waits until the peer has acked every write sent.
    fn drain(&mut self) -> io::Result<()> {
        while !self.sent.is_empty() {
            self.take_acks(true)?;
        }
        Ok(())
    }

    /// The local and the peer's copy compared (CRC-32 of the whole file).
    fn compare(&mut self) -> io::Result<bool> {
        self.drain()?;
        let peer = self.round_trip(FrameKind::Check, self.file_len)?.value;
        // SAFETY: dup of the attached descriptor, closed when the File drops.
        let fd = unsafe { libc::dup(self.fd) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor owned by nothing else.
        let f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let mut buf = vec![0u8; 1 << 20];
        let local = super::peer::crc_of(&f, self.file_len, &mut buf)?;
        Ok(u64::from(local) == peer)
    }

    fn publish(&mut self) {
        let f = std::mem::take(&mut self.facts);
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let (w0, f0) = (s.writes as f64, s.flushes as f64);
        // Means over the jobs, weighted by their writes.
        let n = (s.writes + f.writes).max(1) as f64;
        if self.rtt_ns > 0 {
            s.rtt_us = (s.rtt_us * w0 + self.rtt_ns as f64 / 1e3 * f.writes.max(1) as f64)
                / (w0 + f.writes.max(1) as f64);
        }
        if f.local_writes > 0 {
            s.local_write_mean_ns = (s.local_write_mean_ns * w0
                + f.local_ns as f64 / f.local_writes as f64 * f.writes as f64)
                / n;
        }
        s.writes += f.writes;
        s.bytes += f.bytes;
        s.waited_for_room += f.waited;
        if s.congestion.is_empty() {
            s.congestion.clone_from(&self.congestion);
        }
        if self.protocol == Protocol::C && s.writes > 0 {
            s.peer_write_mean_ns =
                (s.peer_write_mean_ns * w0 + f.write_ns as f64) / s.writes as f64;
        }
        s.flushes += f.flushes;
        if s.flushes > 0 {
            s.peer_flush_mean_ns =
                (s.peer_flush_mean_ns * f0 + f.flush_ns as f64) / s.flushes as f64;
        }
        if let Some(eq) = f.checked {
            s.copies_equal = Some(s.copies_equal.unwrap_or(true) && eq);
        }
        if let Some(g) = self.grid.take() {
            g.add_to(&mut s.intervals);
        }
    }
}

impl<E: IoEngine> IoEngine for Mirror<E> {
    fn caps(&self) -> Caps {
        Caps {
            queued: true,
            ..self.inner.caps()
        }
    }

    fn attach(&mut self, fd: RawFd, len: u64, pool: &mut BufferPool) -> io::Result<()> {
        self.fd = fd;
        self.bufs = (0..pool.count())
            .map(|i| (pool.ptr(i), pool.capacity()))
            .collect();
        self.todo = Vec::with_capacity(pool.count());
        self.inner.attach(fd, len, pool)
    }

    fn measure_from(&mut self, measure: Instant, interval: Duration, deadline: Option<Instant>) {
        self.grid = Some(AckGrid::new(measure, interval, deadline));
        self.inner.measure_from(measure, interval, deadline);
    }

    fn detach(&mut self) {
        if self.check && self.fd >= 0 && self.inner.caps().does_io {
            self.facts.checked = Some(self.compare().unwrap_or(false));
        }
        self.publish();
        self.bufs.clear();
        self.todo.clear();
        self.inner.detach();
    }

    fn submit_sync(&mut self, kind: DataOp, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.local(kind, offset, buf)?;
        if kind == DataOp::Read {
            return Ok(n);
        }
        self.send_write(offset, &buf[..n], None, n as i32)
            .and_then(|()| {
                if self.protocol == Protocol::A {
                    Ok(())
                } else {
                    // This write's ack is the last one awaited.
                    self.drain()
                }
            })
            .map_err(|e| self.wrap(e))?;
        Ok(n)
    }

    fn queue(&mut self, kind: DataOp, offset: u64, len: usize, slot: u32) -> io::Result<()> {
        // Done by the next reap, as a queued engine's batch is handed to the kernel there
        // (the runner times an op from the end of its batch's queueing).
        if self.todo.len() >= self.todo.capacity() || slot as usize >= self.bufs.len() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        self.todo.push(Todo {
            kind,
            offset,
            len,
            slot,
        });
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        for i in 0..self.todo.len() {
            let t = self.todo[i];
            self.start(t).map_err(|e| self.wrap(e))?;
        }
        self.todo.clear();
        while self.ready.len() < min {
            self.take_acks(true).map_err(|e| self.wrap(e))?;
        }
        out.append(&mut self.ready);
        Ok(())
    }

    fn sync_file(&mut self) -> io::Result<()> {
        self.inner.sync_file()?;
        let a = self
            .round_trip(FrameKind::Flush, 0)
            .map_err(|e| self.wrap(e))?;
        self.facts.flushes += 1;
        self.facts.flush_ns += a.value;
        Ok(())
    }

    fn reap_name(&self) -> &'static str {
        "waiting for the mirror peer's acks on"
    }

    fn queue_name(&self, kind: DataOp) -> &'static str {
        match kind {
            DataOp::Read => "pread",
            DataOp::Write => "pwrite and send to the mirror peer",
        }
    }
}
