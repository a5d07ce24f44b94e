//! Integration tests of `nsperf lab` and of what is measured across its links: lifecycle, the
//! emulated links' accuracy, long fat pipes, paths, topologies, and `nsperf net`'s verdicts
//! against the truth on lab links.
//!
//! Every test of this binary takes [`common::lab::timing_lock`]: they run one at a time, as
//! when each file was a binary of its own and the timing tests in it were serialised (two
//! labs forwarding at once on a 2-core machine would measure each other).
//!
//! One test binary per area (the ripgrep/cargo layout: `tests/AREA/main.rs` and one module per
//! file) so the workspace links a few test binaries, not one per file. Run one area with
//! `cargo test --release -p nsperf --test lab`, one file of it with `... --test lab MODULE::`.

#[path = "../common/mod.rs"]
mod common;

mod lab;
mod lab_accuracy;
mod lab_long_fat;
mod lab_paths;
mod lab_topology;
mod net_truth;
