//! What every protocol's replay of a captured workload shares (`nsperf replay --against`,
//! docs/replay.md): what starts each request ([`Trigger`]), the pure issue rule of one
//! connection ([`schedule`]), and the figures a replay measures ([`result`]). The protocols'
//! own scripts and drivers live in `nsperf_nfs::replay` and `nsperf_smb::replay`; the
//! capture's workloads become their scripts in `nsperf_trace::replay::script`.

pub mod result;
pub mod schedule;

pub use result::{ConnResult, ErrorStatus, OpResult, OpStats, Replayed};
pub use schedule::{Next, Scheduler};

/// What starts a request (besides a free slot: see [`schedule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The connection's start.
    Start,
    /// Request `index` was sent, `delay_ns` before.
    Call {
        /// An earlier request of the connection.
        index: usize,
        /// ns after it was sent.
        delay_ns: u64,
    },
    /// Request `index`'s reply arrived, `delay_ns` before.
    Reply {
        /// An earlier request of the connection.
        index: usize,
        /// ns after its reply arrived.
        delay_ns: u64,
    },
}

/// A scripted request: what starts it.
pub trait Triggered {
    /// What starts it.
    fn trigger(&self) -> Trigger;
}

impl Triggered for Trigger {
    fn trigger(&self) -> Trigger {
        *self
    }
}
