//! One step of one cell: the raw fields substituted, parsed, and built into the engines'
//! configuration types, then checked with the engines' own rules.

use std::time::Duration;

use nsperf_core::units::{Bytes, parse_duration};
use nsperf_io::bonnie::BonnieConfig;
use nsperf_io::{CacheMode, EngineKind, FsyncMode, RunConfig, VerifyMode, Workload};
use nsperf_lab::Schedule;
use nsperf_net::{DEFAULT_PORT, Direction, Mode, TestParams};

use super::ctx::{Ctx, invalid};
use super::raw::{Param, RawStep, allowed, present_fields};
use super::service::{io_engine, io_phases, io_target, with_credentials};
use super::{
    Action, BonnieStep, ExecStep, Hosts, IoStep, LabSpec, NetStep, OnHosts, Payload, Phase,
    ResolvedStep, StepKind, Target,
};
use crate::error::PlanError;

mod capture;
mod load;
mod replay;
mod replicate;

use capture::{capture_point, io_capture_point};
use replicate::replicate;

/// The fields of one step in one cell, read with the place named in every error.
struct Fields<'a> {
    at: String,
    ctx: &'a Ctx<'a>,
    lab: Option<&'a LabSpec>,
    hosts: Option<&'a Hosts>,
}

impl Fields<'_> {
    fn err(&self, field: &str, msg: impl std::fmt::Display) -> PlanError {
        invalid(format!("{} {field}: {msg}", self.at))
    }

    fn str(&self, field: &str, p: &Option<Param>) -> Result<Option<String>, PlanError> {
        p.as_ref()
            .map(|p| self.ctx.sub(&format!("{} {field}", self.at), p))
            .transpose()
    }

    fn parsed<T, E: std::fmt::Display>(
        &self,
        field: &str,
        p: &Option<Param>,
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Result<Option<T>, PlanError> {
        self.str(field, p)?
            .map(|v| parse(v.trim()).map_err(|e| self.err(field, e)))
            .transpose()
    }

    fn size(&self, field: &str, p: &Option<Param>) -> Result<Option<Bytes>, PlanError> {
        self.parsed(field, p, Bytes::parse)
    }

    fn duration(&self, field: &str, p: &Option<Param>) -> Result<Option<Duration>, PlanError> {
        self.parsed(field, p, parse_duration)
    }

    fn int(&self, field: &str, p: &Option<Param>, max: u64) -> Result<Option<u64>, PlanError> {
        self.parsed(field, p, |v| {
            v.parse::<u64>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| format!("\"{v}\" is not a whole number from 1 to {max}"))
        })
    }

    fn u32_size(&self, field: &str, b: Bytes) -> Result<u32, PlanError> {
        u32::try_from(b.0).map_err(|_| self.err(field, format!("{b} is too large")))
    }

    fn bool(&self, field: &str, p: &Option<Param>) -> Result<bool, PlanError> {
        Ok(self
            .parsed(field, p, |v| match v {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(format!("\"{v}\" is not true or false")),
            })?
            .unwrap_or(false))
    }

    /// A lab site named by `field` (templated: `site = "{client}"`).
    fn site(&self, field: &str, v: &Option<Param>) -> Result<Option<String>, PlanError> {
        let v = self.str(field, v)?;
        match (&v, self.lab) {
            (None, _) => Ok(None),
            (Some(_), None) => Err(self.err(field, "sites need a [lab] section")),
            (Some(v), Some(l)) if l.sites.contains(v) => Ok(Some(v.clone())),
            (Some(v), Some(l)) => Err(self.err(
                field,
                format!("no site \"{v}\" in the lab (sites: {})", l.sites.join(", ")),
            )),
        }
    }

    fn command(
        &self,
        field: &str,
        v: &Option<Vec<Param>>,
    ) -> Result<Option<Vec<String>>, PlanError> {
        match v {
            None => Ok(None),
            Some(v) if v.is_empty() => Err(self.err(field, "the command is empty")),
            Some(v) => v
                .iter()
                .map(|p| self.ctx.sub(&format!("{} {field}", self.at), p))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
        }
    }
}

