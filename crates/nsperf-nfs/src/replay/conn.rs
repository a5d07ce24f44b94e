//! One replayed connection: the calls its [`Scheduler`] says are due, encoded into a reused
//! buffer and sent in batches with `writev` (WRITE data straight from the shared pattern),
//! the replies matched by xid and skipped in a reused receive buffer. Non-blocking; one
//! `ppoll` waits for a reply, for room to send, or until the next call is due.

use std::io::{self, Read, Write as _};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use super::result::{Done, Failed, bad, xe};
use super::v4::{self, V4Conn};
use super::{Call, CallOp, ConnScript, Handles, OPS};
use crate::error::NfsError;
use crate::proto::{self, NfsStat, SetAttr};
use crate::rpc::{self, AuthSys};
use crate::rpc_conn::{initial_xid, lost};
use crate::send_queue::SendQueue;
use crate::xdr::{XdrReader, pad4, put_u32, put_u64};
use nsperf_core::replay::{ConnResult, Next, OpStats, Scheduler};

/// Longest reply head parsed (RPC header, status, attributes, counts).
const HEAD_MAX: usize = 512;
const RBUF: usize = 256 << 10;
/// Longest wait between two looks at the socket, ns.
const IDLE_NS: u64 = 200_000_000;
/// Count sent in READDIR and READDIRPLUS (maxcount).
const DIR_COUNT: u32 = 64 << 10;

/// What every connection shares.
pub(super) struct Shared<'a> {
    pub handles: &'a Handles,
    pub pattern: &'a [u8],
    pub barrier: &'a Barrier,
    pub epoch: &'a OnceLock<Instant>,
    pub abort: &'a AtomicBool,
    pub timeout: Duration,
}

/// The error of a connection stopped because another failed.
fn aborted() -> NfsError {
    NfsError::Lost {
        what: "replay",
        why: "another connection of the replay failed".into(),
    }
}

/// True for [`aborted`]'s error.
pub(super) fn is_abort(e: Option<&NfsError>) -> bool {
    matches!(e, Some(NfsError::Lost { what: "replay", .. }))
}

#[derive(Debug, Clone, Copy)]
enum Recv {
    Mark,
    Head { len: usize },
    Skip { left: usize, then: Option<Done> },
}

/// One connection's replay.
pub(super) struct Driver<'a> {
    id: usize,
    conn: &'a ConnScript,
    shared: &'a Shared<'a>,
    sock: TcpStream,
    cred: AuthSys,
    xid0: u32,
    tx: SendQueue,
    rbuf: Box<[u8]>,
    rpos: usize,
    rend: usize,
    state: Recv,
    name: Vec<u8>,
    lookups: usize,
    creates: usize,
    removes: usize,
    epoch: Instant,
    out: ConnResult,
    /// Per captured operation (below [`OPS`]).
    stats: Vec<Option<OpStats<Failed>>>,
    /// NFSv4: the connection's minor version and session; None: NFSv3.
    v4: Option<V4Conn>,
}

