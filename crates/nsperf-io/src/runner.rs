//! `nsperf io run`: validates the configuration and sends the run to its runner — a local
//! directory or device ([`crate::local`]), a network file protocol ([`crate::remote`]), or the
//! bonnie-style special workloads ([`crate::suite`]). Each of them drives its jobs through the
//! pass loop of [`crate::pass`].

use crate::config::RunConfig;
use crate::engine::EngineKind;
use crate::error::IoError;
use crate::pass::Observer;
use crate::result::IoReport;
use crate::space::{Need, Preflight, preflight};
use crate::target::Target;
use crate::workload::Workload;

/// Runs one workload and returns its report. Created files are removed before returning.
pub fn run(cfg: &RunConfig) -> Result<IoReport, IoError> {
    run_observed(cfg, None)
}

/// [`run`], calling `observer` on the calling thread once per interval while the record
/// workloads run.
pub fn run_observed(cfg: &RunConfig, observer: Option<Observer<'_>>) -> Result<IoReport, IoError> {
    cfg.validate()?;
    if cfg.target.is_remote() {
        return crate::remote::run(cfg, observer);
    }
    let pre = match &cfg.target {
        Target::Dir { path } => preflight(
            path,
            need(cfg),
            cfg.space_check,
            cfg.clean_stale,
            cfg.engine == EngineKind::Mmap,
        )?,
        Target::Device { .. } | Target::Nfs { .. } | Target::Smb { .. } => Preflight::default(),
    };
    let native = match &cfg.replicate {
        Some(r) if r.compare => {
            let mut plain = cfg.clone();
            plain.replicate = None;
            let rep = crate::local::run_block(&plain, pre.clone(), None)?;
            Some(crate::mirror::NativeFigures::of(&rep.summary))
        }
        _ => None,
    };
    let mut rep = match cfg.workload {
        w if w.is_block() => crate::local::run_block(cfg, pre, observer)?,
        _ => crate::suite::run_special(cfg, pre)?,
    };
    if let Some(m) = rep.summary.replication.as_mut() {
        m.native = native;
    }
    Ok(rep)
}

/// What a run creates in its directory.
pub fn need(cfg: &RunConfig) -> Need {
    match cfg.workload {
        Workload::Meta => Need {
            bytes: cfg.meta_files as u64 * cfg.meta_file_bytes,
            inodes: cfg.meta_files as u64 + 1,
        },
        Workload::CharWrite | Workload::CharRead => Need {
            bytes: cfg.size_bytes,
            inodes: 1,
        },
        _ => {
            let files = if cfg.shared_file { 1 } else { cfg.jobs as u64 };
            Need {
                bytes: cfg.blocks() * cfg.bs_bytes * cfg.jobs as u64,
                inodes: files,
            }
        }
    }
}
