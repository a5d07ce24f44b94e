//! ONC RPC version 2 (RFC 5531) over TCP: record marking, call headers with AUTH_SYS
//! credentials, and the checked parsing of replies (client side) and calls (server side).
//!
//! A record on TCP is a 4-byte mark — the top bit set on the last fragment, the low 31 bits
//! the fragment's length — followed by the fragment. nsperf sends every message as one
//! fragment; it accepts several on the control path ([`crate::rpc_conn`]).

use crate::xdr::{XdrError, XdrReader, put_opaque, put_u32};

/// Message type of a call.
pub const CALL: u32 = 0;
/// Message type of a reply.
pub const REPLY: u32 = 1;
/// The RPC protocol version spoken.
pub const RPC_VERSION: u32 = 2;
/// The `AUTH_NONE` flavor.
pub const AUTH_NONE: u32 = 0;
/// The `AUTH_SYS` (`AUTH_UNIX`) flavor.
pub const AUTH_SYS: u32 = 1;
/// Longest credential or verifier body (RFC 5531).
pub const MAX_AUTH_BYTES: usize = 400;
/// The last-fragment bit of a record mark.
pub const LAST_FRAGMENT: u32 = 0x8000_0000;
/// Largest fragment accepted from a peer: a 1 MiB READ or WRITE plus its headers, with room.
pub const MAX_FRAGMENT: usize = (4 << 20) + 4096;

/// Why an RPC was not answered with a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// The bytes are not a well-formed RPC message.
    #[error("malformed RPC message: {0}")]
    Xdr(#[from] XdrError),
    /// Well-formed, but not what the protocol allows here.
    #[error("bad RPC message: {0}")]
    Bad(&'static str),
    /// The server does not run this program (`PROG_UNAVAIL`).
    #[error("the server does not offer RPC program {0}")]
    ProgramUnavailable(u32),
    /// The server runs the program, in other versions only (`PROG_MISMATCH`).
    #[error("the server offers RPC program {prog} only in versions {low}..{high}")]
    VersionMismatch {
        /// The program.
        prog: u32,
        /// Lowest version offered.
        low: u32,
        /// Highest version offered.
        high: u32,
    },
    /// The server does not know the procedure (`PROC_UNAVAIL`).
    #[error("the server does not offer procedure {0}")]
    ProcedureUnavailable(u32),
    /// The server could not decode the arguments (`GARBAGE_ARGS`).
    #[error("the server could not decode the arguments")]
    GarbageArgs,
    /// The server failed internally (`SYSTEM_ERR`).
    #[error("RPC system error at the server")]
    SystemError,
    /// The server denied the call: wrong RPC version or authentication refused.
    #[error("the server denied the RPC call: {0}")]
    Denied(String),
}

/// An `AUTH_SYS` credential, encoded once and copied into every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSys {
    body: Vec<u8>,
}

impl AuthSys {
    /// A credential for `uid`/`gid` from machine `name` (cut to 255 bytes).
    pub fn new(name: &str, uid: u32, gid: u32) -> Self {
        let mut body = Vec::with_capacity(64);
        put_u32(&mut body, 0); // stamp
        put_opaque(&mut body, &name.as_bytes()[..name.len().min(255)]);
        put_u32(&mut body, uid);
        put_u32(&mut body, gid);
        put_u32(&mut body, 0); // no supplementary groups
        AuthSys { body }
    }

    /// The credential of this process (its real uid and gid).
    pub fn current() -> Self {
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        AuthSys::new("nsperf", uid, gid)
    }
}

/// Appends a record mark placeholder and a call header; returns the record's start, to be
/// given to [`finish_record`] once the arguments are appended.
pub fn begin_call(
    buf: &mut Vec<u8>,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: &AuthSys,
) -> usize {
    let start = buf.len();
    put_u32(buf, 0);
    put_u32(buf, xid);
    put_u32(buf, CALL);
    put_u32(buf, RPC_VERSION);
    put_u32(buf, prog);
    put_u32(buf, vers);
    put_u32(buf, proc_);
    put_u32(buf, AUTH_SYS);
    put_opaque(buf, &cred.body);
    put_u32(buf, AUTH_NONE);
    put_u32(buf, 0);
    start
}

