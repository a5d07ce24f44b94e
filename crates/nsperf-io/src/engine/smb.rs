//! The `smb` engine: SMB2 READ/WRITE on one connection per job with up to `--iodepth`
//! requests in flight ([`nsperf_smb::Pipeline`]), through [`Piped`]. `sync_file` is a FLUSH,
//! sent only when writes were buffered (`--fsync each` sends WRITE_THROUGH writes instead,
//! each stable before its reply).

use std::io;

use nsperf_smb::{Pipeline, SmbError};

use super::Completion;
use super::piped::{Piped, RequestPipe};
use nsperf_core::data_path::DataOp;

/// The `smb` engine.
pub type Smb = Piped<Pipeline>;

/// An SMB error as an `io::Error` that keeps the SMB error as its source (for the message
/// and the exit code).
pub fn to_io(e: SmbError) -> io::Error {
    let kind = match &e {
        SmbError::Lost { .. } => io::ErrorKind::ConnectionReset,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

impl RequestPipe for Pipeline {
    type Error = SmbError;

    const WAIT: &'static str = "receiving SMB replies on";
    const SEND: &'static str = "sending SMB requests on";

    fn to_io(e: SmbError) -> io::Error {
        to_io(e)
    }

    fn depth(&self) -> usize {
        Pipeline::depth(self)
    }

    unsafe fn set_buffer(&mut self, slot: u32, ptr: *mut u8, cap: usize) {
        // SAFETY: the caller keeps set_buffer's contract, which is the pipeline's.
        unsafe { Pipeline::set_buffer(self, slot, ptr, cap) }
    }

    fn queue(&mut self, kind: DataOp, offset: u64, len: usize, slot: u32) -> Result<(), SmbError> {
        Pipeline::queue(self, kind, offset, len, slot)
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), SmbError> {
        Pipeline::reap(self, min, out)
    }

    fn sync(&mut self, out: &mut Vec<Completion>) -> Result<(), SmbError> {
        self.flush(out)
    }
}
