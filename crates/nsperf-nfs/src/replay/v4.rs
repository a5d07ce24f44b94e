//! The replay's NFSv4 dialect: each replayed call as one COMPOUND (in 4.1 after a SEQUENCE on
//! a slot of the connection's own session), and the head of its reply. What each call is
//! made of: docs/replay.md, "The replay".

use super::result::{Done, Failed, bad, xe};
use super::{Call, CallOp, Handles, Target};
use crate::error::NfsError;
use crate::proto::{NFS_PROG, NfsStat};
use crate::rpc::{self, AuthSys};
use crate::v4::SessionId;
use crate::v4::wire::{Compound, NFS_V4, PROC_COMPOUND, attr, op};
use crate::xdr::XdrReader;

/// Rights ACCESS asks for: READ LOOKUP MODIFY EXTEND DELETE EXECUTE.
const ACCESS_ALL: u32 = 0x3f;

/// One connection's NFSv4 state: the minor version, and in 4.1 its session's slots.
#[derive(Debug)]
pub(crate) struct V4Conn {
    minor: u32,
    sid: Option<SessionId>,
    /// Each slot's last sequence id the server took.
    seqs: Vec<u32>,
    /// Slots not in use.
    free: Vec<u32>,
    /// The slot each request was sent on.
    slot_of: Vec<u32>,
}

impl V4Conn {
    /// A connection of minor version 0 (no session), or of 4.1 on session `sid` with
    /// `slots` slots, for `calls` requests.
    pub(crate) fn new(minor: u32, sid: Option<SessionId>, slots: u32, calls: usize) -> V4Conn {
        let slots = if sid.is_some() { slots.max(1) } else { 0 };
        V4Conn {
            minor,
            sid,
            seqs: vec![0; slots as usize],
            free: (0..slots).rev().collect(),
            slot_of: vec![0; calls],
        }
    }

    /// The session's slots (4.1); none in 4.0, which has no sessions.
    pub(crate) fn slots(&self) -> Option<u32> {
        self.sid.map(|_| self.seqs.len() as u32)
    }

    /// Appends request `index`'s call (xid `xid`) to `b`: the RPC header and the COMPOUND;
    /// `name` is the name a LOOKUP, CREATE or REMOVE uses. The WRITE data's length, which
    /// the caller sends after it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn encode(
        &mut self,
        b: &mut Vec<u8>,
        index: usize,
        xid: u32,
        op: CallOp,
        cred: &AuthSys,
        h: &Handles,
        name: &[u8],
        pattern: usize,
    ) -> (usize, usize) {
        let proc_ = if op == CallOp::Null { 0 } else { PROC_COMPOUND };
        let rec = rpc::begin_call(b, xid, NFS_PROG, NFS_V4, proc_, cred);
        if op == CallOp::Null {
            return (rec, 0);
        }
        let name = std::str::from_utf8(name).unwrap_or("");
        let mut c = Compound::begin(b, self.minor);
        if let Some(sid) = &self.sid {
            // The scheduler never has more outstanding than the slots (see `run`).
            let slot = self.free.pop().unwrap_or(0);
            self.slot_of[index] = slot;
            let highest = self.seqs.len() as u32 - 1;
            c.sequence(sid, self.seqs[slot as usize].wrapping_add(1), slot, highest);
        }
        let mut data = 0;
        match op {
            CallOp::Null => {}
            CallOp::Getattr(t)
            | CallOp::AsGetattr { target: t, .. }
            | CallOp::Fsstat(t)
            | CallOp::Fsinfo(t)
            | CallOp::Pathconf(t) => {
                c.putfh(h.of(t));
                c.getattr(&[attr::TYPE, attr::SIZE]);
            }
            CallOp::Access(t) => {
                c.putfh(h.of(t));
                c.access(ACCESS_ALL);
            }
            CallOp::Lookup => {
                c.putfh(&h.dir);
                c.lookup(name);
                c.getfh();
                c.getattr(&[attr::TYPE, attr::SIZE]);
            }
            CallOp::Create => {
                c.putfh(&h.dir);
                c.mkdir(name);
            }
            CallOp::Remove => {
                c.putfh(&h.dir);
                c.remove(name);
            }
            CallOp::Readdir | CallOp::Readdirplus => {
                c.putfh(&h.dir);
                c.readdir(0, [0; 8]);
            }
            CallOp::Read {
                file,
                offset,
                count,
            } => {
                c.putfh(h.of(Target::File(file)));
                c.read(&h.stateid(file), offset, count);
            }
            CallOp::Write {
                file,
                offset,
                count,
                stable,
            } => {
                data = (count as usize).min(pattern);
                c.putfh(h.of(Target::File(file)));
                c.write_head(&h.stateid(file), offset, stable, data as u32);
            }
            CallOp::Commit {
                file,
                offset,
                count,
            } => {
                c.putfh(h.of(Target::File(file)));
                c.commit_range(offset, count);
            }
        }
        c.finish();
        (rec, data)
    }

    /// Request `index`'s reply is in: its slot is free again, its sequence moved on when
    /// the server took the SEQUENCE.
    pub(crate) fn done(&mut self, index: usize, seq_ok: bool) {
        if self.sid.is_none() {
            return;
        }
        let slot = self.slot_of[index];
        if seq_ok {
            self.seqs[slot as usize] = self.seqs[slot as usize].wrapping_add(1);
        }
        self.free.push(slot);
    }

    /// Whether the connection speaks 4.1 (a SEQUENCE heads each COMPOUND).
    pub(crate) fn sessions(&self) -> bool {
        self.sid.is_some()
    }

    /// Ends the connection's 4.1 session (DESTROY_SESSION, best effort, a second at most,
    /// after the last reply), so the client made at set-up can end too.
    pub(crate) fn end_session(&self, sock: &mut std::net::TcpStream, xid: u32, cred: &AuthSys) {
        use std::io::{Read, Write};
        let Some(sid) = &self.sid else {
            return;
        };
        let mut b = Vec::with_capacity(128);
        let rec = rpc::begin_call(&mut b, xid, NFS_PROG, NFS_V4, PROC_COMPOUND, cred);
        let mut c = Compound::begin(&mut b, 1);
        c.destroy_session(sid);
        c.finish();
        rpc::finish_record(&mut b, rec, 0);
        if sock.set_nonblocking(false).is_err() {
            return;
        }
        let second = Some(std::time::Duration::from_secs(1));
        sock.set_write_timeout(second).ok();
        sock.set_read_timeout(second).ok();
        if sock.write_all(&b).is_ok() {
            // the reply read and dropped: the server has acted once it answers
            let mut sink = [0u8; 512];
            let _ = sock.read(&mut sink);
        }
    }
}

