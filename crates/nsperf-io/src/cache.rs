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

/// Fails unless `dir` is on a network file system (NFS, SMB/CIFS, Ceph, 9P, AFS, FUSE), the
/// only place where `--cache remote-warm` differs from `cold`.
pub fn require_network_fs(dir: &Path) -> Result<(), IoError> {
    const NETWORK: [i64; 8] = [
        0x6969,      // NFS
        0x517B,      // SMB
        0xFF53_4D42, // CIFS
        0xFE53_4D42, // SMB2
        0x00C3_6400, // Ceph
        0x0102_1997, // 9P
        0x5346_414F, // AFS
        0x6573_5546, // FUSE (sshfs, …)
    ];
    let c = crate::target::cstr(dir);
    // SAFETY: statfs fills the struct; c is a valid path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(IoError::last_os("statfs", dir));
    }
    if NETWORK.contains(&(st.f_type as i64)) {
        Ok(())
    } else {
        Err(IoError::Unsupported(format!(
            "--cache remote-warm needs a network file system; {} is local (file system type {:#x}): use cold or warm, or an nfs:// target",
            dir.display(),
            st.f_type
        )))
    }
}

/// Writes back everything and drops the page cache, dentries and inodes (needs root).
pub fn drop_all_caches() -> Result<(), IoError> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", b"3\n").map_err(IoError::DropCaches)
}

/// Pages of the file resident in the page cache, out of its pages, or `None` when it cannot
/// be told.
///
/// The cost is bounded by what exists on disk, not by `len`: only the part of `[0, len)`
/// that the file really has (its size, and within it only the data extents found with
/// `SEEK_DATA`/`SEEK_HOLE`) is mapped and asked with `mincore`, a window of at most
/// [`MINCORE_WINDOW`] at a time into one fixed vector. Holes and the part past the end of
/// the file count as pages that are not resident.
pub fn resident_pages(fd: RawFd, len: u64) -> Option<(u64, u64)> {
    let page = page_size();
    let total = len.div_ceil(page);
    if len == 0 {
        return Some((0, 0));
    }
    // SAFETY: fstat into a zeroed struct on a descriptor the caller owns.
    let size = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return None;
        }
        st.st_size.max(0) as u64
    };
    let end = len.min(size);
    let mut vec = vec![0u8; (MINCORE_WINDOW / page) as usize];
    let mut resident = 0u64;
    let mut off = 0u64;
    while off < end {
        let (data, hole) = next_extent(fd, off, end);
        if data >= end {
            break;
        }
        let mut at = data / page * page;
        while at < hole {
            let n = (hole - at).min(MINCORE_WINDOW);
            resident += resident_in(fd, at, n, page, &mut vec)?;
            at += n;
        }
        off = hole;
    }
    Some((resident.min(total), total))
}

/// Largest mapping asked with one `mincore` (1 GiB: a 256 KiB vector of 4 KiB pages).
pub const MINCORE_WINDOW: u64 = 1 << 30;

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64
}

/// The next data extent at or after `off`: `(data_start, data_end)`, clamped to `end`.
/// File systems without `SEEK_DATA` report the rest of the file as data.
fn next_extent(fd: RawFd, off: u64, end: u64) -> (u64, u64) {
    // SAFETY: lseek on a descriptor the caller owns; the file offset is not used elsewhere
    // (all I/O is positional).
    let data = unsafe { libc::lseek(fd, off as libc::off_t, libc::SEEK_DATA) };
    if data < 0 {
        let e = std::io::Error::last_os_error().raw_os_error();
        // ENXIO: no data after `off` (only a hole up to the end).
        return if e == Some(libc::ENXIO) {
            (end, end)
        } else {
            (off, end)
        };
    }
    let data = data as u64;
    // SAFETY: as above.
    let hole = unsafe { libc::lseek(fd, data as libc::off_t, libc::SEEK_HOLE) };
    let hole = if hole < 0 { end } else { hole as u64 };
    (data.min(end), hole.min(end).max(data.min(end)))
}

/// Resident pages in `[at, at + n)` (page-aligned `at`, `n` ≤ the vector's reach).
fn resident_in(fd: RawFd, at: u64, n: u64, page: u64, vec: &mut [u8]) -> Option<u64> {
    let n = usize::try_from(n).ok()?;
    let pages = n.div_ceil(page as usize).min(vec.len());
    // SAFETY: a read-only shared mapping used only for mincore, unmapped before return;
    // `vec` holds at least one byte per page of it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            n,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            at as libc::off_t,
        );
        if p == libc::MAP_FAILED {
            return None;
        }
        let r = libc::mincore(p, n, vec.as_mut_ptr());
        libc::munmap(p, n);
        if r != 0 {
            return None;
        }
    }
    Some(vec[..pages].iter().filter(|&&b| b & 1 != 0).count() as u64)
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

    /// Issue #13: a huge `len` over a small (or sparse) file costs what the file holds, not
    /// a byte per page of `len` (4 TiB was 53 s and 1 GB of memory).
    #[test]
    fn cost_bounded_by_what_exists() {
        let p = std::env::temp_dir().join(format!(".nsperf-cache-big-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
            .unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        let t = std::time::Instant::now();
        let (res, pages) = resident_pages(f.as_raw_fd(), 4 << 40).unwrap();
        assert_eq!(pages, (4u64 << 40) / page_size());
        assert!(res <= (1 << 20) / page_size());
        // Sparse: 4 TiB of hole after the data.
        f.set_len(4 << 40).unwrap();
        let (res2, _) = resident_pages(f.as_raw_fd(), 4 << 40).unwrap();
        assert_eq!(res2, res);
        assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
        drop(f);
        std::fs::remove_file(&p).unwrap();
    }
}
