//! Integration tests of `nsperf net` and `nsperf server`: loopback and veth runs, endpoints,
//! faults, habits and iperf3 wire compatibility (the verdicts against the truth on lab links
//! are in the `lab` binary, whose tests run one at a time).
//!
//! One test binary per area (the ripgrep/cargo layout: `tests/AREA/main.rs` and one module per
//! file) so the workspace links a few test binaries, not one per file. Run one area with
//! `cargo test --release -p nsperf --test net`, one file of it with `... --test net MODULE::`.

#[path = "../common/mod.rs"]
mod common;

mod net;
mod net_endpoints;
mod net_faults;
mod net_habits;
mod net_iperf3;
