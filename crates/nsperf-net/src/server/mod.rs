//! `nsperf server`: one listening port for control and TCP data connections, many clients at
//! once. A misbehaving client is dropped with one log line and never affects the others.
//!
//! One thread accepts and greets: a new connection waits in an epoll set, costing a
//! descriptor and a few bytes, until its first bytes say what it is — a control greeting or a
//! data connection's hello — within [`GREETING_TIMEOUT`]. A data connection goes straight to
//! its test; a control connection gets its own thread for the handshake and the test.
//!
//! A client counts against `--max-clients` only once it is admitted (authenticated, its test
//! request valid), so connections that never finish the handshake cannot lock real clients
//! out: at most [`MAX_HANDSHAKES`] handshakes run at once and each must reach its request
//! within [`HANDSHAKE_TIMEOUT`]. When `accept` fails (out of file descriptors, say) the loop
//! backs off up to a second and logs one line per [`LOG_EVERY`], never spinning.

mod counters;
mod greet;
mod test;

pub use counters::{
    LiveTest, LiveTotals, MAX_TEST_RECORDS, ServedTest, ServerCounters, ServerTotals,
};

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::config::ServerConfig;
use crate::control::{ControlConn, RecvError};
use crate::error::NetError;
use crate::poller::{Interest, Poller};
use crate::proto::session::{ServerAction, ServerPolicy, ServerSession};
use crate::proto::{Msg, RefuseReason};
use greet::{Backoff, Greeted, Greeting, Greetings, RateLimited};
use nsperf_core::psk::os_random;
use test::{Rendezvous, TestEnv};

/// Where the server writes its one-line log messages.
pub type Logger = Arc<dyn Fn(&str) + Send + Sync>;

/// From accept to the connection's first bytes (the magic, or a whole data hello).
pub const GREETING_TIMEOUT: Duration = Duration::from_secs(5);
/// From the greeting to a valid test request (authentication included).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Control handshakes in progress at once; more greetings are dropped until one ends.
pub const MAX_HANDSHAKES: u32 = 256;
/// Connections waiting for their first bytes at once; more are closed at accept.
const MAX_GREETING: usize = 4096;
/// Repeated log lines of one kind (accept failures, dropped greetings) at most this often.
pub const LOG_EVERY: Duration = Duration::from_secs(10);
/// Longest pause of the accept loop after a failed accept.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(1);

mod iperf3;

struct Shared {
    cfg: ServerConfig,
    /// Admitted clients (their test accepted, running or reporting).
    active: AtomicU32,
    /// Control connections between greeting and admission.
    handshaking: AtomicU32,
    served: AtomicU32,
    finished: AtomicBool,
    rendezvous: Rendezvous,
    /// iperf3 UDP streams all arrive on the server's port: one test sets its streams up at a
    /// time.
    iperf3_udp: std::sync::Mutex<()>,
    /// Follow the process's Ctrl-C (a standalone server); an in-process one follows its client.
    signals: bool,
    log: Logger,
    /// What was served, per test and in total.
    counters: Arc<ServerCounters>,
}

impl Shared {
    fn interrupted(&self) -> bool {
        self.signals && nsperf_core::signal::interrupted()
    }
}

/// A bound server, ready to [`Server::serve`].
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.listener.local_addr().ok())
            .finish()
    }
}

const LISTENER: u64 = u64::MAX;

/// The accept-and-greet loop's state.
struct Greeter {
    poller: Poller,
    listening: bool,
    greetings: Greetings,
    backoff: Backoff,
    accept_log: RateLimited,
    drop_log: RateLimited,
}

