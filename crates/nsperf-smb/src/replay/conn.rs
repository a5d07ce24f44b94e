//! One replayed SMB2 connection: the requests its [`Scheduler`] says are due (and the
//! server's credits allow), framed into a reused buffer, signed and sent with `sendmsg`
//! (WRITE data straight from the shared pattern); the replies read off the non-blocking
//! socket into a reused receive buffer, their signatures checked, matched by message id.
//! One `ppoll` waits for a reply or until the next request is due.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use nsperf_core::replay::{ConnResult, ErrorStatus, Next, OpStats, Scheduler};
use smb2::types::FileId;
use smb2::types::status::NtStatus;

use super::{Call, CallOp, ConnScript, Handles, OPS, bad, utf16};
use crate::client::Client;
use crate::creds::Credentials;
use crate::direct::Session;
use crate::error::SmbError;
use crate::sign::SIGNATURE_AT;
use crate::transport::Tcp;
use crate::url::SmbUrl;
use crate::wire::{self, HEADER, Request};

/// Longest wait between two looks at the socket, ns.
const IDLE_NS: u64 = 200_000_000;
/// Index of a request that is no scripted one (the CLOSEs after the replay).
const TEARDOWN: usize = usize::MAX;

/// An NT status a request was answered with, not success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Status(u32);

impl ErrorStatus for Status {
    fn name(self) -> String {
        NtStatus(self.0).to_string()
    }
}

/// What every connection shares.
pub(super) struct Shared<'a> {
    pub pattern: &'a [u8],
    /// The UTF-16LE name a refused CREATE opens.
    pub absent: &'a [u8],
    pub barrier: &'a Barrier,
    pub epoch: &'a OnceLock<Instant>,
    pub abort: &'a AtomicBool,
    pub timeout: Duration,
}

/// The error of a connection stopped because another failed.
fn aborted() -> SmbError {
    SmbError::Lost {
        what: ABORTED,
        source: smb2::Error::invalid_data("another connection of the replay failed"),
    }
}

/// What [`aborted`]'s error was doing.
const ABORTED: &str = "the replay (stopped: another connection failed)";

/// True for [`aborted`]'s error.
pub(super) fn is_abort(e: Option<&SmbError>) -> bool {
    matches!(e, Some(SmbError::Lost { what, .. }) if *what == ABORTED)
}

fn lost(e: std::io::Error) -> SmbError {
    SmbError::Lost {
        what: "replay",
        source: smb2::Error::Io(e),
    }
}

/// A replay connection set up: logged on, tree connected, every file open, the socket
/// handed over by the smb2 crate.
pub(super) struct Link {
    // Kept for the session's lifetime; sends nothing after the handover.
    _client: Client,
    _tcp: Arc<Tcp>,
    fd: RawFd,
    s: Session,
    h: Handles,
}

impl Link {
    /// Connects as `creds` and opens the files of `paths` (untimed).
    pub(super) fn open(
        url: &SmbUrl,
        creds: &Credentials,
        paths: &[String],
        timeout: Duration,
    ) -> Result<Link, SmbError> {
        let Some((mut client, tcp, mut s)) = Client::connect_direct(url, creds, timeout)? else {
            return Err(bad(
                "the session or share is encrypted: the replay takes unencrypted connections only",
            ));
        };
        let mut files = Vec::with_capacity(paths.len());
        for p in paths {
            files.push(client.open(p, false)?);
        }
        (s.next_message_id, s.credits) = client.handover_state();
        let fd = tcp.hand_over();
        let names = paths.iter().map(|p| utf16(&smb2::encode_path(p))).collect();
        Ok(Link {
            _client: client,
            _tcp: tcp,
            fd,
            s,
            h: Handles { files, names },
        })
    }
}

