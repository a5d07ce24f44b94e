//! The agent's control protocol: messages between a coordinator (`nsperf run` with
//! `[hosts]`) and an agent (`nsperf agent`), and their framing on a byte stream (a TCP
//! connection, or the standard input and output of `ssh host nsperf agent --stdio`).
//!
//! A frame is a 10-byte header and a body:
//!
//! ```text
//! 0..4   magic  b"NSPA"
//! 4..6   protocol version, big endian
//! 6..10  body length, big endian, at most MAX_BODY
//! 10..   body: one JSON object, a message tagged by "msg"
//! ```
//!
//! The codec is `nsperf_core::frame`'s (shared with `net`'s control protocol); this module
//! gives it this protocol's magic, version and limit, and turns bodies into messages. A wrong
//! magic is refused from the first byte that differs.
//!
//! Invariant: [`FrameDecoder`] never panics and never buffers more than one header plus
//! [`MAX_BODY`], whatever bytes it is fed; malformed input is an [`AgentProtoError`].

use nsperf_core::frame::{FrameError, FrameFormat};
use nsperf_core::host::HostFacts;
use nsperf_core::report::CpuInterval;
use serde::{Deserialize, Serialize};

use crate::step::{StepReport, StepRequest};

/// First bytes of every frame.
pub const MAGIC: [u8; 4] = *b"NSPA";
/// Version of this protocol; both ends must speak the same.
pub const AGENT_PROTOCOL_VERSION: u16 = 2;
/// Largest body accepted (a report of a 200-stream test fits with room to spare).
pub const MAX_BODY: usize = 32 << 20;

/// The classes of step an agent can be allowed to run (`nsperf agent --allow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepClass {
    /// A network test's client.
    Net,
    /// An `nsperf server` for the other hosts' clients.
    Server,
    /// A file-system run.
    Io,
    /// A packet capture (tcpdump).
    Capture,
    /// A user's command.
    Exec,
}

impl StepClass {
    /// Every class, in order.
    pub const ALL: [StepClass; 5] = [
        StepClass::Net,
        StepClass::Server,
        StepClass::Io,
        StepClass::Capture,
        StepClass::Exec,
    ];
    /// What an agent allows unless told otherwise: measurements, no commands.
    pub const DEFAULT: [StepClass; 3] = [StepClass::Net, StepClass::Server, StepClass::Io];

    /// The class of a step.
    pub fn of(spec: &crate::step::StepSpec) -> StepClass {
        use crate::step::StepSpec;
        match spec {
            StepSpec::Net { .. } => StepClass::Net,
            // A mirror peer listens for writers as a server does (into a directory of its own).
            StepSpec::NetServer { .. } | StepSpec::MirrorPeer { .. } => StepClass::Server,
            // A replay reads a capture and replays it against a server: a measurement.
            StepSpec::Io { .. } | StepSpec::Bonnie { .. } | StepSpec::Replay { .. } => {
                StepClass::Io
            }
            StepSpec::Capture { .. } => StepClass::Capture,
            // Serving a directory of the agent's host over the network gives as much away as
            // a command: allowed only where commands are.
            StepSpec::Exec { .. } | StepSpec::Service { .. } => StepClass::Exec,
        }
    }
}

/// `net`, `server`, `io`, `capture`, `exec`; pads to a width.
impl std::fmt::Display for StepClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            StepClass::Net => "net",
            StepClass::Server => "server",
            StepClass::Io => "io",
            StepClass::Capture => "capture",
            StepClass::Exec => "exec",
        })
    }
}

impl std::str::FromStr for StepClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        StepClass::ALL
            .into_iter()
            .find(|c| c.to_string() == s)
            .ok_or_else(|| {
                format!("unknown step class \"{s}\" (use net, server, io, capture or exec)")
            })
    }
}

