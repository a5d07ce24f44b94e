//! Exit codes, in one place. The table is documented in `docs/exit-codes.md`.
//!
//! Library crates return typed errors that implement [`nsperf_core::failure::Classify`]; the
//! binary wraps them in `anyhow` with context and, at the top, finds the first classified
//! cause in the chain to choose the code.

use nsperf_core::Failure;
use nsperf_core::failure::Classify;

/// An error that already knows its failure class: for errors raised in the binary itself
/// (a bad flag combination found after parsing, say).
#[derive(Debug)]
pub struct Classified {
    /// The class, hence the exit code.
    pub failure: Failure,
    /// The one-line message.
    pub message: String,
}

impl std::fmt::Display for Classified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Classified {}

/// A usage error found after clap's parsing (exit 2).
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Classified {
        failure: Failure::Usage,
        message: message.into(),
    }
    .into()
}

/// An error of the given class.
pub fn classified(failure: Failure, message: impl Into<String>) -> anyhow::Error {
    Classified {
        failure,
        message: message.into(),
    }
    .into()
}

/// Type-erased access to [`Classify`] for the error types the binary knows about.
type Probe = fn(&(dyn std::error::Error + 'static)) -> Option<Failure>;

fn probe<E: Classify + std::error::Error + 'static>(
    e: &(dyn std::error::Error + 'static),
) -> Option<Failure> {
    e.downcast_ref::<E>().map(Classify::failure)
}

/// Every engine error type registered here is mapped to its class.
const PROBES: &[Probe] = &[
    |e| e.downcast_ref::<Classified>().map(|c| c.failure),
    probe::<nsperf_core::ParseUnitError>,
    probe::<nsperf_plan::PlanError>,
    probe::<nsperf_plan::ExecError>,
    probe::<nsperf_plan::RunError>,
    probe::<nsperf_results::StoreError>,
    probe::<nsperf_report::ReportError>,
    probe::<nsperf_lab::LabError>,
    probe::<nsperf_trace::TraceError>,
    probe::<nsperf_net::NetError>,
    probe::<nsperf_io::IoError>,
    probe::<nsperf_nfs::NfsError>,
    probe::<nsperf_smb::SmbError>,
    probe::<nsperf_doctor::DoctorError>,
];

/// The failure class of an error chain: the first cause that knows its class, else `Runtime`.
pub fn failure_of(err: &anyhow::Error) -> Failure {
    for cause in err.chain() {
        for p in PROBES {
            if let Some(f) = p(cause) {
                return f;
            }
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::PermissionDenied => return Failure::Permission,
                std::io::ErrorKind::Interrupted => return Failure::Interrupted,
                _ => {}
            }
        }
    }
    Failure::Runtime
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn classified_cause_is_found_through_context() {
        let e = Err::<(), _>(usage("bad -P"))
            .context("while starting")
            .unwrap_err();
        assert_eq!(failure_of(&e), Failure::Usage);
        let e = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        assert_eq!(failure_of(&e), Failure::Permission);
        assert_eq!(failure_of(&anyhow::anyhow!("x")), Failure::Runtime);
    }
}
