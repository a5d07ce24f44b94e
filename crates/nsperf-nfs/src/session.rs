//! A mounted export ([`Session`]): the services found, the export mounted, the target
//! directory looked up and the server's limits read, on the control connection of
//! [`crate::client`]. Unmounts when dropped.

use std::net::SocketAddr;
use std::time::Duration;

use crate::client::NfsClient;
use crate::error::NfsError;
use crate::mount::{exports, getport_within, mnt, pick_export, umnt};
use crate::proto::{self, FileHandle, FileType, FsInfo, NfsStat};
use crate::rpc_conn::{RpcConn, Timeouts, resolve};
use crate::url::NfsUrl;

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
        let mut client = NfsClient::connect_within(nfs_addr, t)?;
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
            umnt(&mut m, &self.export);
        }
    }
}
