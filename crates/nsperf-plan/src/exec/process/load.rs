//! A step's `load`: a one-off network server in one lab site and a client of nsperf's
//! network engine in another, started before the step and interrupted after it; the
//! client's report (what it moved, at 100 ms intervals) is set beside the step's figures.

use std::time::{Duration, Instant};

use nsperf_net::ClientConfig;

use super::ProcessExecutor;
use super::step_child::{site_ref, unexpected};
use crate::error::ExecError;
use crate::exec::child::Background;
use crate::exec::{Measurement, RunContext, measure};
use crate::plan::{LoadSpec, ResolvedStep};
use crate::step::{NetClient, StepReport, StepSpec};

/// How long the load's client may take to stop and report once interrupted.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The load's two processes while the step runs.
pub(super) struct RunningLoad {
    server: Background,
    client: Background,
    what: String,
}

impl ProcessExecutor {
    /// Starts the step's load and lets it run its `ramp`; an error when it cannot start or
    /// ends during the ramp.
    pub(super) fn start_load(
        &self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        load: &LoadSpec,
    ) -> Result<RunningLoad, ExecError> {
        let what = format!("load of step {} ({} -> {})", step.name, load.from, load.to);
        let server = self.start_server(ctx.lab, &load.to, load.port)?;
        let mut params = load.params.clone();
        // Longer than the step may take: the load is interrupted when the step ends.
        params.duration_ns = (step.timeout + load.ramp + Duration::from_secs(60)).as_nanos() as u64;
        let spec = StepSpec::Net {
            site: site_ref(ctx.lab, Some(&load.from)),
            client: NetClient::Server {
                config: ClientConfig {
                    host: nsperf_lab::site_addr(load.to_index).to_string(),
                    port: load.port,
                    params,
                    psk: None,
                    connect_timeout: Duration::from_secs(10),
                    server_kind: nsperf_net::ServerKind::Nsperf,
                    local: nsperf_net::LocalEnd::default(),
                },
            },
        };
        let mut client = self.background(&spec, &what)?;
        let t0 = Instant::now();
        while t0.elapsed() < load.ramp {
            if nsperf_core::signal::interrupted() {
                return Err(ExecError::Interrupted);
            }
            if let Some(how) = client.ended() {
                return Err(ExecError::Output {
                    command: what,
                    reason: format!("ended before the step started ({how})"),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(RunningLoad {
            server,
            client,
            what,
        })
    }

    /// Stops the load and gives its measurement.
    pub(super) fn stop_load(&self, load: RunningLoad) -> Result<Measurement, ExecError> {
        let RunningLoad {
            server,
            client,
            what,
        } = load;
        let (out, how) = client.interrupt_output(STOP_GRACE);
        server.finish(Duration::from_secs(3));
        let report: StepReport = serde_json::from_str(&out).map_err(|e| ExecError::Output {
            command: what.clone(),
            reason: match how {
                Some(how) => format!("no report ({how})"),
                None => format!("no report: {e}"),
            },
        })?;
        let StepReport::Net(report) = report else {
            return Err(unexpected(&what, &report));
        };
        Ok(measure::from_net(&report))
    }
}
