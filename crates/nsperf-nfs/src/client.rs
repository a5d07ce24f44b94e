//! The control path of the client: one RPC at a time on a blocking connection, used to find
//! the services (portmapper), mount the export, look up, create and remove files, and read
//! the server's limits. The data path (many RPCs in flight) is [`crate::pipeline`].

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::NfsError;
use crate::proto::{
    self, Attr, FileHandle, FileType, FsInfo, NfsStat, SetAttr, Stable, WriteResult, proc3,
};
use crate::rpc::{self, AuthSys, MAX_FRAGMENT, RpcError};
use crate::url::NfsUrl;
use crate::xdr::{XdrReader, put_bool, put_opaque, put_u32, put_u64};

/// How long a control call or a connect may take before the server counts as gone.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection (portmapper, MOUNT, NFS) may take to be made, by default: an
/// unreachable server fails in seconds, not after the reply timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Most READDIR calls one listing makes (a server whose listing never ends is an error).
pub const READDIR_MAX_CALLS: usize = 4096;

/// The two waits of a session: for a connection to be made, and for each reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Connecting (TCP handshake).
    pub connect: Duration,
    /// Each reply on an established connection.
    pub reply: Duration,
}

impl Timeouts {
    /// `reply` for replies, and [`DEFAULT_CONNECT_TIMEOUT`] (at most `reply`) to connect.
    pub fn new(reply: Duration) -> Timeouts {
        Timeouts {
            connect: DEFAULT_CONNECT_TIMEOUT.min(reply),
            reply,
        }
    }
}

/// One blocking RPC connection.
#[derive(Debug)]
pub struct RpcConn {
    sock: TcpStream,
    addr: SocketAddr,
    xid: u32,
    cred: AuthSys,
    sbuf: Vec<u8>,
    rbuf: Vec<u8>,
}

impl RpcConn {
    /// Connects to the `what` service (for messages) at `addr`.
    pub fn connect(
        what: &'static str,
        addr: SocketAddr,
        timeout: Duration,
    ) -> Result<RpcConn, NfsError> {
        RpcConn::connect_within(
            what,
            addr,
            Timeouts {
                connect: timeout,
                reply: timeout,
            },
        )
    }

    /// Connects to the `what` service at `addr` within `t.connect`; replies may take
    /// `t.reply`.
    pub fn connect_within(
        what: &'static str,
        addr: SocketAddr,
        t: Timeouts,
    ) -> Result<RpcConn, NfsError> {
        let sock = crate::sock::connect(addr, t.connect).map_err(|source| NfsError::Connect {
            what,
            addr: addr.to_string(),
            source,
        })?;
        sock.set_read_timeout(Some(t.reply)).ok();
        sock.set_write_timeout(Some(t.reply)).ok();
        Ok(RpcConn {
            sock,
            addr,
            xid: initial_xid(),
            cred: AuthSys::current(),
            sbuf: Vec::with_capacity(4096),
            rbuf: Vec::with_capacity(4096),
        })
    }

    /// The peer.
    pub fn peer(&self) -> SocketAddr {
        self.addr
    }

    /// The socket, for a data path that goes on from calls made here.
    pub(crate) fn into_stream(self) -> TcpStream {
        self.sock
    }