pub(super) fn resolve_step(
    s: &RawStep,
    ctx: &Ctx<'_>,
    lab: Option<&LabSpec>,
    hosts: Option<&Hosts>,
    cell_desc: &str,
) -> Result<ResolvedStep, PlanError> {
    let f = Fields {
        at: format!("step \"{}\"{cell_desc}", s.name),
        ctx,
        lab,
        hosts,
    };
    let kind: StepKind = s
        .kind
        .parse()
        .map_err(|e| invalid(format!("{}: {e}", f.at)))?;
    let ok = allowed(kind);
    for field in present_fields(s) {
        if !ok.contains(&field) {
            return Err(invalid(format!(
                "{}: field \"{field}\" does not apply to a {kind} step (it takes: {})",
                f.at,
                ok.join(", ")
            )));
        }
    }
    let timeout = f
        .duration("timeout", &s.timeout)?
        .unwrap_or(Duration::from_secs(600));
    if timeout.is_zero() {
        return Err(f.err("timeout", "must be more than 0"));
    }
    let phases = phases(&f, s)?;
    let on = on_hosts(&f, s, kind)?;
    // The runner sets a phase with this host's page cache: the one of lab sites and of local
    // agents, not of other machines.
    if let Some(on) = &on
        && !phases.is_empty()
        && let Some(h) = on.hosts.iter().find(|h| {
            !matches!(
                f.hosts.and_then(|hs| hs.get(h)).map(|h| &h.launch),
                Some(crate::agent::Launch::Site { .. } | crate::agent::Launch::Local)
            )
        })
    {
        return Err(f.err(
            "phases",
            format!(
                "cache phases are set with this host's page cache, which lab sites and local agents share but host {h} does not: a step on other machines runs with their caches as they are"
            ),
        ));
    }
    let action = match kind {
        StepKind::Net | StepKind::Rr | StepKind::Sweep => {
            if !phases.is_empty() {
                return Err(f.err(
                    "phases",
                    "cache phases apply to io and exec steps, not to network tests",
                ));
            }
            Action::Net(net(&f, s, kind)?)
        }
        StepKind::Io => Action::Io(Box::new(io(&f, s, &phases)?)),
        StepKind::Bonnie => {
            if !phases.is_empty() {
                return Err(f.err(
                    "phases",
                    "a bonnie step sets its own cache states (cache = \"cold\" for its reads); phases apply to io and exec steps",
                ));
            }
            Action::Bonnie(bonnie(&f, s)?)
        }
        StepKind::Exec => Action::Exec(exec(&f, s, &phases)?),
        StepKind::Replay => {
            if !phases.is_empty() {
                return Err(f.err(
                    "phases",
                    "a replay's server makes its files afresh each run; phases apply to io and exec steps",
                ));
            }
            Action::Replay(replay::replay(&f, s)?)
        }
    };
    if let (Some(on), Action::Io(io)) = (&on, &action) {
        on_hosts_reach_service(&f, on, io)?;
    }
    let schedule = s
        .schedule
        .as_ref()
        .map(|text| Schedule::parse(&format!("of {}", f.at), text.as_bytes()))
        .transpose()
        .map_err(|e| invalid(e.to_string()))?;
    let load = s
        .load
        .as_ref()
        .map(|r| load::load(&f, r, &action))
        .transpose()?;
    let setup = f.command("setup", &s.setup)?;
    let teardown = f.command("teardown", &s.teardown)?;
    if on.is_some() && (setup.is_some() || teardown.is_some()) {
        return Err(f.err(
            "setup",
            "setup and teardown run on this host; a step on [hosts] cannot have them",
        ));
    }
    let step = ResolvedStep {
        name: s.name.clone(),
        kind,
        phases: if phases.is_empty() {
            vec![Phase::None]
        } else {
            phases
        },
        timeout,
        params: Vec::new(),
        action,
        on,
        setup,
        teardown,
        schedule,
        load,
    };
    if step.schedule.is_some() && !step.needs_lab(lab.is_some()) {
        return Err(f.err(
            "schedule",
            "a schedule plays on the lab's links: the step must run in the lab",
        ));
    }
    Ok(step)
}

