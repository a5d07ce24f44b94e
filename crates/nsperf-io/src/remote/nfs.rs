//! `nsperf io run nfs://…`: the NFS side of [`super`] (v3, or v4.1 with `?version=4` or when
//! the server offers no v3: [`nfs_control`]) — one connection per job,
//! `--iodepth` RPCs in flight on each, `--bs` the RPC size (clamped to what the server's
//! FSINFO allows, with a finding).
//!
//! Order of a run: mount → stale `.nsperf-*` files of earlier runs named, the dead ones
//! removed (READDIR, LOOKUP, REMOVE: [`crate::stale`]) → create `.nsperf-*` files (CREATE
//! GUARDED: never an existing file)
//! → lay them out with unmeasured WRITEs and a COMMIT → set the cache phase (remote-warm:
//! read through once so the server's cache holds the data; cold: drop this host's page
//! cache, which is the server's in a lab) → measured pass → with `--fsync none` and
//! `--on-close commit` (the default), one COMMIT per file written, timed apart and outside the
//! pass's figures (libnfs's `nfs_close` sends it, so fio's nfs engine does the same work) →
//! files removed (REMOVE), also on error and after Ctrl-C.

use std::time::Duration;

use nsperf_nfs::{FileHandle, NfsError, NfsStat, Stable};

use super::nfs_control::{Control, DataPath};

use super::suite::{MetaOp, RemoteFs};
use super::{JobOpener, Started};
use crate::config::{FsyncMode, OnClose, RunConfig};
use crate::engine::nfs::to_io;
use crate::engine::{EngineKind, Nfs};
use crate::error::IoError;
use crate::result::IoReport;
use crate::result::{Commit, RemoteFacts, WriteStable};
use crate::target::{FILE_PREFIX, Target};
use nsperf_core::data_path::DataOp;

/// How long the server may stay silent before the run fails with "server went away".
pub const TIMEOUT: Duration = nsperf_nfs::client::DEFAULT_TIMEOUT;

/// The files created on the server; removes them (and the metadata test's directory) when
/// dropped, whatever the exit path.
struct RemoteFiles {
    session: Control,
    stable: Stable,
    tag: String,
    seq: u32,
    created: Vec<(FileHandle, String, bool)>,
    /// The data files made by [`RemoteFiles::create`] (handle, name), for the COMMIT at close.
    data: Vec<(FileHandle, String)>,
}

impl RemoteFiles {
    fn new(session: Control, stable: Stable) -> Self {
        RemoteFiles {
            session,
            stable,
            tag: crate::stale::remote_owner(),
            seq: 0,
            created: Vec::new(),
            data: Vec::new(),
        }
    }

    fn next_name(&mut self, what: &str) -> String {
        self.seq += 1;
        format!("{FILE_PREFIX}{}-{what}-{}", self.tag, self.seq)
    }

    /// Creates a new file in the target directory.
    fn create(&mut self, what: &str) -> Result<(FileHandle, String), IoError> {
        let name = self.next_name(what);
        let dir = self.session.dir();
        let fh = self.session.create(&dir, &name)?;
        self.created.push((dir, name.clone(), false));
        self.data.push((fh, name.clone()));
        Ok((fh, name))
    }

    /// The COMMIT at close: one per data file, in order; how long they took together.
    fn commit_on_close(&mut self) -> Result<u64, IoError> {
        let t = std::time::Instant::now();
        for (fh, name) in &self.data {
            self.session.commit(fh, name)?;
        }
        Ok(t.elapsed().as_nanos() as u64)
    }

    /// Creates a directory in the target directory.
    fn mkdir(&mut self, what: &str) -> Result<(FileHandle, String), IoError> {
        let name = self.next_name(what);
        let dir = self.session.dir();
        let fh = self.session.mkdir(&dir, &name)?;
        self.created.push((dir, name.clone(), true));
        Ok((fh, name))
    }

    /// Registers a file created inside a created directory.
    fn adopt(&mut self, dir: FileHandle, name: String) {
        self.created.push((dir, name, false));
    }

    /// Forgets a file removed by the workload itself.
    fn removed(&mut self, dir: &FileHandle, name: &str) {
        if let Some(i) = self
            .created
            .iter()
            .position(|(d, n, _)| d == dir && n == name)
        {
            self.created.swap_remove(i);
        }
    }

    fn path(&self, name: &str) -> String {
        let mut u = self.session.url().clone();
        u.version = None;
        format!("{u}/{name}")
    }
}

impl Drop for RemoteFiles {
    fn drop(&mut self) {
        // Open files closed first (v4.1), then files before directories: a directory's
        // files were registered after it.
        for (fh, name) in std::mem::take(&mut self.data) {
            let _ = self.session.close(&fh, &name);
        }
        for (dir, name, is_dir) in self.created.drain(..).rev() {
            let _ = if is_dir {
                self.session.rmdir(&dir, &name)
            } else {
                self.session.remove(&dir, &name)
            };
        }
    }
}

