//! The `uring` engine: io_uring with up to `--iodepth` ops in flight, the job's buffers
//! registered with the kernel (`READ_FIXED`/`WRITE_FIXED`) and the file registered as fixed
//! file 0, so the steady state costs one `io_uring_enter` per batch and no allocation.
//!
//! When the kernel refuses io_uring (`kernel.io_uring_disabled`, seccomp, an old kernel),
//! [`Uring::new`] fails; the runner then falls back to `psync` and says so in the result.

use std::io;
use std::os::fd::RawFd;

use io_uring::{IoUring, opcode, types};

use super::{Caps, Completion, IoEngine, fsync_fd};
use crate::buffer::BufferPool;
use nsperf_core::data_path::DataOp;

/// The `uring` engine.
pub struct Uring {
    ring: IoUring,
    fd: RawFd,
    pool: *mut u8,
    stride: usize,
    slots: usize,
    fixed_buffers: bool,
    fixed_file: bool,
}

impl std::fmt::Debug for Uring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uring")
            .field("fd", &self.fd)
            .field("fixed_buffers", &self.fixed_buffers)
            .finish()
    }
}

// SAFETY: the ring and the buffer pointer are used by the one thread that owns the engine.
unsafe impl Send for Uring {}

impl Uring {
    /// Capabilities: queued, O_DIRECT capable.
    pub const CAPS: Caps = Caps {
        queued: true,
        direct: true,
        needs_full_size: false,
        does_io: true,
    };

    /// A ring for `depth` ops in flight. Fails when the kernel refuses io_uring.
    pub fn new(depth: usize) -> io::Result<Self> {
        let entries = (depth.max(1) as u32).next_power_of_two();
        let ring = IoUring::builder()
            .setup_coop_taskrun()
            .setup_single_issuer()
            .build(entries)
            .or_else(|_| IoUring::new(entries))?;
        Ok(Uring {
            ring,
            fd: -1,
            pool: std::ptr::null_mut(),
            stride: 0,
            slots: 0,
            fixed_buffers: false,
            fixed_file: false,
        })
    }

    /// Whether io_uring can be used here: `Err` carries the kernel's reason.
    pub fn probe() -> io::Result<()> {
        Uring::new(1).map(|_| ())
    }
}

impl IoEngine for Uring {
    fn caps(&self) -> Caps {
        Self::CAPS
    }

    fn attach(&mut self, fd: RawFd, _len: u64, pool: &mut BufferPool) -> io::Result<()> {
        self.detach();
        self.fd = fd;
        self.stride = pool.capacity();
        self.slots = pool.count();
        self.pool = pool.ptr(0);
        let iovecs: Vec<libc::iovec> = (0..pool.count())
            .map(|i| libc::iovec {
                iov_base: pool.ptr(i).cast(),
                iov_len: pool.capacity(),
            })
            .collect();
        // SAFETY: the buffers live in `pool`, which outlives the attachment (the runner
        // detaches before dropping the pool).
        self.fixed_buffers = unsafe { self.ring.submitter().register_buffers(&iovecs) }.is_ok();
        self.fixed_file = self.ring.submitter().register_files(&[fd]).is_ok();
        Ok(())
    }

    fn detach(&mut self) {
        if self.fixed_buffers {
            let _ = self.ring.submitter().unregister_buffers();
            self.fixed_buffers = false;
        }
        if self.fixed_file {
            let _ = self.ring.submitter().unregister_files();
            self.fixed_file = false;
        }
        self.pool = std::ptr::null_mut();
    }

    fn submit_sync(&mut self, kind: DataOp, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        // Not the fast path: used only for single ops outside the measured loop.
        let e = match kind {
            DataOp::Read => {
                opcode::Read::new(types::Fd(self.fd), buf.as_mut_ptr(), buf.len() as u32)
                    .offset(offset)
                    .build()
            }
            DataOp::Write => opcode::Write::new(types::Fd(self.fd), buf.as_ptr(), buf.len() as u32)
                .offset(offset)
                .build(),
        };
        // SAFETY: buf stays borrowed until the completion below is reaped.
        unsafe {
            self.ring
                .submission()
                .push(&e)
                .map_err(|_| io::Error::from_raw_os_error(libc::EBUSY))?;
        }
        self.ring.submit_and_wait(1)?;
        let c = self
            .ring
            .completion()
            .next()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))?;
        if c.result() < 0 {
            Err(io::Error::from_raw_os_error(-c.result()))
        } else {
            Ok(c.result() as usize)
        }
    }

    #[inline]
    fn queue(&mut self, kind: DataOp, offset: u64, len: usize, slot: u32) -> io::Result<()> {
        if self.pool.is_null() || slot as usize >= self.slots || len > self.stride {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: slot < slots, so the pointer is inside the pool.
        let ptr = unsafe { self.pool.add(slot as usize * self.stride) };
        let len32 = len as u32;
        let idx = slot as u16;
        let e = match (kind, self.fixed_buffers, self.fixed_file) {
            (DataOp::Read, true, true) => opcode::ReadFixed::new(types::Fixed(0), ptr, len32, idx)
                .offset(offset)
                .build(),
            (DataOp::Read, true, false) => {
                opcode::ReadFixed::new(types::Fd(self.fd), ptr, len32, idx)
                    .offset(offset)
                    .build()
            }
            (DataOp::Read, false, _) => opcode::Read::new(types::Fd(self.fd), ptr, len32)
                .offset(offset)
                .build(),
            (DataOp::Write, true, true) => {
                opcode::WriteFixed::new(types::Fixed(0), ptr, len32, idx)
                    .offset(offset)
                    .build()
            }
            (DataOp::Write, true, false) => {
                opcode::WriteFixed::new(types::Fd(self.fd), ptr, len32, idx)
                    .offset(offset)
                    .build()
            }
            (DataOp::Write, false, _) => opcode::Write::new(types::Fd(self.fd), ptr, len32)
                .offset(offset)
                .build(),
        };
        let e = e.user_data(slot as u64);
        // SAFETY: the buffer belongs to the attached pool and is not reused by the runner
        // until this slot's completion is reaped.
        unsafe {
            if self.ring.submission().push(&e).is_err() {
                self.ring.submit()?;
                self.ring
                    .submission()
                    .push(&e)
                    .map_err(|_| io::Error::from_raw_os_error(libc::EBUSY))?;
            }
        }
        Ok(())
    }

    fn reap_name(&self) -> &'static str {
        "io_uring_enter"
    }

    #[inline]
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        loop {
            match self.ring.submit_and_wait(min) {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                    if nsperf_core::signal::interrupted() {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        for c in self.ring.completion() {
            out.push(Completion {
                slot: c.user_data() as u32,
                result: c.result(),
            });
        }
        Ok(())
    }

    fn sync_file(&mut self) -> io::Result<()> {
        fsync_fd(self.fd)
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        self.detach();
    }
}
