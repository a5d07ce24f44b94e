//! The agent's end of one coordinator's session as a pure state machine: messages and step
//! events in, messages and actions out. Time is an input (the clock probe's answer), so tests
//! are exact; the sockets and child processes live in `service.rs`.
//!
//! Authentication uses the server's key scheme with its own context string: the agent sends
//! 32 random bytes, the coordinator answers HMAC-SHA256(key, "nsperf-agent-v1" ‖ nonce). The
//! key never crosses the wire, a recorded answer is useless for another nonce, and an answer
//! to an `nsperf server`'s challenge is useless here.

use std::collections::BTreeSet;

use nsperf_core::host::HostFacts;
use nsperf_core::psk::{Context, hex, unhex};

use super::proto::{FromAgent, StepClass, StepEnd, ToAgent};
use crate::step::{StepReport, StepRequest};

/// The coordinator's answer to an agent's challenge (`nonce_hex` as sent).
pub fn auth_answer(key: &[u8], nonce_hex: &str) -> String {
    Context::AGENT.answer(key, &unhex(nonce_hex).unwrap_or_default())
}

fn auth_ok(key: &[u8], nonce: &[u8], mac_hex: &str) -> bool {
    Context::AGENT.verify(key, nonce, mac_hex)
}

/// What an agent enforces on every coordinator.
#[derive(Debug, Clone)]
pub struct AgentPolicy {
    /// The pre-shared key, when authentication is required.
    pub psk: Option<Vec<u8>>,
    /// The step classes it runs.
    pub allow: BTreeSet<StepClass>,
    /// Most steps of one session running at once.
    pub max_steps: usize,
}

impl Default for AgentPolicy {
    fn default() -> Self {
        AgentPolicy {
            psk: None,
            allow: StepClass::DEFAULT.into_iter().collect(),
            max_steps: 64,
        }
    }
}

/// How to end a running step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepSignal {
    /// SIGINT to its process group: it reports and exits.
    Stop,
    /// SIGKILL to its process group.
    Kill,
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentAction {
    /// Send this message.
    Send(FromAgent),
    /// Start a step's process (then report [`AgentSession::step_started`] or
    /// [`AgentSession::step_ended`] if it could not start).
    Start {
        /// The step.
        id: u64,
        /// What to run.
        request: Box<StepRequest>,
    },
    /// Give a held step its start time.
    Go {
        /// The step.
        id: u64,
        /// When it starts, the agent's clock.
        start_at_unix_ns: u64,
    },
    /// Signal a running step's process group.
    Signal {
        /// The step.
        id: u64,
        /// Which signal.
        signal: StepSignal,
    },
    /// Kill every step of this session (the coordinator said bye or vanished).
    KillAll,
    /// Close the connection (after sending what came before).
    Close,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    AwaitHello,
    AwaitAuth([u8; 32]),
    Open,
    Closed,
}

/// The agent's end of one session.
#[derive(Debug)]
pub struct AgentSession {
    policy: AgentPolicy,
    state: State,
    nonce: [u8; 32],
    host: HostFacts,
    running: BTreeSet<u64>,
}

impl AgentSession {
    /// A session for a new connection; `nonce` is the random challenge (an input, so tests
    /// are deterministic), `host` the facts sent in the welcome.
    pub fn new(policy: AgentPolicy, nonce: [u8; 32], host: HostFacts) -> Self {
        AgentSession {
            policy,
            state: State::AwaitHello,
            nonce,
            host,
            running: BTreeSet::new(),
        }
    }

    /// Steps running now.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// True once the session ended.
    pub fn closed(&self) -> bool {
        self.state == State::Closed
    }

    fn refuse(&mut self, reason: String) -> Vec<AgentAction> {
        self.state = State::Closed;
        vec![
            AgentAction::Send(FromAgent::Refused { reason }),
            AgentAction::KillAll,
            AgentAction::Close,
        ]
    }

    fn welcome(&mut self) -> Vec<AgentAction> {
        self.state = State::Open;
        vec![AgentAction::Send(FromAgent::Welcome {
            software: env!("CARGO_PKG_VERSION").to_string(),
            host: Box::new(self.host.clone()),
            allow: self.policy.allow.iter().copied().collect(),
        })]
    }