    /// Calls `proc_` of `prog`/`vers` with the arguments `args` appends; returns a cursor at
    /// the start of the result.
    pub fn call(
        &mut self,
        op: &'static str,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: impl FnOnce(&mut Vec<u8>),
    ) -> Result<XdrReader<'_>, NfsError> {
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        self.sbuf.clear();
        let start = rpc::begin_call(&mut self.sbuf, xid, prog, vers, proc_, &self.cred);
        args(&mut self.sbuf);
        rpc::finish_record(&mut self.sbuf, start, 0);
        let lost = |e: std::io::Error| lost(op, e);
        self.sock.write_all(&self.sbuf).map_err(lost)?;
        self.rbuf.clear();
        loop {
            let mut mark = [0u8; 4];
            self.sock.read_exact(&mut mark).map_err(lost)?;
            let (last, len) = rpc::parse_mark(mark);
            if self.rbuf.len() + len > MAX_FRAGMENT {
                return Err(NfsError::Rpc {
                    what: op,
                    source: RpcError::Bad("reply longer than 4 MiB"),
                });
            }
            let at = self.rbuf.len();
            self.rbuf.resize(at + len, 0);
            self.sock.read_exact(&mut self.rbuf[at..]).map_err(lost)?;
            if last {
                break;
            }
        }
        let mut r = XdrReader::new(&self.rbuf);
        let got = rpc::parse_reply(&mut r).map_err(|e| NfsError::Rpc {
            what: op,
            source: with_prog(e, prog, proc_),
        })?;
        if got != xid {
            return Err(NfsError::Rpc {
                what: op,
                source: RpcError::Bad("reply to another call (xid mismatch)"),
            });
        }
        Ok(r)
    }
}

fn with_prog(e: RpcError, prog: u32, proc_: u32) -> RpcError {
    match e {
        RpcError::ProgramUnavailable(_) => RpcError::ProgramUnavailable(prog),
        RpcError::VersionMismatch { low, high, .. } => {
            RpcError::VersionMismatch { prog, low, high }
        }
        RpcError::ProcedureUnavailable(_) => RpcError::ProcedureUnavailable(proc_),
        e => e,
    }
}

/// An I/O error on an established connection: the server went away.
pub(crate) fn lost(what: &'static str, e: std::io::Error) -> NfsError {
    let why = match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
        std::io::ErrorKind::BrokenPipe => {
            "the connection broke (a write found it closed: broken pipe)".to_string()
        }
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            "no reply within the timeout".to_string()
        }
        std::io::ErrorKind::Interrupted if nsperf_core::signal::interrupted() => {
            return NfsError::Interrupted;
        }
        _ => e.to_string(),
    };
    NfsError::Lost { what, why }
}

/// A starting xid that differs between processes and runs, so replies meant for a previous
/// connection are never taken for ours.
pub(crate) fn initial_xid() -> u32 {
    (nsperf_core::clock::unix_time_ns() as u32) ^ (std::process::id() << 16)
}

fn xdr(what: &'static str) -> impl Fn(crate::xdr::XdrError) -> NfsError {
    move |e| NfsError::Rpc {
        what,
        source: RpcError::Xdr(e),
    }
}

/// Resolves `host:port`.
pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, NfsError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|source| NfsError::Connect {
            what: "host",
            addr: host.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| NfsError::Connect {
            what: "host",
            addr: host.to_string(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
}

/// Asks the portmapper at `host` for the TCP port of `prog`/`vers`.
pub fn getport(host: &str, prog: u32, vers: u32, timeout: Duration) -> Result<u16, NfsError> {
    getport_within(
        host,
        prog,
        vers,
        Timeouts {
            connect: timeout,
            reply: timeout,
        },
    )
}

/// [`getport`] with separate connect and reply timeouts.
pub fn getport_within(host: &str, prog: u32, vers: u32, t: Timeouts) -> Result<u16, NfsError> {
    let addr = resolve(host, proto::PMAP_PORT)?;
    let mut c = RpcConn::connect_within("portmapper", addr, t)?;
    let mut r = c.call(
        "GETPORT",
        proto::PMAP_PROG,
        proto::PMAP_VERS,
        proto::PMAP_GETPORT,
        |b| {
            put_u32(b, prog);
            put_u32(b, vers);
            put_u32(b, proto::IPPROTO_TCP);
            put_u32(b, 0);
        },
    )?;
    let port = r.u32().map_err(xdr("GETPORT"))?;
    if port == 0 || port > u16::MAX as u32 {
        return Err(NfsError::NotRegistered {
            what: if prog == proto::MOUNT_PROG {
                "MOUNT"
            } else {
                "NFS"
            },
            host: host.to_string(),
        });
    }
    Ok(port as u16)
}

/// The exports a MOUNT server lists.
pub fn exports(c: &mut RpcConn) -> Result<Vec<String>, NfsError> {
    let mut r = c.call(
        "EXPORT",
        proto::MOUNT_PROG,
        proto::MOUNT_VERS,
        proto::MOUNT_EXPORT,
        |_| {},
    )?;
    let mut out = Vec::new();
    let x = xdr("EXPORT");
    // Bounded: a hostile server cannot make the client loop or allocate without limit.
    while r.bool().map_err(&x)? && out.len() < 4096 {
        let dir = r.opaque(proto::MNTPATHLEN).map_err(&x)?;
        out.push(String::from_utf8_lossy(dir).into_owned());
        let mut groups = 0;
        while r.bool().map_err(&x)? && groups < 4096 {
            r.opaque(proto::MNTPATHLEN).map_err(&x)?;
            groups += 1;
        }
    }
    Ok(out)
}

/// The longest export that is a prefix (component-wise) of `path`.
pub fn pick_export<'a>(exports: &'a [String], path: &str) -> Option<&'a str> {
    exports
        .iter()
        .map(|e| e.trim_end_matches('/'))
        .filter(|e| {
            e.is_empty()
                || path == *e
                || (path.starts_with(*e) && path.as_bytes().get(e.len()) == Some(&b'/'))
        })
        .max_by_key(|e| e.len())
        .map(|e| if e.is_empty() { "/" } else { e })
}

