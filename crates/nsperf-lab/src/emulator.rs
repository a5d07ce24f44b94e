//! The emulator process of one lab (started by `lab up`, kept in the background): creates
//! the sites' TUN devices, runs [`Forwarder`] threads (one per two sites) over the shared
//! [`Fabric`], applies `lab set` requests and the fault schedule, samples queue occupancy,
//! runs link captures, and answers over a Unix socket in the lab's state directory (one JSON
//! line per request; a capture keeps its connection until told to stop or the client goes
//! away).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use nsperf_core::Clock;
use serde::{Deserialize, Serialize};

use crate::capture::CaptureSummary;
use crate::config::{LinkChange, LinkParams};
use crate::error::{LabError, Result};
use crate::events::{EventKind, EventSource};
use crate::fabric::{Fabric, SAMPLE_INTERVAL};
use crate::forwarder::Forwarder;
use crate::netns;
use crate::schedule::Schedule;
use crate::state::{LabState, lab_dir, write_atomic};
use crate::stats::LabStats;
use crate::topology::{Layout, Topology};
use crate::tun::Tun;

/// Name of the link device inside every site's namespace.
pub const LINK_DEV: &str = "wan0";

/// A request on the control socket (one JSON line).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Change link parameters.
    Set {
        /// The change.
        change: LinkChange,
    },
    /// Start a fault schedule now.
    Schedule {
        /// The schedule.
        schedule: Schedule,
    },
    /// Stop every schedule started before (the changes they made stay).
    StopSchedules,
    /// Report statistics.
    Stats,
    /// Capture a link into a pcapng file until the client writes a line or hangs up; the
    /// emulator answers once when started and once, with the summary, when stopped.
    Capture {
        /// The link's name.
        link: String,
        /// The file to write (absolute).
        path: PathBuf,
    },
}

/// The answer (one JSON line).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request was carried out.
    pub ok: bool,
    /// Why not.
    pub error: Option<String>,
    /// For `stats`.
    pub stats: Option<LabStats>,
    /// For a stopped capture.
    #[serde(default)]
    pub capture: Option<CaptureSummary>,
}

impl Response {
    fn done() -> Response {
        Response {
            ok: true,
            ..Response::default()
        }
    }

    fn failed(e: impl std::fmt::Display) -> Response {
        Response {
            ok: false,
            error: Some(e.to_string()),
            ..Response::default()
        }
    }
}

/// The initial configuration `lab up` leaves for the emulator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitialConfig {
    /// The lab's shape.
    #[serde(default)]
    pub topology: Topology,
    /// Parameters per direction, in the order of the topology's [`Layout`].
    pub params: Vec<LinkParams>,
    /// A schedule to start at once.
    pub schedule: Option<Schedule>,
    /// Do not hold the CPUs out of deep idle states (see [`CpuLatencyHold`]).
    #[serde(default)]
    pub allow_deep_idle: bool,
    /// Most bytes the delay lines may hold.
    #[serde(default = "default_memory")]
    pub memory_bytes: u64,
    /// Seed of the impairments' random numbers; `None`: from the OS.
    #[serde(default)]
    pub seed: Option<u64>,
}

fn default_memory() -> u64 {
    crate::fabric::DEFAULT_MEMORY
}

pub use nsperf_core::cpu::CpuLatencyHold;

/// Path of the initial configuration file.
pub fn initial_path(lab: &str) -> PathBuf {
    lab_dir(lab).join("links.json")
}
/// Path of the control socket.
pub fn socket_path(lab: &str) -> PathBuf {
    lab_dir(lab).join("ctl.sock")
}
/// Path of the file written once the emulator is ready.
pub fn ready_path(lab: &str) -> PathBuf {
    lab_dir(lab).join("ready")
}
/// Path of the lab's event log, one JSON [`crate::events::LinkEvent`] per line.
pub fn events_path(lab: &str) -> PathBuf {
    lab_dir(lab).join("events.jsonl")
}

/// How long a lab may carry no packet before the CPU latency hold is let go.
pub const HOLD_IDLE: Duration = Duration::from_secs(1);

