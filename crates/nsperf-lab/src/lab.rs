//! The lab operations behind `nsperf lab`: up, down, list, set, stats, exec.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::capture::CaptureSummary;
use crate::config::{LinkChange, LinkParams, MAX_MTU, MIN_MTU, check_name};
use crate::emulator::{
    InitialConfig, Request, Response, events_path, initial_path, ready_path, socket_path,
};
use crate::error::{LabError, Result};
use crate::events::LinkEvent;
use crate::netns;
use crate::schedule::Schedule;
use crate::state::{LabState, SiteState, lab_dir, write_atomic};
use crate::stats::LabStats;
use crate::topology::{Layout, Topology};
use nsperf_core::process::{ProcessId, ancestors, start_ticks};

/// Most sites (clients included) in one lab: the addresses 10.77.0.1–.254.
pub const MAX_SITES: usize = 254;

/// What `lab up` builds: the lab's configuration, as the command line and a plan's `[lab]`
/// table give it (every field has a default but the name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpConfig {
    /// Lab name.
    pub name: String,
    /// Site names, in order.
    pub sites: Vec<String>,
    /// Extra client sites `c1`..`cN`, after the named sites.
    pub clients: usize,
    /// MTU of every link device.
    pub mtu: u32,
    /// How the sites are joined.
    pub topology: Topology,
    /// The link flags: every link of a mesh, the server's port of a star, the WAN of a
    /// dumbbell (narrowed by its `link`, `from`, `to`).
    pub link: LinkChange,
    /// The access links of a star or dumbbell (every one unless its `link` names one).
    pub access: LinkChange,
    /// A fault schedule started once the lab is up.
    pub schedule: Option<Schedule>,
    /// Do not hold the CPUs out of deep idle states while the lab is up.
    pub allow_deep_idle: bool,
    /// Most bytes of packets the emulator may hold in its delay lines (packets in flight
    /// beyond it are dropped and counted as overruns): a 10 Gbit/s × 100 ms path holds
    /// 125 MB. Default [`crate::fabric::DEFAULT_MEMORY`].
    pub memory_bytes: u64,
    /// Seed of the impairments' random numbers (loss, jitter, reorder, duplicate, corrupt):
    /// the same seed and the same packets give the same drops. `None`: from the OS.
    pub seed: Option<u64>,
    /// The process the lab belongs to (see [`LabState::owner`]); `None` for nobody.
    pub owner: Option<ProcessId>,
}

impl Default for UpConfig {
    fn default() -> Self {
        UpConfig {
            name: String::new(),
            sites: vec!["a".into(), "b".into()],
            clients: 0,
            mtu: 1500,
            topology: Topology::Mesh,
            link: LinkChange::default(),
            access: LinkChange::default(),
            schedule: None,
            allow_deep_idle: false,
            memory_bytes: crate::fabric::DEFAULT_MEMORY,
            seed: None,
            owner: None,
        }
    }
}

/// The namespace name of a site.
pub fn netns_name(lab: &str, site: &str) -> String {
    format!("nsp-{lab}-{site}")
}

fn require_root(what: &'static str) -> Result<()> {
    if netns::is_root() {
        Ok(())
    } else {
        Err(LabError::NeedsRoot(what))
    }
}

/// Validates the config and returns the full site list.
pub fn site_names(cfg: &UpConfig) -> Result<Vec<String>> {
    check_name("lab name", &cfg.name)?;
    let mut sites = cfg.sites.clone();
    sites.extend((1..=cfg.clients).map(|i| format!("c{i}")));
    for s in &sites {
        check_name("site", s)?;
    }
    for (i, s) in sites.iter().enumerate() {
        if sites[..i].contains(s) {
            return Err(LabError::Usage(format!("site '{s}' is named twice")));
        }
    }
    if sites.len() < 2 {
        return Err(LabError::Usage("a lab needs at least two sites".into()));
    }
    if sites.len() > MAX_SITES {
        return Err(LabError::Usage(format!("at most {MAX_SITES} sites")));
    }
    if !(MIN_MTU..=MAX_MTU).contains(&cfg.mtu) {
        return Err(LabError::Usage(format!(
            "MTU {} is outside {MIN_MTU}..={MAX_MTU}",
            cfg.mtu
        )));
    }
    for s in [&cfg.link.from, &cfg.link.to].into_iter().flatten() {
        if !sites.contains(s) {
            return Err(LabError::Usage(format!("no site named '{s}' in this lab")));
        }
    }
    if cfg.memory_bytes < 1 << 20 {
        return Err(LabError::Usage("--memory must allow at least 1 MiB".into()));
    }
    if cfg.link.up.is_some() || cfg.access.up.is_some() {
        return Err(LabError::Usage("a lab starts with its links up".into()));
    }
    Ok(sites)
}