/// The control connection to an NFS server, with the procedures nsperf uses.
#[derive(Debug)]
pub struct NfsClient {
    conn: RpcConn,
}

impl NfsClient {
    /// Connects to the NFS service at `addr`.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<NfsClient, NfsError> {
        Ok(NfsClient {
            conn: RpcConn::connect("NFS", addr, timeout)?,
        })
    }

    fn call(
        &mut self,
        op: &'static str,
        proc_: u32,
        args: impl FnOnce(&mut Vec<u8>),
    ) -> Result<XdrReader<'_>, NfsError> {
        self.conn
            .call(op, proto::NFS_PROG, proto::NFS_VERS, proc_, args)
    }

    /// NULL: a round trip doing nothing.
    pub fn null(&mut self) -> Result<(), NfsError> {
        self.call("NULL", proc3::NULL, |_| {}).map(|_| ())
    }

    /// GETATTR.
    pub fn getattr(&mut self, fh: &FileHandle, name: &str) -> Result<Attr, NfsError> {
        let mut r = self.call("GETATTR", proc3::GETATTR, |b| fh.encode(b))?;
        let x = xdr("GETATTR");
        let st = NfsStat(r.u32().map_err(&x)?);
        if st != NfsStat::OK {
            return Err(NfsError::nfs("GETATTR", name, st));
        }
        Attr::decode(&mut r).map_err(x)
    }

    /// LOOKUP `name` in `dir`.
    pub fn lookup(
        &mut self,
        dir: &FileHandle,
        name: &str,
    ) -> Result<(FileHandle, Option<Attr>), NfsError> {
        let mut r = self.call("LOOKUP", proc3::LOOKUP, |b| {
            proto::encode_dirop(b, dir, name.as_bytes())
        })?;
        let x = xdr("LOOKUP");
        let st = NfsStat(r.u32().map_err(&x)?);
        if st != NfsStat::OK {
            return Err(NfsError::nfs("LOOKUP", name, st));
        }
        let fh = FileHandle::decode(&mut r).map_err(&x)?;
        let attr = proto::decode_post_op_attr(&mut r).map_err(&x)?;
        Ok((fh, attr))
    }

    /// CREATE `name` in `dir`, failing if it exists (GUARDED), mode 0600.
    pub fn create(&mut self, dir: &FileHandle, name: &str) -> Result<FileHandle, NfsError> {
        let fh = {
            let mut r = self.call("CREATE", proc3::CREATE, |b| {
                proto::encode_dirop(b, dir, name.as_bytes());
                put_u32(b, 1); // GUARDED
                SetAttr {
                    mode: Some(0o600),
                    size: None,
                }
                .encode(b);
            })?;
            new_object(&mut r, "CREATE", name)?
        };
        match fh {
            Some(fh) => Ok(fh),
            None => self.lookup(dir, name).map(|(fh, _)| fh),
        }
    }

    /// MKDIR `name` in `dir`, mode 0700.
    pub fn mkdir(&mut self, dir: &FileHandle, name: &str) -> Result<FileHandle, NfsError> {
        let fh = {
            let mut r = self.call("MKDIR", proc3::MKDIR, |b| {
                proto::encode_dirop(b, dir, name.as_bytes());
                SetAttr {
                    mode: Some(0o700),
                    size: None,
                }
                .encode(b);
            })?;
            new_object(&mut r, "MKDIR", name)?
        };
        match fh {
            Some(fh) => Ok(fh),
            None => self.lookup(dir, name).map(|(fh, _)| fh),
        }
    }

    /// REMOVE a file.
    pub fn remove(&mut self, dir: &FileHandle, name: &str) -> Result<(), NfsError> {
        self.dirop_status("REMOVE", proc3::REMOVE, dir, name)
    }

    /// RMDIR an empty directory.
    pub fn rmdir(&mut self, dir: &FileHandle, name: &str) -> Result<(), NfsError> {
        self.dirop_status("RMDIR", proc3::RMDIR, dir, name)
    }

    fn dirop_status(
        &mut self,
        op: &'static str,
        p: u32,
        dir: &FileHandle,
        name: &str,
    ) -> Result<(), NfsError> {
        let mut r = self.call(op, p, |b| proto::encode_dirop(b, dir, name.as_bytes()))?;
        let st = NfsStat(r.u32().map_err(xdr(op))?);
        if st != NfsStat::OK {
            return Err(NfsError::nfs(op, name, st));
        }
        Ok(())
    }

    /// READDIR: the names in directory `dir` (`name` for messages), without "." and "..",
    /// one call per page of at most 64 KiB. Bounded: at most [`READDIR_MAX_CALLS`] calls.
    pub fn readdir(&mut self, dir: &FileHandle, name: &str) -> Result<Vec<String>, NfsError> {
        let (mut cookie, mut verifier) = (0u64, 0u64);
        let mut out = Vec::new();
        for _ in 0..READDIR_MAX_CALLS {
            let mut r = self.call("READDIR", proc3::READDIR, |b| {
                dir.encode(b);
                put_u64(b, cookie);
                put_u64(b, verifier);
                put_u32(b, 64 << 10);
            })?;
            let page = proto::decode_readdir(&mut r)
                .map_err(xdr("READDIR"))?
                .map_err(|st| NfsError::nfs("READDIR", name, st))?;
            let Some(last) = page.entries.last() else {
                return Ok(out);
            };
            cookie = last.cookie;
            verifier = page.verifier;
            out.extend(
                page.entries
                    .into_iter()
                    .map(|e| e.name)
                    .filter(|n| n != "." && n != ".."),
            );
            if page.eof {
                return Ok(out);
            }
        }
        Err(NfsError::Rpc {
            what: "READDIR",
            source: RpcError::Bad("directory listing does not end"),
        })
    }

    /// SETATTR the size (truncate or extend).
    pub fn set_size(&mut self, fh: &FileHandle, name: &str, size: u64) -> Result<(), NfsError> {
        let mut r = self.call("SETATTR", proc3::SETATTR, |b| {
            fh.encode(b);
            SetAttr {
                mode: None,
                size: Some(size),
            }
            .encode(b);
            put_bool(b, false); // no guard
        })?;
        let st = NfsStat(r.u32().map_err(xdr("SETATTR"))?);
        if st != NfsStat::OK {
            return Err(NfsError::nfs("SETATTR", name, st));
        }
        Ok(())
    }

    /// FSINFO of the file system holding `fh`.
    pub fn fsinfo(&mut self, fh: &FileHandle) -> Result<FsInfo, NfsError> {
        let mut r = self.call("FSINFO", proc3::FSINFO, |b| fh.encode(b))?;
        let x = xdr("FSINFO");
        let st = NfsStat(r.u32().map_err(&x)?);
        if st != NfsStat::OK {
            return Err(NfsError::nfs("FSINFO", "/", st));
        }
        FsInfo::decode(&mut r).map_err(x)
    }

    /// READ up to `buf.len()` bytes at `offset` into `buf`; returns (bytes, eof).
    pub fn read(
        &mut self,
        fh: &FileHandle,
        name: &str,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(usize, bool), NfsError> {
        let mut r = self.call("READ", proc3::READ, |b| {
            fh.encode(b);
            put_u64(b, offset);
            put_u32(b, buf.len() as u32);
        })?;
        let x = xdr("READ");
        let head = proto::decode_read_head(&mut r).map_err(&x)?;
        let head = head.map_err(|st| NfsError::nfs("READ", name, st))?;
        let n = head.count as usize;
        if n > buf.len() {
            return Err(NfsError::Rpc {
                what: "READ",
                source: RpcError::Bad("more data than asked for"),
            });
        }
        buf[..n].copy_from_slice(r.fixed(n).map_err(x)?);
        Ok((n, head.eof))
    }

    /// WRITE `data` at `offset`.
    pub fn write(
        &mut self,
        fh: &FileHandle,
        name: &str,
        offset: u64,
        data: &[u8],
        stable: Stable,
    ) -> Result<WriteResult, NfsError> {
        let mut r = self.call("WRITE", proc3::WRITE, |b| {
            fh.encode(b);
            put_u64(b, offset);
            put_u32(b, data.len() as u32);
            put_u32(b, stable.to_wire());
            put_opaque(b, data);
        })?;
        proto::decode_write(&mut r)
            .map_err(xdr("WRITE"))?
            .map_err(|st| NfsError::nfs("WRITE", name, st))
    }

    /// COMMIT everything written unstably to `fh`; returns the write verifier.
    pub fn commit(&mut self, fh: &FileHandle, name: &str) -> Result<u64, NfsError> {
        let mut r = self.call("COMMIT", proc3::COMMIT, |b| {
            fh.encode(b);
            put_u64(b, 0);
            put_u32(b, 0);
        })?;
        let x = xdr("COMMIT");
        let st = NfsStat(r.u32().map_err(&x)?);
        proto::skip_wcc_data(&mut r).map_err(&x)?;
        if st != NfsStat::OK {
            return Err(NfsError::nfs("COMMIT", name, st));
        }
        r.u64().map_err(x)
    }
}

