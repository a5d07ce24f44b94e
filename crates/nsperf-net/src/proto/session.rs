//! The two ends of a control session as pure state machines: messages in, messages and
//! actions out. The sockets around them live in `server.rs` and `client.rs`.
//!
//! Pre-shared-key authentication is a challenge/response: the server sends 32 random bytes,
//! the client answers HMAC-SHA256(key, "nsperf-psk-v1" ‖ nonce); the key never crosses the
//! wire and a recorded answer is useless for another nonce.

use nsperf_core::psk::{Context, hex, unhex};

use super::{Accepted, Msg, ProtoError, RefuseReason};
use crate::config::TestParams;
use crate::results::SideResults;

/// The answer to a challenge.
pub fn auth_mac(key: &[u8], nonce: &[u8]) -> String {
    Context::SERVER.answer(key, nonce)
}

fn auth_ok(key: &[u8], nonce: &[u8], mac_hex: &str) -> bool {
    Context::SERVER.verify(key, nonce, mac_hex)
}

/// What the server enforces on every client.
#[derive(Debug, Clone, Default)]
pub struct ServerPolicy {
    /// The pre-shared key, when authentication is required.
    pub psk: Option<Vec<u8>>,
    /// Most streams per test (`--max-streams`).
    pub max_streams: u32,
    /// Longest test in nanoseconds, warm-up included (`--max-time`); 0 = no limit.
    pub max_time_ns: u64,
}

/// Where a server session is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ServerState {
    AwaitHello,
    AwaitAuth([u8; 32]),
    AwaitRequest,
    Preparing,
    Running,
    Finished,
    Closed,
}

/// What the server shell must do after a message.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum ServerAction {
    /// Send this message.
    Send(Msg),
    /// Set up the test (data connections, UDP sockets), then call
    /// [`ServerSession::accepted`] and later [`ServerSession::started`].
    Prepare(TestParams),
    /// The client says the time is over: stop sending, drain, then report.
    Stop,
    /// Close the control connection (after sending what came before).
    Close,
}

/// The server end of one control session.
#[derive(Debug)]
pub struct ServerSession {
    policy: ServerPolicy,
    state: ServerState,
    nonce: [u8; 32],
    software: String,
}