    /// A message from the coordinator, read when the agent's clock said `now_unix_ns`.
    pub fn on_msg(&mut self, msg: ToAgent, now_unix_ns: u64) -> Vec<AgentAction> {
        match (&self.state, msg) {
            (State::Closed, _) => Vec::new(),
            (State::AwaitHello, ToAgent::Hello { .. }) => match self.policy.psk {
                Some(_) => {
                    self.state = State::AwaitAuth(self.nonce);
                    vec![AgentAction::Send(FromAgent::Challenge {
                        nonce: hex(&self.nonce),
                    })]
                }
                None => self.welcome(),
            },
            (State::AwaitAuth(nonce), ToAgent::Auth { mac }) => {
                let key = self.policy.psk.as_deref().unwrap_or_default();
                if auth_ok(key, nonce, &mac) {
                    self.welcome()
                } else {
                    self.refuse("authentication failed: wrong key".into())
                }
            }
            (State::Open, ToAgent::ClockProbe { seq }) => {
                vec![AgentAction::Send(FromAgent::ClockEcho {
                    seq,
                    agent_unix_ns: now_unix_ns,
                })]
            }
            (State::Open, ToAgent::Run { id, request }) => self.run(id, request),
            (
                State::Open,
                ToAgent::Go {
                    id,
                    start_at_unix_ns,
                },
            ) if self.running.contains(&id) => vec![AgentAction::Go {
                id,
                start_at_unix_ns,
            }],
            (State::Open, ToAgent::Stop { id }) if self.running.contains(&id) => {
                vec![AgentAction::Signal {
                    id,
                    signal: StepSignal::Stop,
                }]
            }
            (State::Open, ToAgent::Abort { id }) if self.running.contains(&id) => {
                vec![AgentAction::Signal {
                    id,
                    signal: StepSignal::Kill,
                }]
            }
            // A step that already ended: nothing to start or stop.
            (State::Open, ToAgent::Go { .. } | ToAgent::Stop { .. } | ToAgent::Abort { .. }) => {
                Vec::new()
            }
            (State::Open, ToAgent::Bye) => {
                self.state = State::Closed;
                vec![AgentAction::KillAll, AgentAction::Close]
            }
            (State::AwaitHello, _) => self.refuse("the session must start with hello".into()),
            (State::AwaitAuth(_), _) => {
                self.refuse("authentication required: this agent has a key".into())
            }
            (State::Open, ToAgent::Hello { .. } | ToAgent::Auth { .. }) => {
                self.refuse("hello or auth in an open session".into())
            }
        }
    }

    fn run(&mut self, id: u64, request: Box<StepRequest>) -> Vec<AgentAction> {
        let class = StepClass::of(&request.spec);
        let refuse = |why: String| {
            vec![AgentAction::Send(FromAgent::Ended {
                id,
                end: StepEnd::refused(why),
            })]
        };
        if !self.policy.allow.contains(&class) {
            return refuse(format!(
                "this agent does not run {class} steps (start it with --allow {class})"
            ));
        }
        if self.running.contains(&id) {
            return refuse(format!("step {id} is already running"));
        }
        if self.running.len() >= self.policy.max_steps {
            return refuse(format!(
                "{} steps are already running on this agent",
                self.policy.max_steps
            ));
        }
        if let Err(e) = request.spec.validate() {
            return refuse(format!("invalid step: {e}"));
        }
        self.running.insert(id);
        vec![AgentAction::Start { id, request }]
    }

    /// The step's process started.
    pub fn step_started(&mut self, id: u64) -> Vec<AgentAction> {
        if self.state == State::Closed {
            return Vec::new();
        }
        vec![AgentAction::Send(FromAgent::Started { id })]
    }

    /// The step printed a report.
    pub fn step_output(&mut self, id: u64, report: StepReport) -> Vec<AgentAction> {
        if self.state == State::Closed || !self.running.contains(&id) {
            return Vec::new();
        }
        vec![AgentAction::Send(FromAgent::Output {
            id,
            report: Box::new(report),
        })]
    }

    /// The step ended (or could not start).
    pub fn step_ended(&mut self, id: u64, end: StepEnd) -> Vec<AgentAction> {
        if !self.running.remove(&id) || self.state == State::Closed {
            return Vec::new();
        }
        vec![AgentAction::Send(FromAgent::Ended { id, end })]
    }

