//! `nsperf io run smb://…`: the SMB side of [`super`] — one connection (session and tree)
//! per job, `--iodepth` requests in flight on each, `--bs` the request size (clamped to the
//! server's MaxReadSize/MaxWriteSize, with a finding).
//!
//! Order of a run: connect, log on, connect to the share → stale `.nsperf-*` files of earlier
//! runs named, the dead ones removed (QUERY_DIRECTORY, DELETE: [`crate::stale`]) → create
//! `.nsperf-*` files
//! (`FILE_CREATE`: never an existing file) → lay them out with unmeasured WRITEs and a FLUSH
//! → set the cache phase → measured pass → files closed and removed, also on error and
//! after Ctrl-C.

use nsperf_core::Failure;
use nsperf_core::failure::Classify;
use nsperf_smb::{Client, Credentials, Pipeline, SmbError, SmbUrl};
use smb2::types::FileId;

use super::suite::{MetaOp, RemoteFs};
use super::{JobOpener, Started};
use crate::config::{FsyncMode, RunConfig};
use crate::engine::smb::to_io;
use crate::engine::{EngineKind, Smb};
use crate::error::IoError;
use crate::result::IoReport;
use crate::result::{Commit, RemoteFacts, RemoteProtocol, WriteStable};
use crate::target::{FILE_PREFIX, Target};
use nsperf_core::data_path::DataOp;

/// How long the server may stay silent before the run fails with "server went away".
pub const TIMEOUT: std::time::Duration = nsperf_smb::client::DEFAULT_TIMEOUT;

/// The files created on the share; closes and removes them (and the metadata test's
/// directory) when dropped, whatever the exit path.
struct SmbFiles {
    client: Client,
    creds: Credentials,
    tag: String,
    seq: u32,
    /// Paths inside the share, and whether each is a directory.
    created: Vec<(String, bool)>,
    open: Vec<(FileId, String)>,
}

impl SmbFiles {
    fn next_path(&mut self, what: &str) -> String {
        self.seq += 1;
        let name = format!("{FILE_PREFIX}{}-{what}-{}", self.tag, self.seq);
        self.client.join(&name)
    }

    fn err(&self, op: &'static str, path: &str, e: nsperf_smb::SmbError) -> IoError {
        IoError::remote(op, self.url_of(path), to_io(e))
    }

    fn url_of(&self, path: &str) -> String {
        let u = &self.client.url;
        let mut root = u.clone();
        root.path.clear();
        format!("{root}/{path}")
    }

    fn opener(&self, cfg: &RunConfig) -> Opener {
        Opener {
            url: self.client.url.clone(),
            creds: self.creds.clone(),
            depth: cfg.iodepth as usize,
            write_through: self.client.write_through,
        }
    }
}

impl Drop for SmbFiles {
    fn drop(&mut self) {
        for (fid, path) in self.open.drain(..) {
            let _ = self.client.close(fid, &path);
        }
        // Files before directories: a directory's files were registered after it.
        for (path, is_dir) in self.created.drain(..).rev() {
            let _ = if is_dir {
                self.client.rmdir(&path)
            } else {
                self.client.remove(&path)
            };
        }
    }
}

/// Opens a job's connection to its file.
struct Opener {
    url: SmbUrl,
    creds: Credentials,
    depth: usize,
    write_through: bool,
}

impl JobOpener<FileId> for Opener {
    type Engine = Smb;
    fn open(&self, _f: &FileId, path: &str) -> std::io::Result<Smb> {
        let mut p =
            Pipeline::open(&self.url, &self.creds, path, self.depth, TIMEOUT).map_err(to_io)?;
        p.set_write_through(self.write_through);
        Ok(Smb::new(p))
    }
}

