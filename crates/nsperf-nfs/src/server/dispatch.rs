//! One call in, one reply out: decodes the arguments of the portmapper, MOUNT and NFSv3
//! procedures the server offers, runs them on the [`ExportFs`], and encodes the reply.
//! Pure with respect to the network (the connection loop in [`super`] does the I/O), so the
//! fuzz target drives it with arbitrary bytes.

use std::net::SocketAddr;

use super::fs::ExportFs;
use crate::proto::{
    self, FileHandle, NfsStat, SetAttr, encode_post_op_attr, encode_wcc_data, proc3,
};
use crate::rpc::{self, AcceptStat, CallHeader};
use crate::xdr::{XdrError, XdrReader, pad4, put_bool, put_opaque, put_u32, put_u64};

/// Largest READ or WRITE served (what FSINFO states).
pub const MAX_IO: usize = 1 << 20;

/// What a dispatcher needs besides the file system.
#[derive(Debug)]
pub struct Context {
    /// The exported directory.
    pub fs: ExportFs,
    /// The export's name in MOUNT (its path).
    pub export: String,
    /// The port MOUNT and NFS listen on.
    pub port: u16,
    /// Changes when the server restarts (WRITE/COMMIT verifier).
    pub verifier: u64,
    /// What it served, by its own count.
    pub served: std::sync::Arc<super::ServedCounters>,
}

/// Handles one call whose header was parsed; the arguments are in `args`. Appends the whole
/// reply record to `out`, except a READ's data: `Ok(n)` means `data[..n]` and its padding
/// follow `out` on the wire (the record mark counts them).
pub fn dispatch(
    cx: &Context,
    local: SocketAddr,
    h: &CallHeader,
    args: &mut XdrReader<'_>,
    out: &mut Vec<u8>,
    data: &mut [u8],
) -> usize {
    let start = out.len();
    put_u32(out, 0); // record mark, written by finish_record
    cx.served.call();
    let r = match h.prog {
        proto::PMAP_PROG => portmap(cx, local, h, args, out),
        proto::MOUNT_PROG if h.vers == proto::MOUNT_VERS => mount(cx, h, args, out),
        proto::MOUNT_PROG => Err(Reject(AcceptStat::ProgMismatch(3, 3))),
        proto::NFS_PROG if h.vers == proto::NFS_VERS => nfs(cx, h, args, out, data),
        proto::NFS_PROG => Err(Reject(AcceptStat::ProgMismatch(3, 3))),
        _ => Err(Reject(AcceptStat::ProgUnavail)),
    };
    match r {
        Ok(payload) => {
            rpc::finish_record(out, start, pad4(payload));
            payload
        }
        Err(Reject(stat)) => {
            out.truncate(start);
            let s = rpc::begin_reply(out, h.xid, stat);
            rpc::finish_record(out, s, 0);
            0
        }
    }
}

/// A call answered without a result (program, version or procedure not offered, arguments
/// not decodable).
struct Reject(AcceptStat);

impl From<XdrError> for Reject {
    fn from(_: XdrError) -> Reject {
        Reject(AcceptStat::GarbageArgs)
    }
}

type Res = Result<usize, Reject>;

fn ok_header(out: &mut Vec<u8>, xid: u32) {
    rpc::reply_header(out, xid, AcceptStat::Success);
}

fn portmap(
    cx: &Context,
    local: SocketAddr,
    h: &CallHeader,
    a: &mut XdrReader<'_>,
    out: &mut Vec<u8>,
) -> Res {
    let ours = |prog: u32, vers: u32| {
        (prog == proto::MOUNT_PROG && vers == proto::MOUNT_VERS)
            || (prog == proto::NFS_PROG && vers == proto::NFS_VERS)
            || prog == proto::PMAP_PROG
    };
    match (h.vers, h.proc_) {
        (2..=4, 0) => ok_header(out, h.xid),
        (2, 3) => {
            let (prog, vers, prot) = (a.u32()?, a.u32()?, a.u32()?);
            a.u32()?;
            ok_header(out, h.xid);
            let port = if ours(prog, vers) && prot == proto::IPPROTO_TCP {
                cx.port as u32
            } else {
                0
            };
            put_u32(out, port);
        }
        (2, 4) => {
            ok_header(out, h.xid);
            for (prog, vers) in [
                (proto::MOUNT_PROG, proto::MOUNT_VERS),
                (proto::NFS_PROG, proto::NFS_VERS),
            ] {
                put_bool(out, true);
                put_u32(out, prog);
                put_u32(out, vers);
                put_u32(out, proto::IPPROTO_TCP);
                put_u32(out, cx.port as u32);
            }
            put_bool(out, false);
        }
        (3 | 4, 3) => {
            // rpcbind GETADDR: the universal address "h1.h2.h3.h4.p1.p2".
            let (prog, vers) = (a.u32()?, a.u32()?);
            let netid = a.opaque(64)?.to_vec();
            a.opaque(128)?;
            a.opaque(128)?;
            ok_header(out, h.xid);
            let tcp = netid == b"tcp" || netid == b"tcp6";
            let uaddr = if ours(prog, vers) && tcp {
                let p = cx.port;
                format!("{}.{}.{}", local.ip(), p >> 8, p & 0xff)
            } else {
                String::new()
            };
            put_opaque(out, uaddr.as_bytes());
        }
        (2..=4, _) => return Err(Reject(AcceptStat::ProcUnavail)),
        _ => return Err(Reject(AcceptStat::ProgMismatch(2, 4))),
    }
    Ok(0)
}

