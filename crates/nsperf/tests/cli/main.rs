//! Integration tests of The command line as a whole: help and flag errors, exit codes, the metrics endpoint,
//! agents and their launchers, [hosts] over ssh, and Slurm.
//!
//! One test binary per area (the ripgrep/cargo layout: `tests/AREA/main.rs` and one module per
//! file) so the workspace links a few test binaries, not one per file. Run one area with
//! `cargo test --release -p nsperf --test cli`, one file of it with `... --test cli MODULE::`.

#[path = "../common/mod.rs"]
mod common;

mod agent;
mod agent_launchers;
mod cli;
mod exit_codes;
mod hosts;
mod hosts_lab;
mod metrics;
mod slurm;
