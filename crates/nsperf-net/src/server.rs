//! `nsperf server`: one listening port for control and TCP data connections, a thread per
//! client, so many clients are served at once. A misbehaving client is dropped with one log
//! line and never affects the others.

use std::collections::HashMap;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::{Mode, Protocol, ServerConfig, TestParams};
use crate::control::{ControlConn, RecvError};
use crate::error::NetError;
use crate::meter::{Recorder, StreamMeter, StreamSocket};
use crate::proto::frame::{DATA_MAGIC, MAGIC};
use crate::proto::session::{ServerAction, ServerPolicy, ServerSession};
use crate::proto::{Accepted, DataHello, Msg, RefuseReason};
use crate::tcp::{self, Control};

/// Where the server writes its one-line log messages.
pub type Logger = Arc<dyn Fn(&str) + Send + Sync>;

/// Fills `buf` with random bytes from the kernel.
pub fn random_bytes(buf: &mut [u8]) {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: writes at most the remaining length into `buf`.
        let n =
            unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n <= 0 {
            // getrandom cannot fail for small requests on Linux ≥ 3.17; fall back to time.
            let t = nsperf_core::clock::unix_time_ns().to_le_bytes();
            for (i, b) in buf[filled..].iter_mut().enumerate() {
                *b = t[i % 8] ^ (i as u8);
            }
            return;
        }
        filled += n as usize;
    }
}

type DataSender = mpsc::Sender<(u32, TcpStream)>;

struct Shared {
    cfg: ServerConfig,
    active: AtomicU32,
    pending: Mutex<HashMap<u64, DataSender>>,
    served: AtomicU32,
    finished: AtomicBool,
    log: Logger,
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

impl Server {
    /// Binds the listening socket.
    pub fn bind(cfg: ServerConfig, log: Logger) -> Result<Server, NetError> {
        let addr = SocketAddr::new(cfg.bind, cfg.port);
        let listener = bind_listener(&addr).map_err(|e| NetError::Listen {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                cfg,
                active: AtomicU32::new(0),
                pending: Mutex::new(HashMap::new()),
                served: AtomicU32::new(0),
                finished: AtomicBool::new(false),
                log,
            }),
        })
    }

    /// The address actually bound (port 0 becomes the chosen port).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until Ctrl-C, `stop`, or after the first client with `--one-off`.
    pub fn serve(self, stop: &AtomicBool) -> Result<(), NetError> {
        let fd = self.listener.as_raw_fd();
        loop {
            if stop.load(Ordering::Relaxed)
                || nsperf_core::signal::interrupted()
                || self.shared.finished.load(Ordering::Acquire)
            {
                return Ok(());
            }
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, 200) };
            if n <= 0 {
                continue;
            }
            match self.listener.accept() {
                Ok((sock, peer)) => {
                    let shared = self.shared.clone();
                    let spawned = std::thread::Builder::new()
                        .name(format!("conn-{peer}"))
                        .stack_size(512 * 1024)
                        .spawn(move || dispatch(sock, peer, shared));
                    if let Err(e) = spawned {
                        (self.shared.log)(&format!("{peer}: cannot start a thread: {e}"));
                    }
                }
                Err(e) => (self.shared.log)(&format!("accept failed: {e}")),
            }
        }
    }
}