/// Parses the head of an NFSv4 reply record (`rec`: its first bytes): which request it
/// answers (its xid less `xid0` indexes `calls`; `sent` says whether that request was sent)
/// and how it ended: the first failed operation's status, the bytes a READ returned or a
/// WRITE wrote; `sequence` when the COMPOUND starts with a SEQUENCE. Outside bytes: an
/// error, never a panic.
pub(crate) fn reply_head(
    rec: &[u8],
    xid0: u32,
    calls: &[Call],
    sent: impl Fn(usize) -> bool,
    sequence: bool,
) -> Result<Done, NfsError> {
    let mut r = XdrReader::new(rec);
    let xid = r.clone().u32().map_err(xe)?;
    let index = xid.wrapping_sub(xid0) as usize;
    let call = match calls.get(index) {
        Some(c) if sent(index) => c,
        _ => return Err(bad("reply to no call sent (unknown xid)")),
    };
    let mut done = Done::of(index);
    if let Err(e) = rpc::parse_reply(&mut r) {
        done.failed = Some(Failed::of_rpc(&e).ok_or(NfsError::Rpc {
            what: "replay",
            source: e,
        })?);
        return Ok(done);
    }
    if call.op == CallOp::Null {
        return Ok(done);
    }
    let status = r.u32().map_err(xe)?;
    r.opaque(1024).map_err(xe)?;
    let mut left = r.u32().map_err(xe)?;
    let mut result = |r: &mut XdrReader<'_>| -> Result<Option<(u32, NfsStat)>, NfsError> {
        if left == 0 {
            return Ok(None);
        }
        left -= 1;
        Ok(Some((r.u32().map_err(xe)?, NfsStat(r.u32().map_err(xe)?))))
    };
    if sequence {
        match result(&mut r)? {
            Some((op::SEQUENCE, NfsStat::OK)) => done.seq_ok = true,
            Some((op::SEQUENCE, st)) => {
                done.failed = Some(Failed::Nfs4(st.0));
                return Ok(done);
            }
            _ => return Err(bad("a reply without its SEQUENCE")),
        }
        r.skip(16 + 4 * 5).map_err(xe)?;
    }
    if status != 0 {
        done.failed = Some(Failed::Nfs4(status));
        return Ok(done);
    }
    let data_op = match call.op {
        CallOp::Read { .. } => op::READ,
        CallOp::Write { .. } => op::WRITE,
        _ => return Ok(done),
    };
    // PUTFH's result (its status only), then READ's or WRITE's.
    match result(&mut r)? {
        Some((op::PUTFH, NfsStat::OK)) => {}
        _ => return Err(bad("the reply's operations do not match the call")),
    }
    match result(&mut r)? {
        Some((o, NfsStat::OK)) if o == data_op && o == op::READ => {
            r.u32().map_err(xe)?; // eof
            done.read = u64::from(r.u32().map_err(xe)?);
        }
        Some((o, NfsStat::OK)) if o == data_op => {
            done.written = u64::from(r.u32().map_err(xe)?);
        }
        _ => return Err(bad("the reply's operations do not match the call")),
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::Trigger;
    use crate::rpc::AcceptStat;
    use crate::xdr::{put_opaque, put_u32};
    use nsperf_core::replay::ErrorStatus;

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

    /// A reply head: COMPOUND `status`, then (when `seq`) SEQUENCE's OK result for slot 0,
    /// then `results` (operation, status) with READ's eof and count after an OK READ.
    fn reply(xid: u32, status: u32, seq: bool, results: &[(u32, u32)]) -> Vec<u8> {
        let mut b = Vec::new();
        rpc::reply_header(&mut b, xid, AcceptStat::Success);
        put_u32(&mut b, status);
        put_opaque(&mut b, b"");
        put_u32(&mut b, results.len() as u32 + u32::from(seq));
        if seq {
            put_u32(&mut b, op::SEQUENCE);
            put_u32(&mut b, 0);
            b.extend_from_slice(&[0u8; 36]);
        }
        for &(o, st) in results {
            put_u32(&mut b, o);
            put_u32(&mut b, st);
            if o == op::READ && st == 0 {
                put_u32(&mut b, 1);
                put_u32(&mut b, 8);
            }
        }
        b
    }

    /// A READ's reply gives its count and that the SEQUENCE was taken; a failed operation
    /// its NFSv4 status (the COMPOUND's); a reply to no call sent, a cut or mismatched
    /// reply: errors, never a panic.
    #[test]
    fn v4_reply_heads() {
        let xid0 = 7000;
        let ok = reply(xid0, 0, true, &[(op::PUTFH, 0), (op::READ, 0)]);
        let d = reply_head(&ok, xid0, &calls(), |_| true, true).unwrap();
        assert_eq!((d.index, d.read, d.failed, d.seq_ok), (0, 8, None, true));
        // 4.0: no SEQUENCE
        let plain = reply(xid0, 0, false, &[(op::PUTFH, 0), (op::READ, 0)]);
        let d = reply_head(&plain, xid0, &calls(), |_| true, false).unwrap();
        assert_eq!((d.read, d.seq_ok), (8, false));
        let stale = reply(xid0 + 1, 70, true, &[(op::PUTFH, 70)]);
        let d = reply_head(&stale, xid0, &calls(), |_| true, true).unwrap();
        assert_eq!(
            (d.index, d.failed, d.seq_ok),
            (1, Some(Failed::Nfs4(70)), true)
        );
        assert_eq!(d.failed.map(ErrorStatus::name).unwrap(), "NFS4ERR_STALE");
        let wrong = reply(xid0, 0, true, &[(op::PUTFH, 0), (op::WRITE, 0)]);
        assert!(reply_head(&wrong, xid0, &calls(), |_| true, true).is_err());
        assert!(reply_head(&ok, xid0, &calls(), |i| i == 1, true).is_err());
        assert!(reply_head(&ok, xid0 + 9, &calls(), |_| true, true).is_err());
        for cut in 0..ok.len() {
            let _ = reply_head(&ok[..cut], xid0, &calls(), |_| true, true);
        }
        assert!(reply_head(&ok[..ok.len() - 4], xid0, &calls(), |_| true, true).is_err());
    }

    /// 4.1: each call takes a free slot with its next sequence id; a reply frees it, moving
    /// its sequence on only when the server took the SEQUENCE.
    #[test]
    fn slots_and_sequences() {
        let h = Handles {
            dir: crate::proto::FileHandle::new(&[1]).unwrap(),
            files: vec![crate::proto::FileHandle::new(&[2]).unwrap()],
            stateids: vec![],
        };
        let mut v = V4Conn::new(1, Some([3; 16]), 2, 3);
        let cred = AuthSys::current();
        let mut b = Vec::new();
        let op = CallOp::Getattr(Target::File(0));
        v.encode(&mut b, 0, 1, op, &cred, &h, b"", 0);
        v.encode(&mut b, 1, 2, op, &cred, &h, b"", 0);
        assert_eq!((v.slot_of[0], v.slot_of[1]), (0, 1));
        assert!(v.free.is_empty());
        v.done(1, false);
        assert_eq!(v.seqs, [0, 0]);
        v.done(0, true);
        assert_eq!(v.seqs, [1, 0]);
        v.encode(&mut b, 2, 3, op, &cred, &h, b"", 0);
        assert_eq!(v.slot_of[2], 0);
    }
}