/// Runs one workload against an `nfs://` target.
pub fn run(
    cfg: &RunConfig,
    observer: Option<crate::pass::Observer<'_>>,
) -> Result<IoReport, IoError> {
    let Target::Nfs { url } = &cfg.target else {
        return Err(IoError::Config("not an nfs:// target".into()));
    };
    let mut started = Started::new(cfg);
    let mut session = Control::open(
        url,
        nsperf_nfs::Timeouts {
            connect: cfg.connect_timeout,
            reply: TIMEOUT,
        },
    )?;
    started.stale = crate::stale::sweep(&mut NfsDir(&mut session), cfg.clean_stale)?;
    let fsi = session.limits();
    let (eff, clamp) = super::clamp_bs(cfg, fsi.rtmax, fsi.wtmax);
    let protocol = session.protocol();
    let remote = RemoteFacts {
        protocol,
        server: session.server().to_string(),
        export: session.export(),
        rtmax_bytes: fsi.rtmax,
        wtmax_bytes: fsi.wtmax,
        rtpref_bytes: fsi.rtpref,
        rpc_bytes: eff.bs_bytes,
        rpcs_in_flight: eff.iodepth,
        connections: eff.jobs,
        write_stable: if stable_of(cfg) == Stable::FileSync {
            WriteStable::FileSync
        } else {
            WriteStable::Unstable
        },
        commit: commit_of(cfg),
        close_commit_ns: None,
        signed: None,
    };
    let mut files = RemoteFiles::new(session, stable_of(cfg));
    let monitor = started.monitor(cfg);
    let run = if eff.workload.is_block() {
        let opener = Opener {
            path: files.session.data_path(),
            depth: eff.iodepth as usize,
            stable: stable_of(cfg),
        };
        super::block(&eff, &mut files, &opener, observer)
    } else {
        super::suite::run(&eff, &mut files)
    };
    let cpu = monitor.stop();
    let run = run?;
    let mut remote = remote;
    if remote.commit == Commit::Close {
        if files.data.is_empty() {
            remote.commit = Commit::None;
        } else {
            remote.close_commit_ns = Some(files.commit_on_close()?);
        }
    }
    drop(files);
    let server_ip = remote
        .server
        .parse::<std::net::SocketAddr>()
        .ok()
        .map(|a| a.ip());
    let fs = crate::fsinfo::FsInfo {
        fs_type: format!("{protocol} (nsperf user-space client)"),
        mount_source: format!("{}:{}", url.host, remote.export),
        mount_point: std::path::PathBuf::from(&url.path),
        dev: String::new(),
        statfs_magic: 0,
        network: Some(true),
        server: server_ip,
        // The interface the server is reached through (its speed, when it reports one).
        link: server_ip.and_then(crate::fsinfo::link_to),
    };
    Ok(started.finish(cfg, &eff, run, cpu, remote, fs, EngineKind::Nfs, clamp))
}

/// The target directory through the control connection, for [`crate::stale::sweep`].
struct NfsDir<'a>(&'a mut Control);

/// An NFS error as an I/O error, Ctrl-C as [`IoError::Interrupted`].
fn io_err(e: NfsError) -> IoError {
    match e {
        NfsError::Interrupted => IoError::Interrupted,
        e => IoError::Nfs(e),
    }
}

/// True for an NFS status saying the object is not there (any more).
fn gone(e: &NfsError) -> bool {
    matches!(e.status(), Some(NfsStat::NOENT | NfsStat::STALE))
}

impl crate::stale::Listing for NfsDir<'_> {
    fn dir(&self) -> String {
        self.0.url().to_string()
    }

    fn local(&self) -> bool {
        false
    }

    fn entries(&mut self) -> Result<Vec<crate::stale::Entry>, IoError> {
        let s = &mut *self.0;
        let dir = s.dir();
        let path = s.url().path.clone();
        let names = s.readdir(&dir, &path).map_err(io_err)?;
        let mut out = Vec::new();
        for name in names {
            if crate::stale::Owner::of(&name).is_none() {
                continue;
            }
            let found = match s.lookup(&dir, &name) {
                Ok(f) => f,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(io_err(e)),
            };
            out.push(crate::stale::Entry {
                name,
                is_dir: found.is_dir,
                bytes: found.size,
                changed_s: None,
            });
        }
        Ok(out)
    }

    fn dir_bytes(&mut self, _name: &str) -> Option<u64> {
        // READDIR gives names only: a LOOKUP per file of a metadata test's directory (many
        // thousands) only to count bytes is not worth its round trips.
        None
    }

    fn remove(&mut self, e: &crate::stale::Entry) -> Result<(), IoError> {
        let s = &mut *self.0;
        let dir = s.dir();
        let r = if e.is_dir {
            s.lookup(&dir, &e.name).and_then(|found| {
                for f in s.readdir(&found.fh, &e.name)? {
                    match s.remove(&found.fh, &f) {
                        Err(err) if !gone(&err) => return Err(err),
                        _ => {}
                    }
                }
                s.rmdir(&dir, &e.name)
            })
        } else {
            s.remove(&dir, &e.name)
        };
        match r {
            Err(err) if !gone(&err) => Err(io_err(err)),
            _ => Ok(()),
        }
    }
}