fn mount(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    match h.proc_ {
        0 | 4 => ok_header(out, h.xid),
        1 => {
            let path = a.opaque(proto::MNTPATHLEN)?;
            ok_header(out, h.xid);
            let path = std::str::from_utf8(path)
                .unwrap_or("")
                .trim_end_matches('/');
            let export = cx.export.trim_end_matches('/');
            if path == export || (path.is_empty() && export.is_empty()) {
                put_u32(out, 0);
                cx.fs.root_handle().encode(out);
                put_u32(out, 1);
                put_u32(out, rpc::AUTH_SYS);
            } else {
                put_u32(out, NfsStat::NOENT.0);
            }
        }
        2 => {
            ok_header(out, h.xid);
            put_bool(out, false);
        }
        3 => {
            a.opaque(proto::MNTPATHLEN)?;
            ok_header(out, h.xid);
        }
        5 => {
            ok_header(out, h.xid);
            put_bool(out, true);
            put_opaque(out, cx.export.as_bytes());
            put_bool(out, false); // no groups: everyone
            put_bool(out, false);
        }
        _ => return Err(Reject(AcceptStat::ProcUnavail)),
    }
    Ok(0)
}

fn fh(a: &mut XdrReader<'_>) -> Result<FileHandle, Reject> {
    Ok(FileHandle::decode(a)?)
}

fn status(out: &mut Vec<u8>, st: NfsStat) {
    put_u32(out, st.0);
}

/// The reply of a procedure that answers with the attributes of `f` and then `rest` (ACCESS,
/// FSSTAT, FSINFO, PATHCONF); when `f` has none, its status and no attributes.
fn with_attr(fs: &ExportFs, f: &FileHandle, out: &mut Vec<u8>, rest: impl FnOnce(&mut Vec<u8>)) {
    match fs.getattr(f) {
        Ok(at) => {
            status(out, NfsStat::OK);
            encode_post_op_attr(out, Some(&at));
            rest(out);
        }
        Err(st) => {
            status(out, st);
            encode_post_op_attr(out, None);
        }
    }
}

/// The reply of a procedure that changed `f` (SETATTR, WRITE, COMMIT): the outcome of the
/// change with the attributes after it, then `rest`; on failure its status and no
/// attributes.
fn with_wcc(
    outcome: Result<crate::proto::Attr, NfsStat>,
    out: &mut Vec<u8>,
    rest: impl FnOnce(&mut Vec<u8>),
) {
    match outcome {
        Ok(at) => {
            status(out, NfsStat::OK);
            encode_wcc_data(out, Some(&at));
            rest(out);
        }
        Err(st) => {
            status(out, st);
            encode_wcc_data(out, None);
        }
    }
}

/// An NFSv3 call: one function per procedure.
fn nfs(
    cx: &Context,
    h: &CallHeader,
    a: &mut XdrReader<'_>,
    out: &mut Vec<u8>,
    data: &mut [u8],
) -> Res {
    match h.proc_ {
        proc3::NULL => {
            ok_header(out, h.xid);
            Ok(0)
        }
        proc3::GETATTR => getattr(cx, h, a, out),
        proc3::SETATTR => setattr(cx, h, a, out),
        proc3::LOOKUP => lookup(cx, h, a, out),
        proc3::ACCESS => access(cx, h, a, out),
        proc3::READ => read(cx, h, a, out, data),
        proc3::WRITE => write(cx, h, a, out),
        proc3::CREATE | proc3::MKDIR => create(cx, h, a, out),
        proc3::REMOVE | proc3::RMDIR => remove(cx, h, a, out),
        proc3::READDIR => readdir_call(cx, h, a, out),
        proc3::FSSTAT => fsstat(cx, h, a, out),
        proc3::FSINFO => fsinfo(cx, h, a, out),
        proc3::PATHCONF => pathconf(cx, h, a, out),
        proc3::COMMIT => commit(cx, h, a, out),
        // SYMLINK, RENAME, LINK, READDIRPLUS, …: not offered.
        _ => Err(Reject(AcceptStat::ProcUnavail)),
    }
}

