//! Unmeasured work around a pass: laying files out, setting the page-cache state, and the
//! `--verify` read-back after a writing pass.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::path::{Path, PathBuf};

use crate::buffer::BufferPool;
use crate::cache;
use crate::config::{CacheMode, RunConfig};
use crate::error::IoError;
use crate::target::cstr;
use crate::verify::{self, Tally};
use crate::workload::Workload;

/// One file of the run (a created file, or the device).
#[derive(Debug)]
pub(crate) struct RunFile {
    pub file: File,
    pub path: PathBuf,
    pub len: u64,
}

const CHUNK: usize = 1 << 20;

/// Writes `len` bytes of incompressible data over the file, unmeasured. With `stamp =
/// Some((bs, seed))` every `bs`-byte block carries its `--verify` header.
pub(crate) fn layout(
    fd: RawFd,
    len: u64,
    path: &Path,
    stamp: Option<(u64, u64)>,
) -> Result<(), IoError> {
    // With stamps, a chunk is a whole number of blocks.
    let chunk = match stamp {
        Some((bs, _)) => (CHUNK as u64 / bs).max(1) * bs,
        None => CHUNK as u64,
    } as usize;
    let mut pool = BufferPool::new(chunk, 1, len ^ 0xA5A5);
    let buf = pool.buf(0, chunk);
    let mut off = 0u64;
    while off < len {
        if nsperf_core::signal::interrupted() {
            return Err(IoError::Interrupted);
        }
        let n = (len - off).min(chunk as u64) as usize;
        if let Some((bs, seed)) = stamp {
            for (i, block) in buf[..n].chunks_mut(bs as usize).enumerate() {
                verify::stamp(block, off + i as u64 * bs, seed);
            }
        }
        // SAFETY: buf is valid for n <= chunk bytes.
        let r = unsafe { libc::pwrite(fd, buf.as_ptr().cast(), n, off as libc::off_t) };
        if r <= 0 {
            return Err(IoError::last_os("write (layout)", path));
        }
        // A short write of a stamped chunk is rewritten from its start (headers stay whole).
        if stamp.is_none() || r as usize == n {
            off += r as u64;
        }
    }
    Ok(())
}

/// Reads the whole file once, unmeasured (the warm-up pass).
pub(crate) fn read_through(fd: RawFd, len: u64, path: &Path) -> Result<(), IoError> {
    let mut pool = BufferPool::new(CHUNK, 1, 1);
    let buf = pool.buf(0, CHUNK);
    let mut off = 0u64;
    while off < len {
        if nsperf_core::signal::interrupted() {
            return Err(IoError::Interrupted);
        }
        let n = (len - off).min(CHUNK as u64) as usize;
        // SAFETY: buf is valid for n bytes.
        let r = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), n, off as libc::off_t) };
        if r < 0 {
            return Err(IoError::last_os("read (warm-up)", path));
        }
        if r == 0 {
            break;
        }
        off += r as u64;
    }
    Ok(())
}

/// Reads back `blocks` blocks of `bs` bytes from `base` and checks each (`--verify`).
pub(crate) fn verify_readback(
    fd: RawFd,
    path: &Path,
    base: u64,
    bs: u64,
    blocks: u64,
    seed: u64,
    tally: &mut Tally,
) -> Result<(), IoError> {
    let per = (CHUNK as u64 / bs).max(1);
    let mut pool = BufferPool::new((per * bs) as usize, 1, 3);
    let mut b = 0u64;
    while b < blocks {
        if nsperf_core::signal::interrupted() {
            return Ok(());
        }
        let k = per.min(blocks - b);
        let want = (k * bs) as usize;
        let buf = pool.buf(0, want);
        let off = base + b * bs;
        let mut got = 0usize;
        while got < want {
            // SAFETY: buf is valid for `want` bytes.
            let r = unsafe {
                libc::pread(
                    fd,
                    buf[got..].as_mut_ptr().cast(),
                    want - got,
                    (off + got as u64) as libc::off_t,
                )
            };
            if r < 0 {
                return Err(IoError::last_os("read (verify)", path));
            }
            if r == 0 {
                break;
            }
            got += r as usize;
        }
        for i in 0..k {
            let s = (i * bs) as usize;
            let block = &buf[s.min(got)..(s + bs as usize).min(got)];
            tally.record(
                off + i * bs,
                verify::check(block, bs as usize, off + i * bs, seed),
            );
        }
        b += k;
    }
    Ok(())
}

/// Sets the page-cache state of every file for the measured pass.
pub(crate) fn prepare_cache(cfg: &RunConfig, files: &mut [RunFile]) -> Result<(), IoError> {
    let reads = cfg.workload.needs_layout() && cfg.workload != Workload::Rewrite;
    for f in files.iter() {
        let fd = f.file.as_raw_fd();
        if cfg.workload == Workload::Reread {
            if cfg.cache != CacheMode::Warm {
                cache::evict_file(fd, &f.path)?;
            }
            read_through(fd, f.len, &f.path)?;
        } else if matches!(cfg.cache, CacheMode::Warm | CacheMode::RemoteWarm) && reads {
            read_through(fd, f.len, &f.path)?;
        }
        if cfg.cache == CacheMode::RemoteWarm {
            // The server read it (and keeps it); the client's own pages are dropped.
            cache::evict_file(fd, &f.path)?;
        }
        if matches!(cfg.cache, CacheMode::Cold | CacheMode::Direct)
            && cfg.workload != Workload::Reread
        {
            cache::evict_file(fd, &f.path)?;
        }
    }
    if cfg.drop_caches {
        cache::drop_all_caches()?;
    }
    if cfg.cache == CacheMode::Direct {
        for f in files.iter_mut() {
            f.file = reopen_direct(&f.path)?;
        }
    }
    Ok(())
}

fn reopen_direct(path: &Path) -> Result<File, IoError> {
    let c = cstr(path);
    // SAFETY: opening an existing file we created (or the device the user named); no
    // O_CREAT, no O_TRUNC.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_DIRECT | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) {
            return Err(IoError::Unsupported(format!(
                "the file system of {} refuses O_DIRECT (--cache direct); use --cache cold instead",
                path.display()
            )));
        }
        return Err(IoError::os("open O_DIRECT", path, e));
    }
    // SAFETY: fresh descriptor we own.
    Ok(unsafe { File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamped_layout_reads_back_clean_and_damage_is_found() {
        let p = std::env::temp_dir().join(format!(".nsperf-prep-t-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
            .unwrap();
        let fd = f.as_raw_fd();
        layout(fd, 3 << 20, &p, Some((4096, 11))).unwrap();
        let mut t = Tally::default();
        verify_readback(fd, &p, 0, 4096, 768, 11, &mut t).unwrap();
        assert_eq!((t.checked, t.failed), (768, 0));
        // One flipped byte in block 5; a read past the end is a short read.
        let mut b = [0u8; 1];
        // SAFETY: one-byte read and write of our own file.
        unsafe {
            libc::pread(fd, b.as_mut_ptr().cast(), 1, 5 * 4096 + 100);
            b[0] = !b[0];
            libc::pwrite(fd, b.as_ptr().cast(), 1, 5 * 4096 + 100);
        }
        let mut t = Tally::default();
        verify_readback(fd, &p, 0, 4096, 770, 11, &mut t).unwrap();
        assert_eq!((t.checked, t.failed), (770, 3));
        assert_eq!(t.first, Some((5 * 4096, verify::Mismatch::Checksum)));
        drop(f);
        std::fs::remove_file(&p).unwrap();
    }
}
