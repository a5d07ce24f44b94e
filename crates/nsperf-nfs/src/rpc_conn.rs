//! One RPC at a time on a blocking TCP connection ([`RpcConn`]), the waits it honours
//! ([`Timeouts`]) and the resolution of a server's address: what the control path of NFSv3
//! ([`crate::client`]), the portmapper and MOUNT calls ([`crate::mount`]) and NFSv4.1
//! ([`crate::v4`]) are made on. The data path (many RPCs in flight) is [`crate::pipeline`],
//! which starts from a connection made here.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::NfsError;
use crate::rpc::{self, AuthSys, MAX_FRAGMENT, RpcError};
use crate::xdr::XdrReader;

/// How long a control call or a connect may take before the server counts as gone.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection (portmapper, MOUNT, NFS) may take to be made, by default: an
/// unreachable server fails in seconds, not after the reply timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The two waits of a session: for a connection to be made, and for each reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Connecting (TCP handshake).
    pub connect: Duration,
    /// Each reply on an established connection.
    pub reply: Duration,
}

impl Timeouts {
    /// `reply` for replies, and [`DEFAULT_CONNECT_TIMEOUT`] (at most `reply`) to connect.
    pub fn new(reply: Duration) -> Timeouts {
        Timeouts {
            connect: DEFAULT_CONNECT_TIMEOUT.min(reply),
            reply,
        }
    }
}

/// One blocking RPC connection.
#[derive(Debug)]
pub struct RpcConn {
    sock: TcpStream,
    addr: SocketAddr,
    xid: u32,
    cred: AuthSys,
    sbuf: Vec<u8>,
    rbuf: Vec<u8>,
}

impl RpcConn {
    /// Connects to the `what` service (for messages) at `addr`.
    pub fn connect(
        what: &'static str,
        addr: SocketAddr,
        timeout: Duration,
    ) -> Result<RpcConn, NfsError> {
        RpcConn::connect_within(
            what,
            addr,
            Timeouts {
                connect: timeout,
                reply: timeout,
            },
        )
    }

    /// Connects to the `what` service at `addr` within `t.connect`; replies may take
    /// `t.reply`.
    pub fn connect_within(
        what: &'static str,
        addr: SocketAddr,
        t: Timeouts,
    ) -> Result<RpcConn, NfsError> {
        let sock = crate::sock::connect(addr, t.connect).map_err(|source| NfsError::Connect {
            what,
            addr: addr.to_string(),
            source,
        })?;
        Ok(RpcConn::on_stream(sock, addr, t.reply))
    }

    /// An RPC connection on `sock`, already connected to `addr`; replies may take `reply`.
    pub(crate) fn on_stream(sock: TcpStream, addr: SocketAddr, reply: Duration) -> RpcConn {
        sock.set_read_timeout(Some(reply)).ok();
        sock.set_write_timeout(Some(reply)).ok();
        RpcConn {
            sock,
            addr,
            xid: initial_xid(),
            cred: AuthSys::current(),
            sbuf: Vec::with_capacity(4096),
            rbuf: Vec::with_capacity(4096),
        }
    }

    /// The peer.
    pub fn peer(&self) -> SocketAddr {
        self.addr
    }

    /// The socket, for a data path that goes on from calls made here.
    pub(crate) fn into_stream(self) -> TcpStream {
        self.sock
    }

    /// Calls `proc_` of `prog`/`vers` with the arguments `args` appends; returns a cursor at
    /// the start of the result.
    pub fn call(
        &mut self,
        op: &'static str,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: impl FnOnce(&mut Vec<u8>),
    ) -> Result<XdrReader<'_>, NfsError> {
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        self.sbuf.clear();
        let start = rpc::begin_call(&mut self.sbuf, xid, prog, vers, proc_, &self.cred);
        args(&mut self.sbuf);
        rpc::finish_record(&mut self.sbuf, start, 0);
        let lost = |e: std::io::Error| lost(op, e);
        self.sock.write_all(&self.sbuf).map_err(lost)?;
        self.rbuf.clear();
        loop {
            let mut mark = [0u8; 4];
            self.sock.read_exact(&mut mark).map_err(lost)?;
            let (last, len) = rpc::parse_mark(mark);
            if self.rbuf.len() + len > MAX_FRAGMENT {
                return Err(NfsError::Rpc {
                    what: op,
                    source: RpcError::Bad("reply longer than 4 MiB"),
                });
            }
            let at = self.rbuf.len();
            self.rbuf.resize(at + len, 0);
            self.sock.read_exact(&mut self.rbuf[at..]).map_err(lost)?;
            if last {
                break;
            }
        }
        let mut r = XdrReader::new(&self.rbuf);
        let got = rpc::parse_reply(&mut r).map_err(|e| NfsError::Rpc {
            what: op,
            source: with_prog(e, prog, proc_),
        })?;
        if got != xid {
            return Err(NfsError::Rpc {
                what: op,
                source: RpcError::Bad("reply to another call (xid mismatch)"),
            });
        }
        Ok(r)
    }
}

fn with_prog(e: RpcError, prog: u32, proc_: u32) -> RpcError {
    match e {
        RpcError::ProgramUnavailable(_) => RpcError::ProgramUnavailable(prog),
        RpcError::VersionMismatch { low, high, .. } => {
            RpcError::VersionMismatch { prog, low, high }
        }
        RpcError::ProcedureUnavailable(_) => RpcError::ProcedureUnavailable(proc_),
        e => e,
    }
}

/// An I/O error on an established connection: the server went away.
pub(crate) fn lost(what: &'static str, e: std::io::Error) -> NfsError {
    let why = match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
        std::io::ErrorKind::BrokenPipe => {
            "the connection broke (a write found it closed: broken pipe)".to_string()
        }
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            "no reply within the timeout".to_string()
        }
        std::io::ErrorKind::Interrupted if nsperf_core::signal::interrupted() => {
            return NfsError::Interrupted;
        }
        _ => e.to_string(),
    };
    NfsError::Lost { what, why }
}

/// A starting xid that differs between processes and runs, so replies meant for a previous
/// connection are never taken for ours.
pub(crate) fn initial_xid() -> u32 {
    (nsperf_core::clock::unix_time_ns() as u32) ^ (std::process::id() << 16)
}

/// An XDR decoding error of the reply to `what`, as the client reports it.
pub(crate) fn xdr(what: &'static str) -> impl Fn(crate::xdr::XdrError) -> NfsError {
    move |e| NfsError::Rpc {
        what,
        source: RpcError::Xdr(e),
    }
}

/// Resolves `host:port`.
pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, NfsError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|source| NfsError::Connect {
            what: "host",
            addr: host.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| NfsError::Connect {
            what: "host",
            addr: host.to_string(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
}
