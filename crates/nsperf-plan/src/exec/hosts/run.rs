//! A step on `[hosts]`: started on every host of its group at one instant of the
//! coordinator's clock (or one host after another), a network step with its server on its
//! own host, and the hosts' parts merged into the run.

use std::time::Duration;

use nsperf_net::{ClientConfig, ServerConfig};
use nsperf_results::{HostRole, Measurement};

use super::HostRunner;
use super::merge::{every_part_failed, merge};
use super::parts::{Parts, outcome_error};
use super::server::{compare_with_server, server_part};
use crate::agent::StepId;
use crate::error::ExecError;
use crate::exec::RunContext;
use crate::plan::{Action, OnHosts, ResolvedStep};
use crate::step::{NetClient, StepReport, StepSpec};

/// How long a server step may take to listen, and to report after it is stopped.
const SERVER_WAIT: Duration = Duration::from_secs(20);

impl HostRunner {
    /// Runs `step` (which names hosts) and merges what its hosts measured. A run in which
    /// every host's part failed is a failed run (the hosts' errors), not a partial one.
    pub(in crate::exec) fn measure(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
    ) -> Result<Measurement, ExecError> {
        let m = self.measure_parts(ctx, step)?;
        match every_part_failed(&m) {
            Some(why) => Err(ExecError::EveryHostFailed(why)),
            None => Ok(m),
        }
    }

    fn measure_parts(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
    ) -> Result<Measurement, ExecError> {
        let on = step
            .on
            .as_ref()
            .ok_or(ExecError::NotOnHosts("the step names no hosts"))?;
        if on.in_lab {
            self.ensure_sites(ctx.lab)?;
        }
        match &step.action {
            Action::Net(n) => {
                let server = on.server.as_deref().ok_or(ExecError::NotOnHosts(
                    "a network step needs its server host",
                ))?;
                let crate::plan::Target::Host(addr) = &n.target else {
                    return Err(ExecError::NotOnHosts(
                        "a network step on hosts targets a host",
                    ));
                };
                let config = ClientConfig {
                    host: addr.clone(),
                    port: n.port,
                    params: n.params.clone(),
                    psk: None,
                    connect_timeout: Duration::from_secs(10),
                    server_kind: nsperf_net::ServerKind::Nsperf,
                    local: nsperf_net::LocalEnd::default(),
                };
                self.net(step, on, server, n.port, config)
            }
            Action::Io(io) => {
                let spec = StepSpec::Io {
                    site: None,
                    config: ctx.io_config(io)?,
                };
                let parts = self.run_parts(on, &spec, step.timeout)?;
                Ok(merge(parts, HostRole::Host))
            }
            Action::Bonnie(_) => Err(ExecError::NotOnHosts(
                "a bonnie step runs on this host or in a lab site, not on [hosts]",
            )),
            Action::Replay(_) => Err(ExecError::NotOnHosts(
                "a replay step runs in a lab site, not on [hosts]",
            )),
            Action::Exec(e) => {
                let spec = StepSpec::Exec {
                    site: None,
                    command: e.command.clone(),
                };
                let parts = self.run_parts(on, &spec, step.timeout)?;
                Ok(merge(parts, HostRole::Host))
            }
        }
    }

    /// Runs `spec` on every host of `on`: at one instant, or one host after another.
    fn run_parts(
        &mut self,
        on: &OnHosts,
        spec: &StepSpec,
        timeout: Duration,
    ) -> Result<Parts, ExecError> {
        let idx = self.indices(&on.hosts)?;
        let mut parts = Parts::default();
        if on.concurrent && held_after_setup(spec) {
            // Every host sets up (files, layout, connections), then all start at once.
            let ids: Vec<StepId> = idx
                .iter()
                .map(|&i| self.fleet.start_held(i, spec.clone()))
                .collect();
            let ready = self.fleet.wait_ready(&ids, timeout);
            let going: Vec<usize> = idx
                .iter()
                .zip(&ready)
                .filter(|(_, r)| **r)
                .map(|(&i, _)| i)
                .collect();
            let at = self.fleet.barrier(&going);
            parts.barrier_ns = at;
            for (&id, r) in ids.iter().zip(&ready) {
                if *r {
                    self.fleet.go(id, at);
                } else {
                    // Still setting up after the step's timeout: it will not start with the
                    // others.
                    self.fleet.abort(id);
                }
            }
            let out = self.fleet.wait(&ids, timeout + Duration::from_secs(5));
            for (&i, o) in idx.iter().zip(out) {
                parts.push(&self.fleet, i, o);
            }
        } else if on.concurrent {
            let at = self.fleet.barrier(&idx);
            parts.barrier_ns = at;
            let ids: Vec<StepId> = idx
                .iter()
                .map(|&i| self.fleet.start(i, spec.clone(), Some(at)))
                .collect();
            let out = self.fleet.wait(&ids, timeout + Duration::from_secs(5));
            for (&i, o) in idx.iter().zip(out) {
                parts.push(&self.fleet, i, o);
            }
        } else {
            parts.barrier_ns = nsperf_core::clock::unix_time_ns();
            for &i in &idx {
                let id = self.fleet.start(i, spec.clone(), None);
                let o = self.fleet.wait(&[id], timeout + Duration::from_secs(5));
                parts.push(&self.fleet, i, o.into_iter().next().unwrap_or_default());
            }
        }
        if nsperf_core::signal::interrupted() {
            return Err(ExecError::Interrupted);
        }
        Ok(parts)
    }

    /// A network step: a server on its host for all the clients, the clients on theirs, the
    /// server stopped after them to report its own count.
    fn net(
        &mut self,
        step: &ResolvedStep,
        on: &OnHosts,
        server: &str,
        port: u16,
        client: ClientConfig,
    ) -> Result<Measurement, ExecError> {
        let si = self.indices(&[server.to_string()])?[0];
        let sid = self.fleet.start(
            si,
            StepSpec::NetServer {
                site: None,
                server: ServerConfig {
                    bind: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                    port,
                    one_off: false,
                    max_clients: (on.hosts.len() as u32).max(64),
                    ..ServerConfig::default()
                },
            },
            None,
        );
        let listening = self.fleet.wait_report(sid, SERVER_WAIT, |r| {
            matches!(r, StepReport::Listening { .. })
        });
        if listening.is_none() {
            let o = self.fleet.wait(&[sid], Duration::from_secs(2));
            let why = o
                .first()
                .map(|o| outcome_error(server, o))
                .unwrap_or_else(|| "no answer".into());
            return Err(ExecError::HostServer {
                host: server.to_string(),
                why,
            });
        }
        let spec = StepSpec::Net {
            site: None,
            client: NetClient::Server { config: client },
        };
        let parts = self.run_parts(on, &spec, step.timeout);
        self.fleet.stop(sid);
        let served = self.fleet.wait(&[sid], SERVER_WAIT);
        let mut parts = parts?;
        let server_part = served
            .into_iter()
            .next()
            .map(|o| server_part(&self.fleet, si, o));
        let mut m = merge(std::mem::take(&mut parts), HostRole::Client);
        if let Some(sp) = server_part {
            compare_with_server(&mut m, &sp);
            m.hosts.push(sp);
        }
        Ok(m)
    }
}

/// Whether a step on many hosts is held after its setup and started by a go (an io run's
/// record workload, whose setup — mount, file creation, layout — takes its own time on
/// each host), rather than started at one instant and set up from there.
fn held_after_setup(spec: &StepSpec) -> bool {
    matches!(spec, StepSpec::Io { config, .. } if config.workload.is_block())
}
