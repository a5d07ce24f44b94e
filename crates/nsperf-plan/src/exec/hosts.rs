//! Steps on `[hosts]`: carried out by the hosts' agents through a [`Fleet`], all hosts of a
//! group started at one instant of the coordinator's clock (or one after another), and their
//! results merged on that clock: each host's part, the aggregate headline (the sum of the
//! hosts' rates), the aggregate time series (each host's intervals placed by its measured
//! start), its peak and sustained figures, the start skew, and for a network step the
//! server's own count beside the clients' sum.
//!
//! A host whose part fails (its agent lost, its step failed) is recorded with the error and
//! the run is partial; the others' figures are kept. All hosts failing fails the run.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use nsperf_net::{ClientConfig, ServerConfig};
use nsperf_results::{HostPart, HostRole, Measurement, Metric, SeriesPoint};

use super::window::{Placed, Window, common_window, rebinned, within_window};
use super::{RunContext, measure};
use crate::agent::{AgentOptions, Fleet, HostFailure, StepId, StepOutcome};
use crate::error::ExecError;
use crate::plan::{Action, Hosts, OnHosts, ResolvedStep};
use crate::step::{NetClient, StepReport, StepSpec};

/// How long a server step may take to listen, and to report after it is stopped.
const SERVER_WAIT: Duration = Duration::from_secs(20);
/// How long to wait for every agent's welcome and clock.
const CONNECT_WAIT: Duration = Duration::from_secs(60);

/// What keeps a batch group's agents running (dropped after the fleet closed).
enum BatchGuard {
    Slurm(crate::agent::SrunStep),
    Kubernetes(crate::agent::K8sDeployment),
}

/// The plan's hosts, connected.
pub(super) struct HostRunner {
    fleet: Fleet,
    batch: Vec<BatchGuard>,
    /// The lab's sites steps run on: their agents start once the lab is up.
    sites: Vec<crate::plan::HostSpec>,
    /// The lab whose sites' agents are connected now.
    sites_in: Option<String>,
    exe: std::path::PathBuf,
}

impl std::fmt::Debug for HostRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostRunner")
            .field("fleet", &self.fleet)
            .finish()
    }
}

