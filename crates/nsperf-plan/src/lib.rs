//! Experiment plans for nsperf: plan files (TOML, parsed strictly), parameter matrix
//! expansion with `{templates}`, the runner that drives the engines through an
//! [`exec::Executor`] (the real one runs the `nsperf` binary itself and reads its `--json`),
//! the SQLite result store written run by run, and statistics over repetitions.
//!
//! Dependencies point one way: this crate starts the engines as processes and reads the
//! result model they print; it holds no measurement code of its own.
#![deny(missing_docs)]

pub mod error;
pub mod exec;
pub mod plan;
pub mod runner;
pub mod stats;
pub mod store;
pub mod template;

pub use error::{ExecError, PlanError, StoreError};
pub use plan::{DEFAULT_PLAN, Plan};
pub use runner::{Progress, RunOptions, RunSummary, run_plan};
pub use store::Store;
