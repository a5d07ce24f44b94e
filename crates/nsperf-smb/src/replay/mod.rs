//! The replay of a captured SMB2 workload against a server: a [`Script`] (what each client
//! connection asked, in call order, and what started each request) run over one TCP
//! connection (its own session and tree) per captured connection, with the same
//! dependencies and concurrency (`nsperf_core::replay::schedule`'s rule).
//!
//! - Set-up, untimed, on a control connection (the smb2 crate's path): a fresh directory
//!   under the URL's (`.nsperf-replay-PID-HEX`), one file per [`Script::files`] entry
//!   (`f0`, `f1`, …) sized to its extent (one byte written at its end: the rest reads as
//!   zeros), the path's round trip measured as the mean of [`ECHO_PROBES`] ECHOs. Everything
//!   is removed afterwards, on error too (unless kept).
//! - Each replay connection negotiates, logs on and connects the tree through the crate
//!   on nsperf's socket, opens every file once (its set-up handles), then the crate hands
//!   the socket over ([`crate::transport`]): from there on the requests are framed, signed
//!   and read by [`conn`], message ids and credits continuing from where the crate left them.
//! - Each connection on its own thread; all wait at one barrier and take its instant as
//!   their clock's zero; connection C starts its first request [`ConnScript::start_ns`]
//!   after it. A request goes when the scheduler says it is due and the server has granted
//!   the credits it is charged (one per 64 KiB, MS-SMB2 3.1.5.2). No allocation per
//!   request once running.
//! - Measured per connection and in all, per captured command: the requests, errors by NT
//!   status name and the latency (request handed to the socket to the reply's last byte).
//!
//! How the captured commands map ([`CallOp`]): READ, WRITE, FLUSH and QUERY_INFO on the
//! file's set-up handle; CREATE as a CREATE (FILE_OPEN) of the file's name, whose handle
//! the file's next CLOSE closes (a CREATE the server refused in the capture opens a name
//! that does not exist, and is refused again); anything else (NEGOTIATE, SESSION_SETUP,
//! TREE_CONNECT, IOCTL, QUERY_DIRECTORY, SET_INFO, …, and a CLOSE with no replayed
//! CREATE's handle to close) as an ECHO, one round trip, counted under the captured command.

mod conn;

use std::sync::atomic::AtomicBool;
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use nsperf_core::replay::Triggered;
pub use nsperf_core::replay::{ConnResult, OpResult, Replayed, Trigger};
use smb2::types::FileId;

use crate::client::Client;
use crate::creds::Credentials;
use crate::error::SmbError;
use crate::url::SmbUrl;
use crate::wire;

/// ECHOs timed at set-up to measure the path's round trip.
pub const ECHO_PROBES: u32 = 16;
/// Most connections one replay runs (a thread, a session and a tree each).
pub const MAX_CONNECTIONS: usize = 256;
/// Captured commands counted per connection: SMB2's 0..=18 (a larger one under the last).
pub const OPS: usize = 19;

/// A workload to replay: the files it needs and each connection's requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// The files, by index: each one's size (its extent: the largest offset + length a
    /// READ or WRITE reached).
    pub files: Vec<u64>,
    /// The connections.
    pub conns: Vec<ConnScript>,
}

/// One connection's requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnScript {
    /// When its first request may go, ns after the common start.
    pub start_ns: u64,
    /// Most requests outstanding at once (0 is taken as 1).
    pub in_flight_max: u32,
    /// The requests, in call order.
    pub calls: Vec<Call>,
}

/// One request and what starts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// What is asked.
    pub op: CallOp,
    /// What starts it.
    pub trigger: Trigger,
    /// The captured command it is counted under (below [`OPS`]).
    pub captured: u16,
}

impl Triggered for Call {
    fn trigger(&self) -> Trigger {
        self.trigger
    }
}

/// An SMB2 request as replayed; `file` indexes [`Script::files`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOp {
    /// READ `count` bytes at `offset`.
    Read {
        /// The file.
        file: u32,
        /// Where.
        offset: u64,
        /// How much.
        count: u32,
    },
    /// WRITE `count` bytes (a fixed pattern) at `offset`.
    Write {
        /// The file.
        file: u32,
        /// Where.
        offset: u64,
        /// How much.
        count: u32,
    },
    /// FLUSH.
    Flush {
        /// The file.
        file: u32,
    },
    /// QUERY_INFO (FileStandardInformation).
    QueryInfo {
        /// The file.
        file: u32,
    },
    /// CREATE (FILE_OPEN) of the file's name; None: of a name that does not exist (the
    /// capture's CREATE was refused).
    Create {
        /// The file.
        file: Option<u32>,
    },
    /// CLOSE of the handle the file's last replayed CREATE opened (an ECHO when there is
    /// none).
    Close {
        /// The file.
        file: u32,
    },
    /// ECHO, standing in for a command the replay does not make.
    Echo,
}

impl CallOp {
    /// The SMB2 command sent.
    pub fn command(self) -> u16 {
        match self {
            CallOp::Read { .. } => wire::READ,
            CallOp::Write { .. } => wire::WRITE,
            CallOp::Flush { .. } => wire::FLUSH,
            CallOp::QueryInfo { .. } => wire::QUERY_INFO,
            CallOp::Create { .. } => wire::CREATE,
            CallOp::Close { .. } => wire::CLOSE,
            CallOp::Echo => wire::ECHO,
        }
    }

    /// Credits the request is charged (one per 64 KiB of data, at least one).
    fn charge(self) -> u16 {
        match self {
            CallOp::Read { count, .. } | CallOp::Write { count, .. } => {
                count.div_ceil(65536).clamp(1, 256) as u16
            }
            _ => 1,
        }
    }
}

