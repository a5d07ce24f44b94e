//! The coordinator's side: a [`Fleet`] of agent connections, each over any byte stream (a
//! TCP connection, the pipes of `ssh host nsperf agent --stdio`, an in-process pair for the
//! simulation). One reader thread per connection stamps each message with the coordinator's
//! clock as it arrives and hands it to one queue; everything else happens on the caller's
//! thread, in the order messages arrived.
//!
//! The fleet opens every session (hello, key, welcome), measures each agent's clock against
//! its own ([`ClockOffset`]), starts steps on many agents at one instant of the coordinator's
//! clock (each agent's start time converted to its own clock), and collects what each step
//! reported. An agent that vanishes fails its steps with [`HostFailure::Lost`]; the others go
//! on.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::Child;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use nsperf_core::host::HostFacts;

use super::clock::{ClockOffset, ClockSample};
use super::proto::{FrameDecoder, FromAgent, StepClass, StepEnd, ToAgent, encode};
use super::session::auth_answer;
use crate::step::{StepReport, StepRequest, StepSpec};

/// Clock probes per agent.
pub const CLOCK_PROBES: u32 = 8;

/// Why a host's part failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HostFailure {
    /// The agent could not be reached or launched.
    #[error("{host}: cannot reach the agent: {reason}")]
    Unreachable {
        /// Host name.
        host: String,
        /// Why.
        reason: String,
    },
    /// The agent refused the session (a wrong key, another version).
    #[error("{host}: the agent refused the session: {reason}")]
    Refused {
        /// Host name.
        host: String,
        /// Why.
        reason: String,
    },
    /// The connection to the agent was lost.
    #[error("{host}: agent lost: {reason}")]
    Lost {
        /// Host name.
        host: String,
        /// Why.
        reason: String,
    },
    /// No answer in time.
    #[error("{host}: no answer from the agent within {seconds:.0} s ({waiting_for})")]
    Timeout {
        /// Host name.
        host: String,
        /// Seconds waited.
        seconds: f64,
        /// What was awaited.
        waiting_for: String,
    },
    /// The step failed on the agent.
    #[error("{host}: {reason}")]
    Step {
        /// Host name.
        host: String,
        /// The step's exit code, when it had one.
        exit_code: Option<i32>,
        /// Its error line.
        reason: String,
    },
}

impl HostFailure {
    /// The exit-code class of the failure.
    pub fn class(&self) -> nsperf_core::Failure {
        use nsperf_core::Failure;
        match self {
            HostFailure::Unreachable { .. } => Failure::Connect,
            HostFailure::Refused { reason, .. } if reason.contains("authentication") => {
                Failure::Auth
            }
            HostFailure::Refused { .. } => Failure::Protocol,
            HostFailure::Lost { .. } | HostFailure::Timeout { .. } => Failure::PeerLost,
            HostFailure::Step { exit_code, .. } => exit_code
                .and_then(Failure::from_exit_code)
                .unwrap_or(Failure::Runtime),
        }
    }
}

/// A way to an agent: its byte streams, and the launching process to end with it.
pub struct AgentLink {
    /// Host name (as the plan calls it).
    pub name: String,
    /// Messages from the agent.
    pub reader: Box<dyn Read + Send>,
    /// Messages to the agent.
    pub writer: Box<dyn Write + Send>,
    /// The process carrying the streams (ssh, srun), killed when the fleet ends.
    pub process: Option<Child>,
    /// The key, when the agent asks for one.
    pub psk: Option<Vec<u8>>,
}

impl std::fmt::Debug for AgentLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLink")
            .field("name", &self.name)
            .finish()
    }
}

enum Inbound {
    Msg(FromAgent),
    Closed(String),
}

/// One agent as the coordinator sees it.
pub struct Agent {
    /// Host name.
    pub name: String,
    /// Its facts, from its welcome.
    pub host: HostFacts,
    /// What it runs.
    pub allow: Vec<StepClass>,
    /// Its clock against ours.
    pub clock: ClockOffset,
    writer: Box<dyn Write + Send>,
    process: Option<Child>,
    psk: Option<Vec<u8>>,
    open: bool,
    lost: Option<String>,
    probes: Vec<ClockSample>,
    probe_sent: HashMap<u32, u64>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.name)
            .field("clock", &self.clock)
            .field("lost", &self.lost)
            .finish()
    }
}

