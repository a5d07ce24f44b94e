//! The replay of a captured NFSv3 workload against a server: a neutral [`Script`] (what
//! each client connection called, in call order, and what started each call) run over one
//! TCP connection per captured connection, with the same dependencies and concurrency.
//!
//! - Set-up, untimed: a fresh directory under the URL's (`.nsperf-replay-PID-HEX`), one file
//!   per [`Script::files`] entry (`f0`, `f1`, …) sized to its extent with SETATTR (sparse:
//!   the contents are the server's zeros, WRITEs send a fixed pattern), one empty file per
//!   REMOVE to come (`rC-K`: connection C's K-th), their handles; the path's round trip
//!   measured as the mean of [`NULL_PROBES`] NULL calls. Everything is removed afterwards,
//!   on error too.
//! - Each connection on its own thread, connected before the start; all wait at one barrier
//!   and take its instant as their clock's zero; connection C starts its first call at
//!   [`ConnScript::start_ns`] after it.
//! - On each connection the calls are pipelined on a non-blocking socket, record-marked,
//!   batched into one `writev` when several are due, WRITE data sent from one shared buffer
//!   without a copy; replies are matched by xid (the request's index plus the connection's
//!   first xid) and their bodies skipped in a reused receive buffer. When each request is
//!   due is [`schedule`]'s rule. No allocation per request once running.
//! - Measured per connection and in all: first call sent to last reply received, bytes read
//!   and written, and per captured operation the requests, errors by status name and the
//!   latency (call handed to the socket to the reply's last byte) in a histogram.

pub(crate) mod conn;
mod result;
pub mod schedule;

use std::sync::atomic::AtomicBool;
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use crate::error::NfsError;
use crate::proto::{FileHandle, Stable, proc3};
use crate::session::Session;
use crate::url::NfsUrl;

pub use result::{ConnResult, OpResult, Replayed};

/// NULL calls timed at set-up to measure the path's round trip.
pub const NULL_PROBES: u32 = 16;
/// Most connections one replay runs (one thread each).
pub const MAX_CONNECTIONS: usize = 1024;

/// A workload to replay: the files it needs and each connection's calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// The files, by index: each one's size (its extent: the largest offset + count a READ,
    /// WRITE or COMMIT reached).
    pub files: Vec<u64>,
    /// The connections.
    pub conns: Vec<ConnScript>,
}

/// One connection's calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnScript {
    /// When its first call may go, ns after the common start.
    pub start_ns: u64,
    /// Most requests outstanding at once (0 is taken as 1).
    pub in_flight_max: u32,
    /// The calls, in call order.
    pub calls: Vec<Call>,
}

/// One call and what starts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// What is called.
    pub op: CallOp,
    /// What starts it.
    pub trigger: Trigger,
}

/// What starts a call (besides a free slot: see [`schedule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The connection's start.
    Start,
    /// Request `index` was sent, `delay_ns` before.
    Call {
        /// An earlier request of the connection.
        index: usize,
        /// ns after it was sent.
        delay_ns: u64,
    },
    /// Request `index`'s reply arrived, `delay_ns` before.
    Reply {
        /// An earlier request of the connection.
        index: usize,
        /// ns after its reply arrived.
        delay_ns: u64,
    },
}

/// What a call is made on: the replay's directory or one of its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The replay's directory.
    Dir,
    /// A file, by its index in [`Script::files`].
    File(u32),
}

