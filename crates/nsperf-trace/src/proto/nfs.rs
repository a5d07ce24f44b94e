//! NFS (and the RPC programs around it: MOUNT, the portmapper) over ONC RPC: calls matched to
//! replies by XID, both directions, and per-operation figures. An I/O-free state machine fed
//! with complete records and their capture times; the RPC header is decoded by
//! `nsperf_nfs::rpc`, the arguments and results by `nsperf_nfs::proto` (the codecs of nsperf's
//! own NFSv3 client and server), never by a second XDR.

use nsperf_nfs::proto::{self as nfs3, MOUNT_PROG, NFS_PROG, proc3};
use nsperf_nfs::rpc::{self, CALL, REPLY};
use nsperf_nfs::xdr::XdrReader;

use super::inflight::InFlight;
use super::nfs4::{CompoundOps, Held};
use super::ops::{OpKey, OpTable};
use super::pace::{CallMark, Pace};
use super::requests::{CallInfo, Op, Outcome, Request, RequestLog, file_hash};
use super::rpc::Record;

/// Calls waiting for their reply, per connection, at most; an older one is then counted as
/// unanswered (a client that gave up, or a reply the capture missed).
pub const MAX_PENDING: usize = 4096;

/// A call seen, waiting for its reply.
#[derive(Debug, Clone, Copy)]
struct Pending {
    xid: u32,
    /// The side that sent it (0 = a).
    from: usize,
    op: OpKey,
    /// When its last byte passed the capture point.
    t: i64,
    /// What its reply needs for the pace.
    mark: CallMark,
    /// Bytes a WRITE sent (None: not a data operation; READ's come with the reply).
    written: Option<u32>,
    /// A data operation (READ, WRITE).
    data: bool,
    /// What the request's record needs (only when the log is on).
    info: CallInfo,
}

/// The RPC state of one connection.
#[derive(Debug, Default)]
pub struct RpcSession {
    pending: Vec<Pending>,
    /// Per-operation figures.
    pub ops: OpTable,
    /// Replies whose call was not seen.
    pub unmatched_replies: u64,
    /// Calls dropped from the pending table unanswered.
    pub unanswered_calls: u64,
    /// Records that were neither a well-formed call nor a reply.
    pub malformed: u64,
    /// Calls per side (to tell the client).
    pub calls_by_side: [u64; 2],
    /// NFS versions seen in calls, as a bit set (bit v).
    pub nfs_versions: u32,
    in_flight: InFlight,
    /// Where each request's time went.
    pub pace: Pace,
    /// NFSv4: the operations inside COMPOUND calls.
    pub compound: CompoundOps,
}

impl RpcSession {
    /// One complete record sent by side `from`; a matched request goes to `log`.
    pub fn record(&mut self, from: usize, r: &Record<'_>, log: &mut RequestLog) {
        let moved = self.pace.record(from, r.len, r.first_ns, r.last_ns);
        let mut x = XdrReader::new(r.head);
        let (Ok(xid), Ok(kind)) = (x.u32(), x.u32()) else {
            self.malformed += 1;
            return;
        };
        match kind {
            CALL => self.call(from, xid, r, moved, log.on()),
            REPLY => self.reply(from, xid, r, moved, log),
            _ => self.malformed += 1,
        }
    }

    fn call(&mut self, from: usize, xid: u32, r: &Record<'_>, moved: i64, logging: bool) {
        let mut x = XdrReader::new(r.head);
        let Ok(h) = rpc::parse_call(&mut x) else {
            self.malformed += 1;
            return;
        };
        let op = OpKey {
            prog: h.prog,
            vers: h.vers,
            proc_: h.proc_,
        };
        let mut info = CallInfo {
            bytes: r.len,
            ..CallInfo::default()
        };
        if logging && h.prog == NFS_PROG && h.vers == 3 {
            nfs3_call_info(h.proc_, x.clone(), &mut info);
        }
        // WRITE3args: file handle, offset, count.
        let written = (h.prog == NFS_PROG && h.vers == 3 && h.proc_ == proc3::WRITE)
            .then(|| {
                let fh = nfs3::FileHandle::decode(&mut x).ok();
                fh.and_then(|_| x.u64().ok()).and_then(|_| x.u32().ok())
            })
            .flatten();
        if h.prog == NFS_PROG && h.vers == 4 && h.proc_ == 1 {
            let held = Held {
                len: r.len,
                tail: r.tail,
            };
            self.compound
                .call(&mut x, held, logging.then_some(&mut info));
        }
        if h.prog == NFS_PROG && h.vers < 32 {
            self.nfs_versions |= 1 << h.vers;
        }
        let data =
            h.prog == NFS_PROG && h.vers == 3 && matches!(h.proc_, proc3::READ | proc3::WRITE);
        self.calls_by_side[from] += 1;
        let s = self.ops.get(op);
        s.calls += 1;
        s.call_bytes += r.len;
        if let Some(n) = written {
            s.note_size(n);
        }
        if self.pending.iter().any(|p| p.xid == xid && p.from == from) {
            // A retransmitted call (same XID): the reply answers the first one, as tshark
            // matches it.
            return;
        }
        let mark = self.pace.call(from, r.first_ns, r.last_ns, moved, data);
        if self.pending.len() >= MAX_PENDING {
            self.pending.remove(0);
            self.unanswered_calls += 1;
            self.in_flight.step(r.last_ns, -1);
        }
        self.pending.push(Pending {
            xid,
            from,
            op,
            t: r.last_ns,
            mark,
            written,
            data,
            info,
        });
        self.in_flight.step(r.last_ns, 1);
    }

