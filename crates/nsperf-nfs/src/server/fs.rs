//! The exported directory as the server sees it: file handles (an instance id and the inode
//! number) mapped to paths, a small cache of open files, and each operation returning an
//! NFS status on failure.
//!
//! Invariant: every path in the table lies inside the export — names from clients are
//! single components (never `.`, `..` or containing `/`), and files are opened with
//! `O_NOFOLLOW`, so a symbolic link inside the export cannot lead the server out of it.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::proto::{Attr, FileHandle, FileType, NfsStat, SetAttr};

const OPEN_CACHE: usize = 256;

/// The exported directory.
#[derive(Debug)]
pub struct ExportFs {
    root: PathBuf,
    root_ino: u64,
    instance: u64,
    read_only: bool,
    paths: Mutex<HashMap<u64, PathBuf>>,
    open: Mutex<HashMap<u64, Arc<File>>>,
}

fn io_stat(e: std::io::Error) -> NfsStat {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return NfsStat::INVAL;
    }
    NfsStat::from_io(&e)
}

/// The attributes of a file from its metadata.
pub fn attr_of(md: &std::fs::Metadata) -> Attr {
    let ft = md.file_type();
    Attr {
        ftype: if ft.is_file() {
            FileType::Regular
        } else if ft.is_dir() {
            FileType::Directory
        } else {
            FileType::Other
        },
        mode: md.mode() & 0o7777,
        uid: md.uid(),
        gid: md.gid(),
        size: md.size(),
        used: md.blocks() * 512,
        fsid: md.dev(),
        fileid: md.ino(),
        mtime: (md.mtime() as u32, md.mtime_nsec() as u32),
    }
}

fn check_name(name: &[u8]) -> Result<&str, NfsStat> {
    let s = std::str::from_utf8(name).map_err(|_| NfsStat::INVAL)?;
    if s.is_empty() || s == "." || s == ".." || s.contains('/') || s.contains('\0') {
        return Err(NfsStat::INVAL);
    }
    if s.len() > crate::proto::NAME_MAX {
        return Err(NfsStat::NAMETOOLONG);
    }
    Ok(s)
}

