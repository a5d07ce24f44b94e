//! The per-request record stream (opt-in): one small fixed-size [`Request`] per storage
//! request matched to its reply (NFSv3, NFSv4 COMPOUND, SMB2), for `nsperf replay`. Off by
//! default: a [`RequestLog`] that is off costs one branch per reply and allocates nothing;
//! on, it is one growable `Vec` with a hard cap (past it, requests are counted as dropped and
//! the caller says so).

use std::fmt;
use std::str::FromStr;

use super::names::{SMB2_PROG, nfs4_op_name, op_name};
use nsperf_nfs::Stable;
use nsperf_nfs::proto::NFS_PROG;

/// Requests kept at most by default (about 100 bytes each: some 100 MB).
pub const DEFAULT_MAX_REQUESTS: usize = 1_000_000;

/// The storage protocol of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// NFS version 3 (the procedure is the operation).
    Nfs3,
    /// NFS version 4.x (the COMPOUND's main operation is the operation).
    Nfs4,
    /// SMB2/3 (the command is the operation).
    Smb2,
}

/// One operation: its protocol and its number there (NFSv3 procedure, NFSv4 operation, SMB2
/// command). Displays as the protocol's name of it (`READ`, `GETATTR`, `QUERY_INFO`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Op {
    /// The protocol.
    pub protocol: Protocol,
    /// The operation's number in it.
    pub code: u16,
}

/// What an operation does, as the replay model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// Reads file data.
    Read,
    /// Writes file data.
    Write,
    /// Commits (flushes) written data.
    Commit,
    /// Anything else: metadata, opens, directory reads.
    Meta,
}

impl Op {
    /// An NFSv3 procedure.
    pub const fn nfs3(proc_: u16) -> Op {
        Op {
            protocol: Protocol::Nfs3,
            code: proc_,
        }
    }

    /// What the operation does.
    pub fn kind(self) -> OpKind {
        match (self.protocol, self.code) {
            // NFSv3 READ 6, WRITE 7, COMMIT 21; NFSv4 READ 25, WRITE 38, COMMIT 5, READ_PLUS
            // 68; SMB2 READ 8, WRITE 9, FLUSH 7.
            (Protocol::Nfs3, 6) | (Protocol::Nfs4, 25 | 68) | (Protocol::Smb2, 8) => OpKind::Read,
            (Protocol::Nfs3, 7) | (Protocol::Nfs4, 38) | (Protocol::Smb2, 9) => OpKind::Write,
            (Protocol::Nfs3, 21) | (Protocol::Nfs4, 5) | (Protocol::Smb2, 7) => OpKind::Commit,
            _ => OpKind::Meta,
        }
    }

    fn name(self) -> &'static str {
        match self.protocol {
            Protocol::Nfs3 => op_name(NFS_PROG, 3, u32::from(self.code)),
            Protocol::Nfs4 => nfs4_op_name(u32::from(self.code)),
            Protocol::Smb2 => op_name(SMB2_PROG, 2, u32::from(self.code)),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Nfs3 => "nfs3",
            Protocol::Nfs4 => "nfs4",
            Protocol::Smb2 => "smb2",
        })
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An operation name that is none of the protocol's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown operation {0:?} (e.g. nfs3:READ, nfs4:GETATTR, smb2:QUERY_INFO)")]
pub struct UnknownOp(pub String);

impl FromStr for Op {
    type Err = UnknownOp;
    /// `PROTOCOL:NAME` (`nfs3:READ`), as [`Op::qualified`] writes it.
    fn from_str(s: &str) -> Result<Op, UnknownOp> {
        let err = || UnknownOp(s.to_string());
        let (p, name) = s.split_once(':').ok_or_else(err)?;
        let (protocol, n) = match p {
            "nfs3" => (Protocol::Nfs3, 22),
            "nfs4" => (Protocol::Nfs4, 76),
            "smb2" => (Protocol::Smb2, 19),
            _ => return Err(err()),
        };
        (0..n)
            .map(|code| Op { protocol, code })
            .find(|o| o.name().eq_ignore_ascii_case(name))
            .ok_or_else(err)
    }
}

