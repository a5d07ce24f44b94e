//! What the caller knows about the network path to a file server that a run cannot see from
//! inside: whether the server shares this host's page cache, and the most the path carries.
//! A plan knows both for a `[[service]]` in a lab (the server runs on this host; the lab's
//! link has a configured rate); the findings compare the run's figures with them.

use nsperf_core::units::BitRate;
use serde::{Deserialize, Serialize};

/// Facts about the path to an `nfs://` server, given by the caller (all optional).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkPath {
    /// True when the server runs on this host (a lab site, loopback): its page cache is
    /// this host's, so dropping this host's cache evicts the server's copy. False: it runs
    /// elsewhere. Absent: not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_on_this_host: Option<bool>,
    /// The most the path carries, when known from outside the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<PathCeiling>,
}

impl NetworkPath {
    /// True when nothing is known (the default; left out of the JSON).
    pub fn is_unknown(&self) -> bool {
        *self == NetworkPath::default()
    }
}

/// A known ceiling of the path, with where the figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum PathCeiling {
    /// The configured rate of the lab's emulated link the data crosses.
    LabLink {
        /// Bit/s.
        rate_bps: f64,
    },
    /// TCP throughput measured on the same path (payload bit/s).
    Measured {
        /// Bit/s.
        rate_bps: f64,
    },
}

impl PathCeiling {
    /// The ceiling, bit/s.
    pub fn rate_bps(&self) -> f64 {
        match *self {
            PathCeiling::LabLink { rate_bps } | PathCeiling::Measured { rate_bps } => rate_bps,
        }
    }
}

impl std::fmt::Display for PathCeiling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathCeiling::LabLink { rate_bps } => {
                write!(f, "the lab link's configured rate {}", BitRate(*rate_bps))
            }
            PathCeiling::Measured { rate_bps } => {
                write!(
                    f,
                    "the TCP throughput measured on the path, {}",
                    BitRate(*rate_bps)
                )
            }
        }
    }
}