/// `on` (and `concurrent`, and a network step's `server` host): the hosts a step runs on.
fn on_hosts(f: &Fields<'_>, s: &RawStep, kind: StepKind) -> Result<Option<OnHosts>, PlanError> {
    let Some(name) = &s.on else {
        if s.concurrent.is_some() {
            return Err(f.err("concurrent", "goes with on = \"HOST or GROUP\""));
        }
        return Ok(None);
    };
    let hosts = f.hosts.ok_or_else(|| {
        f.err(
            "on",
            format!("\"{name}\" names hosts, but the plan has no [hosts] and no [lab]"),
        )
    })?;
    let members = hosts.members(name).ok_or_else(|| {
        f.err(
            "on",
            format!(
                "\"{name}\" is neither a host of [hosts], a site of the lab nor a [groups] name"
            ),
        )
    })?;
    for (field, set) in [
        ("site", s.site.is_some()),
        ("replicate", s.replicate.is_some()),
        ("client", s.client.is_some()),
        ("host", s.host.is_some()),
        ("capture", s.capture.is_some()),
        ("prime", s.prime.is_some()),
    ] {
        if set {
            return Err(f.err(field, "does not apply to a step on [hosts]"));
        }
    }
    let server = match (kind, f.str("server", &s.server)?) {
        (StepKind::Net | StepKind::Rr | StepKind::Sweep, Some(sv)) => {
            let sv = &sv;
            if hosts.get(sv).is_none() {
                return Err(f.err("server", format!("\"{sv}\" is not a host of [hosts]")));
            }
            if hosts.get(sv).is_some_and(|h| h.address.is_empty()) {
                return Err(f.err("server", format!("\"{sv}\" is a Slurm task, whose address is known only once it runs: name a host of [hosts] as the server")));
            }
            if members.contains(sv) {
                return Err(f.err(
                    "server",
                    format!("\"{sv}\" is also one of the clients (on = \"{name}\")"),
                ));
            }
            Some(sv.clone())
        }
        (StepKind::Net | StepKind::Rr | StepKind::Sweep, None) => {
            return Err(f.err(
                "server",
                "a network step on [hosts] needs server = \"HOST\" (the host that serves them)",
            ));
        }
        _ => None,
    };
    let in_lab = members
        .iter()
        .chain(server.iter())
        .any(|h| hosts.is_site(h));
    Ok(Some(OnHosts {
        name: name.clone(),
        hosts: members,
        concurrent: s.concurrent.unwrap_or(true),
        server,
        in_lab,
    }))
}

/// A service on this host's loopback (on a port picked when it starts) is reached only by
/// hosts whose agent runs on this host too (`local = true`).
fn on_hosts_reach_service(f: &Fields<'_>, on: &OnHosts, io: &IoStep) -> Result<(), PlanError> {
    let Some(used) = &io.service else {
        return Ok(());
    };
    let Some(svc) = f.ctx.services.iter().find(|s| s.name == used.name) else {
        return Ok(());
    };
    let launch = |h: &str| f.hosts.and_then(|hs| hs.get(h)).map(|h| &h.launch);
    let unfit = on.hosts.iter().find(|h| match (&svc.site, launch(h)) {
        (None, l) => l != Some(&crate::agent::Launch::Local),
        (Some(_), l) => !matches!(l, Some(crate::agent::Launch::Site { .. })),
    });
    match (unfit, &svc.site) {
        (Some(h), None) => Err(f.err(
            "service",
            format!(
                "service \"{}\" listens on this host's loopback, which host {h} (not local = true) cannot reach",
                used.name
            ),
        )),
        (Some(h), Some(site)) => Err(f.err(
            "service",
            format!(
                "service \"{}\" runs in lab site {site}, which only the lab's sites reach, not host {h}",
                used.name
            ),
        )),
        (None, _) => Ok(()),
    }
}