/// A coordinator's message to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ToAgent {
    /// The first message: who speaks.
    Hello {
        /// The coordinator's nsperf version.
        software: String,
    },
    /// The answer to the agent's challenge: HMAC-SHA256 of the nonce under the shared key.
    Auth {
        /// Hex of the MAC.
        mac: String,
    },
    /// Asks for the agent's wall clock (the coordinator notes when it asked and when the
    /// echo came back).
    ClockProbe {
        /// Sequence number, echoed.
        seq: u32,
    },
    /// Runs a step: the agent starts `nsperf step` with the request.
    Run {
        /// Chosen by the coordinator, unique within the connection.
        id: u64,
        /// The step and its start time (the agent's clock).
        request: Box<StepRequest>,
    },
    /// Starts a held step (one run with `hold`, set up and [`StepReport::Ready`]) at this
    /// time of the agent's clock.
    Go {
        /// The step.
        id: u64,
        /// When it starts measuring, ns since the Unix epoch (the agent's clock).
        start_at_unix_ns: u64,
    },
    /// Asks a running step to end (SIGINT): a server reports what it served, a client its
    /// partial result.
    Stop {
        /// The step.
        id: u64,
    },
    /// Kills a running step and what it started.
    Abort {
        /// The step.
        id: u64,
    },
    /// The coordinator is done: the agent ends every step of this connection and hangs up.
    Bye,
}

/// An agent's message to its coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum FromAgent {
    /// The agent wants proof of the shared key: 32 random bytes, hex.
    Challenge {
        /// The nonce.
        nonce: String,
    },
    /// The session is open.
    Welcome {
        /// The agent's nsperf version.
        software: String,
        /// The agent host's facts.
        host: Box<HostFacts>,
        /// The step classes it runs.
        allow: Vec<StepClass>,
    },
    /// The session is refused (then the agent hangs up).
    Refused {
        /// Why, one line.
        reason: String,
    },
    /// The agent's wall clock when the probe was read, ns since the Unix epoch.
    ClockEcho {
        /// The probe's sequence number.
        seq: u32,
        /// Its clock.
        agent_unix_ns: u64,
    },
    /// A step's process runs.
    Started {
        /// The step.
        id: u64,
    },
    /// A report the step printed (a server's `listening`, then its `served`; a client's
    /// result).
    Output {
        /// The step.
        id: u64,
        /// The report.
        report: Box<StepReport>,
    },
    /// A step ended (after its last [`FromAgent::Output`]).
    Ended {
        /// The step.
        id: u64,
        /// How.
        end: StepEnd,
    },
}

/// How a step ended on the agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepEnd {
    /// The process's exit code (`docs/exit-codes.md`); `None` when killed by a signal or never
    /// started.
    pub exit_code: Option<i32>,
    /// Why it failed, one line (its last line of standard error, or the agent's reason for
    /// refusing it); empty on success.
    pub error: String,
    /// Wall time from start to exit, ns.
    pub elapsed_ns: u64,
    /// CPU use of the agent's host per core, each second while the step ran.
    pub cpu: Vec<CpuInterval>,
    /// The step's own process (the `nsperf step` child and what it waited for): user + system
    /// CPU time, ns, and its peak resident memory, KiB.
    #[serde(default)]
    pub process: ProcessUse,
    /// Growth of the host's network interface counters over the step (loopback excluded).
    #[serde(default)]
    pub nic: Vec<nsperf_core::nic::NicCounters>,
    /// Growth of the host's block device counters over the step (devices that moved data).
    #[serde(default)]
    pub disk: Vec<nsperf_core::disk::DiskCounters>,
}

/// What a step's process used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessUse {
    /// User + system CPU time, ns.
    pub cpu_ns: u64,
    /// Peak resident memory, KiB.
    pub max_rss_kib: u64,
}