    /// The connection broke (or its peer fell silent): every step of the session goes.
    pub fn lost(&mut self) -> Vec<AgentAction> {
        self.state = State::Closed;
        vec![AgentAction::KillAll]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::StepSpec;

    fn exec(id: u64) -> ToAgent {
        ToAgent::Run {
            id,
            request: Box::new(StepRequest::now(StepSpec::Exec {
                site: None,
                command: vec!["true".into()],
            })),
        }
    }

    fn io(id: u64) -> ToAgent {
        ToAgent::Run {
            id,
            request: Box::new(StepRequest::now(StepSpec::Io {
                site: None,
                config: nsperf_io::RunConfig::new(
                    nsperf_io::Target::Dir { path: ".".into() },
                    nsperf_io::Workload::SeqRead,
                    1 << 20,
                    4096,
                ),
            })),
        }
    }

    fn hello() -> ToAgent {
        ToAgent::Hello {
            software: "test".into(),
        }
    }

    fn sent(actions: &[AgentAction]) -> Vec<&FromAgent> {
        actions
            .iter()
            .filter_map(|a| match a {
                AgentAction::Send(m) => Some(m),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn key_challenge_then_welcome_and_a_wrong_key_is_refused() {
        let key = b"secret".to_vec();
        let policy = AgentPolicy {
            psk: Some(key.clone()),
            ..AgentPolicy::default()
        };
        let mut s = AgentSession::new(policy.clone(), [7; 32], HostFacts::default());
        let a = s.on_msg(hello(), 0);
        let FromAgent::Challenge { nonce } = sent(&a)[0] else {
            panic!("{a:?}")
        };
        let mac = auth_answer(&key, nonce);
        let a = s.on_msg(ToAgent::Auth { mac }, 0);
        assert!(matches!(sent(&a)[0], FromAgent::Welcome { .. }), "{a:?}");

        let mut s = AgentSession::new(policy.clone(), [7; 32], HostFacts::default());
        s.on_msg(hello(), 0);
        let a = s.on_msg(
            ToAgent::Auth {
                mac: auth_answer(b"other", &hex(&[7; 32])),
            },
            0,
        );
        assert!(matches!(sent(&a)[0], FromAgent::Refused { .. }));
        assert!(a.contains(&AgentAction::Close));
        assert!(s.closed());

        // Skipping authentication is refused too.
        let mut s = AgentSession::new(policy, [7; 32], HostFacts::default());
        s.on_msg(hello(), 0);
        let a = s.on_msg(exec(1), 0);
        assert!(matches!(sent(&a)[0], FromAgent::Refused { .. }));
    }

    #[test]
    fn an_answer_to_a_net_server_challenge_is_useless_here() {
        // Same key, same nonce, the other context: nsperf server's scheme.
        let key = b"k";
        let nonce = [1u8; 32];
        let server_answer = Context::SERVER.answer(key, &nonce);
        assert!(!auth_ok(key, &nonce, &server_answer));
        assert!(auth_ok(key, &nonce, &auth_answer(key, &hex(&nonce))));
    }

    #[test]
    fn steps_outside_the_allow_list_are_refused_with_the_flag_to_use() {
        let mut s = AgentSession::new(AgentPolicy::default(), [0; 32], HostFacts::default());
        s.on_msg(hello(), 0);
        let a = s.on_msg(exec(1), 0);
        let FromAgent::Ended { id: 1, end } = sent(&a)[0] else {
            panic!("{a:?}")
        };
        assert!(end.error.contains("--allow exec"), "{}", end.error);
        assert_eq!(s.running(), 0);
        let a = s.on_msg(io(2), 0);
        assert!(matches!(a[0], AgentAction::Start { id: 2, .. }), "{a:?}");
        assert_eq!(s.running(), 1);
        // The same id twice is refused while it runs.
        let a = s.on_msg(io(2), 0);
        assert!(matches!(sent(&a)[0], FromAgent::Ended { id: 2, .. }));
    }

    #[test]
    fn clock_probe_answers_with_the_time_given() {
        let mut s = AgentSession::new(AgentPolicy::default(), [0; 32], HostFacts::default());
        s.on_msg(hello(), 0);
        let a = s.on_msg(ToAgent::ClockProbe { seq: 9 }, 12345);
        assert_eq!(
            sent(&a)[0],
            &FromAgent::ClockEcho {
                seq: 9,
                agent_unix_ns: 12345
            }
        );
    }

    #[test]
    fn stop_abort_and_end_of_a_step() {
        let mut s = AgentSession::new(AgentPolicy::default(), [0; 32], HostFacts::default());
        s.on_msg(hello(), 0);
        s.on_msg(io(5), 0);
        assert_eq!(
            s.on_msg(ToAgent::Stop { id: 5 }, 0),
            vec![AgentAction::Signal {
                id: 5,
                signal: StepSignal::Stop
            }]
        );
        assert_eq!(
            s.on_msg(ToAgent::Abort { id: 5 }, 0),
            vec![AgentAction::Signal {
                id: 5,
                signal: StepSignal::Kill
            }]
        );
        let go = ToAgent::Go {
            id: 5,
            start_at_unix_ns: 9,
        };
        assert_eq!(
            s.on_msg(go.clone(), 0),
            vec![AgentAction::Go {
                id: 5,
                start_at_unix_ns: 9
            }]
        );
        let a = s.step_ended(5, StepEnd::default());
        assert!(matches!(sent(&a)[0], FromAgent::Ended { id: 5, .. }));
        assert!(s.on_msg(ToAgent::Stop { id: 5 }, 0).is_empty());
        assert!(s.on_msg(go, 0).is_empty(), "a go for an ended step");
        assert!(s.step_ended(5, StepEnd::default()).is_empty(), "ends once");
    }

    #[test]
    fn a_vanished_coordinator_kills_its_steps() {
        let mut s = AgentSession::new(AgentPolicy::default(), [0; 32], HostFacts::default());
        s.on_msg(hello(), 0);
        s.on_msg(io(1), 0);
        assert_eq!(s.lost(), vec![AgentAction::KillAll]);
        assert!(s.closed());
        assert!(s.on_msg(io(2), 0).is_empty());
        assert!(
            s.step_output(
                1,
                StepReport::Listening {
                    addr: "127.0.0.1:1".parse().unwrap()
                }
            )
            .is_empty()
        );
    }

    #[test]
    fn bye_ends_everything() {
        let mut s = AgentSession::new(AgentPolicy::default(), [0; 32], HostFacts::default());
        s.on_msg(hello(), 0);
        assert_eq!(
            s.on_msg(ToAgent::Bye, 0),
            vec![AgentAction::KillAll, AgentAction::Close]
        );
    }
}
