//! SMB2/3 over TCP (port 445, "direct hosting"): each message behind a 4-byte NetBIOS
//! session header (type 0, 24-bit length), headers and messages split anywhere across
//! segments. The framer follows each message's compound chain and keeps the first [`SLOT`]
//! bytes of each command (its header, the head of its body), and counts the rest; the
//! session matches
//! requests to responses by message id, both directions, and keeps the figures per command
//! in the same [`OpTable`] as NFS, and where each request's time went in the same [`Pace`]
//! (each message a record, READ and WRITE the data operations; an interim response ends
//! nothing), for the verdict.
//!
//! What can be read: an SMB2 header is never encrypted, only signed (the signature covers
//! the message; it is not checked here), so signed traffic is read in full. An SMB3
//! transform header (`0xFD 'S' 'M' 'B'`) hides everything behind it: such messages are
//! counted with their sizes and times, never their commands. Compressed messages (`0xFC`)
//! and SMB1 (`0xFF`, a client's first NEGOTIATE) are counted, not read.

use super::inflight::InFlight;
use super::names::SMB2_PROG;
use super::ops::{OpKey, OpTable};
use super::pace::{CallMark, Pace};
use super::requests::{CallInfo, Op, Outcome, Protocol, Request, RequestLog, file_hash};
use super::stream::Chunk;

/// Bytes kept of each command of a message: its header and the head of its body (as far as
/// a CREATE response's FileId, at 64 bytes into its body).
pub const SLOT: usize = 160;
/// Requests waiting for their response, per connection, at most; an older one is then
/// counted as unanswered.
pub const MAX_PENDING: usize = 4096;
/// SMB2 header length.
const HDR: usize = 64;
/// Commands of one compound chain read at most.
pub const MAX_CHAIN: usize = 32;

/// NT status of an interim response: the final one follows.
pub const STATUS_PENDING: u32 = 0x0000_0103;
/// SMB2 header flags.
const FLAG_RESPONSE: u32 = 0x1;
const FLAG_SIGNED: u32 = 0x8;
/// Commands tshark's `-z smb2,srt` does not time (no response, or an unsolicited one).
const CANCEL: u16 = 12;
const OPLOCK_BREAK: u16 = 18;
const NEGOTIATE: u16 = 0;
const CREATE: u16 = 5;
const READ: u16 = 8;
const WRITE: u16 = 9;

/// The kind of message a protocol id names.
fn kind(b: &[u8]) -> Option<u8> {
    match b {
        [k @ 0xFC..=0xFF, b'S', b'M', b'B', ..] => Some(*k),
        _ => None,
    }
}

/// True when `b` starts with a NetBIOS session message holding an SMB message.
pub fn looks_like_message(b: &[u8]) -> bool {
    b.len() >= 8 && b[0] == 0 && kind(&b[4..]).is_some()
}

/// One complete message: the first bytes of each command of its chain, its length, when its
/// first and last bytes passed.
#[derive(Debug)]
pub struct Message<'a> {
    /// The first [`SLOT`] bytes of each command (fewer when the command is shorter, or
    /// when the capture missed some); one for a message that is no SMB2 chain.
    pub commands: &'a [[u8; SLOT]],
    /// Bytes kept of each command.
    pub kept: &'a [u16],
    /// Where each command starts in the message.
    pub starts: &'a [u64],
    /// Commands of the chain not kept (beyond [`MAX_CHAIN`], or after a gap).
    pub cut: bool,
    /// Length of the message, NetBIOS header excluded.
    pub len: u64,
    /// Capture time of its first byte, ns.
    pub first_ns: i64,
    /// Capture time of its last byte, ns.
    pub last_ns: i64,
}