/// Runs one workload against an `smb://` target.
pub fn run(
    cfg: &RunConfig,
    observer: Option<crate::pass::Observer<'_>>,
) -> Result<IoReport, IoError> {
    let Target::Smb { url, credentials } = &cfg.target else {
        return Err(IoError::Config("not an smb:// target".into()));
    };
    let mut started = Started::new(cfg);
    let (creds, _) =
        Credentials::resolve(credentials.as_deref()).map_err(|e| IoError::Smb(e.into()))?;
    let mut client = Client::connect_within(url, &creds, cfg.connect_timeout, TIMEOUT)?;
    client.write_through = cfg.fsync == FsyncMode::Each;
    started.stale = crate::stale::sweep(&mut SmbDir(&mut client), cfg.clean_stale)?;
    let n = client.negotiated.clone();
    let (eff, clamp) = super::clamp_bs(cfg, n.max_read, n.max_write);
    let remote = RemoteFacts {
        protocol: RemoteProtocol::Smb(n.dialect),
        server: client.server_addr(),
        export: url.share.clone(),
        rtmax_bytes: n.max_read,
        wtmax_bytes: n.max_write,
        rtpref_bytes: 0,
        rpc_bytes: eff.bs_bytes,
        rpcs_in_flight: eff.iodepth,
        connections: eff.jobs,
        write_stable: if client.write_through {
            WriteStable::WriteThrough
        } else {
            WriteStable::Buffered
        },
        commit: if eff.fsync == crate::config::FsyncMode::End && eff.workload.writes() {
            Commit::End
        } else {
            Commit::None
        },
        close_commit_ns: None,
        signed: Some(n.signed),
    };
    let mut files = SmbFiles {
        client,
        creds,
        tag: crate::stale::remote_owner(),
        seq: 0,
        created: Vec::new(),
        open: Vec::new(),
    };
    let monitor = started.monitor(cfg);
    let run = if eff.workload.is_block() {
        let opener = files.opener(&eff);
        super::block(&eff, &mut files, &opener, observer)
    } else {
        super::suite::run(&eff, &mut files)
    };
    let cpu = monitor.stop();
    let run = run?;
    drop(files);
    let server_ip = remote
        .server
        .parse::<std::net::SocketAddr>()
        .ok()
        .map(|a| a.ip());
    let fs = crate::fsinfo::FsInfo {
        fs_type: format!("{} (nsperf user-space client)", remote.protocol),
        mount_source: format!("//{}/{}", url.host, url.share),
        mount_point: std::path::PathBuf::from(format!("/{}", url.path)),
        dev: String::new(),
        statfs_magic: 0,
        network: Some(true),
        server: server_ip,
        // The interface the server is reached through (its speed, when it reports one).
        link: server_ip.and_then(crate::fsinfo::link_to),
    };
    Ok(started.finish(cfg, &eff, run, cpu, remote, fs, EngineKind::Smb, clamp))
}

/// The target directory through the client's tree, for [`crate::stale::sweep`].
struct SmbDir<'a>(&'a mut Client);

/// An SMB error as an I/O error, Ctrl-C as [`IoError::Interrupted`].
fn io_err(e: SmbError) -> IoError {
    match e {
        SmbError::Interrupted => IoError::Interrupted,
        e => IoError::Smb(e),
    }
}

impl crate::stale::Listing for SmbDir<'_> {
    fn dir(&self) -> String {
        self.0.url.to_string()
    }

    fn local(&self) -> bool {
        false
    }

    fn entries(&mut self) -> Result<Vec<crate::stale::Entry>, IoError> {
        let path = self.0.url.path.clone();
        let list = self.0.list(&path).map_err(io_err)?;
        Ok(list
            .into_iter()
            .filter(|e| crate::stale::Owner::of(&e.name).is_some())
            .map(|e| crate::stale::Entry {
                name: e.name,
                is_dir: e.is_dir,
                bytes: e.size,
                changed_s: None,
            })
            .collect())
    }

    fn dir_bytes(&mut self, name: &str) -> Option<u64> {
        let path = self.0.join(name);
        let list = self.0.list(&path).ok()?;
        Some(list.iter().filter(|e| !e.is_dir).map(|e| e.size).sum())
    }

    fn remove(&mut self, e: &crate::stale::Entry) -> Result<(), IoError> {
        let path = self.0.join(&e.name);
        let c = &mut *self.0;
        let r = if e.is_dir {
            c.list(&path).and_then(|files| {
                for f in files {
                    match c.remove(&format!("{path}/{}", f.name)) {
                        Err(err) if err.failure() != Failure::NotFound => return Err(err),
                        _ => {}
                    }
                }
                c.rmdir(&path)
            })
        } else {
            c.remove(&path)
        };
        match r {
            Err(err) if err.failure() != Failure::NotFound => Err(io_err(err)),
            _ => Ok(()),
        }
    }
}

