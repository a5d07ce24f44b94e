//! The agent's shell: connections (standard input and output, or accepted TCP connections)
//! around [`AgentSession`], and the step runner that starts each step as an `nsperf step`
//! child in its own process group (through [`crate::process_group`], as the executor does).
//!
//! One session at a time per connection; one thread reads the connection and one loop per
//! session applies every event (a message, a step's output or end, the connection's end) to
//! the session in order. When a coordinator vanishes (EOF, a broken connection, no message
//! for [`SILENT_COORDINATOR`] while no step runs), its steps are killed with their process
//! groups and the agent goes on serving others.

use std::io::{BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nsperf_core::host::HostFacts;

use super::proto::{FrameDecoder, ProcessUse, StepEnd, ToAgent, encode};
use super::session::{AgentAction, AgentPolicy, AgentSession, StepSignal};
use crate::process_group::{self, CpuTicker};
use crate::step::{StepReport, StepRequest};

/// A session whose coordinator says nothing for this long while no step runs is ended.
pub const SILENT_COORDINATOR: Duration = Duration::from_secs(600);
/// Sessions served at once by a listening agent.
pub const MAX_SESSIONS: usize = 16;

/// What happens in a session, in the order the session sees it.
#[derive(Debug)]
pub enum Event {
    /// A message from the coordinator.
    Msg(ToAgent),
    /// The connection ended (EOF, an error, a malformed frame).
    Closed(String),
    /// A step's process started.
    Started(u64),
    /// A step printed a report.
    Output(u64, StepReport),
    /// A step ended.
    Ended(u64, StepEnd),
}

/// A step being run: the runner's handle to signal it.
pub trait RunningStep: Send {
    /// Sends the signal to the step (and whatever it started).
    fn signal(&mut self, signal: StepSignal);
    /// Starts a held step (its request had `hold`) at `start_at_unix_ns` (this host's clock).
    fn go(&mut self, start_at_unix_ns: u64);
}

/// Starts steps. The real one runs `nsperf step` children; tests and the scale simulation use
/// a mock.
pub trait StepRunner: Send + Sync {
    /// Starts step `id`; its `Started`, `Output` and `Ended` events go to `events` (exactly
    /// one `Ended`, also when it cannot start).
    fn start(&self, id: u64, request: StepRequest, events: Sender<Event>) -> Box<dyn RunningStep>;
}

/// Runs each step as `EXE step` in its own process group, the request on its standard input.
#[derive(Debug, Clone)]
pub struct ChildStepRunner {
    exe: PathBuf,
}

impl ChildStepRunner {
    /// Steps run `exe step`.
    pub fn new(exe: PathBuf) -> Self {
        ChildStepRunner { exe }
    }
}

struct ChildStep {
    pid: Option<u32>,
    /// A held step's standard input, for its go.
    stdin: Arc<Mutex<Option<std::process::ChildStdin>>>,
}

impl RunningStep for ChildStep {
    fn go(&mut self, start_at_unix_ns: u64) {
        let Ok(mut held) = self.stdin.lock() else {
            return;
        };
        if let Some(mut stdin) = held.take() {
            let go = crate::step::StepGo { start_at_unix_ns };
            let mut line = serde_json::to_vec(&go).unwrap_or_default();
            line.push(b'\n');
            // A step that died before its go shows in its end, not here.
            let _ = stdin.write_all(&line);
        }
    }

    fn signal(&mut self, signal: StepSignal) {
        if let Some(pid) = self.pid {
            let sig = match signal {
                StepSignal::Stop => libc::SIGINT,
                StepSignal::Kill => libc::SIGKILL,
            };
            process_group::kill_group(pid, sig);
        }
    }
}

impl StepRunner for ChildStepRunner {
    fn start(&self, id: u64, request: StepRequest, events: Sender<Event>) -> Box<dyn RunningStep> {
        let mut input = serde_json::to_vec(&request).unwrap_or_default();
        input.push(b'\n');
        let hold = request.hold;
        let held: Arc<Mutex<Option<std::process::ChildStdin>>> = Arc::default();
        let mut cmd = Command::new(&self.exe);
        cmd.arg("step");
        let (nic0, disk0) = (
            nsperf_core::nic::read_nic_counters(),
            nsperf_core::disk::read_disk_counters(),
        );
        // Tied: a step dies with an agent that is killed (no step outlives its agent).
        let mut child = match process_group::spawn(cmd, true, true) {
            Ok(c) => c,
            Err(e) => {
                let _ = events.send(Event::Ended(
                    id,
                    StepEnd::refused(format!("cannot start {}: {e}", self.exe.display())),
                ));
                return Box::new(ChildStep {
                    pid: None,
                    stdin: held,
                });
            }
        };
        let pid = child.id();
        let _ = events.send(Event::Started(id));
        if let Some(mut stdin) = child.stdin.take() {
            let keep = held.clone();
            // The request, then (held) the pipe kept open for the go.
            std::thread::spawn(move || {
                let Ok(mut slot) = keep.lock() else { return };
                if stdin.write_all(&input).is_ok() && hold {
                    *slot = Some(stdin);
                }
            });
        }
        let stderr = child
            .stderr
            .take()
            .map(|e| process_group::drain(e, 1 << 20));
        let stdout = child.stdout.take();
        let out_events = events.clone();
        let lines = std::thread::spawn(move || {
            let Some(out) = stdout else { return };
            // Reports one after another, each as soon as it is whole (a server's `listening`
            // long before its `served`), pretty-printed or not.
            let reports = serde_json::Deserializer::from_reader(BufReader::new(out))
                .into_iter::<StepReport>();
            for r in reports {
                let Ok(r) = r else { break };
                let _ = out_events.send(Event::Output(id, r));
            }
        });
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut sampler = CpuTicker::new("agent", t0);
            let mut cpu = Vec::new();
            let (status, process) = loop {
                match reap(pid) {
                    Reaped::Exited(code, used) => break (code, used),
                    Reaped::Running => {}
                    Reaped::Gone => break (None, ProcessUse::default()),
                }
                sampler.tick(&mut cpu);
                std::thread::sleep(Duration::from_millis(20));
            };
            let elapsed_ns = t0.elapsed().as_nanos() as u64;
            // Whatever the step left in its group goes with it.
            process_group::kill_group(pid, libc::SIGKILL);
            let _ = lines.join();
            // Not UTF-8: no line to quote, as before the shared drain.
            let err = stderr
                .and_then(|h| h.join().ok())
                .and_then(|v| String::from_utf8(v).ok())
                .unwrap_or_default();
            // Reaped above: the std handle must not wait for it again.
            drop(child);
            let exit_code = status;
            let error = if exit_code == Some(0) {
                String::new()
            } else {
                let last = process_group::last_line(&err);
                match (exit_code, last.is_empty()) {
                    (Some(c), true) => format!("exit {c}"),
                    (Some(_), false) => last.chars().take(300).collect(),
                    (None, _) => "killed by a signal".into(),
                }
            };
            let _ = events.send(Event::Ended(
                id,
                StepEnd {
                    exit_code,
                    error,
                    elapsed_ns,
                    cpu,
                    process,
                    nic: grown_nic(&nic0),
                    disk: grown_disk(&disk0),
                },
            ));
        });
        Box::new(ChildStep {
            pid: Some(pid),
            stdin: held,
        })
    }
}