impl Message<'_> {
    /// The kept bytes of each command and its length.
    pub fn each(&self) -> impl Iterator<Item = (&[u8], u64)> {
        (0..self.commands.len()).map(|i| {
            let end = self.starts.get(i + 1).copied().unwrap_or(self.len);
            (
                &self.commands[i][..usize::from(self.kept[i])],
                end.saturating_sub(self.starts[i]),
            )
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Hunting,
    /// Reading the 4-byte NetBIOS header: bytes of it so far.
    Header(usize),
    /// Inside a message: bytes still to come.
    Body(u64),
}

/// The NetBIOS session framer of one direction. It follows each message's compound chain
/// as the bytes pass (the next command's offset is in the current header) and keeps the
/// first [`SLOT`] bytes of each command: a chain whose READ response carries 1 MiB before
/// its CLOSE costs no more than a lone command.
#[derive(Debug)]
pub struct Framer {
    state: State,
    hdr: [u8; 4],
    slots: Box<[[u8; SLOT]; MAX_CHAIN]>,
    kept: [u16; MAX_CHAIN],
    starts: [u64; MAX_CHAIN],
    /// Commands started in this message.
    n: usize,
    /// Where the next command starts, once the current header says.
    next_start: Option<u64>,
    /// The current command's header was read for its next offset.
    chained: bool,
    /// Bytes after a gap are not where the current slot expects them.
    frozen: bool,
    cut: bool,
    /// Bytes of the message so far.
    pos: u64,
    len: u64,
    first_ns: i64,
    /// Bytes dropped while hunting for a message boundary.
    pub skipped_bytes: u64,
    /// Times the framer lost its place at a gap and hunted.
    pub resyncs: u64,
}

impl Default for Framer {
    fn default() -> Self {
        Framer {
            state: State::Header(0),
            hdr: [0; 4],
            slots: Box::new([[0; SLOT]; MAX_CHAIN]),
            kept: [0; MAX_CHAIN],
            starts: [0; MAX_CHAIN],
            n: 0,
            next_start: None,
            chained: false,
            frozen: false,
            cut: false,
            pos: 0,
            len: 0,
            first_ns: 0,
            skipped_bytes: 0,
            resyncs: 0,
        }
    }
}

impl Framer {
    /// Feeds one chunk of the stream, from a segment captured at `t`; `done` gets each
    /// message whose last byte is in it.
    pub fn feed(&mut self, chunk: Chunk<'_>, t: i64, done: &mut dyn FnMut(Message<'_>)) {
        let mut b = match chunk {
            Chunk::Gap(0) => {
                self.state = State::Hunting;
                return;
            }
            Chunk::Gap(n) => {
                match self.state {
                    // Missed bytes inside a message: it goes on; the command they fall in
                    // keeps what it has, a header they hide ends the chain.
                    State::Body(left) if n <= left => {
                        self.gap(n);
                        self.state = State::Body(left - n);
                        if left == n {
                            self.finish(t, done);
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
            if !looks_like_message(b) {
                self.skipped_bytes += b.len() as u64;
                return;
            }
            self.state = State::Header(0);
        }
        while !b.is_empty() {
            match self.state {
                State::Hunting => return,
                State::Header(have) => {
                    if have == 0 {
                        self.first_ns = t;
                    }
                    let n = (4 - have).min(b.len());
                    self.hdr[have..have + n].copy_from_slice(&b[..n]);
                    b = &b[n..];
                    if have + n < 4 {
                        self.state = State::Header(have + n);
                        continue;
                    }
                    let len = u64::from(u32::from_be_bytes(self.hdr) & 0x00ff_ffff);
                    self.start_message(len);
                    match self.hdr[0] {
                        // A session message; an empty one carries nothing.
                        0 if len == 0 => self.state = State::Header(0),
                        // Keep-alive and the session service's other messages: skipped.
                        0 | 0x81..=0x85 if len > 0 => self.state = State::Body(len),
                        0x81..=0x85 => self.state = State::Header(0),
                        _ => {
                            self.resyncs += 1;
                            self.skipped_bytes += b.len() as u64;
                            self.state = State::Hunting;
                            return;
                        }
                    }
                }
                State::Body(left) => {
                    let n = (left as usize).min(b.len());
                    self.body(&b[..n]);
                    b = &b[n..];
                    self.state = State::Body(left - n as u64);
                    if left == n as u64 {
                        self.finish(t, done);
                    }
                }
            }
        }
    }

    fn start_message(&mut self, len: u64) {
        self.len = len;
        self.pos = 0;
        self.n = 1;
        self.kept[0] = 0;
        self.starts[0] = 0;
        self.next_start = None;
        self.chained = false;
        self.frozen = false;
        self.cut = false;
    }

    /// The next bytes of the message: into the current command's slot, and on to the next
    /// command where the chain says.
    fn body(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            if self.next_start.is_some_and(|s| self.pos >= s) {
                self.next_start = None;
                if self.n < MAX_CHAIN {
                    self.starts[self.n] = self.pos;
                    self.kept[self.n] = 0;
                    self.n += 1;
                    self.chained = false;
                    self.frozen = false;
                } else {
                    self.cut = true;
                    self.chained = true;
                    self.frozen = true;
                }
            }
            let kept = usize::from(self.kept[self.n - 1]);
            let mut take = b.len() as u64;
            match self.next_start {
                Some(s) => take = take.min(s - self.pos),
                // Stop right after NextCommand to know where the next command starts.
                None if !self.chained && !self.frozen && kept < 24 => {
                    take = take.min((24 - kept) as u64)
                }
                None => {}
            }
            let take = take as usize;
            if !self.frozen {
                let k = (SLOT - kept).min(take);
                self.slots[self.n - 1][kept..kept + k].copy_from_slice(&b[..k]);
                self.kept[self.n - 1] += k as u16;
            }
            self.pos += take as u64;
            b = &b[take..];
            let kept = usize::from(self.kept[self.n - 1]);
            if !self.chained && !self.frozen && kept >= 24 {
                self.chained = true;
                let slot = &self.slots[self.n - 1];
                let next = u64::from(le32(slot, 20).unwrap_or(0));
                if kind(slot) == Some(0xFE) && next >= HDR as u64 {
                    self.next_start = Some(self.starts[self.n - 1] + next);
                }
            }
        }
    }

    /// `n` bytes of the message not captured.
    fn gap(&mut self, n: u64) {
        let end = self.pos + n;
        match self.next_start {
            // The next header is inside the gap: the chain ends here.
            Some(s) if s < end => {
                self.next_start = None;
                self.cut = true;
            }
            // The gap hides where the next command starts.
            None if !self.chained => {
                self.chained = true;
                self.cut = true;
            }
            _ => {}
        }
        self.frozen = true;
        self.pos = end;
    }

    /// When a message is passing (some of its bytes seen, not all): its first byte's time.
    pub fn open_since(&self) -> Option<i64> {
        match self.state {
            State::Header(n) if n > 0 => Some(self.first_ns),
            State::Body(_) => Some(self.first_ns),
            _ => None,
        }
    }

    fn finish(&mut self, t: i64, done: &mut dyn FnMut(Message<'_>)) {
        self.state = State::Header(0);
        if self.hdr[0] != 0 {
            return;
        }
        done(Message {
            commands: &self.slots[..self.n],
            kept: &self.kept[..self.n],
            starts: &self.starts[..self.n],
            cut: self.cut,
            len: self.len,
            first_ns: self.first_ns,
            last_ns: t,
        });
    }
}

/// A request seen, waiting for its response.
#[derive(Debug, Clone, Copy)]
struct Pending {
    msg_id: u64,
    from: usize,
    cmd: u16,
    /// When its last byte passed the capture point.
    t: i64,
    /// What its response needs for the pace.
    mark: CallMark,
    /// Bytes a WRITE sent (READ's come with the response).
    written: Option<u32>,
    /// What the request's record needs (only when the log is on).
    info: CallInfo,
}

/// Where a message passed the capture point: its first and last byte, and how long its
/// direction had been moving bytes when it started ([`Pace::record`]).
#[derive(Debug, Clone, Copy)]
struct Passed {
    first_ns: i64,
    last_ns: i64,
    moved_before: i64,
}

/// What can and cannot be read of one connection's SMB.
#[derive(Debug, Default, Clone, Copy)]
pub struct Readable {
    /// SMB2 headers read (each command of a compound chain counts).
    pub headers: u64,
    /// Of those, signed.
    pub signed: u64,
    /// SMB3 messages behind a transform header: only their sizes and times are known.
    pub encrypted: u64,
    /// Their bytes (transform header included).
    pub encrypted_bytes: u64,
    /// Compressed messages, not read.
    pub compressed: u64,
    /// SMB1 messages, not read.
    pub smb1: u64,
    /// Request messages holding more than one command.
    pub compound_requests: u64,
    /// Commands of compound chains not read (beyond the bytes kept of the message).
    pub chain_cut: u64,
    /// Interim responses (STATUS_PENDING): the request goes on.
    pub interim: u64,
    /// Credits requested by the client and granted by the server, summed.
    pub credits_requested: u64,
    /// Credits granted.
    pub credits_granted: u64,
    /// The dialect the server chose in its NEGOTIATE response.
    pub dialect: Option<u16>,
}

/// The SMB state of one connection.
#[derive(Debug, Default)]
pub struct SmbSession {
    pending: Vec<Pending>,
    /// Per-command figures.
    pub ops: OpTable,
    /// Responses whose request was not seen.
    pub unmatched_replies: u64,
    /// Requests dropped from the pending table unanswered.
    pub unanswered_calls: u64,
    /// Messages that were no SMB message.
    pub malformed: u64,
    /// Requests per side (to tell the client).
    pub calls_by_side: [u64; 2],
    /// What could be read.
    pub readable: Readable,
    /// Requests in flight over time.
    pub in_flight: InFlight,
    /// Where each request's time went.
    pub pace: Pace,
}

fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |x| u16::from_le_bytes([x[0], x[1]]))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
}

fn le64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |x| {
        u64::from_le_bytes([x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]])
    })
}

