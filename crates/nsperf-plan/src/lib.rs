//! Experiment plans for nsperf: plan files (TOML, parsed strictly), parameter matrix
//! expansion with `{templates}`, and the runner that drives the engines through an
//! [`exec::Executor`] (the real one starts each step as a child `nsperf step`, hands it a
//! typed [`step::StepRequest`] and reads its typed [`step::StepReport`]s: no command line in
//! between) and writes each run to the result store of `nsperf-results`.
//!
//! Dependencies point one way: this crate starts the engines as processes and writes the
//! result model; it holds no measurement code of its own.
#![deny(missing_docs)]

pub mod agent;
mod error;
pub mod exec;
pub mod plan;
mod process_group;
pub mod runner;
pub mod step;
mod template;

pub use error::{ExecError, PlanError, RunError};
pub use plan::{DEFAULT_PLAN, Plan};
pub use runner::{Progress, RunOptions, RunSummary, run_plan};

#[cfg(test)]
mod api_tests;