impl StepEnd {
    /// True for a step that exited 0.
    pub fn ok(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// An end for a step the agent would not or could not start.
    pub fn refused(why: impl Into<String>) -> Self {
        StepEnd {
            exit_code: None,
            error: why.into(),
            ..StepEnd::default()
        }
    }
}

/// Why bytes from the peer are not a valid message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentProtoError {
    /// Not an nsperf agent (or coordinator) at the other end.
    #[error("peer is not an nsperf agent or coordinator (bad magic {0:02x?})")]
    BadMagic([u8; 4]),
    /// Another protocol version.
    #[error("agent protocol version mismatch: peer speaks {theirs}, this nsperf speaks {ours}")]
    Version {
        /// Ours.
        ours: u16,
        /// Theirs.
        theirs: u16,
    },
    /// The announced body is too long.
    #[error("agent message of {0} bytes is over the {MAX_BODY}-byte limit")]
    TooLong(u32),
    /// The body is not a message.
    #[error("malformed agent message: {0}")]
    BadBody(String),
}

impl From<FrameError> for AgentProtoError {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::BadMagic(m) => AgentProtoError::BadMagic(m),
            FrameError::Version { ours, theirs } => AgentProtoError::Version { ours, theirs },
            FrameError::TooLong(n) => AgentProtoError::TooLong(n),
            // Never made: this format has no kind byte.
            FrameError::BadKind(k) => AgentProtoError::BadBody(format!("message kind {k}")),
        }
    }
}

/// This protocol's frames in the shared codec: no kind byte (the body's "msg" tag says it).
const FORMAT: FrameFormat = FrameFormat {
    magic: MAGIC,
    version: AGENT_PROTOCOL_VERSION,
    kind: None,
    max_body: MAX_BODY,
};

/// Appends `msg` as one frame to `out` (an empty body if it cannot be serialised, which the
/// peer refuses as malformed).
pub fn encode<T: Serialize>(msg: &T, out: &mut Vec<u8>) {
    let _ = FORMAT.encode_json(0, msg, out);
}

/// Accumulates bytes and yields whole messages of type `T`.
#[derive(Debug)]
pub struct FrameDecoder {
    frames: nsperf_core::frame::FrameDecoder,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder {
            frames: nsperf_core::frame::FrameDecoder::new(FORMAT),
        }
    }
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.frames.push(bytes)
    }

    /// The next whole message, `Ok(None)` when more bytes are needed.
    pub fn next<T: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<T>, AgentProtoError> {
        let Some(frame) = self.frames.next_frame()? else {
            return Ok(None);
        };
        serde_json::from_slice(frame.body)
            .map(Some)
            .map_err(|e| AgentProtoError::BadBody(e.to_string()))
    }
}