impl SmbSession {
    /// One complete message sent by side `from`; a matched request goes to `log`.
    pub fn message(&mut self, from: usize, m: &Message<'_>, log: &mut RequestLog) {
        let moved_before = self.pace.record(from, m.len, m.first_ns, m.last_ns);
        let at = Passed {
            first_ns: m.first_ns,
            last_ns: m.last_ns,
            moved_before,
        };
        let first = m.each().next().map_or(&[][..], |c| c.0);
        match kind(first) {
            Some(0xFE) => self.chain(from, m, at, log),
            Some(0xFD) => {
                self.readable.encrypted += 1;
                self.readable.encrypted_bytes += m.len;
            }
            Some(0xFC) => self.readable.compressed += 1,
            Some(_) => self.readable.smb1 += 1,
            None => self.malformed += 1,
        }
    }

    /// The SMB2 headers of one message: one, or a compound chain.
    fn chain(&mut self, from: usize, m: &Message<'_>, at: Passed, log: &mut RequestLog) {
        if m.cut {
            self.readable.chain_cut += 1;
        }
        for (n, (h, len)) in m.each().enumerate() {
            if h.len() < HDR || kind(h) != Some(0xFE) || le16(h, 4) != HDR as u16 {
                self.malformed += 1;
                return;
            }
            let flags = le32(h, 16).unwrap_or(0);
            if n == 1 && flags & FLAG_RESPONSE == 0 {
                self.readable.compound_requests += 1;
            }
            self.command(from, h, &h[HDR..], len, at, log);
        }
    }

    /// One SMB2 header `h` (its body `body`, `len` bytes in all) of a message that passed
    /// as `at` says.
    fn command(
        &mut self,
        from: usize,
        h: &[u8],
        body: &[u8],
        len: u64,
        at: Passed,
        log: &mut RequestLog,
    ) {
        let r = &mut self.readable;
        let cmd = le16(h, 12);
        let flags = le32(h, 16).unwrap_or(0);
        let msg_id = le64(h, 24);
        r.headers += 1;
        if flags & FLAG_SIGNED != 0 {
            r.signed += 1;
        }
        let key = OpKey {
            prog: SMB2_PROG,
            vers: 2,
            proc_: u32::from(cmd),
        };
        if flags & FLAG_RESPONSE == 0 {
            r.credits_requested += u64::from(le16(h, 14));
            let info = if log.on() {
                request_info(cmd, body, len)
            } else {
                CallInfo::default()
            };
            self.request(from, key, msg_id, (info, len), at, body);
        } else {
            r.credits_granted += u64::from(le16(h, 14));
            let status = le32(h, 8).unwrap_or(0);
            if status == STATUS_PENDING {
                // Interim: the final response ends the request, as tshark times it.
                r.interim += 1;
                return;
            }
            if cmd == NEGOTIATE && status == 0 {
                r.dialect = Some(le16(body, 4));
            }
            self.response(from, h, body, len, at, log);
        }
    }