fn bind_listener(addr: &SocketAddr) -> std::io::Result<TcpListener> {
    let fd = crate::sock::socket_for(addr, libc::SOCK_STREAM)?;
    let raw = fd.as_raw_fd();
    crate::sock::set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if addr.is_ipv6() {
        // Serve IPv4 clients on the IPv6 wildcard too.
        let _ = crate::sock::set_int(raw, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0);
    }
    crate::sock::bind_fd(raw, addr)?;
    // SAFETY: listen on a bound socket.
    if unsafe { libc::listen(raw, 1024) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(std::net::TcpListener::from(fd))
}

/// Reads the first bytes of a new connection and hands it to a control session or to the
/// test whose cookie its data hello names.
fn dispatch(mut sock: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = [0u8; 4];
    if let Err(e) = sock.read_exact(&mut head) {
        (shared.log)(&format!("{peer}: dropped: no greeting ({e})"));
        return;
    }
    if head == DATA_MAGIC {
        let mut rest = [0u8; DataHello::LEN];
        rest[..4].copy_from_slice(&head);
        if let Err(e) = sock.read_exact(&mut rest[4..]) {
            (shared.log)(&format!("{peer}: dropped: short data hello ({e})"));
            return;
        }
        let Some(h) = DataHello::decode(&rest) else {
            return;
        };
        let tx = shared
            .pending
            .lock()
            .ok()
            .and_then(|p| p.get(&h.cookie).cloned());
        match tx {
            Some(tx) => {
                let _ = tx.send((h.stream, sock));
            }
            None => (shared.log)(&format!("{peer}: dropped: data connection for no test")),
        }
        return;
    }
    if head != MAGIC {
        (shared.log)(&format!(
            "{peer}: dropped: not an nsperf client (first bytes {head:02x?})"
        ));
        return;
    }
    let max = if shared.cfg.one_off {
        1
    } else {
        shared.cfg.max_clients
    };
    let prior = shared.active.fetch_add(1, Ordering::AcqRel);
    let at_capacity =
        prior >= max || (shared.cfg.one_off && shared.served.load(Ordering::Acquire) > 0);
    let counted = ActiveGuard(&shared.active);
    if !at_capacity {
        shared.served.fetch_add(1, Ordering::AcqRel);
    }
    let mut conn = ControlConn::new(sock, &head);
    match serve_client(&mut conn, peer, &shared, at_capacity) {
        Ok(()) => {}
        Err(e) => {
            (shared.log)(&format!("{peer}: dropped: {e}"));
            let _ = conn.send(&Msg::Error { message: e.clone() });
        }
    }
    drop(counted);
    if shared.cfg.one_off && !at_capacity {
        shared.finished.store(true, Ordering::Release);
    }
}

struct ActiveGuard<'a>(&'a AtomicU32);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn policy(cfg: &ServerConfig) -> ServerPolicy {
    ServerPolicy {
        psk: cfg.psk.clone(),
        max_streams: cfg.max_streams,
        max_time_ns: cfg.max_time.map(|d| d.as_nanos() as u64).unwrap_or(0),
    }
}

/// Runs one client's control session to its end. `Err` is the one log line.
fn serve_client(
    conn: &mut ControlConn,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    at_capacity: bool,
) -> Result<(), String> {
    let mut nonce = [0u8; 32];
    random_bytes(&mut nonce);
    let mut session = ServerSession::new(policy(&shared.cfg), nonce, at_capacity);
    loop {
        let msg = match conn.recv(Some(Duration::from_secs(30))) {
            Ok(Some(m)) => m,
            Ok(None) => return Err("no request within 30 s".into()),
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
                    (shared.log)(&format!(
                        "{peer}: test: {:?} {:?}, {} stream(s), {:.1} s",
                        p.protocol,
                        p.mode,
                        p.stream_count(),
                        p.total_time_ns() as f64 / 1e9
                    ));
                    run_test(conn, &mut session, p, shared)?;
                    (shared.log)(&format!("{peer}: test done"));
                    return Ok(());
                }
                ServerAction::Stop => return Err("stop outside a test".into()),
            }
        }
    }
}

/// Removes the test's cookie from the pending table when the test ends.
struct PendingGuard<'a> {
    shared: &'a Shared,
    cookie: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut p) = self.shared.pending.lock() {
            p.remove(&self.cookie);
        }
    }
}

