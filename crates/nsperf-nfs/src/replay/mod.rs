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
pub(crate) mod v4;

use std::sync::atomic::AtomicBool;
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use crate::error::NfsError;
use crate::proto::{FileHandle, Stable, proc3};
use crate::rpc_conn::{RpcConn, Timeouts};
use crate::session::Session;
use crate::url::{NfsUrl, NfsVersion};
use crate::v4::{Client4, Stateid};

pub use nsperf_core::replay::{ConnResult, OpResult, Replayed, Trigger, schedule};

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
    /// The captured operation it is counted under: the NFSv3 procedure's number, or the
    /// NFSv4 operation's for a capture of NFSv4 (below [`OPS`]).
    pub captured: u32,
}

impl nsperf_core::replay::Triggered for Call {
    fn trigger(&self) -> Trigger {
        self.trigger
    }
}

impl Call {
    /// A call counted under the NFSv3 procedure it replays (or stands for).
    pub fn new(op: CallOp, trigger: Trigger) -> Call {
        Call {
            op,
            trigger,
            captured: op.captured_proc(),
        }
    }
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
/// Captured operations counted per connection: NFSv3's procedures 0..=21, NFSv4's
/// operations 0..=75 (a larger number is counted under the last).
pub const OPS: usize = 76;

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
    /// NFSv4: each file's stateid (its open at set-up); empty in NFSv3.
    stateids: Vec<Stateid>,
}

impl Handles {
    /// The stateid READ and WRITE of file `i` name (the anonymous one for none).
    fn stateid(&self, i: u32) -> Stateid {
        self.stateids.get(i as usize).copied().unwrap_or_default()
    }

    fn of(&self, t: Target) -> &FileHandle {
        match t {
            Target::File(i) => self.files.get(i as usize).unwrap_or(&self.dir),
            Target::Dir => &self.dir,
        }
    }
}

/// The control connection: an NFSv3 mount or an NFSv4 client.
enum Control {
    V3(Session),
    V4(Client4),
}

impl Control {
    /// Connects as the URL's version asks (`?version=4`: 4.1, else 4.0; none: NFSv3).
    fn open(url: &NfsUrl, timeout: Duration) -> Result<Control, NfsError> {
        let t = Timeouts::new(timeout);
        match url.version {
            None | Some(NfsVersion::V3) => Session::open(url, timeout).map(Control::V3),
            Some(NfsVersion::V4_0) => Client4::connect(url, t, 0).map(Control::V4),
            Some(NfsVersion::V4_1) => Client4::connect(url, t, 1).map(Control::V4),
            Some(NfsVersion::V4) => match Client4::connect(url, t, 1) {
                Err(NfsError::Nfs4 { stat, .. })
                    if stat == crate::v4::wire::stat::MINOR_VERS_MISMATCH =>
                {
                    Client4::connect(url, t, 0).map(Control::V4)
                }
                r => r.map(Control::V4),
            },
        }
    }

    /// The directory of the URL.
    fn dir(&self) -> FileHandle {
        match self {
            Control::V3(s) => s.dir,
            Control::V4(c) => c.dir,
        }
    }

    /// Where NFS answers.
    fn addr(&self) -> std::net::SocketAddr {
        match self {
            Control::V3(s) => s.nfs_addr,
            Control::V4(c) => c.lease().addr,
        }
    }

    fn null(&mut self) -> Result<(), NfsError> {
        match self {
            Control::V3(s) => s.client.null(),
            Control::V4(c) => c.null(),
        }
    }

    fn mkdir(&mut self, dir: &FileHandle, name: &str) -> Result<FileHandle, NfsError> {
        match self {
            Control::V3(s) => s.client.mkdir(dir, name),
            Control::V4(c) => c.mkdir(dir, name),
        }
    }

    /// Creates (in NFSv4: and opens) `name` in `dir`.
    fn create(&mut self, dir: &FileHandle, name: &str) -> Result<FileHandle, NfsError> {
        match self {
            Control::V3(s) => s.client.create(dir, name),
            Control::V4(c) => c.create(dir, name),
        }
    }

    fn set_size(&mut self, fh: &FileHandle, name: &str, size: u64) -> Result<(), NfsError> {
        match self {
            Control::V3(s) => s.client.set_size(fh, name, size),
            Control::V4(c) => c.set_size(fh, name, size),
        }
    }

    /// Removes everything in `dir` (named `name` under the URL's directory) and `dir`.
    fn remove_all(&mut self, dir: &FileHandle, name: &str) {
        let top = self.dir();
        match self {
            Control::V3(s) => {
                let c = &mut s.client;
                if let Ok(names) = c.readdir(dir, name) {
                    for n in names {
                        let _ = c.remove(dir, &n);
                    }
                }
                let _ = c.rmdir(&top, name);
            }
            Control::V4(c) => {
                if let Ok(names) = c.readdir(dir, name) {
                    for n in names {
                        let _ = c.remove(dir, &n);
                    }
                }
                let _ = c.remove(&top, name);
            }
        }
    }
}