enum Reaped {
    Running,
    /// Its exit code (`None` when a signal ended it) and what it used.
    Exited(Option<i32>, ProcessUse),
    Gone,
}

/// Reaps child `pid` if it has ended, with its resource use (`wait4`).
fn reap(pid: u32) -> Reaped {
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills both for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut ru) };
    match r {
        0 => Reaped::Running,
        r if r < 0 => Reaped::Gone,
        _ => {
            let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            Reaped::Exited(
                code,
                ProcessUse {
                    cpu_ns: ns(ru.ru_utime) + ns(ru.ru_stime),
                    max_rss_kib: ru.ru_maxrss.max(0) as u64,
                },
            )
        }
    }
}

fn grown_nic(before: &[nsperf_core::nic::NicCounters]) -> Vec<nsperf_core::nic::NicCounters> {
    nsperf_core::nic::read_nic_counters()
        .iter()
        .filter(|c| c.name != "lo")
        .filter_map(|c| Some(c.since(before.iter().find(|b| b.name == c.name)?)))
        .collect()
}

fn grown_disk(before: &[nsperf_core::disk::DiskCounters]) -> Vec<nsperf_core::disk::DiskCounters> {
    nsperf_core::disk::read_disk_counters()
        .iter()
        .filter_map(|c| Some(c.since(before.iter().find(|b| b.name == c.name)?)))
        .filter(|d| d.read_bytes + d.write_bytes > 0)
        .collect()
}