/// Checks the whole configuration and returns the sites, the layout and the starting
/// parameters of every direction (no root needed: `lab up` fails here before it touches
/// anything).
pub fn plan(cfg: &UpConfig) -> Result<(Vec<String>, Layout, Vec<LinkParams>)> {
    let sites = site_names(cfg)?;
    let layout = Layout::new(&cfg.topology, &sites)?;
    let mut params = vec![LinkParams::default(); layout.directions.len()];
    for d in layout.select(&cfg.link)? {
        cfg.link.apply(&mut params[d]);
    }
    if !cfg.access.is_empty() || cfg.access.link.is_some() {
        if cfg.topology == Topology::Mesh {
            return Err(LabError::Usage(
                "access links exist in a star or dumbbell (--topology)".into(),
            ));
        }
        let mut access = cfg.access.clone();
        access.link.get_or_insert_with(|| "access".into());
        for d in layout.select(&access)? {
            access.apply(&mut params[d]);
        }
    }
    Ok((sites, layout, params))
}

/// Creates the lab and starts its emulator with `emulator` (a command that runs
/// [`crate::emulator::run`] for this lab, normally `nsperf lab emulate NAME`). Returns once
/// the emulator is forwarding; on failure everything created is removed again.
pub fn up(cfg: &UpConfig, emulator: Command) -> Result<LabState> {
    let (sites, layout, params) = plan(cfg)?;
    require_root("lab up")?;
    if LabState::path(&cfg.name).exists() {
        return Err(LabError::Exists(cfg.name.clone()));
    }
    for s in &sites {
        if netns::exists(&netns_name(&cfg.name, s)) {
            return Err(LabError::Exists(cfg.name.clone()));
        }
    }
    let mut state = LabState {
        name: cfg.name.clone(),
        sites: sites
            .iter()
            .enumerate()
            .map(|(i, s)| SiteState {
                name: s.clone(),
                netns: netns_name(&cfg.name, s),
                addr: crate::site_addr(i),
            })
            .collect(),
        mtu: cfg.mtu,
        created_unix_ns: nsperf_core::clock::unix_time_ns(),
        emulator_pid: None,
        emulator_start_ticks: None,
        owner: cfg.owner,
        topology: layout.topology.clone(),
    };
    // Recorded before anything exists, so `down` can always clean up.
    state.save()?;
    match build(&mut state, cfg, &layout, params, emulator) {
        Ok(()) => Ok(state),
        Err(e) => {
            let _ = down(&cfg.name, true);
            Err(e)
        }
    }
}