impl ServerSession {
    /// A session for a freshly accepted client. `nonce` is the random challenge (an input, so
    /// tests are deterministic). `--max-clients` is the shell's to enforce when the session
    /// asks to [`ServerAction::Prepare`] (so only authenticated clients with a valid request
    /// count), refusing with [`ServerSession::prepare_failed`].
    pub fn new(policy: ServerPolicy, nonce: [u8; 32]) -> Self {
        ServerSession {
            policy,
            state: ServerState::AwaitHello,
            nonce,
            software: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    fn state_name(&self) -> &'static str {
        match self.state {
            ServerState::AwaitHello => "awaiting hello",
            ServerState::AwaitAuth(_) => "awaiting authentication",
            ServerState::AwaitRequest => "awaiting a test request",
            ServerState::Preparing => "preparing the test",
            ServerState::Running => "running the test",
            ServerState::Finished => "finished",
            ServerState::Closed => "closed",
        }
    }

    fn refuse(&mut self, reason: RefuseReason, message: String) -> Vec<ServerAction> {
        self.state = ServerState::Closed;
        vec![
            ServerAction::Send(Msg::Refused { reason, message }),
            ServerAction::Close,
        ]
    }

    fn welcome(&mut self) -> Vec<ServerAction> {
        self.state = ServerState::AwaitRequest;
        vec![ServerAction::Send(Msg::Welcome {
            software: self.software.clone(),
        })]
    }

    /// Feeds one message from the client. An error means the client misbehaved: log one line
    /// and drop it.
    pub fn on_msg(&mut self, msg: Msg) -> Result<Vec<ServerAction>, ProtoError> {
        let unexpected = |s: &Self, m: &Msg| ProtoError::Unexpected {
            got: m.name(),
            state: s.state_name(),
        };
        match (&self.state, msg) {
            (ServerState::AwaitHello, Msg::Hello { .. }) => match self.policy.psk {
                Some(_) => {
                    self.state = ServerState::AwaitAuth(self.nonce);
                    Ok(vec![ServerAction::Send(Msg::Challenge {
                        nonce: hex(&self.nonce),
                    })])
                }
                None => Ok(self.welcome()),
            },
            (ServerState::AwaitAuth(nonce), Msg::Auth { mac }) => {
                let nonce = *nonce;
                let key = self.policy.psk.clone().unwrap_or_default();
                if auth_ok(&key, &nonce, &mac) {
                    Ok(self.welcome())
                } else {
                    Ok(self.refuse(
                        RefuseReason::Auth,
                        "authentication failed: wrong pre-shared key".into(),
                    ))
                }
            }
            (ServerState::AwaitRequest, Msg::Request(p)) => {
                if let Err(e) = p.validate() {
                    return Ok(self.refuse(RefuseReason::BadRequest, e));
                }
                if p.stream_count() > self.policy.max_streams {
                    let msg = format!(
                        "test asks for {} streams, the server allows {} (--max-streams)",
                        p.stream_count(),
                        self.policy.max_streams
                    );
                    return Ok(self.refuse(RefuseReason::Limits, msg));
                }
                if self.policy.max_time_ns > 0 && p.total_time_ns() > self.policy.max_time_ns {
                    let msg = format!(
                        "test asks for {:.1} s, the server allows {:.1} s (--max-time)",
                        p.total_time_ns() as f64 / 1e9,
                        self.policy.max_time_ns as f64 / 1e9
                    );
                    return Ok(self.refuse(RefuseReason::Limits, msg));
                }
                self.state = ServerState::Preparing;
                Ok(vec![ServerAction::Prepare(p)])
            }
            (ServerState::Running, Msg::Stop) => {
                self.state = ServerState::Finished;
                Ok(vec![ServerAction::Stop])
            }
            (_, Msg::Error { .. }) => {
                self.state = ServerState::Closed;
                Ok(vec![ServerAction::Close])
            }
            (_, m) => Err(unexpected(self, &m)),
        }
    }

    /// The shell set the test up: the `Accepted` message to send.
    pub fn accepted(&mut self, accepted: Accepted) -> Msg {
        Msg::Accepted(accepted)
    }

    /// The shell could not set the test up: the refusal to send; the session ends.
    pub fn prepare_failed(&mut self, reason: RefuseReason, message: String) -> Msg {
        self.state = ServerState::Closed;
        Msg::Refused { reason, message }
    }

    /// Every data connection is in: the `Start` message to send.
    pub fn started(&mut self) -> Msg {
        self.state = ServerState::Running;
        Msg::Start
    }

    /// The test ended (the client's `Stop`, or the server's own cap): the results message.
    pub fn finish(&mut self, results: SideResults) -> Msg {
        self.state = ServerState::Closed;
        Msg::Results(results)
    }
}

/// Where a client session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientState {
    AwaitWelcome,
    AwaitAccepted,
    AwaitStart,
    Running,
    AwaitResults,
    Done,
}

/// Why the client session ended badly.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientSessionError {
    /// The server refused.
    #[error("server refused: {message}")]
    Refused {
        /// The class.
        reason: RefuseReason,
        /// The server's line.
        message: String,
    },
    /// The server asked for a key and none was given.
    #[error("server requires a pre-shared key (--psk-file)")]
    KeyRequired,
    /// The server reported an error.
    #[error("server error: {0}")]
    Server(String),
    /// A protocol violation.
    #[error(transparent)]
    Proto(#[from] ProtoError),
}

/// What the client shell must do after a message.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// Send this message and keep reading.
    Send(Msg),
    /// Session open: the `Request` was sent along (in `Send`), nothing else to do.
    Accepted(Accepted),
    /// The clocks start now.
    Start,
    /// The server's measurements: the session is over.
    Results(Box<SideResults>),
}