/// An NFSv3 call as replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOp {
    /// NULL.
    Null,
    /// GETATTR.
    Getattr(Target),
    /// LOOKUP of an existing file's name in the replay's directory (round robin over the
    /// files).
    Lookup,
    /// ACCESS, asking for every right.
    Access(Target),
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
        /// As captured.
        stable: Stable,
    },
    /// COMMIT.
    Commit {
        /// The file.
        file: u32,
        /// From.
        offset: u64,
        /// How much (0: to the end).
        count: u32,
    },
    /// CREATE of a new name (`cC-K`, GUARDED).
    Create,
    /// REMOVE of a file made for it at set-up.
    Remove,
    /// FSSTAT.
    Fsstat(Target),
    /// FSINFO.
    Fsinfo(Target),
    /// PATHCONF.
    Pathconf(Target),
    /// READDIR of the replay's directory from its start, 64 KiB.
    Readdir,
    /// READDIRPLUS of the replay's directory from its start, 64 KiB.
    Readdirplus,
    /// A procedure the replay does not make (SETATTR, RENAME, …): a GETATTR in its place,
    /// counted under the captured procedure's number.
    AsGetattr {
        /// The captured procedure.
        captured: u32,
        /// What it named.
        target: Target,
    },
}

impl CallOp {
    /// The procedure sent.
    pub fn proc_(self) -> u32 {
        match self {
            CallOp::Null => proc3::NULL,
            CallOp::Getattr(_) | CallOp::AsGetattr { .. } => proc3::GETATTR,
            CallOp::Lookup => proc3::LOOKUP,
            CallOp::Access(_) => proc3::ACCESS,
            CallOp::Read { .. } => proc3::READ,
            CallOp::Write { .. } => proc3::WRITE,
            CallOp::Commit { .. } => proc3::COMMIT,
            CallOp::Create => proc3::CREATE,
            CallOp::Remove => proc3::REMOVE,
            CallOp::Fsstat(_) => proc3::FSSTAT,
            CallOp::Fsinfo(_) => proc3::FSINFO,
            CallOp::Pathconf(_) => proc3::PATHCONF,
            CallOp::Readdir => proc3::READDIR,
            CallOp::Readdirplus => PROC_READDIRPLUS,
        }
    }

    /// The procedure the results count it under: the captured one.
    pub fn captured_proc(self) -> u32 {
        match self {
            CallOp::AsGetattr { captured, .. } => captured,
            op => op.proc_(),
        }
    }
}

/// `NFSPROC3_READDIRPLUS`.
const PROC_READDIRPLUS: u32 = 17;
/// Procedures counted per connection (NFSv3's 0..=21).
const PROCS: usize = 22;

/// How a replay runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How long a reply (and a connect) may take.
    pub timeout: Duration,
    /// Leave the replay's directory and its files on the server (to look at them).
    pub keep: bool,
    /// The TCP window of the replayed connections: their send and receive buffers, bytes
    /// (set before they connect); None: the kernel's autotuning.
    pub window_bytes: Option<u64>,
}

/// The handles the connections use, looked up at set-up.
#[derive(Debug)]
struct Handles {
    dir: FileHandle,
    files: Vec<FileHandle>,
}

impl Handles {
    fn of(&self, t: Target) -> &FileHandle {
        match t {
            Target::File(i) => self.files.get(i as usize).unwrap_or(&self.dir),
            Target::Dir => &self.dir,
        }
    }
}

/// The replay's directory on the server: removed with everything in it when dropped.
struct Workspace {
    session: Session,
    name: String,
    dir: Option<FileHandle>,
    keep: bool,
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take().filter(|_| !self.keep) else {
            return;
        };
        let c = &mut self.session.client;
        if let Ok(names) = c.readdir(&dir, &self.name) {
            for n in names {
                let _ = c.remove(&dir, &n);
            }
        }
        let _ = c.rmdir(&self.session.dir, &self.name);
    }
}

