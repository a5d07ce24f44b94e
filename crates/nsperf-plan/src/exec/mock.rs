//! A mock executor: figures are a function of the run's key, every call is logged, and lab or
//! cache control can be made to "need root". For exact tests of the runner, the store, the
//! statistics and the exporters.

use std::collections::BTreeMap;

use super::{
    CommandRole, Executor, Lab, Measurement, NicDelta, RunContext, SeriesPoint, ServiceAnswer,
};
use nsperf_lab::Schedule;
use nsperf_lab::events::LinkEvent;
use nsperf_lab::stats::LabStats;

use crate::error::ExecError;
use crate::plan::{LinkSettings, ResolvedStep, ServiceSpec, StepKind, describe_link};
use nsperf_results::Metric;

/// The figure of a run: `(context, step) -> value`.
pub type ValueFn = Box<dyn Fn(&RunContext<'_>, &ResolvedStep) -> f64>;

/// A mock executor.
pub struct MockExecutor {
    /// Every call, in order: `lab_up NAME ARGS`, `lab_set …`, `drop_caches`, `prime SITE
    /// CMD`, `setup SITE CMD`, `teardown SITE CMD`, `service_start NAME`, `service_stop
    /// NAME`, `measure CELL STEP PHASE REP`, `lab_down NAME`.
    pub log: Vec<String>,
    value: ValueFn,
    /// When set, `lab_up` fails with this skip reason.
    pub lab_skip: Option<String>,
    /// When set, the lab's name is held by this live process (`lab_available` refuses).
    pub lab_taken_by: Option<u32>,
    /// When set, `drop_caches` fails with this skip reason.
    pub drop_skip: Option<String>,
    /// Steps whose `measure` fails.
    pub failing_steps: Vec<String>,
    /// What the next `lab_events` returns (then nothing): link events the test makes.
    pub events: Vec<LinkEvent>,
    /// Commands (setup, teardown, prime) naming one of these words fail.
    pub failing_commands: Vec<String>,
    /// Services that are dead when checked.
    pub dead_services: Vec<String>,
    /// Services started and not stopped.
    pub running: Vec<String>,
}

impl MockExecutor {
    /// A mock whose every run measures `value(ctx, step)`.
    pub fn new(value: ValueFn) -> Self {
        MockExecutor {
            log: Vec::new(),
            value,
            lab_skip: None,
            lab_taken_by: None,
            drop_skip: None,
            failing_steps: Vec::new(),
            events: Vec::new(),
            failing_commands: Vec::new(),
            dead_services: Vec::new(),
            running: Vec::new(),
        }
    }
}

impl Executor for MockExecutor {
    fn lab_available(&mut self, lab: &Lab) -> Result<(), ExecError> {
        match self.lab_taken_by {
            Some(pid) => Err(ExecError::LabTaken {
                lab: lab.name.clone(),
                pid,
            }),
            None => Ok(()),
        }
    }

    fn lab_up(&mut self, lab: &Lab, link: &LinkSettings) -> Result<(), ExecError> {
        if let Some(r) = &self.lab_skip {
            return Err(ExecError::Skip(r.clone()));
        }
        self.log
            .push(format!("lab_up {} {}", lab.name, describe_link(link)));
        Ok(())
    }

    fn lab_set(&mut self, lab: &Lab, link: &LinkSettings) -> Result<(), ExecError> {
        self.log
            .push(format!("lab_set {} {}", lab.name, describe_link(link)));
        Ok(())
    }

    fn lab_down(&mut self, lab: &Lab) {
        self.log.push(format!("lab_down {}", lab.name));
    }

    fn lab_stats(&mut self, _lab: &Lab) -> Option<LabStats> {
        None
    }

    fn lab_events(&mut self, _lab: &Lab) -> Vec<LinkEvent> {
        std::mem::take(&mut self.events)
    }

    fn lab_schedule(&mut self, lab: &Lab, schedule: &Schedule) -> Result<(), ExecError> {
        self.log.push(format!(
            "lab_schedule {} {} events",
            lab.name,
            schedule.events.len()
        ));
        Ok(())
    }

    fn lab_stop_schedules(&mut self, lab: &Lab) {
        self.log.push(format!("lab_stop_schedules {}", lab.name));
    }

    fn drop_caches(&mut self) -> Result<(), ExecError> {
        if let Some(r) = &self.drop_skip {
            return Err(ExecError::Skip(r.clone()));
        }
        self.log.push("drop_caches".into());
        Ok(())
    }

    fn command(
        &mut self,
        _ctx: &RunContext<'_>,
        site: Option<&str>,
        command: &[String],
        role: CommandRole,
    ) -> Result<(), ExecError> {
        self.log.push(format!(
            "{role} {} {}",
            site.unwrap_or("local"),
            command.join(" ")
        ));
        if self.failing_commands.iter().any(|c| command.contains(c)) {
            return Err(ExecError::Mock(format!("{role} fails (mock)")));
        }
        Ok(())
    }

    fn service_start(
        &mut self,
        _lab: Option<&Lab>,
        service: &ServiceSpec,
    ) -> Result<ServiceAnswer, ExecError> {
        self.log.push(format!("service_start {}", service.name));
        self.running.push(service.name.clone());
        let config = match &service.kind {
            crate::plan::ServiceKind::Files(c) => c,
            crate::plan::ServiceKind::MirrorPeer { .. } => {
                let i = service.site_index.unwrap_or(0);
                return Ok(ServiceAnswer {
                    url: format!("{}:7789", nsperf_lab::site_addr(i)),
                    credentials: None,
                });
            }
        };
        let dir = &config.dir;
        Ok(match config.protocol {
            nsperf_lab::service::Protocol::Nfs => ServiceAnswer {
                url: format!("nfs://127.0.0.1:2049{}", dir.display()),
                credentials: None,
            },
            nsperf_lab::service::Protocol::Smb => ServiceAnswer {
                url: format!("smb://127.0.0.1/{}", nsperf_lab::samba::share_name(dir)),
                credentials: Some(dir.join(".mock-credentials")),
            },
        })
    }

    fn service_check(&mut self, name: &str) -> Result<(), ExecError> {
        if self.dead_services.iter().any(|d| d == name) {
            return Err(ExecError::Mock(format!("service {name} died (mock)")));
        }
        if !self.running.iter().any(|r| r == name) {
            return Err(ExecError::ServiceNotRunning(name.to_string()));
        }
        Ok(())
    }

    fn service_stop(&mut self, name: &str) {
        self.log.push(format!("service_stop {name}"));
        self.running.retain(|r| r != name);
    }

    fn measure(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
    ) -> Result<Measurement, ExecError> {
        self.log.push(format!(
            "measure {} {} {} {}",
            ctx.cell,
            step.name,
            ctx.phase.as_str(),
            ctx.repetition
        ));
        if self.failing_steps.contains(&step.name) {
            return Err(ExecError::Mock(format!("step {} fails (mock)", step.name)));
        }
        let v = (self.value)(ctx, step);
        // Four 1 s intervals: a slow first one, then steady at v with one peak.
        let series = vec![
            SeriesPoint {
                start_s: 0.0,
                length_s: 1.0,
                value: v * 0.5,
            },
            SeriesPoint {
                start_s: 1.0,
                length_s: 1.0,
                value: v,
            },
            SeriesPoint {
                start_s: 2.0,
                length_s: 1.0,
                value: v * 1.1,
            },
            SeriesPoint {
                start_s: 3.0,
                length_s: 1.0,
                value: v * 0.9,
            },
        ];
        let mut metrics = BTreeMap::new();
        metrics.insert(Metric::LAT_P50_NS, 1000.0);
        metrics.insert(Metric::LAT_P99_NS, 5000.0);
        let cpu = (0..4)
            .map(|i| nsperf_core::report::CpuInterval {
                role: "local".into(),
                start_s: i as f64,
                length_s: 1.0,
                cpu: nsperf_core::cpu::CpuSample {
                    per_core: (0..2)
                        .map(|c| nsperf_core::cpu::CoreUsage {
                            core: c,
                            busy_pct: 10.0 * (c + 1) as f64,
                            user_pct: 5.0 * (c + 1) as f64,
                            sys_pct: 5.0 * (c + 1) as f64,
                            ..Default::default()
                        })
                        .collect(),
                    process_pct: 0.0,
                },
            })
            .collect();
        let payload = (v * 4.0 / 8.0) as u64;
        Ok(Measurement {
            metric: match &step.action {
                crate::plan::Action::Io(io) => {
                    super::measure::headline_metric(nsperf_io::Headline::of(io.config.workload))
                }
                crate::plan::Action::Bonnie(_) => super::measure::BONNIE_HEADLINE,
                crate::plan::Action::Replay(_) => Metric::ELAPSED_S,
                _ if step.kind == StepKind::Io => Metric::THROUGHPUT_BYTES_PER_S,
                _ => Metric::THROUGHPUT_BPS,
            },
            value: v,
            metrics,
            series,
            cpu,
            nic: vec![NicDelta {
                site: "local".into(),
                counters: nsperf_core::nic::NicCounters {
                    name: "eth0".into(),
                    tx_bytes: payload + payload / 20,
                    ..Default::default()
                },
            }],
            payload_bytes: Some(payload),
            wire_bytes: Some(payload + payload / 20),
            duration_ns: 4_000_000_000,
            spec: step
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect(),
            report_json: None,
            trace_json: None,
            ..Default::default()
        })
    }
}
