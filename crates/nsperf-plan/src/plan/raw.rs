//! The plan file as written: TOML parsed strictly into raw structs (every key known, every
//! value typed), and which matrix parameters each step names.

use std::collections::BTreeMap;
use std::fmt;

use nsperf_results::ParamKind;

use serde::Deserialize;

use super::StepKind;
use crate::template::variables;

/// A scalar plan value: numbers and booleans are accepted where a string is, and templated.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Param {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string, possibly with `{templates}`.
    Str(String),
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Param::Int(i) => write!(f, "{i}"),
            Param::Float(x) => write!(f, "{x}"),
            Param::Bool(b) => write!(f, "{b}"),
            Param::Str(s) => f.write_str(s),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlan {
    pub(super) name: String,
    pub(super) description: Option<String>,
    pub(super) repetitions: Option<u32>,
    pub(super) lab: Option<RawLab>,
    #[serde(default)]
    pub(super) matrix: toml::Table,
    #[serde(default)]
    pub(super) record: RawRecord,
    #[serde(default)]
    pub(super) service: Vec<RawService>,
    #[serde(default)]
    pub(super) step: Vec<RawStep>,
    #[serde(default)]
    pub(super) hosts: std::collections::BTreeMap<String, RawHost>,
    #[serde(default)]
    pub(super) groups: std::collections::BTreeMap<String, Vec<String>>,
    pub(super) slurm: Option<RawSlurm>,
    pub(super) kubernetes: Option<RawKubernetes>,
}

/// `[slurm]`: a group of agents started with srun inside the allocation the plan runs in.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSlurm {
    pub(super) group: String,
    pub(super) tasks: u32,
    pub(super) psk_file: String,
    pub(super) port: Option<u16>,
}

/// `[kubernetes]`: a group of agents in the pods of an Indexed Job.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKubernetes {
    pub(super) group: String,
    pub(super) count: u32,
    pub(super) image: String,
    pub(super) namespace: Option<String>,
    pub(super) context: Option<String>,
    pub(super) psk_file: String,
    pub(super) nsperf: Option<String>,
}

/// A host of `[hosts.NAME]`: how its agent is reached or started, and its address.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHost {
    pub(super) address: Option<String>,
    pub(super) ssh: Option<String>,
    pub(super) ssh_port: Option<u16>,
    pub(super) ssh_identity: Option<String>,
    #[serde(default)]
    pub(super) ssh_options: Vec<String>,
    pub(super) agent: Option<String>,
    pub(super) local: Option<bool>,
    pub(super) psk_file: Option<String>,
    pub(super) allow: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLab {
    pub(super) name: Option<String>,
    pub(super) sites: Vec<String>,
    pub(super) clients: Option<u32>,
    pub(super) topology: Option<String>,
    pub(super) server: Option<String>,
    #[serde(default)]
    pub(super) left: Vec<String>,
    pub(super) memory: Option<Param>,
    pub(super) seed: Option<u64>,
    pub(super) rate: Option<Param>,
    pub(super) rtt: Option<Param>,
    pub(super) access_rate: Option<Param>,
    pub(super) access_queue: Option<Param>,
    pub(super) access_delay: Option<Param>,
    #[serde(default)]
    pub(super) link_args: Vec<Param>,
}

