//! Where the I/O goes, and the guarantee that nothing else is touched.
//!
//! Invariant: in a directory target nsperf only opens files it created itself, with
//! `O_CREAT | O_EXCL` and a name starting with [`FILE_PREFIX`], and [`CreatedFiles`] removes
//! every one of them when dropped — on success, on error, on a panic's unwinding and after
//! Ctrl-C (the signal handler only raises a flag; the run loop sees it, returns, and the drop
//! runs). A device or existing file is used only when the caller says `--destructive`, is
//! never truncated, extended or deleted, and is refused while mounted.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use nsperf_nfs::NfsUrl;
use nsperf_smb::SmbUrl;
use serde::{Deserialize, Serialize};

use crate::error::IoError;

/// Every file nsperf creates starts with this.
pub const FILE_PREFIX: &str = ".nsperf-";

/// The target of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Target {
    /// A directory in which nsperf creates (and removes) its own files.
    Dir {
        /// The directory.
        path: PathBuf,
    },
    /// A block device or an existing file, overwritten in place.
    Device {
        /// The device or file.
        path: PathBuf,
        /// The user's explicit consent to overwrite it.
        destructive: bool,
    },
    /// A directory on an NFS server, reached by the user-space `nfs` engine; nsperf creates
    /// (and removes) its own `.nsperf-*` files there, as in [`Target::Dir`].
    Nfs {
        /// `nfs://HOST[:PORT]/EXPORT/PATH`.
        url: NfsUrl,
    },
    /// A directory in an SMB share, reached by the user-space `smb` engine; nsperf creates
    /// (and removes) its own `.nsperf-*` files there, as in [`Target::Dir`].
    Smb {
        /// `smb://HOST[:PORT]/SHARE/PATH`.
        url: SmbUrl,
        /// smbclient-style authentication file; without it, the environment
        /// (`NSPERF_SMB_USER`, …) or a guest session. Never the secret itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials: Option<PathBuf>,
    },
}

impl Target {
    /// The path given: for an `nfs://` target, the path on the server.
    pub fn path(&self) -> &Path {
        match self {
            Target::Dir { path } | Target::Device { path, .. } => path,
            Target::Nfs { url } => Path::new(url.path.as_str()),
            Target::Smb { url, .. } => Path::new(url.path.as_str()),
        }
    }

    /// True for a network file protocol target (`nfs://`, `smb://`).
    pub fn is_remote(&self) -> bool {
        matches!(self, Target::Nfs { .. } | Target::Smb { .. })
    }

    /// The local path given, if the target is local.
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            Target::Dir { path } | Target::Device { path, .. } => Some(path),
            Target::Nfs { .. } | Target::Smb { .. } => None,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Dir { path } | Target::Device { path, .. } => write!(f, "{}", path.display()),
            Target::Nfs { url } => write!(f, "{url}"),
            Target::Smb { url, .. } => write!(f, "{url}"),
        }
    }
}

/// The files created by one run; removes them all when dropped.
#[derive(Debug)]
pub struct CreatedFiles {
    dir: PathBuf,
    tag: String,
    seq: u32,
    paths: Vec<PathBuf>,
}

impl CreatedFiles {
    /// A registry for files in `dir`, which must be an existing directory.
    pub fn new(dir: &Path) -> Result<Self, IoError> {
        let md = std::fs::metadata(dir).map_err(|source| IoError::TargetDir {
            path: dir.to_path_buf(),
            source,
        })?;
        if !md.is_dir() {
            return Err(IoError::TargetDir {
                path: dir.to_path_buf(),
                source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
            });
        }
        Ok(CreatedFiles {
            dir: dir.to_path_buf(),
            tag: format!("{}", std::process::id()),
            seq: 0,
            paths: Vec::new(),
        })
    }

    /// The next unused path `DIR/.nsperf-PID-WHAT-N` (not yet created).
    fn next_path(&mut self, what: &str) -> PathBuf {
        self.seq += 1;
        self.dir
            .join(format!("{FILE_PREFIX}{}-{what}-{}", self.tag, self.seq))
    }

