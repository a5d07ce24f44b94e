//! The direct data path: READ, WRITE, FLUSH and CLOSE framed, signed and sent by nsperf
//! itself on the socket the smb2 crate set up (negotiate, session, tree, CREATE), and their
//! replies read straight off it — a READ reply's header into a small buffer, its data into
//! the caller's buffer, the signature checked over both where they lie. Each payload byte is
//! copied once, by the kernel; a WRITE's data goes from the caller's buffer to the socket
//! with `sendmsg`. Message ids and credits continue from where the crate left them
//! ([`Direct::new`]); the crate sends nothing on this connection afterwards
//! (see [`crate::transport`]).
//!
//! Blocking, single-threaded: requests go out in [`Direct::queue`], replies are read in
//! [`Direct::reap`] (and in `queue` while it waits for credits). No allocation per I/O:
//! per-slot headers, the id-to-slot table and the buffer for non-data replies are made once.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nsperf_core::data_path::{Completion, DataOp};
use smb2::types::FileId;

use crate::error::SmbError;
use crate::sign::{SIGNATURE_AT, Signer};
use crate::transport::Tcp;
use crate::wire::{self, HEADER, READ_REPLY_FIXED, Reply, Request};

/// How often a wait looks at the Ctrl-C flag.
const TICK: Duration = Duration::from_millis(200);
/// How long in-flight requests may drain after Ctrl-C before the run gives up on them.
const DRAIN_AFTER_INTERRUPT: Duration = Duration::from_secs(2);
/// The slot number of a FLUSH or CLOSE (not a data slot).
const CONTROL: u32 = u32::MAX;

/// What goes wrong on the direct path, before it is given its operation's name.
#[derive(Debug)]
enum Fault {
    /// The connection failed, closed or timed out.
    Lost(smb2::Error),
    /// The server broke the protocol.
    Protocol(&'static str),
    /// A reply's signature does not verify.
    Signature {
        command: u16,
        message_id: u64,
    },
    Interrupted,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    busy: bool,
    op: DataOp,
    len: usize,
    ptr: *mut u8,
    cap: usize,
}

/// Connection state shared with the setup: ids and keys.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub signer: Signer,
    pub session_id: u64,
    pub tree_id: u32,
    pub next_message_id: u64,
    pub credits: u16,
}

/// The data path of one [`crate::Pipeline`] when it owns its socket.
pub(crate) struct Direct {
    // Keeps the socket open (None in tests, whose socket the test owns).
    _tcp: Option<Arc<Tcp>>,
    fd: RawFd,
    s: Session,
    fid: FileId,
    timeout: Duration,
    /// WRITEs ask for WRITE_THROUGH.
    pub(crate) write_through: bool,
    credits: u32,
    outstanding: u32,
    slots: Vec<Slot>,
    by_id: HashMap<u64, u32>,
    done: Vec<Completion>,
    control: Option<u32>,
    rx: Vec<u8>,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct")
            .field("signer", &self.s.signer)
            .field("inflight", &self.by_id.len())
            .finish()
    }
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Waits until `fd` is ready for `events`, at most until `deadline`; Ctrl-C ends the wait
/// after [`DRAIN_AFTER_INTERRUPT`].
fn wait(
    fd: RawFd,
    events: i16,
    deadline: Instant,
    since: &mut Option<Instant>,
) -> Result<(), Fault> {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(Fault::Lost(smb2::Error::Timeout));
        }
        if nsperf_core::signal::interrupted()
            && since.get_or_insert(now).elapsed() > DRAIN_AFTER_INTERRUPT
        {
            return Err(Fault::Interrupted);
        }
        let ms = (deadline - now).min(TICK).as_millis().max(1) as i32;
        let mut p = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r > 0 {
            return Ok(());
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err(Fault::Lost(smb2::Error::Io(errno())));
        }
    }
}