fn phases(f: &Fields<'_>, s: &RawStep) -> Result<Vec<Phase>, PlanError> {
    let mut phases = Vec::new();
    for p in &s.phases {
        let ph = p
            .parse::<Phase>()
            .ok()
            .filter(|p| *p != Phase::None)
            .ok_or_else(|| {
                f.err(
                    "phases",
                    format!("\"{p}\" is not cold, warm or remote-warm"),
                )
            })?;
        if phases.contains(&ph) {
            return Err(f.err("phases", format!("\"{p}\" appears twice")));
        }
        phases.push(ph);
    }
    Ok(phases)
}

fn net_target(f: &Fields<'_>, s: &RawStep) -> Result<Target, PlanError> {
    if s.on.is_some() {
        // Checked by on_hosts: the server is a host; the clients connect to its address.
        let addr = f
            .str("server", &s.server)?
            .and_then(|sv| Some(f.hosts?.get(&sv)?.address.clone()))
            .ok_or_else(|| f.err("server", "not a host of [hosts]"))?;
        return Ok(Target::Host(addr));
    }
    let client = f.site("client", &s.client)?;
    let server = f.site("server", &s.server)?;
    let host = f.str("host", &s.host)?;
    Ok(match (client, server, host) {
        (Some(c), Some(sv), None) => {
            if c == sv {
                return Err(invalid(format!(
                    "{}: client and server are the same site",
                    f.at
                )));
            }
            let server_index = f
                .lab
                .and_then(|l| l.sites.iter().position(|x| *x == sv))
                .unwrap_or(0);
            Target::Lab {
                client: c,
                server: sv,
                server_index,
            }
        }
        (None, None, Some(h)) if h.is_empty() => return Err(f.err("host", "empty")),
        (None, None, Some(h)) => Target::Host(h),
        (None, None, None) => Target::Loopback,
        _ => {
            return Err(invalid(format!(
                "{}: give both client and server (lab sites), or host, or neither (loopback)",
                f.at
            )));
        }
    })
}

fn net_mode(f: &Fields<'_>, s: &RawStep, kind: StepKind) -> Result<Mode, PlanError> {
    Ok(match kind {
        StepKind::Rr => {
            let size = f.size("size", &s.size)?.unwrap_or(Bytes(1));
            let n = f.u32_size("size", size)?;
            // The engine's own rule (TestParams::validate) bounds it when the plan is checked.
            let burst = f.int("burst", &s.burst, u64::from(u32::MAX))?.unwrap_or(1);
            Mode::Rr {
                request_bytes: n,
                response_bytes: n,
                burst: burst as u32,
            }
        }
        StepKind::Sweep => {
            let r = f.str("range", &s.range)?.ok_or_else(|| {
                invalid(format!("{}: a sweep step needs range = \"MIN..MAX\"", f.at))
            })?;
            let (a, b) = r
                .split_once("..")
                .ok_or_else(|| f.err("range", format!("\"{r}\" is not MIN..MAX, e.g. 1k..16m")))?;
            let a = Bytes::parse(a).map_err(|e| f.err("range", e))?;
            let b = Bytes::parse(b).map_err(|e| f.err("range", e))?;
            Mode::Sweep {
                min_bytes: f.u32_size("range", a)?,
                max_bytes: f.u32_size("range", b)?,
            }
        }
        _ => Mode::Stream,
    })
}