/// Holds the CPUs' idle-exit latency at 0 ([`CpuLatencyHold`]) while the lab carries
/// traffic, so that a packet finding its forwarder asleep does not pay a deep idle state's
/// exit; lets go after [`HOLD_IDLE`] without a packet, because the hold makes idle CPUs
/// busy-poll (on a VM with the haltpoll driver, its POLL state): an idle lab costs no CPU.
struct LatencyHold {
    wanted: bool,
    held: Option<CpuLatencyHold>,
    seen: u64,
    idle_since: std::time::Instant,
    failed: bool,
    logged: bool,
}

impl LatencyHold {
    fn new(wanted: bool) -> Self {
        LatencyHold {
            wanted,
            held: None,
            seen: 0,
            idle_since: std::time::Instant::now(),
            failed: false,
            logged: false,
        }
    }

    fn update(&mut self, f: &Fabric) {
        if !self.wanted || self.failed {
            return;
        }
        let now = f.activity.load(Ordering::Relaxed);
        if now != self.seen {
            self.seen = now;
            self.idle_since = std::time::Instant::now();
            if self.held.is_none() {
                match CpuLatencyHold::acquire() {
                    Ok(h) => {
                        self.held = Some(h);
                        if !self.logged {
                            self.logged = true;
                            f.log_event(
                                EventSource::Emulator,
                                EventKind::Note,
                                "CPU idle-exit latency held at 0 us while the lab carries \
                                 traffic (let go after 1 s without)",
                                None,
                            );
                        }
                    }
                    Err(e) => {
                        self.failed = true;
                        let text = format!("CPU latency hold not available: {e}");
                        f.log_event(EventSource::Emulator, EventKind::Note, &text, None);
                    }
                }
            }
        } else if self.held.is_some() && self.idle_since.elapsed() >= HOLD_IDLE {
            self.held = None;
        }
    }
}

fn run_schedule(shared: Arc<Fabric>, schedule: Schedule) {
    let start = shared.clock.now_ns();
    let generation = shared.schedules.load(Ordering::Acquire);
    let stopped = || {
        shared.stop.load(Ordering::Relaxed)
            || shared.schedules.load(Ordering::Acquire) != generation
    };
    for ev in schedule.events {
        loop {
            if stopped() {
                return;
            }
            let now = shared.clock.now_ns();
            let due = start + ev.at_ns;
            if now >= due {
                break;
            }
            std::thread::sleep(Duration::from_nanos((due - now).min(50_000_000)));
        }
        if let Err(e) = shared.apply(&ev.change, EventSource::Schedule, &ev.text) {
            let text = format!("{}: {e}", ev.text);
            shared.log_event(EventSource::Schedule, EventKind::Note, &text, None);
        }
    }
}

fn reply(stream: &mut UnixStream, r: &Response) {
    if let Ok(s) = serde_json::to_string(r) {
        let _ = writeln!(stream, "{s}");
    }
}

fn serve(shared: &Arc<Fabric>, stream: UnixStream) {
    let mut line = String::new();
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut w = stream;
    let resp = match serde_json::from_str::<Request>(&line) {
        Err(e) => Response::failed(format!("bad request: {e}")),
        Ok(Request::Stats) => Response {
            stats: Some(shared.stats()),
            ..Response::done()
        },
        Ok(Request::Set { change }) => {
            let text = change.to_flags();
            match shared.apply(&change, EventSource::Set, &text) {
                Ok(()) => Response::done(),
                Err(e) => Response::failed(e),
            }
        }
        Ok(Request::Schedule { schedule }) => {
            let text = format!("schedule of {} events started", schedule.events.len());
            shared.log_event(EventSource::Set, EventKind::Note, &text, None);
            let sh = shared.clone();
            std::thread::spawn(move || run_schedule(sh, schedule));
            Response::done()
        }
        Ok(Request::StopSchedules) => {
            shared.schedules.fetch_add(1, Ordering::AcqRel);
            shared.log_event(EventSource::Set, EventKind::Note, "schedules stopped", None);
            Response::done()
        }
        Ok(Request::Capture { link, path }) => {
            capture(shared, &link, path, &mut reader, &mut w);
            return;
        }
    };
    reply(&mut w, &resp);
}