impl Direct {
    /// Takes over `tcp` (already handed over) for file `fid` with `depth` slots.
    pub(crate) fn new(
        tcp: Option<Arc<Tcp>>,
        fd: RawFd,
        s: Session,
        fid: FileId,
        depth: usize,
        timeout: Duration,
    ) -> Direct {
        let slot = Slot {
            busy: false,
            op: DataOp::Read,
            len: 0,
            ptr: std::ptr::null_mut(),
            cap: 0,
        };
        Direct {
            _tcp: tcp,
            fd,
            credits: u32::from(s.credits),
            s,
            fid,
            timeout,
            write_through: false,
            outstanding: 0,
            slots: vec![slot; depth],
            by_id: HashMap::with_capacity(depth + 1),
            done: Vec::with_capacity(depth),
            control: None,
            rx: Vec::with_capacity(4096),
        }
    }

    pub(crate) fn set_buffer(&mut self, slot: u32, ptr: *mut u8, cap: usize) {
        if let Some(s) = self.slots.get_mut(slot as usize) {
            s.ptr = ptr;
            s.cap = cap;
        }
    }

    pub(crate) fn inflight(&self) -> usize {
        self.by_id.len()
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// Reads exactly `buf.len()` bytes.
    fn recv_exact(&self, buf: &mut [u8], deadline: Instant) -> Result<(), Fault> {
        let mut got = 0;
        let mut since = None;
        while got < buf.len() {
            let rest = &mut buf[got..];
            // SAFETY: recv into the valid, writable `rest`.
            let r = unsafe {
                libc::recv(
                    self.fd,
                    rest.as_mut_ptr().cast(),
                    rest.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                got += r as usize;
            } else if r == 0 {
                return Err(Fault::Lost(smb2::Error::Disconnected));
            } else {
                let e = errno();
                match e.kind() {
                    std::io::ErrorKind::WouldBlock => {
                        wait(self.fd, libc::POLLIN, deadline, &mut since)?
                    }
                    std::io::ErrorKind::Interrupted => {}
                    _ => return Err(Fault::Lost(smb2::Error::Io(e))),
                }
            }
        }
        Ok(())
    }

    /// Sends `parts` in order (gathered by the kernel).
    fn send_all(&self, parts: &[&[u8]], deadline: Instant) -> Result<(), Fault> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut sent = 0usize;
        let mut since = None;
        while sent < total {
            match send_some(self.fd, parts, sent) {
                Ok(n) => sent += n,
                Err(e) => match e.kind() {
                    std::io::ErrorKind::WouldBlock => {
                        wait(self.fd, libc::POLLOUT, deadline, &mut since)?
                    }
                    std::io::ErrorKind::Interrupted => {}
                    _ => return Err(Fault::Lost(smb2::Error::Io(e))),
                },
            }
        }
        Ok(())
    }

    /// Sends one request: the 4-byte transport header, `head` (SMB2 header and fixed part,
    /// signed here) and `data`.
    fn send(&mut self, head: &mut [u8], data: &[u8], r: &Request) -> Result<(), Fault> {
        let mut h = [0u8; HEADER];
        wire::put_header(&mut h, r);
        head[..HEADER].copy_from_slice(&h);
        if self.s.signer.active() {
            let sig = self
                .s
                .signer
                .signature(&[head, data], r.message_id, false, false);
            head[SIGNATURE_AT..SIGNATURE_AT + 16].copy_from_slice(&sig);
        }
        let len = (head.len() + data.len()) as u32;
        if len >= 1 << 24 {
            return Err(Fault::Protocol("request longer than a frame"));
        }
        self.send_all(&[&len.to_be_bytes(), head, data], self.deadline())
    }

    /// The next request's header fields for `command` charged `charge` credits, taking the
    /// message ids and credits; waits (reading replies) while the server has granted too few.
    fn reserve(&mut self, command: u16, charge: u16) -> Result<Request, Fault> {
        while self.credits < u32::from(charge) {
            if self.by_id.is_empty() {
                return Err(Fault::Protocol(
                    "the server granted no credits for the next request",
                ));
            }
            self.recv_one()?;
        }
        // Ask for enough to keep every slot busy with this size, and to replace what this
        // request uses.
        let target = (self.slots.len() as u32 + 1) * u32::from(charge);
        let have = self.credits + self.outstanding;
        let wanted = if have < target {
            u32::from(charge) * 2
        } else {
            u32::from(charge)
        };
        let r = Request {
            command,
            charge,
            credits_wanted: wanted.min(u32::from(u16::MAX)) as u16,
            message_id: self.s.next_message_id,
            tree_id: self.s.tree_id,
            session_id: self.s.session_id,
            signed: self.s.signer.active(),
        };
        self.s.next_message_id += u64::from(charge);
        self.credits -= u32::from(charge);
        self.outstanding += u32::from(charge);
        Ok(r)
    }

    fn queue_inner(&mut self, op: DataOp, offset: u64, len: usize, slot: u32) -> Result<(), Fault> {
        let s = self
            .slots
            .get(slot as usize)
            .copied()
            .filter(|s| !s.busy && !s.ptr.is_null() && len <= s.cap && len < 1 << 24)
            .ok_or(Fault::Protocol("slot busy, without a buffer, or too small"))?;
        let charge = len.div_ceil(65536).clamp(1, 256) as u16;
        match op {
            DataOp::Read => {
                let r = self.reserve(wire::READ, charge)?;
                let mut head = [0u8; wire::READ_REQUEST];
                wire::put_read(&mut head, self.fid, offset, len as u32);
                self.send(&mut head, &[], &r)?;
                self.by_id.insert(r.message_id, slot);
            }
            DataOp::Write => {
                let r = self.reserve(wire::WRITE, charge)?;
                let mut head = [0u8; wire::WRITE_REQUEST];
                wire::put_write(&mut head, self.fid, offset, len as u32, self.write_through);
                // SAFETY: set_buffer's contract: ptr[..cap] is valid and len <= cap.
                let data = unsafe { std::slice::from_raw_parts(s.ptr, len) };
                self.send(&mut head, data, &r)?;
                self.by_id.insert(r.message_id, slot);
            }
        }
        let s = &mut self.slots[slot as usize];
        s.busy = true;
        s.op = op;
        s.len = len;
        Ok(())
    }

    /// Reads one reply and settles it: a data reply becomes a completion in `done`, a
    /// control reply its status in `control`; an interim reply only grants credits.
    fn recv_one(&mut self) -> Result<(), Fault> {
        let deadline = self.deadline();
        let mut head = [0u8; 4 + HEADER + READ_REPLY_FIXED];
        self.recv_exact(&mut head[..4 + HEADER], deadline)?;
        let n =
            wire::frame_length([head[0], head[1], head[2], head[3]]).map_err(Fault::Protocol)?;
        let mut h = [0u8; HEADER];
        h.copy_from_slice(&head[4..4 + HEADER]);
        let reply = wire::parse_reply(&h).map_err(Fault::Protocol)?;
        h[SIGNATURE_AT..SIGNATURE_AT + 16].fill(0);
        let rest = n - HEADER;
        self.credits += u32::from(reply.credits);
        if reply.interim {
            // Interim replies are not signed (MS-SMB2 3.3.4.1.1).
            return self.discard(rest, deadline);
        }
        let slot = match self.by_id.get(&reply.message_id) {
            Some(&s) => s,
            None => return Err(Fault::Protocol("reply to no request in flight")),
        };
        let result = if slot != CONTROL
            && reply.command == wire::READ
            && reply.status == wire::STATUS_SUCCESS
            && self.slots[slot as usize].op == DataOp::Read
            && rest >= READ_REPLY_FIXED
        {
            self.read_reply(&h, &reply, slot, rest, deadline)?
        } else {
            self.rx.clear();
            self.rx.resize(rest, 0);
            let mut rx = std::mem::take(&mut self.rx);
            let r = self.recv_exact(&mut rx, deadline);
            self.rx = rx;
            r?;
            self.check(&[&h, &self.rx], &reply)?;
            self.result_of(&reply, slot)
        };
        self.by_id.remove(&reply.message_id);
        let charge = self.charge_of(slot);
        self.outstanding = self.outstanding.saturating_sub(charge);
        if slot == CONTROL {
            self.control = Some(reply.status);
        } else {
            self.slots[slot as usize].busy = false;
            self.done.push(Completion { slot, result });
        }
        Ok(())
    }

    fn charge_of(&self, slot: u32) -> u32 {
        match self.slots.get(slot as usize) {
            Some(s) => s.len.div_ceil(65536).clamp(1, 256) as u32,
            None => 1,
        }
    }

    fn discard(&mut self, mut rest: usize, deadline: Instant) -> Result<(), Fault> {
        let mut b = [0u8; 512];
        while rest > 0 {
            let n = rest.min(b.len());
            self.recv_exact(&mut b[..n], deadline)?;
            rest -= n;
        }
        Ok(())
    }

    fn check(&self, parts: &[&[u8]], reply: &Reply) -> Result<(), Fault> {
        if self
            .s
            .signer
            .verify(parts, reply.message_id, &reply.signature)
        {
            Ok(())
        } else {
            Err(Fault::Signature {
                command: reply.command,
                message_id: reply.message_id,
            })
        }
    }

    /// A successful READ reply: its fixed part, then the data straight into the slot's
    /// buffer, then the signature over all of it.
    fn read_reply(
        &mut self,
        h: &[u8; HEADER],
        reply: &Reply,
        slot: u32,
        rest: usize,
        deadline: Instant,
    ) -> Result<i32, Fault> {
        let mut fixed = [0u8; READ_REPLY_FIXED];
        self.recv_exact(&mut fixed, deadline)?;
        let s = self.slots[slot as usize];
        let (pad, len) = wire::read_reply_layout(&fixed, rest, s.len).map_err(Fault::Protocol)?;
        let tail = rest - READ_REPLY_FIXED - pad - len;
        if pad + tail > 4096 {
            return Err(Fault::Protocol(
                "READ reply with more than 4 KiB around its data",
            ));
        }
        self.rx.clear();
        self.rx.resize(pad + tail, 0);
        let mut rx = std::mem::take(&mut self.rx);
        let r = (|| {
            self.recv_exact(&mut rx[..pad], deadline)?;
            // SAFETY: set_buffer's contract: the slot's buffer is valid and untouched by the
            // caller until this completion is handed out; len <= s.len <= s.cap.
            let data = unsafe { std::slice::from_raw_parts_mut(s.ptr, len) };
            self.recv_exact(data, deadline)?;
            self.recv_exact(&mut rx[pad..], deadline)?;
            self.check(&[h, &fixed, &rx[..pad], data, &rx[pad..]], reply)
        })();
        self.rx = rx;
        r?;
        Ok(len as i32)
    }

    /// The completion result of a reply that is not a successful READ.
    fn result_of(&self, reply: &Reply, slot: u32) -> i32 {
        if slot == CONTROL {
            return 0;
        }
        let op = self.slots[slot as usize].op;
        match reply.status {
            wire::STATUS_END_OF_FILE if op == DataOp::Read => 0,
            wire::STATUS_SUCCESS if op == DataOp::Write => wire::write_reply_count(&self.rx)
                .map(|n| n as i32)
                .unwrap_or(-libc::EPROTO),
            wire::STATUS_SUCCESS => -libc::EPROTO,
            status => {
                let command = smb2::types::Command::try_from(reply.command)
                    .unwrap_or(smb2::types::Command::Read);
                -SmbError::op(
                    "I/O",
                    "",
                    smb2::Error::Protocol {
                        status: smb2::types::status::NtStatus(status),
                        command,
                    },
                )
                .errno()
            }
        }
    }
}

impl Fault {
    fn into_error(self, op: &'static str, path: &str) -> SmbError {
        match self {
            Fault::Lost(source) => SmbError::Lost { what: op, source },
            Fault::Interrupted => SmbError::Interrupted,
            Fault::Protocol(what) => SmbError::op(op, path, smb2::Error::invalid_data(what)),
            Fault::Signature {
                command,
                message_id,
            } => SmbError::op(
                op,
                path,
                match smb2::types::Command::try_from(command) {
                    Ok(command) => smb2::Error::SignatureInvalid {
                        command,
                        message_id: smb2::types::MessageId(message_id),
                        reason: smb2::error::SignatureFailure::Mismatch,
                    },
                    Err(_) => smb2::Error::invalid_data("reply signature does not verify"),
                },
            ),
        }
    }
}

impl Direct {
    /// Starts a READ or WRITE of `len` bytes at `offset` on `slot`.
    pub(crate) fn queue(
        &mut self,
        op: DataOp,
        offset: u64,
        len: usize,
        slot: u32,
        path: &str,
    ) -> Result<(), SmbError> {
        let name = if op == DataOp::Read { "READ" } else { "WRITE" };
        self.queue_inner(op, offset, len, slot)
            .map_err(|f| f.into_error(name, path))
    }

