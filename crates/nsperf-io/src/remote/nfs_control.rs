//! The control and data connections of either NFS version, as [`super::nfs`] uses them:
//! NFSv3 through a mounted [`Session`], NFSv4.0 or 4.1 through a [`Client4`] from the
//! server's root. Which one: the URL's `?version=`, else v3 when the server's portmapper
//! offers it and v4 (4.1, else 4.0) when it offers none.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use nsperf_nfs::proto::FileType;
use nsperf_nfs::v4::wire::{NF4DIR, stat::MINOR_VERS_MISMATCH};
use nsperf_nfs::v4::{Client4, Lease, Stateid};
use nsperf_nfs::{FileHandle, NfsError, NfsUrl, NfsVersion, Pipeline, Session, Stable, Timeouts};

use crate::result::RemoteProtocol;

/// What the control connection found: the object's handle, whether it is a directory, its
/// size.
#[derive(Debug, Clone, Copy)]
pub(super) struct Found {
    pub fh: FileHandle,
    pub is_dir: bool,
    pub size: u64,
}

/// The server's limits as both versions state them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub rtmax: u32,
    pub wtmax: u32,
    /// NFSv3's preferred READ size (NFSv4 states none: 0).
    pub rtpref: u32,
}

/// The control connection to the target directory.
pub(super) enum Control {
    V3(Session),
    V4(Client4),
}

impl Control {
    /// Connects as the URL asks, or by what the server offers.
    pub fn open(url: &NfsUrl, t: Timeouts) -> Result<Control, NfsError> {
        match url.version {
            Some(NfsVersion::V3) => Session::open_within(url, t).map(Control::V3),
            Some(NfsVersion::V4_0) => Client4::connect(url, t, 0).map(Control::V4),
            Some(NfsVersion::V4_1) => Client4::connect(url, t, 1).map(Control::V4),
            Some(NfsVersion::V4) => newest_v4(url, t),
            None => match Session::open_within(url, t) {
                Ok(s) => Ok(Control::V3(s)),
                Err(e) if offers_no_v3(&e) => newest_v4(url, t),
                Err(e) => Err(e),
            },
        }
    }

    /// The version in use: NFSv3, 4.0 or 4.1.
    pub fn protocol(&self) -> RemoteProtocol {
        match self {
            Control::V3(_) => RemoteProtocol::Nfs3,
            Control::V4(c) if c.minor() == 0 => RemoteProtocol::Nfs4_0,
            Control::V4(_) => RemoteProtocol::Nfs4_1,
        }
    }

    pub fn url(&self) -> &NfsUrl {
        match self {
            Control::V3(s) => &s.url,
            Control::V4(c) => &c.url,
        }
    }

    /// The directory of the URL.
    pub fn dir(&self) -> FileHandle {
        match self {
            Control::V3(s) => s.dir,
            Control::V4(c) => c.dir,
        }
    }

    /// Where NFS answers.
    pub fn server(&self) -> SocketAddr {
        match self {
            Control::V3(s) => s.nfs_addr,
            Control::V4(c) => c.lease().addr,
        }
    }

    /// The export mounted (v3), or the path from the server's root (v4.1).
    pub fn export(&self) -> String {
        match self {
            Control::V3(s) => s.export.clone(),
            Control::V4(c) => c.url.path.clone(),
        }
    }

    pub fn limits(&self) -> Limits {
        match self {
            Control::V3(s) => Limits {
                rtmax: s.fsinfo.rtmax,
                wtmax: s.fsinfo.wtmax,
                rtpref: s.fsinfo.rtpref,
            },
            Control::V4(c) => Limits {
                rtmax: c.dir_attr.maxread.min(u32::MAX.into()) as u32,
                wtmax: c.dir_attr.maxwrite.min(u32::MAX.into()) as u32,
                rtpref: 0,
            },
        }
    }

    /// How data connections are made.
    pub fn data_path(&self) -> DataPath {
        match self {
            Control::V3(s) => DataPath::V3(s.nfs_addr),
            Control::V4(c) => {
                let l = self.limits();
                DataPath::V4 {
                    lease: c.lease(),
                    opens: c.opens(),
                    max_io: l.rtmax.max(l.wtmax).clamp(4096, 4 << 20),
                }
            }
        }
    }

    /// Creates the new file `name` in `dir` (kept open in v4.1 until [`Control::close`]).
    pub fn create(&mut self, dir: &FileHandle, name: &str) -> Result<FileHandle, NfsError> {
        match self {
            Control::V3(s) => s.client.create(dir, name),
            Control::V4(c) => c.create(dir, name),
        }
    }

    /// Ends what [`Control::create`] opened (nothing in v3).
    pub fn close(&mut self, fh: &FileHandle, name: &str) -> Result<(), NfsError> {
        match self {
            Control::V3(_) => Ok(()),
            Control::V4(c) => c.close(fh, name),
        }
    }

    pub fn mkdir(&mut self, dir: &FileHandle, name: &str) -> Result<FileHandle, NfsError> {
        match self {
            Control::V3(s) => s.client.mkdir(dir, name),
            Control::V4(c) => c.mkdir(dir, name),
        }
    }

