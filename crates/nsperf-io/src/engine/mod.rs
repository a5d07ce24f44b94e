//! I/O engines the fio way: one file per engine, each implementing [`IoEngine`] and declaring
//! its [`Caps`]. The runner is generic over the engine, so the per-I/O path has no dynamic
//! dispatch; [`EngineKind`] names them on the command line and in results.
//!
//! Synchronous engines (`psync`, `mmap`, `null`) perform one op per call of
//! [`IoEngine::submit_sync`]; queued engines (`uring`) take up to `iodepth` ops with
//! [`IoEngine::queue`] and return them through [`IoEngine::reap`].

pub mod mmap;
pub mod nfs;
pub mod null;
pub mod piped;
pub mod psync;
pub mod smb;
pub mod uring;

use std::io;
use std::os::fd::RawFd;

use serde::{Deserialize, Serialize};

use crate::buffer::BufferPool;
use nsperf_core::data_path::DataOp;

pub use mmap::Mmap;
pub use nfs::Nfs;
pub use null::Null;
pub use psync::Psync;
pub use smb::Smb;
pub use uring::Uring;

/// What an engine can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Caps {
    /// Takes several ops in flight (`--iodepth` > 1 is meaningful).
    pub queued: bool,
    /// Works with O_DIRECT files.
    pub direct: bool,
    /// Needs the file at its full size before writing (mapped files cannot grow).
    pub needs_full_size: bool,
    /// Really moves data to or from the file (false for `null`).
    pub does_io: bool,
}

pub use nsperf_core::data_path::Completion;

/// An I/O engine.
pub trait IoEngine: Send {
    /// Its capabilities.
    fn caps(&self) -> Caps;
    /// Prepares for I/O on `fd`, a file of `len` bytes, with buffers from `pool`.
    fn attach(&mut self, fd: RawFd, len: u64, pool: &mut BufferPool) -> io::Result<()>;
    /// Releases what [`IoEngine::attach`] set up.
    fn detach(&mut self);
    /// Synchronous engines: performs one op on `buf` at `offset`, returns bytes moved.
    fn submit_sync(&mut self, kind: DataOp, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Queued engines: starts one op of `len` bytes on buffer `slot` of the attached pool.
    fn queue(&mut self, _kind: DataOp, _offset: u64, _len: usize, _slot: u32) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    /// Queued engines: submits what was queued and waits for at least `min` completions,
    /// appending every available completion to `out`.
    fn reap(&mut self, _min: usize, _out: &mut Vec<Completion>) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    /// The job's interval grid: measuring starts at `measure`, intervals are `interval`
    /// long, and no op starts after `deadline`. For engines that report figures of their
    /// own over the run's intervals (the mirror's acks); the others ignore it.
    fn measure_from(
        &mut self,
        _measure: std::time::Instant,
        _interval: std::time::Duration,
        _deadline: Option<std::time::Instant>,
    ) {
    }
    /// Makes written data durable (fsync, msync).
    fn sync_file(&mut self) -> io::Result<()>;
    /// Queued engines: what [`IoEngine::reap`] does, for its error messages
    /// (`io_uring_enter`, `receiving NFS replies on`).
    fn reap_name(&self) -> &'static str {
        "reap"
    }
    /// Queued engines: what [`IoEngine::queue`] does, for its error messages.
    fn queue_name(&self, kind: DataOp) -> &'static str {
        match kind {
            DataOp::Read => "pread",
            DataOp::Write => "pwrite",
        }
    }
}

/// The engines by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Blocking pread/pwrite (the default).
    Psync,
    /// io_uring with `--iodepth` ops in flight.
    Uring,
    /// Memory-mapped file, copies to and from the mapping.
    Mmap,
    /// Does nothing: completes every op at once (tests the harness itself).
    Null,
    /// NFSv3 over TCP in user space (`nfs://` targets): `--iodepth` RPCs in flight on each
    /// job's connection.
    Nfs,
    /// SMB 2/3 in user space (`smb://` targets): `--iodepth` requests in flight on each
    /// job's connection.
    Smb,
}

impl EngineKind {
    /// Every engine.
    pub const ALL: [EngineKind; 6] = [
        EngineKind::Psync,
        EngineKind::Uring,
        EngineKind::Mmap,
        EngineKind::Null,
        EngineKind::Nfs,
        EngineKind::Smb,
    ];

    /// The capabilities of this engine.
    pub fn caps(self) -> Caps {
        match self {
            EngineKind::Psync => Psync::CAPS,
            EngineKind::Uring => Uring::CAPS,
            EngineKind::Mmap => Mmap::CAPS,
            EngineKind::Null => Null::CAPS,
            EngineKind::Nfs => Nfs::CAPS,
            EngineKind::Smb => Smb::CAPS,
        }
    }
}

/// Parses a name, in any case (`io_uring` is accepted for `uring`, `sync`/`pread` for
/// `psync`, `nfs3`/`libnfs` for `nfs`, `smb2`/`smb3`/`cifs` for `smb`).
impl std::str::FromStr for EngineKind {
    type Err = crate::IoError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "psync" | "sync" | "pread" => EngineKind::Psync,
            "uring" | "io_uring" | "io-uring" => EngineKind::Uring,
            "mmap" => EngineKind::Mmap,
            "null" => EngineKind::Null,
            "nfs" | "nfs3" | "libnfs" => EngineKind::Nfs,
            "smb" | "smb2" | "smb3" | "cifs" => EngineKind::Smb,
            _ => {
                return Err(crate::IoError::Config(format!(
                    "unknown engine '{s}' (psync, uring, mmap, null, nfs, smb)"
                )));
            }
        })
    }
}

/// The name used on the command line and in JSON (serde's name); pads to a width.
impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            EngineKind::Psync => "psync",
            EngineKind::Uring => "uring",
            EngineKind::Mmap => "mmap",
            EngineKind::Null => "null",
            EngineKind::Nfs => "nfs",
            EngineKind::Smb => "smb",
        })
    }
}

/// Turns a negative-errno or short-result convention into `io::Result`.
pub(crate) fn check(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// fsync on a raw descriptor.
pub(crate) fn fsync_fd(fd: RawFd) -> io::Result<()> {
    // SAFETY: fsync on a descriptor owned by the caller.
    check(unsafe { libc::fsync(fd) } as isize).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_display_and_from_str() {
        let names = [
            (EngineKind::Psync, "psync"),
            (EngineKind::Uring, "uring"),
            (EngineKind::Mmap, "mmap"),
            (EngineKind::Null, "null"),
            (EngineKind::Nfs, "nfs"),
            (EngineKind::Smb, "smb"),
        ];
        assert_eq!(names.map(|(k, _)| k), EngineKind::ALL);
        for (k, name) in names {
            assert_eq!(k.to_string(), name);
            assert_eq!(name.parse::<EngineKind>().ok(), Some(k));
            assert_eq!(format!("{k:>6}|{k:<6}|"), format!("{name:>6}|{name:<6}|"));
        }
        assert_eq!(
            "aio".parse::<EngineKind>().unwrap_err().to_string(),
            "unknown engine 'aio' (psync, uring, mmap, null, nfs, smb)"
        );
    }

    #[test]
    fn names_and_caps() {
        assert!(EngineKind::Uring.caps().queued);
        assert!(!EngineKind::Mmap.caps().direct);
        assert!(!EngineKind::Null.caps().does_io);
        assert_eq!(
            "io_uring".parse::<EngineKind>().ok(),
            Some(EngineKind::Uring)
        );
    }
}
