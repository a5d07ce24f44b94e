//! Plan files: what to build (a lab, or nothing), the parameter matrix, the steps of each
//! cell, repetitions, and what to record beside.
//!
//! A plan is parsed strictly: an unknown key, a value of the wrong type, an unknown template
//! variable or a value that does not parse in any cell is an error naming the place, found
//! before anything runs (every cell of the matrix is resolved at load time). The format is
//! documented in `docs/run.md`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use nsperf_core::units::{BitRate, Bytes, parse_duration};
use serde::Deserialize;

use crate::error::PlanError;
use crate::template::substitute;

/// Most runs one plan may expand to.
pub const MAX_RUNS: usize = 100_000;

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
struct RawPlan {
    name: String,
    description: Option<String>,
    repetitions: Option<u32>,
    lab: Option<RawLab>,
    #[serde(default)]
    matrix: toml::Table,
    #[serde(default)]
    record: RawRecord,
    #[serde(default)]
    step: Vec<RawStep>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLab {
    name: Option<String>,
    sites: Vec<String>,
    rate: Option<Param>,
    rtt: Option<Param>,
    #[serde(default)]
    link_args: Vec<Param>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecord {
    #[serde(default = "yes")]
    cpu: bool,
    #[serde(default = "yes")]
    nic: bool,
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
struct RawStep {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    phases: Vec<String>,
    timeout: Option<Param>,
    // net, rr, sweep
    client: Option<String>,
    server: Option<String>,
    host: Option<Param>,
    port: Option<Param>,
    time: Option<Param>,
    omit: Option<Param>,
    window: Option<Param>,
    streams: Option<Param>,
    cc: Option<Param>,
    length: Option<Param>,
    reverse: Option<Param>,
    awake: Option<Param>,
    range: Option<Param>,
    capture: Option<String>,
    // io (size also for rr)
    dir: Option<Param>,
    workload: Option<Param>,
    size: Option<Param>,
    bs: Option<Param>,
    cache: Option<Param>,
    fsync: Option<Param>,
    engine: Option<Param>,
    iodepth: Option<Param>,
    // exec (site also for io)
    site: Option<String>,
    command: Option<Vec<Param>>,
    payload: Option<Param>,
    payload_regex: Option<String>,
    prime: Option<Vec<Param>>,
}

/// What to record beside each run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// CPU use per core, sampled each second.
    pub cpu: bool,
    /// NIC counters before and after (wire bytes beside payload bytes).
    pub nic: bool,
}

/// The lab a plan builds (link settings may be templated per cell).
#[derive(Debug, Clone, PartialEq)]
pub struct LabSpec {
    /// Lab name (`nsperf lab up NAME`).
    pub name: String,
    /// Site names in order; site `i` has address `10.77.0.(i+1)`.
    pub sites: Vec<String>,
}

/// The link settings of one cell, already substituted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkSettings {
    /// Link rate.
    pub rate: Option<BitRate>,
    /// Round-trip time.
    pub rtt: Option<Duration>,
    /// Extra `nsperf lab` link flags, verbatim.
    pub extra: Vec<String>,
}

impl LinkSettings {
    /// The `nsperf lab up/set` flags for these settings.
    pub fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(r) = self.rate {
            a.push("--rate".into());
            a.push(format!("{}", r.bps() as u64));
        }
        if let Some(t) = self.rtt {
            a.push("--rtt".into());
            a.push(format!("{}us", t.as_micros()));
        }
        a.extend(self.extra.iter().cloned());
        a
    }

    /// The bandwidth-delay product in bytes, when rate and RTT are both known.
    pub fn bdp_bytes(&self) -> Option<u64> {
        Some((self.rate?.bps() / 8.0 * self.rtt?.as_secs_f64()).ceil() as u64)
    }
}

/// A cache phase: the state of the page cache when the step starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// No phase asked: the step runs as it is.
    None,
    /// Page cache dropped before the step (needs root).
    Cold,
    /// The step ran just before (unmeasured if needed), so caches hold its data.
    Warm,
    /// Page cache dropped, then the step's `prime` command run (on the remote site).
    RemoteWarm,
}