impl<'a> Driver<'a> {
    pub(super) fn new(
        id: usize,
        conn: &'a ConnScript,
        sock: TcpStream,
        shared: &'a Shared<'a>,
        v4: Option<V4Conn>,
    ) -> Driver<'a> {
        let mut stats: Vec<Option<OpStats<Failed>>> = vec![None; OPS];
        for c in &conn.calls {
            let p = (c.captured as usize).min(OPS - 1);
            stats[p].get_or_insert_with(|| OpStats::new(matches!(c.op, CallOp::AsGetattr { .. })));
        }
        Driver {
            id,
            conn,
            shared,
            sock,
            cred: AuthSys::current(),
            xid0: initial_xid().wrapping_add((id as u32) << 22),
            tx: SendQueue::with_capacity(1024, 64 << 10),
            rbuf: vec![0u8; RBUF].into_boxed_slice(),
            rpos: 0,
            rend: 0,
            state: Recv::Mark,
            name: Vec::with_capacity(64),
            lookups: 0,
            creates: 0,
            removes: 0,
            epoch: Instant::now(),
            out: ConnResult::new(id),
            stats,
            v4,
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Runs the connection's calls from the barrier to the last reply.
    pub(super) fn run(mut self) -> Result<ConnResult, NfsError> {
        let r = self.drive();
        if r.is_err() {
            self.shared.abort.store(true, Ordering::Relaxed);
        }
        if let (Ok(()), Some(v)) = (&r, &self.v4) {
            // after the last reply: nothing of the replay is left on the socket
            let xid = self.xid0.wrapping_add(self.conn.calls.len() as u32);
            v.end_session(&mut self.sock, xid, &self.cred);
        }
        r.map(|()| {
            self.out.finish(&self.stats);
            self.out
        })
    }

    fn drive(&mut self) -> Result<(), NfsError> {
        self.sock
            .set_nonblocking(true)
            .map_err(|e| lost("replay", e))?;
        // Waits of a few µs: the default 50 µs timer slack would blur the think times.
        // SAFETY: prctl with an integer argument, on this thread only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        let mut sched = Scheduler::new(
            self.conn.start_ns,
            self.conn.in_flight_max,
            &self.conn.calls,
        );
        if let Some(slots) = self.v4.as_ref().and_then(V4Conn::slots) {
            sched = sched.capped(slots);
            self.out.session_slots = Some(slots);
        }
        self.shared.barrier.wait();
        self.epoch = *self.shared.epoch.get_or_init(Instant::now);
        let mut last_progress = self.now();
        let timeout = self.shared.timeout.as_nanos() as u64;
        loop {
            let now = self.now();
            while let Next::Issue(i) = sched.next(now) {
                self.encode(i);
                sched.sent(i, now);
                self.out.first_sent_ns = self.out.first_sent_ns.min(now);
                self.out.in_flight_max = self.out.in_flight_max.max(sched.outstanding());
            }
            let sent = self.send()?;
            let got = self.recv(&mut sched)?;
            if sched.finished() && !self.tx.pending() {
                return Ok(());
            }
            let now = self.now();
            if sent || got || sched.outstanding() == 0 {
                last_progress = now;
            } else if now - last_progress >= timeout {
                return Err(NfsError::Lost {
                    what: "replay",
                    why: format!("no reply for {} s", self.shared.timeout.as_secs()),
                });
            }
            if nsperf_core::signal::interrupted() {
                return Err(NfsError::Interrupted);
            }
            if self.shared.abort.load(Ordering::Relaxed) {
                return Err(aborted());
            }
            let wait = match sched.next(now) {
                Next::Issue(_) => 0,
                Next::At(t) => (t - now).min(IDLE_NS),
                Next::Reply | Next::Done => IDLE_NS,
            };
            if sent || got {
                continue;
            }
            self.wait(wait)?;
        }
    }