    /// Creates a new file (never an existing one: `O_EXCL`) and registers it for removal.
    pub fn create(&mut self, what: &str) -> Result<(File, PathBuf), IoError> {
        let path = self.next_path(what);
        let c = cstr(&path);
        // SAFETY: c is a valid NUL-terminated path; the returned fd is owned by the File.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(IoError::last_os("create", &path));
        }
        self.paths.push(path.clone());
        // SAFETY: fd is a fresh descriptor we own.
        Ok((unsafe { File::from_raw_fd(fd) }, path))
    }

    /// Registers a directory created by nsperf (for the metadata test) for removal.
    pub fn mkdir(&mut self, what: &str) -> Result<PathBuf, IoError> {
        let path = self.next_path(what);
        std::fs::create_dir(&path).map_err(|e| IoError::os("mkdir", &path, e))?;
        self.paths.push(path.clone());
        Ok(path)
    }

    /// Removes one created file now.
    pub fn remove(&mut self, path: &Path) {
        if let Some(i) = self.paths.iter().position(|p| p == path) {
            let p = self.paths.swap_remove(i);
            remove_path(&p);
        }
    }

    /// Number of files and directories still registered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.paths.len()
    }
}

fn remove_path(p: &Path) {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            // Only our own directory: it contains only files we created inside it.
            let _ = std::fs::remove_dir_all(p);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(p);
        }
        Err(_) => {}
    }
}

impl Drop for CreatedFiles {
    fn drop(&mut self) {
        for p in self.paths.drain(..) {
            remove_path(&p);
        }
    }
}

pub(crate) fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap_or_else(|_| CString::new("/").unwrap())
}

/// Opens a device or existing file for destructive use and returns it with its size in bytes.
pub fn open_device(path: &Path, destructive: bool) -> Result<(File, u64), IoError> {
    if !destructive {
        return Err(IoError::Unsafe(format!(
            "{} would be overwritten: add --destructive to allow it",
            path.display()
        )));
    }
    let md = std::fs::metadata(path).map_err(|e| IoError::os("stat", path, e))?;
    let ft = md.file_type();
    if !(ft.is_block_device() || ft.is_file()) {
        return Err(IoError::Unsafe(format!(
            "{} is neither a block device nor a regular file",
            path.display()
        )));
    }
    if ft.is_block_device() && is_mounted(md.rdev()) {
        return Err(IoError::Unsafe(format!(
            "{} is mounted: refusing to overwrite it",
            path.display()
        )));
    }
    let c = cstr(path);
    // SAFETY: valid path; no O_CREAT/O_TRUNC: the device is never created or truncated.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(IoError::last_os("open", path));
    }
    // SAFETY: fresh descriptor we own.
    let file = unsafe { File::from_raw_fd(fd) };
    let size = if ft.is_block_device() {
        block_size_bytes(&file).map_err(|e| IoError::os("BLKGETSIZE64", path, e))?
    } else {
        md.len()
    };
    Ok((file, size))
}

fn block_size_bytes(f: &File) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    const BLKGETSIZE64: libc::Ioctl = 0x8008_1272u32 as libc::Ioctl;
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut size as *mut u64) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(size)
    }
}

/// True when a file system on the block device `rdev` appears in /proc/self/mountinfo.
fn is_mounted(rdev: u64) -> bool {
    let (maj, min) = (libc::major(rdev), libc::minor(rdev));
    let want = format!("{maj}:{min}");
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| {
            t.lines()
                .any(|l| l.split(' ').nth(2) == Some(want.as_str()))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_files_are_removed_on_drop_and_never_reuse_names() {
        let dir = std::env::temp_dir().join(format!("nsperf-io-t-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let keep = dir.join("keep.txt");
        std::fs::write(&keep, b"user data").unwrap();
        {
            let mut c = CreatedFiles::new(&dir).unwrap();
            let (_f, p) = c.create("data").unwrap();
            assert!(
                p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with(FILE_PREFIX)
            );
            let d = c.mkdir("meta").unwrap();
            std::fs::write(d.join("x"), b"1").unwrap();
            assert_eq!(c.len(), 2);
        }
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1);
        assert_eq!(std::fs::read(&keep).unwrap(), b"user data");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn device_needs_destructive() {
        let e = open_device(Path::new("/dev/null"), false).unwrap_err();
        assert!(matches!(e, IoError::Unsafe(_)));
        assert!(CreatedFiles::new(Path::new("/no/such/dir")).is_err());
    }
}