/// Decodes a CREATE/MKDIR result: the new handle when the server sent it.
fn new_object(
    r: &mut XdrReader<'_>,
    op: &'static str,
    name: &str,
) -> Result<Option<FileHandle>, NfsError> {
    let x = xdr(op);
    let st = NfsStat(r.u32().map_err(&x)?);
    if st != NfsStat::OK {
        return Err(NfsError::nfs(op, name, st));
    }
    if r.bool().map_err(&x)? {
        Ok(Some(FileHandle::decode(r).map_err(&x)?))
    } else {
        Ok(None)
    }
}

/// A mounted export: where the services are, the handle of the target directory, and the
/// server's limits. Unmounts (UMNT) when dropped.
#[derive(Debug)]
pub struct Session {
    /// The target.
    pub url: NfsUrl,
    /// The export mounted.
    pub export: String,
    /// Where NFS answers.
    pub nfs_addr: SocketAddr,
    /// The directory named by the URL.
    pub dir: FileHandle,
    /// The server's limits (FSINFO).
    pub fsinfo: FsInfo,
    /// The control connection.
    pub client: NfsClient,
    mount_addr: SocketAddr,
    timeout: Duration,
}

impl Session {
    /// Finds the services, mounts the export and looks up the directory of `url`; replies
    /// may take `timeout`, connects [`Timeouts::new`] allows.
    pub fn open(url: &NfsUrl, timeout: Duration) -> Result<Session, NfsError> {
        Session::open_within(url, Timeouts::new(timeout))
    }

