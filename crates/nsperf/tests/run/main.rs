//! Integration tests of `nsperf run`, `report` and `results`: plans end to end, io steps, labs and services of a
//! plan, many client sites, protocol captures in the report.
//!
//! One test binary per area (the ripgrep/cargo layout: `tests/AREA/main.rs` and one module per
//! file) so the workspace links a few test binaries, not one per file. Run one area with
//! `cargo test --release -p nsperf --test run`, one file of it with `... --test run MODULE::`.

#[path = "../common/mod.rs"]
mod common;

mod run;
mod run_io;
mod run_lab;
mod run_lab_shapes;
mod run_many;
mod run_protocol;
mod run_replay;
mod run_replicate;
mod run_service;