/// Runs one capture for a client: started, then stopped when the client writes a line or
/// hangs up; the records are written by this thread while the client waits.
fn capture(
    shared: &Arc<Fabric>,
    link: &str,
    path: PathBuf,
    reader: &mut BufReader<UnixStream>,
    w: &mut UnixStream,
) {
    let mut file = match std::fs::File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            return reply(
                w,
                &Response::failed(format!("creating {}: {e}", path.display())),
            );
        }
    };
    let sink = match shared.capture_start(link, path.clone()) {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return reply(w, &Response::failed(e));
        }
    };
    reply(w, &Response::done());
    // The client's line (or hang-up) ends the capture; meanwhile flush every 20 ms.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let waiter = {
        let stop = stop.clone();
        let Ok(s) = reader.get_ref().try_clone() else {
            return;
        };
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(s).read_line(&mut line);
            stop.store(true, Ordering::Relaxed);
        })
    };
    let mut spare = Vec::with_capacity(4 << 20);
    let mut written = 0u64;
    let mut failed: Option<String> = None;
    let mut flush = |bytes: &[u8], failed: &mut Option<String>| {
        if failed.is_none() {
            match file.write_all(bytes) {
                Ok(()) => written += bytes.len() as u64,
                Err(e) => *failed = Some(format!("writing {}: {e}", path.display())),
            }
        }
    };
    while !stop.load(Ordering::Relaxed) && !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        let full = sink.take(std::mem::take(&mut spare));
        flush(&full, &mut failed);
        spare = full;
    }
    let resp = match shared.capture_stop() {
        Some((sink, mut summary, tail)) => {
            let last = sink.take(Vec::new());
            flush(&last, &mut failed);
            flush(&tail, &mut failed);
            summary.file_bytes = written;
            match failed {
                Some(e) => Response::failed(e),
                None => Response {
                    capture: Some(summary),
                    ..Response::done()
                },
            }
        }
        None => Response::failed("the capture was already stopped"),
    };
    reply(w, &resp);
    let _ = w.shutdown(std::net::Shutdown::Both);
    let _ = waiter.join();
}

/// How many forwarder threads a lab of `sites` sites runs: one per two sites, so that a
/// request and its answer between the two are carried by one thread — the answer is made
/// while that thread writes the request, and it reads it next without a wake-up in between
/// (a sleeping thread's wake-up is most of the latency the emulator adds); at most one per
/// two CPUs, since the programs in the sites need the others; at least one.
fn forwarder_threads(sites: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
    sites.div_ceil(2).min(cpus / 2).max(1)
}

/// The source sites of each of `threads` forwarders: consecutive sites together, as
/// evenly as they divide.
fn forwarder_groups(sites: usize, threads: usize) -> Vec<Vec<usize>> {
    let threads = threads.clamp(1, sites.max(1));
    (0..threads)
        .map(|t| (t * sites / threads..(t + 1) * sites / threads).collect())
        .collect()
}