    /// Waits up to `ns` for a reply or for room to send.
    fn wait(&self, ns: u64) -> Result<(), NfsError> {
        let mut events = libc::POLLIN;
        if self.tx.pending() {
            events |= libc::POLLOUT;
        }
        let mut p = libc::pollfd {
            fd: self.sock.as_raw_fd(),
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
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(lost("poll", e));
            }
        }
        Ok(())
    }

    /// Appends the call of request `i` to the send queue.
    fn encode(&mut self, i: usize) {
        let op = self.conn.calls[i].op;
        let xid = self.xid0.wrapping_add(i as u32);
        let start = self.tx.hdr().len();
        let h = self.shared.handles;
        match op {
            CallOp::Lookup => {
                let n = h.files.len().max(1);
                put_name(&mut self.name, format_args!("f{}", self.lookups % n));
                self.lookups += 1;
            }
            CallOp::Create => {
                put_name(
                    &mut self.name,
                    format_args!("c{}-{}", self.id, self.creates),
                );
                self.creates += 1;
            }
            CallOp::Remove => {
                put_name(
                    &mut self.name,
                    format_args!("r{}-{}", self.id, self.removes),
                );
                self.removes += 1;
            }
            _ => {}
        }
        if let Some(v) = &mut self.v4 {
            let (rec, data) = v.encode(
                self.tx.hdr(),
                i,
                xid,
                op,
                &self.cred,
                h,
                &self.name,
                self.shared.pattern.len(),
            );
            self.finish_call(rec, start, data);
            return;
        }
        let b = self.tx.hdr();
        let rec = rpc::begin_call(
            b,
            xid,
            proto::NFS_PROG,
            proto::NFS_VERS,
            op.proc_(),
            &self.cred,
        );
        let mut data = 0;
        match op {
            CallOp::Null => {}
            CallOp::Getattr(t)
            | CallOp::AsGetattr { target: t, .. }
            | CallOp::Fsstat(t)
            | CallOp::Fsinfo(t)
            | CallOp::Pathconf(t) => h.of(t).encode(b),
            CallOp::Access(t) => {
                h.of(t).encode(b);
                put_u32(b, 0x3f); // READ LOOKUP MODIFY EXTEND DELETE EXECUTE
            }
            CallOp::Lookup | CallOp::Remove => proto::encode_dirop(b, &h.dir, &self.name),
            CallOp::Create => {
                proto::encode_dirop(b, &h.dir, &self.name);
                put_u32(b, 1); // GUARDED
                SetAttr {
                    mode: Some(0o600),
                    size: None,
                }
                .encode(b);
            }
            CallOp::Read {
                file,
                offset,
                count,
            } => {
                h.of(super::Target::File(file)).encode(b);
                put_u64(b, offset);
                put_u32(b, count);
            }
            CallOp::Write {
                file,
                offset,
                count,
                stable,
            } => {
                data = (count as usize).min(self.shared.pattern.len());
                h.of(super::Target::File(file)).encode(b);
                put_u64(b, offset);
                put_u32(b, data as u32);
                put_u32(b, stable.to_wire());
                put_u32(b, data as u32);
            }
            CallOp::Commit {
                file,
                offset,
                count,
            } => {
                h.of(super::Target::File(file)).encode(b);
                put_u64(b, offset);
                put_u32(b, count);
            }
            CallOp::Readdir => {
                h.dir.encode(b);
                put_u64(b, 0);
                put_u64(b, 0);
                put_u32(b, DIR_COUNT);
            }
            CallOp::Readdirplus => {
                h.dir.encode(b);
                put_u64(b, 0);
                put_u64(b, 0);
                put_u32(b, DIR_COUNT / 8); // dircount
                put_u32(b, DIR_COUNT); // maxcount
            }
        }
        self.finish_call(rec, start, data);
    }

    /// Ends the call record begun at `rec` (queued from `start`) with `data` bytes of the
    /// pattern after it.
    fn finish_call(&mut self, rec: usize, start: usize, data: usize) {
        rpc::finish_record(self.tx.hdr(), rec, pad4(data));
        self.tx.mark(start);
        // SAFETY: the shared pattern outlives the connection (it is borrowed for 'a).
        unsafe { self.tx.push_payload(self.shared.pattern.as_ptr(), data) };
    }

    /// Sends queued bytes until done or the socket is full; true when some were sent.
    fn send(&mut self) -> Result<bool, NfsError> {
        self.tx
            .send(self.sock.as_raw_fd())
            .map_err(|e| lost("replay", e))
    }

    /// Receives and parses what the socket holds; true when bytes arrived.
    fn recv(&mut self, sched: &mut Scheduler<'_, Call>) -> Result<bool, NfsError> {
        let mut any = false;
        loop {
            let now = self.now();
            while self.step(sched, now)? {}
            if self.rpos == self.rend {
                self.rpos = 0;
                self.rend = 0;
            } else if self.rpos > RBUF / 2 || self.rend == RBUF {
                self.rbuf.copy_within(self.rpos..self.rend, 0);
                self.rend -= self.rpos;
                self.rpos = 0;
            }
            match self.sock.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => return Err(lost("replay", io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => {
                    any = true;
                    self.rend += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(any),
                Err(e) => return Err(lost("replay", e)),
            }
        }
    }

    /// Advances the receive state machine over buffered bytes (arrived by `now`); false
    /// when it needs more.
    fn step(&mut self, sched: &mut Scheduler<'_, Call>, now: u64) -> Result<bool, NfsError> {
        let have = self.rend - self.rpos;
        match self.state {
            Recv::Mark => {
                if have < 4 {
                    return Ok(false);
                }
                let m = &self.rbuf[self.rpos..self.rpos + 4];
                let (last, len) = rpc::parse_mark([m[0], m[1], m[2], m[3]]);
                if !last {
                    return Err(bad("fragmented reply"));
                }
                if len > rpc::MAX_FRAGMENT {
                    return Err(bad("reply longer than 4 MiB"));
                }
                self.rpos += 4;
                self.state = Recv::Head { len };
                Ok(true)
            }
            Recv::Head { len } => {
                if have < len.min(HEAD_MAX) {
                    return Ok(false);
                }
                let rec = &self.rbuf[self.rpos..self.rpos + len.min(HEAD_MAX)];
                let sent = |i| sched.sent_at(i).is_some();
                let done = match &self.v4 {
                    Some(v) => {
                        v4::reply_head(rec, self.xid0, &self.conn.calls, sent, v.sessions())?
                    }
                    None => reply_head(rec, self.xid0, &self.conn.calls, sent)?,
                };
                self.state = Recv::Skip {
                    left: len,
                    then: Some(done),
                };
                Ok(true)
            }
            Recv::Skip { left, then } => {
                if left == 0 {
                    if let Some(d) = then {
                        self.finish(d, sched, now);
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

    fn finish(&mut self, d: Done, sched: &mut Scheduler<'_, Call>, now: u64) {
        if !sched.arrived(d.index, now) {
            return;
        }
        if let Some(v) = &mut self.v4 {
            v.done(d.index, d.seq_ok);
        }
        let sent = sched.sent_at(d.index).unwrap_or(now);
        let p = (self.conn.calls[d.index].captured as usize).min(OPS - 1);
        if let Some(s) = &mut self.stats[p] {
            s.record(now.saturating_sub(sent), d.failed);
        }
        self.out.read_bytes += d.read;
        self.out.written_bytes += d.written;
        self.out.last_received_ns = self.out.last_received_ns.max(now);
    }
}

/// Parses the head of a reply record (`rec`: its first bytes, up to [`HEAD_MAX`]): which
/// request it answers (its xid less `xid0` indexes `calls`; `sent` says whether that
/// request was sent) and how it ended. Outside bytes: an error, never a panic (fuzzed in
/// `fuzz/fuzz_targets/nfs_reply.rs`).
pub(crate) fn reply_head(
    rec: &[u8],
    xid0: u32,
    calls: &[Call],
    sent: impl Fn(usize) -> bool,
) -> Result<Done, NfsError> {
    let xid = XdrReader::new(rec).u32().map_err(xe)?;
    let index = xid.wrapping_sub(xid0) as usize;
    let call = match calls.get(index) {
        Some(c) if sent(index) => c,
        _ => return Err(bad("reply to no call sent (unknown xid)")),
    };
    let mut r = XdrReader::new(rec);
    let mut done = Done::of(index);
    if let Err(e) = rpc::parse_reply(&mut r) {
        done.failed = Some(Failed::of_rpc(&e).ok_or(NfsError::Rpc {
            what: "replay",
            source: e,
        })?);
        return Ok(done);
    }
    if call.op == CallOp::Null {
        return Ok(done); // no result
    }
    let st = NfsStat(r.clone().u32().map_err(xe)?);
    if st != NfsStat::OK {
        done.failed = Some(Failed::Nfs(st.0));
        return Ok(done);
    }
    match call.op {
        CallOp::Read { .. } => {
            if let Ok(h) = proto::decode_read_head(&mut r).map_err(xe)? {
                done.read = u64::from(h.count);
            }
        }
        CallOp::Write { .. } => {
            if let Ok(w) = proto::decode_write(&mut r).map_err(xe)? {
                done.written = u64::from(w.count);
            }
        }
        _ => {}
    }
    Ok(done)
}

/// Writes a name into the reused name buffer.
fn put_name(name: &mut Vec<u8>, args: std::fmt::Arguments<'_>) {
    name.clear();
    // Writing into a Vec cannot fail.
    let _ = name.write_fmt(args);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::{Target, Trigger};
    use crate::rpc::AcceptStat;

    fn calls() -> Vec<Call> {
        let call = |op| Call::new(op, Trigger::Start);
        vec![
            call(CallOp::Read {
                file: 0,
                offset: 0,
                count: 8,
            }),
            call(CallOp::Getattr(Target::Dir)),
        ]
    }

    /// A READ's reply gives its count; an error its status; a refused call its RPC name; an
    /// xid of no call sent, a cut reply: errors, never a panic.
    #[test]
    fn reply_heads() {
        let xid0 = 1000;
        let mut read = Vec::new();
        rpc::reply_header(&mut read, xid0, AcceptStat::Success);
        put_u32(&mut read, 0);
        proto::encode_post_op_attr(&mut read, None);
        put_u32(&mut read, 8);
        put_u32(&mut read, 1);
        put_u32(&mut read, 8);
        let d = reply_head(&read, xid0, &calls(), |_| true).unwrap();
        assert_eq!((d.index, d.read, d.failed), (0, 8, None));
        let mut noent = Vec::new();
        rpc::reply_header(&mut noent, xid0 + 1, AcceptStat::Success);
        put_u32(&mut noent, NfsStat::NOENT.0);
        let d = reply_head(&noent, xid0, &calls(), |_| true).unwrap();
        assert_eq!((d.index, d.failed), (1, Some(Failed::Nfs(2))));
        let mut refused = Vec::new();
        rpc::reply_header(&mut refused, xid0 + 1, AcceptStat::ProcUnavail);
        let d = reply_head(&refused, xid0, &calls(), |_| true).unwrap();
        assert_eq!(d.failed, Some(Failed::Rpc("PROC_UNAVAIL")));
        // not sent, or beyond the calls
        assert!(reply_head(&noent, xid0, &calls(), |i| i == 0).is_err());
        assert!(reply_head(&noent, xid0 + 5, &calls(), |_| true).is_err());
        for cut in 0..read.len() {
            let _ = reply_head(&read[..cut], xid0, &calls(), |_| true);
        }
        assert!(reply_head(&read[..30], xid0, &calls(), |_| true).is_err());
    }
}
