//! The emulator process of one lab (started by `lab up`, kept in the background): creates
//! the sites' TUN devices, runs one [`Forwarder`] per site, applies `lab set` requests and
//! the fault schedule, logs every change with its time, samples queue occupancy, and answers
//! `lab stats` over a Unix socket in the lab's state directory.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nsperf_core::{Clock, MonotonicClock};
use serde::{Deserialize, Serialize};

use crate::config::{LinkChange, LinkParams};
use crate::error::{LabError, Result};
use crate::forwarder::Forwarder;
use crate::model::DirectionCounters;
use crate::netns;
use crate::schedule::Schedule;
use crate::state::{LabState, lab_dir, write_atomic};
use crate::tun::Tun;

/// Name of the link device inside every site's namespace.
pub const LINK_DEV: &str = "wan0";
/// Interval of the queue-occupancy samples.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Samples kept per direction (one minute).
pub const SAMPLES_KEPT: usize = 600;

/// What a forwarder publishes about one direction.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectionState {
    /// Counters so far.
    pub counters: DirectionCounters,
    /// Packets at the bottleneck now.
    pub queue_packets: u64,
    /// Bytes at the bottleneck now.
    pub queue_bytes: u64,
}

/// State shared by the emulator's threads.
pub struct Shared {
    /// Site names, index = site number.
    pub sites: Vec<String>,
    /// Parameters per direction, index `src * n + dst`.
    pub params: Mutex<Vec<LinkParams>>,
    /// Bumped on every change of `params`.
    pub generation: AtomicU64,
    /// Published state per direction, index `src * n + dst`.
    pub directions: Vec<Mutex<DirectionState>>,
    /// Packets per source site that had no destination in the lab (IPv6, broadcast, …).
    pub unroutable: Vec<AtomicU64>,
    /// Failed writes per source site.
    pub write_errors: Vec<AtomicU64>,
    /// Set to stop every thread.
    pub stop: AtomicBool,
    /// The clock of the whole emulator.
    pub clock: MonotonicClock,
    events: Mutex<Vec<EventRecord>>,
    samples: Mutex<VecDeque<QueueSample>>,
    log_path: PathBuf,
}

/// One logged change of the link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Seconds since the emulator started.
    pub t_s: f64,
    /// `schedule` or `set`.
    pub source: String,
    /// What changed, as written.
    pub text: String,
}

/// Queue occupancy of every direction at one time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueSample {
    /// Seconds since the emulator started.
    pub t_s: f64,
    /// Packets queued per direction, in the order of [`LabStats::directions`].
    pub queue_packets: Vec<u64>,
    /// Bytes queued per direction.
    pub queue_bytes: Vec<u64>,
}

/// Statistics of one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// Source site.
    pub from: String,
    /// Destination site.
    pub to: String,
    /// Current parameters.
    pub params: LinkParams,
    /// Counters so far.
    pub counters: DirectionCounters,
    /// Packets at the bottleneck now.
    pub queue_packets: u64,
    /// Bytes at the bottleneck now.
    pub queue_bytes: u64,
}

/// Everything `lab stats` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabStats {
    /// Seconds since the emulator started.
    pub uptime_s: f64,
    /// Every direction.
    pub directions: Vec<DirectionStats>,
    /// Queue occupancy over the last minute, every 100 ms.
    pub queue_series: Vec<QueueSample>,
    /// Changes applied, with their times.
    pub events: Vec<EventRecord>,
    /// Packets that had no destination site (IPv6, broadcast), all sites together.
    pub unroutable_packets: u64,
    /// Writes to a TUN device that failed.
    pub write_errors: u64,
}

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
    /// Report statistics.
    Stats,
}

/// The answer (one JSON line).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request was carried out.
    pub ok: bool,
    /// Why not.
    pub error: Option<String>,
    /// For `stats`.
    pub stats: Option<LabStats>,
}

/// The initial configuration `lab up` leaves for the emulator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitialConfig {
    /// Parameters per direction, index `src * n + dst`.
    pub params: Vec<LinkParams>,
    /// A schedule to start at once.
    pub schedule: Option<Schedule>,
    /// Do not hold the CPUs out of deep idle states (see [`CpuLatencyHold`]).
    #[serde(default)]
    pub allow_deep_idle: bool,
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

impl Shared {
    fn log_event(&self, source: &str, text: &str) {
        let t_s = self.clock.now_ns() as f64 / 1e9;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
        {
            let _ = writeln!(f, "{t_s:.6} {source} {text}");
        }
        if let Ok(mut e) = self.events.lock() {
            e.push(EventRecord {
                t_s,
                source: source.to_string(),
                text: text.to_string(),
            });
        }
    }

