//! The vocabulary every data path with requests in flight shares: what a request does
//! ([`DataOp`]) and how one ended ([`Completion`]). The local engines (psync, io_uring, mmap)
//! and the network protocols' pipelines (`nsperf_nfs::Pipeline`, `nsperf_smb::Pipeline`)
//! speak it, so the io engine over a pipeline hands completions through without converting.

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataOp {
    /// Read into the request's buffer.
    Read,
    /// Write from the request's buffer.
    Write,
}

/// One finished request: its buffer slot and the bytes moved, or a negative errno (an
/// error status: for a network protocol the connection is still fine).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Completion {
    /// The buffer slot the request was queued on.
    pub slot: u32,
    /// Bytes moved, or `-errno`.
    pub result: i32,
}