impl Server {
    /// Binds the listening socket.
    pub fn bind(cfg: ServerConfig, log: Logger) -> Result<Server, NetError> {
        crate::sock::raise_fd_limit();
        let addr = SocketAddr::new(cfg.bind, cfg.port);
        let listener = bind_listener(&addr, cfg.ipv6_only).map_err(|e| NetError::Listen {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                cfg,
                active: AtomicU32::new(0),
                handshaking: AtomicU32::new(0),
                served: AtomicU32::new(0),
                finished: AtomicBool::new(false),
                rendezvous: Rendezvous::default(),
                iperf3_udp: std::sync::Mutex::new(()),
                signals: true,
                log,
                counters: Arc::default(),
            }),
        })
    }

    /// A server that ignores Ctrl-C and follows its client's stop instead (`--loopback`, where
    /// the client prints the partial result).
    pub(crate) fn in_process(mut self) -> Server {
        if let Some(s) = Arc::get_mut(&mut self.shared) {
            s.signals = false;
        }
        self
    }

    /// The server's counters (live: they grow as tests end, also after `serve` returned).
    pub fn counters(&self) -> Arc<ServerCounters> {
        self.shared.counters.clone()
    }

    /// The address actually bound (port 0 becomes the chosen port).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until Ctrl-C, `stop`, or after the first client with `--one-off`.
    pub fn serve(self, stop: &AtomicBool) -> Result<(), NetError> {
        let socket_err = |e: std::io::Error| NetError::Socket(e.to_string());
        self.listener.set_nonblocking(true).map_err(socket_err)?;
        let mut g = Greeter {
            poller: Poller::new(256).map_err(socket_err)?,
            listening: false,
            greetings: Greetings::default(),
            backoff: Backoff::default(),
            accept_log: RateLimited::new(LOG_EVERY),
            drop_log: RateLimited::new(LOG_EVERY),
        };
        let mut ready = Vec::with_capacity(256);
        let mut next_sweep = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed)
                || self.shared.interrupted()
                || self.shared.finished.load(Ordering::Acquire)
            {
                return Ok(());
            }
            let now = Instant::now();
            let paused = g.backoff.until.is_some_and(|t| now < t);
            if !paused && !g.listening {
                g.poller
                    .add(self.listener.as_raw_fd(), Interest::Read, LISTENER)
                    .map_err(socket_err)?;
                g.listening = true;
            }
            let wait = match g.backoff.until {
                Some(t) if paused => t - now,
                _ => Duration::from_millis(100),
            };
            ready.clear();
            ready.extend_from_slice(
                g.poller
                    .wait(wait.min(Duration::from_millis(100)))
                    .map_err(socket_err)?,
            );
            for ev in &ready {
                if ev.token == LISTENER {
                    self.accept_all(&mut g);
                } else {
                    self.greet(&mut g, ev.token as usize);
                }
            }
            let now = Instant::now();
            if now >= next_sweep {
                next_sweep = now + Duration::from_millis(100);
                for i in g.greetings.expired(now) {
                    if let Some(c) = g.greetings.remove(i) {
                        let msg = format!(
                            "{}: dropped: no greeting within {GREETING_TIMEOUT:?}",
                            c.peer
                        );
                        self.log_limited(&mut g.drop_log, &msg);
                    }
                }
            }
        }
    }

    fn log_limited(&self, r: &mut RateLimited, text: &str) {
        if let Some(line) = r.line(Instant::now(), text) {
            (self.shared.log)(&line);
        }
    }

    /// Accepts every waiting connection; on a resource error, stops listening for a while.
    fn accept_all(&self, g: &mut Greeter) {
        for _ in 0..256 {
            match self.listener.accept() {
                Ok((sock, peer)) => {
                    g.backoff.succeeded();
                    if g.greetings.live >= MAX_GREETING || sock.set_nonblocking(true).is_err() {
                        let msg = format!(
                            "{peer}: dropped: {MAX_GREETING} connections are already waiting to greet"
                        );
                        self.log_limited(&mut g.drop_log, &msg);
                        continue;
                    }
                    let fd = sock.as_raw_fd();
                    let i = g.greetings.insert(Greeting {
                        sock,
                        peer,
                        head: [0; crate::iperf3::wire::COOKIE_LEN],
                        got: 0,
                        deadline: Instant::now() + GREETING_TIMEOUT,
                    });
                    if g.poller.add(fd, Interest::Read, i as u64).is_err() {
                        g.greetings.remove(i);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ECONNABORTED | libc::EINTR | libc::EPROTO)
                    ) => {}
                Err(e) => {
                    // Out of descriptors or memory: the pending connection stays queued and
                    // the listener stays readable, so stop watching it until the pause ends.
                    g.backoff.failed(Instant::now());
                    let _ = g.poller.delete(self.listener.as_raw_fd());
                    g.listening = false;
                    let msg =
                        format!("accept failed: {e}; pausing up to {MAX_BACKOFF:?} between tries");
                    self.log_limited(&mut g.accept_log, &msg);
                    return;
                }
            }
        }
    }

    /// Reads a waiting connection's first bytes and hands it on when they are complete.
    fn greet(&self, g: &mut Greeter, i: usize) {
        let Some(c) = g.greetings.slots.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        let outcome = c.read();
        if matches!(outcome, Greeted::More) {
            return;
        }
        let Some(c) = g.greetings.remove(i) else {
            return;
        };
        let _ = g.poller.delete(c.sock.as_raw_fd());
        let peer = c.peer;
        match outcome {
            Greeted::More => {}
            Greeted::Drop(why) => {
                self.log_limited(&mut g.drop_log, &format!("{peer}: dropped: {why}"))
            }
            Greeted::Data(h) => {
                if c.sock.set_nonblocking(false).is_err() {
                    return;
                }
                if !self.shared.rendezvous.deliver(h.cookie, h.stream, c.sock) {
                    let msg = format!("{peer}: dropped: data connection for no test");
                    self.log_limited(&mut g.drop_log, &msg);
                }
            }
            Greeted::Control => self.start_control(g, c),
            Greeted::Iperf3(cookie) => {
                if c.sock.set_nonblocking(false).is_err() {
                    return;
                }
                // A data connection of a running iperf3 test, else a new iperf3 client.
                if let Some(sock) = self.shared.rendezvous.deliver_iperf3(&cookie, c.sock) {
                    let c = Greeting { sock, ..c };
                    self.start_iperf3(g, c, cookie);
                }
            }
        }
    }

    /// Gives a greeted iperf3 client its thread, within [`MAX_HANDSHAKES`].
    fn start_iperf3(
        &self,
        g: &mut Greeter,
        c: Greeting,
        cookie: [u8; crate::iperf3::wire::COOKIE_LEN],
    ) {
        let peer = c.peer;
        let prior = self.shared.handshaking.fetch_add(1, Ordering::AcqRel);
        if prior >= MAX_HANDSHAKES {
            self.shared.handshaking.fetch_sub(1, Ordering::AcqRel);
            let msg = format!("{peer}: dropped: {MAX_HANDSHAKES} handshakes already in progress");
            self.log_limited(&mut g.drop_log, &msg);
            return;
        }
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("iperf3-{peer}"))
            .stack_size(512 * 1024)
            .spawn(move || iperf3::session(c.sock, peer, cookie, shared));
        if let Err(e) = spawned {
            self.shared.handshaking.fetch_sub(1, Ordering::AcqRel);
            let msg = format!("{peer}: cannot start a thread: {e}");
            self.log_limited(&mut g.drop_log, &msg);
        }
    }

    /// Gives a greeted control connection its thread, within [`MAX_HANDSHAKES`].
    fn start_control(&self, g: &mut Greeter, c: Greeting) {
        let peer = c.peer;
        if c.sock.set_nonblocking(false).is_err() {
            return;
        }
        let prior = self.shared.handshaking.fetch_add(1, Ordering::AcqRel);
        if prior >= MAX_HANDSHAKES {
            self.shared.handshaking.fetch_sub(1, Ordering::AcqRel);
            let msg = format!("{peer}: dropped: {MAX_HANDSHAKES} handshakes already in progress");
            self.log_limited(&mut g.drop_log, &msg);
            return;
        }
        let shared = self.shared.clone();
        let head = [c.head[0], c.head[1], c.head[2], c.head[3]];
        let spawned = std::thread::Builder::new()
            .name(format!("conn-{peer}"))
            .stack_size(512 * 1024)
            .spawn(move || control_session(c.sock, peer, head, shared));
        if let Err(e) = spawned {
            self.shared.handshaking.fetch_sub(1, Ordering::AcqRel);
            let msg = format!("{peer}: cannot start a thread: {e}");
            self.log_limited(&mut g.drop_log, &msg);
        }
    }
}