    fn request(
        &mut self,
        from: usize,
        key: OpKey,
        msg_id: u64,
        (info, len): (CallInfo, u64),
        at: Passed,
        body: &[u8],
    ) {
        let (cmd, t) = (key.proc_ as u16, at.last_ns);
        self.calls_by_side[from] += 1;
        let s = self.ops.get(key);
        s.calls += 1;
        s.call_bytes += len;
        let written = (cmd == WRITE).then(|| le32(body, 4)).flatten();
        if let Some(n) = written {
            s.note_size(n);
        }
        // CANCEL has no response of its own (it names the request it cancels); a message id
        // seen again from the same side is not a second request.
        if cmd == CANCEL
            || self
                .pending
                .iter()
                .any(|p| p.msg_id == msg_id && p.from == from)
        {
            return;
        }
        let data = matches!(cmd, READ | WRITE);
        let mark = self
            .pace
            .call(from, at.first_ns, at.last_ns, at.moved_before, data);
        if self.pending.len() >= MAX_PENDING {
            self.pending.remove(0);
            self.unanswered_calls += 1;
            self.in_flight.step(t, -1);
        }
        self.pending.push(Pending {
            msg_id,
            from,
            cmd,
            t,
            mark,
            written,
            info,
        });
        self.in_flight.step(t, 1);
    }

    /// The final response `h` (its body `body`, `len` bytes) of a message that passed as
    /// `at` says.
    fn response(
        &mut self,
        from: usize,
        h: &[u8],
        body: &[u8],
        len: u64,
        at: Passed,
        log: &mut RequestLog,
    ) {
        let t = at.last_ns;
        let msg_id = le64(h, 24);
        let status = le32(h, 8).unwrap_or(0);
        let Some(i) = self
            .pending
            .iter()
            .position(|p| p.msg_id == msg_id && p.from != from)
        else {
            // An oplock or lease break the server sends on its own (message id all ones) is
            // no response to a request.
            if msg_id != u64::MAX {
                self.unmatched_replies += 1;
            }
            return;
        };
        let p = self.pending.remove(i);
        self.in_flight.step(t, -1);
        // The request's command names the figures (a response carries it too).
        let s = self.ops.get(OpKey {
            prog: SMB2_PROG,
            vers: 2,
            proc_: u32::from(p.cmd),
        });
        s.replies += 1;
        s.reply_bytes += len;
        if p.cmd != OPLOCK_BREAK {
            s.srt.record((t - p.t).max(0) as u64);
        }
        let mut moved_bytes = p.written;
        if status != 0 {
            s.note_error(status);
        } else if p.cmd == READ {
            if let Some(n) = le32(body, 4) {
                s.note_size(n);
                moved_bytes = Some(n);
            }
        }
        let data = matches!(p.cmd, READ | WRITE).then(|| u64::from(moved_bytes.unwrap_or(0)));
        self.pace.reply(
            from,
            &p.mark,
            at.first_ns,
            at.last_ns,
            at.moved_before,
            data,
        );
        if let (true, Some(op)) = (log.on(), p.info.op) {
            let file = match p.cmd {
                // CREATE names its file by the FileId of its response.
                CREATE if status == 0 => body.get(64..80).map_or(0, file_hash),
                _ => p.info.file,
            };
            log.push(Request {
                conn: 0,
                client: p.from as u8,
                op,
                outcome: if status == 0 {
                    Outcome::Ok
                } else {
                    Outcome::Error(status)
                },
                call_first_ns: p.mark.first_ns,
                call_last_ns: p.mark.last_ns,
                reply_first_ns: at.first_ns,
                reply_last_ns: at.last_ns,
                file,
                offset: p.info.offset,
                count: moved_bytes.unwrap_or(p.info.count),
                stable: None,
                call_bytes: p.info.bytes,
                reply_bytes: len,
            });
        }
    }

    /// Requests still waiting at the end.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }
}

/// What an SMB2 request (command `cmd`, its body `body`, `len` bytes) gives its request's
/// record: the command, the FileId it names (READ, WRITE, CLOSE, FLUSH, IOCTL,
/// QUERY_DIRECTORY, QUERY_INFO, SET_INFO; CREATE's comes with its response), READ's and
/// WRITE's offset and length.
fn request_info(cmd: u16, body: &[u8], len: u64) -> CallInfo {
    let file_at = match cmd {
        READ | WRITE | 17 => Some(16),
        6 | 7 | 11 | 14 => Some(8),
        16 => Some(24),
        _ => None,
    };
    let rw = matches!(cmd, READ | WRITE);
    CallInfo {
        op: (cmd < 19).then_some(Op {
            protocol: Protocol::Smb2,
            code: cmd,
        }),
        file: file_at
            .and_then(|a| body.get(a..a + 16))
            .map_or(0, file_hash),
        offset: if rw { le64(body, 8) } else { 0 },
        count: if rw { le32(body, 4).unwrap_or(0) } else { 0 },
        stable: None,
        bytes: len,
    }
}