    /// [`Session::open`] with its connect and reply timeouts given.
    pub fn open_within(url: &NfsUrl, t: Timeouts) -> Result<Session, NfsError> {
        let timeout = t.reply;
        let (mount_port, nfs_port) = match url.port {
            Some(p) => (p, p),
            None => (
                getport_within(&url.host, proto::MOUNT_PROG, proto::MOUNT_VERS, t)?,
                getport_within(&url.host, proto::NFS_PROG, proto::NFS_VERS, t)?,
            ),
        };
        let mount_addr = resolve(&url.host, mount_port)?;
        let nfs_addr = resolve(&url.host, nfs_port)?;
        let mut m = RpcConn::connect_within("MOUNT", mount_addr, t)?;
        let export = match exports(&mut m) {
            Ok(list) => pick_export(&list, &url.path)
                .map(str::to_string)
                .ok_or_else(|| NfsError::Mount {
                    path: format!("{} (exports: {})", url.path, list.join(", ")),
                    stat: NfsStat::NOENT,
                })?,
            // Some servers hide their export list: try the whole path.
            Err(_) => url.path.clone(),
        };
        let root = mnt(&mut m, &export)?;
        let mut client = NfsClient {
            conn: RpcConn::connect_within("NFS", nfs_addr, t)?,
        };
        let mut dir = root;
        let mut walked = export.trim_end_matches('/').to_string();
        let rest = url.path[export.len().min(url.path.len())..].to_string();
        for c in rest.split('/').filter(|c| !c.is_empty()) {
            walked.push('/');
            walked.push_str(c);
            let (fh, attr) = client.lookup(&dir, c).map_err(|e| match e {
                NfsError::Nfs { op, stat, .. } => NfsError::Nfs {
                    op,
                    path: walked.clone(),
                    stat,
                },
                e => e,
            })?;
            if attr.is_some_and(|a| a.ftype != FileType::Directory) {
                return Err(NfsError::NotADirectory(walked));
            }
            dir = fh;
        }
        let attr = client.getattr(&dir, &url.path)?;
        if attr.ftype != FileType::Directory {
            return Err(NfsError::NotADirectory(url.path.clone()));
        }
        let fsinfo = client.fsinfo(&dir)?;
        Ok(Session {
            url: url.clone(),
            export,
            nfs_addr,
            dir,
            fsinfo,
            client,
            mount_addr,
            timeout,
        })
    }