    pub fn remove(&mut self, dir: &FileHandle, name: &str) -> Result<(), NfsError> {
        match self {
            Control::V3(s) => s.client.remove(dir, name),
            Control::V4(c) => c.remove(dir, name),
        }
    }

    pub fn rmdir(&mut self, dir: &FileHandle, name: &str) -> Result<(), NfsError> {
        match self {
            Control::V3(s) => s.client.rmdir(dir, name),
            Control::V4(c) => c.remove(dir, name),
        }
    }

    pub fn readdir(&mut self, dir: &FileHandle, path: &str) -> Result<Vec<String>, NfsError> {
        match self {
            Control::V3(s) => s.client.readdir(dir, path),
            Control::V4(c) => c.readdir(dir, path),
        }
    }

    pub fn lookup(&mut self, dir: &FileHandle, name: &str) -> Result<Found, NfsError> {
        match self {
            Control::V3(s) => {
                let (fh, attr) = s.client.lookup(dir, name)?;
                let a = match attr {
                    Some(a) => a,
                    None => s.client.getattr(&fh, name)?,
                };
                Ok(Found {
                    fh,
                    is_dir: a.ftype == FileType::Directory,
                    size: a.size,
                })
            }
            Control::V4(c) => {
                let (fh, a) = c.lookup(dir, name)?;
                Ok(Found {
                    fh,
                    is_dir: a.ftype == NF4DIR,
                    size: a.size,
                })
            }
        }
    }

    pub fn write(
        &mut self,
        fh: &FileHandle,
        name: &str,
        off: u64,
        buf: &[u8],
        stable: Stable,
    ) -> Result<(), NfsError> {
        match self {
            Control::V3(s) => s.client.write(fh, name, off, buf, stable).map(|_| ()),
            Control::V4(c) => c.write(fh, name, off, buf, stable).map(|_| ()),
        }
    }

    pub fn read(
        &mut self,
        fh: &FileHandle,
        name: &str,
        off: u64,
        buf: &mut [u8],
    ) -> Result<(usize, bool), NfsError> {
        match self {
            Control::V3(s) => s.client.read(fh, name, off, buf),
            Control::V4(c) => c.read(fh, name, off, buf),
        }
    }

    pub fn commit(&mut self, fh: &FileHandle, name: &str) -> Result<(), NfsError> {
        match self {
            Control::V3(s) => s.client.commit(fh, name).map(|_| ()),
            Control::V4(c) => c.commit(fh, name).map(|_| ()),
        }
    }
}

/// NFSv4.1, or 4.0 when the server speaks no 4.1.
fn newest_v4(url: &NfsUrl, t: Timeouts) -> Result<Control, NfsError> {
    match Client4::connect(url, t, 1) {
        Err(NfsError::Nfs4 { stat, .. }) if stat == MINOR_VERS_MISMATCH => {
            Client4::connect(url, t, 0).map(Control::V4)
        }
        r => r.map(Control::V4),
    }
}

/// True when the v3 attempt says the server offers no NFSv3: its portmapper has no MOUNT or
/// NFS v3 registered, or nothing listens on the portmapper's port (refused). A portmapper
/// that does not answer at all is a host that cannot be reached: no second try on 2049,
/// which would only double the wait.
fn offers_no_v3(e: &NfsError) -> bool {
    match e {
        NfsError::NotRegistered { .. } => true,
        NfsError::Connect {
            what: "portmapper",
            source,
            ..
        } => source.kind() == std::io::ErrorKind::ConnectionRefused,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_server_without_v3_falls_back() {
        let connect = |kind| NfsError::Connect {
            what: "portmapper",
            addr: "10.0.0.1:111".into(),
            source: std::io::Error::from(kind),
        };
        assert!(offers_no_v3(&NfsError::NotRegistered {
            what: "MOUNT",
            host: "h".into()
        }));
        assert!(offers_no_v3(&connect(
            std::io::ErrorKind::ConnectionRefused
        )));
        assert!(!offers_no_v3(&connect(std::io::ErrorKind::TimedOut)));
        assert!(!offers_no_v3(&NfsError::NotADirectory("/x".into())));
    }
}

/// How a job's data connection is made (shared by the jobs' threads).
#[derive(Debug, Clone)]
pub(super) enum DataPath {
    V3(SocketAddr),
    V4 {
        lease: Arc<Lease>,
        opens: Arc<Mutex<HashMap<FileHandle, Stateid>>>,
        max_io: u32,
    },
}

impl DataPath {
    /// A data connection for I/O on `fh` with up to `depth` requests in flight.
    pub fn connect(
        &self,
        fh: FileHandle,
        depth: usize,
        stable: Stable,
        timeout: std::time::Duration,
    ) -> Result<Pipeline, NfsError> {
        match self {
            DataPath::V3(addr) => Pipeline::connect(*addr, fh, depth, stable, timeout),
            DataPath::V4 {
                lease,
                opens,
                max_io,
            } => {
                let st = opens
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&fh)
                    .copied()
                    .unwrap_or_default();
                Pipeline::connect_v4(lease, fh, st, depth, *max_io, stable)
            }
        }
    }
}
