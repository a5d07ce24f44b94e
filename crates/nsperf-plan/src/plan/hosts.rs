//! `[hosts]` and `[groups]`: the hosts a plan's steps run `on`, how each one's agent is
//! reached (a running agent over TCP) or started (ssh, this host), and named groups of them.
//! Checked when the plan is loaded: names, exactly one way to each agent, groups of known
//! hosts, and that every agent allows the steps the plan gives it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::ctx::{check_name, invalid};
use super::raw::{RawHost, RawKubernetes, RawSlurm};
use crate::agent::{Launch, SshTarget, StepClass};
use crate::error::PlanError;

/// One host of `[hosts]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// Its name in the plan.
    pub name: String,
    /// The address the other hosts reach it at (its server's address).
    pub address: String,
    /// How its agent is reached or started.
    pub launch: Launch,
    /// The key its agent asks for.
    pub psk_file: Option<PathBuf>,
    /// What its agent runs. For agents the plan starts (ssh, local) this is what the plan's
    /// steps need of that host unless `allow` says more; for a running agent, what the plan
    /// expects it to allow (the agent's own list decides).
    pub allow: Vec<StepClass>,
    /// True when `allow` was given in the plan.
    pub allow_given: bool,
}

/// The plan's hosts and groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hosts {
    /// Every host, by name order (a batch group's agents after the named hosts).
    pub hosts: Vec<HostSpec>,
    /// Groups: name → host names.
    pub groups: BTreeMap<String, Vec<String>>,
    /// Groups of agents started by a batch system, each with its members in `hosts`.
    pub batch: Vec<BatchGroup>,
}

/// A group of agents a batch system starts for the plan; its members are named `GROUP-I`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchGroup {
    /// `[slurm]`: `tasks` agents started with srun in the allocation the plan runs in.
    Slurm {
        /// Group name.
        group: String,
        /// Agents (tasks).
        tasks: u32,
        /// The key the agents ask for (on a file system the nodes share).
        psk_file: PathBuf,
        /// Their port (0: any free one, announced).
        port: u16,
    },
    /// `[kubernetes]`: `count` agents in the pods of an Indexed Job, found by DNS.
    Kubernetes {
        /// Group name (and the Job's and Service's name).
        group: String,
        /// Pods.
        count: u32,
        /// Container image with nsperf.
        image: String,
        /// Namespace.
        namespace: String,
        /// kubectl context.
        context: Option<String>,
        /// The key (put in a Secret).
        psk_file: PathBuf,
        /// nsperf's path in the image.
        nsperf: Option<String>,
    },
}

impl BatchGroup {
    /// The group's name.
    pub fn group(&self) -> &str {
        match self {
            BatchGroup::Slurm { group, .. } | BatchGroup::Kubernetes { group, .. } => group,
        }
    }
}

/// Where a step runs when it names hosts (`on = "HOST"` or `on = "GROUP"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnHosts {
    /// What `on` said.
    pub name: String,
    /// The hosts, in group order.
    pub hosts: Vec<String>,
    /// All at once behind a start barrier (the default), or one after the other.
    pub concurrent: bool,
    /// A network step's server: the host that runs `nsperf server` for all of them.
    pub server: Option<String>,
    /// Some of them (or the server) are sites of the plan's lab: the step needs the lab up.
    pub in_lab: bool,
}

/// The plan's lab as `[hosts]` sees it: every site may be a host (`on = "c3"`), and the
/// `clients` sites of `[lab] clients = N` are the group `clients` unless the plan names
/// something else so.
#[derive(Debug, Clone, Default)]
pub(super) struct LabSites {
    /// Every site, in order (site `i` at `10.77.0.(i+1)`).
    pub(super) sites: Vec<String>,
    /// The sites `c1`..`cN` of `[lab] clients = N`.
    pub(super) clients: Vec<String>,
}

impl Hosts {
    /// The host named `name`.
    pub fn get(&self, name: &str) -> Option<&HostSpec> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// The hosts a name stands for: a host, or a group's members.
    pub fn members(&self, name: &str) -> Option<Vec<String>> {
        if self.get(name).is_some() {
            return Some(vec![name.to_string()]);
        }
        self.groups.get(name).cloned()
    }

    /// True when host `name` is a site of the plan's lab.
    pub fn is_site(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|h| matches!(h.launch, Launch::Site { .. }))
    }

    /// Drops the lab's sites no step runs on, and the groups left empty by that (a lab's
    /// sites are hosts only for the steps `on` them).
    fn prune_unused_sites(&mut self) {
        self.hosts
            .retain(|h| !matches!(h.launch, Launch::Site { .. }) || !h.allow.is_empty());
        let names: BTreeSet<String> = self.hosts.iter().map(|h| h.name.clone()).collect();
        self.groups
            .retain(|_, members| members.iter().all(|m| names.contains(m)));
    }

    /// True when nothing is left to run on.
    fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.batch.is_empty()
    }
}