fn net(f: &Fields<'_>, s: &RawStep, kind: StepKind) -> Result<NetStep, PlanError> {
    let target = net_target(f, s)?;
    let capture = capture_point(f, s, &target)?;
    let time = f
        .duration("time", &s.time)?
        .unwrap_or(Duration::from_secs(5));
    if time.is_zero() || time > Duration::from_secs(86_400) {
        return Err(f.err("time", "must be between 0 and 24 h"));
    }
    let window = match f.str("window", &s.window)?.as_deref() {
        None | Some("default") => None,
        Some(w) => Some(
            Bytes::parse(w)
                .map_err(|e| f.err("window", format!("{e} (or \"default\")")))?
                .0,
        ),
    };
    let defaults = TestParams::default();
    let params = TestParams {
        mode: net_mode(f, s, kind)?,
        streams: f
            .int("streams", &s.streams, u64::from(u32::MAX))?
            .map_or(1, |n| n as u32),
        direction: if f.bool("reverse", &s.reverse)? {
            Direction::Down
        } else {
            Direction::Up
        },
        duration_ns: time.as_nanos() as u64,
        warmup_ns: f
            .duration("omit", &s.omit)?
            .map_or(0, |d| d.as_nanos() as u64),
        len: match f.size("length", &s.length)? {
            Some(b) => f.u32_size("length", b)?,
            None => defaults.len,
        },
        window,
        congestion: f.str("cc", &s.cc)?,
        awake: f.bool("awake", &s.awake)?,
        ..defaults
    };
    // The network engine's own rules (stream count, sizes, window, cc name, …).
    params
        .validate()
        .map_err(|e| invalid(format!("{}: {e}", f.at)))?;
    Ok(NetStep {
        target,
        port: f
            .int("port", &s.port, 65535)?
            .map_or(DEFAULT_PORT, |p| p as u16),
        params,
        capture,
    })
}

fn io(f: &Fields<'_>, s: &RawStep, phases: &[Phase]) -> Result<IoStep, PlanError> {
    let workload: Workload = f
        .parsed("workload", &s.workload, str::parse)?
        .ok_or_else(|| invalid(format!("{}: an io step needs a workload", f.at)))?;
    let size = f.size("size", &s.size)?.unwrap_or(Bytes(64 * Bytes::MIB));
    let bs = f.size("bs", &s.bs)?.unwrap_or(Bytes(128 * Bytes::KIB));
    let site = f.site("site", &s.site)?;
    let place = io_target(
        &f.at,
        f.str("dir", &s.dir)?,
        s.service.as_deref(),
        match (&site, &s.on) {
            (Some(site), _) => super::service::StepSite::Site(site),
            (None, Some(_)) => super::service::StepSite::OnHosts,
            (None, None) => super::service::StepSite::ThisHost,
        },
        f.ctx.services,
        f.ctx.link_rate_bps,
    )?;
    let place = with_credentials(&f.at, place, f.str("credentials", &s.credentials)?)?;
    let mut config = RunConfig::new(place.target.clone(), workload, size.0, bs.0);
    config.network_path = place.path;
    let cache = f.parsed::<CacheMode, _>("cache", &s.cache, str::parse)?;
    if let Some(c) = io_phases(&f.at, phases, &place, cache)? {
        config.cache = c;
    }
    // The plan evicts the server's copy only of a server it runs on this host.
    config.drop_caches = place.service.is_some() && config.cache == CacheMode::Cold;
    if let Some(m) = f.parsed::<FsyncMode, _>("fsync", &s.fsync, str::parse)? {
        config.fsync = m;
    }
    let engine = f.parsed::<EngineKind, _>("engine", &s.engine, str::parse)?;
    if let Some(e) = io_engine(&f.at, &place, engine)? {
        config.engine = e;
    }
    // Every block written carries a checksummed header, every block read is checked.
    config.verify = f.parsed::<VerifyMode, _>("verify", &s.verify, str::parse)?;
    if let Some(d) = f.int("iodepth", &s.iodepth, u64::from(u32::MAX))? {
        config.iodepth = d as u32;
    }
    // A minimum measured time: the file is gone over again until it has passed (fio's
    // runtime + time_based), so a small file still gives a pass long enough to mean something.
    if let Some(t) = f.duration("time", &s.time)? {
        if t.is_zero() || t > Duration::from_secs(86_400) {
            return Err(f.err("time", "must be between 0 and 24 h"));
        }
        config.time = Some(t);
        config.time_based = true;
    }
    // An unmeasured warm-up with the same workload before the measured part (fio's
    // ramp_time): a new connection's slow start across a long RTT, say.
    if let Some(r) = f.duration("ramp", &s.ramp)? {
        if r > Duration::from_secs(86_400) {
            return Err(f.err("ramp", "must be at most 24 h"));
        }
        config.ramp = (!r.is_zero()).then_some(r);
    }
    let peer = match &s.replicate {
        Some(r) => {
            let (rep, peer) = replicate(f, r, site.as_deref(), &config)?;
            config.replicate = Some(rep);
            Some(peer)
        }
        None => None,
    };
    // The io engine's own rules (sizes, engine capabilities, direct I/O alignment, …).
    config
        .validate()
        .map_err(|e| invalid(format!("{}: {e}", f.at)))?;
    let capture = io_capture_point(f, s, site.as_deref(), &config, place.service.as_ref())?;
    Ok(IoStep {
        site,
        config,
        service: place.service,
        peer,
        capture,
    })
}

