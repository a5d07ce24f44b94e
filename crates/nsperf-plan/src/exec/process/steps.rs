//! Each kind of step on this host or in a lab site: a network client (with its one-off
//! server in a lab site), an io run, a bonnie run, a user's command; each a step child (or
//! the command itself), its report turned into the run's measurement.

use std::time::Duration;

use nsperf_net::{ClientConfig, ServerConfig};

use super::ProcessExecutor;
use super::capture::{HEADERS_SNAPLEN, PROTOCOL_SNAPLEN};
use super::step_child::{site_ref, unexpected};
use crate::error::ExecError;
use crate::exec::child::{self, Background, ChildRun};
use crate::exec::{Lab, Measurement, RunContext, measure};
use crate::plan::{
    BonnieStep, ExecStep, IoStep, NetStep, Payload, ReplayStep, ResolvedStep, Target,
};
use crate::step::{NetClient, StepReport, StepSpec};

/// How long a server step may take to start listening.
const SERVER_READY: Duration = Duration::from_secs(15);

impl ProcessExecutor {
    pub(super) fn net(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        n: &NetStep,
    ) -> Result<Measurement, ExecError> {
        self.captured(ctx, step, n.capture.as_ref(), HEADERS_SNAPLEN, |me| {
            me.net_run(ctx, step, n)
        })
    }

    fn net_run(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        n: &NetStep,
    ) -> Result<Measurement, ExecError> {
        let nic_before = ctx.record.nic.then(|| measure::read_nic(ctx.lab));
        let (client, client_site, server) = match &n.target {
            Target::Loopback => (
                NetClient::Loopback {
                    params: n.params.clone(),
                },
                None,
                None,
            ),
            Target::Host(h) => (server_client(h.clone(), n), None, None),
            Target::Lab {
                client,
                server,
                server_index,
            } => {
                let bg = self.start_server(ctx.lab, server, n.port)?;
                let addr = nsperf_lab::site_addr(*server_index).to_string();
                (
                    server_client(addr, n),
                    site_ref(ctx.lab, Some(client)),
                    Some(bg),
                )
            }
        };
        let spec = StepSpec::Net {
            site: client_site,
            client,
        };
        let what = format!("net step {}", step.name);
        let run = self.run_step(&spec, &what, step.timeout, ctx.record.cpu);
        if let Some(s) = server {
            s.finish(Duration::from_secs(3));
        }
        let (report, child) = run?;
        let StepReport::Net(report) = report else {
            return Err(unexpected(&what, &report));
        };
        let mut m = measure::from_net(&report);
        m.cpu = child.cpu;
        if let Some(before) = nic_before {
            measure::attach_nic(&mut m, &before, ctx.lab);
        }
        Ok(m)
    }

    /// Starts a one-off server step in a lab site and waits until it listens.
    pub(super) fn start_server(
        &self,
        lab: Option<&Lab>,
        site: &str,
        port: u16,
    ) -> Result<Background, ExecError> {
        let spec = StepSpec::NetServer {
            site: site_ref(lab, Some(site)),
            server: ServerConfig {
                bind: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                port,
                one_off: true,
                ..ServerConfig::default()
            },
        };
        let what = format!("server step in {site}");
        let mut bg = self.background(&spec, &what)?;
        match bg.next_line(SERVER_READY) {
            Some(line) => match serde_json::from_str::<StepReport>(&line) {
                Ok(StepReport::Listening { .. }) => Ok(bg),
                Ok(other) => Err(unexpected(&what, &other)),
                Err(e) => Err(ExecError::Output {
                    command: what,
                    reason: e.to_string(),
                }),
            },
            None if nsperf_core::signal::interrupted() => Err(ExecError::Interrupted),
            None => Err(ExecError::NotListening {
                what: what.to_string(),
                secs: SERVER_READY.as_secs(),
            }),
        }
    }

    pub(super) fn io(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        io: &IoStep,
    ) -> Result<Measurement, ExecError> {
        self.captured(ctx, step, io.capture.as_ref(), PROTOCOL_SNAPLEN, |me| {
            me.io_run(ctx, step, io)
        })
    }

    fn io_run(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        io: &IoStep,
    ) -> Result<Measurement, ExecError> {
        let config = ctx.io_config(io)?;
        let spec = StepSpec::Io {
            site: site_ref(ctx.lab, io.site.as_deref()),
            config,
        };
        let what = format!("io step {}", step.name);
        let (report, child) = self.run_step(&spec, &what, step.timeout, ctx.record.cpu)?;
        let StepReport::Io(report) = report else {
            return Err(unexpected(&what, &report));
        };
        let mut m = measure::from_io(&report);
        m.cpu = child.cpu;
        Ok(m)
    }