impl ExportFs {
    /// Serves `root` (which must be a directory); `instance` goes into every handle so handles
    /// of an earlier server are answered `STALE`.
    pub fn new(root: &Path, instance: u64, read_only: bool) -> std::io::Result<ExportFs> {
        let root = root.canonicalize()?;
        let md = std::fs::metadata(&root)?;
        if !md.is_dir() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        let mut paths = HashMap::new();
        paths.insert(md.ino(), root.clone());
        Ok(ExportFs {
            root,
            root_ino: md.ino(),
            instance,
            read_only,
            paths: Mutex::new(paths),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// The exported directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when the export refuses changes.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The handle of the export's root.
    pub fn root_handle(&self) -> FileHandle {
        self.handle(self.root_ino)
    }

    fn handle(&self, ino: u64) -> FileHandle {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.instance.to_be_bytes());
        b[8..].copy_from_slice(&ino.to_be_bytes());
        FileHandle::new(&b).unwrap_or_else(|| unreachable!("16 bytes fit"))
    }

    fn ino_of(&self, fh: &FileHandle) -> Result<u64, NfsStat> {
        let b = fh.as_bytes();
        if b.len() != 16 {
            return Err(NfsStat::BADHANDLE);
        }
        if b[..8] != self.instance.to_be_bytes() {
            return Err(NfsStat::STALE);
        }
        let mut ino = [0u8; 8];
        ino.copy_from_slice(&b[8..]);
        Ok(u64::from_be_bytes(ino))
    }

    fn path(&self, fh: &FileHandle) -> Result<PathBuf, NfsStat> {
        let ino = self.ino_of(fh)?;
        self.paths
            .lock()
            .map_err(|_| NfsStat::SERVERFAULT)?
            .get(&ino)
            .cloned()
            .ok_or(NfsStat::STALE)
    }

    fn remember(&self, path: PathBuf, md: &std::fs::Metadata) -> FileHandle {
        if let Ok(mut p) = self.paths.lock() {
            p.insert(md.ino(), path);
        }
        self.handle(md.ino())
    }

    fn forget(&self, ino: u64) {
        if let Ok(mut p) = self.paths.lock() {
            p.remove(&ino);
        }
        if let Ok(mut o) = self.open.lock() {
            o.remove(&ino);
        }
    }

    fn writable(&self) -> Result<(), NfsStat> {
        if self.read_only {
            Err(NfsStat::ROFS)
        } else {
            Ok(())
        }
    }

    /// GETATTR.
    pub fn getattr(&self, fh: &FileHandle) -> Result<Attr, NfsStat> {
        let p = self.path(fh)?;
        std::fs::symlink_metadata(&p)
            .map(|m| attr_of(&m))
            .map_err(io_stat)
    }

    /// LOOKUP.
    pub fn lookup(&self, dir: &FileHandle, name: &[u8]) -> Result<(FileHandle, Attr), NfsStat> {
        let d = self.path(dir)?;
        let p = d.join(check_name(name)?);
        let md = std::fs::symlink_metadata(&p).map_err(io_stat)?;
        Ok((self.remember(p, &md), attr_of(&md)))
    }

    /// The open file of a handle (cached).
    pub fn file(&self, fh: &FileHandle) -> Result<Arc<File>, NfsStat> {
        let ino = self.ino_of(fh)?;
        if let Some(f) = self
            .open
            .lock()
            .map_err(|_| NfsStat::SERVERFAULT)?
            .get(&ino)
        {
            return Ok(f.clone());
        }
        let p = self.path(fh)?;
        let f = OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&p)
            .or_else(|e| {
                // A file the server may only read (or a directory): read-only handle.
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EACCES) | Some(libc::EISDIR) | Some(libc::EROFS)
                ) {
                    OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(&p)
                } else {
                    Err(e)
                }
            })
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    // The handle's file is gone (removed behind the server's back).
                    self.forget(ino);
                    NfsStat::STALE
                } else {
                    io_stat(e)
                }
            })?;
        let f = Arc::new(f);
        // A full cache is emptied; the files are closed after the lock is let go.
        let _closed = {
            let mut o = self.open.lock().map_err(|_| NfsStat::SERVERFAULT)?;
            let full = if o.len() >= OPEN_CACHE {
                std::mem::take(&mut *o)
            } else {
                HashMap::new()
            };
            o.insert(ino, f.clone());
            full
        };
        Ok(f)
    }

    /// Closes the cached files that lost their last name (removed behind the server's back,
    /// not through REMOVE), which would otherwise hold their space. Called by the server's
    /// housekeeping thread every 200 ms, so that the cost of freeing a large file (70 ms for
    /// 1 GiB on tmpfs) is not paid inside the next client's request, and outside the cache's
    /// lock for the same reason.
    pub fn release_unlinked(&self) {
        let _closed: Vec<Arc<File>> = match self.open.lock() {
            Ok(mut o) => {
                let dead: Vec<u64> = o
                    .iter()
                    .filter(|(_, f)| f.metadata().is_ok_and(|m| m.nlink() == 0))
                    .map(|(ino, _)| *ino)
                    .collect();
                dead.iter().filter_map(|ino| o.remove(ino)).collect()
            }
            Err(_) => return,
        };
    }

    /// `STALE` for a file that no longer has a name (removed behind the server's back, as a
    /// kernel server answers), closing it; the attributes otherwise.
    fn live(&self, fh: &FileHandle, md: &std::fs::Metadata) -> Result<Attr, NfsStat> {
        if md.nlink() == 0 && md.is_file() {
            if let Ok(ino) = self.ino_of(fh) {
                self.forget(ino);
            }
            return Err(NfsStat::STALE);
        }
        Ok(attr_of(md))
    }

    /// READ into `buf`: (bytes, eof, attributes).
    pub fn read(
        &self,
        fh: &FileHandle,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(usize, bool, Attr), NfsStat> {
        let f = self.file(fh)?;
        let md = f.metadata().map_err(io_stat)?;
        self.live(fh, &md)?;
        if !md.is_file() {
            return Err(if md.is_dir() {
                NfsStat::ISDIR
            } else {
                NfsStat::INVAL
            });
        }
        let mut n = 0;
        while n < buf.len() {
            match f.read_at(&mut buf[n..], offset + n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_stat(e)),
            }
        }
        let eof = offset + n as u64 >= md.size();
        Ok((n, eof, attr_of(&md)))
    }

    /// WRITE, made durable as asked: 0 unstable, 1 data sync, 2 file sync.
    pub fn write(
        &self,
        fh: &FileHandle,
        offset: u64,
        data: &[u8],
        stable: u32,
    ) -> Result<Attr, NfsStat> {
        self.writable()?;
        let f = self.file(fh)?;
        f.write_all_at(data, offset).map_err(io_stat)?;
        match stable {
            0 => {}
            1 => f.sync_data().map_err(io_stat)?,
            _ => f.sync_all().map_err(io_stat)?,
        }
        let md = f.metadata().map_err(io_stat)?;
        self.live(fh, &md)
    }

    /// COMMIT: everything written to the file is made durable.
    pub fn commit(&self, fh: &FileHandle) -> Result<Attr, NfsStat> {
        let f = self.file(fh)?;
        f.sync_all().map_err(io_stat)?;
        f.metadata().map(|m| attr_of(&m)).map_err(io_stat)
    }

    /// SETATTR (mode and size).
    pub fn setattr(&self, fh: &FileHandle, s: &SetAttr) -> Result<Attr, NfsStat> {
        self.writable()?;
        let p = self.path(fh)?;
        if let Some(size) = s.size {
            self.file(fh)?.set_len(size).map_err(io_stat)?;
        }
        if let Some(m) = s.mode {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m & 0o7777))
                .map_err(io_stat)?;
        }
        self.getattr(fh)
    }

    /// CREATE: `exclusive` fails when the name exists (GUARDED, EXCLUSIVE).
    pub fn create(
        &self,
        dir: &FileHandle,
        name: &[u8],
        exclusive: bool,
        s: &SetAttr,
    ) -> Result<(FileHandle, Attr), NfsStat> {
        self.writable()?;
        let p = self.path(dir)?.join(check_name(name)?);
        let mut o = OpenOptions::new();
        o.read(true)
            .write(true)
            .mode(s.mode.unwrap_or(0o644) & 0o7777)
            .custom_flags(libc::O_NOFOLLOW);
        if exclusive {
            o.create_new(true);
        } else {
            o.create(true);
        }
        let f = o.open(&p).map_err(io_stat)?;
        if let Some(size) = s.size {
            f.set_len(size).map_err(io_stat)?;
        }
        let md = f.metadata().map_err(io_stat)?;
        Ok((self.remember(p, &md), attr_of(&md)))
    }

    /// MKDIR.
    pub fn mkdir(
        &self,
        dir: &FileHandle,
        name: &[u8],
        s: &SetAttr,
    ) -> Result<(FileHandle, Attr), NfsStat> {
        self.writable()?;
        let p = self.path(dir)?.join(check_name(name)?);
        std::fs::DirBuilder::new()
            .mode(s.mode.unwrap_or(0o755) & 0o7777)
            .create(&p)
            .map_err(io_stat)?;
        let md = std::fs::symlink_metadata(&p).map_err(io_stat)?;
        Ok((self.remember(p, &md), attr_of(&md)))
    }

    /// REMOVE (`dir == false`) or RMDIR.
    pub fn remove(&self, parent: &FileHandle, name: &[u8], dir: bool) -> Result<(), NfsStat> {
        self.writable()?;
        let p = self.path(parent)?.join(check_name(name)?);
        let md = std::fs::symlink_metadata(&p).map_err(io_stat)?;
        if dir {
            std::fs::remove_dir(&p).map_err(io_stat)?;
        } else {
            if md.is_dir() {
                return Err(NfsStat::ISDIR);
            }
            std::fs::remove_file(&p).map_err(io_stat)?;
        }
        self.forget(md.ino());
        Ok(())
    }

    /// The entries of a directory after `cookie` (its index + 1), as (fileid, name).
    pub fn readdir(&self, dir: &FileHandle) -> Result<Vec<(u64, String)>, NfsStat> {
        let p = self.path(dir)?;
        let mut v: Vec<(u64, String)> = std::fs::read_dir(&p)
            .map_err(io_stat)?
            .filter_map(|e| e.ok())
            .filter_map(|e| Some((e.metadata().ok()?.ino(), e.file_name().into_string().ok()?)))
            .collect();
        v.sort_by(|a, b| a.1.cmp(&b.1));
        Ok(v)
    }

    /// Free and total bytes of the file system (FSSTAT).
    pub fn statvfs(&self) -> (u64, u64) {
        // SAFETY: statvfs fills the struct; the path is a valid C string.
        unsafe {
            let mut s: libc::statvfs = std::mem::zeroed();
            let c = std::ffi::CString::new(self.root.as_os_str().as_encoded_bytes())
                .unwrap_or_default();
            if libc::statvfs(c.as_ptr(), &mut s) == 0 {
                (
                    s.f_bavail as u64 * s.f_frsize as u64,
                    s.f_blocks as u64 * s.f_frsize as u64,
                )
            } else {
                (0, 0)
            }
        }
    }
}
