//! Integration tests of `nsperf io` and `nsperf doctor`: local workloads, faults and safety, fio's job files, the
//! NFS (embedded server, ganesha) and SMB (samba) clients, and issue 20's regressions.
//!
//! One test binary per area (the ripgrep/cargo layout: `tests/AREA/main.rs` and one module per
//! file) so the workspace links a few test binaries, not one per file. Run one area with
//! `cargo test --release -p nsperf --test io`, one file of it with `... --test io MODULE::`.

#[path = "../common/mod.rs"]
mod common;

mod doctor;
mod io;
mod io_faults;
mod io_fio;
mod io_safety;
mod issue20;
mod mirror;
mod nfs;
mod smb;
