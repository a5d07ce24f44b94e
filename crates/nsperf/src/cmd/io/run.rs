//! `nsperf io run DIR --workload W`: one workload, fio-style. The flags and the config built
//! from them are [`super::args`], what is printed [`super::output`].

use anyhow::Context;

use super::args::{RunArgs, config};
use super::output::{csv, human};

/// Runs `nsperf io run`.
pub fn run(a: RunArgs) -> anyhow::Result<()> {
    let cfg = config(&a)?;
    let listener = a.metrics.bind()?;
    let format = a.output.format();
    let mut live = super::live::Live::new(format, a.output.progress());
    let metrics = listener.is_some().then(crate::metrics::IoMetrics::default);
    let _endpoint = match (listener, &metrics) {
        (Some(l), Some(m)) => Some(l.serve(m.clone())?),
        _ => None,
    };
    let observe = live.wanted() || metrics.is_some();
    let mut cb = |p: &nsperf_io::Progress| {
        if let Some(m) = &metrics {
            m.sample(p);
        }
        live.sample(p);
    };
    let rep = nsperf_io::run_observed(
        &cfg,
        observe.then_some(nsperf_io::Observer {
            sample: &mut cb,
            latency: metrics.is_some(),
            ready: None,
        }),
    );
    live.clear();
    let rep = rep.with_context(|| format!("io run {}", cfg.workload))?;
    for f in rep.findings.iter().filter(|f| {
        matches!(
            f.id.as_str(),
            "engine_fallback"
                | "stale_files"
                | "stale_files_removed"
                | "stale_files_unknown"
                | "mount_changed"
        )
    }) {
        eprintln!("nsperf: {}", f.message);
    }
    super::print_report(
        &rep,
        format,
        csv,
        human,
        rep.summary.interrupted,
        "the figures above cover the part that ran",
    )?;
    if let Some(v) = rep.summary.verify.as_ref().filter(|v| v.failures > 0) {
        return Err(crate::exit::classified(
            nsperf_core::Failure::Runtime,
            format!(
                "verify: {} of {} blocks failed (the first at offset {})",
                v.failures,
                v.blocks_checked,
                v.first_failure_offset.unwrap_or(0)
            ),
        ));
    }
    Ok(())
}
