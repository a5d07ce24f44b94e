//! One test on the server side: the data connections (delivered by the greeter through the
//! [`Rendezvous`]) or UDP sockets, the data threads, the interval sampler, and the results
//! sent to the client.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::bulk::{BulkPlan, BulkStream};
use crate::config::{Mode, Protocol, ServerConfig, TestParams};
use crate::control::{ControlConn, RecvError};
use crate::datagram::Format;
use crate::iperf3::wire::COOKIE_LEN;
use crate::meter::{Recorder, StreamMeter, StreamSocket};
use crate::proto::session::{ServerAction, ServerSession};
use crate::proto::{Accepted, RefuseReason};
use crate::results::IntervalMark;
use crate::tcp::{self, Control};

type DataSender = mpsc::Sender<(u32, TcpStream)>;

/// Where data connections meet their test: the open tests by cookie.
#[derive(Default)]
pub(super) struct Rendezvous {
    tests: Mutex<HashMap<u64, DataSender>>,
    /// iperf3 tests by their cookie (a data connection repeats its test's cookie).
    pub(super) iperf3: Mutex<HashMap<[u8; COOKIE_LEN], DataSender>>,
}

impl Rendezvous {
    /// Hands a data connection to the test `cookie`; false when no such test is open.
    pub(super) fn deliver(&self, cookie: u64, stream: u32, sock: TcpStream) -> bool {
        let tx = self.tests.lock().ok().and_then(|t| t.get(&cookie).cloned());
        tx.is_some_and(|tx| tx.send((stream, sock)).is_ok())
    }

    /// Hands a connection that greeted with an iperf3 cookie to its test; gives it back when
    /// no test has that cookie (then it is a new client's control connection).
    pub(super) fn deliver_iperf3(
        &self,
        cookie: &[u8; COOKIE_LEN],
        sock: TcpStream,
    ) -> Option<TcpStream> {
        let tx = self.iperf3.lock().ok().and_then(|t| t.get(cookie).cloned());
        match tx {
            Some(tx) => match tx.send((0, sock)) {
                Ok(()) => None,
                Err(mpsc::SendError((_, sock))) => Some(sock),
            },
            None => Some(sock),
        }
    }
}

/// What a test needs from its server.
pub(super) struct TestEnv<'a> {
    pub(super) cfg: &'a ServerConfig,
    pub(super) rendezvous: &'a Rendezvous,
    /// Abort on the process's Ctrl-C (a standalone server).
    pub(super) signals: bool,
    /// The server's counters, given this test's figures when it ends.
    pub(super) counters: &'a super::ServerCounters,
    /// The test's number in the counters.
    pub(super) test_id: u64,
    /// The client's control connection.
    pub(super) peer: std::net::SocketAddr,
    /// Whether this test is in the counters already.
    pub(super) counted: std::cell::Cell<bool>,
}

/// Removes the test's cookie from the pending table when the test ends.
struct PendingGuard<'a> {
    rendezvous: &'a Rendezvous,
    cookie: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut t) = self.rendezvous.tests.lock() {
            t.remove(&self.cookie);
        }
    }
}