/// Reads frames from `reader` into `events` until it ends.
fn read_frames(mut reader: impl Read, events: Sender<Event>) {
    let mut dec = FrameDecoder::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => {
                let _ = events.send(Event::Closed("the coordinator hung up".into()));
                return;
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = events.send(Event::Closed(format!("connection error: {e}")));
                return;
            }
        };
        dec.push(&buf[..n]);
        loop {
            match dec.next::<ToAgent>() {
                Ok(Some(m)) => {
                    if events.send(Event::Msg(m)).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = events.send(Event::Closed(e.to_string()));
                    return;
                }
            }
        }
    }
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEnd {
    /// Why, one line.
    pub reason: String,
    /// Steps that were still running and were killed.
    pub killed: usize,
}

/// Serves one coordinator over `reader`/`writer` until it says bye or vanishes. Every step it
/// started has ended when this returns.
pub fn serve_session(
    reader: impl Read + Send + 'static,
    mut writer: impl Write,
    policy: AgentPolicy,
    runner: &dyn StepRunner,
    host: HostFacts,
) -> SessionEnd {
    let nonce = match nsperf_core::psk::os_random::<32>() {
        Ok(n) => n,
        Err(e) => {
            return SessionEnd {
                reason: e,
                killed: 0,
            };
        }
    };
    let (tx, rx) = channel();
    let reader_tx = tx.clone();
    std::thread::spawn(move || read_frames(reader, reader_tx));
    let mut session = AgentSession::new(policy, nonce, host);
    let mut steps: Vec<(u64, Box<dyn RunningStep>)> = Vec::new();
    let mut out = Vec::new();
    let mut reason = String::from("closed");
    let mut killed = 0;
    let mut last_msg = Instant::now();
    let mut closing = false;
    loop {
        let ev = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(ev) => ev,
            Err(RecvTimeoutError::Timeout) => {
                if session.running() == 0 && last_msg.elapsed() > SILENT_COORDINATOR {
                    Event::Closed("the coordinator fell silent".into())
                } else {
                    continue;
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let actions = match ev {
            Event::Msg(m) => {
                last_msg = Instant::now();
                session.on_msg(m, nsperf_core::clock::unix_time_ns())
            }
            Event::Closed(why) => {
                if !closing {
                    reason = why;
                }
                killed += session.running();
                session.lost()
            }
            Event::Started(id) => session.step_started(id),
            Event::Output(id, r) => session.step_output(id, r),
            Event::Ended(id, end) => {
                steps.retain(|(i, _)| *i != id);
                session.step_ended(id, end)
            }
        };
        for a in actions {
            match a {
                AgentAction::Send(m) => {
                    out.clear();
                    encode(&m, &mut out);
                    if writer.write_all(&out).and_then(|_| writer.flush()).is_err() {
                        let _ = tx.send(Event::Closed("cannot write to the coordinator".into()));
                    }
                }
                AgentAction::Start { id, request } => {
                    let h = runner.start(id, *request, tx.clone());
                    steps.push((id, h));
                }
                AgentAction::Go {
                    id,
                    start_at_unix_ns,
                } => {
                    if let Some((_, h)) = steps.iter_mut().find(|(i, _)| *i == id) {
                        h.go(start_at_unix_ns);
                    }
                }
                AgentAction::Signal { id, signal } => {
                    if let Some((_, h)) = steps.iter_mut().find(|(i, _)| *i == id) {
                        h.signal(signal);
                    }
                }
                AgentAction::KillAll => {
                    for (_, h) in &mut steps {
                        h.signal(StepSignal::Kill);
                    }
                }
                AgentAction::Close => {
                    closing = true;
                    reason = "the coordinator said bye".into();
                }
            }
        }
        if session.closed() && steps.is_empty() {
            break;
        }
        if session.closed() {
            // Wait (bounded) for the killed steps to be reaped, so none outlives the session.
            wait_for_ends(&rx, &mut steps, Duration::from_secs(5));
            break;
        }
    }
    SessionEnd { reason, killed }
}

fn wait_for_ends(
    rx: &Receiver<Event>,
    steps: &mut Vec<(u64, Box<dyn RunningStep>)>,
    max: Duration,
) {
    let t0 = Instant::now();
    while !steps.is_empty() && t0.elapsed() < max {
        if let Ok(Event::Ended(id, _)) = rx.recv_timeout(Duration::from_millis(50)) {
            steps.retain(|(i, _)| *i != id);
        }
    }
}

/// Serves coordinators on `listener`, each connection its own session, at most
/// [`MAX_SESSIONS`] at once, until Ctrl-C. `log` gets one line per session.
pub fn serve_listener(
    listener: TcpListener,
    policy: AgentPolicy,
    runner: Arc<dyn StepRunner>,
    log: Arc<dyn Fn(&str) + Send + Sync>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let live = Arc::new(AtomicUsize::new(0));
    let host = Arc::new(Mutex::new(HostFacts::collect()));
    loop {
        if nsperf_core::signal::interrupted() {
            return Ok(());
        }
        let (sock, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) => {
                log(&format!("accept failed: {e}"));
                std::thread::sleep(Duration::from_millis(500));
                continue;
            }
        };
        if live.load(Ordering::Acquire) >= MAX_SESSIONS {
            log(&format!(
                "{peer}: refused: {MAX_SESSIONS} sessions already open"
            ));
            continue;
        }
        let _ = sock.set_nonblocking(false);
        let _ = sock.set_nodelay(true);
        let Ok(reader) = sock.try_clone() else {
            continue;
        };
        live.fetch_add(1, Ordering::AcqRel);
        let (policy, runner, log, live) =
            (policy.clone(), runner.clone(), log.clone(), live.clone());
        let facts = host.lock().map(|h| h.clone()).unwrap_or_default();
        std::thread::spawn(move || {
            log(&format!("{peer}: session opened"));
            let end = serve_session(reader, sock, policy, &*runner, facts);
            log(&format!(
                "{peer}: session ended: {}{}",
                end.reason,
                if end.killed > 0 {
                    format!(" ({} running step(s) killed)", end.killed)
                } else {
                    String::new()
                }
            ));
            live.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// A mock runner: every step starts at its start time (at once without one) and ends after
/// `delay` with exit 0; a server step first reports listening on `127.0.0.1:5201`; a held
/// step reports ready at once and starts at its go. For tests and the scale simulation.
#[derive(Debug, Clone, Default)]
pub struct MockStepRunner {
    /// How long each step takes.
    pub delay: Duration,
}

struct MockStep {
    /// A held step: its id, its end, where to send it once started.
    held: Option<(u64, StepEnd, Sender<Event>)>,
    delay: Duration,
}

impl RunningStep for MockStep {
    fn signal(&mut self, _: StepSignal) {}
    fn go(&mut self, start_at_unix_ns: u64) {
        if let Some((id, end, events)) = self.held.take() {
            mock_end(id, end, events, Some(start_at_unix_ns), self.delay);
        }
    }
}

/// Sends step `id`'s end after its start time (at once without one) and `delay`.
fn mock_end(id: u64, end: StepEnd, events: Sender<Event>, start_at: Option<u64>, delay: Duration) {
    let wait = start_at
        .map(|t| Duration::from_nanos(t.saturating_sub(nsperf_core::clock::unix_time_ns())))
        .unwrap_or_default()
        + delay;
    if wait.is_zero() {
        let _ = events.send(Event::Ended(id, end));
    } else {
        std::thread::spawn(move || {
            std::thread::sleep(wait);
            let _ = events.send(Event::Ended(id, end));
        });
    }
}

impl StepRunner for MockStepRunner {
    fn start(&self, id: u64, request: StepRequest, events: Sender<Event>) -> Box<dyn RunningStep> {
        let _ = events.send(Event::Started(id));
        if matches!(request.spec, crate::step::StepSpec::NetServer { .. }) {
            let _ = events.send(Event::Output(
                id,
                StepReport::Listening {
                    addr: "127.0.0.1:5201".parse().expect("literal address"),
                },
            ));
        }
        let end = StepEnd {
            exit_code: Some(0),
            elapsed_ns: self.delay.as_nanos() as u64,
            ..StepEnd::default()
        };
        if request.hold {
            let _ = events.send(Event::Output(id, StepReport::Ready));
            return Box::new(MockStep {
                held: Some((id, end, events)),
                delay: self.delay,
            });
        }
        // Like `nsperf step`, the step starts at its start time, not before.
        mock_end(id, end, events, request.start_at_unix_ns, self.delay);
        Box::new(MockStep {
            held: None,
            delay: self.delay,
        })
    }
}
