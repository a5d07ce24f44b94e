//! The services around NFSv3, one call at a time on an [`RpcConn`]: the portmapper's GETPORT
//! (where MOUNT and NFS listen) and MOUNT's EXPORT, MNT and UMNT (which export holds a path,
//! and its root handle).

use std::time::Duration;

use crate::error::NfsError;
use crate::proto::{self, FileHandle, NfsStat};
use crate::rpc_conn::{RpcConn, Timeouts, resolve, xdr};
use crate::xdr::{put_opaque, put_u32};

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

/// MNT `path`: the root handle of the export.
pub(crate) fn mnt(m: &mut RpcConn, path: &str) -> Result<FileHandle, NfsError> {
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

/// UMNT `path`: the server forgets the mount (it only informs `showmount`); the reply is
/// not looked at.
pub(crate) fn umnt(m: &mut RpcConn, path: &str) {
    let _ = m.call(
        "UMNT",
        proto::MOUNT_PROG,
        proto::MOUNT_VERS,
        proto::MOUNT_UMNT,
        |b| put_opaque(b, path.as_bytes()),
    );
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
