//! NFSv3 and NFSv4.1 over TCP in user space, for `nsperf io --engine nfs` and `nsperf lab
//! serve` (v3 only): no kernel mount and no root.
//!
//! - [`xdr`], [`rpc`], [`proto`]: the wire formats (checked decoders: no panic on any bytes,
//!   fuzzed in `fuzz/fuzz_targets/nfs_reply.rs` and `nfs_call.rs`).
//! - [`client`]: the control path (LOOKUP/CREATE/REMOVE/GETATTR/FSINFO, one call at a time)
//!   on a blocking RPC connection (`rpc_conn`), after the portmapper and MOUNT (`mount`),
//!   and [`Session`] (`session`), a mounted target directory.
//! - [`pipeline`]: the data path, READ/WRITE with many calls in flight on one connection and
//!   no allocation or data copy per call beyond the one from the socket; NFSv3 procedures or
//!   NFSv4.1 COMPOUNDs on a session of the connection's own.
//! - [`v4`]: NFSv4.1's client identity, sessions, control path and COMPOUND wire format.
//! - [`replay`]: a captured NFSv3 workload replayed against a server, with its dependencies
//!   and concurrency.
//! - [`server`]: a small threaded NFSv3 + MOUNT + portmapper server over a local directory.
//!
//! Why hand-written: `nfs3_client` (the maintained Rust client) sends one call at a time per
//! connection (no `--iodepth`), allocates a buffer per call and reply, and asserts on a
//! field of the server's reply; `nfs3_server` answers every WRITE `FILE_SYNC` without
//! syncing and has no COMMIT, so unstable-versus-stable writes could not be measured honestly.
#![deny(missing_docs)]

pub mod client;
mod error;
#[cfg(any(test, feature = "fuzz"))]
pub mod fuzz;
mod mount;
mod pipeline;
pub mod proto;
pub mod replay;
pub mod rpc;
mod rpc_conn;
mod send_queue;
pub mod server;
mod session;
mod sock;
mod status;
pub mod url;
pub mod v4;
pub mod xdr;

pub use client::{NfsClient, Timeouts};
pub use error::NfsError;
pub use pipeline::Pipeline;
pub use proto::{FileHandle, FsInfo, NfsStat, Stable};
pub use session::Session;
pub use url::{NfsUrl, NfsVersion};

#[cfg(test)]
mod api_tests;