    fn reply(&mut self, from: usize, xid: u32, r: &Record<'_>, moved: i64, log: &mut RequestLog) {
        let Some(i) = self
            .pending
            .iter()
            .position(|p| p.xid == xid && p.from != from)
        else {
            self.unmatched_replies += 1;
            return;
        };
        let p = self.pending.remove(i);
        self.in_flight.step(r.last_ns, -1);
        let mut x = XdrReader::new(r.head);
        let accepted = rpc::parse_reply(&mut x);
        let s = self.ops.get(p.op);
        s.replies += 1;
        s.reply_bytes += r.len;
        s.srt.record((r.last_ns - p.t).max(0) as u64);
        let status = match accepted {
            // Every result of NFS (v2, v3, v4 COMPOUND) and MOUNT v3 starts with a status.
            Ok(_) if matches!(p.op.prog, NFS_PROG | MOUNT_PROG) => x.clone().u32().ok(),
            Ok(_) => Some(0),
            Err(_) => None,
        };
        let mut moved_bytes = p.written;
        match status {
            Some(0) => {
                if p.op.prog == NFS_PROG && p.op.vers == 3 && p.op.proc_ == proc3::READ {
                    if let Ok(Ok(h)) = nfs3::decode_read_head(&mut x) {
                        s.note_size(h.count);
                        moved_bytes = Some(h.count);
                    }
                }
            }
            Some(st) => s.note_error(st),
            None => s.rpc_errors += 1,
        }
        let data = p.data.then(|| u64::from(moved_bytes.unwrap_or(0)));
        self.pace
            .reply(from, &p.mark, r.first_ns, r.last_ns, moved, data);
        if let (true, Some(op)) = (log.on(), p.info.op) {
            log.push(Request {
                conn: 0,
                client: p.from as u8,
                op,
                outcome: match status {
                    Some(0) => Outcome::Ok,
                    Some(st) => Outcome::Error(st),
                    None => Outcome::Refused,
                },
                call_first_ns: p.mark.first_ns,
                call_last_ns: p.mark.last_ns,
                reply_first_ns: r.first_ns,
                reply_last_ns: r.last_ns,
                file: p.info.file,
                offset: p.info.offset,
                count: moved_bytes.unwrap_or(p.info.count),
                stable: p.info.stable,
                call_bytes: p.info.bytes,
                reply_bytes: r.len,
            });
        }
    }

    /// Requests in flight over time.
    pub fn in_flight(&self) -> &InFlight {
        &self.in_flight
    }

    /// Calls still waiting at the end.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }
}

/// What an NFSv3 call's arguments (`x` just past the RPC header) give its request's record:
/// every procedure but NULL starts with a file handle; READ, WRITE and COMMIT go on with an
/// offset and a count.
fn nfs3_call_info(proc_: u32, mut x: XdrReader<'_>, info: &mut CallInfo) {
    if proc_ > proc3::COMMIT {
        return;
    }
    info.op = Some(Op::nfs3(proc_ as u16));
    if proc_ == 0 {
        return;
    }
    if let Ok(fh) = x.opaque(nfs3::FHSIZE3) {
        info.file = file_hash(fh);
        if matches!(proc_, proc3::READ | proc3::WRITE | proc3::COMMIT) {
            info.offset = x.u64().unwrap_or(0);
            info.count = x.u32().unwrap_or(0);
            if proc_ == proc3::WRITE {
                info.stable = x.u32().ok().and_then(|v| nfs3::Stable::from_wire(v).ok());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_nfs::Stable;
    use nsperf_nfs::xdr::{put_opaque, put_u32, put_u64};

    /// A WRITE's record keeps its offset, count and `stable_how`; a READ's has none.
    #[test]
    fn write_records_its_stable_how() {
        let fh = nfs3::FileHandle::new(&[7; 32]).unwrap();
        for stable in [Stable::Unstable, Stable::DataSync, Stable::FileSync] {
            let mut b = Vec::new();
            fh.encode(&mut b);
            put_u64(&mut b, 65536);
            put_u32(&mut b, 4);
            put_u32(&mut b, stable.to_wire());
            put_opaque(&mut b, b"data");
            let mut info = CallInfo::default();
            nfs3_call_info(proc3::WRITE, XdrReader::new(&b), &mut info);
            assert_eq!(info.op, Some(Op::nfs3(7)));
            assert_eq!(
                (info.offset, info.count, info.stable),
                (65536, 4, Some(stable))
            );
            assert_eq!(info.file, file_hash(fh.as_bytes()));
            let mut read = CallInfo::default();
            nfs3_call_info(proc3::READ, XdrReader::new(&b), &mut read);
            assert_eq!(read.stable, None);
        }
        // a stable_how out of range: none recorded
        let mut b = Vec::new();
        fh.encode(&mut b);
        put_u64(&mut b, 0);
        put_u32(&mut b, 0);
        put_u32(&mut b, 9);
        let mut info = CallInfo::default();
        nfs3_call_info(proc3::WRITE, XdrReader::new(&b), &mut info);
        assert_eq!(info.stable, None);
    }
}