fn build(
    state: &mut LabState,
    cfg: &UpConfig,
    layout: &Layout,
    params: Vec<LinkParams>,
    mut emulator: Command,
) -> Result<()> {
    let init = InitialConfig {
        topology: layout.topology.clone(),
        params,
        schedule: cfg.schedule.clone(),
        allow_deep_idle: cfg.allow_deep_idle,
        memory_bytes: cfg.memory_bytes,
        seed: cfg.seed,
    };
    write_atomic(
        &initial_path(&cfg.name),
        &serde_json::to_vec(&init).unwrap_or_default(),
    )?;
    for s in &state.sites {
        netns::create(&s.netns)?;
    }
    let log_path = lab_dir(&cfg.name).join("emulator.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| LabError::io(format!("creating {}", log_path.display()), e))?;
    let log2 = log
        .try_clone()
        .map_err(|e| LabError::io("duplicating the log file", e))?;
    emulator.stdin(Stdio::null()).stdout(log).stderr(log2);
    // SAFETY: setsid is async-signal-safe; it detaches the emulator from our session so it
    // outlives this process and the terminal.
    unsafe {
        emulator.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = emulator
        .spawn()
        .map_err(|e| LabError::io("starting the emulator", e))?;
    let pid = child.id();
    // Record the pid at once: `down` must find the process even if we die now.
    let t0 = Instant::now();
    while start_ticks(pid).is_none() && t0.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(1));
    }
    state.emulator_pid = Some(pid);
    state.emulator_start_ticks = start_ticks(pid);
    state.save()?;
    let ready = ready_path(&cfg.name);
    loop {
        if ready.exists() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let last = log.lines().last().unwrap_or("").trim().to_string();
            return Err(LabError::Emulator {
                lab: cfg.name.clone(),
                problem: format!("exited at start ({status}): {last}"),
            });
        }
        if t0.elapsed() > Duration::from_secs(20) {
            return Err(LabError::Emulator {
                lab: cfg.name.clone(),
                problem: "did not become ready within 20 s".into(),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What `down` did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DownReport {
    /// Processes that were still running inside the lab's namespaces and were stopped.
    pub stopped: Vec<ProcessId>,
}

/// The live process lab `name` belongs to, if any: a plan runner asks this before it
/// touches a lab it did not create.
pub fn live_owner(name: &str) -> Result<Option<ProcessId>> {
    check_name("lab name", name)?;
    Ok(LabState::load(name)?.live_owner())
}

/// True when the calling process is `owner` or runs below it (a child of the plan run or
/// script that owns the lab).
pub fn caller_is_owned_by(owner: &ProcessId) -> bool {
    owner.is_alive() && ancestors().contains(&owner.pid)
}

/// Removes lab `name`: stops the processes still running in its namespaces and its
/// emulator, deletes its namespaces (and with them its devices) and its state. Works on a
/// half-built or crashed lab. A lab whose owner is another live process is refused
/// ([`LabError::Owned`]) unless `force`.
pub fn down(name: &str, force: bool) -> Result<DownReport> {
    check_name("lab name", name)?;
    require_root("lab down")?;
    let state = LabState::load(name);
    let prefix = format!("nsp-{name}-");
    let leftover = netns::with_prefix(&prefix);
    let state = match state {
        Ok(s) => Some(s),
        Err(LabError::NotFound(_)) if !leftover.is_empty() => None,
        Err(e) => return Err(e),
    };
    if let Some(owner) = state.as_ref().and_then(LabState::live_owner)
        && !force
        && !caller_is_owned_by(&owner)
    {
        return Err(LabError::Owned {
            lab: name.to_string(),
            owner,
        });
    }
    let mut names: Vec<String> = state
        .iter()
        .flat_map(|s| s.sites.iter().map(|x| x.netns.clone()))
        .collect();
    // A site name may itself contain the lab prefix of another lab (`nsp-a-b-c`): only
    // leftovers whose remainder is a valid site name belong to this lab.
    for ns in leftover {
        let rest = &ns[prefix.len()..];
        if check_name("site", rest).is_ok() && !names.contains(&ns) {
            names.push(ns);
        }
    }
    // Servers first (`lab serve`), with anything else still running in a site (a server
    // started with `lab exec` would live on in a namespace no longer listed), then the
    // emulator: a namespace is only gone once no process holds it.
    let stopped: Vec<ProcessId> = names.iter().flat_map(|n| netns::processes_in(n)).collect();
    crate::service::stop_all(name, &names, Duration::from_secs(3));
    if let Some(s) = &state {
        stop_emulator(s);
    }
    let mut first_err = None;
    for ns in &names {
        if let Err(e) = netns::delete(ns) {
            first_err.get_or_insert(e);
        }
    }
    let dir = lab_dir(name);
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            first_err.get_or_insert(LabError::io(format!("removing {}", dir.display()), e));
        }
    }
    first_err.map_or(Ok(DownReport { stopped }), Err)
}

fn stop_emulator(s: &LabState) {
    if let (Some(pid), Some(start_ticks)) = (s.emulator_pid, s.emulator_start_ticks) {
        netns::stop_processes(&[ProcessId { pid, start_ticks }], Duration::from_secs(3));
    }
}

/// Removes every recorded lab (see [`down`]); returns their names and what was stopped.
/// Labs owned by another live process are kept unless `force`; the first refusal or
/// failure is returned after every other lab was removed.
pub fn down_all(force: bool) -> Result<Vec<(String, DownReport)>> {
    require_root("lab down")?;
    let mut done = Vec::new();
    let mut first_err = None;
    for n in LabState::list_names() {
        match down(&n, force) {
            Ok(r) => done.push((n, r)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    first_err.map_or(Ok(done), Err)
}

/// One lab as `lab list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabSummary {
    /// Lab name.
    pub name: String,
    /// Its sites with their namespaces and addresses.
    pub sites: Vec<SiteState>,
    /// MTU of the link devices.
    pub mtu: u32,
    /// Emulator process id.
    pub emulator_pid: Option<u32>,
    /// Whether the emulator is running (false after a crash: `lab down` it).
    pub running: bool,
    /// The live process the lab belongs to, if any.
    pub owner: Option<ProcessId>,
}

/// Every recorded lab.
pub fn list() -> Vec<LabSummary> {
    LabState::list_names()
        .into_iter()
        .filter_map(|n| LabState::load(&n).ok())
        .map(|s| LabSummary {
            running: s.emulator_running(),
            owner: s.live_owner(),
            name: s.name,
            sites: s.sites,
            mtu: s.mtu,
            emulator_pid: s.emulator_pid,
        })
        .collect()
}

/// A connection to a lab's emulator.
struct Control {
    lab: String,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Control {
    fn open(name: &str) -> Result<Control> {
        check_name("lab name", name)?;
        let state = LabState::load(name)?;
        if !state.emulator_running() {
            return Err(LabError::Emulator {
                lab: name.to_string(),
                problem: "is not running (remove the lab with `nsperf lab down`)".into(),
            });
        }
        let s = UnixStream::connect(socket_path(name)).map_err(|e| LabError::Emulator {
            lab: name.to_string(),
            problem: format!("did not answer: {e}"),
        })?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let reader = s
            .try_clone()
            .map_err(|e| LabError::io("control socket", e))?;
        Ok(Control {
            lab: name.to_string(),
            reader: BufReader::new(reader),
            writer: s,
        })
    }

    fn emu(&self, problem: String) -> LabError {
        LabError::Emulator {
            lab: self.lab.clone(),
            problem,
        }
    }

    fn send(&mut self, req: &Request) -> Result<()> {
        let line = serde_json::to_string(req).map_err(|e| self.emu(e.to_string()))?;
        writeln!(self.writer, "{line}").map_err(|e| self.emu(format!("did not answer: {e}")))
    }

    fn answer(&mut self) -> Result<Response> {
        let mut answer = String::new();
        self.reader
            .read_line(&mut answer)
            .map_err(|e| self.emu(format!("did not answer: {e}")))?;
        let r: Response = serde_json::from_str(&answer)
            .map_err(|e| self.emu(format!("answered nonsense: {e}")))?;
        if r.ok {
            Ok(r)
        } else {
            Err(LabError::Usage(r.error.unwrap_or_else(|| "refused".into())))
        }
    }
}

fn request(name: &str, req: &Request) -> Result<Response> {
    let mut c = Control::open(name)?;
    c.send(req)?;
    c.answer()
}

/// A capture running on a lab's link (see [`crate::capture`]); [`LinkCapture::stop`] ends
/// it. Dropped without `stop`, the capture ends as the connection closes.
pub struct LinkCapture {
    ctl: Control,
}

/// Starts capturing link `link` of lab `name` into pcapng file `path` (relative to the
/// current directory; written by the emulator, replaced if it exists). Returns once the
/// capture records.
pub fn capture(name: &str, link: &str, path: &std::path::Path) -> Result<LinkCapture> {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| LabError::io("finding the current directory", e))?
            .join(path)
    };
    let mut ctl = Control::open(name)?;
    ctl.send(&Request::Capture {
        link: link.to_string(),
        path,
    })?;
    ctl.answer()?;
    Ok(LinkCapture { ctl })
}

impl LinkCapture {
    /// Stops the capture; the file is complete when this returns.
    pub fn stop(mut self) -> Result<CaptureSummary> {
        writeln!(self.ctl.writer, "stop")
            .map_err(|e| self.ctl.emu(format!("did not answer: {e}")))?;
        self.ctl
            .reader
            .get_ref()
            .set_read_timeout(Some(Duration::from_secs(60)))
            .ok();
        let r = self.ctl.answer()?;
        r.capture
            .ok_or_else(|| self.ctl.emu("sent no capture summary".into()))
    }
}

/// The events of lab `name` so far (every link change with its time), read from its event
/// log: works while the emulator is busy, and after it died, until `lab down`.
pub fn events(name: &str) -> Result<Vec<LinkEvent>> {
    check_name("lab name", name)?;
    LabState::load(name)?;
    let p = events_path(name);
    if !p.exists() {
        return Ok(Vec::new());
    }
    crate::events::read(&p)
}

/// Changes the running lab's links and/or starts a schedule.
pub fn set(name: &str, change: &LinkChange, schedule: Option<Schedule>) -> Result<()> {
    if change.is_empty() && schedule.is_none() {
        return Err(LabError::Usage(
            "nothing to change: give a link flag or --schedule".into(),
        ));
    }
    if !change.is_empty() {
        request(
            name,
            &Request::Set {
                change: change.clone(),
            },
        )?;
    }
    if let Some(schedule) = schedule {
        request(name, &Request::Schedule { schedule })?;
    }
    Ok(())
}

/// Stops every fault schedule running on the lab's links (what they changed stays).
pub fn stop_schedules(name: &str) -> Result<()> {
    request(name, &Request::StopSchedules).map(|_| ())
}

/// The running lab's statistics.
pub fn stats(name: &str) -> Result<LabStats> {
    request(name, &Request::Stats)?
        .stats
        .ok_or_else(|| LabError::Emulator {
            lab: name.to_string(),
            problem: "sent no statistics".into(),
        })
}

/// Moves the calling (still single-threaded) process into a site of a lab: its network
/// namespace, with `/sys` showing the site's devices, as `lab exec` gives a command.
pub fn enter_site(name: &str, site: &str) -> Result<()> {
    check_name("lab name", name)?;
    let state = LabState::load(name)?;
    let s = state
        .sites
        .iter()
        .find(|s| s.name == site)
        .ok_or_else(|| LabError::Usage(format!("lab '{name}' has no site '{site}'")))?;
    require_root("entering a lab site")?;
    netns::enter(&s.netns)
}

/// A command that runs `argv` inside a site's namespace (`ip netns exec`, which also gives
/// the command the namespace's view of /sys).
pub fn exec_command(name: &str, site: &str, argv: &[String]) -> Result<Command> {
    check_name("lab name", name)?;
    let state = LabState::load(name)?;
    let s = state
        .sites
        .iter()
        .find(|s| s.name == site)
        .ok_or_else(|| LabError::Usage(format!("lab '{name}' has no site '{site}'")))?;
    let (prog, args) = argv
        .split_first()
        .ok_or_else(|| LabError::Usage("no command given after --".into()))?;
    if !is_program(prog) {
        // Found here, before `ip netns exec` would fail with its own unprefixed line.
        return Err(LabError::Usage(format!(
            "lab exec: {prog}: no such program (not a file, nor on PATH)"
        )));
    }
    require_root("lab exec")?;
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &s.netns, prog]).args(args);
    Ok(c)
}

/// True when `prog` names an executable file: a path, or a name found on `PATH`.
fn is_program(prog: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let exec = |p: &std::path::Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        return exec(std::path::Path::new(prog));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| exec(&d.join(prog))))
}