impl Phase {
    /// The name used in plans and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::None => "-",
            Phase::Cold => "cold",
            Phase::Warm => "warm",
            Phase::RemoteWarm => "remote-warm",
        }
    }

    /// Parses a stored or planned phase name.
    pub fn parse(s: &str) -> Option<Phase> {
        Some(match s {
            "-" => Phase::None,
            "cold" => Phase::Cold,
            "warm" => Phase::Warm,
            "remote-warm" => Phase::RemoteWarm,
            _ => return None,
        })
    }
}

/// Where a network test's server runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// `nsperf net --loopback` (in-process server and client).
    Loopback,
    /// A server already running on this host (started by the user).
    Host(String),
    /// Client and server in two sites of the plan's lab.
    Lab {
        /// Site where the client runs.
        client: String,
        /// Site where the server runs.
        server: String,
        /// Index of the server site (its address is `10.77.0.(i+1)`).
        server_index: usize,
    },
}

/// The mode of a network step.
#[derive(Debug, Clone, PartialEq)]
pub enum NetMode {
    /// Bulk transfer: throughput.
    Stream,
    /// Request/response of this message size: transactions and latency.
    Rr(Bytes),
    /// Message-size sweep.
    Sweep(Bytes, Bytes),
}

/// A network step (`type = "net"`, `"rr"` or `"sweep"`), resolved for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct NetStep {
    /// Where it runs.
    pub target: Target,
    /// Bulk, request/response or sweep.
    pub mode: NetMode,
    /// Server port, when not the default.
    pub port: Option<u16>,
    /// Test length.
    pub time: Duration,
    /// Warm-up excluded from the sustained figures.
    pub omit: Option<Duration>,
    /// Socket buffer (`-w`); `None` keeps the system default.
    pub window: Option<Bytes>,
    /// Parallel streams.
    pub streams: u32,
    /// Congestion control.
    pub cc: Option<String>,
    /// Write size.
    pub length: Option<Bytes>,
    /// Server sends, client receives.
    pub reverse: bool,
    /// Take a capture at this site during the step and analyse it with `nsperf trace`.
    pub capture: Option<String>,
    /// Hold both ends' CPUs out of deep idle (`--awake`).
    pub awake: bool,
}

/// A file-system step (`type = "io"`), resolved for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct IoStep {
    /// Directory to test in.
    pub dir: String,
    /// `seqwrite`, `seqread`, `randread`, …
    pub workload: String,
    /// File size.
    pub size: Bytes,
    /// Record (block) size.
    pub bs: Bytes,
    /// `warm`, `cold` or `direct` (a cache phase overrides it).
    pub cache: Option<String>,
    /// `none`, `end` or `each`.
    pub fsync: Option<String>,
    /// `psync`, `uring` or `mmap`.
    pub engine: Option<String>,
    /// Queue depth.
    pub iodepth: Option<u32>,
    /// Lab site to run in, if any.
    pub site: Option<String>,
}

/// Where the payload byte count of an external command comes from.
#[derive(Debug, Clone)]
pub enum Payload {
    /// Not known: only the elapsed time is recorded.
    Unknown,
    /// Declared in the plan.
    Declared(Bytes),
    /// The first capture group of this regex over stdout then stderr (a byte count).
    Parsed(regex::Regex),
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Payload::Unknown, Payload::Unknown) => true,
            (Payload::Declared(a), Payload::Declared(b)) => a == b,
            (Payload::Parsed(a), Payload::Parsed(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

/// An external command (`type = "exec"`), resolved for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecStep {
    /// Lab site to run it in, if any.
    pub site: Option<String>,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Payload bytes.
    pub payload: Payload,
    /// Command run before a `remote-warm` phase.
    pub prime: Option<Vec<String>>,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Network test.
    Net(NetStep),
    /// File-system test.
    Io(IoStep),
    /// External command.
    Exec(ExecStep),
}

/// One step resolved for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedStep {
    /// Step name (unique in the plan).
    pub name: String,
    /// `net`, `rr`, `sweep`, `io` or `exec`.
    pub kind: String,
    /// Cache phases in order; `[Phase::None]` when none were asked.
    pub phases: Vec<Phase>,
    /// Kill the step after this long.
    pub timeout: Duration,
    /// The matrix parameters this step depends on, with this cell's values.
    pub params: Vec<(String, String)>,
    /// What it does.
    pub action: Action,
}

