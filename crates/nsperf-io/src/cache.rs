//! Page-cache control: evicting one file (`posix_fadvise(POSIX_FADV_DONTNEED)` after fsync,
//! unprivileged) and dropping the whole cache (`/proc/sys/vm/drop_caches`, root).

use std::os::fd::RawFd;
use std::path::Path;

use crate::error::IoError;

/// Writes back and evicts the file's pages from the page cache.
pub fn evict_file(fd: RawFd, path: &Path) -> Result<(), IoError> {
    // SAFETY: plain syscalls on a descriptor the caller owns.
    unsafe {
        if libc::fsync(fd) != 0 {
            return Err(IoError::last_os("fsync", path));
        }
        let r = libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
        if r != 0 {
            return Err(IoError::os(
                "posix_fadvise",
                path,
                std::io::Error::from_raw_os_error(r),
            ));
        }
    }
    Ok(())
}

/// Writes back everything and drops the page cache, dentries and inodes (needs root).
pub fn drop_all_caches() -> Result<(), IoError> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", b"3\n").map_err(IoError::DropCaches)
}

/// Pages of the file resident in the page cache, out of its pages (via mincore on a
/// mapping), or `None` when it cannot be told.
pub fn resident_pages(fd: RawFd, len: u64) -> Option<(u64, u64)> {
    if len == 0 {
        return Some((0, 0));
    }
    let len = usize::try_from(len).ok()?;
    // SAFETY: a read-only shared mapping used only for mincore, unmapped before return.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            0,
        );
        if p == libc::MAP_FAILED {
            return None;
        }
        let page = libc::sysconf(libc::_SC_PAGESIZE).max(4096) as usize;
        let pages = len.div_ceil(page);
        let mut vec = vec![0u8; pages];
        let r = libc::mincore(p, len, vec.as_mut_ptr());
        libc::munmap(p, len);
        if r != 0 {
            return None;
        }
        Some((
            vec.iter().filter(|&&b| b & 1 != 0).count() as u64,
            pages as u64,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn evict_then_mincore() {
        let p = std::env::temp_dir().join(format!(".nsperf-cache-test-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
            .unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        let (res, pages) = resident_pages(f.as_raw_fd(), 1 << 20).unwrap();
        assert!(pages >= 256 && res <= pages);
        evict_file(f.as_raw_fd(), &p).unwrap();
        drop(f);
        std::fs::remove_file(&p).unwrap();
    }
}
