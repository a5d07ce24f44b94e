//! The `mmap` engine: the file is mapped shared; reads copy from the mapping into the buffer,
//! writes copy the buffer into it, and `sync_file` is `msync` + `fsync` (fio `mmap`).

use std::io;
use std::os::fd::RawFd;

use super::{Caps, IoEngine, check, fsync_fd};
use crate::buffer::BufferPool;
use nsperf_core::data_path::DataOp;

/// The `mmap` engine.
#[derive(Debug)]
pub struct Mmap {
    fd: RawFd,
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this engine and used by one thread at a time.
unsafe impl Send for Mmap {}

impl Default for Mmap {
    fn default() -> Self {
        Self::new()
    }
}

impl Mmap {
    /// Capabilities: synchronous, no O_DIRECT, the file must have its full size.
    pub const CAPS: Caps = Caps {
        queued: false,
        direct: false,
        needs_full_size: true,
        does_io: true,
    };

    /// A detached engine.
    pub fn new() -> Self {
        Mmap {
            fd: -1,
            base: std::ptr::null_mut(),
            len: 0,
        }
    }
}

impl IoEngine for Mmap {
    fn caps(&self) -> Caps {
        Self::CAPS
    }

    fn attach(&mut self, fd: RawFd, len: u64, _pool: &mut BufferPool) -> io::Result<()> {
        self.detach();
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: mapping a descriptor we were given; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        self.fd = fd;
        self.base = p.cast();
        self.len = len;
        Ok(())
    }

    fn detach(&mut self) {
        if !self.base.is_null() {
            // SAFETY: unmapping exactly what attach mapped.
            unsafe { libc::munmap(self.base.cast(), self.len) };
            self.base = std::ptr::null_mut();
            self.len = 0;
        }
    }

    #[inline]
    fn submit_sync(&mut self, kind: DataOp, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let off = offset as usize;
        if self.base.is_null() || off >= self.len {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let n = buf.len().min(self.len - off);
        // SAFETY: [off, off + n) lies inside the mapping; buf is valid for n bytes; they
        // cannot overlap (the buffer pool is a separate allocation).
        unsafe {
            let m = self.base.add(off);
            match kind {
                DataOp::Read => std::ptr::copy_nonoverlapping(m, buf.as_mut_ptr(), n),
                DataOp::Write => std::ptr::copy_nonoverlapping(buf.as_ptr(), m, n),
            }
        }
        Ok(n)
    }

    fn sync_file(&mut self) -> io::Result<()> {
        if !self.base.is_null() {
            // SAFETY: msync of our own mapping.
            check(unsafe { libc::msync(self.base.cast(), self.len, libc::MS_SYNC) } as isize)?;
        }
        fsync_fd(self.fd)
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        self.detach();
    }
}
