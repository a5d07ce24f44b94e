//! The engine of the network file protocols: a data connection with requests in flight
//! ([`RequestPipe`]: `nsperf_nfs::Pipeline`, `nsperf_smb::Pipeline`) behind [`IoEngine`].
//! The job's buffers are the requests' data buffers; `sync_file` is the protocol's
//! COMMIT or FLUSH, and requests finished while it drained are handed out by the next reap.
//!
//! The file descriptor of [`IoEngine::attach`] is unused: the pipe is built for its file
//! (see `remote/`).

use std::io;
use std::os::fd::RawFd;

use super::{Caps, Completion, IoEngine};
use crate::buffer::BufferPool;
use nsperf_core::data_path::DataOp;

/// A protocol's data connection to one file.
pub trait RequestPipe: Send + std::fmt::Debug {
    /// The protocol's error.
    type Error;
    /// The error as an `io::Error` that keeps the protocol's error as its source.
    fn to_io(e: Self::Error) -> io::Error;
    /// What waiting for replies is called in messages (`receiving NFS replies on`).
    const WAIT: &'static str;
    /// What sending requests is called in messages (`sending NFS requests on`).
    const SEND: &'static str;
    /// Number of slots.
    fn depth(&self) -> usize;
    /// Gives slot `slot` the buffer `ptr[..cap]`.
    ///
    /// # Safety
    /// The buffer must stay valid, and not be touched, while a request on the slot is in
    /// flight.
    unsafe fn set_buffer(&mut self, slot: u32, ptr: *mut u8, cap: usize);
    /// Starts a READ or WRITE of `len` bytes at `offset` on `slot`.
    fn queue(
        &mut self,
        kind: DataOp,
        offset: u64,
        len: usize,
        slot: u32,
    ) -> Result<(), Self::Error>;
    /// Waits for at least `min` requests, appending every finished one to `out`.
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), Self::Error>;
    /// Drains what is in flight into `out`, then makes written data stable.
    fn sync(&mut self, out: &mut Vec<Completion>) -> Result<(), Self::Error>;
}

/// The engine over a [`RequestPipe`].
#[derive(Debug)]
pub struct Piped<P: RequestPipe> {
    pipe: P,
    done: Vec<Completion>,
    early: Vec<Completion>,
    pool_slots: usize,
}

impl<P: RequestPipe> Piped<P> {
    /// Capabilities: queued (requests in flight), no O_DIRECT (no client cache to bypass).
    pub const CAPS: Caps = Caps {
        queued: true,
        direct: false,
        needs_full_size: false,
        does_io: true,
    };

    /// An engine on a connected pipe.
    pub fn new(pipe: P) -> Self {
        let d = pipe.depth();
        Piped {
            pipe,
            done: Vec::with_capacity(d),
            early: Vec::with_capacity(d),
            pool_slots: 0,
        }
    }
}

impl<P: RequestPipe> IoEngine for Piped<P> {
    fn caps(&self) -> Caps {
        Self::CAPS
    }

    fn reap_name(&self) -> &'static str {
        P::WAIT
    }

    fn queue_name(&self, _kind: DataOp) -> &'static str {
        P::SEND
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

    fn submit_sync(&mut self, kind: DataOp, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is borrowed for this call, and the request completes before it returns.
        unsafe { self.pipe.set_buffer(0, buf.as_mut_ptr(), buf.len()) };
        let r = self.pipe.queue(kind, offset, buf.len(), 0).and_then(|()| {
            self.done.clear();
            self.pipe.reap(1, &mut self.done)
        });
        if self.pool_slots == 0 {
            // SAFETY: as in detach.
            unsafe { self.pipe.set_buffer(0, std::ptr::null_mut(), 0) };
        }
        r.map_err(P::to_io)?;
        match self.done.first().copied() {
            Some(d) if d.result >= 0 => Ok(d.result as usize),
            Some(d) => Err(io::Error::from_raw_os_error(-d.result)),
            None => Err(io::Error::from_raw_os_error(libc::EIO)),
        }
    }

    #[inline]
    fn queue(&mut self, kind: DataOp, offset: u64, len: usize, slot: u32) -> io::Result<()> {
        self.pipe.queue(kind, offset, len, slot).map_err(P::to_io)
    }

    #[inline]
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        // Requests that finished while sync_file drained count first.
        let early = self.early.len();
        out.append(&mut self.early);
        if early < min {
            self.pipe.reap(min - early, out).map_err(P::to_io)?;
        }
        Ok(())
    }

    fn sync_file(&mut self) -> io::Result<()> {
        self.pipe.sync(&mut self.early).map_err(P::to_io)
    }
}
