//! Blocking `pread`/`pwrite`: one system call per op, the default engine (fio `psync`).

use std::io;
use std::os::fd::RawFd;

use super::{Caps, IoEngine, check, fsync_fd};
use crate::buffer::BufferPool;
use nsperf_core::data_path::DataOp;

/// The `psync` engine.
#[derive(Debug, Default)]
pub struct Psync {
    fd: RawFd,
}

impl Psync {
    /// Capabilities: synchronous, O_DIRECT capable.
    pub const CAPS: Caps = Caps {
        queued: false,
        direct: true,
        needs_full_size: false,
        does_io: true,
    };

    /// A detached engine.
    pub fn new() -> Self {
        Psync { fd: -1 }
    }
}

impl IoEngine for Psync {
    fn caps(&self) -> Caps {
        Self::CAPS
    }

    fn attach(&mut self, fd: RawFd, _len: u64, _pool: &mut BufferPool) -> io::Result<()> {
        self.fd = fd;
        Ok(())
    }

    fn detach(&mut self) {
        self.fd = -1;
    }

    #[inline]
    fn submit_sync(&mut self, kind: DataOp, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for buf.len() bytes; fd is the attached descriptor.
        let r = unsafe {
            match kind {
                DataOp::Read => libc::pread(
                    self.fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    offset as libc::off_t,
                ),
                DataOp::Write => libc::pwrite(
                    self.fd,
                    buf.as_ptr().cast(),
                    buf.len(),
                    offset as libc::off_t,
                ),
            }
        };
        check(r)
    }

    fn sync_file(&mut self) -> io::Result<()> {
        fsync_fd(self.fd)
    }
}