/// Writes the record mark of the record that starts at `start` and holds `extra` more bytes
/// sent separately after `buf` (a WRITE's data).
pub fn finish_record(buf: &mut [u8], start: usize, extra: usize) {
    let len = (buf.len() - start - 4 + extra) as u32;
    buf[start..start + 4].copy_from_slice(&(len | LAST_FRAGMENT).to_be_bytes());
}

/// Splits a record mark into (last fragment, length).
#[inline]
pub fn parse_mark(mark: [u8; 4]) -> (bool, usize) {
    let v = u32::from_be_bytes(mark);
    (v & LAST_FRAGMENT != 0, (v & !LAST_FRAGMENT) as usize)
}

/// Parses a reply header up to the procedure's result; returns its xid. The cursor is left at
/// the first byte of the result.
pub fn parse_reply(r: &mut XdrReader<'_>) -> Result<u32, RpcError> {
    let xid = r.u32()?;
    if r.u32()? != REPLY {
        return Err(RpcError::Bad("a call where a reply was expected"));
    }
    match r.u32()? {
        0 => {
            // MSG_ACCEPTED: verifier, then accept_stat.
            r.u32()?;
            r.opaque(MAX_AUTH_BYTES)?;
            match r.u32()? {
                0 => Ok(xid),
                1 => Err(RpcError::ProgramUnavailable(0)),
                2 => {
                    let (low, high) = (r.u32()?, r.u32()?);
                    Err(RpcError::VersionMismatch { prog: 0, low, high })
                }
                3 => Err(RpcError::ProcedureUnavailable(0)),
                4 => Err(RpcError::GarbageArgs),
                5 => Err(RpcError::SystemError),
                v => Err(RpcError::Xdr(XdrError::Discriminant(v))),
            }
        }
        1 => match r.u32()? {
            0 => {
                let (low, high) = (r.u32()?, r.u32()?);
                Err(RpcError::Denied(format!(
                    "RPC version mismatch (it speaks {low}..{high})"
                )))
            }
            1 => {
                let why = match r.u32()? {
                    1 => "bad credential",
                    2 => "credential rejected, begin a new session",
                    3 => "bad verifier",
                    4 => "verifier rejected",
                    5 => "authentication too weak",
                    _ => "authentication failed",
                };
                Err(RpcError::Denied(why.into()))
            }
            v => Err(RpcError::Xdr(XdrError::Discriminant(v))),
        },
        v => Err(RpcError::Xdr(XdrError::Discriminant(v))),
    }
}

/// A parsed call header (server side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallHeader {
    /// Transaction id, echoed in the reply.
    pub xid: u32,
    /// Program number.
    pub prog: u32,
    /// Program version.
    pub vers: u32,
    /// Procedure number.
    pub proc_: u32,
    /// AUTH_SYS uid and gid, when the caller sent AUTH_SYS.
    pub unix: Option<(u32, u32)>,
}

/// Parses a call header; the cursor is left at the first argument byte. `Err` with the xid
/// when the call is well-formed up to an unsupported RPC version (to be answered
/// `RPC_MISMATCH`).
pub fn parse_call(r: &mut XdrReader<'_>) -> Result<CallHeader, RpcError> {
    let xid = r.u32()?;
    if r.u32()? != CALL {
        return Err(RpcError::Bad("a reply where a call was expected"));
    }
    let rpcvers = r.u32()?;
    let (prog, vers, proc_) = (r.u32()?, r.u32()?, r.u32()?);
    let flavor = r.u32()?;
    let cred = r.opaque(MAX_AUTH_BYTES)?;
    r.u32()?;
    r.opaque(MAX_AUTH_BYTES)?;
    if rpcvers != RPC_VERSION {
        return Err(RpcError::Denied(format!("RPC version {rpcvers}")));
    }
    let unix = if flavor == AUTH_SYS {
        let mut c = XdrReader::new(cred);
        c.u32()?;
        c.opaque(255)?;
        Some((c.u32()?, c.u32()?))
    } else {
        None
    };
    Ok(CallHeader {
        xid,
        prog,
        vers,
        proc_,
        unix,
    })
}