/// The lab's sites as hosts (those `[hosts]` does not name itself), and the group `clients`.
fn site_hosts(
    lab: &LabSites,
    raw: &BTreeMap<String, RawHost>,
    groups: &mut BTreeMap<String, Vec<String>>,
) -> Vec<HostSpec> {
    let hosts: Vec<HostSpec> = lab
        .sites
        .iter()
        .enumerate()
        .filter(|(_, s)| !raw.contains_key(*s))
        .map(|(i, s)| HostSpec {
            name: s.clone(),
            address: nsperf_lab::site_addr(i).to_string(),
            launch: Launch::Site { site: s.clone() },
            psk_file: None,
            allow: Vec::new(),
            allow_given: false,
        })
        .collect();
    let taken =
        |n: &str| raw.contains_key(n) || groups.contains_key(n) || lab.sites.iter().any(|s| s == n);
    if !lab.clients.is_empty() && !taken("clients") {
        groups.insert("clients".into(), lab.clients.clone());
    }
    hosts
}

/// The host part of `[user@]host[:port]` (an IPv6 address in brackets stays whole).
fn host_of(dest: &str) -> String {
    let h = dest.rsplit_once('@').map_or(dest, |(_, h)| h);
    if let Some(rest) = h.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest).to_string();
    }
    match h.rsplit_once(':') {
        Some((a, p)) if !a.contains(':') && p.parse::<u16>().is_ok() => a.to_string(),
        _ => h.to_string(),
    }
}

fn host_spec(name: &str, h: &RawHost) -> Result<HostSpec, PlanError> {
    let at = format!("[hosts.{name}]");
    let launch = match (&h.ssh, &h.agent, h.local.unwrap_or(false)) {
        (Some(dest), None, false) => {
            if dest.is_empty() || dest.starts_with('-') {
                return Err(invalid(format!(
                    "{at} ssh: \"{dest}\" is not a destination"
                )));
            }
            Launch::Ssh(SshTarget {
                destination: dest.clone(),
                port: h.ssh_port,
                identity: h.ssh_identity.as_ref().map(PathBuf::from),
                options: h.ssh_options.clone(),
            })
        }
        (None, Some(addr), false) => {
            if !addr.contains(':') {
                return Err(invalid(format!(
                    "{at} agent: \"{addr}\" needs a port, e.g. \"{addr}:5400\""
                )));
            }
            Launch::Tcp { addr: addr.clone() }
        }
        (None, None, true) => Launch::Local,
        _ => {
            return Err(invalid(format!(
                "{at}: give exactly one of ssh = \"[user@]host\" (an agent started through ssh), agent = \"host:port\" (a running agent) or local = true"
            )));
        }
    };
    if (h.ssh_port.is_some() || h.ssh_identity.is_some() || !h.ssh_options.is_empty())
        && !matches!(launch, Launch::Ssh(_))
    {
        return Err(invalid(format!(
            "{at}: ssh_port, ssh_identity and ssh_options go with ssh"
        )));
    }
    let address = match (&h.address, &launch) {
        (Some(a), _) if a.is_empty() => return Err(invalid(format!("{at} address: empty"))),
        (Some(a), _) => a.clone(),
        (None, Launch::Ssh(t)) => host_of(&t.destination),
        (None, Launch::Tcp { addr }) => host_of(addr),
        (None, Launch::Local) => "127.0.0.1".into(),
        (None, Launch::Batch { .. } | Launch::Site { .. }) => String::new(),
    };
    let allow = match &h.allow {
        Some(v) => v
            .iter()
            .map(|c| c.parse::<StepClass>())
            .collect::<Result<BTreeSet<_>, _>>()
            .map_err(|e| invalid(format!("{at} allow: {e}")))?
            .into_iter()
            .collect(),
        None => Vec::new(),
    };
    Ok(HostSpec {
        name: name.to_string(),
        address,
        launch,
        psk_file: h.psk_file.as_ref().map(PathBuf::from),
        allow,
        allow_given: h.allow.is_some(),
    })
}