/// Sets up, runs and reports one test on the server side.
fn run_test(
    conn: &mut ControlConn,
    session: &mut ServerSession,
    p: TestParams,
    shared: &Arc<Shared>,
) -> Result<(), String> {
    // A congestion control the server's kernel lacks is refused before anything starts.
    if let Some(cc) = &p.congestion {
        let probe =
            crate::sock::socket_for(&SocketAddr::from(([127, 0, 0, 1], 0)), libc::SOCK_STREAM)
                .map_err(|e| e.to_string())?;
        if let Err(e) = crate::sock::set_congestion(probe.as_raw_fd(), cc) {
            let m =
                session.prepare_failed(RefuseReason::Unsupported, format!("on the server: {e}"));
            return conn.send(&m).map_err(|e| e.to_string());
        }
    }
    let mut cookie_bytes = [0u8; 8];
    random_bytes(&mut cookie_bytes);
    let cookie = u64::from_le_bytes(cookie_bytes);
    let (tx, rx) = mpsc::channel();
    shared
        .pending
        .lock()
        .map_err(|_| "internal lock poisoned".to_string())?
        .insert(cookie, tx);
    let _guard = PendingGuard {
        shared: shared.as_ref(),
        cookie,
    };
    let n = p.stream_count();
    let udp_socks = if p.protocol == Protocol::Udp {
        let local = conn.socket().local_addr().map_err(|e| e.to_string())?.ip();
        let local = match local {
            std::net::IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map(std::net::IpAddr::V4)
                .unwrap_or(std::net::IpAddr::V6(v6)),
            v4 => v4,
        };
        let mut v = Vec::with_capacity(n as usize);
        for id in 0..n {
            let u = std::net::UdpSocket::bind((local, 0))
                .map_err(|e| format!("cannot bind a UDP socket: {e}"))?;
            crate::udp::setup_socket(&u, p.window, p.stream_is_up(id));
            v.push(u);
        }
        v
    } else {
        Vec::new()
    };
    let accepted = session.accepted(Accepted {
        cookie,
        udp_ports: udp_socks
            .iter()
            .map(|u| u.local_addr().map(|a| a.port()).unwrap_or(0))
            .collect(),
        facts: nsperf_core::host::HostFacts::collect(),
    });
    conn.send(&accepted).map_err(|e| e.to_string())?;
    if p.protocol == Protocol::Udp {
        return run_udp_test(conn, session, p, udp_socks, cookie, shared);
    }

    // Collect every data connection.
    let mut socks: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut got = 0;
    while got < n {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "only {got} of {n} data connections arrived within 15 s"
            ));
        }
        match rx.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok((id, s)) => {
                let slot = socks
                    .get_mut(id as usize)
                    .ok_or_else(|| format!("data connection for stream {id} of {n}"))?;
                if slot.is_some() {
                    return Err(format!("two data connections for stream {id}"));
                }
                crate::sock::apply_tcp(s.as_raw_fd(), &p).map_err(|e| e.to_string())?;
                *slot = Some(s);
                got += 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // The client may have given up meanwhile.
                if let Err(RecvError::Closed) = conn.recv(Some(Duration::from_millis(1))) {
                    return Err("client left while connecting".into());
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err("internal channel closed".into());
            }
        }
    }
    let ctl = Arc::new(Control::default());
    let mut meters = Vec::with_capacity(n as usize);
    let mut handles = Vec::with_capacity(n as usize);
    let streams_up = p.streams.max(1) as u64;
    for (id, s) in socks.into_iter().enumerate() {
        let id = id as u32;
        let s = Arc::new(s.expect("all slots filled"));
        let sending = !p.stream_is_up(id) && p.mode == Mode::Stream;
        let meter = StreamMeter::new(id, sending, StreamSocket::Tcp(s.clone()));
        meters.push(meter.clone());
        let (ctl, p2) = (ctl.clone(), p.clone());
        let local_index = if p.direction == crate::config::Direction::Both {
            id as u64 % streams_up
        } else {
            id as u64
        };
        let quota = crate::client::quota(p.bytes, streams_up, local_index);
        let h = tcp::spawn(format!("s{id}"), move || match p2.mode {
            Mode::Stream if sending => {
                tcp::send(&meter, &s, p2.len as usize, quota, p2.zerocopy, &ctl)
            }
            Mode::Stream => tcp::receive(&meter, &s, p2.len as usize, p2.streams, &ctl),
            Mode::Rr {
                request_bytes,
                response_bytes,
            } => crate::rr::respond(&meter, &s, request_bytes, response_bytes, &ctl),
            Mode::Sweep { .. } => crate::rr::echo(&meter, &s, &ctl),
        })
        .map_err(|e| format!("cannot start a data thread: {e}"))?;
        handles.push(h);
    }
    run_and_report(conn, session, meters, handles, ctl, &p, shared)
}