/// GETATTR: the attributes of a handle.
fn getattr(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let f = fh(a)?;
    ok_header(out, h.xid);
    match fs.getattr(&f) {
        Ok(at) => {
            status(out, NfsStat::OK);
            at.encode(out);
        }
        Err(st) => status(out, st),
    }
    Ok(0)
}

/// SETATTR (the guard is not checked).
fn setattr(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let f = fh(a)?;
    let s = SetAttr::decode(a)?;
    if a.bool()? {
        a.skip(8)?;
    }
    ok_header(out, h.xid);
    with_wcc(fs.setattr(&f, &s), out, |_| {});
    Ok(0)
}

/// LOOKUP: a name in a directory.
fn lookup(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let d = fh(a)?;
    let name = a.opaque(proto::NAME_MAX)?;
    ok_header(out, h.xid);
    let dattr = fs.getattr(&d).ok();
    match fs.lookup(&d, name) {
        Ok((f, at)) => {
            status(out, NfsStat::OK);
            f.encode(out);
            encode_post_op_attr(out, Some(&at));
            encode_post_op_attr(out, dattr.as_ref());
        }
        Err(st) => {
            status(out, st);
            encode_post_op_attr(out, dattr.as_ref());
        }
    }
    Ok(0)
}

/// ACCESS: what the caller may do (no writes on a read-only export).
fn access(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let f = fh(a)?;
    let mut want = a.u32()?;
    ok_header(out, h.xid);
    with_attr(fs, &f, out, |out| {
        if fs.read_only() {
            want &= !(0x04 | 0x08 | 0x10);
        }
        put_u32(out, want);
    });
    Ok(0)
}

/// READ: the data goes into `data`, after the reply header (`Ok(n)`: `data[..n]` follows).
fn read(
    cx: &Context,
    h: &CallHeader,
    a: &mut XdrReader<'_>,
    out: &mut Vec<u8>,
    data: &mut [u8],
) -> Res {
    let fs = &cx.fs;
    let f = fh(a)?;
    let (offset, count) = (a.u64()?, a.u32()? as usize);
    ok_header(out, h.xid);
    let n = count.min(MAX_IO).min(data.len());
    match fs.read(&f, offset, &mut data[..n]) {
        Ok((got, eof, at)) => {
            status(out, NfsStat::OK);
            encode_post_op_attr(out, Some(&at));
            put_u32(out, got as u32);
            put_bool(out, eof);
            put_u32(out, got as u32);
            return Ok(got);
        }
        Err(st) => {
            status(out, st);
            encode_post_op_attr(out, None);
        }
    }
    Ok(0)
}

/// WRITE, at the stability asked (UNSTABLE, DATA_SYNC, FILE_SYNC).
fn write(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let f = fh(a)?;
    let (offset, count, stable) = (a.u64()?, a.u32()?, a.u32()?);
    let bytes = a.opaque(MAX_IO)?;
    if bytes.len() != count as usize || stable > 2 {
        return Err(Reject(AcceptStat::GarbageArgs));
    }
    ok_header(out, h.xid);
    let done = fs.write(&f, offset, bytes, stable);
    if done.is_ok() && stable > 0 {
        cx.served.stable_write();
    }
    with_wcc(done, out, |out| {
        put_u32(out, count);
        put_u32(out, stable);
        put_u64(out, cx.verifier);
    });
    Ok(0)
}

