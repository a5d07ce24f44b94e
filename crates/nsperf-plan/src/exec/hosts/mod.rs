//! Steps on `[hosts]`: carried out by the hosts' agents through a [`Fleet`], all hosts of a
//! group started at one instant of the coordinator's clock (or one after another), and their
//! results merged on that clock: each host's part, the aggregate headline (the sum of the
//! hosts' rates), the aggregate time series (each host's intervals placed by its measured
//! start), its peak and sustained figures, the start skew, and for a network step the
//! server's own count beside the clients' sum.
//!
//! A host whose part fails (its agent lost, its step failed) is recorded with the error and
//! the run is partial; the others' figures are kept. All hosts failing fails the run.
//!
//! This file connects the hosts: the [`HostRunner`] reaches or starts each host's agent,
//! the agents in the lab's sites and the batch groups' agents (`batch`). `run` starts a step
//! on each host; `parts` reads what each host gave; `merge` makes the run of the parts
//! (with `fairness`, how evenly they shared it); `server` sets a network step's server count
//! beside the clients' sum.

mod batch;
mod fairness;
#[cfg(test)]
mod fixtures;
mod merge;
mod parts;
mod run;
mod server;

use std::path::Path;
use std::time::Duration;

use crate::agent::{AgentOptions, Fleet, HostFailure};
use crate::error::ExecError;
use crate::plan::Hosts;
use batch::{BatchGuard, start_batch};

/// How long to wait for every agent's welcome and clock.
const CONNECT_WAIT: Duration = Duration::from_secs(60);

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
}
