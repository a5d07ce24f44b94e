//! The file-system and block I/O engine of nsperf: fio-style workloads on pluggable engines
//! (`psync`, `uring`, `mmap`, `null`, and `nfs`: NFSv3 in user space for `nfs://` targets), the iozone-style matrix, the bonnie++-style suite, and
//! cache control (warm, cold, direct), with per-op latency histograms, throughput per
//! interval and CPU per core, reported in the shared result model.
//!
//! Safety invariant: in a directory, only files this crate created (`.nsperf-*`, `O_EXCL`)
//! are ever opened for writing, and they are removed on every exit path; a device is used only
//! with explicit consent (see [`target`]). Files of runs that died (SIGKILL) are named by the
//! next run in that directory, local or through NFS or SMB, which removes those it can prove
//! dead (this host's) and the others only when asked (`clean_stale`): see `stale`.
#![deny(missing_docs)]

mod aggregate;
pub mod bonnie;
mod buffer;
mod cache;
mod config;
mod engine;
mod error;
mod findings;
mod fsinfo;
mod job;
pub mod jobfile;
mod live;
mod local;
pub mod matrix;
mod memory;
pub mod mirror;
mod monitor;
mod network_path;
mod pace;
mod pass;
mod prepare;
mod remote;
mod result;
mod rng;
mod runner;
mod space;
mod stale;
mod suite;
mod target;
mod verify;
mod workload;

pub use config::{
    CacheMode, DEFAULT_CONNECT_TIMEOUT, FsyncMode, OnClose, RateLimit, RunConfig, VerifyMode,
};
pub use engine::EngineKind;
pub use error::IoError;
pub use live::{LIVE_LATENCY_BOUNDS_NS, LIVE_LATENCY_BUCKETS, LatencyBuckets};
pub use network_path::{NetworkPath, PathCeiling};
pub use pass::{JobProgress, Observer, Progress};
pub use result::{Commit, EngineUsed, RemoteFacts, RemoteProtocol, WriteStable};
pub use result::{Headline, IoInterval, IoReport, IoSummary, Phase};
pub use runner::{run, run_observed};
pub use target::{FILE_PREFIX, Target};
pub use workload::Workload;

/// Parses `/proc/self/mountinfo`-shaped bytes (the body of the fuzz target, also run by unit
/// tests). Never panics.
pub fn fuzz_mountinfo(data: &[u8]) {
    let _ = fsinfo::parse_mountinfo(&String::from_utf8_lossy(data));
}

/// Parses a fio job file from bytes (the body of the fuzz target, also run by unit tests).
/// Never panics.
pub fn fuzz_job_file(data: &[u8]) {
    if let Ok(j) = jobfile::JobFile::parse(&String::from_utf8_lossy(data)) {
        let _ = j.to_config(None);
    }
}