    /// Waits for at least `min` requests to finish (fewer if fewer are in flight); appends
    /// the completions to `out`.
    pub(crate) fn reap(
        &mut self,
        min: usize,
        out: &mut Vec<Completion>,
        path: &str,
    ) -> Result<(), SmbError> {
        let r = (|| {
            let min = min.min(self.by_id.len() + self.done.len());
            // Only as many as asked: reading on while bytes are readable would, on a slow
            // link where the next reply is always arriving, wait out every reply in flight
            // before the caller could send more (16 READs of 64 KiB on a 45 Mbit/s, 100 ms
            // path moved 26 Mbit/s in batches of 16).
            while self.done.len() < min {
                self.recv_one()?;
            }
            Ok(())
        })();
        out.append(&mut self.done);
        r.map_err(|f: Fault| f.into_error("I/O", path))
    }

    /// One FLUSH or CLOSE on the file, after every request in flight; its status.
    fn control(&mut self, command: u16, out: &mut Vec<Completion>) -> Result<u32, Fault> {
        while !self.by_id.is_empty() {
            self.recv_one()?;
        }
        out.append(&mut self.done);
        let r = self.reserve(command, 1)?;
        let mut head = [0u8; wire::HANDLE_REQUEST];
        wire::put_handle_request(&mut head, self.fid);
        self.send(&mut head, &[], &r)?;
        self.by_id.insert(r.message_id, CONTROL);
        self.control = None;
        while self.control.is_none() {
            self.recv_one()?;
        }
        Ok(self.control.take().unwrap_or(0))
    }