/// A bonnie step: the suite of `nsperf io bonnie` in a directory (of this host, or of a lab
/// site's view of it), its defaults bonnie's (8 KiB chunks, cold reads, fsync at the end).
fn bonnie(f: &Fields<'_>, s: &RawStep) -> Result<BonnieStep, PlanError> {
    let dir = f
        .str("dir", &s.dir)?
        .ok_or_else(|| invalid(format!("{}: a bonnie step needs a dir", f.at)))?;
    if dir.contains("://") {
        return Err(f.err(
            "dir",
            "the bonnie suite runs in a directory (a mount), not a URL",
        ));
    }
    let mut config = BonnieConfig::new(dir.into());
    if let Some(b) = f.size("size", &s.size)? {
        config.size_bytes = b.0;
    }
    if let Some(b) = f.size("bs", &s.bs)? {
        config.chunk_bytes = b.0;
    }
    if let Some(c) = f.parsed::<CacheMode, _>("cache", &s.cache, str::parse)? {
        if c == CacheMode::RemoteWarm {
            return Err(f.err(
                "cache",
                "remote-warm needs a server; use cold, warm or direct",
            ));
        }
        config.cache = c;
    }
    if let Some(m) = f.parsed::<FsyncMode, _>("fsync", &s.fsync, str::parse)? {
        config.fsync = m;
    }
    if let Some(e) = f.parsed::<EngineKind, _>("engine", &s.engine, str::parse)? {
        config.engine = e;
    }
    if let Some(n) = f.int("files", &s.files, 10_000_000)? {
        config.files = n as u32;
    }
    config
        .validate()
        .map_err(|e| invalid(format!("{}: {e}", f.at)))?;
    Ok(BonnieStep {
        site: f.site("site", &s.site)?,
        config,
    })
}

fn payload(f: &Fields<'_>, s: &RawStep) -> Result<Payload, PlanError> {
    Ok(match (f.size("payload", &s.payload)?, &s.payload_regex) {
        (Some(_), Some(_)) => {
            return Err(invalid(format!(
                "{}: give payload or payload_regex, not both",
                f.at
            )));
        }
        (Some(p), None) => Payload::Declared(p),
        (None, Some(r)) => {
            let re = regex::Regex::new(r)
                .map_err(|e| f.err("payload_regex", e.to_string().lines().last().unwrap_or("")))?;
            if re.captures_len() < 2 {
                return Err(f.err(
                    "payload_regex",
                    "needs a capture group around the byte count, e.g. \"(\\\\d+) bytes\"",
                ));
            }
            Payload::Parsed(re)
        }
        (None, None) => Payload::Unknown,
    })
}

fn exec(f: &Fields<'_>, s: &RawStep, phases: &[Phase]) -> Result<ExecStep, PlanError> {
    let command = f.command("command", &s.command)?.ok_or_else(|| {
        invalid(format!(
            "{}: an exec step needs command = [\"prog\", \"arg\", ...]",
            f.at
        ))
    })?;
    let prime = f.command("prime", &s.prime)?;
    if phases.contains(&Phase::RemoteWarm) && prime.is_none() {
        return Err(invalid(format!(
            "{}: the remote-warm phase needs a prime command (run on the remote site after the caches are dropped)",
            f.at
        )));
    }
    Ok(ExecStep {
        site: f.site("site", &s.site)?,
        command,
        payload: payload(f, s)?,
        prime,
    })
}