impl HostRunner {
    /// Reaches or starts every host's agent (in parallel) and opens the sessions; the first
    /// host that cannot be reached fails it.
    pub(super) fn connect(hosts: &Hosts, exe: &Path) -> Result<Self, ExecError> {
        let handles: Vec<_> = hosts
            .hosts
            .iter()
            .filter(|h| {
                !matches!(
                    h.launch,
                    crate::agent::Launch::Batch { .. } | crate::agent::Launch::Site { .. }
                )
            })
            .cloned()
            .map(|h| {
                let exe = exe.to_path_buf();
                std::thread::spawn(move || {
                    let psk = match &h.psk_file {
                        Some(p) => Some(nsperf_net::read_key_file(p).map_err(|e| {
                            HostFailure::Unreachable {
                                host: h.name.clone(),
                                reason: e.to_string(),
                            }
                        })?),
                        None => None,
                    };
                    let opts = AgentOptions {
                        allow: h.allow.clone(),
                    };
                    crate::agent::open(&h.name, &h.launch, &opts, psk, &exe)
                })
            })
            .collect();
        let mut links = Vec::new();
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(l)) => links.push(l),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(HostFailure::Unreachable {
                        host: "?".into(),
                        reason: "the launching thread panicked".into(),
                    });
                }
            }
        }
        let mut batch = Vec::new();
        if first_err.is_none() {
            for g in &hosts.batch {
                match start_batch(g, hosts, exe) {
                    Ok((mut l, guard)) => {
                        links.append(&mut l);
                        batch.push(guard);
                    }
                    Err(e) => {
                        first_err = Some(e);
                        break;
                    }
                }
            }
        }
        let mut fleet = Fleet::new();
        if let Some(e) = first_err {
            // The links that opened are closed with the fleet.
            let _ = fleet.connect(links, Duration::from_secs(1));
            return Err(e.into());
        }
        fleet.connect(links, CONNECT_WAIT)?;
        let sites = hosts
            .hosts
            .iter()
            .filter(|h| matches!(h.launch, crate::agent::Launch::Site { .. }))
            .cloned()
            .collect();
        Ok(HostRunner {
            fleet,
            batch,
            sites,
            sites_in: None,
            exe: exe.to_path_buf(),
        })
    }

    /// Starts an agent in every lab site steps run on (`ip netns exec` of the site running
    /// `nsperf agent --stdio`), once per build of the lab, and measures their clocks.
    fn ensure_sites(&mut self, lab: Option<&super::Lab>) -> Result<(), ExecError> {
        if self.sites.is_empty() {
            return Ok(());
        }
        let lab = lab.ok_or(ExecError::LabNotUp)?;
        if self.sites_in.as_deref() == Some(lab.name.as_str()) {
            return Ok(());
        }
        self.close_sites();
        let mut links = Vec::with_capacity(self.sites.len());
        for h in &self.sites {
            let crate::agent::Launch::Site { site } = &h.launch else {
                continue;
            };
            let opts = AgentOptions {
                allow: h.allow.clone(),
            };
            let mut argv = vec![self.exe.display().to_string()];
            argv.extend(opts.args());
            let cmd = nsperf_lab::lab::exec_command(&lab.name, site, &argv).map_err(|source| {
                ExecError::SiteAgent {
                    site: site.clone(),
                    source,
                }
            })?;
            links.push(crate::agent::stdio_link(&h.name, cmd, None)?);
        }
        self.fleet.connect(links, CONNECT_WAIT)?;
        self.sites_in = Some(lab.name.clone());
        Ok(())
    }

    /// Ends the sessions of the agents in the lab's sites (before the lab goes down).
    pub(super) fn close_sites(&mut self) {
        if self.sites_in.take().is_none() {
            return;
        }
        let idx: Vec<usize> = self
            .sites
            .iter()
            .filter_map(|h| self.fleet.index(&h.name))
            .collect();
        self.fleet.close_agents(&idx, Duration::from_secs(3));
    }

    /// The fleet (for its agents' clocks and facts).
    pub(super) fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// Ends every agent session, then the batch groups (srun step, Kubernetes Job).
    pub(super) fn close(&mut self) {
        self.fleet.close(Duration::from_secs(3));
        for g in &mut self.batch {
            match g {
                BatchGuard::Slurm(s) => {
                    s.stop(Duration::from_secs(5));
                }
                BatchGuard::Kubernetes(d) => {
                    if let Err(e) = d.delete() {
                        eprintln!("nsperf: {e}");
                    }
                }
            }
        }
        self.batch.clear();
    }

    fn indices(&self, names: &[String]) -> Result<Vec<usize>, ExecError> {
        names
            .iter()
            .map(|n| {
                self.fleet
                    .index(n)
                    .ok_or_else(|| ExecError::HostNotConnected(n.to_string()))
            })
            .collect()
    }

    /// Runs `step` (which names hosts) and merges what its hosts measured. A run in which
    /// every host's part failed is a failed run (the hosts' errors), not a partial one.
    pub(super) fn measure(
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

/// Starts a batch group's agents (srun in the allocation, or an Indexed Job) and returns
/// their links named as the plan names them (`GROUP-I`).
fn start_batch(
    g: &crate::plan::BatchGroup,
    hosts: &Hosts,
    exe: &Path,
) -> Result<(Vec<crate::agent::AgentLink>, BatchGuard), HostFailure> {
    use crate::plan::BatchGroup;
    // What the group's agents run: what the plan's steps need of any of them.
    let mut allow: Vec<crate::agent::StepClass> = hosts
        .hosts
        .iter()
        .filter(|h| matches!(&h.launch, crate::agent::Launch::Batch { group, .. } if group == g.group()))
        .flat_map(|h| h.allow.iter().copied())
        .collect();
    allow.sort();
    allow.dedup();
    match g {
        BatchGroup::Slurm {
            group,
            tasks,
            psk_file,
            port,
        } => {
            let mut a = crate::agent::SlurmAgents::new(psk_file.clone(), exe.to_path_buf());
            a.tasks = std::num::NonZeroU32::new(*tasks);
            a.port = *port;
            a.allow = allow;
            let (mut links, srun) = crate::agent::slurm_links(&a)?;
            for (i, l) in links.iter_mut().enumerate() {
                l.name = format!("{group}-{i}");
            }
            Ok((links, BatchGuard::Slurm(srun)))
        }
        BatchGroup::Kubernetes {
            group,
            count,
            image,
            namespace,
            context,
            psk_file,
            nsperf,
        } => {
            let unreachable = |reason: String| HostFailure::Unreachable {
                host: group.clone(),
                reason,
            };
            let n =
                std::num::NonZeroU32::new(*count).ok_or_else(|| unreachable("no pods".into()))?;
            let mut a = crate::agent::K8sAgents::new(group, n, image);
            a.namespace = namespace.clone();
            a.allow = allow;
            if let Some(p) = nsperf {
                a.nsperf = p.clone();
            }
            let psk =
                nsperf_net::read_key_file(psk_file).map_err(|e| unreachable(e.to_string()))?;
            let kubectl = crate::agent::Kubectl {
                context: context.clone(),
                ..crate::agent::Kubectl::default()
            };
            let (links, d) = crate::agent::k8s_links(&a, &kubectl, &psk, CONNECT_WAIT)?;
            Ok((links, BatchGuard::Kubernetes(d)))
        }
    }
}

/// What each host gave, before merging.
#[derive(Debug, Default)]
struct Parts {
    barrier_ns: u64,
    parts: Vec<(
        HostPart,
        Vec<SeriesPoint>,
        Vec<nsperf_core::report::CpuInterval>,
    )>,
}

impl Parts {
    fn push(&mut self, fleet: &Fleet, i: usize, o: StepOutcome) {
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
fn host_figures(e: &crate::agent::StepEnd) -> BTreeMap<Metric, f64> {
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
fn outcome_error(host: &str, o: &StepOutcome) -> String {
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

/// The server's own count as a part of the run.
fn server_part(fleet: &Fleet, i: usize, o: StepOutcome) -> HostPart {
    let a = &fleet.agents()[i];
    let mut part = HostPart {
        host: a.name.clone(),
        role: HostRole::Server,
        metric: "received_bytes".into(),
        clock_offset_ns: a.clock.offset_ns,
        clock_error_ns: a.clock.error_ns,
        ..HostPart::default()
    };
    if let Some(e) = &o.end {
        part.metrics.extend(host_figures(e));
    }
    let served = o.reports.iter().rev().find_map(|r| match r {
        StepReport::Served(t) => Some(t.clone()),
        _ => None,
    });
    match served {
        Some(t) => {
            part.value = t.received_bytes as f64;
            part.payload_bytes = Some(t.received_bytes);
            for (k, v) in [
                ("received_bytes", t.received_bytes as f64),
                ("sent_bytes", t.sent_bytes as f64),
                ("tests_completed", t.tests_completed as f64),
                ("tests_failed", t.tests_failed as f64),
                ("streams", t.streams as f64),
                ("cpu_s", t.cpu_ns as f64 / 1e9),
                ("serving_s", t.serving_ns as f64 / 1e9),
            ] {
                part.metrics.insert(k.into(), v);
            }
            part.report_json = serde_json::to_string(&t).ok();
        }
        None => part.error = Some(outcome_error(&a.name, &o)),
    }
    part
}

/// Records the server's count beside the clients' sum: what the clients sent (upload) or
/// received (download) against what the server received or sent.
fn compare_with_server(m: &mut Measurement, server: &HostPart) {
    if server.error.is_some() {
        return;
    }
    let sum = |k: &str| -> f64 {
        m.hosts
            .iter()
            .filter(|h| h.error.is_none())
            .filter_map(|h| h.metrics.get(k))
            .sum()
    };
    let clients_sent = sum("sent_bytes");
    let server_received = server.metrics.get("received_bytes").copied().unwrap_or(0.0);
    m.metrics.insert("clients.sent_bytes".into(), clients_sent);
    m.metrics
        .insert("server.received_bytes".into(), server_received);
    for k in ["sent_bytes", "tests_completed", "cpu_s"] {
        if let Some(v) = server.metrics.get(k) {
            m.metrics.insert(Metric::new(format!("server.{k}")), *v);
        }
    }
    if clients_sent > 0.0 {
        let pct = (server_received - clients_sent) / clients_sent * 100.0;
        m.metrics.insert(Metric::SERVER_VS_CLIENTS_PCT, pct);
        if let Some(f) = super::served::counts_differ(pct, server_received, clients_sent, None) {
            m.findings.push(f);
        }
    }
}

/// The run from its hosts' parts: the aggregate headline (for a rate, what every host
/// moved within the window common to all of them, over that window; the longest elapsed
/// time otherwise), the aggregate series on the coordinator's clock, peak and sustained
/// figures, start skew, each host's share, and every part.
fn merge(p: Parts, role: HostRole) -> Measurement {
    let mut m = Measurement::default();
    let ok: Vec<&(HostPart, Vec<SeriesPoint>, _)> = p
        .parts
        .iter()
        .filter(|(h, _, _)| h.error.is_none())
        .collect();
    m.metric = ok
        .first()
        .map(|(h, _, _)| h.metric.clone())
        .unwrap_or_else(|| Metric::ELAPSED_S);
    let payload: u64 = ok.iter().filter_map(|(h, _, _)| h.payload_bytes).sum();
    m.payload_bytes = ok
        .iter()
        .any(|(h, _, _)| h.payload_bytes.is_some())
        .then_some(payload);
    let placed: Vec<Placed<'_>> = ok
        .iter()
        .map(|(h, s, _)| Placed {
            start_ns: h.started_unix_ns,
            series: s.as_slice(),
        })
        .collect();
    let rates = rates(&m.metric, &ok, &placed);
    m.value = match &rates {
        Rates::Elapsed => ok.iter().map(|(h, _, _)| h.value).fold(0.0, f64::max),
        Rates::Own(r) => r.iter().sum(),
        Rates::Window(w, r) => {
            m.metrics.insert(Metric::COMMON_WINDOW_S, w.seconds());
            m.metrics.insert(
                Metric::COMMON_WINDOW_START_S,
                (w.start_ns as f64 - p.barrier_ns as f64) / 1e9,
            );
            r.iter().sum()
        }
    };
    let len = placed
        .iter()
        .find_map(|p| p.series.first().map(|x| x.length_s))
        .filter(|l| *l > 0.0)
        .unwrap_or(1.0);
    // Over the common window when there is one (the headline's), else every pass's span.
    m.series = match &rates {
        Rates::Window(w, _) => within_window(&placed, p.barrier_ns, *w, len),
        _ => {
            let anchor = placed.iter().map(|p| p.start_ns).min();
            rebinned(&placed, p.barrier_ns, anchor.unwrap_or(p.barrier_ns), len)
        }
    };
    // The series' time 0 (the barrier), on the coordinator's clock.
    m.started_unix_ns = Some(p.barrier_ns);
    if let Some(st) = nsperf_results::stats::series_stats(&m.series) {
        m.metrics.insert(Metric::PEAK_INTERVAL, st.peak);
        m.metrics.insert(Metric::SUSTAINED_MEAN, st.sustained_mean);
        m.metrics.insert(Metric::STEADY_START_S, st.steady_start_s);
    }
    let starts: Vec<u64> = ok.iter().map(|(h, _, _)| h.started_unix_ns).collect();
    if let (Some(a), Some(b)) = (starts.iter().min(), starts.iter().max()) {
        m.metrics.insert(Metric::START_SKEW_NS, (b - a) as f64);
        m.metrics.insert(
            "start_after_barrier_ns".into(),
            a.saturating_sub(p.barrier_ns) as f64,
        );
    }
    let clock_error = p
        .parts
        .iter()
        .map(|(h, _, _)| h.clock_error_ns)
        .max()
        .unwrap_or(0);
    m.metrics
        .insert("clock_error_max_ns".into(), clock_error as f64);
    m.metrics.insert("hosts_measured".into(), ok.len() as f64);
    m.metrics
        .insert("hosts_failed".into(), (p.parts.len() - ok.len()) as f64);
    let mut sums: BTreeMap<Metric, f64> = BTreeMap::new();
    for (h, _, _) in &ok {
        for k in ["sent_bytes", "received_bytes", "bytes"] {
            if let Some(v) = h.metrics.get(k) {
                *sums.entry(Metric::new(k)).or_default() += v;
            }
        }
    }
    m.metrics.extend(sums);
    // Shares and fairness of the rates over one window when there is one.
    let (per_host, in_window): (Vec<f64>, bool) = match &rates {
        Rates::Window(_, r) => (r.clone(), true),
        Rates::Own(r) => (r.clone(), false),
        Rates::Elapsed => (Vec::new(), false),
    };
    let named: Vec<(&str, f64)> = ok
        .iter()
        .zip(&per_host)
        .map(|((h, _, _), &r)| (h.host.as_str(), r))
        .collect();
    let fair = fairness(&named);
    if let Some(f) = &fair {
        m.metrics.insert(Metric::FAIRNESS_JAIN, f.jain);
        m.findings.push(f.finding(&m.metric, named.len()));
    }
    drop(named);
    drop(placed);
    drop(ok);
    let mut rate_of = per_host.iter();
    for (mut h, series, cpu) in p.parts {
        h.role = role;
        // Its intervals on the run's clock (time 0 the barrier), as they went into the sum.
        let shift_s = (h.started_unix_ns as f64 - p.barrier_ns as f64) / 1e9;
        h.series = series
            .into_iter()
            .map(|s| SeriesPoint {
                start_s: s.start_s + shift_s,
                ..s
            })
            .collect();
        if h.error.is_none()
            && let Some(r) = rate_of.next()
        {
            if in_window {
                h.metrics.insert(Metric::WINDOW_RATE, *r);
            }
            if fair.is_some() && m.value > 0.0 {
                h.metrics.insert(Metric::SHARE_PCT, r / m.value * 100.0);
            }
        }
        m.cpu.extend(cpu);
        m.hosts.push(h);
    }
    hosts_cpu(&mut m);
    m
}

/// At or beyond this share of a core busy on average over the hosts' passes, the hosts'
/// machines may set the pace, not the server nor the network.
/// (50 client sites through a 10 Gbit/s lab port on 2 cores: the port 85 % used, the
/// clients' busiest core 89 % and the server host's cores 88 % busy.)
const HOSTS_CORE_BUSY_PCT: f64 = 85.0;

/// The hosts' CPU beside the aggregate: their step processes' CPU time summed
/// (`hosts.cpu_s`, and as % of one core over the longest pass, `hosts.cpu_pct`), the busiest
/// core each saw over its pass, averaged and at most (`hosts.busiest_core_pct_mean`,
/// `…_max`), and a `hosts_cpu_busy` warning when that average is at or beyond
/// [`HOSTS_CORE_BUSY_PCT`]: then the machines, not what they measure, may be the limit (in
/// a lab on one machine every site shares its cores: 50 client sites on 2 cores).
fn hosts_cpu(m: &mut Measurement) {
    let clients: Vec<&HostPart> = m
        .hosts
        .iter()
        .filter(|h| h.error.is_none() && h.role != HostRole::Server)
        .collect();
    let cpu_s: Vec<f64> = clients
        .iter()
        .filter_map(|h| h.metrics.get("process.cpu_s").copied())
        .collect();
    let busiest: Vec<f64> = clients
        .iter()
        .filter_map(|h| h.metrics.get("cpu_busiest_core_pct").copied())
        .collect();
    let longest = clients
        .iter()
        .filter_map(|h| h.metrics.get(&Metric::ELAPSED_S).copied())
        .fold(0.0, f64::max);
    let n = clients.len();
    if !cpu_s.is_empty() {
        let sum: f64 = cpu_s.iter().sum();
        m.metrics.insert("hosts.cpu_s".into(), sum);
        if longest > 0.0 {
            m.metrics
                .insert("hosts.cpu_pct".into(), sum / longest * 100.0);
        }
    }
    if busiest.is_empty() {
        return;
    }
    let mean = busiest.iter().sum::<f64>() / busiest.len() as f64;
    let max = busiest.iter().copied().fold(0.0, f64::max);
    m.metrics.insert("hosts.busiest_core_pct_mean".into(), mean);
    m.metrics.insert("hosts.busiest_core_pct_max".into(), max);
    if mean < HOSTS_CORE_BUSY_PCT {
        return;
    }
    let own = m
        .metrics
        .get("hosts.cpu_pct")
        .map(|p| format!("; their {n} step processes used {p:.0} % of one core together"))
        .unwrap_or_default();
    m.findings.push(
        nsperf_core::Finding::new(
            "hosts_cpu_busy",
            nsperf_core::report::Severity::Warning,
            format!(
                "the hosts' busiest core was {mean:.0} % busy on average over their passes (at most {max:.0} %){own}: their machines may set the pace, not the server nor the network — in a lab on one machine every site shares its cores, so fewer sites or more cores tell"
            ),
        )
        .with("busiest_core_pct_mean", mean)
        .with("busiest_core_pct_max", max),
    );
}

/// The hosts' rates the aggregate is the sum of.
#[derive(Debug)]
enum Rates {
    /// Not a rate: the step's elapsed time.
    Elapsed,
    /// Each host's rate over its own pass (one host, passes one after another, or passes
    /// without intervals).
    Own(Vec<f64>),
    /// Each host's rate over the window common to all of them.
    Window(Window, Vec<f64>),
}

fn rates(
    metric: &Metric,
    ok: &[&(
        HostPart,
        Vec<SeriesPoint>,
        Vec<nsperf_core::report::CpuInterval>,
    )],
    placed: &[Placed<'_>],
) -> Rates {
    if *metric == Metric::ELAPSED_S {
        return Rates::Elapsed;
    }
    let own = || Rates::Own(ok.iter().map(|(h, _, _)| h.value).collect());
    if ok.len() < 2 || placed.iter().any(|p| p.series.is_empty()) {
        return own();
    }
    match common_window(placed) {
        Some(w) => Rates::Window(
            w,
            placed
                .iter()
                .map(|p| p.amount_within(w) / w.seconds())
                .collect(),
        ),
        None => own(),
    }
}

/// How evenly the hosts shared the aggregate.
#[derive(Debug, Clone, PartialEq)]
struct Fairness {
    /// Jain's fairness index: 1 when every host had the same rate, 1/n when one had it all.
    jain: f64,
    /// The slowest host and its rate.
    slowest: (String, f64),
    /// The sum of the rates.
    sum: f64,
}

/// Jain's index of the hosts' rates (Jain, Chiu and Hawe, DEC-TR-301, 1984:
/// (Σx)² / (n·Σx²)) and the slowest host; `None` for fewer than two hosts or no rate.
fn fairness(rates: &[(&str, f64)]) -> Option<Fairness> {
    if rates.len() < 2 {
        return None;
    }
    let sum: f64 = rates.iter().map(|r| r.1).sum();
    let squares: f64 = rates.iter().map(|r| r.1 * r.1).sum();
    if squares <= 0.0 {
        return None;
    }
    let slowest = rates.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(Fairness {
        jain: sum * sum / (rates.len() as f64 * squares),
        slowest: (slowest.0.to_string(), slowest.1),
        sum,
    })
}

impl Fairness {
    /// The finding that names the slowest host beside the fairness index.
    fn finding(&self, metric: &Metric, n: usize) -> nsperf_core::Finding {
        let share = self.slowest.1 / self.sum * 100.0;
        let fmt = |v: f64| metric.format(v);
        nsperf_core::Finding::new(
            "host_shares",
            nsperf_core::report::Severity::Info,
            format!(
                "{n} hosts shared {}: Jain's fairness index {:.3} (1 = equal shares); the slowest, {}, had {} ({share:.1} % of the aggregate, an equal share being {:.1} %)",
                fmt(self.sum),
                self.jain,
                self.slowest.0,
                fmt(self.slowest.1),
                100.0 / n as f64
            ),
        )
        .with("fairness_jain", self.jain)
        .with("slowest_share_pct", share)
        .with("equal_share_pct", 100.0 / n as f64)
    }
}

/// The hosts' errors when no host measured (the server's count aside): such a run failed.
fn every_part_failed(m: &Measurement) -> Option<String> {
    let mut measuring = m
        .hosts
        .iter()
        .filter(|h| h.role != HostRole::Server)
        .peekable();
    measuring.peek()?;
    if measuring.all(|h| h.error.is_some()) {
        return Some(m.host_errors().unwrap_or_default());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(vals: &[f64]) -> Vec<SeriesPoint> {
        vals.iter()
            .enumerate()
            .map(|(i, &v)| SeriesPoint {
                start_s: i as f64,
                length_s: 1.0,
                value: v,
            })
            .collect()
    }

    fn part(host: &str, value: f64, started: u64, sent: f64) -> HostPart {
        let mut metrics = BTreeMap::new();
        metrics.insert(Metric::new("sent_bytes"), sent);
        HostPart {
            host: host.into(),
            metric: Metric::THROUGHPUT_BPS,
            value,
            payload_bytes: Some(sent as u64),
            started_unix_ns: started,
            clock_error_ns: 50_000,
            metrics,
            ..HostPart::default()
        }
    }

    /// Two hosts through one port: a alone for its first second, then both. Each one's own
    /// rate sums to more than the port carried; the aggregate over the window both measured
    /// is what they moved together, their shares and fairness from that window too.
    #[test]
    fn the_aggregate_is_over_the_window_every_host_measured() {
        let b = 1_000_000_000_000u64;
        let s = 1_000_000_000u64;
        let p = Parts {
            barrier_ns: b,
            parts: vec![
                (
                    part("a", 200.0 / 3.0, b, 200.0),
                    pts(&[100.0, 50.0, 50.0]),
                    vec![],
                ),
                (part("c", 50.0, b + s, 100.0), pts(&[50.0, 50.0]), vec![]),
            ],
        };
        let m = merge(p, HostRole::Client);
        assert!((m.value - 100.0).abs() < 1e-9, "{}", m.value);
        assert_eq!(m.metrics["common_window_s"], 2.0);
        assert_eq!(m.metrics["common_window_start_s"], 1.0);
        assert_eq!(m.metrics["start_skew_ns"], 1e9);
        assert_eq!(m.started_unix_ns, Some(b));
        assert_eq!(
            Window::of(&m),
            Some(Window {
                start_ns: b + s,
                end_ns: b + 3 * s
            })
        );
        assert!((m.metrics["fairness_jain"] - 1.0).abs() < 1e-12);
        for h in &m.hosts {
            assert!((h.metrics["share_pct"] - 50.0).abs() < 1e-9, "{h:?}");
            assert!((h.metrics["window_rate"] - 50.0).abs() < 1e-9, "{h:?}");
        }
        // The series over the window, on one grid from its start.
        let vals: Vec<f64> = m.series.iter().map(|p| p.value).collect();
        assert_eq!(vals, [100.0, 100.0]);
        // Each host's intervals kept on the run's clock (c began 1 s after the barrier).
        let starts =
            |i: usize| -> Vec<f64> { m.hosts[i].series.iter().map(|p| p.start_s).collect() };
        assert_eq!(starts(0), [0.0, 1.0, 2.0]);
        assert_eq!(starts(1), [1.0, 2.0]);
        assert_eq!(m.hosts[1].series[0].value, 50.0);
        assert_eq!(m.series[0].start_s, 1.0);
        assert_eq!(m.metrics["peak_interval"], 100.0);
        // Every payload byte counts in the total, inside the window or not.
        assert_eq!(m.payload_bytes, Some(300));
    }

    #[test]
    fn the_hosts_cpu_beside_the_aggregate_and_a_warning_when_their_cores_are_busy() {
        let b = 5_000_000_000u64;
        let with_cpu = |name: &str, cpu_s: f64, busiest: f64| {
            let mut h = part(name, 100.0, b, 1000.0);
            h.metrics.insert("process.cpu_s".into(), cpu_s);
            h.metrics.insert("cpu_busiest_core_pct".into(), busiest);
            h.metrics.insert(Metric::ELAPSED_S, 2.0);
            (h, pts(&[100.0, 100.0]), vec![])
        };
        let m = merge(
            Parts {
                barrier_ns: b,
                parts: vec![with_cpu("c1", 0.5, 95.0), with_cpu("c2", 0.3, 91.0)],
            },
            HostRole::Client,
        );
        assert_eq!(m.metrics["hosts.cpu_s"], 0.8);
        assert!((m.metrics["hosts.cpu_pct"] - 40.0).abs() < 1e-9);
        assert_eq!(m.metrics["hosts.busiest_core_pct_mean"], 93.0);
        assert_eq!(m.metrics["hosts.busiest_core_pct_max"], 95.0);
        let f = m
            .findings
            .iter()
            .find(|f| f.id == "hosts_cpu_busy")
            .unwrap();
        assert!(f.message.contains("93 %") && f.message.contains("40 % of one core"));
        // Half as busy: the figures, no warning.
        let m = merge(
            Parts {
                barrier_ns: b,
                parts: vec![with_cpu("c1", 0.5, 45.0), with_cpu("c2", 0.3, 41.0)],
            },
            HostRole::Client,
        );
        assert_eq!(m.metrics["hosts.busiest_core_pct_mean"], 43.0);
        assert!(!m.findings.iter().any(|f| f.id == "hosts_cpu_busy"));
    }

    #[test]
    fn a_failed_host_leaves_the_others_and_makes_the_run_partial() {
        let b = 5_000_000_000u64;
        let mut failed = part("c3", 0.0, 0, 0.0);
        failed.error = Some("c3: agent lost: connection closed".into());
        let p = Parts {
            barrier_ns: b,
            parts: vec![
                (
                    part("c1", 100.0, b + 1_000, 1000.0),
                    pts(&[90.0, 100.0, 100.0]),
                    vec![],
                ),
                (
                    part("c2", 50.0, b + 3_000, 500.0),
                    pts(&[40.0, 50.0, 50.0]),
                    vec![],
                ),
                (failed, vec![], vec![]),
            ],
        };
        let m = merge(p, HostRole::Client);
        // Over the window both measured (2 µs short of 3 s): about 96.7 + 46.7.
        assert!((m.value - 430.0 / 3.0).abs() < 0.01, "{}", m.value);
        assert_eq!(m.metrics["hosts_measured"], 2.0);
        assert_eq!(m.metrics["hosts_failed"], 1.0);
        assert_eq!(m.metrics["start_skew_ns"], 2_000.0);
        assert_eq!(m.metrics["sent_bytes"], 1500.0);
        assert!((m.metrics["peak_interval"] - 150.0).abs() < 0.01);
        assert_eq!(m.payload_bytes, Some(1500));
        // The hosts that measured: 96.7 and 46.7 over the window, Jain (Σx)² / (2·Σx²).
        let (x, y) = (290.0 / 3.0, 140.0 / 3.0);
        let jain = (x + y) * (x + y) / (2.0 * (x * x + y * y));
        assert!((m.metrics["fairness_jain"] - jain).abs() < 1e-4);
        assert!((m.hosts[1].metrics["share_pct"] - y / (x + y) * 100.0).abs() < 1e-3);
        assert!(m.findings.iter().any(|f| f.id == "host_shares"));
        assert!(m.partial());
        assert_eq!(every_part_failed(&m), None);
        assert_eq!(m.hosts.len(), 3);
        assert!(m.hosts.iter().all(|h| h.role == HostRole::Client));
        assert!(m.host_errors().unwrap().contains("c3: agent lost"));
    }

    #[test]
    fn the_servers_count_is_set_beside_the_clients_sum() {
        let b = 0u64;
        let p = Parts {
            barrier_ns: b,
            parts: vec![(part("c1", 1.0, 0, 1000.0), vec![], vec![])],
        };
        let mut m = merge(p, HostRole::Client);
        let mut s = HostPart {
            host: "srv".into(),
            role: HostRole::Server,
            ..HostPart::default()
        };
        s.metrics.insert("received_bytes".into(), 999.0);
        compare_with_server(&mut m, &s);
        assert_eq!(m.metrics["server.received_bytes"], 999.0);
        assert_eq!(m.metrics["clients.sent_bytes"], 1000.0);
        assert!((m.metrics["server_vs_clients_pct"] + 0.1).abs() < 1e-9);
    }

    #[test]
    fn jains_index_and_the_slowest_host() {
        let f = fairness(&[("c1", 10.0), ("c2", 10.0), ("c3", 10.0)]).unwrap();
        assert!((f.jain - 1.0).abs() < 1e-12);
        // One host with everything: 1/n.
        let f = fairness(&[("c1", 0.0), ("c2", 30.0), ("c3", 0.0)]).unwrap();
        assert!((f.jain - 1.0 / 3.0).abs() < 1e-12);
        // 1, 2, 3: 36 / (3 * 14).
        let f = fairness(&[("c1", 2.0), ("c2", 1.0), ("c3", 3.0)]).unwrap();
        assert!((f.jain - 36.0 / 42.0).abs() < 1e-12);
        assert_eq!(f.slowest, ("c2".to_string(), 1.0));
        let msg = f.finding(&Metric::THROUGHPUT_BPS, 3).message;
        assert!(
            msg.contains("the slowest, c2") && msg.contains("16.7 %"),
            "{msg}"
        );
        assert_eq!(fairness(&[("c1", 5.0)]), None);
        assert_eq!(fairness(&[("c1", 0.0), ("c2", 0.0)]), None);
    }

    #[test]
    fn a_run_in_which_every_host_failed_is_failed_not_partial() {
        let mut a = part("c1", 0.0, 0, 0.0);
        a.error = Some("c1: false exited 1".into());
        let mut b = part("c2", 0.0, 0, 0.0);
        b.error = Some("c2: false exited 1".into());
        let mut m = merge(
            Parts {
                barrier_ns: 0,
                parts: vec![(a, vec![], vec![]), (b, vec![], vec![])],
            },
            HostRole::Client,
        );
        // The server counted (nothing): it is not a host that measured.
        m.hosts.push(HostPart {
            host: "srv".into(),
            role: HostRole::Server,
            ..HostPart::default()
        });
        let why = every_part_failed(&m).expect("every host failed");
        assert!(
            why.contains("c1: false") && why.contains("c2: false"),
            "{why}"
        );
    }
}