/// Replays `script` against the NFSv3 server of `url` (see the module's doc).
pub fn run(url: &NfsUrl, script: &Script, opt: Options) -> Result<Replayed, NfsError> {
    let timeout = opt.timeout;
    if script.conns.len() > MAX_CONNECTIONS {
        return Err(NfsError::Rpc {
            what: "replay",
            source: crate::rpc::RpcError::Bad("more than 1024 connections to replay"),
        });
    }
    let session = Session::open(url, timeout)?;
    let name = format!(
        ".nsperf-replay-{}-{:x}",
        std::process::id(),
        nsperf_core::clock::unix_time_ns() & 0xffff_ffff
    );
    let mut ws = Workspace {
        session,
        name,
        dir: None,
        keep: false,
    };
    let null_rtt_ns = null_rtt(&mut ws.session)?;
    let handles = set_up(&mut ws, script)?;
    // Set up whole: kept when asked (removed when the set-up failed half way).
    ws.keep = opt.keep;
    let addr = ws.session.nfs_addr;
    let pattern = pattern(script);
    let mut socks = Vec::with_capacity(script.conns.len());
    for _ in &script.conns {
        socks.push(
            crate::sock::connect_window(addr, timeout, opt.window_bytes).map_err(|source| {
                NfsError::Connect {
                    what: "NFS",
                    addr: addr.to_string(),
                    source,
                }
            })?,
        );
    }
    let barrier = Barrier::new(script.conns.len());
    let epoch = OnceLock::new();
    let abort = AtomicBool::new(false);
    let shared = conn::Shared {
        handles: &handles,
        pattern: &pattern,
        barrier: &barrier,
        epoch: &epoch,
        abort: &abort,
        timeout,
    };
    let results: Vec<Result<ConnResult, NfsError>> = std::thread::scope(|s| {
        let threads: Vec<_> = script
            .conns
            .iter()
            .zip(socks)
            .enumerate()
            .map(|(i, (c, sock))| {
                let shared = &shared;
                s.spawn(move || conn::Driver::new(i, c, sock, shared).run())
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or(Err(NfsError::Interrupted)))
            .collect()
    });
    // The first error that is not another connection's abort.
    let mut conns = Vec::with_capacity(results.len());
    let mut first_err = None;
    for r in results {
        match r {
            Ok(c) => conns.push(c),
            Err(e) if first_err.is_none() || conn::is_abort(first_err.as_ref()) => {
                first_err = Some(e)
            }
            Err(_) => {}
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(Replayed::new(ws.name.clone(), null_rtt_ns, conns))
}

/// The mean round trip of [`NULL_PROBES`] NULL calls, ns.
fn null_rtt(s: &mut Session) -> Result<u64, NfsError> {
    s.client.null()?;
    let t = Instant::now();
    for _ in 0..NULL_PROBES {
        s.client.null()?;
    }
    Ok(t.elapsed().as_nanos() as u64 / u64::from(NULL_PROBES))
}

/// Makes the replay's directory, its files and the REMOVEs' victims.
fn set_up(ws: &mut Workspace, script: &Script) -> Result<Handles, NfsError> {
    let c = &mut ws.session.client;
    let dir = c.mkdir(&ws.session.dir, &ws.name)?;
    ws.dir = Some(dir);
    let mut files = Vec::with_capacity(script.files.len());
    for (i, &size) in script.files.iter().enumerate() {
        let name = format!("f{i}");
        let fh = c.create(&dir, &name)?;
        if size > 0 {
            c.set_size(&fh, &name, size)?;
        }
        files.push(fh);
    }
    let lookups = script
        .conns
        .iter()
        .any(|c| c.calls.iter().any(|x| x.op == CallOp::Lookup));
    if files.is_empty() && lookups {
        // LOOKUP needs a name to find.
        files.push(c.create(&dir, "f0")?);
    }
    for (ci, conn) in script.conns.iter().enumerate() {
        let removes = conn.calls.iter().filter(|x| x.op == CallOp::Remove).count();
        for k in 0..removes {
            c.create(&dir, &format!("r{ci}-{k}"))?;
        }
    }
    Ok(Handles { dir, files })
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
        .min(crate::rpc::MAX_FRAGMENT - 4096);
    (0..longest)
        .map(|i| (i as u8).wrapping_mul(31) ^ 0x5a)
        .collect()
}