/// How the server answers a call it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptStat {
    /// The result follows.
    Success,
    /// Program not offered.
    ProgUnavail,
    /// Version not offered: the range offered.
    ProgMismatch(u32, u32),
    /// Procedure not offered.
    ProcUnavail,
    /// Arguments not decodable.
    GarbageArgs,
}

/// Appends a record mark placeholder and an accepted-reply header (server side); returns the
/// record's start for [`finish_record`].
pub fn begin_reply(buf: &mut Vec<u8>, xid: u32, stat: AcceptStat) -> usize {
    let start = buf.len();
    put_u32(buf, 0);
    reply_header(buf, xid, stat);
    start
}

/// Appends an accepted-reply header without a record mark (server side).
pub fn reply_header(buf: &mut Vec<u8>, xid: u32, stat: AcceptStat) {
    put_u32(buf, xid);
    put_u32(buf, REPLY);
    put_u32(buf, 0); // MSG_ACCEPTED
    put_u32(buf, AUTH_NONE);
    put_u32(buf, 0);
    match stat {
        AcceptStat::Success => put_u32(buf, 0),
        AcceptStat::ProgUnavail => put_u32(buf, 1),
        AcceptStat::ProgMismatch(lo, hi) => {
            put_u32(buf, 2);
            put_u32(buf, lo);
            put_u32(buf, hi);
        }
        AcceptStat::ProcUnavail => put_u32(buf, 3),
        AcceptStat::GarbageArgs => put_u32(buf, 4),
    }
}

/// Appends a denied reply for a wrong RPC version (server side).
pub fn rpc_mismatch_reply(buf: &mut Vec<u8>, xid: u32) {
    let start = buf.len();
    put_u32(buf, 0);
    put_u32(buf, xid);
    put_u32(buf, REPLY);
    put_u32(buf, 1); // MSG_DENIED
    put_u32(buf, 0); // RPC_MISMATCH
    put_u32(buf, RPC_VERSION);
    put_u32(buf, RPC_VERSION);
    finish_record(buf, start, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_then_reply() {
        let mut b = Vec::new();
        let s = begin_call(&mut b, 42, 100003, 3, 6, &AuthSys::new("h", 1000, 100));
        put_u32(&mut b, 9);
        finish_record(&mut b, s, 0);
        let (last, len) = parse_mark(b[..4].try_into().unwrap());
        assert!(last);
        assert_eq!(len, b.len() - 4);
        let mut r = XdrReader::new(&b[4..]);
        let h = parse_call(&mut r).unwrap();
        assert_eq!((h.xid, h.prog, h.vers, h.proc_), (42, 100003, 3, 6));
        assert_eq!(h.unix, Some((1000, 100)));
        assert_eq!(r.u32().unwrap(), 9);

        let mut b = Vec::new();
        let s = begin_reply(&mut b, 42, AcceptStat::Success);
        put_u32(&mut b, 0);
        finish_record(&mut b, s, 0);
        let mut r = XdrReader::new(&b[4..]);
        assert_eq!(parse_reply(&mut r).unwrap(), 42);
        assert_eq!(r.remaining(), 4);

        let mut b = Vec::new();
        let s = begin_reply(&mut b, 7, AcceptStat::ProgMismatch(2, 4));
        finish_record(&mut b, s, 0);
        let e = parse_reply(&mut XdrReader::new(&b[4..])).unwrap_err();
        assert!(matches!(
            e,
            RpcError::VersionMismatch {
                low: 2,
                high: 4,
                ..
            }
        ));

        let mut b = Vec::new();
        rpc_mismatch_reply(&mut b, 7);
        let e = parse_reply(&mut XdrReader::new(&b[4..])).unwrap_err();
        assert!(matches!(e, RpcError::Denied(_)));
    }

    #[test]
    fn truncated_reply_is_an_error() {
        let mut b = Vec::new();
        let s = begin_reply(&mut b, 1, AcceptStat::Success);
        finish_record(&mut b, s, 0);
        for cut in 4..b.len() - 1 {
            assert!(parse_reply(&mut XdrReader::new(&b[4..cut])).is_err());
        }
    }
}