/// One connection's replay.
pub(super) struct Driver<'a> {
    conn: &'a ConnScript,
    shared: &'a Shared<'a>,
    link: Link,
    credits: u32,
    /// Credits charged to requests in flight.
    charged: u32,
    /// Message id to request index, of the requests in flight.
    by_id: HashMap<u64, usize>,
    /// Per file, the handles replayed CREATEs opened and no CLOSE closed yet.
    opened: Vec<Vec<FileId>>,
    tx: Vec<u8>,
    rx: Box<[u8]>,
    rpos: usize,
    rend: usize,
    epoch: Instant,
    stats: Vec<Option<OpStats<Status>>>,
    out: ConnResult,
}

impl<'a> Driver<'a> {
    pub(super) fn new(
        id: usize,
        conn: &'a ConnScript,
        link: Link,
        shared: &'a Shared<'a>,
    ) -> Driver<'a> {
        let mut stats: Vec<Option<OpStats<Status>>> = vec![None; OPS];
        let mut opened = vec![Vec::new(); link.h.files.len()];
        let mut longest_read = 0;
        for c in &conn.calls {
            let p = usize::from(c.captured).min(OPS - 1);
            stats[p].get_or_insert_with(|| OpStats::new(c.op.command() != c.captured));
            match c.op {
                CallOp::Create { file: Some(f) } => {
                    if let Some(o) = opened.get_mut(f as usize) {
                        o.reserve(1);
                    }
                }
                CallOp::Read { count, .. } => longest_read = longest_read.max(count as usize),
                _ => {}
            }
        }
        let name = link.h.names.iter().map(Vec::len).max().unwrap_or(0);
        let credits = u32::from(link.s.credits);
        Driver {
            conn,
            shared,
            link,
            credits,
            charged: 0,
            by_id: HashMap::with_capacity(conn.in_flight_max as usize + 8),
            opened,
            tx: Vec::with_capacity(wire::CREATE_REQUEST + name.max(shared.absent.len())),
            rx: vec![0u8; (2 * (longest_read + 8192)).max(256 << 10)].into_boxed_slice(),
            rpos: 0,
            rend: 0,
            epoch: Instant::now(),
            stats,
            out: ConnResult::new(id),
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Runs the connection's requests from the barrier to the last reply, then closes its
    /// handles (untimed).
    pub(super) fn run(mut self) -> Result<ConnResult, SmbError> {
        // Waits of a few µs: the default 50 µs timer slack would blur the think times.
        // SAFETY: prctl with an integer argument, on this thread only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        let conn = self.conn;
        let mut sched = Scheduler::new(conn.start_ns, conn.in_flight_max, &conn.calls);
        self.shared.barrier.wait();
        self.epoch = *self.shared.epoch.get_or_init(Instant::now);
        let r = self
            .drive(&mut sched)
            .and_then(|()| self.close_all(&mut sched));
        if r.is_err() {
            self.shared.abort.store(true, Ordering::Relaxed);
        }
        r.map(|()| {
            self.out.finish(&self.stats);
            self.out
        })
    }

    fn drive(&mut self, sched: &mut Scheduler<'_, Call>) -> Result<(), SmbError> {
        let timeout = self.shared.timeout.as_nanos() as u64;
        let mut last_progress = self.now();
        loop {
            let now = self.now();
            let mut sent = false;
            while let Next::Issue(i) = sched.next(now) {
                let op = self.conn.calls[i].op;
                if self.credits < u32::from(op.charge()) {
                    if sched.outstanding() == 0 {
                        return Err(bad("the server granted no credits for the next request"));
                    }
                    break;
                }
                self.send(i, op)?;
                sched.sent(i, now);
                sent = true;
                self.out.first_sent_ns = self.out.first_sent_ns.min(now);
                self.out.in_flight_max = self.out.in_flight_max.max(sched.outstanding());
            }
            let got = self.recv(sched)?;
            if sched.finished() {
                return Ok(());
            }
            let now = self.now();
            if sent || got || sched.outstanding() == 0 {
                last_progress = now;
            } else if now - last_progress >= timeout {
                return Err(SmbError::Lost {
                    what: "replay",
                    source: smb2::Error::Timeout,
                });
            }
            if nsperf_core::signal::interrupted() {
                return Err(SmbError::Interrupted);
            }
            if self.shared.abort.load(Ordering::Relaxed) {
                return Err(aborted());
            }
            if sent || got {
                continue;
            }
            let wait = match sched.next(now) {
                Next::Issue(_) if self.by_id.is_empty() => 0,
                Next::At(t) => (t - now).min(IDLE_NS),
                Next::Issue(_) | Next::Reply | Next::Done => IDLE_NS,
            };
            self.wait(libc::POLLIN, wait)?;
        }
    }

    /// Closes every handle of the connection (set-up's and replayed CREATEs' left open).
    fn close_all(&mut self, sched: &mut Scheduler<'_, Call>) -> Result<(), SmbError> {
        let mut fids = std::mem::take(&mut self.link.h.files);
        for o in &mut self.opened {
            fids.append(o);
        }
        let deadline = Instant::now() + self.shared.timeout;
        for fid in fids {
            while self.credits == 0 {
                self.wait_reply(sched, deadline)?;
            }
            let r = self.request(wire::CLOSE, 1);
            let mut head = [0u8; wire::HANDLE_REQUEST];
            wire::put_handle_request(&mut head, fid);
            self.tx.clear();
            self.tx.extend_from_slice(&head);
            self.send_tx(&r, &[])?;
            self.by_id.insert(r.message_id, TEARDOWN);
        }
        while !self.by_id.is_empty() {
            self.wait_reply(sched, deadline)?;
        }
        Ok(())
    }

    fn wait_reply(
        &mut self,
        sched: &mut Scheduler<'_, Call>,
        deadline: Instant,
    ) -> Result<(), SmbError> {
        if Instant::now() >= deadline {
            return Err(SmbError::Lost {
                what: "CLOSE",
                source: smb2::Error::Timeout,
            });
        }
        if !self.recv(sched)? {
            self.wait(libc::POLLIN, 10_000_000)?;
        }
        Ok(())
    }

    /// The header fields of the next request, `command` charged `charge` credits; takes
    /// its message ids and credits. Asks for enough to keep the captured requests in
    /// flight, and to replace what it uses.
    fn request(&mut self, command: u16, charge: u16) -> Request {
        let target = (self.conn.in_flight_max.max(1) + 1) * u32::from(charge);
        let wanted = if self.credits + self.charged < target {
            u32::from(charge) * 2
        } else {
            u32::from(charge)
        };
        let s = &mut self.link.s;
        let r = Request {
            command,
            charge,
            credits_wanted: wanted.min(u32::from(u16::MAX)) as u16,
            message_id: s.next_message_id,
            tree_id: s.tree_id,
            session_id: s.session_id,
            signed: s.signer.active(),
        };
        s.next_message_id += u64::from(charge);
        self.credits -= u32::from(charge);
        self.charged += u32::from(charge);
        r
    }

    /// Sends request `i` (its `op`): framed into `tx`, WRITE data from the pattern.
    fn send(&mut self, i: usize, op: CallOp) -> Result<(), SmbError> {
        // A CLOSE closes the handle its file's replayed CREATE opened; none: an ECHO.
        let close = match op {
            CallOp::Close { file } => self.opened.get_mut(file as usize).and_then(Vec::pop),
            _ => None,
        };
        let op = match (op, close) {
            (CallOp::Close { .. }, None) => {
                let p = usize::from(self.conn.calls[i].captured).min(OPS - 1);
                if let Some(s) = &mut self.stats[p] {
                    s.set_stand_in();
                }
                CallOp::Echo
            }
            _ => op,
        };
        let r = self.request(op.command(), op.charge());
        let h = &self.link.h;
        let fid = |f: u32| h.files.get(f as usize).copied().unwrap_or_default();
        self.tx.clear();
        let mut data: &[u8] = &[];
        match op {
            CallOp::Read {
                file,
                offset,
                count,
            } => {
                let mut b = [0u8; wire::READ_REQUEST];
                wire::put_read(&mut b, fid(file), offset, count);
                self.tx.extend_from_slice(&b);
            }
            CallOp::Write {
                file,
                offset,
                count,
            } => {
                data = &self.shared.pattern[..(count as usize).min(self.shared.pattern.len())];
                let mut b = [0u8; wire::WRITE_REQUEST];
                wire::put_write(&mut b, fid(file), offset, data.len() as u32, false);
                self.tx.extend_from_slice(&b);
            }
            CallOp::Flush { file } => {
                let mut b = [0u8; wire::HANDLE_REQUEST];
                wire::put_handle_request(&mut b, fid(file));
                self.tx.extend_from_slice(&b);
            }
            CallOp::Close { .. } => {
                let mut b = [0u8; wire::HANDLE_REQUEST];
                wire::put_handle_request(&mut b, close.unwrap_or_default());
                self.tx.extend_from_slice(&b);
            }
            CallOp::QueryInfo { file } => {
                let mut b = [0u8; wire::QUERY_INFO_REQUEST];
                wire::put_query_info(&mut b, fid(file));
                self.tx.extend_from_slice(&b);
            }
            CallOp::Create { file } => {
                let name = match file.and_then(|f| h.names.get(f as usize)) {
                    Some(n) => n.as_slice(),
                    None => self.shared.absent,
                };
                let mut b = [0u8; wire::CREATE_REQUEST];
                wire::put_create(&mut b, name.len() as u16);
                self.tx.extend_from_slice(&b);
                self.tx.extend_from_slice(name);
            }
            CallOp::Echo => {
                let mut b = [0u8; wire::ECHO_REQUEST];
                wire::put_echo(&mut b);
                self.tx.extend_from_slice(&b);
            }
        }
        self.send_tx(&r, data)?;
        self.by_id.insert(r.message_id, i);
        Ok(())
    }

    /// Sends the request framed in `tx` (header filled and signed here) followed by `data`.
    fn send_tx(&mut self, r: &Request, data: &[u8]) -> Result<(), SmbError> {
        let mut h = [0u8; HEADER];
        wire::put_header(&mut h, r);
        self.tx[..HEADER].copy_from_slice(&h);
        let signer = &self.link.s.signer;
        if signer.active() {
            let sig = signer.signature(&[&self.tx, data], r.message_id, false, false);
            self.tx[SIGNATURE_AT..SIGNATURE_AT + 16].copy_from_slice(&sig);
        }
        let len = ((self.tx.len() + data.len()) as u32).to_be_bytes();
        let parts: [&[u8]; 3] = [&len, &self.tx, data];
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut sent = 0usize;
        while sent < total {
            match crate::direct::send_some(self.link.fd, &parts, sent) {
                Ok(n) => sent += n,
                Err(e) => match e.kind() {
                    std::io::ErrorKind::WouldBlock => self.wait(libc::POLLOUT, IDLE_NS)?,
                    std::io::ErrorKind::Interrupted => {}
                    _ => return Err(lost(e)),
                },
            }
        }
        Ok(())
    }

    /// Waits up to `ns` for `events` on the socket.
    fn wait(&self, events: i16, ns: u64) -> Result<(), SmbError> {
        let mut p = libc::pollfd {
            fd: self.link.fd,
            events,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask change.
        let n = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(lost(e));
            }
        }
        Ok(())
    }

