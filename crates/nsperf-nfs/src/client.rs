//! The control path of NFSv3: one call at a time on a blocking connection ([`RpcConn`]) to
//! look up, create and remove files, read and write a little, and read the server's limits.
//! The connection is [`crate::rpc_conn`], the portmapper and MOUNT calls [`crate::mount`], a
//! mounted target directory [`crate::Session`]; the data path (many RPCs in flight) is
//! [`crate::pipeline`].

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::NfsError;
use crate::proto::{self, Attr, FileHandle, FsInfo, NfsStat, SetAttr, Stable, WriteResult, proc3};
use crate::rpc::RpcError;
use crate::rpc_conn::xdr;
use crate::xdr::{XdrReader, put_bool, put_opaque, put_u32, put_u64};

pub use crate::mount::{exports, getport, getport_within, pick_export};
pub use crate::rpc_conn::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, RpcConn, Timeouts, resolve};

/// Most READDIR calls one listing makes (a server whose listing never ends is an error).
pub const READDIR_MAX_CALLS: usize = 4096;

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

    /// Connects to the NFS service at `addr` within `t.connect`; replies may take `t.reply`.
    pub(crate) fn connect_within(addr: SocketAddr, t: Timeouts) -> Result<NfsClient, NfsError> {
        Ok(NfsClient {
            conn: RpcConn::connect_within("NFS", addr, t)?,
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
