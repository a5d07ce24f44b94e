//! The shared ground of nsperf: units with their parsers and printers, the clock, host facts
//! and samplers (CPU per core, NIC counters), statistics, and the one result model that every
//! engine (`net`, `io`, `lab`, `trace`) fills and every exporter reads.
//!
//! Nothing here touches the network or a disk under test; engines depend on this crate, never
//! the other way round.
#![deny(missing_docs)]

pub mod cgroup;
pub mod clock;
pub mod cpu;
pub mod csv;
pub mod data_path;
pub mod disk;
pub mod failure;
pub mod frame;
pub mod host;
pub mod nic;
pub mod process;
pub mod psk;
pub mod replay;
pub mod report;
pub mod signal;
pub mod sockopt;
pub mod stats;
pub mod table;
pub mod tcpinfo;
pub mod units;
pub mod url;
pub mod workload;

pub use clock::{Clock, ManualClock, MonotonicClock};
pub use failure::Failure;
pub use report::{Command, Finding, Report, SCHEMA_VERSION, Severity};
pub use units::{BitRate, Bytes, ParseUnitError, parse_duration};
pub use workload::{UnknownWorkload, Workload};