impl RawLab {
    /// The link settings that may be templated per cell, with their `lab up` flags.
    pub(super) fn link_settings(&self) -> [(&'static str, &Option<Param>); 5] {
        [
            ("rate", &self.rate),
            ("rtt", &self.rtt),
            ("access-rate", &self.access_rate),
            ("access-queue", &self.access_queue),
            ("access-delay", &self.access_delay),
        ]
    }
}

/// A `[[service]]`: a file server the plan runs for its io steps.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawService {
    pub(super) name: String,
    pub(super) kind: Option<String>,
    pub(super) server: Option<String>,
    pub(super) site: Option<String>,
    pub(super) dir: String,
    pub(super) read_only: Option<bool>,
    pub(super) nfs_versions: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRecord {
    #[serde(default = "yes")]
    pub(super) cpu: bool,
    #[serde(default = "yes")]
    pub(super) nic: bool,
}

fn yes() -> bool {
    true
}

impl Default for RawRecord {
    fn default() -> Self {
        RawRecord {
            cpu: true,
            nic: true,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStep {
    pub(super) name: String,
    #[serde(rename = "type")]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) phases: Vec<String>,
    pub(super) timeout: Option<Param>,
    pub(super) setup: Option<Vec<Param>>,
    pub(super) teardown: Option<Vec<Param>>,
    // net, rr, sweep
    pub(super) client: Option<Param>,
    pub(super) server: Option<Param>,
    pub(super) host: Option<Param>,
    pub(super) port: Option<Param>,
    pub(super) time: Option<Param>,
    pub(super) omit: Option<Param>,
    pub(super) window: Option<Param>,
    pub(super) streams: Option<Param>,
    pub(super) cc: Option<Param>,
    pub(super) length: Option<Param>,
    pub(super) reverse: Option<Param>,
    pub(super) awake: Option<Param>,
    pub(super) range: Option<Param>,
    pub(super) capture: Option<Param>,
    pub(super) burst: Option<Param>,
    // io (size also for rr)
    pub(super) dir: Option<Param>,
    pub(super) workload: Option<Param>,
    pub(super) size: Option<Param>,
    pub(super) bs: Option<Param>,
    pub(super) cache: Option<Param>,
    pub(super) fsync: Option<Param>,
    pub(super) engine: Option<Param>,
    pub(super) iodepth: Option<Param>,
    pub(super) ramp: Option<Param>,
    pub(super) verify: Option<Param>,
    pub(super) files: Option<Param>,
    pub(super) credentials: Option<Param>,
    pub(super) service: Option<String>,
    pub(super) replicate: Option<RawReplicate>,
    // exec (site also for io)
    pub(super) site: Option<Param>,
    pub(super) command: Option<Vec<Param>>,
    pub(super) payload: Option<Param>,
    pub(super) payload_regex: Option<String>,
    pub(super) prime: Option<Vec<Param>>,
    // many hosts
    pub(super) on: Option<String>,
    pub(super) concurrent: Option<bool>,
    // a fault schedule played on the lab's links during the step
    pub(super) schedule: Option<String>,
    // traffic kept on the lab's links while the step runs
    pub(super) load: Option<RawLoad>,
}

/// An io step's `replicate = { peer = "SITE", … }`: its writes mirrored to a peer the plan
/// runs in another lab site (`nsperf io run --replicate`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReplicate {
    pub(super) peer: Param,
    pub(super) protocol: Option<Param>,
    pub(super) in_flight: Option<Param>,
    pub(super) congestion: Option<Param>,
    pub(super) compare: Option<Param>,
    pub(super) check: Option<Param>,
    pub(super) dir: Option<Param>,
}

/// A step's `load = { from = "SITE", to = "SITE", … }`: network streams the runner keeps
/// between two lab sites while the step runs (the clients' traffic its path shares).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLoad {
    pub(super) from: Param,
    pub(super) to: Param,
    pub(super) streams: Option<Param>,
    pub(super) cc: Option<Param>,
    pub(super) window: Option<Param>,
    pub(super) port: Option<Param>,
    pub(super) ramp: Option<Param>,
}

impl RawLoad {
    /// Every field, for the variables it names.
    pub(super) fn params(&self) -> impl Iterator<Item = &Param> {
        [&self.from, &self.to].into_iter().chain(
            [
                &self.streams,
                &self.cc,
                &self.window,
                &self.port,
                &self.ramp,
            ]
            .into_iter()
            .flatten(),
        )
    }
}

impl RawReplicate {
    /// Every field, for the variables it names.
    fn params(&self) -> impl Iterator<Item = &Param> {
        std::iter::once(&self.peer).chain(
            [
                &self.protocol,
                &self.in_flight,
                &self.congestion,
                &self.compare,
                &self.check,
                &self.dir,
            ]
            .into_iter()
            .flatten(),
        )
    }
}

pub(super) fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The matrix parameters a step depends on: those named in its fields, those named in the
/// lab's link settings when it runs in the lab, and, through `{bdp}` (also inside matrix
/// values it uses), the lab's rate and rtt parameters. A step is not repeated over the
/// parameters it does not depend on.
///
/// `access_only`: the step's traffic provably crosses only access links (`route`), so
/// unless it names `{bdp}` or the lab has `link_args` it does not depend on the main
/// link's settings.
pub(super) fn used_variables(s: &RawStep, raw: &RawPlan, access_only: bool) -> Vec<String> {
    let mut texts: Vec<String> = Vec::new();
    let params = [
        &s.timeout,
        &s.host,
        &s.port,
        &s.time,
        &s.omit,
        &s.window,
        &s.streams,
        &s.cc,
        &s.length,
        &s.reverse,
        &s.awake,
        &s.range,
        &s.burst,
        &s.dir,
        &s.workload,
        &s.size,
        &s.bs,
        &s.cache,
        &s.fsync,
        &s.engine,
        &s.iodepth,
        &s.ramp,
        &s.verify,
        &s.files,
        &s.credentials,
        &s.payload,
        &s.client,
        &s.server,
        &s.capture,
        &s.site,
    ];
    texts.extend(
        params
            .iter()
            .filter_map(|p| p.as_ref().map(Param::to_string)),
    );
    for c in [&s.command, &s.prime, &s.setup, &s.teardown]
        .into_iter()
        .flatten()
    {
        texts.extend(c.iter().map(Param::to_string));
    }
    if let Some(r) = &s.replicate {
        texts.extend(r.params().map(Param::to_string));
    }
    if let Some(l) = &s.load {
        texts.extend(l.params().map(Param::to_string));
    }
    let mut used: Vec<String> = texts.iter().flat_map(|t| variables(t)).collect();
    // Matrix values may name derived variables.
    for (k, v) in &raw.matrix {
        if used.contains(k)
            && let Some(a) = v.as_array()
        {
            for x in a {
                used.extend(variables(&value_text(x)));
            }
        }
    }
    // A step on lab sites (`on`) crosses the lab's links as one with a `site` does.
    let in_lab = s.kind == "replay"
        || s.client.is_some()
        || s.server.is_some()
        || s.site.is_some()
        || s.capture.is_some()
        || s.replicate.is_some()
        || s.load.is_some()
        || s.on.as_deref().is_some_and(|on| on_lab_sites(on, raw));
    let bdp = used.iter().any(|u| u == "bdp");
    if (in_lab || bdp)
        && let Some(l) = &raw.lab
    {
        // A step whose traffic crosses only access links (a dumbbell's two sites on one
        // side, a local run in a site) does not depend on the main link's settings: the HA
        // pair's step is not repeated over the WAN's RTT.
        let access_only = access_only && !bdp && l.link_args.is_empty();
        let settings = l.link_settings();
        let templated = settings
            .iter()
            .filter(|(name, _)| !access_only || name.starts_with("access"))
            .filter_map(|(_, p)| p.as_ref());
        for p in templated.chain(&l.link_args) {
            used.extend(variables(&p.to_string()));
        }
    }
    used
}

/// Whether `on` names lab sites: a site of [lab], one of its client sites (`c1`…, or all of
/// them: `clients`), or a [groups] entry holding one.
fn on_lab_sites(on: &str, raw: &RawPlan) -> bool {
    let Some(l) = &raw.lab else {
        return false;
    };
    let clients = l.clients.unwrap_or(0);
    let site = |n: &str| {
        l.sites.iter().any(|x| x == n)
            || (n == "clients" && clients > 0)
            || n.strip_prefix('c')
                .and_then(|k| k.parse::<u32>().ok())
                .is_some_and(|k| (1..=clients).contains(&k))
    };
    site(on)
        || raw
            .groups
            .get(on)
            .is_some_and(|g| g.iter().any(|m| site(m)))
}

/// The kind of value each matrix parameter a step uses stands for, from the field it fills:
/// a parameter that is the whole value of a size field (`window = "{window}"`) is a size, of a
/// duration field (`time`, the lab's `rtt`) a duration, of the lab's `rate` a rate, of a count
/// (`streams`, `iodepth`, `port`) a number, of a word field (`cc`, `workload`) text. A
/// parameter used otherwise (inside a command, in
/// two fields of different kinds) is absent: its values are typed from their spelling.
pub(super) fn variable_kinds(s: &RawStep, raw: &RawPlan) -> BTreeMap<String, ParamKind> {
    use ParamKind::{Duration, Number, Rate, Size, Text};
    let mut fields: Vec<(&Option<Param>, ParamKind)> = vec![
        (&s.timeout, Duration),
        (&s.time, Duration),
        (&s.omit, Duration),
        (&s.window, Size),
        (&s.length, Size),
        (&s.size, Size),
        (&s.bs, Size),
        (&s.payload, Size),
        (&s.streams, Number),
        (&s.port, Number),
        (&s.iodepth, Number),
        (&s.host, Text),
        (&s.cc, Text),
        (&s.reverse, Text),
        (&s.awake, Text),
        (&s.range, Text),
        (&s.dir, Text),
        (&s.workload, Text),
        (&s.cache, Text),
        (&s.fsync, Text),
        (&s.engine, Text),
    ];
    if let Some(r) = &s.replicate {
        fields.push((&r.in_flight, Size));
        fields.push((&r.protocol, Text));
        fields.push((&r.congestion, Text));
    }
    if let Some(l) = &raw.lab {
        fields.push((&l.rate, Rate));
        fields.push((&l.rtt, Duration));
    }
    let mut kinds: BTreeMap<String, Option<ParamKind>> = BTreeMap::new();
    let mut note = |name: String, kind: Option<ParamKind>| {
        let e = kinds.entry(name).or_insert(kind);
        if *e != kind {
            *e = None;
        }
    };
    for (p, kind) in fields {
        let Some(p) = p else { continue };
        let text = p.to_string();
        let vars = variables(&text);
        let whole = vars.len() == 1 && text.trim() == format!("{{{}}}", vars[0]);
        for v in vars {
            note(v, whole.then_some(kind));
        }
    }
    for c in [&s.command, &s.prime].into_iter().flatten() {
        for p in c {
            for v in variables(&p.to_string()) {
                note(v, None);
            }
        }
    }
    kinds
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect()
}

/// The fields each step type accepts (besides name, type, phases, timeout).
pub(super) fn allowed(kind: StepKind) -> &'static [&'static str] {
    match kind {
        StepKind::Net => &[
            "client",
            "server",
            "host",
            "port",
            "time",
            "omit",
            "window",
            "streams",
            "cc",
            "length",
            "reverse",
            "capture",
            "awake",
            "on",
            "concurrent",
            "schedule",
        ],
        StepKind::Rr => &[
            "client",
            "server",
            "host",
            "port",
            "time",
            "size",
            "burst",
            "capture",
            "window",
            "awake",
            "on",
            "concurrent",
            "schedule",
        ],
        StepKind::Sweep => &[
            "client",
            "server",
            "host",
            "port",
            "time",
            "range",
            "capture",
            "window",
            "on",
            "concurrent",
            "schedule",
        ],
        StepKind::Io => &[
            "dir",
            "workload",
            "size",
            "bs",
            "cache",
            "fsync",
            "engine",
            "iodepth",
            "ramp",
            "verify",
            "credentials",
            "service",
            "replicate",
            "site",
            "capture",
            "time",
            "on",
            "concurrent",
            "schedule",
        ],
        StepKind::Bonnie => &[
            "dir", "size", "bs", "cache", "fsync", "engine", "files", "site", "schedule",
        ],
        StepKind::Replay => &["site", "service", "capture", "window"],
        StepKind::Exec => &[
            "site",
            "command",
            "payload",
            "payload_regex",
            "prime",
            "on",
            "concurrent",
            "schedule",
        ],
    }
}

pub(super) fn present_fields(s: &RawStep) -> Vec<&'static str> {
    let mut v = Vec::new();
    macro_rules! chk {
        ($($f:ident),*) => { $( if s.$f.is_some() { v.push(stringify!($f)); } )* };
    }
    chk!(
        client,
        server,
        host,
        port,
        time,
        omit,
        window,
        streams,
        cc,
        length,
        reverse,
        awake,
        range,
        capture,
        burst,
        dir,
        workload,
        size,
        bs,
        cache,
        fsync,
        engine,
        iodepth,
        ramp,
        verify,
        files,
        credentials,
        service,
        replicate,
        site,
        command,
        payload,
        payload_regex,
        prime,
        on,
        concurrent,
        schedule
    );
    v
}