    /// Reads what the socket holds and settles every whole reply in it; true when a reply
    /// (or part of one) came.
    fn recv(&mut self, sched: &mut Scheduler<'_, Call>) -> Result<bool, SmbError> {
        let mut got = false;
        loop {
            while self.rend - self.rpos >= 4 {
                let at = self.rpos;
                let p = [
                    self.rx[at],
                    self.rx[at + 1],
                    self.rx[at + 2],
                    self.rx[at + 3],
                ];
                let n = wire::frame_length(p).map_err(bad)?;
                if 4 + n > self.rx.len() {
                    return Err(bad("reply longer than the replay's receive buffer"));
                }
                if self.rend - at < 4 + n {
                    break;
                }
                self.rpos = at + 4 + n;
                let now = self.now();
                self.settle(at + 4, at + 4 + n, sched, now)?;
            }
            if self.rpos == self.rend {
                (self.rpos, self.rend) = (0, 0);
            } else if self.rend == self.rx.len() {
                self.rx.copy_within(self.rpos..self.rend, 0);
                (self.rpos, self.rend) = (0, self.rend - self.rpos);
            }
            let free = &mut self.rx[self.rend..];
            // SAFETY: recv into the valid, writable `free`.
            let r = unsafe {
                libc::recv(
                    self.link.fd,
                    free.as_mut_ptr().cast(),
                    free.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                self.rend += r as usize;
                got = true;
                continue;
            }
            if r == 0 {
                return Err(SmbError::Lost {
                    what: "replay",
                    source: smb2::Error::Disconnected,
                });
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::WouldBlock => return Ok(got),
                std::io::ErrorKind::Interrupted => {}
                _ => return Err(lost(e)),
            }
        }
    }

    /// Settles the reply in `rx[from..to]` (header and body), which arrived at `now`.
    fn settle(
        &mut self,
        from: usize,
        to: usize,
        sched: &mut Scheduler<'_, Call>,
        now: u64,
    ) -> Result<(), SmbError> {
        let mut h = [0u8; HEADER];
        h.copy_from_slice(&self.rx[from..from + HEADER]);
        let reply = wire::parse_reply(&h).map_err(bad)?;
        self.credits += u32::from(reply.credits);
        if reply.interim {
            // Interim replies are not signed (MS-SMB2 3.3.4.1.1).
            return Ok(());
        }
        let Some(i) = self.by_id.remove(&reply.message_id) else {
            return Err(bad("reply to no request in flight"));
        };
        let body = &self.rx[from + HEADER..to];
        h[SIGNATURE_AT..SIGNATURE_AT + 16].fill(0);
        let signer = &self.link.s.signer;
        if signer.active() && !signer.verify(&[&h, body], reply.message_id, &reply.signature) {
            return Err(bad("a reply's signature does not verify"));
        }
        let charge = match self.conn.calls.get(i) {
            Some(c) if reply.command == c.op.command() => c.op.charge(),
            _ => 1,
        };
        self.charged = self.charged.saturating_sub(u32::from(charge));
        let Some(call) = self.conn.calls.get(i).copied() else {
            return Ok(()); // a CLOSE after the replay
        };
        let ok = reply.status == wire::STATUS_SUCCESS;
        let (mut read, mut written) = (0, 0);
        match (call.op, reply.command) {
            (CallOp::Read { count, .. }, wire::READ) if ok => {
                let fixed: &[u8; wire::READ_REPLY_FIXED] = body
                    .get(..wire::READ_REPLY_FIXED)
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| bad("READ reply shorter than its fixed part"))?;
                read = wire::read_reply_layout(fixed, body.len(), count as usize)
                    .map_err(bad)?
                    .1 as u64;
            }
            (CallOp::Write { .. }, wire::WRITE) if ok => {
                written = wire::write_reply_count(body).map_err(bad)? as u64;
            }
            (CallOp::Create { file }, wire::CREATE) if ok => {
                let fid = wire::create_reply_fid(body).map_err(bad)?;
                match file.and_then(|f| self.opened.get_mut(f as usize)) {
                    Some(o) => o.push(fid),
                    None => self.link.h.files.push(fid),
                }
            }
            _ => {}
        }
        if !sched.arrived(i, now) {
            return Ok(());
        }
        let sent = sched.sent_at(i).unwrap_or(now);
        let p = usize::from(call.captured).min(OPS - 1);
        if let Some(s) = &mut self.stats[p] {
            s.record(
                now.saturating_sub(sent),
                (!ok).then_some(Status(reply.status)),
            );
        }
        self.out.read_bytes += read;
        self.out.written_bytes += written;
        self.out.last_received_ns = self.out.last_received_ns.max(now);
        Ok(())
    }
}