/// CREATE (UNCHECKED, GUARDED, EXCLUSIVE) and MKDIR.
fn create(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let d = fh(a)?;
    let name = a.opaque(proto::NAME_MAX)?;
    let (exclusive, s) = if h.proc_ == proc3::MKDIR {
        (true, SetAttr::decode(a)?)
    } else {
        match a.u32()? {
            0 => (false, SetAttr::decode(a)?),
            1 => (true, SetAttr::decode(a)?),
            2 => {
                a.skip(8)?;
                (true, SetAttr::default())
            }
            _ => return Err(Reject(AcceptStat::GarbageArgs)),
        }
    };
    ok_header(out, h.xid);
    let r = if h.proc_ == proc3::MKDIR {
        fs.mkdir(&d, name, &s)
    } else {
        fs.create(&d, name, exclusive, &s)
    };
    let dattr = fs.getattr(&d).ok();
    match r {
        Ok((f, at)) => {
            status(out, NfsStat::OK);
            put_bool(out, true);
            f.encode(out);
            encode_post_op_attr(out, Some(&at));
            encode_wcc_data(out, dattr.as_ref());
        }
        Err(st) => {
            status(out, st);
            encode_wcc_data(out, dattr.as_ref());
        }
    }
    Ok(0)
}

/// REMOVE and RMDIR.
fn remove(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let d = fh(a)?;
    let name = a.opaque(proto::NAME_MAX)?;
    ok_header(out, h.xid);
    let r = fs.remove(&d, name, h.proc_ == proc3::RMDIR);
    status(out, r.err().unwrap_or(NfsStat::OK));
    encode_wcc_data(out, fs.getattr(&d).ok().as_ref());
    Ok(0)
}

/// READDIR: the arguments; the listing is [`readdir`]'s.
fn readdir_call(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let d = fh(a)?;
    let cookie = a.u64()?;
    a.skip(8)?;
    let count = (a.u32()? as usize).clamp(512, 1 << 20);
    ok_header(out, h.xid);
    readdir(fs, &d, cookie, count, out);
    Ok(0)
}

/// FSSTAT: the export file system's space.
fn fsstat(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let f = fh(a)?;
    ok_header(out, h.xid);
    with_attr(fs, &f, out, |out| {
        let (free, total) = fs.statvfs();
        for v in [total, free, free, 1 << 20, 1 << 20, 1 << 20] {
            put_u64(out, v);
        }
        put_u32(out, 0);
    });
    Ok(0)
}

/// FSINFO: the sizes the server takes (READ/WRITE up to [`MAX_IO`]).
fn fsinfo(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let f = fh(a)?;
    ok_header(out, h.xid);
    with_attr(fs, &f, out, |out| {
        let m = MAX_IO as u32;
        for v in [m, m, 4096, m, m, 4096, 64 << 10] {
            put_u32(out, v);
        }
        put_u64(out, i64::MAX as u64);
        put_u32(out, 0);
        put_u32(out, 1);
        put_u32(out, 0x1b); // LINK | SYMLINK | HOMOGENEOUS | CANSETTIME
    });
    Ok(0)
}

/// PATHCONF.
fn pathconf(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let f = fh(a)?;
    ok_header(out, h.xid);
    with_attr(fs, &f, out, |out| {
        put_u32(out, 1);
        put_u32(out, proto::NAME_MAX as u32);
        for v in [true, true, false, true] {
            put_bool(out, v);
        }
    });
    Ok(0)
}

/// COMMIT: the file's data made stable.
fn commit(cx: &Context, h: &CallHeader, a: &mut XdrReader<'_>, out: &mut Vec<u8>) -> Res {
    let fs = &cx.fs;
    let f = fh(a)?;
    a.u64()?;
    a.u32()?;
    ok_header(out, h.xid);
    let done = fs.commit(&f);
    if done.is_ok() {
        cx.served.commit();
    }
    with_wcc(done, out, |out| put_u64(out, cx.verifier));
    Ok(0)
}

fn readdir(fs: &ExportFs, d: &FileHandle, cookie: u64, count: usize, out: &mut Vec<u8>) {
    let (dattr, list) = match (fs.getattr(d), fs.readdir(d)) {
        (Ok(a), Ok(l)) => (a, l),
        (Err(st), _) | (_, Err(st)) => {
            status(out, st);
            encode_post_op_attr(out, None);
            return;
        }
    };
    status(out, NfsStat::OK);
    encode_post_op_attr(out, Some(&dattr));
    put_u64(out, 0); // cookie verifier
    let budget = out.len() + count.saturating_sub(128);
    let mut eof = true;
    for (i, (ino, name)) in list.iter().enumerate().skip(cookie as usize) {
        if out.len() + 24 + pad4(name.len()) > budget {
            eof = false;
            break;
        }
        put_bool(out, true);
        put_u64(out, *ino);
        put_opaque(out, name.as_bytes());
        put_u64(out, i as u64 + 1);
    }
    put_bool(out, false);
    put_bool(out, eof);
}
