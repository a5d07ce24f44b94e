//! The `null` engine: every op completes at once without touching the file, so the harness
//! (offsets, intervals, histograms, reports) can be tested exactly and its own overhead
//! measured (fio has the same engine for the same reason).

use std::io;
use std::os::fd::RawFd;

use super::{Caps, IoEngine};
use crate::buffer::BufferPool;
use nsperf_core::data_path::DataOp;

/// The `null` engine.
#[derive(Debug, Default)]
pub struct Null {
    /// Number of ops "performed", for tests.
    pub ops: u64,
}

impl Null {
    /// Capabilities: synchronous, accepts O_DIRECT files, does no I/O.
    pub const CAPS: Caps = Caps {
        queued: false,
        direct: true,
        needs_full_size: false,
        does_io: false,
    };

    /// A fresh engine.
    pub fn new() -> Self {
        Null { ops: 0 }
    }
}

impl IoEngine for Null {
    fn caps(&self) -> Caps {
        Self::CAPS
    }

    fn attach(&mut self, _fd: RawFd, _len: u64, _pool: &mut BufferPool) -> io::Result<()> {
        Ok(())
    }

    fn detach(&mut self) {}

    #[inline]
    fn submit_sync(&mut self, _kind: DataOp, _offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.ops += 1;
        Ok(buf.len())
    }

    fn sync_file(&mut self) -> io::Result<()> {
        Ok(())
    }
}