/// One cell of the matrix: a value for every parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Position in the expansion order.
    pub index: usize,
    /// `(parameter, value)` in matrix order.
    pub params: Vec<(String, String)>,
    /// Link settings for this cell (when the plan has a lab).
    pub link: Option<LinkSettings>,
    /// The steps, resolved.
    pub steps: Vec<ResolvedStep>,
}

impl Cell {
    /// Stable key of the cell: `rtt=50ms,window=default` (`-` for a plan without a matrix).
    pub fn key(&self) -> String {
        if self.params.is_empty() {
            return "-".into();
        }
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A parsed, fully validated plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Plan name.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// Repetitions of each (cell, step, phase).
    pub repetitions: u32,
    /// The lab to build, if any.
    pub lab: Option<LabSpec>,
    /// Matrix parameters in order, with their values.
    pub matrix: Vec<(String, Vec<String>)>,
    /// What to record beside.
    pub record: Record,
    /// Every cell, resolved.
    pub cells: Vec<Cell>,
    /// The plan text as given.
    pub source: String,
}

/// One run to do: a (cell, step, phase, repetition).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    /// Cell key.
    pub cell: String,
    /// Step name.
    pub step: String,
    /// Phase.
    pub phase: Phase,
    /// Repetition, 1-based.
    pub repetition: u32,
}

impl Plan {
    /// Parses and validates plan bytes.
    pub fn parse(bytes: &[u8]) -> Result<Plan, PlanError> {
        let text = std::str::from_utf8(bytes).map_err(|_| PlanError::NotUtf8)?;
        let raw: RawPlan = toml::from_str(text).map_err(|e| {
            PlanError::Syntax(e.to_string().trim().lines().collect::<Vec<_>>().join(" "))
        })?;
        build(raw, text)
    }

    /// Number of runs of a whole experiment.
    pub fn total_runs(&self) -> usize {
        self.cells
            .iter()
            .map(|c| c.steps.iter().map(|s| s.phases.len()).sum::<usize>())
            .sum::<usize>()
            * self.repetitions as usize
    }

    /// Every run in execution order: cell by cell, repetition by repetition, step by step,
    /// phase by phase (so a warm phase follows its cold phase directly).
    pub fn runs(&self) -> Vec<(usize, usize, RunKey)> {
        let mut v = Vec::new();
        for (ci, c) in self.cells.iter().enumerate() {
            let key = c.key();
            for rep in 1..=self.repetitions {
                for (si, s) in c.steps.iter().enumerate() {
                    for &phase in &s.phases {
                        v.push((
                            ci,
                            si,
                            RunKey {
                                cell: key.clone(),
                                step: s.name.clone(),
                                phase,
                                repetition: rep,
                            },
                        ));
                    }
                }
            }
        }
        v
    }

    /// A stable fingerprint of the plan text (FNV-1a 64), to find the experiment to resume.
    pub fn fingerprint(&self) -> String {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in self.source.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        format!("{h:016x}")
    }
}

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::Invalid(msg.into())
}

