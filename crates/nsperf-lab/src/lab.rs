//! The lab operations behind `nsperf lab`: up, down, list, set, stats, exec.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::config::{LinkChange, LinkParams, MAX_MTU, MIN_MTU, check_name};
use crate::emulator::{
    InitialConfig, LabStats, Request, Response, initial_path, ready_path, socket_path,
};
use crate::error::{LabError, Result};
use crate::netns;
use crate::schedule::Schedule;
use crate::state::{LabState, SiteState, lab_dir, process_start_ticks, write_atomic};

/// Most sites (clients included) in one lab: the addresses 10.77.0.1–.254.
pub const MAX_SITES: usize = 254;

/// What `lab up` builds.
#[derive(Debug, Clone)]
pub struct UpConfig {
    /// Lab name.
    pub name: String,
    /// Site names, in order.
    pub sites: Vec<String>,
    /// Extra client sites `c1`..`cN`, after the named sites.
    pub clients: usize,
    /// MTU of every link device.
    pub mtu: u32,
    /// Link parameters, applied to the default in every selected direction.
    pub link: LinkChange,
    /// A fault schedule started once the lab is up.
    pub schedule: Option<Schedule>,
    /// Do not hold the CPUs out of deep idle states while the lab is up.
    pub allow_deep_idle: bool,
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
    if cfg.link.up.is_some() {
        return Err(LabError::Usage("a lab starts with its links up".into()));
    }
    Ok(sites)
}

/// Creates the lab and starts its emulator with `emulator` (a command that runs
/// [`crate::emulator::run`] for this lab, normally `nsperf lab emulate NAME`). Returns once
/// the emulator is forwarding; on failure everything created is removed again.
pub fn up(cfg: &UpConfig, emulator: Command) -> Result<LabState> {
    let sites = site_names(cfg)?;
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
    };
    // Recorded before anything exists, so `down` can always clean up.
    state.save()?;
    match build(&mut state, cfg, &sites, emulator) {
        Ok(()) => Ok(state),
        Err(e) => {
            let _ = down(&cfg.name);
            Err(e)
        }
    }
}

fn build(
    state: &mut LabState,
    cfg: &UpConfig,
    sites: &[String],
    mut emulator: Command,
) -> Result<()> {
    let n = sites.len();
    let mut params = vec![LinkParams::default(); n * n];
    for a in 0..n {
        for b in 0..n {
            if a != b && cfg.link.selects(&sites[a], &sites[b]) {
                cfg.link.apply(&mut params[a * n + b]);
            }
        }
    }
    let init = InitialConfig {
        params,
        schedule: cfg.schedule.clone(),
        allow_deep_idle: cfg.allow_deep_idle,
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
    while process_start_ticks(pid).is_none() && t0.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(1));
    }
    state.emulator_pid = Some(pid);
    state.emulator_start_ticks = process_start_ticks(pid);
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

/// Removes lab `name`: stops its emulator, deletes its namespaces (and with them its
/// devices) and its state. Works on a half-built or crashed lab.
pub fn down(name: &str) -> Result<()> {
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
    if let Some(s) = &state {
        stop_emulator(s);
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
    first_err.map_or(Ok(()), Err)
}

fn stop_emulator(s: &LabState) {
    let (Some(pid), Some(ticks)) = (s.emulator_pid, s.emulator_start_ticks) else {
        return;
    };
    if process_start_ticks(pid) != Some(ticks) {
        return;
    }
    // SAFETY: signalling a process we verified is the lab's emulator.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
    let t0 = Instant::now();
    while process_start_ticks(pid) == Some(ticks) {
        if t0.elapsed() > Duration::from_secs(3) {
            // SAFETY: as above.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Wait for SIGKILL to land.
    let t1 = Instant::now();
    while process_start_ticks(pid) == Some(ticks) && t1.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Removes every recorded lab; returns their names.
pub fn down_all() -> Result<Vec<String>> {
    require_root("lab down")?;
    let names = LabState::list_names();
    let mut first_err = None;
    for n in &names {
        if let Err(e) = down(n) {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(names), Err)
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
}

/// Every recorded lab.
pub fn list() -> Vec<LabSummary> {
    LabState::list_names()
        .into_iter()
        .filter_map(|n| LabState::load(&n).ok())
        .map(|s| LabSummary {
            running: s.emulator_running(),
            name: s.name,
            sites: s.sites,
            mtu: s.mtu,
            emulator_pid: s.emulator_pid,
        })
        .collect()
}

fn request(name: &str, req: &Request) -> Result<Response> {
    check_name("lab name", name)?;
    let state = LabState::load(name)?;
    if !state.emulator_running() {
        return Err(LabError::Emulator {
            lab: name.to_string(),
            problem: "is not running (remove the lab with `nsperf lab down`)".into(),
        });
    }
    let path = socket_path(name);
    let emu = |problem: String| LabError::Emulator {
        lab: name.to_string(),
        problem,
    };
    let mut s = UnixStream::connect(&path).map_err(|e| emu(format!("did not answer: {e}")))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let line = serde_json::to_string(req).map_err(|e| emu(e.to_string()))?;
    writeln!(s, "{line}").map_err(|e| emu(format!("did not answer: {e}")))?;
    let mut answer = String::new();
    BufReader::new(s)
        .read_line(&mut answer)
        .map_err(|e| emu(format!("did not answer: {e}")))?;
    let r: Response =
        serde_json::from_str(&answer).map_err(|e| emu(format!("answered nonsense: {e}")))?;
    if r.ok {
        Ok(r)
    } else {
        Err(LabError::Usage(r.error.unwrap_or_else(|| "refused".into())))
    }
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

/// The running lab's statistics.
pub fn stats(name: &str) -> Result<LabStats> {
    request(name, &Request::Stats)?
        .stats
        .ok_or_else(|| LabError::Emulator {
            lab: name.to_string(),
            problem: "sent no statistics".into(),
        })
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
    require_root("lab exec")?;
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &s.netns, prog]).args(args);
    Ok(c)
}