/// The replay's directory on the server: removed with everything in it when dropped.
struct Workspace {
    control: Control,
    name: String,
    dir: Option<FileHandle>,
    keep: bool,
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take().filter(|_| !self.keep) else {
            return;
        };
        self.control.remove_all(&dir, &self.name);
    }
}

/// Replays `script` against the NFS server of `url`, in NFSv3 or, as the URL's `version`
/// asks, NFSv4.0 or 4.1 (see the module's doc).
pub fn run(url: &NfsUrl, script: &Script, opt: Options) -> Result<Replayed, NfsError> {
    let timeout = opt.timeout;
    if script.conns.len() > MAX_CONNECTIONS {
        return Err(NfsError::Rpc {
            what: "replay",
            source: crate::rpc::RpcError::Bad("more than 1024 connections to replay"),
        });
    }
    let control = Control::open(url, timeout)?;
    let name = format!(
        ".nsperf-replay-{}-{:x}",
        std::process::id(),
        nsperf_core::clock::unix_time_ns() & 0xffff_ffff
    );
    let mut ws = Workspace {
        control,
        name,
        dir: None,
        keep: false,
    };
    let null_rtt_ns = null_rtt(&mut ws.control)?;
    let handles = set_up(&mut ws, script)?;
    // Set up whole: kept when asked (removed when the set-up failed half way).
    ws.keep = opt.keep;
    let addr = ws.control.addr();
    let pattern = pattern(script);
    let mut socks = Vec::with_capacity(script.conns.len());
    let mut v4s = Vec::with_capacity(script.conns.len());
    for c in &script.conns {
        let sock =
            crate::sock::connect_window(addr, timeout, opt.window_bytes).map_err(|source| {
                NfsError::Connect {
                    what: "NFS",
                    addr: addr.to_string(),
                    source,
                }
            })?;
        let (sock, v4) = match &ws.control {
            Control::V3(_) => (sock, None),
            Control::V4(c4) => {
                let (sock, v) = v4_conn(c4, sock, c, &pattern, timeout)?;
                (sock, Some(v))
            }
        };
        socks.push(sock);
        v4s.push(v4);
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
            .zip(socks.into_iter().zip(v4s))
            .enumerate()
            .map(|(i, (c, (sock, v4)))| {
                let shared = &shared;
                s.spawn(move || conn::Driver::new(i, c, sock, shared, v4).run())
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

/// An NFSv4 replay connection on `sock`: in 4.1 with a session of its own of as many slots
/// as `conn` has requests in flight at most (CREATE_SESSION, untimed), or of the fewer the
/// server grants, which then bound the replay's requests in flight (reported per connection).
fn v4_conn(
    c4: &Client4,
    sock: std::net::TcpStream,
    conn: &ConnScript,
    pattern: &[u8],
    timeout: Duration,
) -> Result<(std::net::TcpStream, v4::V4Conn), NfsError> {
    let lease = c4.lease();
    if lease.minor == 0 {
        return Ok((sock, v4::V4Conn::new(0, None, 0, conn.calls.len())));
    }
    let want = conn.in_flight_max.max(1);
    let max_io = conn
        .calls
        .iter()
        .map(|x| match x.op {
            CallOp::Read { count, .. } => count,
            _ => 0,
        })
        .max()
        .unwrap_or(0)
        .max(pattern.len() as u32)
        .max(64 << 10)
        + 4096;
    let mut rc = RpcConn::on_stream(sock, lease.addr, timeout);
    let (sid, granted) = lease.create_session(&mut rc, want, max_io)?;
    let sock = rc.into_stream();
    sock.set_read_timeout(None).ok();
    sock.set_write_timeout(None).ok();
    let slots = granted.clamp(1, want);
    Ok((sock, v4::V4Conn::new(1, Some(sid), slots, conn.calls.len())))
}

/// The mean round trip of [`NULL_PROBES`] NULL calls, ns.
fn null_rtt(c: &mut Control) -> Result<u64, NfsError> {
    c.null()?;
    let t = Instant::now();
    for _ in 0..NULL_PROBES {
        c.null()?;
    }
    Ok(t.elapsed().as_nanos() as u64 / u64::from(NULL_PROBES))
}

/// Makes the replay's directory, its files and the REMOVEs' victims.
fn set_up(ws: &mut Workspace, script: &Script) -> Result<Handles, NfsError> {
    let top = ws.control.dir();
    let c = &mut ws.control;
    let dir = c.mkdir(&top, &ws.name)?;
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
    let stateids = match c {
        Control::V3(_) => Vec::new(),
        Control::V4(c4) => files.iter().map(|f| c4.stateid_of(f)).collect(),
    };
    Ok(Handles {
        dir,
        files,
        stateids,
    })
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
