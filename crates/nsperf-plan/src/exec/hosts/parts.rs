//! What each host gave: its part of the run (its figures, series and CPU, or its error),
//! read from its agent's reports and the step's end.

use std::collections::BTreeMap;

use nsperf_results::{HostPart, Metric, SeriesPoint};

use crate::agent::{Fleet, HostFailure, StepOutcome};
use crate::exec::measure;
use crate::step::StepReport;

/// What each host gave, before merging.
#[derive(Debug, Default)]
pub(super) struct Parts {
    pub(super) barrier_ns: u64,
    pub(super) parts: Vec<(
        HostPart,
        Vec<SeriesPoint>,
        Vec<nsperf_core::report::CpuInterval>,
    )>,
}

impl Parts {
    pub(super) fn push(&mut self, fleet: &Fleet, i: usize, o: StepOutcome) {
        let a = &fleet.agents()[i];
        let mut part = HostPart {
            host: a.name.clone(),
            clock_offset_ns: a.clock.offset_ns,
            clock_error_ns: a.clock.error_ns,
            ..HostPart::default()
        };
        let cpu = o.end.as_ref().map(|e| e.cpu.clone()).unwrap_or_default();
        let host_figures = o.end.as_ref().map(host_figures).unwrap_or_default();
        // Its series counts from when its engine began measuring (after its setup).
        let report = o.reports.iter().rev().find_map(|r| match r {
            StepReport::Net(r) => Some((
                measure::from_net(r),
                r.measured_unix_ns.unwrap_or(r.started_unix_ns),
            )),
            StepReport::Io(r) => Some((
                measure::from_io(r),
                r.measured_unix_ns.unwrap_or(r.started_unix_ns),
            )),
            _ => None,
        });
        let ok = o.lost.is_none() && o.end.as_ref().is_some_and(|e| e.ok());
        let mut series = Vec::new();
        match report {
            Some((m, started)) if ok => {
                part.metric = m.metric;
                part.value = m.value;
                part.payload_bytes = m.payload_bytes;
                part.metrics = m.metrics;
                part.report_json = m.report_json;
                part.started_unix_ns = a.clock.to_coordinator(started);
                series = m.series;
            }
            None if ok => {
                // A command: its elapsed time.
                let elapsed = o.end.as_ref().map_or(0, |e| e.elapsed_ns) as f64 / 1e9;
                part.metric = Metric::ELAPSED_S;
                part.value = elapsed;
                part.metrics.insert(Metric::ELAPSED_S, elapsed);
                part.started_unix_ns = self.barrier_ns;
            }
            _ => part.error = Some(outcome_error(&a.name, &o)),
        }
        part.metrics.extend(host_figures);
        let cpu = cpu
            .into_iter()
            .map(|mut c| {
                c.role = a.name.clone();
                c
            })
            .collect();
        self.parts.push((part, series, cpu));
    }
}

/// What the agent measured on its host around the step: the step process's CPU time and
/// peak memory, the host's NIC and disk counters' growth.
pub(super) fn host_figures(e: &crate::agent::StepEnd) -> BTreeMap<Metric, f64> {
    let mut m = BTreeMap::new();
    m.insert("process.cpu_s".into(), e.process.cpu_ns as f64 / 1e9);
    m.insert("process.max_rss_kib".into(), e.process.max_rss_kib as f64);
    let nic =
        |f: fn(&nsperf_core::nic::NicCounters) -> u64| e.nic.iter().map(f).sum::<u64>() as f64;
    m.insert("nic.tx_bytes".into(), nic(|c| c.tx_bytes));
    m.insert("nic.rx_bytes".into(), nic(|c| c.rx_bytes));
    let disk =
        |f: fn(&nsperf_core::disk::DiskCounters) -> u64| e.disk.iter().map(f).sum::<u64>() as f64;
    m.insert("disk.read_bytes".into(), disk(|d| d.read_bytes));
    m.insert("disk.write_bytes".into(), disk(|d| d.write_bytes));
    m
}

/// One line for a host's failed part.
pub(super) fn outcome_error(host: &str, o: &StepOutcome) -> String {
    if let Some(why) = &o.lost {
        return HostFailure::Lost {
            host: host.to_string(),
            reason: why.clone(),
        }
        .to_string();
    }
    match &o.end {
        None => format!("{host}: no end within the step's timeout (aborted)"),
        Some(e) if e.ok() => format!("{host}: the step printed no report"),
        Some(e) => HostFailure::Step {
            host: host.to_string(),
            exit_code: e.exit_code,
            reason: match e.exit_code {
                Some(c) => format!("{} (exit {c})", e.error),
                None => e.error.clone(),
            },
        }
        .to_string(),
    }
}
