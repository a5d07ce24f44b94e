//! What every part of a plan's building shares: its error, the names it accepts, and the
//! substitution context of one cell of the matrix.

use nsperf_results::{ParamKind, ParamValue};

use super::ServiceSpec;
use super::raw::Param;
use super::route::CellLinks;
use crate::error::PlanError;
use crate::template::substitute;

/// An invalid plan.
pub(super) fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::Invalid(msg.into())
}

/// Names of plans, steps and matrix parameters.
pub(super) fn check_name(what: &str, s: &str) -> Result<(), PlanError> {
    if s.is_empty()
        || s.len() > 64
        || !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(invalid(format!(
            "{what} \"{s}\" must be 1 to 64 characters of letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(())
}

/// Substitution context of one cell.
pub(super) struct Ctx<'a> {
    /// The matrix parameters of the cell, by name.
    pub(super) params: &'a [(String, String)],
    /// The path's bandwidth-delay product, bytes, when the lab has a rate and a delay.
    pub(super) bdp: Option<u64>,
    /// The lab link's rate in this cell, bit/s, when limited.
    pub(super) link_rate_bps: Option<f64>,
    /// The cell's lab links as `lab up` sets them (a plan with a lab).
    pub(super) links: Option<&'a CellLinks>,
    /// The plan's services.
    pub(super) services: &'a [ServiceSpec],
}

impl Ctx<'_> {
    fn lookup(&self, name: &str) -> Option<String> {
        if name == "bdp" {
            return self.bdp.map(|b| b.to_string());
        }
        let v = self.params.iter().find(|(k, _)| k == name)?.1.clone();
        // A matrix value may itself hold a derived variable ({bdp}).
        if v.contains('{') {
            let derived = |n: &str| (n == "bdp").then(|| self.bdp.map(|b| b.to_string()))?;
            return substitute(&v, &derived).ok();
        }
        Some(v)
    }

    /// A matrix value in this cell: its templates (`{bdp}`) resolved, typed as `kind` (or
    /// from its spelling), the template kept beside.
    pub(super) fn typed(&self, name: &str, value: &str, kind: Option<ParamKind>) -> ParamValue {
        let resolved = self
            .sub(name, &Param::Str(value.to_string()))
            .unwrap_or_else(|_| value.to_string());
        match kind {
            Some(k) => ParamValue::typed(k, &resolved, Some(value)),
            None => ParamValue::inferred(&resolved, Some(value)),
        }
    }

    /// `p` with its `{name}` templates replaced (`{{` and `}}` left as literal braces).
    pub(super) fn sub(&self, where_: &str, p: &Param) -> Result<String, PlanError> {
        substitute(&p.to_string(), &|n| self.lookup(n))
            .map_err(|e| invalid(format!("{where_}: {e}")))
    }
}
