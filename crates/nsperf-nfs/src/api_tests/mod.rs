//! The crate's tests through its public API. They were integration tests, one binary each
//! linking the whole crate; as modules of the unit tests they add no binary to the workspace
//! (issue 24). A test that measures its process runs alone in a child process
//! (`crates/nsperf/tests/common/alone.rs`).

#[path = "../../../nsperf/tests/common/alone.rs"]
mod alone;

mod connections;
mod loopback;
mod low_water;
mod replay;