    /// The timeout of calls and connects.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Best effort: the server forgets the mount (it only informs `showmount`).
        if let Ok(mut m) = RpcConn::connect("MOUNT", self.mount_addr, Duration::from_secs(2)) {
            let export = self.export.clone();
            let _ = m.call(
                "UMNT",
                proto::MOUNT_PROG,
                proto::MOUNT_VERS,
                proto::MOUNT_UMNT,
                |b| put_opaque(b, export.as_bytes()),
            );
        }
    }
}

/// MNT `path`: the root handle of the export.
fn mnt(m: &mut RpcConn, path: &str) -> Result<FileHandle, NfsError> {
    let mut r = m.call(
        "MNT",
        proto::MOUNT_PROG,
        proto::MOUNT_VERS,
        proto::MOUNT_MNT,
        |b| put_opaque(b, path.as_bytes()),
    )?;
    let x = xdr("MNT");
    let st = NfsStat(r.u32().map_err(&x)?);
    if st != NfsStat::OK {
        return Err(NfsError::Mount {
            path: path.to_string(),
            stat: st,
        });
    }
    FileHandle::decode(&mut r).map_err(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_choice() {
        let ex: Vec<String> = ["/srv", "/srv/nfs", "/srv/nfs2", "/data/"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(pick_export(&ex, "/srv/nfs/x/y"), Some("/srv/nfs"));
        assert_eq!(pick_export(&ex, "/srv/nfs2"), Some("/srv/nfs2"));
        assert_eq!(pick_export(&ex, "/srv/nfs3"), Some("/srv"));
        assert_eq!(pick_export(&ex, "/data/a"), Some("/data"));
        assert_eq!(pick_export(&ex, "/other"), None);
        assert_eq!(pick_export(&["/".to_string()], "/a"), Some("/"));
    }
}