/// Runs the emulator of lab `name` until SIGTERM/SIGINT (the caller installs the handler
/// that sets [`nsperf_core::signal::interrupted`]).
pub fn run(name: &str) -> Result<()> {
    let state = LabState::load(name)?;
    let init: InitialConfig = serde_json::from_slice(
        &std::fs::read(initial_path(name))
            .map_err(|e| LabError::io("reading the lab's link configuration", e))?,
    )
    .map_err(|e| LabError::Usage(format!("bad link configuration: {e}")))?;
    let sites: Vec<String> = state.sites.iter().map(|s| s.name.clone()).collect();
    let layout = Layout::new(&init.topology, &sites)?;
    if init.params.len() != layout.directions.len() {
        return Err(LabError::Usage(
            "link configuration does not match the sites".into(),
        ));
    }
    let n = sites.len();
    let mut tuns = Vec::new();
    for site in &state.sites {
        let tun = netns::run_in(&site.netns, || {
            let t = Tun::create(LINK_DEV)?;
            let _ = std::fs::write(
                format!("/proc/sys/net/ipv6/conf/{LINK_DEV}/disable_ipv6"),
                "1",
            );
            Ok(t)
        })?;
        let addr = format!("{}/24", site.addr);
        let mtu = state.mtu.to_string();
        netns::ip(&["-n", &site.netns, "addr", "add", &addr, "dev", LINK_DEV])?;
        // A deep device queue in front of the forwarder absorbs scheduling hiccups of the
        // forwarder thread; the emulated bottleneck queue is the model's, not this one.
        netns::ip(&[
            "-n",
            &site.netns,
            "link",
            "set",
            LINK_DEV,
            "mtu",
            &mtu,
            "txqueuelen",
            "4000",
            "up",
        ])?;
        tuns.push(tun);
    }
    let shared = Arc::new(Fabric::new(
        layout,
        init.params,
        init.memory_bytes,
        lab_dir(name),
    ));
    shared.log_event(
        EventSource::Emulator,
        EventKind::Note,
        "emulator started",
        None,
    );
    let tuns = Arc::new(tuns);
    let mut threads = Vec::new();
    let seed = init
        .seed
        .unwrap_or_else(|| crate::rng::Rng::from_entropy().next_u64());
    for (t, srcs) in forwarder_groups(n, forwarder_threads(n))
        .into_iter()
        .enumerate()
    {
        let name = srcs
            .iter()
            .map(|&s| shared.layout.sites[s].as_str())
            .collect::<Vec<_>>()
            .join("+");
        let f = Forwarder::new(srcs, shared.clone(), tuns.clone(), seed ^ t as u64);
        threads.push(
            std::thread::Builder::new()
                .name(format!("fwd-{name}"))
                .spawn(move || f.run())
                .map_err(|e| LabError::io("starting a forwarder thread", e))?,
        );
    }
    // Bump once so every forwarder applies the offload policy of the initial parameters.
    shared.generation.fetch_add(1, Ordering::AcqRel);
    let sock = socket_path(name);
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock)
        .map_err(|e| LabError::io(format!("binding {}", sock.display()), e))?;
    {
        let sh = shared.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let sh = sh.clone();
                std::thread::spawn(move || serve(&sh, stream));
            }
        });
    }
    {
        let sh = shared.clone();
        std::thread::spawn(move || {
            while !sh.stop.load(Ordering::Relaxed) {
                sh.sample();
                std::thread::sleep(SAMPLE_INTERVAL);
            }
        });
    }
    if let Some(s) = init.schedule {
        let sh = shared.clone();
        let text = format!("schedule of {} events started", s.events.len());
        sh.log_event(EventSource::Schedule, EventKind::Note, &text, None);
        std::thread::spawn(move || run_schedule(sh, s));
    }
    write_atomic(&ready_path(name), b"ready\n")?;
    let mut hold = LatencyHold::new(!init.allow_deep_idle);
    while !nsperf_core::signal::interrupted() {
        std::thread::sleep(Duration::from_millis(50));
        hold.update(&shared);
    }
    shared.stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let _ = std::fs::remove_file(&sock);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::forwarder_groups;

    #[test]
    fn forwarder_groups_cover_every_site_once() {
        assert_eq!(forwarder_groups(2, 1), vec![vec![0, 1]]);
        assert_eq!(
            forwarder_groups(5, 3),
            vec![vec![0], vec![1, 2], vec![3, 4]]
        );
        assert_eq!(forwarder_groups(5, 2), vec![vec![0, 1], vec![2, 3, 4]]);
        assert_eq!(forwarder_groups(3, 9), vec![vec![0], vec![1], vec![2]]);
        for (n, t) in [(1, 1), (7, 3), (64, 4), (2, 0)] {
            let all: Vec<usize> = forwarder_groups(n, t).into_iter().flatten().collect();
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "{n} sites, {t} threads");
        }
    }
}