/// What one step on one agent gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepOutcome {
    /// Reports the step printed, in order (progress aside).
    pub reports: Vec<StepReport>,
    /// The latest progress the step streamed (once per interval while it runs).
    pub progress: Option<crate::step::StepProgress>,
    /// How it ended (`None` while it runs).
    pub end: Option<StepEnd>,
    /// The agent was lost while the step ran.
    pub lost: Option<String>,
}

/// A step started on an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StepId {
    /// Index of the agent in the fleet.
    pub agent: usize,
    /// The step's id on that connection.
    pub id: u64,
}

/// The coordinator's connections to its agents.
pub struct Fleet {
    agents: Vec<Agent>,
    rx: Receiver<(usize, u64, Inbound)>,
    tx: Sender<(usize, u64, Inbound)>,
    steps: HashMap<StepId, StepOutcome>,
    next_id: u64,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("agents", &self.agents.len())
            .finish()
    }
}

impl Default for Fleet {
    fn default() -> Self {
        Self::new()
    }
}

fn read_agent(index: usize, mut reader: Box<dyn Read + Send>, tx: Sender<(usize, u64, Inbound)>) {
    let mut dec = FrameDecoder::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => {
                let _ = tx.send((index, 0, Inbound::Closed("connection closed".into())));
                return;
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.send((index, 0, Inbound::Closed(e.to_string())));
                return;
            }
        };
        dec.push(&buf[..n]);
        loop {
            match dec.next::<FromAgent>() {
                Ok(Some(m)) => {
                    let at = nsperf_core::clock::unix_time_ns();
                    if tx.send((index, at, Inbound::Msg(m))).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.send((index, 0, Inbound::Closed(e.to_string())));
                    return;
                }
            }
        }
    }
}

impl Fleet {
    /// A fleet with no agents.
    pub fn new() -> Self {
        let (tx, rx) = channel();
        Fleet {
            agents: Vec::new(),
            rx,
            tx,
            steps: HashMap::new(),
            next_id: 1,
        }
    }

