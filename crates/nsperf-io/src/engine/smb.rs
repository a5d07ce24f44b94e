//! The `smb` engine: SMB2 READ/WRITE on one connection per job with up to `--iodepth`
//! requests in flight ([`nsperf_smb::Pipeline`]). `sync_file` is a FLUSH, sent only when
//! writes were buffered (`--fsync each` sends WRITE_THROUGH writes instead, each stable
//! before its reply).
//!
//! The file descriptor of [`IoEngine::attach`] is unused: the engine is built for its file
//! (see `remote/smb.rs`).

use std::io;
use std::os::fd::RawFd;

use nsperf_smb::{DataOp, Done, Pipeline, SmbError};

use super::{Caps, Completion, IoEngine};
use crate::buffer::BufferPool;
use crate::workload::OpKind;

/// The `smb` engine.
#[derive(Debug)]
pub struct Smb {
    pipe: Pipeline,
    done: Vec<Done>,
    early: Vec<Done>,
    pool_slots: usize,
}

impl Smb {
    /// Capabilities: queued (requests in flight), no O_DIRECT (no client cache to bypass).
    pub const CAPS: Caps = Caps {
        queued: true,
        direct: false,
        needs_full_size: false,
        does_io: true,
    };

    /// An engine on a connected pipeline.
    pub fn new(pipe: Pipeline) -> Self {
        let d = pipe.depth();
        Smb {
            pipe,
            done: Vec::with_capacity(d),
            early: Vec::with_capacity(d),
            pool_slots: 0,
        }
    }
}

/// An SMB error as an `io::Error` that keeps the SMB error as its source (for the message
/// and the exit code).
pub fn to_io(e: SmbError) -> io::Error {
    let kind = match &e {
        SmbError::Lost { .. } => io::ErrorKind::ConnectionReset,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

fn op(kind: OpKind) -> DataOp {
    match kind {
        OpKind::Read => DataOp::Read,
        OpKind::Write => DataOp::Write,
    }
}

impl IoEngine for Smb {
    fn caps(&self) -> Caps {
        Self::CAPS
    }

    fn attach(&mut self, _fd: RawFd, _len: u64, pool: &mut BufferPool) -> io::Result<()> {
        self.pool_slots = pool.count().min(self.pipe.depth());
        for i in 0..self.pool_slots {
            // SAFETY: the pool outlives the attachment (the runner detaches before dropping
            // it) and a slot's buffer is not touched while its request is in flight.
            unsafe { self.pipe.set_buffer(i as u32, pool.ptr(i), pool.capacity()) };
        }
        Ok(())
    }

    fn detach(&mut self) {
        for i in 0..self.pool_slots {
            // SAFETY: a null buffer is never dereferenced (queue refuses the slot).
            unsafe { self.pipe.set_buffer(i as u32, std::ptr::null_mut(), 0) };
        }
        self.pool_slots = 0;
    }

    fn submit_sync(&mut self, kind: OpKind, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is borrowed for this call, and the request completes before it returns.
        unsafe { self.pipe.set_buffer(0, buf.as_mut_ptr(), buf.len()) };
        let r = self
            .pipe
            .queue(op(kind), offset, buf.len(), 0)
            .and_then(|()| {
                self.done.clear();
                self.pipe.reap(1, &mut self.done)
            });
        if self.pool_slots == 0 {
            // SAFETY: as in detach.
            unsafe { self.pipe.set_buffer(0, std::ptr::null_mut(), 0) };
        }
        r.map_err(to_io)?;
        match self.done.first() {
            Some(d) if d.result >= 0 => Ok(d.result as usize),
            Some(d) => Err(io::Error::from_raw_os_error(-d.result)),
            None => Err(io::Error::from_raw_os_error(libc::EIO)),
        }
    }

    #[inline]
    fn queue(&mut self, kind: OpKind, offset: u64, len: usize, slot: u32) -> io::Result<()> {
        self.pipe.queue(op(kind), offset, len, slot).map_err(to_io)
    }

    #[inline]
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        self.done.clear();
        let early = self.early.len();
        self.done.append(&mut self.early);
        if early < min {
            self.pipe.reap(min - early, &mut self.done).map_err(to_io)?;
        }
        out.extend(self.done.iter().map(|d| Completion {
            slot: d.slot,
            result: d.result,
        }));
        Ok(())
    }

    fn sync_file(&mut self) -> io::Result<()> {
        // Requests finished while draining for the FLUSH are handed out by the next reap.
        self.pipe.flush(&mut self.early).map_err(to_io)
    }
}