/// The batch groups of `[slurm]` and `[kubernetes]`, checked.
fn batch_groups(
    slurm: Option<&RawSlurm>,
    k8s: Option<&RawKubernetes>,
) -> Result<Vec<BatchGroup>, PlanError> {
    let mut v = Vec::new();
    if let Some(s) = slurm {
        check_name("[slurm] group", &s.group)?;
        if !(1..=4096).contains(&s.tasks) {
            return Err(invalid("[slurm] tasks must be between 1 and 4096"));
        }
        v.push(BatchGroup::Slurm {
            group: s.group.clone(),
            tasks: s.tasks,
            psk_file: PathBuf::from(&s.psk_file),
            port: s.port.unwrap_or(0),
        });
    }
    if let Some(k) = k8s {
        let count = std::num::NonZeroU32::new(k.count)
            .filter(|c| c.get() <= 4096)
            .ok_or_else(|| invalid("[kubernetes] count must be between 1 and 4096"))?;
        let mut agents = crate::agent::K8sAgents::new(&k.group, count, &k.image);
        if let Some(ns) = &k.namespace {
            agents.namespace = ns.clone();
        }
        agents
            .validate()
            .map_err(|e| invalid(format!("[kubernetes]: {e}")))?;
        if slurm.is_some_and(|s| s.group == k.group) {
            return Err(invalid("[slurm] and [kubernetes] name the same group"));
        }
        v.push(BatchGroup::Kubernetes {
            group: k.group.clone(),
            count: k.count,
            image: k.image.clone(),
            namespace: agents.namespace.clone(),
            context: k.context.clone(),
            psk_file: PathBuf::from(&k.psk_file),
            nsperf: k.nsperf.clone(),
        });
    }
    Ok(v)
}

/// Builds and checks `[hosts]`, `[groups]`, `[slurm]` and `[kubernetes]`, with the lab's
/// sites as hosts too; `None` when the plan has neither hosts nor a lab.
pub(super) fn hosts(
    raw: &BTreeMap<String, RawHost>,
    groups: &BTreeMap<String, Vec<String>>,
    batch: (Option<&RawSlurm>, Option<&RawKubernetes>),
    lab: Option<&LabSites>,
) -> Result<Option<Hosts>, PlanError> {
    let batch = batch_groups(batch.0, batch.1)?;
    if raw.is_empty() && batch.is_empty() && lab.is_none() {
        if !groups.is_empty() {
            return Err(invalid("[groups] needs [hosts] or a [lab] to group"));
        }
        return Ok(None);
    }
    let mut hosts = Vec::new();
    for (name, h) in raw {
        check_name("host name", name)?;
        hosts.push(host_spec(name, h)?);
    }
    let mut groups = groups.clone();
    if let Some(l) = lab {
        hosts.extend(site_hosts(l, raw, &mut groups));
    }
    for b in &batch {
        let g = b.group();
        if raw.contains_key(g) || groups.contains_key(g) {
            return Err(invalid(format!(
                "batch group {g}: a host or a [groups] entry has that name too"
            )));
        }
        let n = match b {
            BatchGroup::Slurm { tasks, .. } => *tasks,
            BatchGroup::Kubernetes { count, .. } => *count,
        };
        let mut members = Vec::new();
        for i in 0..n {
            let name = format!("{g}-{i}");
            if raw.contains_key(&name) {
                return Err(invalid(format!(
                    "batch group {g}: its agent {name} clashes with a host of that name"
                )));
            }
            let address = match b {
                // A pod is found by its DNS name; a Slurm task's node is known once it runs.
                BatchGroup::Kubernetes { namespace, .. } => {
                    format!("{g}-{i}.{g}.{namespace}.svc")
                }
                BatchGroup::Slurm { .. } => String::new(),
            };
            hosts.push(HostSpec {
                name: name.clone(),
                address,
                launch: Launch::Batch {
                    group: g.to_string(),
                    index: i,
                },
                psk_file: None,
                allow: Vec::new(),
                allow_given: false,
            });
            members.push(name);
        }
        groups.insert(g.to_string(), members);
    }
    let raw_groups = groups.clone();
    for (g, members) in &raw_groups {
        if batch.iter().any(|b| b.group() == g) {
            continue;
        }
        check_name("group name", g)?;
        if raw.contains_key(g) {
            return Err(invalid(format!("[groups] {g}: a host has that name too")));
        }
        if members.is_empty() {
            return Err(invalid(format!("[groups] {g}: the group is empty")));
        }
        for (i, m) in members.iter().enumerate() {
            if !hosts.iter().any(|h| &h.name == m) {
                let known = if lab.is_some() {
                    "neither in [hosts] nor a site of the lab"
                } else {
                    "not in [hosts]"
                };
                return Err(invalid(format!("[groups] {g}: \"{m}\" is {known}")));
            }
            if members[..i].contains(m) {
                return Err(invalid(format!("[groups] {g}: \"{m}\" appears twice")));
            }
        }
    }
    Ok(Some(Hosts {
        hosts,
        groups,
        batch,
    }))
}