/// The client end of a control session.
#[derive(Debug)]
pub struct ClientSession {
    psk: Option<Vec<u8>>,
    params: TestParams,
    state: ClientState,
}

impl ClientSession {
    /// A session that will ask for `params`; returns it and the `Hello` to send.
    pub fn new(params: TestParams, psk: Option<Vec<u8>>) -> (Self, Msg) {
        (
            ClientSession {
                psk,
                params,
                state: ClientState::AwaitWelcome,
            },
            Msg::Hello {
                software: env!("CARGO_PKG_VERSION").to_string(),
            },
        )
    }

    /// Feeds one message from the server.
    pub fn on_msg(&mut self, msg: Msg) -> Result<Vec<ClientEvent>, ClientSessionError> {
        let state = self.state;
        let unexpected = |m: &Msg| {
            ClientSessionError::Proto(ProtoError::Unexpected {
                got: m.name(),
                state: match state {
                    ClientState::AwaitWelcome => "awaiting welcome",
                    ClientState::AwaitAccepted => "awaiting acceptance",
                    ClientState::AwaitStart => "awaiting start",
                    ClientState::Running => "running",
                    ClientState::AwaitResults => "awaiting results",
                    ClientState::Done => "done",
                },
            })
        };
        match (state, msg) {
            (_, Msg::Refused { reason, message }) => {
                self.state = ClientState::Done;
                Err(ClientSessionError::Refused { reason, message })
            }
            (_, Msg::Error { message }) => {
                self.state = ClientState::Done;
                Err(ClientSessionError::Server(message))
            }
            (ClientState::AwaitWelcome, Msg::Challenge { nonce }) => {
                let key = self.psk.as_ref().ok_or(ClientSessionError::KeyRequired)?;
                let nonce = unhex(&nonce).ok_or_else(|| {
                    ClientSessionError::Proto(ProtoError::BadBody("challenge is not hex".into()))
                })?;
                Ok(vec![ClientEvent::Send(Msg::Auth {
                    mac: auth_mac(key, &nonce),
                })])
            }
            (ClientState::AwaitWelcome, Msg::Welcome { .. }) => {
                self.state = ClientState::AwaitAccepted;
                Ok(vec![ClientEvent::Send(Msg::Request(self.params.clone()))])
            }
            (ClientState::AwaitAccepted, Msg::Accepted(a)) => {
                self.state = ClientState::AwaitStart;
                Ok(vec![ClientEvent::Accepted(a)])
            }
            (ClientState::AwaitStart, Msg::Start) => {
                self.state = ClientState::Running;
                Ok(vec![ClientEvent::Start])
            }
            (ClientState::Running | ClientState::AwaitResults, Msg::Results(r)) => {
                self.state = ClientState::Done;
                Ok(vec![ClientEvent::Results(Box::new(r))])
            }
            (_, m) => Err(unexpected(&m)),
        }
    }