    pub(super) fn bonnie(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        b: &BonnieStep,
    ) -> Result<Measurement, ExecError> {
        let spec = StepSpec::Bonnie {
            site: site_ref(ctx.lab, b.site.as_deref()),
            config: b.config.clone(),
        };
        let what = format!("bonnie step {}", step.name);
        let (report, child) = self.run_step(&spec, &what, step.timeout, ctx.record.cpu)?;
        let StepReport::Bonnie(report) = report else {
            return Err(unexpected(&what, &report));
        };
        let mut m = measure::from_bonnie(&report);
        m.cpu = child.cpu;
        Ok(m)
    }

    /// A replay step: the step child replays the capture from its site against the running
    /// service's URL.
    pub(super) fn replay(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        r: &ReplayStep,
    ) -> Result<Measurement, ExecError> {
        let answer = ctx
            .service
            .ok_or_else(|| ExecError::ServiceNotRunning(r.service.clone()))?;
        // An NFSv4 capture is replayed over NFSv4.1 (the service is ganesha offering v4).
        let url = if r.v4 {
            format!("{}?version=4.1", answer.url)
        } else {
            answer.url.clone()
        };
        let spec = StepSpec::Replay {
            site: site_ref(ctx.lab, Some(&r.site)),
            capture: r.capture.clone(),
            url,
            window_bytes: r.window_bytes,
            rtt_ms: r.rtt_ms,
            rate_bps: r.rate_bps,
        };
        let what = format!("replay step {}", step.name);
        let nic_before = ctx.record.nic.then(|| measure::read_nic(ctx.lab));
        let (report, child) = self.run_step(&spec, &what, step.timeout, ctx.record.cpu)?;
        let StepReport::Replay(report) = report else {
            return Err(unexpected(&what, &report));
        };
        let mut m = measure::from_replay(&report);
        measure::attach_capture_gaps(&mut m, r.capture_gaps);
        m.cpu = child.cpu;
        if let Some(before) = nic_before {
            measure::attach_nic(&mut m, &before, ctx.lab);
        }
        Ok(m)
    }

    pub(super) fn exec(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        e: &ExecStep,
    ) -> Result<Measurement, ExecError> {
        let what = e.command.join(" ");
        let (cmd, input) = self.user_command(ctx.lab, e.site.as_deref(), &e.command)?;
        let nic_before = ctx.record.nic.then(|| measure::read_nic(ctx.lab));
        let r = child::run(cmd, input, &what, step.timeout, ctx.record.cpu)?;
        r.check(&what)?;
        let payload = match &e.payload {
            Payload::Unknown => None,
            Payload::Declared(b) => Some(b.0),
            Payload::Parsed(re) => Some(parsed_payload(re, &r, &what)?),
        };
        let mut m = measure::from_exec(r.elapsed.as_secs_f64(), payload);
        m.duration_ns = r.elapsed.as_nanos() as u64;
        m.cpu = r.cpu;
        if let Some(before) = nic_before {
            measure::attach_nic(&mut m, &before, ctx.lab);
        }
        Ok(m)
    }
}

fn server_client(host: String, n: &NetStep) -> NetClient {
    NetClient::Server {
        config: ClientConfig {
            host,
            port: n.port,
            params: n.params.clone(),
            psk: None,
            connect_timeout: Duration::from_secs(10),
            // The runner starts nsperf's own server for the step.
            server_kind: nsperf_net::ServerKind::Nsperf,
            local: nsperf_net::LocalEnd::default(),
        },
    }
}

fn parsed_payload(re: &regex::Regex, r: &ChildRun, what: &str) -> Result<u64, ExecError> {
    let out = String::from_utf8_lossy(&r.stdout);
    let err = String::from_utf8_lossy(&r.stderr);
    let found = re
        .captures(&out)
        .or_else(|| re.captures(&err))
        .and_then(|c| c.get(1))
        .map(|g| g.as_str().to_string());
    let bad = |reason: String| ExecError::Output {
        command: what.to_string(),
        reason,
    };
    let t =
        found.ok_or_else(|| bad(format!("payload_regex \"{}\" matched nothing", re.as_str())))?;
    nsperf_core::Bytes::parse(&t)
        .map(|b| b.0)
        .map_err(|e| bad(format!("payload_regex matched \"{t}\": {e}")))
}