/// Sets up, runs and reports one test on the server side.
pub(super) fn run_test(
    conn: &mut ControlConn,
    session: &mut ServerSession,
    p: TestParams,
    cookie: u64,
    env: &TestEnv<'_>,
) -> Result<(), String> {
    // A CPU this host does not let the server use (-A) is refused before anything starts.
    if let Some(cpu) = p.server_cpu
        && let Err(e) = crate::tcp::check_cpu(cpu, "server")
    {
        let m = session.prepare_failed(RefuseReason::Unsupported, e);
        return conn.send(&m).map_err(|e| e.to_string());
    }
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
    let (tx, rx) = mpsc::channel();
    env.rendezvous
        .tests
        .lock()
        .map_err(|_| "internal lock poisoned".to_string())?
        .insert(cookie, tx);
    let _guard = PendingGuard {
        rendezvous: env.rendezvous,
        cookie,
    };
    let n = p.stream_count();
    let udp_socks = if p.protocol == Protocol::Udp {
        udp_sockets(conn, &p, n)?
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
        return run_udp_test(conn, session, p, udp_socks, cookie, env);
    }

    let socks = collect_data_connections(conn, &rx, &p, n)?;
    let ctl = Arc::new(Control::on_cpu(p.server_cpu));
    let mut meters = Vec::with_capacity(n as usize);
    let mut handles = Vec::with_capacity(n as usize);
    let mut bulk = Vec::new();
    let streams_up = p.streams.max(1) as u64;
    let started = (|| {
        for (id, s) in socks.into_iter().enumerate() {
            let id = id as u32;
            let s = Arc::new(s.expect("all slots filled"));
            let sending = !p.stream_is_up(id) && p.mode == Mode::Stream;
            let meter = StreamMeter::new(id, sending, StreamSocket::Tcp(s.clone()));
            meters.push(meter.clone());
            let ctl = ctl.clone();
            let local_index = if p.direction == crate::config::Direction::Both {
                id as u64 % streams_up
            } else {
                id as u64
            };
            let quota = crate::config::quota(p.bytes, streams_up, local_index);
            let h = match p.mode {
                Mode::Stream => {
                    bulk.push(BulkStream {
                        meter,
                        sock: s,
                        quota,
                    });
                    continue;
                }
                Mode::Rr {
                    request_bytes,
                    response_bytes,
                    burst,
                } => {
                    let shape = crate::rr::Shape {
                        request_bytes,
                        response_bytes,
                        burst,
                    };
                    tcp::spawn(format!("s{id}"), ctl.cpu, move || {
                        crate::rr::respond(&meter, &s, shape, &ctl)
                    })
                }
                Mode::Sweep {
                    min_bytes,
                    max_bytes,
                } => tcp::spawn(format!("s{id}"), ctl.cpu, move || {
                    crate::sweep::reply(&meter, &s, min_bytes, max_bytes, &ctl)
                }),
            };
            handles.push(h?);
        }
        let plan = BulkPlan {
            len: p.len as usize,
            zerocopy: p.zerocopy,
            streams: p.streams,
            pacing_bps: p.rate_bps,
        };
        if !bulk.is_empty() {
            handles.extend(crate::bulk::spawn(bulk, plan, &ctl, 's')?);
        }
        Ok::<(), std::io::Error>(())
    })();
    if let Err(e) = started {
        ctl.abort.store(true, Ordering::Release);
        return Err(format!("cannot start a data thread: {e}"));
    }
    run_and_report(conn, session, meters, handles, ctl, &p, env)
}

/// The server's UDP sockets of a UDP test, one per stream, on the address the control
/// connection arrived at (an IPv4-mapped address as plain IPv4).
fn udp_sockets(
    conn: &ControlConn,
    p: &TestParams,
    n: u32,
) -> Result<Vec<std::net::UdpSocket>, String> {
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
        if let Some(tos) = p.tos {
            crate::sock::set_tos(u.as_raw_fd(), local.is_ipv6(), tos).map_err(|e| e.to_string())?;
        }
        v.push(u);
    }
    Ok(v)
}