fn bind_listener(addr: &SocketAddr, ipv6_only: bool) -> std::io::Result<TcpListener> {
    let fd = crate::sock::socket_for(addr, libc::SOCK_STREAM)?;
    let raw = fd.as_raw_fd();
    crate::sock::set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if addr.is_ipv6() {
        // Serve IPv4 clients on the IPv6 wildcard too, unless IPv6 only (-6).
        crate::sock::set_int(
            raw,
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            ipv6_only as libc::c_int,
        )
        .or_else(|e| if ipv6_only { Err(e) } else { Ok(()) })?;
    }
    crate::sock::bind_fd(raw, addr)?;
    // SAFETY: listen on a bound socket.
    if unsafe { libc::listen(raw, 1024) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(std::net::TcpListener::from(fd))
}

/// Decrements a counter when dropped (a handshake or an admitted client ends).
struct Counted<'a>(Option<&'a AtomicU32>);

impl Counted<'_> {
    fn release(&mut self) {
        if let Some(c) = self.0.take() {
            c.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// One control connection from its greeting to the end of its test.
fn control_session(sock: TcpStream, peer: SocketAddr, head: [u8; 4], shared: Arc<Shared>) {
    let handshake = Counted(Some(&shared.handshaking));
    let mut conn = ControlConn::new(sock, &head);
    if let Err(e) = serve_client(&mut conn, peer, &shared, handshake) {
        (shared.log)(&format!("{peer}: dropped: {e}"));
        let _ = conn.send(&Msg::Error { message: e.clone() });
    }
    return_memory_when_idle(&shared);
}

/// With no test running, hands the memory the tests freed back to the system: glibc's
/// allocator keeps the free pages inside each thread's arena for reuse (after a soak of 50
/// faulty clients the idle server measured 15-18 MiB without this, 10-11 MiB with it, from
/// 6 MiB before). musl's allocator returns freed memory by itself.
fn return_memory_when_idle(shared: &Shared) {
    if shared.active.load(Ordering::Acquire) == 0 && shared.handshaking.load(Ordering::Acquire) == 0
    {
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim only releases free memory of the allocator; no pointer is
        // involved.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

fn policy(cfg: &ServerConfig) -> ServerPolicy {
    ServerPolicy {
        psk: cfg.psk.clone(),
        max_streams: cfg.max_streams,
        max_time_ns: cfg.max_time.map(|d| d.as_nanos() as u64).unwrap_or(0),
    }
}

/// Takes a client slot, or `None` at `--max-clients` (or after the one test of `--one-off`).
fn admit(shared: &Shared) -> Option<Counted<'_>> {
    let max = if shared.cfg.one_off {
        1
    } else {
        shared.cfg.max_clients
    };
    let prior = shared.active.fetch_add(1, Ordering::AcqRel);
    let slot = Counted(Some(&shared.active));
    if prior >= max || (shared.cfg.one_off && shared.served.load(Ordering::Acquire) > 0) {
        return None;
    }
    shared.served.fetch_add(1, Ordering::AcqRel);
    Some(slot)
}

/// Runs one client's control session to its end. `Err` is the one log line.
fn serve_client(
    conn: &mut ControlConn,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    mut handshake: Counted<'_>,
) -> Result<(), String> {
    let nonce = os_random::<32>()?;
    let mut session = ServerSession::new(policy(&shared.cfg), nonce);
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no test request within {HANDSHAKE_TIMEOUT:?}"));
        }
        let msg = match conn.recv(Some(left)) {
            Ok(Some(m)) => m,
            Ok(None) => return Err(format!("no test request within {HANDSHAKE_TIMEOUT:?}")),
            Err(RecvError::Closed) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        let actions = session.on_msg(msg).map_err(|e| e.to_string())?;
        for a in actions {
            match a {
                ServerAction::Send(m) => {
                    if let Msg::Refused { message, .. } = &m {
                        (shared.log)(&format!("{peer}: refused: {message}"));
                    }
                    conn.send(&m).map_err(|e| e.to_string())?;
                }
                ServerAction::Close => return Ok(()),
                ServerAction::Prepare(p) => {
                    handshake.release();
                    let Some(slot) = admit(shared) else {
                        let message = format!(
                            "server is at capacity (--max-clients {}); try again later",
                            if shared.cfg.one_off {
                                1
                            } else {
                                shared.cfg.max_clients
                            }
                        );
                        (shared.log)(&format!("{peer}: refused: {message}"));
                        let m = session.prepare_failed(RefuseReason::Capacity, message);
                        return conn.send(&m).map_err(|e| e.to_string());
                    };
                    (shared.log)(&format!(
                        "{peer}: test: {:?} {:?}, {} stream(s), {:.1} s",
                        p.protocol,
                        p.mode,
                        p.stream_count(),
                        p.total_time_ns() as f64 / 1e9
                    ));
                    let env = TestEnv {
                        cfg: &shared.cfg,
                        rendezvous: &shared.rendezvous,
                        signals: shared.signals,
                        counters: &shared.counters,
                        test_id: shared.counters.test_started(peer),
                        peer,
                        counted: std::cell::Cell::new(false),
                    };
                    let cookie = u64::from_le_bytes(os_random::<8>()?);
                    let r = test::run_test(conn, &mut session, p, cookie, &env);
                    if let Err(e) = &r
                        && !env.counted.get()
                    {
                        shared.counters.test_failed(env.test_id, peer, e);
                    }
                    drop(slot);
                    if shared.cfg.one_off {
                        shared.finished.store(true, Ordering::Release);
                    }
                    r?;
                    (shared.log)(&format!("{peer}: test done"));
                    return Ok(());
                }
                ServerAction::Stop => return Err("stop outside a test".into()),
            }
        }
    }
}
