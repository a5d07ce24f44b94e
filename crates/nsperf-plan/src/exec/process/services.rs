//! The plan's services: each a service step child in the background (the embedded NFS
//! server, ganesha, Samba), started before the steps that go through it and stopped after,
//! its own count of what it served set beside what the clients measured.

use std::time::Duration;

use super::ProcessExecutor;
use super::step_child::{site_ref, unexpected};
use crate::error::ExecError;
use crate::exec::child::Background;
use crate::exec::served::{self, ServiceCounts};
use crate::exec::{Lab, Measurement, ServiceAnswer};
use crate::plan::{ServiceKind, ServiceSpec};
use crate::step::{StepReport, StepSpec};
use nsperf_lab::service::ServiceConfig;

/// A service step running in the background.
pub(super) struct RunningService {
    bg: Background,
    /// For people: the service as the plan describes it.
    what: String,
    /// Its own count of what it served, as it prints it (the embedded NFS server).
    counts: ServiceCounts,
}

impl RunningService {
    /// Takes the count samples printed so far and keeps the last as a step's start.
    pub(super) fn before_step(&mut self) {
        let bg = &mut self.bg;
        self.counts.take(std::iter::from_fn(|| bg.try_line()));
        self.counts.restart();
    }

    /// Sets the service's count over the clients' window beside what they measured (when
    /// the service counts: the embedded NFS server).
    pub(super) fn after_step(&mut self, name: &str, m: &mut Measurement) {
        let Some(w) = served::clients_window(m) else {
            return;
        };
        let bg = &mut self.bg;
        self.counts.take_until(w.end_ns, || bg.try_line());
        if let Some(s) = self.counts.within(w) {
            served::beside_clients(m, name, w, s);
        }
        if let Some(h) = self.counts.host_within(w) {
            served::host_use(m, &h);
        }
    }
}

impl std::fmt::Debug for RunningService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

/// How long a service may take to answer (ganesha with its rpcbind takes seconds).
const SERVICE_READY: Duration = Duration::from_secs(60);

impl ProcessExecutor {
    /// Starts `service` in the background (its site, when it names one) and waits for its
    /// answer: the URL and credentials steps go through.
    pub(super) fn start_service(
        &mut self,
        lab: Option<&Lab>,
        service: &ServiceSpec,
    ) -> Result<ServiceAnswer, ExecError> {
        self.stop_service(&service.name);
        let what = format!("service {}", service.describe());
        let dir = match &service.kind {
            ServiceKind::Files(c) => &c.dir,
            ServiceKind::MirrorPeer { dir } => dir,
        };
        let dir = dir.canonicalize().map_err(|source| ExecError::ServiceDir {
            what: what.clone(),
            dir: dir.display().to_string(),
            source,
        })?;
        let site = match &service.site {
            Some(s) => {
                Some(site_ref(lab, Some(s)).ok_or_else(|| ExecError::NeedsLab(what.clone()))?)
            }
            None => None,
        };
        let spec = match &service.kind {
            ServiceKind::Files(c) => StepSpec::Service {
                site,
                service: ServiceConfig { dir, ..c.clone() },
            },
            ServiceKind::MirrorPeer { .. } => StepSpec::MirrorPeer { site, dir },
        };
        let (cmd, input) = self.step(&spec)?;
        let mut bg = Background::spawn_tied(cmd, Some(input), &what)?;
        let answer = match bg.next_line(SERVICE_READY) {
            Some(line) => match serde_json::from_str::<StepReport>(&line) {
                Ok(StepReport::Serving { url, credentials }) => ServiceAnswer { url, credentials },
                // A mirror peer: its site's address and the port it listens on.
                Ok(StepReport::Listening { addr }) => {
                    let host = service
                        .site_index
                        .map_or(addr.ip(), |i| nsperf_lab::site_addr(i).into());
                    ServiceAnswer {
                        url: std::net::SocketAddr::new(host, addr.port()).to_string(),
                        credentials: None,
                    }
                }
                Ok(other) => return Err(unexpected(&what, &other)),
                Err(e) => {
                    return Err(ExecError::Output {
                        command: what,
                        reason: e.to_string(),
                    });
                }
            },
            None if nsperf_core::signal::interrupted() => return Err(ExecError::Interrupted),
            None => {
                let why = match bg.ended() {
                    Some(how) => how,
                    None => format!("no answer within {} s", SERVICE_READY.as_secs()),
                };
                bg.finish(Duration::ZERO);
                return Err(ExecError::DidNotStart { what, why });
            }
        };
        self.services.insert(
            service.name.clone(),
            RunningService {
                bg,
                what,
                counts: ServiceCounts::default(),
            },
        );
        Ok(answer)
    }

    /// Whether the service `name` still runs.
    pub(super) fn check_service(&mut self, name: &str) -> Result<(), ExecError> {
        let s = self
            .services
            .get_mut(name)
            .ok_or_else(|| ExecError::ServiceNotRunning(name.to_string()))?;
        match s.bg.ended() {
            None => Ok(()),
            Some(how) => Err(ExecError::Stopped {
                what: s.what.clone(),
                how,
            }),
        }
    }

    /// Stops the service `name` (SIGINT), if it runs.
    pub(super) fn stop_service(&mut self, name: &str) {
        if let Some(s) = self.services.remove(name) {
            // SIGINT: the server stops and its supervisor removes its record.
            s.bg.interrupt(Duration::from_secs(5));
        }
    }
}