    /// The agents, in the order they were added.
    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }

    /// The index of the agent named `name` (the latest one: an agent started again, in a lab
    /// site rebuilt, takes the place of the one before).
    pub fn index(&self, name: &str) -> Option<usize> {
        self.agents.iter().rposition(|a| a.name == name)
    }

    /// Ends the sessions of agents `agents` (bye, then their launching processes after up to
    /// `grace`); they count as lost from then on.
    pub fn close_agents(&mut self, agents: &[usize], grace: Duration) {
        for &i in agents {
            self.send(i, &ToAgent::Bye);
        }
        let t0 = Instant::now();
        for &i in agents {
            if let Some(p) = self.agents[i].process.as_mut() {
                while t0.elapsed() < grace {
                    if let Ok(Some(_)) = p.try_wait() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = p.kill();
                let _ = p.wait();
            }
            self.agents[i].process = None;
            self.mark_lost(i, "session closed".into());
        }
    }

    /// Adds agents and opens their sessions (all at once), then measures their clocks; fails
    /// with the first host that cannot be reached, refuses, or does not answer within
    /// `timeout`.
    pub fn connect(&mut self, links: Vec<AgentLink>, timeout: Duration) -> Result<(), HostFailure> {
        let first = self.agents.len();
        for link in links {
            let index = self.agents.len();
            let tx = self.tx.clone();
            let reader = link.reader;
            std::thread::Builder::new()
                .name(format!("agent-{}", link.name))
                .stack_size(128 * 1024)
                .spawn(move || read_agent(index, reader, tx))
                .map_err(|e| HostFailure::Unreachable {
                    host: link.name.clone(),
                    reason: format!("cannot start a thread: {e}"),
                })?;
            self.agents.push(Agent {
                name: link.name,
                host: HostFacts::default(),
                allow: Vec::new(),
                clock: ClockOffset::default(),
                writer: link.writer,
                process: link.process,
                psk: link.psk,
                open: false,
                lost: None,
                probes: Vec::new(),
                probe_sent: HashMap::new(),
            });
        }
        let hello = ToAgent::Hello {
            software: env!("CARGO_PKG_VERSION").to_string(),
        };
        for i in first..self.agents.len() {
            self.send(i, &hello);
        }
        let deadline = Instant::now() + timeout;
        while let Some(i) = (first..self.agents.len()).find(|&i| !self.agents[i].open) {
            let a = &self.agents[i];
            if let Some(why) = &a.lost {
                return Err(HostFailure::Unreachable {
                    host: a.name.clone(),
                    reason: why.clone(),
                });
            }
            if !self.pump(deadline)? {
                return Err(self.timeout(i, timeout, "its welcome"));
            }
        }
        self.sync_clocks(first, deadline, timeout)
    }

    fn timeout(&self, i: usize, waited: Duration, what: &str) -> HostFailure {
        HostFailure::Timeout {
            host: self.agents[i].name.clone(),
            seconds: waited.as_secs_f64(),
            waiting_for: what.into(),
        }
    }

    /// Probes the clocks of agents `first..` in rounds (one probe in flight per agent).
    fn sync_clocks(
        &mut self,
        first: usize,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), HostFailure> {
        for seq in 0..CLOCK_PROBES {
            for i in first..self.agents.len() {
                let now = nsperf_core::clock::unix_time_ns();
                self.agents[i].probe_sent.insert(seq, now);
                self.send(i, &ToAgent::ClockProbe { seq });
            }
            while let Some(i) =
                (first..self.agents.len()).find(|&i| self.agents[i].probes.len() <= seq as usize)
            {
                if let Some(why) = &self.agents[i].lost {
                    return Err(HostFailure::Lost {
                        host: self.agents[i].name.clone(),
                        reason: why.clone(),
                    });
                }
                if !self.pump(deadline)? {
                    return Err(self.timeout(i, timeout, "its clock"));
                }
            }
        }
        for a in &mut self.agents[first..] {
            a.clock = ClockOffset::estimate(&a.probes).unwrap_or_default();
        }
        Ok(())
    }

    fn send(&mut self, i: usize, msg: &ToAgent) {
        let mut out = Vec::new();
        encode(msg, &mut out);
        let a = &mut self.agents[i];
        if a.lost.is_none()
            && let Err(e) = a.writer.write_all(&out).and_then(|_| a.writer.flush())
        {
            self.mark_lost(i, format!("cannot write: {e}"));
        }
    }

    fn mark_lost(&mut self, i: usize, why: String) {
        if self.agents[i].lost.is_none() {
            self.agents[i].lost = Some(why.clone());
        }
        for (sid, o) in self.steps.iter_mut() {
            if sid.agent == i && o.end.is_none() && o.lost.is_none() {
                o.lost = Some(why.clone());
            }
        }
    }

    /// Handles one inbound message, waiting until `deadline`; `Ok(false)` when the time ran
    /// out. Ctrl-C is an interruption.
    fn pump(&mut self, deadline: Instant) -> Result<bool, HostFailure> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            match self.rx.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok((i, at, m)) => {
                    self.handle(i, at, m)?;
                    return Ok(true);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(false),
            }
            if nsperf_core::signal::interrupted() {
                return Ok(false);
            }
        }
    }

    fn handle(&mut self, i: usize, at: u64, m: Inbound) -> Result<(), HostFailure> {
        let m = match m {
            Inbound::Closed(why) => {
                self.mark_lost(i, why);
                return Ok(());
            }
            Inbound::Msg(m) => m,
        };
        match m {
            FromAgent::Challenge { nonce } => {
                let Some(key) = self.agents[i].psk.clone() else {
                    return Err(HostFailure::Refused {
                        host: self.agents[i].name.clone(),
                        reason:
                            "authentication required: the agent has a key and the plan gives none"
                                .into(),
                    });
                };
                let mac = auth_answer(&key, &nonce);
                self.send(i, &ToAgent::Auth { mac });
            }
            FromAgent::Welcome { host, allow, .. } => {
                let a = &mut self.agents[i];
                a.host = *host;
                a.allow = allow;
                a.open = true;
            }
            FromAgent::Refused { reason } => {
                return Err(HostFailure::Refused {
                    host: self.agents[i].name.clone(),
                    reason,
                });
            }
            FromAgent::ClockEcho { seq, agent_unix_ns } => {
                let a = &mut self.agents[i];
                if let Some(sent) = a.probe_sent.remove(&seq) {
                    a.probes.push(ClockSample {
                        sent_ns: sent,
                        agent_ns: agent_unix_ns,
                        received_ns: at,
                    });
                }
            }
            FromAgent::Started { .. } => {}
            FromAgent::Output { id, report } => {
                if let Some(o) = self.steps.get_mut(&StepId { agent: i, id }) {
                    match *report {
                        // Only the latest: memory stays bounded however long a step runs.
                        StepReport::Progress(p) => o.progress = Some(p),
                        r => o.reports.push(r),
                    }
                }
            }
            FromAgent::Ended { id, end } => {
                if let Some(o) = self.steps.get_mut(&StepId { agent: i, id }) {
                    o.end = Some(end);
                }
            }
        }
        Ok(())
    }

    /// Starts `spec` on agent `agent` at `start_at` (the coordinator's clock, converted to
    /// the agent's), or at once.
    pub fn start(&mut self, agent: usize, spec: StepSpec, start_at_unix_ns: Option<u64>) -> StepId {
        self.start_request(agent, spec, start_at_unix_ns, false)
    }

    /// Starts `spec` on agent `agent` held after its setup: it reports
    /// [`StepReport::Ready`] and waits for [`Fleet::go`].
    pub fn start_held(&mut self, agent: usize, spec: StepSpec) -> StepId {
        self.start_request(agent, spec, None, true)
    }

    /// Starts held step `sid` at `start_at_unix_ns` (the coordinator's clock, converted to
    /// its agent's).
    pub fn go(&mut self, sid: StepId, start_at_unix_ns: u64) {
        let start_at_unix_ns = self.agents[sid.agent].clock.to_agent(start_at_unix_ns);
        self.send(
            sid.agent,
            &ToAgent::Go {
                id: sid.id,
                start_at_unix_ns,
            },
        );
    }

    /// Reads the agents' messages until no step of `ids` is still running (not ended, its
    /// agent not lost) with `waiting` true of its outcome, the deadline passes, an agent read
    /// fails or the user interrupts.
    fn pump_while(
        &mut self,
        ids: &[StepId],
        deadline: Instant,
        waiting: impl Fn(&StepOutcome) -> bool,
    ) {
        loop {
            let pending = ids.iter().any(|s| {
                self.steps
                    .get(s)
                    .is_some_and(|o| o.end.is_none() && o.lost.is_none() && waiting(o))
            });
            if !pending || nsperf_core::signal::interrupted() {
                return;
            }
            match self.pump(deadline) {
                Ok(true) => {}
                Ok(false) | Err(_) => return,
            }
        }
    }

    /// Waits until every step of `ids` reported [`StepReport::Ready`] or ended (or its agent
    /// was lost), or `timeout`; true for each step that is ready and still running.
    pub fn wait_ready(&mut self, ids: &[StepId], timeout: Duration) -> Vec<bool> {
        let ready = |o: &StepOutcome| o.reports.iter().any(|r| matches!(r, StepReport::Ready));
        self.pump_while(ids, Instant::now() + timeout, |o| !ready(o));
        ids.iter()
            .map(|s| {
                self.steps
                    .get(s)
                    .is_some_and(|o| o.end.is_none() && o.lost.is_none() && ready(o))
            })
            .collect()
    }

    fn start_request(
        &mut self,
        agent: usize,
        spec: StepSpec,
        start_at_unix_ns: Option<u64>,
        hold: bool,
    ) -> StepId {
        let id = self.next_id;
        self.next_id += 1;
        let sid = StepId { agent, id };
        let a = &self.agents[agent];
        let request = StepRequest {
            spec,
            start_at_unix_ns: start_at_unix_ns.map(|t| a.clock.to_agent(t)),
            progress: true,
            hold,
        };
        let lost = a.lost.clone();
        self.steps.insert(
            sid,
            StepOutcome {
                lost,
                ..StepOutcome::default()
            },
        );
        self.send(
            agent,
            &ToAgent::Run {
                id,
                request: Box::new(request),
            },
        );
        sid
    }

    /// A start time for a step on `agents` at once: now plus enough for every start message to
    /// arrive (four of the slowest clock probe's round trips, at least 200 ms, plus 1 ms per
    /// agent for the coordinator to send them all).
    pub fn barrier(&self, agents: &[usize]) -> u64 {
        let slowest = agents
            .iter()
            .map(|&i| self.agents[i].clock.error_ns.saturating_mul(2))
            .max()
            .unwrap_or(0);
        let margin = (slowest.saturating_mul(4)).max(200_000_000) + agents.len() as u64 * 1_000_000;
        nsperf_core::clock::unix_time_ns() + margin
    }

    /// What step `sid` gave so far.
    pub fn outcome(&self, sid: StepId) -> Option<&StepOutcome> {
        self.steps.get(&sid)
    }

    /// The steps' streamed progress summed: the longest elapsed time and the bytes moved so
    /// far by all of them (a live view of a step on many hosts).
    pub fn live(&self, ids: &[StepId]) -> crate::step::StepProgress {
        let mut sum = crate::step::StepProgress::default();
        for p in ids.iter().filter_map(|s| self.steps.get(s)?.progress) {
            sum.elapsed_s = sum.elapsed_s.max(p.elapsed_s);
            sum.bytes += p.bytes;
        }
        sum
    }

    /// Waits until every step of `ids` ended (or its agent was lost), or `timeout`; then hands
    /// their outcomes over (a step still running after the timeout is aborted and has no end).
    pub fn wait(&mut self, ids: &[StepId], timeout: Duration) -> Vec<StepOutcome> {
        self.pump_while(ids, Instant::now() + timeout, |_| true);
        ids.iter()
            .map(|s| {
                let o = self.steps.remove(s).unwrap_or_default();
                if o.end.is_none() && o.lost.is_none() {
                    self.send(s.agent, &ToAgent::Abort { id: s.id });
                }
                o
            })
            .collect()
    }

    /// Waits until step `sid` printed a report matching `want`, or ended, or `timeout`.
    pub fn wait_report(
        &mut self,
        sid: StepId,
        timeout: Duration,
        want: impl Fn(&StepReport) -> bool,
    ) -> Option<StepReport> {
        let deadline = Instant::now() + timeout;
        loop {
            let o = self.steps.get(&sid)?;
            if let Some(r) = o.reports.iter().find(|r| want(r)) {
                return Some(r.clone());
            }
            if o.end.is_some() || o.lost.is_some() || nsperf_core::signal::interrupted() {
                return None;
            }
            match self.pump(deadline) {
                Ok(true) => {}
                Ok(false) | Err(_) => return None,
            }
        }
    }

    /// Asks step `sid` to end (SIGINT).
    pub fn stop(&mut self, sid: StepId) {
        self.send(sid.agent, &ToAgent::Stop { id: sid.id });
    }

    /// Aborts step `sid` (SIGKILL).
    pub fn abort(&mut self, sid: StepId) {
        self.send(sid.agent, &ToAgent::Abort { id: sid.id });
    }

    /// Why agent `i` was lost, if it was.
    pub fn lost(&self, i: usize) -> Option<&str> {
        self.agents[i].lost.as_deref()
    }

    /// Says bye to every agent and ends the launching processes (after up to `grace` for
    /// them to exit by themselves).
    pub fn close(&mut self, grace: Duration) {
        for i in 0..self.agents.len() {
            self.send(i, &ToAgent::Bye);
        }
        let t0 = Instant::now();
        for a in &mut self.agents {
            if let Some(p) = a.process.as_mut() {
                while t0.elapsed() < grace {
                    if let Ok(Some(_)) = p.try_wait() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = p.kill();
                let _ = p.wait();
            }
            a.process = None;
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if self.agents.iter().any(|a| a.process.is_some()) {
            self.close(Duration::from_secs(2));
        }
    }
}