impl RemoteFs for SmbFiles {
    type File = FileId;
    type Dir = String;

    fn create_file(&mut self, what: &str) -> Result<(FileId, String), IoError> {
        let path = self.next_path(what);
        let fid = self
            .client
            .open(&path, true)
            .map_err(|e| self.err("create", &path, e))?;
        self.created.push((path.clone(), false));
        self.open.push((fid, path.clone()));
        Ok((fid, path))
    }

    fn path(&self, name: &str) -> String {
        self.url_of(name)
    }

    fn write_at(&mut self, f: &FileId, name: &str, off: u64, buf: &[u8]) -> Result<(), IoError> {
        self.client
            .write(*f, name, off, buf)
            .map(|_| ())
            .map_err(|e| self.err("write", name, e))
    }

    fn read_at(
        &mut self,
        f: &FileId,
        name: &str,
        off: u64,
        buf: &mut [u8],
    ) -> Result<(usize, bool), IoError> {
        self.client
            .read(*f, name, off, buf)
            .map_err(|e| self.err("read", name, e))
    }

    fn needs_sync(&self) -> bool {
        !self.client.write_through
    }

    fn sync(&mut self, f: &FileId, name: &str) -> Result<(), IoError> {
        self.client
            .flush(*f, name)
            .map_err(|e| self.err("flush", name, e))
    }

    fn lay_out(
        &mut self,
        _f: &FileId,
        name: &str,
        len: u64,
        read_back: bool,
    ) -> Result<(), IoError> {
        let n = &self.client.negotiated;
        let chunk = (n.max_read.min(n.max_write).max(4096) as usize).min(1 << 20);
        let url = self.url_of(name);
        let mut opener = self.opener_for_layout();
        opener.write_through = false;
        let mut e = opener
            .open(&FileId::default(), name)
            .map_err(|e| IoError::remote("layout", url.clone(), e))?;
        super::transfer(&mut e, chunk, len, DataOp::Write, &url)?;
        if read_back {
            super::transfer(&mut e, chunk, len, DataOp::Read, &url)?;
        }
        Ok(())
    }

    fn meta_dir(&mut self) -> Result<String, IoError> {
        let path = self.next_path("meta");
        self.client
            .mkdir(&path)
            .map_err(|e| self.err("mkdir", &path, e))?;
        self.created.push((path.clone(), true));
        Ok(path)
    }

    fn meta(
        &mut self,
        dir: &String,
        name: &str,
        op: MetaOp,
        payload: &[u8],
        _rbuf: &mut [u8],
    ) -> Result<(), IoError> {
        let path = format!("{dir}/{name}");
        if op == MetaOp::Create {
            // Registered first: a CREATE that succeeded before its WRITE failed is removed too.
            self.created.push((path.clone(), false));
        }
        let cl = &mut self.client;
        let r = match op {
            MetaOp::Create => cl.put_small(&path, payload),
            MetaOp::Stat => cl.stat(&path).map(|_| ()),
            MetaOp::Read => cl.get_small(&path).map(|_| ()),
            MetaOp::Delete => cl.remove(&path),
        };
        r.map_err(|e| self.err("meta", &path, e))?;
        if op == MetaOp::Delete {
            // The directory was registered before its files, and stays before them.
            if let Some(i) = self.created.iter().rposition(|(p, _)| *p == path) {
                self.created.swap_remove(i);
            }
        }
        Ok(())
    }
}

impl SmbFiles {
    fn opener_for_layout(&self) -> Opener {
        Opener {
            url: self.client.url.clone(),
            creds: self.creds.clone(),
            depth: super::LAYOUT_DEPTH,
            write_through: false,
        }
    }
}
