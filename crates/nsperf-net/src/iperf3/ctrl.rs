//! The control connection of an iperf3 test, the socket shell both ends share: `nsperf net`
//! against an iperf3 server (`client.rs`) and `nsperf server` serving an iperf3 client
//! (`server/iperf3.rs`). It reads what arrives within a wait, never past what the session
//! expects next, feeds it to the session and returns the session's events; each end names its
//! own errors ([`ControlEnd`]).

use std::io::{Read, Write};
use std::marker::PhantomData;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::session::{ClientEvent, ClientSession, ServerEvent, ServerSession};
use super::wire::Iperf3Error;
use crate::error::NetError;

/// One end's session as the shell drives it, and how that end words its failures.
pub(crate) trait ControlEnd {
    /// What the session asks the shell to do.
    type Event;
    /// That end's error.
    type Error;
    /// Fails when the current step has waited longer than its limit at `now`.
    fn check(&self, now: Instant) -> Result<(), Iperf3Error>;
    /// Bytes the shell may read without reading past what the session expects (at least 1).
    fn wanted(&self) -> usize;
    /// Feeds bytes from the peer.
    fn on_bytes(&mut self, bytes: &[u8], now: Instant) -> Result<Vec<Self::Event>, Iperf3Error>;
    /// The session refused what it got or timed out.
    fn session_error(e: Iperf3Error) -> Self::Error;
    /// The peer closed the control connection.
    fn closed() -> Self::Error;
    /// Reading or writing the control connection failed.
    fn io_error(e: std::io::Error) -> Self::Error;
}

impl ControlEnd for ClientSession {
    type Event = ClientEvent;
    type Error = NetError;
    fn check(&self, now: Instant) -> Result<(), Iperf3Error> {
        ClientSession::check(self, now)
    }
    fn wanted(&self) -> usize {
        ClientSession::wanted(self)
    }
    fn on_bytes(&mut self, bytes: &[u8], now: Instant) -> Result<Vec<ClientEvent>, Iperf3Error> {
        ClientSession::on_bytes(self, bytes, now)
    }
    fn session_error(e: Iperf3Error) -> NetError {
        e.into()
    }
    fn closed() -> NetError {
        NetError::Control("the iperf3 server closed the control connection".into())
    }
    fn io_error(e: std::io::Error) -> NetError {
        NetError::Control(format!("iperf3 control connection: {e}"))
    }
}

impl ControlEnd for ServerSession {
    type Event = ServerEvent;
    type Error = String;
    fn check(&self, now: Instant) -> Result<(), Iperf3Error> {
        ServerSession::check(self, now)
    }
    fn wanted(&self) -> usize {
        ServerSession::wanted(self)
    }
    fn on_bytes(&mut self, bytes: &[u8], now: Instant) -> Result<Vec<ServerEvent>, Iperf3Error> {
        ServerSession::on_bytes(self, bytes, now)
    }
    fn session_error(e: Iperf3Error) -> String {
        e.to_string()
    }
    fn closed() -> String {
        "the client closed the control connection".into()
    }
    fn io_error(e: std::io::Error) -> String {
        e.to_string()
    }
}

/// The control connection of one iperf3 test, driven for end `E`.
pub(crate) struct Ctrl<E> {
    /// The connection.
    pub(crate) sock: TcpStream,
    buf: Box<[u8]>,
    end: PhantomData<fn(E)>,
}

impl<E: ControlEnd> Ctrl<E> {
    /// Wraps a connected control socket: no Nagle delay, writes time out after 30 s.
    pub(crate) fn new(sock: TcpStream) -> Self {
        let _ = sock.set_nodelay(true);
        let _ = sock.set_write_timeout(Some(Duration::from_secs(30)));
        Ctrl {
            sock,
            buf: vec![0u8; 64 * 1024].into_boxed_slice(),
            end: PhantomData,
        }
    }

    /// Writes bytes the session made.
    pub(crate) fn send(&mut self, bytes: &[u8]) -> Result<(), E::Error> {
        self.sock.write_all(bytes).map_err(E::io_error)
    }

    /// Reads what arrives within `wait` (never past what the session expects) and feeds it to
    /// the session: its events, none when nothing came in time.
    pub(crate) fn pump(&mut self, s: &mut E, wait: Duration) -> Result<Vec<E::Event>, E::Error> {
        s.check(Instant::now()).map_err(E::session_error)?;
        let _ = self
            .sock
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))));
        let want = s.wanted().min(self.buf.len());
        match self.sock.read(&mut self.buf[..want]) {
            Ok(0) => Err(E::closed()),
            Ok(n) => s
                .on_bytes(&self.buf[..n], Instant::now())
                .map_err(E::session_error),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                Ok(Vec::new())
            }
            Err(e) => Err(E::io_error(e)),
        }
    }
}
