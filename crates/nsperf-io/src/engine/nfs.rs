//! The `nfs` engine: NFSv3 READ/WRITE on one TCP connection per job with up to `--iodepth`
//! calls in flight ([`nsperf_nfs::Pipeline`]), through [`Piped`]; the job's buffers are the
//! RPCs' data buffers (no copy of write data, reads received into them). `sync_file` is a
//! COMMIT, sent only when the server holds unstable writes (`--fsync each` writes
//! `FILE_SYNC` instead, so each write is stable before its reply and no COMMIT is needed).

use std::io;

use nsperf_nfs::{NfsError, Pipeline};

use super::Completion;
use super::piped::{Piped, RequestPipe};
use nsperf_core::data_path::DataOp;

/// The `nfs` engine.
pub type Nfs = Piped<Pipeline>;

/// An NFS error as an `io::Error` that keeps the NFS error as its source (for the message
/// and the exit code).
pub fn to_io(e: NfsError) -> io::Error {
    let kind = match &e {
        NfsError::Lost { .. } => io::ErrorKind::ConnectionReset,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

impl RequestPipe for Pipeline {
    type Error = NfsError;

    const WAIT: &'static str = "receiving NFS replies on";
    const SEND: &'static str = "sending NFS requests on";

    fn to_io(e: NfsError) -> io::Error {
        to_io(e)
    }

    fn depth(&self) -> usize {
        Pipeline::depth(self)
    }

    unsafe fn set_buffer(&mut self, slot: u32, ptr: *mut u8, cap: usize) {
        // SAFETY: the caller keeps set_buffer's contract, which is the pipeline's.
        unsafe { Pipeline::set_buffer(self, slot, ptr, cap) }
    }

    fn queue(&mut self, kind: DataOp, offset: u64, len: usize, slot: u32) -> Result<(), NfsError> {
        Pipeline::queue(self, kind, offset, len, slot)
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), NfsError> {
        Pipeline::reap(self, min, out)
    }

    fn sync(&mut self, out: &mut Vec<Completion>) -> Result<(), NfsError> {
        self.commit(out)
    }
}