/// Feeds arbitrary bytes to both ends' decoders (the body of the fuzz target, also run by unit
/// tests). Never panics.
pub fn fuzz_frames(data: &[u8]) {
    for split in [1usize, 7, 64] {
        let mut a = FrameDecoder::new();
        let mut b = FrameDecoder::new();
        for chunk in data.chunks(split) {
            a.push(chunk);
            b.push(chunk);
            while let Ok(Some(_)) = a.next::<ToAgent>() {}
            while let Ok(Some(_)) = b.next::<FromAgent>() {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::StepSpec;

    fn run_msg() -> ToAgent {
        ToAgent::Run {
            id: 7,
            request: Box::new(StepRequest {
                spec: StepSpec::Exec {
                    site: None,
                    command: vec!["true".into()],
                },
                start_at_unix_ns: Some(42),
                progress: true,
                hold: false,
            }),
        }
    }

    #[test]
    fn messages_round_trip_through_frames_split_anywhere() {
        let msgs = vec![
            ToAgent::Hello {
                software: "0.1.0".into(),
            },
            run_msg(),
            ToAgent::ClockProbe { seq: 3 },
            ToAgent::Go {
                id: 7,
                start_at_unix_ns: 43,
            },
            ToAgent::Bye,
        ];
        let mut bytes = Vec::new();
        for m in &msgs {
            encode(m, &mut bytes);
        }
        for split in 1..bytes.len().min(40) {
            let mut d = FrameDecoder::new();
            let mut got = Vec::new();
            for c in bytes.chunks(split) {
                d.push(c);
                while let Some(m) = d.next::<ToAgent>().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got, msgs);
        }
    }

    /// The shared codec writes the bytes the protocol's own encoder wrote before it: the
    /// reference below is that encoder, spelled out.
    #[test]
    fn frames_are_byte_identical_to_the_documented_layout() {
        let mut wire = Vec::new();
        encode(&ToAgent::Bye, &mut wire);
        assert_eq!(wire, b"NSPA\x00\x02\x00\x00\x00\x0d{\"msg\":\"bye\"}");
        for m in [run_msg(), ToAgent::ClockProbe { seq: 3 }] {
            let body = serde_json::to_vec(&m).unwrap();
            let mut want = b"NSPA".to_vec();
            want.extend_from_slice(&AGENT_PROTOCOL_VERSION.to_be_bytes());
            want.extend_from_slice(&(body.len() as u32).to_be_bytes());
            want.extend_from_slice(&body);
            let mut got = Vec::new();
            encode(&m, &mut got);
            assert_eq!(got, want);
        }
    }

    #[test]
    fn a_stranger_is_refused_from_its_first_byte() {
        let mut d = FrameDecoder::new();
        d.push(b"H");
        assert_eq!(
            d.next::<ToAgent>(),
            Err(AgentProtoError::BadMagic(*b"H\0\0\0"))
        );
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut d = FrameDecoder::new();
        d.push(b"HTTP/1.1 200 OK\r\n");
        assert!(matches!(
            d.next::<ToAgent>(),
            Err(AgentProtoError::BadMagic(_))
        ));
        let mut d = FrameDecoder::new();
        d.push(&MAGIC);
        d.push(&9u16.to_be_bytes());
        d.push(&0u32.to_be_bytes());
        assert!(matches!(
            d.next::<ToAgent>(),
            Err(AgentProtoError::Version { theirs: 9, .. })
        ));
        let mut d = FrameDecoder::new();
        d.push(&MAGIC);
        d.push(&AGENT_PROTOCOL_VERSION.to_be_bytes());
        d.push(&u32::MAX.to_be_bytes());
        assert!(matches!(
            d.next::<ToAgent>(),
            Err(AgentProtoError::TooLong(_))
        ));
        let mut d = FrameDecoder::new();
        let mut b = Vec::new();
        encode(&serde_json::json!({"msg": "fly"}), &mut b);
        d.push(&b);
        assert!(matches!(
            d.next::<ToAgent>(),
            Err(AgentProtoError::BadBody(_))
        ));
    }

    #[test]
    fn class_names_match_display_and_from_str() {
        let names = [
            (StepClass::Net, "net"),
            (StepClass::Server, "server"),
            (StepClass::Io, "io"),
            (StepClass::Capture, "capture"),
            (StepClass::Exec, "exec"),
        ];
        assert_eq!(names.map(|(c, _)| c), StepClass::ALL);
        for (c, name) in names {
            assert_eq!(c.to_string(), name);
            assert_eq!(name.parse::<StepClass>(), Ok(c));
            assert_eq!(format!("{c:>8}|{c:<8}|"), format!("{name:>8}|{name:<8}|"));
        }
    }

    #[test]
    fn classes_parse_and_print() {
        for c in StepClass::ALL {
            assert_eq!(c.to_string().parse::<StepClass>().unwrap(), c);
        }
        assert!("shell".parse::<StepClass>().is_err());
    }

    #[test]
    fn random_and_mutated_frames_never_panic() {
        let mut seed = Vec::new();
        encode(&run_msg(), &mut seed);
        let mut x: u64 = 0x2545f4914f6cdd1d;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let mut v = seed.clone();
            let i = (next() as usize) % v.len();
            v[i] = next() as u8;
            fuzz_frames(&v);
        }
        for cut in 0..seed.len() {
            fuzz_frames(&seed[..cut]);
        }
    }
}