/// Checks that every agent allows what the plan's steps give it, and for agents the plan
/// starts, allows exactly that unless the plan says more. `needs` maps host → classes.
pub(super) fn settle_allow(
    hosts: &mut Hosts,
    needs: &BTreeMap<String, BTreeSet<StepClass>>,
) -> Result<(), PlanError> {
    for h in &mut hosts.hosts {
        let need = needs.get(&h.name).cloned().unwrap_or_default();
        if h.allow_given {
            if let Some(c) = need.iter().find(|c| !h.allow.contains(c)) {
                return Err(invalid(format!(
                    "[hosts.{}] allow: a step runs {c} on this host, which allow does not list",
                    h.name
                )));
            }
        } else {
            h.allow = need.into_iter().collect();
        }
    }
    hosts.prune_unused_sites();
    Ok(())
}

/// The hosts left once the lab's unused sites are pruned; `None` when none is.
pub(super) fn settled(hosts: Option<Hosts>) -> Option<Hosts> {
    hosts.filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(ssh: Option<&str>, agent: Option<&str>, local: bool) -> RawHost {
        RawHost {
            ssh: ssh.map(str::to_string),
            agent: agent.map(str::to_string),
            local: local.then_some(true),
            ..RawHost::default()
        }
    }

    #[test]
    fn addresses_come_from_the_way_to_the_agent() {
        assert_eq!(host_of("root@10.77.0.2"), "10.77.0.2");
        assert_eq!(host_of("node7"), "node7");
        assert_eq!(host_of("10.0.0.1:5400"), "10.0.0.1");
        assert_eq!(host_of("[fd00::1]:5400"), "fd00::1");
        assert_eq!(host_of("fd00::1"), "fd00::1");
        let h = host_spec("a", &raw(Some("u@h1"), None, false)).unwrap();
        assert_eq!(h.address, "h1");
        assert!(matches!(h.launch, Launch::Ssh(_)));
        let h = host_spec("b", &raw(None, Some("h2:5400"), false)).unwrap();
        assert_eq!(h.address, "h2");
        let h = host_spec("c", &raw(None, None, true)).unwrap();
        assert_eq!(
            (h.address.as_str(), &h.launch),
            ("127.0.0.1", &Launch::Local)
        );
    }

    #[test]
    fn exactly_one_way_to_each_agent() {
        for bad in [
            raw(None, None, false),
            raw(Some("h"), Some("h:1"), false),
            raw(Some("h"), None, true),
        ] {
            let e = host_spec("x", &bad).unwrap_err().to_string();
            assert!(e.contains("exactly one of"), "{e}");
        }
        let e = host_spec("x", &raw(None, Some("h"), false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs a port"), "{e}");
        let e = host_spec("x", &raw(Some("-oProxyCommand=x"), None, false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a destination"), "{e}");
        let mut r = raw(None, None, true);
        r.ssh_port = Some(22);
        assert!(host_spec("x", &r).is_err());
    }

    #[test]
    fn groups_name_known_hosts_once() {
        let mut rh = BTreeMap::new();
        rh.insert("a".to_string(), raw(None, None, true));
        rh.insert("b".to_string(), raw(None, None, true));
        let g = |v: &[&str]| {
            let mut m = BTreeMap::new();
            m.insert("g".to_string(), v.iter().map(|s| s.to_string()).collect());
            m
        };
        let h = hosts(&rh, &g(&["a", "b"]), (None, None), None)
            .unwrap()
            .unwrap();
        assert_eq!(h.members("g").unwrap(), ["a", "b"]);
        assert_eq!(h.members("a").unwrap(), ["a"]);
        assert!(h.members("zz").is_none());
        assert!(
            hosts(&rh, &g(&["a", "c"]), (None, None), None)
                .unwrap_err()
                .to_string()
                .contains("not in [hosts]")
        );
        assert!(
            hosts(&rh, &g(&["a", "a"]), (None, None), None)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        assert!(hosts(&rh, &g(&[]), (None, None), None).is_err());
        assert!(hosts(&BTreeMap::new(), &g(&["a"]), (None, None), None).is_err());
    }

    #[test]
    fn started_agents_allow_what_the_plan_needs_and_given_lists_are_checked() {
        let mut rh = BTreeMap::new();
        rh.insert("a".to_string(), raw(None, None, true));
        let mut with_allow = raw(None, None, true);
        with_allow.allow = Some(vec!["net".into()]);
        rh.insert("b".to_string(), with_allow);
        let mut h = hosts(&rh, &BTreeMap::new(), (None, None), None)
            .unwrap()
            .unwrap();
        let mut needs = BTreeMap::new();
        needs.insert("a".to_string(), BTreeSet::from([StepClass::Server]));
        needs.insert("b".to_string(), BTreeSet::from([StepClass::Net]));
        settle_allow(&mut h, &needs).unwrap();
        assert_eq!(h.get("a").unwrap().allow, [StepClass::Server]);
        needs.insert("b".to_string(), BTreeSet::from([StepClass::Io]));
        let e = settle_allow(&mut h, &needs).unwrap_err().to_string();
        assert!(e.contains("runs io on this host"), "{e}");
    }
}