    fn control_named(
        &mut self,
        command: u16,
        op: &'static str,
        out: &mut Vec<Completion>,
        path: &str,
    ) -> Result<(), SmbError> {
        match self.control(command, out) {
            Ok(wire::STATUS_SUCCESS) => Ok(()),
            Ok(status) => Err(SmbError::op(
                op,
                path,
                smb2::Error::Protocol {
                    status: smb2::types::status::NtStatus(status),
                    command: smb2::types::Command::try_from(command)
                        .unwrap_or(smb2::types::Command::Flush),
                },
            )),
            Err(f) => Err(f.into_error(op, path)),
        }
    }

    /// Waits for every request in flight, then FLUSH unless WRITEs are written through.
    pub(crate) fn flush(&mut self, out: &mut Vec<Completion>, path: &str) -> Result<(), SmbError> {
        if self.write_through {
            return self.reap(self.by_id.len(), out, path);
        }
        self.control_named(wire::FLUSH, "FLUSH", out, path)
    }

    /// Waits (at most `within`) for the requests in flight, then closes the file.
    pub(crate) fn close(&mut self, within: Duration, path: &str) -> Result<(), SmbError> {
        self.timeout = self.timeout.min(within);
        let mut out = Vec::new();
        self.control_named(wire::CLOSE, "CLOSE", &mut out, path)
    }
}

/// One non-blocking `sendmsg` of `parts` (at most four) from byte `sent` of their
/// concatenation on: the bytes the kernel took.
pub(crate) fn send_some(fd: libc::c_int, parts: &[&[u8]], sent: usize) -> std::io::Result<usize> {
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 4];
    let (mut n, mut skip) = (0, sent);
    for p in parts {
        if skip >= p.len() {
            skip -= p.len();
            continue;
        }
        iov[n] = libc::iovec {
            iov_base: p[skip..].as_ptr() as *mut _,
            iov_len: p.len() - skip,
        };
        skip = 0;
        n += 1;
    }
    // SAFETY: a zeroed msghdr naming `n` iovecs over live slices.
    let r = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = n as _;
        libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    };
    if r >= 0 {
        Ok(r as usize)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb2::crypto::signing::SigningAlgorithm;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    const KEY: [u8; 16] = [9; 16];

    /// The server's end: reads one request, checks its signature, returns (message id,
    /// command).
    fn take_request(srv: &mut UnixStream, signer: &Signer) -> (u64, u16) {
        let mut p = [0u8; 4];
        srv.read_exact(&mut p).unwrap();
        let mut m = vec![0u8; u32::from_be_bytes(p) as usize];
        srv.read_exact(&mut m).unwrap();
        let id = u64::from_le_bytes(m[24..32].try_into().unwrap());
        let mut got = [0u8; 16];
        got.copy_from_slice(&m[48..64]);
        m[48..64].fill(0);
        assert_eq!(
            signer.signature(&[&m], id, false, false),
            got,
            "request signature"
        );
        (id, u16::from_le_bytes([m[12], m[13]]))
    }

    /// Sends a reply `body` to `id`, signed as the server (then `tamper` applied).
    fn reply(
        srv: &mut UnixStream,
        signer: &Signer,
        id: u64,
        cmd: u16,
        status: u32,
        body: &[u8],
        tamper: bool,
    ) {
        let mut m = vec![0u8; HEADER];
        m[..4].copy_from_slice(b"\xfeSMB");
        m[4] = 64;
        m[8..12].copy_from_slice(&status.to_le_bytes());
        m[12..14].copy_from_slice(&cmd.to_le_bytes());
        m[14] = 4;
        let interim = status == wire::STATUS_PENDING;
        m[16] = if interim { 0x3 } else { 0x9 };
        m[24..32].copy_from_slice(&id.to_le_bytes());
        m.extend_from_slice(body);
        if !interim {
            let sig = signer.signature(&[&m], id, true, false);
            m[48..64].copy_from_slice(&sig);
        }
        if tamper {
            let last = m.len() - 1;
            m[last] ^= 0x40;
        }
        srv.write_all(&(m.len() as u32).to_be_bytes()).unwrap();
        srv.write_all(&m).unwrap();
    }

    /// A `Direct` on one end of a socket pair (kept open by the returned client end), the
    /// test playing the server on the other.
    fn direct(
        signer: &Signer,
        next_message_id: u64,
        credits: u16,
        slots: usize,
    ) -> (Direct, UnixStream, UnixStream) {
        let (cli, srv) = UnixStream::pair().unwrap();
        cli.set_nonblocking(true).unwrap();
        let s = Session {
            signer: signer.clone(),
            session_id: 7,
            tree_id: 3,
            next_message_id,
            credits,
        };
        let fid = FileId {
            persistent: 1,
            volatile: 2,
        };
        let d = Direct::new(None, cli.as_raw_fd(), s, fid, slots, Duration::from_secs(5));
        (d, cli, srv)
    }

    fn read_body(data: &[u8]) -> Vec<u8> {
        let mut b = vec![17, 0, 0x50, 0];
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn signed_reads_and_writes_and_a_forged_reply_is_an_error() {
        for algo in [
            SigningAlgorithm::HmacSha256,
            SigningAlgorithm::AesCmac,
            SigningAlgorithm::AesGmac,
        ] {
            let signer = Signer::new(algo, &KEY).unwrap();
            let (mut d, _cli, mut srv) = direct(&signer, 10, 64, 2);
            let mut buf = vec![0u8; 100_000];
            d.set_buffer(0, buf.as_mut_ptr(), buf.len());
            let data: Vec<u8> = (0..100_000u32).map(|i| (i * 13) as u8).collect();
            let mut out = Vec::new();

            // A READ, with an interim reply before its answer.
            d.queue(DataOp::Read, 0, data.len(), 0, "f").unwrap();
            let (id, cmd) = take_request(&mut srv, &signer);
            assert_eq!((id, cmd), (10, wire::READ));
            reply(
                &mut srv,
                &signer,
                id,
                cmd,
                wire::STATUS_PENDING,
                &[9, 0, 0, 0, 0, 0, 0, 0, 0],
                false,
            );
            reply(&mut srv, &signer, id, cmd, 0, &read_body(&data), false);
            d.reap(1, &mut out, "f").unwrap();
            assert_eq!(
                out,
                [Completion {
                    slot: 0,
                    result: data.len() as i32
                }]
            );
            assert!(buf == data, "{algo:?}: data");

            // A WRITE from the slot's buffer (charged 2 credits: ids 12 next).
            out.clear();
            d.queue(DataOp::Write, 0, 1000, 0, "f").unwrap();
            let (id, cmd) = take_request(&mut srv, &signer);
            assert_eq!((id, cmd), (12, wire::WRITE));
            let mut wbody = vec![17, 0, 0, 0];
            wbody.extend_from_slice(&1000u32.to_le_bytes());
            wbody.extend_from_slice(&[0; 8]);
            reply(&mut srv, &signer, id, cmd, 0, &wbody, false);
            d.reap(1, &mut out, "f").unwrap();
            assert_eq!(
                out,
                [Completion {
                    slot: 0,
                    result: 1000
                }]
            );

            // End of file: a completion of 0.
            out.clear();
            d.queue(DataOp::Read, 1 << 30, 10, 0, "f").unwrap();
            let (id, cmd) = take_request(&mut srv, &signer);
            reply(
                &mut srv,
                &signer,
                id,
                cmd,
                wire::STATUS_END_OF_FILE,
                &[9, 0, 0, 0, 0, 0, 0, 0, 0],
                false,
            );
            d.reap(1, &mut out, "f").unwrap();
            assert_eq!(out, [Completion { slot: 0, result: 0 }]);

            // One bit of the data changed on the way: an error, not a completion.
            out.clear();
            d.queue(DataOp::Read, 0, 100, 0, "f").unwrap();
            let (id, cmd) = take_request(&mut srv, &signer);
            reply(
                &mut srv,
                &signer,
                id,
                cmd,
                0,
                &read_body(&data[..100]),
                true,
            );
            let e = d.reap(1, &mut out, "f").unwrap_err();
            assert!(out.is_empty());
            assert!(e.to_string().contains("signature"), "{e}");
            assert_eq!(
                nsperf_core::failure::Classify::failure(&e),
                nsperf_core::Failure::Protocol
            );
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn replies_that_do_not_fit_are_errors() {
        let signer = Signer::None;
        let (mut d, _cli, mut srv) = direct(&signer, 0, 8, 1);
        let mut buf = vec![0u8; 64];
        d.set_buffer(0, buf.as_mut_ptr(), buf.len());
        let mut out = Vec::new();
        // More data than asked.
        d.queue(DataOp::Read, 0, 10, 0, "f").unwrap();
        let (id, cmd) = take_request(&mut srv, &signer);
        reply(&mut srv, &signer, id, cmd, 0, &read_body(&[1; 20]), false);
        let e = d.reap(1, &mut out, "f").unwrap_err();
        assert!(e.to_string().contains("longer than asked"), "{e}");
        // A reply to nothing asked.
        let (cli, mut srv) = UnixStream::pair().unwrap();
        cli.set_nonblocking(true).unwrap();
        d.fd = cli.as_raw_fd();
        d.by_id.clear();
        d.slots[0].busy = false;
        d.queue(DataOp::Read, 0, 10, 0, "f").unwrap();
        let (id, cmd) = take_request(&mut srv, &signer);
        reply(
            &mut srv,
            &signer,
            id + 100,
            cmd,
            0,
            &read_body(&[1; 5]),
            false,
        );
        let e = d.reap(1, &mut out, "f").unwrap_err();
        assert!(e.to_string().contains("no request in flight"), "{e}");
        // The server closes: the connection is lost.
        drop(srv);
        let e = d.reap(1, &mut out, "f").unwrap_err();
        assert!(matches!(e, SmbError::Lost { .. }), "{e}");
        drop(buf);
    }
}