/// The name of an SMB2 dialect (`3.1.1`).
pub fn dialect_name(d: u16) -> String {
    match d {
        0x02FF => "2.???".into(),
        _ => {
            let (major, minor, rev) = (d >> 8, (d >> 4) & 0xf, d & 0xf);
            if rev == 0 {
                format!("{major:x}.{minor:x}")
            } else {
                format!("{major:x}.{minor:x}.{rev:x}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::TcpSegment;
    use crate::model::{Diagnosis, Limit, PathRtt, ProtocolLimit};
    use crate::proto::ProtoState;
    use crate::proto::pace::RoundTrips;
    use crate::wire::tcp::flags;

    /// One SMB2 header and body; `next`: offset of the next command (0: last).
    fn hdr(cmd: u16, msg_id: u64, flags: u32, status: u32, next: u32, body: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; HDR];
        h[..4].copy_from_slice(b"\xFESMB");
        h[4..6].copy_from_slice(&64u16.to_le_bytes());
        h[8..12].copy_from_slice(&status.to_le_bytes());
        h[12..14].copy_from_slice(&cmd.to_le_bytes());
        h[14..16].copy_from_slice(&8u16.to_le_bytes());
        h[16..20].copy_from_slice(&flags.to_le_bytes());
        h[20..24].copy_from_slice(&next.to_le_bytes());
        h[24..32].copy_from_slice(&msg_id.to_le_bytes());
        h.extend_from_slice(body);
        h
    }

    /// A chain of commands made one message: each padded to 8 bytes, `next` set.
    fn chain(parts: &[(u16, u64, u32, u32, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, (cmd, id, fl, st, body)) in parts.iter().enumerate() {
            let mut body = body.clone();
            let last = i + 1 == parts.len();
            if !last {
                while (HDR + body.len()) % 8 != 0 {
                    body.push(0);
                }
            }
            let next = if last { 0 } else { (HDR + body.len()) as u32 };
            out.extend(hdr(*cmd, *id, *fl, *st, next, &body));
        }
        out
    }

    /// The NetBIOS session header before a message.
    fn nbss(m: &[u8]) -> Vec<u8> {
        let mut v = (m.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(m);
        v
    }

    /// A READ or WRITE body: structure size, offset byte, flags, length (u32 at 4).
    fn rw(len: u32, data: usize) -> Vec<u8> {
        let mut b = vec![0u8; 48];
        b[0..2].copy_from_slice(&49u16.to_le_bytes());
        b[4..8].copy_from_slice(&len.to_le_bytes());
        b.extend(std::iter::repeat_n(0x5a, data));
        b
    }

    const RESP: u32 = FLAG_RESPONSE;
    const ASYNC_RESP: u32 = FLAG_RESPONSE | 0x2;
    const RELATED: u32 = 0x4;

    /// Feeds (direction, bytes, time ms) cut into segments of `mss`, after a handshake, with
    /// the round trips `rtt` from the capture point to each side.
    fn conn(script: &[(usize, Vec<u8>, i64)], mss: usize, rtt: RoundTrips) -> ProtoState {
        conn_logged(script, mss, rtt, &mut RequestLog::new(10_000))
    }

    /// [`conn`], the requests matched into `log`.
    fn conn_logged(
        script: &[(usize, Vec<u8>, i64)],
        mss: usize,
        rtt: RoundTrips,
        log: &mut RequestLog,
    ) -> ProtoState {
        let mut c = ProtoState::default();
        let mut seq = [100u32, 900u32];
        let mut seg = |c: &mut ProtoState, dir: usize, p: &[u8], syn: bool, ms: i64| {
            let s = TcpSegment {
                src: std::net::IpAddr::from([10, 0, 0, 1]),
                dst: std::net::IpAddr::from([10, 0, 0, 2]),
                src_port: 50000,
                dst_port: 445,
                seq: seq[dir].wrapping_sub(u32::from(syn)),
                ack: seq[1 - dir],
                flags: flags::ACK | if syn { flags::SYN } else { 0 },
                window: 100,
                payload_len: p.len() as u32,
                options: Default::default(),
                ip_id: None,
                payload_at: 0,
                payload_captured: p.len() as u32,
            };
            c.segment(dir, &s, p, (ms * 1_000_000, rtt), log);
            seq[dir] = seq[dir].wrapping_add(p.len() as u32);
        };
        seg(&mut c, 0, &[], true, 0);
        seg(&mut c, 1, &[], true, 0);
        for (dir, bytes, ms) in script {
            for p in bytes.chunks(mss) {
                seg(&mut c, *dir, p, false, *ms);
            }
        }
        c
    }

    /// The figures of [`conn`] with no round trips known.
    fn feed(script: &[(usize, Vec<u8>, i64)], mss: usize) -> crate::model::ProtocolStats {
        conn(script, mss, RoundTrips::default())
            .summary(&Diagnosis::default())
            .expect("an SMB connection")
    }

    fn op<'a>(s: &'a crate::model::ProtocolStats, name: &str) -> &'a crate::model::OpSummary {
        s.ops
            .iter()
            .find(|o| o.op == name)
            .unwrap_or_else(|| panic!("{name} in {:?}", s.ops))
    }

    /// The request stream: a CREATE whose response names the FileId, a READ and a WRITE of
    /// it with their offsets and lengths, a CLOSE, an error.
    #[test]
    fn requests_logged_with_file_offset_and_length() {
        let fid = [7u8; 16];
        let with_fid = |mut b: Vec<u8>, at: usize| {
            b[at..at + 16].copy_from_slice(&fid);
            b
        };
        let rw_at = |len: u32, off: u64, data: usize| {
            let mut b = with_fid(rw(len, data), 16);
            b[8..16].copy_from_slice(&off.to_le_bytes());
            b
        };
        let mut create_resp = vec![0u8; 88];
        create_resp[..2].copy_from_slice(&89u16.to_le_bytes());
        let create_resp = with_fid(create_resp, 64);
        let script = vec![
            (0, nbss(&hdr(5, 1, 0, 0, 0, &[0x39, 0])), 0),
            (1, nbss(&hdr(5, 1, RESP, 0, 0, &create_resp)), 2),
            (0, nbss(&hdr(8, 2, 0, 0, 0, &rw_at(4096, 8192, 0))), 3),
            (1, nbss(&hdr(8, 2, RESP, 0, 0, &rw(4096, 4096))), 5),
            (0, nbss(&hdr(9, 3, 0, 0, 0, &rw_at(1000, 0, 1000))), 6),
            (1, nbss(&hdr(9, 3, RESP, 0, 0, &[0x11, 0])), 9),
            (
                0,
                nbss(&hdr(6, 4, 0, 0, 0, &with_fid(vec![0u8; 24], 8))),
                10,
            ),
            (1, nbss(&hdr(6, 4, RESP, 0xC000_0008, 0, &[0x9, 0])), 11),
        ];
        let mut log = RequestLog::new(100);
        conn_logged(&script, 1448, RoundTrips::default(), &mut log);
        let got: Vec<_> = log
            .requests
            .iter()
            .map(|r| (r.op.qualified(), r.offset, r.count, r.outcome))
            .collect();
        assert_eq!(
            got,
            [
                ("smb2:CREATE".to_string(), 0, 0, Outcome::Ok),
                ("smb2:READ".to_string(), 8192, 4096, Outcome::Ok),
                ("smb2:WRITE".to_string(), 0, 1000, Outcome::Ok),
                ("smb2:CLOSE".to_string(), 0, 0, Outcome::Error(0xC000_0008)),
            ]
        );
        assert!(log.requests.iter().all(|r| r.file == file_hash(&fid)));
        assert_eq!(log.requests[1].call_first_ns, 3_000_000);
        assert_eq!(log.requests[1].reply_last_ns, 5_000_000);
    }

    /// A compound request (CREATE + READ + CLOSE, related) and its compound response; a
    /// WRITE of 64 KiB whose message is cut anywhere across segments; a READ answered by an
    /// interim STATUS_PENDING then the final response; an error; an oplock break the server
    /// sends on its own.
    #[test]
    fn compound_async_split_and_errors() {
        let req = chain(&[
            (5, 1, 0, 0, vec![0x39, 0, 0, 0]),
            (8, 2, RELATED, 0, rw(4096, 0)),
            (6, 3, RELATED, 0, vec![0x18, 0]),
        ]);
        let resp = chain(&[
            (5, 1, RESP, 0, vec![0x59, 0]),
            (8, 2, RESP | RELATED, 0, rw(4096, 4096)),
            (6, 3, RESP | RELATED, 0, vec![0x3c, 0]),
        ]);
        let mut neg = vec![0x41, 0, 1, 0];
        neg.extend_from_slice(&0x0311u16.to_le_bytes());
        let script = vec![
            (0, nbss(&hdr(0, 0, 0, 0, 0, &[0x24, 0])), 0),
            (1, nbss(&hdr(0, 0, RESP, 0, 0, &neg)), 1),
            (0, nbss(&req), 10),
            (1, nbss(&resp), 13),
            (
                0,
                nbss(&hdr(9, 4, FLAG_SIGNED, 0, 0, &rw(65536, 65536))),
                20,
            ),
            (
                1,
                nbss(&hdr(9, 4, RESP | FLAG_SIGNED, 0, 0, &rw(65536, 0))),
                25,
            ),
            (0, nbss(&hdr(8, 5, 0, 0, 0, &rw(1 << 20, 0))), 30),
            (
                1,
                nbss(&hdr(8, 5, ASYNC_RESP, STATUS_PENDING, 0, &[9, 0])),
                31,
            ),
            (
                1,
                nbss(&hdr(8, 5, ASYNC_RESP, 0, 0, &rw(1 << 20, 1 << 20))),
                80,
            ),
            (0, nbss(&hdr(5, 6, 0, 0, 0, &[0x39, 0])), 90),
            (1, nbss(&hdr(5, 6, RESP, 0xC000_0034, 0, &[9, 0])), 92),
            (1, nbss(&hdr(18, u64::MAX, RESP, 0, 0, &[0x18, 0])), 95),
        ];
        for mss in [1, 3, 7, 64, 100, 1448, 65536, 2 << 20] {
            let s = feed(&script, mss);
            assert_eq!(s.protocol, crate::model::AppProtocol::Smb2);
            assert_eq!(s.client, "a");
            assert_eq!(
                (s.unanswered_calls, s.unmatched_replies),
                (0, 0),
                "{mss} {:#?}",
                s.ops
            );
            assert_eq!(s.malformed_records, 0, "{mss}");
            let m = s.smb.as_ref().unwrap();
            assert_eq!(m.dialect.as_deref(), Some("3.1.1"));
            assert_eq!(m.compound_requests, 1);
            assert_eq!(m.interim_responses, 1);
            assert_eq!(m.signed, 2);
            assert_eq!(m.headers, 16);
            assert_eq!(m.credits_requested, 8 * 7);
            let c = op(&s, "CREATE");
            assert_eq!((c.calls, c.replies, c.srt.samples), (2, 2, 2), "{mss}");
            assert_eq!((c.srt.min_ns, c.srt.max_ns), (2_000_000, 3_000_000));
            assert_eq!(c.errors.len(), 1);
            assert_eq!(
                (c.errors[0].count, c.errors[0].name.as_str()),
                (1, "STATUS_OBJECT_NAME_NOT_FOUND")
            );
            let r = op(&s, "READ");
            assert_eq!((r.calls, r.replies), (2, 2), "{mss}");
            // the interim response ends nothing: 3 ms (compound) and 50 ms (async)
            assert_eq!((r.srt.min_ns, r.srt.max_ns), (3_000_000, 50_000_000));
            assert_eq!(r.data_bytes, 4096 + (1 << 20));
            let w = op(&s, "WRITE");
            assert_eq!((w.calls, w.replies, w.data_bytes), (1, 1, 65536));
            assert_eq!(w.srt.min_ns, 5_000_000);
            assert!(w.call_bytes > 65536);
            let cl = op(&s, "CLOSE");
            assert_eq!((cl.calls, cl.replies, cl.srt.min_ns), (1, 1, 3_000_000));
            assert!(s.ops.iter().all(|o| o.op != "OPLOCK_BREAK"));
            // the async READ was in flight alone from 30 to 80 ms; three at once in the chain
            assert_eq!(s.in_flight_max, 3);
        }
    }

    /// Encrypted SMB3: the transform header is counted with its size, nothing is read
    /// behind it; an SMB2 message after it is read again.
    #[test]
    fn encrypted_messages_counted_not_read() {
        let mut tf = vec![0u8; 52];
        tf[..4].copy_from_slice(b"\xFDSMB");
        tf[36..40].copy_from_slice(&100u32.to_le_bytes());
        tf.extend(std::iter::repeat_n(0x77, 100));
        let script = vec![
            (0, nbss(&tf), 0),
            (1, nbss(&tf), 2),
            (0, nbss(&hdr(13, 9, 0, 0, 0, &[4, 0, 0, 0])), 3),
            (1, nbss(&hdr(13, 9, RESP, 0, 0, &[4, 0, 0, 0])), 4),
        ];
        for mss in [1, 5, 1448] {
            let s = feed(&script, mss);
            let m = s.smb.as_ref().unwrap();
            assert_eq!((m.encrypted_messages, m.encrypted_bytes), (2, 304), "{mss}");
            assert_eq!(m.headers, 2);
            assert_eq!(s.ops.len(), 1);
            assert_eq!(op(&s, "ECHO").srt.min_ns, 1_000_000);
            // the verdict says why it cannot judge
            let d = s.diagnosis.as_ref().unwrap();
            assert_eq!(d.limit, ProtocolLimit::TooShort);
            assert!(
                d.message.ends_with("; 2 SMB3 messages were encrypted: their requests cannot be read, nor their pace judged"),
                "{}",
                d.message
            );
        }
    }

    /// A stream picked up mid-message, and a gap across a header: the framer hunts for the
    /// next message and reads on; a gap inside a WRITE's data keeps its place.
    #[test]
    fn gaps_and_mid_stream_start() {
        let w = nbss(&hdr(9, 1, 0, 0, 0, &rw(8192, 8192)));
        let echo = nbss(&hdr(13, 2, 0, 0, 0, &[4, 0, 0, 0]));
        let mut f = Framer::default();
        let mut got = Vec::new();
        let mut cb = |m: Message<'_>| got.push((le16(&m.commands[0], 12), m.len, m.last_ns));
        f.feed(Chunk::Data(&w[..5000]), 1, &mut cb);
        f.feed(Chunk::Gap(1000), 2, &mut cb);
        f.feed(Chunk::Data(&w[6000..]), 3, &mut cb);
        f.feed(Chunk::Gap(0), 4, &mut cb);
        f.feed(Chunk::Data(&w[10..100]), 5, &mut cb);
        f.feed(Chunk::Data(&echo), 6, &mut cb);
        f.feed(Chunk::Data(&echo[..2]), 7, &mut cb);
        f.feed(Chunk::Gap(10), 8, &mut cb);
        f.feed(Chunk::Data(&echo), 9, &mut cb);
        assert_eq!(got, [(9, w.len() as u64 - 4, 3), (13, 68, 6), (13, 68, 9)]);
        assert_eq!((f.resyncs, f.skipped_bytes), (1, 90));
    }

    /// TCP's verdict beside a capture at the client of a path whose round trip is `ms`.
    fn app_limited(ms: i64) -> (RoundTrips, Diagnosis) {
        let ns = (ms * 1_000_000) as u64;
        let rtt = RoundTrips {
            min_ns: [0, ns],
            recent_ns: [0, ns],
        };
        let tcp = Diagnosis {
            limit: Limit::Application,
            path_rtt: PathRtt {
                min_ns: ns,
                ..PathRtt::default()
            },
            message: "application-limited".into(),
            ..Diagnosis::default()
        };
        (rtt, tcp)
    }

    /// Issue 22's verdict on SMB2: one 64 KiB READ in flight at a time across a 150 ms
    /// path, captured at the client, is protocol-bound with the ceiling 64 KiB / 150 ms (and
    /// TCP's sentence says why); WRITEs of 64 KiB that the server answers STATUS_PENDING at
    /// once and finally after 40 ms, on a 2 ms path, are server-bound, the data counted from
    /// the requests; a compound CREATE+READ+CLOSE between them changes neither.
    #[test]
    fn one_read_in_flight_is_protocol_bound_and_slow_writes_server_bound() {
        let mut script = Vec::new();
        let mut t = 0;
        for id in 0..40 {
            script.push((0, nbss(&hdr(READ, id, 0, 0, 0, &rw(65536, 0))), t));
            let data = hdr(READ, id, RESP, 0, 0, &rw(65536, 65536));
            script.push((1, nbss(&data), t + 150));
            t += 151;
        }
        for mss in [1448, 65536] {
            let (rtt, mut tcp) = app_limited(150);
            let c = conn(&script, mss, rtt);
            let s = c.summary(&tcp).unwrap();
            let d = s.diagnosis.as_ref().expect("a verdict");
            assert_eq!(d.limit, ProtocolLimit::RequestsInFlight, "{}", d.message);
            assert_eq!((d.op.as_str(), d.requests), ("READ", 40));
            assert_eq!(d.size_mean_bytes, 65536.0);
            assert!((d.in_flight - 1.0).abs() < 1e-9, "{}", d.in_flight);
            // 1 × 64 KiB / 150 ms = 3.50 Mbit/s; measured 40 × 64 KiB in 6.039 s
            let c = d.ceiling_bps.unwrap();
            assert!((c - 65536.0 * 8.0 / 0.150).abs() < 1.0, "{c}");
            assert!((d.measured_bps - 40.0 * 65536.0 * 8.0 / 6.039).abs() < 1.0);
            assert!(
                d.message.starts_with("protocol-bound, not TCP: 1.0 READ in flight on average, 64 KiB each, each costing the path RTT 150.00 ms"),
                "{}",
                d.message
            );
            crate::proto::verdict::amend_tcp(&mut tcp, d);
            assert!(
                tcp.message
                    .contains("says why: the client kept 1.0 READ in flight"),
                "{}",
                tcp.message
            );
        }

        let mut script = Vec::new();
        let mut t = 0;
        for id in 0..20 {
            let w = hdr(WRITE, id, 0, 0, 0, &rw(65536, 65536));
            script.push((0, nbss(&w), t));
            let interim = hdr(WRITE, id, ASYNC_RESP, STATUS_PENDING, 0, &[9, 0]);
            script.push((1, nbss(&interim), t + 2));
            script.push((
                1,
                nbss(&hdr(WRITE, id, ASYNC_RESP, 0, 0, &rw(65536, 0))),
                t + 42,
            ));
            t += 43;
            if id == 9 {
                let req = chain(&[
                    (5, 100, 0, 0, vec![0x39, 0, 0, 0]),
                    (8, 101, RELATED, 0, rw(4096, 0)),
                    (6, 102, RELATED, 0, vec![0x18, 0]),
                ]);
                let resp = chain(&[
                    (5, 100, RESP, 0, vec![0x59, 0]),
                    (8, 101, RESP | RELATED, 0, rw(4096, 4096)),
                    (6, 102, RESP | RELATED, 0, vec![0x3c, 0]),
                ]);
                script.push((0, nbss(&req), t));
                script.push((1, nbss(&resp), t + 3));
                t += 4;
            }
        }
        let (rtt, tcp) = app_limited(2);
        let s = conn(&script, 1448, rtt).summary(&tcp).unwrap();
        assert_eq!((s.unanswered_calls, s.unmatched_replies), (0, 0));
        let d = s.diagnosis.as_ref().expect("a verdict");
        assert_eq!(d.limit, ProtocolLimit::Server, "{}", d.message);
        // 20 WRITEs and the chain's READ: the data operations
        assert_eq!(d.requests, 21);
        assert_eq!(d.data_bytes, 20 * 65536 + 4096);
        // each WRITE: 40 ms beyond the 2 ms round trip; the READ 1 ms
        let want = (20.0 * 40.0 + 1.0) / 21.0 * 1e6;
        assert!((d.server_ns - want).abs() < 1e3, "{} {want}", d.server_ns);
        assert!(d.message.starts_with("server-bound: "), "{}", d.message);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = crate::testkit::Rng::new(445);
        for n in 0..300 {
            crate::proto::fuzz_smb_streams(&rng.bytes(n * 7));
        }
        let mut b = nbss(&chain(&[
            (5, 1, 0, 0, vec![0x39, 0, 0, 0]),
            (8, 2, RELATED, 0, rw(4096, 0)),
        ]));
        b.extend(nbss(&hdr(5, 1, RESP, 0, 0, &[0x59, 0])));
        for cut in 0..b.len() {
            let mut d = vec![0u8, cut.min(255) as u8];
            d.extend_from_slice(&b[..cut.min(255)]);
            d.extend_from_slice(&[1, 40]);
            d.extend_from_slice(&b[cut.min(b.len())..]);
            crate::proto::fuzz_smb_streams(&d);
        }
    }
}