/// How a replay runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How long a reply (and a connect) may take.
    pub timeout: Duration,
    /// Leave the replay's directory and its files on the server (to look at them).
    pub keep: bool,
}

/// The replay's directory on the server: removed with everything in it when dropped.
struct Workspace {
    control: Client,
    name: String,
    made: bool,
    keep: bool,
}

impl Workspace {
    /// The path of `name` in the replay's directory, relative to the share's root.
    fn path(&self, name: &str) -> String {
        self.control.join(&format!("{}/{name}", self.name))
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if !self.made || self.keep {
            return;
        }
        let dir = self.control.join(&self.name);
        if let Ok(names) = self.control.list(&dir) {
            for n in names {
                let _ = self.control.remove(&format!("{dir}/{}", n.name));
            }
        }
        let _ = self.control.rmdir(&dir);
    }
}

/// A replay error that is no SMB status: the server's reply did not fit, or the set-up
/// could not be done the replay's way.
fn bad(why: &'static str) -> SmbError {
    SmbError::Op {
        op: "replay",
        path: String::new(),
        source: smb2::Error::invalid_data(why),
    }
}

/// Replays `script` against the SMB server of `url`, logged on as `creds` (see the
/// module's doc).
pub fn run(
    url: &SmbUrl,
    creds: &Credentials,
    script: &Script,
    opt: Options,
) -> Result<Replayed, SmbError> {
    if script.conns.len() > MAX_CONNECTIONS {
        return Err(bad("more than 256 connections to replay"));
    }
    let control = Client::connect(url, creds, opt.timeout)?;
    let name = format!(
        ".nsperf-replay-{}-{:x}",
        std::process::id(),
        nsperf_core::clock::unix_time_ns() & 0xffff_ffff
    );
    let mut ws = Workspace {
        control,
        name,
        made: false,
        keep: false,
    };
    let echo_rtt_ns = echo_rtt(&mut ws.control)?;
    let paths = set_up(&mut ws, script)?;
    ws.keep = opt.keep;
    let pattern = pattern(script);
    let mut conns = Vec::with_capacity(script.conns.len());
    for _ in &script.conns {
        conns.push(conn::Link::open(url, creds, &paths, opt.timeout)?);
    }
    let barrier = Barrier::new(script.conns.len());
    let epoch = OnceLock::new();
    let abort = AtomicBool::new(false);
    let shared = conn::Shared {
        pattern: &pattern,
        absent: &absent_name(),
        barrier: &barrier,
        epoch: &epoch,
        abort: &abort,
        timeout: opt.timeout,
    };
    let results: Vec<Result<ConnResult, SmbError>> = std::thread::scope(|s| {
        let threads: Vec<_> = script
            .conns
            .iter()
            .zip(conns)
            .enumerate()
            .map(|(i, (c, link))| {
                let shared = &shared;
                s.spawn(move || conn::Driver::new(i, c, link, shared).run())
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or(Err(SmbError::Interrupted)))
            .collect()
    });
    let mut done = Vec::with_capacity(results.len());
    let mut first_err = None;
    for r in results {
        match r {
            Ok(c) => done.push(c),
            Err(e) if first_err.is_none() || conn::is_abort(first_err.as_ref()) => {
                first_err = Some(e)
            }
            Err(_) => {}
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(Replayed::new(ws.name.clone(), echo_rtt_ns, done))
}

/// The mean round trip of [`ECHO_PROBES`] ECHOs, ns.
fn echo_rtt(c: &mut Client) -> Result<u64, SmbError> {
    c.echo()?;
    let t = Instant::now();
    for _ in 0..ECHO_PROBES {
        c.echo()?;
    }
    Ok(t.elapsed().as_nanos() as u64 / u64::from(ECHO_PROBES))
}

/// Makes the replay's directory and its files; their paths (relative to the share's root).
fn set_up(ws: &mut Workspace, script: &Script) -> Result<Vec<String>, SmbError> {
    let dir = ws.control.join(&ws.name);
    ws.control.mkdir(&dir)?;
    ws.made = true;
    let mut paths = Vec::with_capacity(script.files.len());
    for (i, &size) in script.files.iter().enumerate() {
        let path = ws.path(&format!("f{i}"));
        let fid = ws.control.open(&path, true)?;
        if size > 0 {
            ws.control.write(fid, &path, size - 1, &[0])?;
        }
        ws.control.close(fid, &path)?;
        paths.push(path);
    }
    Ok(paths)
}

/// The bytes every WRITE sends (a fixed pattern, as long as the longest WRITE).
fn pattern(script: &Script) -> Vec<u8> {
    let longest = script
        .conns
        .iter()
        .flat_map(|c| c.calls.iter())
        .filter_map(|x| match x.op {
            CallOp::Write { count, .. } => Some(count as usize),
            _ => None,
        })
        .max()
        .unwrap_or(0)
        .min(16 << 20);
    (0..longest)
        .map(|i| (i as u8).wrapping_mul(31) ^ 0x5a)
        .collect()
}

/// The UTF-16LE name a refused CREATE opens (one that does not exist).
fn absent_name() -> Vec<u8> {
    utf16(".nsperf-replay-absent")
}

fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// A replay connection's handles: the files' at set-up, by file index.
#[derive(Debug, Clone)]
struct Handles {
    files: Vec<FileId>,
    /// The files' names in the share, UTF-16LE with backslashes (a CREATE's).
    names: Vec<Vec<u8>>,
}
