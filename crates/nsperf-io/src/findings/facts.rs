//! What a run knows besides its config and summary, for the findings.

use crate::fsinfo::FsInfo;
use crate::stale::Sweep;

/// Facts about the run that are not in the config or summary.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    /// Total bytes of the files worked on.
    pub file_bytes: u64,
    /// Why the asked engine was replaced, if it was.
    pub engine_fallback: Option<String>,
    /// True when the target is a device (no page-cache advice about files).
    pub device: bool,
    /// The target's file system when the run ended (compared with `summary.target_fs`).
    pub fs_after: Option<FsInfo>,
    /// Stale nsperf files found in the directory, and which were removed.
    pub stale: Sweep,
}