/// Sends Start, samples until the client's Stop and every data thread ended, sends the
/// results.
fn run_and_report(
    conn: &mut ControlConn,
    session: &mut ServerSession,
    meters: Vec<Arc<StreamMeter>>,
    handles: Vec<std::thread::JoinHandle<()>>,
    ctl: Arc<Control>,
    p: &TestParams,
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let awake = if shared.cfg.deny_awake {
        None
    } else {
        p.awake_hold()
    };
    let start = session.started();
    let mut rec = Recorder::new("server", meters);
    let aborted = || {
        ctl.abort.store(true, Ordering::Release);
    };
    if let Err(e) = conn.send(&start) {
        aborted();
        return Err(e.to_string());
    }
    let interval = Duration::from_nanos(p.interval_ns);
    let max_time = shared.cfg.max_time;
    let mut next_tick = rec.start() + interval;
    let mut stop_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if now >= next_tick && stop_at.is_none() {
            rec.tick();
            next_tick += interval;
            if next_tick < now {
                next_tick = now + interval;
            }
        }
        if let Some(max) = max_time
            && rec.start().elapsed() > max + Duration::from_secs(1)
            && stop_at.is_none()
        {
            ctl.stop.store(true, Ordering::Release);
            stop_at = Some(Instant::now());
        }
        if stop_at.is_some() && rec.all_done() {
            break;
        }
        if let Some(t) = stop_at
            && t.elapsed() > Duration::from_secs(10)
        {
            // The peer stopped reading: give up on the stragglers.
            ctl.abort.store(true, Ordering::Release);
            if rec.all_done() || t.elapsed() > Duration::from_secs(12) {
                break;
            }
        }
        let wait = next_tick
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(if stop_at.is_some() {
                5
            } else {
                200
            }));
        match conn.recv(Some(wait)) {
            Ok(None) => {}
            Ok(Some(m)) => match session.on_msg(m) {
                Ok(actions) => {
                    if actions.contains(&ServerAction::Stop) && stop_at.is_none() {
                        ctl.stop.store(true, Ordering::Release);
                        stop_at = Some(Instant::now());
                    }
                }
                Err(e) => {
                    aborted();
                    return Err(e.to_string());
                }
            },
            Err(e) => {
                aborted();
                return Err(match e {
                    RecvError::Closed => "client left during the test".into(),
                    e => e.to_string(),
                });
            }
        }
        if nsperf_core::signal::interrupted() {
            aborted();
            return Err("server interrupted".into());
        }
    }
    for h in handles {
        let _ = h.join();
    }
    // The last interval ends when the last data moved (the end of stream, or a UDP
    // receiver's last datagram before its idle drain).
    let end = rec
        .last_activity()
        .max(stop_at.unwrap_or_else(Instant::now));
    rec.tick_at(end);
    let mut results = rec.finish(p.interval_ns as f64 / 1e9 / 4.0);
    results.cpu_awake = awake.is_some();
    drop(awake);
    let msg = session.finish(results);
    conn.send(&msg).map_err(|e| e.to_string())
}

/// Waits for the client's hello datagram on every UDP socket and connects each socket to
/// its sender, then runs the test.
fn run_udp_test(
    conn: &mut ControlConn,
    session: &mut ServerSession,
    p: TestParams,
    socks: Vec<std::net::UdpSocket>,
    cookie: u64,
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut ready = vec![false; socks.len()];
    for s in &socks {
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
    }
    let mut buf = [0u8; 2048];
    while ready.iter().any(|r| !r) {
        if Instant::now() > deadline {
            return Err("the client's UDP hello datagrams did not arrive within 15 s".into());
        }
        let mut progress = false;
        for (id, s) in socks.iter().enumerate() {
            if ready[id] {
                continue;
            }
            while let Ok((n, from)) = s.recv_from(&mut buf) {
                if let Some(h) = crate::udp::Header::read(&buf[..n])
                    && h.seq == crate::udp::HELLO_SEQ
                    && h.cookie == cookie as u32
                    && h.stream == id as u32
                {
                    s.connect(from).map_err(|e| e.to_string())?;
                    ready[id] = true;
                    progress = true;
                    break;
                }
            }
        }
        if !progress {
            if let Err(RecvError::Closed) = conn.recv(Some(Duration::from_millis(5))) {
                return Err("client left while setting up UDP".into());
            }
        }
    }
    let ctl = Arc::new(Control::default());
    let mut meters = Vec::with_capacity(socks.len());
    let mut handles = Vec::with_capacity(socks.len());
    let streams_per_dir = p.streams.max(1) as u64;
    for (id, s) in socks.into_iter().enumerate() {
        s.set_nonblocking(false).map_err(|e| e.to_string())?;
        let id = id as u32;
        let s = Arc::new(s);
        let sending = !p.stream_is_up(id);
        let meter = StreamMeter::new(id, sending, StreamSocket::Udp(s.clone()));
        meters.push(meter.clone());
        let (ctl, p2) = (ctl.clone(), p.clone());
        let plan = crate::udp::SendPlan {
            len: p.len as usize,
            rate_bps: p.rate_bps,
            quota: crate::client::quota(p.bytes, streams_per_dir, id as u64 % streams_per_dir),
            offload: p.udp_offload,
            stream: id,
            cookie,
        };
        let h = tcp::spawn(format!("u{id}"), move || {
            if sending {
                crate::udp::send(&meter, &s, plan, &ctl)
            } else {
                crate::udp::receive(&meter, &s, p2.len as usize, p2.udp_offload, cookie, &ctl)
            }
        })
        .map_err(|e| format!("cannot start a data thread: {e}"))?;
        handles.push(h);
    }
    run_and_report(conn, session, meters, handles, ctl, &p, shared)
}