    /// The test time is over: the `Stop` to send.
    pub fn stop(&mut self) -> Msg {
        self.state = ClientState::AwaitResults;
        Msg::Stop
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{FrameDecoder, encode};

    /// Carries messages through the real encoder and decoder, as the socket would.
    fn wire(m: &Msg) -> Msg {
        let mut b = Vec::new();
        encode(m, &mut b);
        let mut d = FrameDecoder::new();
        d.push(&b);
        d.next_msg().unwrap().unwrap()
    }

    fn policy(psk: Option<&[u8]>) -> ServerPolicy {
        ServerPolicy {
            psk: psk.map(<[u8]>::to_vec),
            max_streams: 8,
            max_time_ns: 60_000_000_000,
        }
    }

    fn accepted() -> Accepted {
        Accepted {
            cookie: 7,
            udp_ports: vec![],
            facts: Default::default(),
        }
    }

    /// Runs a whole session in memory; returns what the client saw at the end.
    fn converse(
        server_key: Option<&[u8]>,
        client_key: Option<&[u8]>,
        params: TestParams,
        at_capacity: bool,
    ) -> Result<SideResults, ClientSessionError> {
        let mut s = ServerSession::new(policy(server_key), [42u8; 32]);
        let (mut c, hello) = ClientSession::new(params, client_key.map(<[u8]>::to_vec));
        let mut to_server = vec![hello];
        for _ in 0..16 {
            let mut to_client = Vec::new();
            for m in to_server.drain(..) {
                for a in s.on_msg(wire(&m)).expect("valid client") {
                    match a {
                        ServerAction::Send(m) => to_client.push(m),
                        ServerAction::Prepare(_) if at_capacity => {
                            to_client.push(
                                s.prepare_failed(RefuseReason::Capacity, "at capacity".into()),
                            );
                        }
                        ServerAction::Prepare(_) => {
                            to_client.push(s.accepted(accepted()));
                            to_client.push(s.started());
                        }
                        ServerAction::Stop => {
                            to_client.push(s.finish(SideResults::default()));
                        }
                        ServerAction::Close => {}
                    }
                }
            }
            for m in to_client {
                for e in c.on_msg(wire(&m))? {
                    match e {
                        ClientEvent::Send(m) => to_server.push(m),
                        ClientEvent::Accepted(a) => assert_eq!(a.cookie, 7),
                        ClientEvent::Start => to_server.push(c.stop()),
                        ClientEvent::Results(r) => return Ok(*r),
                    }
                }
            }
        }
        panic!("session did not end");
    }

    #[test]
    fn open_session_runs_to_results() {
        converse(None, None, TestParams::default(), false).unwrap();
    }

    #[test]
    fn right_key_passes_wrong_key_fails_missing_key_named() {
        converse(Some(b"k1"), Some(b"k1"), TestParams::default(), false).unwrap();
        let e = converse(Some(b"k1"), Some(b"k2"), TestParams::default(), false).unwrap_err();
        assert!(matches!(
            e,
            ClientSessionError::Refused {
                reason: RefuseReason::Auth,
                ..
            }
        ));
        let e = converse(Some(b"k1"), None, TestParams::default(), false).unwrap_err();
        assert_eq!(e, ClientSessionError::KeyRequired);
    }

    #[test]
    fn key_never_on_the_wire() {
        let mac = auth_mac(b"secret-key", &[1u8; 32]);
        assert!(!mac.contains(&hex(b"secret-key")));
        assert!(auth_ok(b"secret-key", &[1u8; 32], &mac));
        assert!(!auth_ok(b"secret-key", &[2u8; 32], &mac));
        assert!(!auth_ok(b"secret-key", &[1u8; 32], "zz"));
    }

    #[test]
    fn caps_refuse_with_reason() {
        let p = TestParams {
            streams: 9,
            ..TestParams::default()
        };
        let e = converse(None, None, p, false).unwrap_err();
        assert!(
            matches!(&e, ClientSessionError::Refused { reason: RefuseReason::Limits, message } if message.contains("--max-streams")),
            "{e:?}"
        );
        let e = converse(None, None, TestParams::default(), true).unwrap_err();
        assert!(matches!(
            e,
            ClientSessionError::Refused {
                reason: RefuseReason::Capacity,
                ..
            }
        ));
        let p = TestParams {
            duration_ns: 3_600_000_000_000,
            ..TestParams::default()
        };
        assert!(converse(None, None, p, false).is_err());
    }

    #[test]
    fn out_of_order_messages_are_errors() {
        let mut s = ServerSession::new(policy(None), [0; 32]);
        assert!(s.on_msg(Msg::Stop).is_err());
        let mut s = ServerSession::new(policy(None), [0; 32]);
        s.on_msg(Msg::Hello {
            software: "x".into(),
        })
        .unwrap();
        assert!(s.on_msg(Msg::Start).is_err());
        let (mut c, _) = ClientSession::new(TestParams::default(), None);
        assert!(c.on_msg(Msg::Start).is_err());
    }
}
