//! The result model of nsperf experiments, apart from the planner that produces it and the
//! exporters that read it: what one run measured ([`Measurement`]: the headline figure, the
//! time series, CPU, NIC counter growth, the engine's own report), what it was measured under
//! ([`RunConditions`]), the SQLite [`Store`] written run by run, and the statistics over
//! repetitions ([`stats`]).
//!
//! Dependencies point one way: the planner (`nsperf-plan`) writes this model, the exporters
//! (`nsperf-report`) and `nsperf results` read it; this crate knows neither.
#![deny(missing_docs)]

mod error;
mod metric;
mod model;
mod params;
pub mod stats;
mod store;

pub use error::StoreError;
pub use metric::{BadMetricName, Metric, Unit, UnitFamily};
pub use model::{
    ExperimentStatus, HostPart, HostRole, IoShape, Measurement, NicDelta, Phase, RunConditions,
    RunEvent, RunEventKind, RunEventSource, RunKey, RunStatus, SeriesPoint, StepKind,
    UnknownHostRole, UnknownPhase, UnknownStepKind,
};
pub use params::{ParamKind, ParamValue, Params, UnknownParamKind, params_label};
pub use store::{
    CpuRow, ExperimentRecord, NewExperiment, RunHeader, RunRecord, STORE_VERSION, Store,
};

#[cfg(test)]
mod api_tests;