    /// Applies a change to the selected directions; errors on unknown site names.
    pub fn apply(&self, change: &LinkChange, source: &str, text: &str) -> Result<()> {
        for s in [&change.from, &change.to].into_iter().flatten() {
            if !self.sites.contains(s) {
                return Err(LabError::Usage(format!("no site named '{s}' in this lab")));
            }
        }
        let n = self.sites.len();
        {
            let mut p = self
                .params
                .lock()
                .map_err(|_| LabError::Usage("emulator state poisoned".into()))?;
            for a in 0..n {
                for b in 0..n {
                    if a != b && change.selects(&self.sites[a], &self.sites[b]) {
                        change.apply(&mut p[a * n + b]);
                    }
                }
            }
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.log_event(source, text);
        Ok(())
    }

    /// The statistics now.
    pub fn stats(&self) -> LabStats {
        let n = self.sites.len();
        let params = self.params.lock().map(|p| p.clone()).unwrap_or_default();
        let mut directions = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if a == b {
                    continue;
                }
                let s = self.directions[a * n + b]
                    .lock()
                    .map(|s| *s)
                    .unwrap_or_default();
                directions.push(DirectionStats {
                    from: self.sites[a].clone(),
                    to: self.sites[b].clone(),
                    params: params[a * n + b],
                    counters: s.counters,
                    queue_packets: s.queue_packets,
                    queue_bytes: s.queue_bytes,
                });
            }
        }
        LabStats {
            uptime_s: self.clock.now_ns() as f64 / 1e9,
            directions,
            queue_series: self
                .samples
                .lock()
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default(),
            events: self.events.lock().map(|e| e.clone()).unwrap_or_default(),
            unroutable_packets: self
                .unroutable
                .iter()
                .map(|u| u.load(Ordering::Relaxed))
                .sum(),
            write_errors: self
                .write_errors
                .iter()
                .map(|u| u.load(Ordering::Relaxed))
                .sum(),
        }
    }

    fn sample(&self) {
        let n = self.sites.len();
        let mut qp = Vec::new();
        let mut qb = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    let s = self.directions[a * n + b]
                        .lock()
                        .map(|s| *s)
                        .unwrap_or_default();
                    qp.push(s.queue_packets);
                    qb.push(s.queue_bytes);
                }
            }
        }
        if let Ok(mut s) = self.samples.lock() {
            if s.len() >= SAMPLES_KEPT {
                s.pop_front();
            }
            s.push_back(QueueSample {
                t_s: self.clock.now_ns() as f64 / 1e9,
                queue_packets: qp,
                queue_bytes: qb,
            });
        }
    }
}

fn run_schedule(shared: Arc<Shared>, schedule: Schedule) {
    let start = shared.clock.now_ns();
    for ev in schedule.events {
        loop {
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
            let now = shared.clock.now_ns();
            let due = start + ev.at_ns;
            if now >= due {
                break;
            }
            std::thread::sleep(Duration::from_nanos((due - now).min(50_000_000)));
        }
        if let Err(e) = shared.apply(&ev.change, "schedule", &ev.text) {
            shared.log_event("schedule", &format!("{}: {e}", ev.text));
        }
    }
}

fn serve(shared: &Arc<Shared>, stream: UnixStream) {
    let mut line = String::new();
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let resp = match serde_json::from_str::<Request>(&line) {
        Err(e) => Response {
            ok: false,
            error: Some(format!("bad request: {e}")),
            stats: None,
        },
        Ok(Request::Stats) => Response {
            ok: true,
            error: None,
            stats: Some(shared.stats()),
        },
        Ok(Request::Set { change }) => {
            let text = change.to_flags();
            match shared.apply(&change, "set", &text) {
                Ok(()) => Response {
                    ok: true,
                    error: None,
                    stats: None,
                },
                Err(e) => Response {
                    ok: false,
                    error: Some(e.to_string()),
                    stats: None,
                },
            }
        }
        Ok(Request::Schedule { schedule }) => {
            shared.log_event(
                "set",
                &format!("schedule of {} events started", schedule.events.len()),
            );
            let sh = shared.clone();
            std::thread::spawn(move || run_schedule(sh, schedule));
            Response {
                ok: true,
                error: None,
                stats: None,
            }
        }
    };
    let mut w = stream;
    if let Ok(s) = serde_json::to_string(&resp) {
        let _ = writeln!(w, "{s}");
    }
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
    let n = state.sites.len();
    if init.params.len() != n * n {
        return Err(LabError::Usage(
            "link configuration does not match the sites".into(),
        ));
    }
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
    let shared = Arc::new(Shared {
        sites: state.sites.iter().map(|s| s.name.clone()).collect(),
        params: Mutex::new(init.params),
        generation: AtomicU64::new(0),
        directions: (0..n * n)
            .map(|_| Mutex::new(DirectionState::default()))
            .collect(),
        unroutable: (0..n).map(|_| AtomicU64::new(0)).collect(),
        write_errors: (0..n).map(|_| AtomicU64::new(0)).collect(),
        stop: AtomicBool::new(false),
        clock: MonotonicClock::new(),
        events: Mutex::new(Vec::new()),
        samples: Mutex::new(VecDeque::with_capacity(SAMPLES_KEPT)),
        log_path: lab_dir(name).join("events.log"),
    });
    shared.log_event("set", "emulator started");
    let _latency_hold = if init.allow_deep_idle {
        None
    } else {
        match CpuLatencyHold::acquire() {
            Ok(h) => {
                shared.log_event(
                    "set",
                    "CPU idle-exit latency held at 0 us while the lab is up",
                );
                Some(h)
            }
            Err(e) => {
                shared.log_event("set", &format!("CPU latency hold not available: {e}"));
                None
            }
        }
    };
    let tuns = Arc::new(tuns);
    let mut threads = Vec::new();
    let seed = crate::rng::Rng::from_entropy().next_u64();
    for src in 0..n {
        let f = Forwarder::new(src, shared.clone(), tuns.clone(), seed ^ src as u64);
        threads.push(
            std::thread::Builder::new()
                .name(format!("fwd-{}", shared.sites[src]))
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
                serve(&sh, stream);
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
        sh.log_event(
            "schedule",
            &format!("schedule of {} events started", s.events.len()),
        );
        std::thread::spawn(move || run_schedule(sh, s));
    }
    write_atomic(&ready_path(name), b"ready\n")?;
    while !nsperf_core::signal::interrupted() {
        std::thread::sleep(Duration::from_millis(50));
    }
    shared.stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let _ = std::fs::remove_file(&sock);
    Ok(())
}