impl Op {
    /// `PROTOCOL:NAME` (`nfs3:READ`): what [`FromStr`] reads.
    pub fn qualified(self) -> String {
        format!("{}:{}", self.protocol, self)
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Outcome {
    /// Status 0.
    #[default]
    Ok,
    /// The protocol's non-zero status (NFS status, NT status).
    Error(u32),
    /// Refused below the protocol (an RPC denied or with garbage arguments).
    Refused,
}

/// One request matched to its reply on one connection. Times are capture times, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The connection's id (as `nsperf trace` numbers them).
    pub conn: u32,
    /// The side that sent the call (0 = a, 1 = b): the client.
    pub client: u8,
    /// The operation.
    pub op: Op,
    /// How it ended.
    pub outcome: Outcome,
    /// First byte of the call at the capture point.
    pub call_first_ns: i64,
    /// Last byte of the call.
    pub call_last_ns: i64,
    /// First byte of the reply.
    pub reply_first_ns: i64,
    /// Last byte of the reply.
    pub reply_last_ns: i64,
    /// The file: a 64-bit hash of its file handle (NFS) or FileId (SMB); 0 when the request
    /// names none (or it was not read).
    pub file: u64,
    /// Offset of a READ, WRITE or COMMIT.
    pub offset: u64,
    /// Bytes a READ returned (asked, for NFSv4), a WRITE sent, a COMMIT covered.
    pub count: u32,
    /// How a WRITE (NFSv3, NFSv4) asked the server to store its data (`stable_how`); None
    /// for anything else.
    pub stable: Option<Stable>,
    /// Bytes of the call on the wire (its record: headers and data, no TCP/IP headers).
    pub call_bytes: u64,
    /// Bytes of the reply record.
    pub reply_bytes: u64,
}

/// What a call leaves for the record of its request (filled only when the log is on).
#[derive(Debug, Clone, Copy, Default)]
pub struct CallInfo {
    /// The operation; None: not a storage request logged (MOUNT, portmap, NFSv2).
    pub op: Option<Op>,
    /// File hash.
    pub file: u64,
    /// Offset.
    pub offset: u64,
    /// Count (as asked).
    pub count: u32,
    /// A WRITE's `stable_how` (NFSv3, NFSv4).
    pub stable: Option<Stable>,
    /// Bytes of the call record.
    pub bytes: u64,
}

/// A 64-bit FNV-1a hash of a file handle or FileId (never 0: 0 means no file).
pub fn file_hash(b: &[u8]) -> u64 {
    if b.is_empty() {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.max(1)
}

/// Where the connections' requests go: off (the default), or a `Vec` with a hard cap.
#[derive(Debug, Default)]
pub struct RequestLog {
    /// Requests kept at most; 0: off.
    cap: usize,
    /// The connection whose segments are being fed now.
    pub conn: u32,
    /// The requests, in order of their replies.
    pub requests: Vec<Request>,
    /// Requests matched past the cap, not kept.
    pub dropped: u64,
}

impl RequestLog {
    /// A log keeping at most `cap` requests (0: off).
    pub fn new(cap: usize) -> RequestLog {
        RequestLog {
            cap,
            ..RequestLog::default()
        }
    }

    /// True when requests are kept.
    pub fn on(&self) -> bool {
        self.cap > 0
    }

    /// Keeps one request of the current connection (or counts it dropped past the cap).
    pub fn push(&mut self, mut r: Request) {
        if !self.on() {
            return;
        }
        if self.requests.len() >= self.cap {
            self.dropped += 1;
            return;
        }
        r.conn = self.conn;
        self.requests.push(r);
    }
}

/// A connection that carried requests: its endpoints and the round trips from the capture
/// point to each side and back, smallest seen over the connection (0: not measured).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestConn {
    /// The connection's id.
    pub id: u32,
    /// Side a (`ADDR:PORT`).
    pub a: String,
    /// Side b.
    pub b: String,
    /// Round trip from the capture point to side a and back, ns.
    pub rtt_a_ns: u64,
    /// Round trip to side b and back, ns.
    pub rtt_b_ns: u64,
    /// Largest receive window side a advertised, bytes (None: the window scale unknown).
    pub window_a_bytes: Option<u64>,
    /// Largest receive window side b advertised.
    pub window_b_bytes: Option<u64>,
}

/// The requests of a capture: each connection's, matched to their replies, in order of the
/// replies; and the connections.
#[derive(Debug, Clone, Default)]
pub struct RequestStream {
    /// The requests kept.
    pub requests: Vec<Request>,
    /// Requests matched past the log's cap, not kept.
    pub dropped: u64,
    /// The connections that carried a storage protocol, by id.
    pub connections: Vec<RequestConn>,
}

impl RequestStream {
    /// Keeps only the requests and connections of the connections `ids`; `Err(id)`: the
    /// first of them that is not a connection of the stream (none is dropped then).
    pub fn keep_connections(&mut self, ids: &[u32]) -> Result<(), u32> {
        let known = |id: &u32| self.connections.iter().any(|c| c.id == *id);
        if let Some(&id) = ids.iter().find(|id| !known(id)) {
            return Err(id);
        }
        self.requests.retain(|r| ids.contains(&r.conn));
        self.connections.retain(|c| ids.contains(&c.id));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_kinds() {
        for p in [
            "nfs3:READ",
            "nfs3:COMMIT",
            "nfs4:GETATTR",
            "smb2:QUERY_INFO",
        ] {
            let op: Op = p.parse().unwrap();
            assert_eq!(op.qualified(), p);
        }
        assert_eq!("nfs3:read".parse::<Op>().unwrap(), Op::nfs3(6));
        assert!("nfs3:FROB".parse::<Op>().is_err());
        assert!("READ".parse::<Op>().is_err());
        assert_eq!(Op::nfs3(6).kind(), OpKind::Read);
        assert_eq!("nfs4:WRITE".parse::<Op>().unwrap().kind(), OpKind::Write);
        assert_eq!("smb2:FLUSH".parse::<Op>().unwrap().kind(), OpKind::Commit);
        assert_eq!(Op::nfs3(1).kind(), OpKind::Meta);
    }

    #[test]
    fn off_keeps_nothing_and_the_cap_holds() {
        let r = Request {
            conn: 0,
            client: 0,
            op: Op::nfs3(6),
            outcome: Outcome::Ok,
            call_first_ns: 0,
            call_last_ns: 0,
            reply_first_ns: 1,
            reply_last_ns: 1,
            file: 1,
            offset: 0,
            count: 1,
            stable: None,
            call_bytes: 1,
            reply_bytes: 1,
        };
        let mut off = RequestLog::default();
        off.push(r);
        assert_eq!((off.requests.capacity(), off.dropped), (0, 0));
        let mut log = RequestLog::new(2);
        log.conn = 7;
        for _ in 0..5 {
            log.push(r);
        }
        assert_eq!((log.requests.len(), log.dropped), (2, 3));
        assert_eq!(log.requests[0].conn, 7);
        assert_ne!(file_hash(&[0]), 0);
        assert_eq!(file_hash(&[]), 0);
    }
}