fn check_name(what: &str, s: &str) -> Result<(), PlanError> {
    if s.is_empty()
        || s.len() > 64
        || !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(invalid(format!(
            "{what} \"{s}\" must be 1 to 64 characters of letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(())
}

fn build(raw: RawPlan, text: &str) -> Result<Plan, PlanError> {
    check_name("plan name", &raw.name)?;
    let repetitions = raw.repetitions.unwrap_or(3);
    if !(1..=1000).contains(&repetitions) {
        return Err(invalid("repetitions must be between 1 and 1000"));
    }
    let lab = match &raw.lab {
        None => None,
        Some(l) => {
            if l.sites.len() < 2 || l.sites.len() > 16 {
                return Err(invalid("[lab] sites: give 2 to 16 site names"));
            }
            for (i, s) in l.sites.iter().enumerate() {
                check_name("[lab] site", s)?;
                if l.sites[..i].contains(s) {
                    return Err(invalid(format!("[lab] site \"{s}\" appears twice")));
                }
            }
            let name = l.name.clone().unwrap_or_else(|| {
                let n: String = raw
                    .name
                    .to_ascii_lowercase()
                    .chars()
                    .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                    .take(9)
                    .collect();
                format!("run{n}")
            });
            // `nsperf lab` names: 1 to 12 of a-z, 0-9, _ (namespaces are nsp-NAME-SITE).
            if name.is_empty()
                || name.len() > 12
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(invalid(format!(
                    "[lab] name \"{name}\" must be 1 to 12 of a-z, 0-9 and _"
                )));
            }
            Some(LabSpec {
                name,
                sites: l.sites.clone(),
            })
        }
    };
    let mut matrix = Vec::new();
    for (k, v) in &raw.matrix {
        check_name("matrix parameter", k)?;
        if k == "bdp" {
            return Err(invalid(
                "matrix parameter \"bdp\" is reserved (it is derived from the lab's rate and rtt)",
            ));
        }
        let arr = v.as_array().ok_or_else(|| {
            invalid(format!(
                "matrix.{k}: expected a list of values, e.g. {k} = [1, 2]"
            ))
        })?;
        if arr.is_empty() {
            return Err(invalid(format!("matrix.{k}: the list is empty")));
        }
        let mut vals = Vec::new();
        for x in arr {
            let s = match x {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                _ => {
                    return Err(invalid(format!(
                        "matrix.{k}: values must be strings, numbers or booleans"
                    )));
                }
            };
            if vals.contains(&s) {
                return Err(invalid(format!("matrix.{k}: value \"{s}\" appears twice")));
            }
            vals.push(s);
        }
        matrix.push((k.clone(), vals));
    }
    if raw.step.is_empty() {
        return Err(invalid("the plan has no [[step]]"));
    }
    for (i, s) in raw.step.iter().enumerate() {
        check_name("step name", &s.name)?;
        if raw.step[..i].iter().any(|o| o.name == s.name) {
            return Err(invalid(format!("step name \"{}\" appears twice", s.name)));
        }
    }
    let ncells = matrix
        .iter()
        .try_fold(1usize, |acc, (_, v)| acc.checked_mul(v.len()))
        .filter(|&n| n <= MAX_RUNS)
        .ok_or_else(|| invalid(format!("the matrix has more than {MAX_RUNS} cells")))?;
    let mut cells = Vec::with_capacity(ncells);
    for index in 0..ncells {
        let mut rem = index;
        let mut params = vec![(String::new(), String::new()); matrix.len()];
        for (j, (k, vals)) in matrix.iter().enumerate().rev() {
            params[j] = (k.clone(), vals[rem % vals.len()].clone());
            rem /= vals.len();
        }
        let cell = resolve_cell(index, params, &raw, lab.as_ref())?;
        if !cell.steps.is_empty() {
            cells.push(cell);
        }
    }
    let plan = Plan {
        name: raw.name,
        description: raw.description,
        repetitions,
        lab,
        matrix,
        record: Record {
            cpu: raw.record.cpu,
            nic: raw.record.nic,
        },
        cells,
        source: text.to_string(),
    };
    if plan.total_runs() > MAX_RUNS {
        return Err(invalid(format!(
            "the plan expands to {} runs, more than {MAX_RUNS}",
            plan.total_runs()
        )));
    }
    Ok(plan)
}

/// Substitution context of one cell.
struct Ctx<'a> {
    params: &'a [(String, String)],
    bdp: Option<u64>,
}

impl Ctx<'_> {
    fn lookup(&self, name: &str) -> Option<String> {
        if name == "bdp" {
            return self.bdp.map(|b| b.to_string());
        }
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    fn sub(&self, where_: &str, p: &Param) -> Result<String, PlanError> {
        let s = p.to_string();
        let once =
            substitute(&s, &|n| self.lookup(n)).map_err(|e| invalid(format!("{where_}: {e}")))?;
        // A matrix value may itself hold a derived variable ({bdp}).
        if once.contains('{') && once != s {
            return substitute(&once, &|n| self.lookup(n))
                .map_err(|e| invalid(format!("{where_}: {e}")));
        }
        Ok(once)
    }
}

fn resolve_cell(
    index: usize,
    params: Vec<(String, String)>,
    raw: &RawPlan,
    lab: Option<&LabSpec>,
) -> Result<Cell, PlanError> {
    let cell_desc = if params.is_empty() {
        String::new()
    } else {
        format!(
            " (cell {})",
            params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let base = Ctx {
        params: &params,
        bdp: None,
    };
    let link = match &raw.lab {
        None => None,
        Some(l) => {
            let rate = match &l.rate {
                None => None,
                Some(p) => {
                    let s = base.sub(&format!("[lab] rate{cell_desc}"), p)?;
                    Some(
                        BitRate::parse(&s)
                            .map_err(|e| invalid(format!("[lab] rate{cell_desc}: {e}")))?,
                    )
                }
            };
            let rtt = match &l.rtt {
                None => None,
                Some(p) => {
                    let s = base.sub(&format!("[lab] rtt{cell_desc}"), p)?;
                    Some(
                        parse_duration(&s)
                            .map_err(|e| invalid(format!("[lab] rtt{cell_desc}: {e}")))?,
                    )
                }
            };
            let mut extra = Vec::new();
            for p in &l.link_args {
                extra.push(base.sub(&format!("[lab] link_args{cell_desc}"), p)?);
            }
            Some(LinkSettings { rate, rtt, extra })
        }
    };
    // {bdp}: rounded up to a KiB, at least 64 KiB (a zero window means nothing).
    let bdp = link
        .as_ref()
        .and_then(LinkSettings::bdp_bytes)
        .map(|b| b.div_ceil(1024).max(64) * 1024);
    let ctx = Ctx {
        params: &params,
        bdp,
    };
    let mut steps = Vec::new();
    for s in &raw.step {
        let used = used_variables(s, raw);
        let repeats = params.iter().zip(&raw.matrix).any(|((k, v), (_, first))| {
            !used.contains(k)
                && first
                    .as_array()
                    .and_then(|a| a.first())
                    .is_some_and(|f| value_text(f) != *v)
        });
        if !repeats {
            let mut r = resolve_step(s, &ctx, lab, &cell_desc)?;
            r.params = params
                .iter()
                .filter(|(k, _)| used.contains(k))
                .cloned()
                .collect();
            steps.push(r);
        }
    }
    Ok(Cell {
        index,
        params,
        link,
        steps,
    })
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The matrix parameters a step depends on: those named in its fields, those named in the
/// lab's link settings when it runs in the lab, and, through `{bdp}` (also inside matrix
/// values it uses), the lab's rate and rtt parameters. A step is not repeated over the
/// parameters it does not depend on.
fn used_variables(s: &RawStep, raw: &RawPlan) -> Vec<String> {
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
        &s.dir,
        &s.workload,
        &s.size,
        &s.bs,
        &s.cache,
        &s.fsync,
        &s.engine,
        &s.iodepth,
        &s.payload,
    ];
    texts.extend(
        params
            .iter()
            .filter_map(|p| p.as_ref().map(Param::to_string)),
    );
    for c in [&s.command, &s.prime].into_iter().flatten() {
        texts.extend(c.iter().map(Param::to_string));
    }
    let mut used: Vec<String> = texts
        .iter()
        .flat_map(|t| crate::template::variables(t))
        .collect();
    // Matrix values may name derived variables.
    for (k, v) in &raw.matrix {
        if used.contains(k)
            && let Some(a) = v.as_array()
        {
            for x in a {
                used.extend(crate::template::variables(&value_text(x)));
            }
        }
    }
    let in_lab =
        s.client.is_some() || s.server.is_some() || s.site.is_some() || s.capture.is_some();
    if (in_lab || used.iter().any(|u| u == "bdp"))
        && let Some(l) = &raw.lab
    {
        for p in l.rate.iter().chain(&l.rtt).chain(&l.link_args) {
            used.extend(crate::template::variables(&p.to_string()));
        }
    }
    used
}

/// The fields each step type accepts (besides name, type, phases, timeout).
fn allowed(kind: &str) -> Option<&'static [&'static str]> {
    const NET: &[&str] = &[
        "client", "server", "host", "port", "time", "omit", "window", "streams", "cc", "length",
        "reverse", "capture", "awake",
    ];
    Some(match kind {
        "net" => NET,
        "rr" => &[
            "client", "server", "host", "port", "time", "size", "capture", "window", "awake",
        ],
        "sweep" => &[
            "client", "server", "host", "port", "time", "range", "capture", "window",
        ],
        "io" => &[
            "dir", "workload", "size", "bs", "cache", "fsync", "engine", "iodepth", "site",
        ],
        "exec" => &["site", "command", "payload", "payload_regex", "prime"],
        _ => return None,
    })
}

fn present_fields(s: &RawStep) -> Vec<&'static str> {
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
        dir,
        workload,
        size,
        bs,
        cache,
        fsync,
        engine,
        iodepth,
        site,
        command,
        payload,
        payload_regex,
        prime
    );
    v
}