/// When the data written is made durable: a timed COMMIT with `--fsync end`, none needed with
/// FILE_SYNC writes (`--fsync each`), else one COMMIT per file at close unless `--on-close
/// none`.
fn commit_of(cfg: &RunConfig) -> Commit {
    if !cfg.workload.writes() {
        return Commit::None;
    }
    match (cfg.fsync, cfg.on_close) {
        (FsyncMode::End, _) => Commit::End,
        (FsyncMode::Each, _) | (FsyncMode::None, OnClose::None) => Commit::None,
        (FsyncMode::None, OnClose::Commit) => Commit::Close,
    }
}

fn stable_of(cfg: &RunConfig) -> Stable {
    if cfg.fsync == FsyncMode::Each {
        Stable::FileSync
    } else {
        Stable::Unstable
    }
}

/// Where and how to lay out or read through a file, unmeasured.
#[derive(Debug, Clone)]
pub(super) struct Transfer {
    path: DataPath,
    /// RPC size: 1 MiB or less when the server allows less.
    chunk: usize,
}

impl Transfer {
    fn new(files: &RemoteFiles) -> Self {
        let f = files.session.limits();
        let limit = f.rtmax.min(f.wtmax).max(4096) as usize;
        Transfer {
            path: files.session.data_path(),
            chunk: limit.min(1 << 20),
        }
    }
}

/// Writes (unstably, then COMMIT) or reads `len` bytes of a file, unmeasured, with 8 RPCs
/// in flight on a connection of its own.
fn transfer(t: &Transfer, fh: FileHandle, len: u64, op: DataOp, path: &str) -> Result<(), IoError> {
    let err = |e: NfsError| IoError::remote("layout", path.to_string(), to_io(e));
    let p = t
        .path
        .connect(fh, super::LAYOUT_DEPTH, Stable::Unstable, TIMEOUT)
        .map_err(err)?;
    super::transfer(&mut Nfs::new(p), t.chunk, len, op, path)
}

/// Opens a job's connection to its file.
struct Opener {
    path: DataPath,
    depth: usize,
    stable: Stable,
}

impl JobOpener<FileHandle> for Opener {
    type Engine = Nfs;
    fn open(&self, f: &FileHandle, _name: &str) -> std::io::Result<Nfs> {
        self.path
            .connect(*f, self.depth, self.stable, TIMEOUT)
            .map(Nfs::new)
            .map_err(to_io)
    }
}

impl RemoteFs for RemoteFiles {
    type File = FileHandle;
    type Dir = FileHandle;

    fn create_file(&mut self, what: &str) -> Result<(FileHandle, String), IoError> {
        self.create(what)
    }

    fn path(&self, name: &str) -> String {
        RemoteFiles::path(self, name)
    }

    fn write_at(
        &mut self,
        f: &FileHandle,
        name: &str,
        off: u64,
        buf: &[u8],
    ) -> Result<(), IoError> {
        let stable = self.stable;
        self.session.write(f, name, off, buf, stable)?;
        Ok(())
    }

    fn read_at(
        &mut self,
        f: &FileHandle,
        name: &str,
        off: u64,
        buf: &mut [u8],
    ) -> Result<(usize, bool), IoError> {
        Ok(self.session.read(f, name, off, buf)?)
    }

    fn needs_sync(&self) -> bool {
        self.stable == Stable::Unstable
    }

    fn sync(&mut self, f: &FileHandle, name: &str) -> Result<(), IoError> {
        self.session.commit(f, name)?;
        Ok(())
    }

    fn lay_out(
        &mut self,
        f: &FileHandle,
        name: &str,
        len: u64,
        read_back: bool,
    ) -> Result<(), IoError> {
        let path = self.path(name);
        let t = Transfer::new(self);
        transfer(&t, *f, len, DataOp::Write, &path)?;
        if read_back {
            transfer(&t, *f, len, DataOp::Read, &path)?;
        }
        Ok(())
    }

    fn meta_dir(&mut self) -> Result<FileHandle, IoError> {
        self.mkdir("meta").map(|(fh, _)| fh)
    }

    fn meta(
        &mut self,
        dir: &FileHandle,
        name: &str,
        op: MetaOp,
        payload: &[u8],
        rbuf: &mut [u8],
    ) -> Result<(), IoError> {
        let stable = self.stable;
        let cl = &mut self.session;
        let r: Result<(), NfsError> = match op {
            MetaOp::Create => cl.create(dir, name).and_then(|fh| {
                if !payload.is_empty() {
                    cl.write(&fh, name, 0, payload, stable)?;
                }
                cl.close(&fh, name)
            }),
            MetaOp::Stat => cl.lookup(dir, name).map(|_| ()),
            MetaOp::Read => cl
                .lookup(dir, name)
                .and_then(|f| cl.read(&f.fh, name, 0, rbuf).map(|_| ())),
            MetaOp::Delete => cl.remove(dir, name),
        };
        r?;
        match op {
            MetaOp::Create => self.adopt(*dir, name.to_string()),
            MetaOp::Delete => self.removed(dir, name),
            _ => {}
        }
        Ok(())
    }
}