/// Waits (at most 15 s) for the test's `n` data connections, which the accept loop hands
/// over through `rx`, and applies the test's TCP options to each.
fn collect_data_connections(
    conn: &mut ControlConn,
    rx: &mpsc::Receiver<(u32, TcpStream)>,
    p: &TestParams,
    n: u32,
) -> Result<Vec<Option<TcpStream>>, String> {
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
                crate::sock::apply_tcp(s.as_raw_fd(), p).map_err(|e| e.to_string())?;
                // The client's -S/--dscp marks this end's data packets too (its data with -R,
                // its ACKs otherwise), as iperf3's server does.
                if let Some(tos) = p.tos {
                    let v6 = s.local_addr().is_ok_and(|a| a.is_ipv6());
                    crate::sock::set_tos(s.as_raw_fd(), v6, tos).map_err(|e| e.to_string())?;
                }
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
    Ok(socks)
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
    env: &TestEnv<'_>,
) -> Result<(), String> {
    let awake = if env.cfg.deny_awake {
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
    let max_time = env.cfg.max_time;
    let mut next_tick = rec.start() + interval;
    let mut stop_at: Option<Instant> = None;
    let mut ended_early = None;
    let mut moved = (0u64, Instant::now());
    let total = Duration::from_nanos(p.total_time_ns());
    loop {
        let now = Instant::now();
        if now >= next_tick && stop_at.is_none() {
            let closed = rec.tick();
            publish(env, &rec, closed);
            next_tick += interval;
            if next_tick < now {
                next_tick = now + interval;
            }
        }
        if let Some(max) = max_time
            && rec.start().elapsed() > max + Duration::from_secs(1)
            && stop_at.is_none()
        {
            // Both directions end now: the client's senders see the connections close.
            ctl.stop.store(true, Ordering::Release);
            aborted();
            stop_at = Some(Instant::now());
            ended_early = Some(format!(
                "the server ended the test at its --max-time of {:.1} s",
                max.as_secs_f64()
            ));
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
        // A client that went silent (stopped, or gone without closing): no Stop and no data
        // for a while, or no Stop long after the planned end. Checked after reading, so a
        // Stop that waited while this thread was starved of CPU still counts.
        let now = Instant::now();
        let bytes: u64 = rec
            .meters()
            .iter()
            .map(|m| m.bytes.load(Ordering::Relaxed))
            .sum();
        if bytes != moved.0 {
            moved = (bytes, now);
        }
        let silent = env.cfg.silent_client;
        let overdue = p.duration_ns > 0 && rec.start().elapsed() > total + silent;
        if stop_at.is_none() && (now - moved.1 > silent || overdue) {
            aborted();
            return Err(format!(
                "client silent: no stop{} for {}",
                if overdue { "" } else { " and no data" },
                nsperf_core::units::format_duration(silent)
            ));
        }
        if env.signals && nsperf_core::signal::interrupted() {
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
    let last = rec.tick_at(end);
    publish(env, &rec, last);
    let mut results = rec.finish(p.interval_ns as f64 / 1e9 / 4.0);
    results.cpu_awake = awake.is_some();
    results.ended_early = ended_early;
    drop(awake);
    env.counters.test_ended(
        env.test_id,
        env.peer,
        &results,
        results.ended_early.as_deref(),
    );
    env.counted.set(true);
    let msg = session.finish(results);
    conn.send(&msg).map_err(|e| e.to_string())
}

/// Gives the counters the interval that just closed (for a metrics endpoint).
fn publish(env: &TestEnv<'_>, rec: &Recorder, (mark, deltas): (IntervalMark, Vec<u64>)) {
    let sending: Vec<bool> = rec.meters().iter().map(|m| m.sending).collect();
    env.counters
        .test_interval(env.test_id, &sending, &deltas, mark.length_s);
}

/// Waits for the client's hello datagram on every UDP socket and connects each socket to
/// its sender, then runs the test.
fn run_udp_test(
    conn: &mut ControlConn,
    session: &mut ServerSession,
    p: TestParams,
    socks: Vec<std::net::UdpSocket>,
    cookie: u64,
    env: &TestEnv<'_>,
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
                if let Some(h) = crate::datagram::Header::read(&buf[..n])
                    && h.seq == crate::datagram::HELLO_SEQ
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
    let ctl = Arc::new(Control::on_cpu(p.server_cpu));
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
            quota: crate::config::quota(p.bytes, streams_per_dir, id as u64 % streams_per_dir),
            offload: p.udp_offload,
            format: Format::Nsperf {
                stream: id,
                cookie: cookie as u32,
            },
        };
        let format = plan.format;
        let h = tcp::spawn(format!("u{id}"), ctl.cpu, move || {
            if sending {
                crate::udp::send(&meter, &s, plan, &ctl)
            } else {
                crate::udp::receive(&meter, &s, p2.len as usize, p2.udp_offload, format, &ctl)
            }
        })
        .map_err(|e| format!("cannot start a data thread: {e}"))?;
        handles.push(h);
    }
    run_and_report(conn, session, meters, handles, ctl, &p, env)
}