fn resolve_step(
    s: &RawStep,
    ctx: &Ctx<'_>,
    lab: Option<&LabSpec>,
    cell_desc: &str,
) -> Result<ResolvedStep, PlanError> {
    let at = format!("step \"{}\"{cell_desc}", s.name);
    let ok = allowed(&s.kind).ok_or_else(|| {
        invalid(format!(
            "{at}: unknown type \"{}\" (use net, rr, sweep, io or exec)",
            s.kind
        ))
    })?;
    for f in present_fields(s) {
        if !ok.contains(&f) {
            return Err(invalid(format!(
                "{at}: field \"{f}\" does not apply to a {} step (it takes: {})",
                s.kind,
                ok.join(", ")
            )));
        }
    }
    let str_of = |field: &str, p: &Option<Param>| -> Result<Option<String>, PlanError> {
        p.as_ref()
            .map(|p| ctx.sub(&format!("{at} {field}"), p))
            .transpose()
    };
    let size_of = |field: &str, p: &Option<Param>| -> Result<Option<Bytes>, PlanError> {
        str_of(field, p)?
            .map(|v| Bytes::parse(&v).map_err(|e| invalid(format!("{at} {field}: {e}"))))
            .transpose()
    };
    let dur_of = |field: &str, p: &Option<Param>| -> Result<Option<Duration>, PlanError> {
        str_of(field, p)?
            .map(|v| parse_duration(&v).map_err(|e| invalid(format!("{at} {field}: {e}"))))
            .transpose()
    };
    let int_of = |field: &str, p: &Option<Param>, max: u64| -> Result<Option<u64>, PlanError> {
        str_of(field, p)?
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| {
                        invalid(format!(
                            "{at} {field}: \"{v}\" is not a whole number from 1 to {max}"
                        ))
                    })
            })
            .transpose()
    };
    let bool_of = |field: &str, p: &Option<Param>| -> Result<bool, PlanError> {
        match str_of(field, p)?.as_deref() {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(v) => Err(invalid(format!(
                "{at} {field}: \"{v}\" is not true or false"
            ))),
        }
    };
    let site_of = |field: &str, v: &Option<String>| -> Result<Option<String>, PlanError> {
        match (v, lab) {
            (None, _) => Ok(None),
            (Some(_), None) => Err(invalid(format!("{at} {field}: sites need a [lab] section"))),
            (Some(v), Some(l)) => {
                if l.sites.contains(v) {
                    Ok(Some(v.clone()))
                } else {
                    Err(invalid(format!(
                        "{at} {field}: no site \"{v}\" in the lab (sites: {})",
                        l.sites.join(", ")
                    )))
                }
            }
        }
    };
    let command_of = |field: &str,
                      v: &Option<Vec<Param>>|
     -> Result<Option<Vec<String>>, PlanError> {
        match v {
            None => Ok(None),
            Some(v) if v.is_empty() => Err(invalid(format!("{at} {field}: the command is empty"))),
            Some(v) => v
                .iter()
                .map(|p| ctx.sub(&format!("{at} {field}"), p))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
        }
    };
    let timeout = dur_of("timeout", &s.timeout)?.unwrap_or(Duration::from_secs(600));
    if timeout.is_zero() {
        return Err(invalid(format!("{at} timeout: must be more than 0")));
    }
    let mut phases = Vec::new();
    for p in &s.phases {
        let ph = Phase::parse(p)
            .filter(|p| *p != Phase::None)
            .ok_or_else(|| {
                invalid(format!(
                    "{at} phases: \"{p}\" is not cold, warm or remote-warm"
                ))
            })?;
        if phases.contains(&ph) {
            return Err(invalid(format!("{at} phases: \"{p}\" appears twice")));
        }
        phases.push(ph);
    }
    let action = match s.kind.as_str() {
        "net" | "rr" | "sweep" => {
            if !phases.is_empty() {
                return Err(invalid(format!(
                    "{at} phases: cache phases apply to io and exec steps, not to network tests"
                )));
            }
            let client = site_of("client", &s.client)?;
            let server = site_of("server", &s.server)?;
            let host = str_of("host", &s.host)?;
            let target = match (client, server, host) {
                (Some(c), Some(sv), None) => {
                    if c == sv {
                        return Err(invalid(format!(
                            "{at}: client and server are the same site"
                        )));
                    }
                    let server_index = lab
                        .and_then(|l| l.sites.iter().position(|x| *x == sv))
                        .unwrap_or(0);
                    Target::Lab {
                        client: c,
                        server: sv,
                        server_index,
                    }
                }
                (None, None, Some(h)) => {
                    if h.is_empty() {
                        return Err(invalid(format!("{at} host: empty")));
                    }
                    Target::Host(h)
                }
                (None, None, None) => Target::Loopback,
                _ => {
                    return Err(invalid(format!(
                        "{at}: give both client and server (lab sites), or host, or neither (loopback)"
                    )));
                }
            };
            let mode = match s.kind.as_str() {
                "net" => NetMode::Stream,
                "rr" => NetMode::Rr(size_of("size", &s.size)?.unwrap_or(Bytes(1))),
                _ => {
                    let r = str_of("range", &s.range)?.ok_or_else(|| {
                        invalid(format!("{at}: a sweep step needs range = \"MIN..MAX\""))
                    })?;
                    let (a, b) = r.split_once("..").ok_or_else(|| {
                        invalid(format!("{at} range: \"{r}\" is not MIN..MAX, e.g. 1k..16m"))
                    })?;
                    let a = Bytes::parse(a).map_err(|e| invalid(format!("{at} range: {e}")))?;
                    let b = Bytes::parse(b).map_err(|e| invalid(format!("{at} range: {e}")))?;
                    if a.0 == 0 || a > b {
                        return Err(invalid(format!("{at} range: need 0 < MIN <= MAX")));
                    }
                    NetMode::Sweep(a, b)
                }
            };
            let window = match str_of("window", &s.window)?.as_deref() {
                None | Some("default") => None,
                Some(w) => Some(
                    Bytes::parse(w)
                        .map_err(|e| invalid(format!("{at} window: {e} (or \"default\")")))?,
                ),
            };
            let capture = site_of("capture", &s.capture)?;
            if capture.is_some() && !matches!(target, Target::Lab { .. }) {
                return Err(invalid(format!(
                    "{at} capture: captures are taken in a lab site"
                )));
            }
            let time = dur_of("time", &s.time)?.unwrap_or(Duration::from_secs(5));
            if time.is_zero() || time > Duration::from_secs(86_400) {
                return Err(invalid(format!("{at} time: must be between 0 and 24 h")));
            }
            Action::Net(NetStep {
                target,
                mode,
                port: int_of("port", &s.port, 65535)?.map(|p| p as u16),
                time,
                omit: dur_of("omit", &s.omit)?,
                window,
                streams: int_of("streams", &s.streams, 128)?.unwrap_or(1) as u32,
                cc: str_of("cc", &s.cc)?,
                length: size_of("length", &s.length)?,
                reverse: bool_of("reverse", &s.reverse)?,
                capture,
                awake: bool_of("awake", &s.awake)?,
            })
        }
        "io" => {
            if phases.contains(&Phase::RemoteWarm) {
                return Err(invalid(format!(
                    "{at} phases: remote-warm applies to exec steps (with a prime command)"
                )));
            }
            let workload = str_of("workload", &s.workload)?
                .ok_or_else(|| invalid(format!("{at}: an io step needs a workload")))?;
            let cache = str_of("cache", &s.cache)?;
            if let Some(c) = &cache
                && !["warm", "cold", "direct"].contains(&c.as_str())
            {
                return Err(invalid(format!(
                    "{at} cache: \"{c}\" is not warm, cold or direct"
                )));
            }
            let fsync = str_of("fsync", &s.fsync)?;
            if let Some(f) = &fsync
                && !["none", "end", "each"].contains(&f.as_str())
            {
                return Err(invalid(format!(
                    "{at} fsync: \"{f}\" is not none, end or each"
                )));
            }
            Action::Io(IoStep {
                dir: str_of("dir", &s.dir)?.unwrap_or_else(|| ".".into()),
                workload,
                size: size_of("size", &s.size)?.unwrap_or(Bytes(64 * Bytes::MIB)),
                bs: size_of("bs", &s.bs)?.unwrap_or(Bytes(128 * Bytes::KIB)),
                cache,
                fsync,
                engine: str_of("engine", &s.engine)?,
                iodepth: int_of("iodepth", &s.iodepth, 4096)?.map(|n| n as u32),
                site: site_of("site", &s.site)?,
            })
        }
        _ => {
            let command = command_of("command", &s.command)?.ok_or_else(|| {
                invalid(format!(
                    "{at}: an exec step needs command = [\"prog\", \"arg\", ...]"
                ))
            })?;
            let payload = match (str_of("payload", &s.payload)?, &s.payload_regex) {
                (Some(_), Some(_)) => {
                    return Err(invalid(format!(
                        "{at}: give payload or payload_regex, not both"
                    )));
                }
                (Some(p), None) => Payload::Declared(
                    Bytes::parse(&p).map_err(|e| invalid(format!("{at} payload: {e}")))?,
                ),
                (None, Some(r)) => {
                    let re = regex::Regex::new(r).map_err(|e| {
                        invalid(format!(
                            "{at} payload_regex: {}",
                            e.to_string().lines().last().unwrap_or("")
                        ))
                    })?;
                    if re.captures_len() < 2 {
                        return Err(invalid(format!(
                            "{at} payload_regex: needs a capture group around the byte count, e.g. \"(\\\\d+) bytes\""
                        )));
                    }
                    Payload::Parsed(re)
                }
                (None, None) => Payload::Unknown,
            };
            let prime = command_of("prime", &s.prime)?;
            if phases.contains(&Phase::RemoteWarm) && prime.is_none() {
                return Err(invalid(format!(
                    "{at}: the remote-warm phase needs a prime command (run on the remote site after the caches are dropped)"
                )));
            }
            Action::Exec(ExecStep {
                site: site_of("site", &s.site)?,
                command,
                payload,
                prime,
            })
        }
    };
    Ok(ResolvedStep {
        name: s.name.clone(),
        kind: s.kind.clone(),
        phases: if phases.is_empty() {
            vec![Phase::None]
        } else {
            phases
        },
        timeout,
        params: Vec::new(),
        action,
    })
}

/// The default plan embedded in the binary (`plans/default.toml`).
pub const DEFAULT_PLAN: &str = include_str!("../../../plans/default.toml");

/// The parameters of each cell as a map (for display and export).
pub fn params_map(c: &Cell) -> BTreeMap<String, String> {
    c.params.iter().cloned().collect()
}

#[cfg(test)]
mod tests;
