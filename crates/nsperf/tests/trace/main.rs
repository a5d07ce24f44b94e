//! Integration tests of `nsperf trace`: captures read and analysed, live captures, and the protocol decoders
//! checked against tshark.
//!
//! One test binary per area (the ripgrep/cargo layout: `tests/AREA/main.rs` and one module per
//! file) so the workspace links a few test binaries, not one per file. Run one area with
//! `cargo test --release -p nsperf --test trace`, one file of it with `... --test trace MODULE::`.

#[path = "../common/mod.rs"]
mod common;

mod replay;
mod replay_against;
mod replay_lab;
mod replay_model;
mod replay_smb;
mod replay_v4;
mod trace;
mod trace_live;
mod trace_proto;
