//! The file-system and block I/O engine of nsperf: fio-style workloads on pluggable engines
//! (`psync`, `uring`, `mmap`, `null`), the iozone-style matrix, the bonnie++-style suite, and
//! cache control (warm, cold, direct), with per-op latency histograms, throughput per
//! interval and CPU per core, reported in the shared result model.
//!
//! Safety invariant: in a directory, only files this crate created (`.nsperf-*`, `O_EXCL`)
//! are ever opened for writing, and they are removed on every exit path; a device is used only
//! with explicit consent (see [`target`]).
#![deny(missing_docs)]

pub mod bonnie;
pub mod buffer;
pub mod cache;
pub mod config;
pub mod engine;
pub mod error;
pub mod findings;
pub mod job;
pub mod matrix;
pub mod monitor;
pub mod result;
pub mod rng;
pub mod runner;
pub mod suite;
pub mod target;
pub mod workload;

pub use config::{CacheMode, FsyncMode, RunConfig};
pub use engine::EngineKind;
pub use error::IoError;
pub use result::{IoInterval, IoReport, IoSummary, Phase};
pub use runner::run;
pub use target::{FILE_PREFIX, Target};
pub use workload::Workload;
