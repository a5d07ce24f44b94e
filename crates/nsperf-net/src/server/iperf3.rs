//! Serving an iperf3 client (3.9–3.17) on the nsperf server's port: the socket shell around
//! [`ServerSession`], with nsperf's data paths and meters.
//!
//! The greeter hands over a connection that started with an iperf3 cookie. Its TCP data
//! connections come back through the greeter with the same cookie; its UDP streams arrive as
//! one connect datagram each on the server's port over UDP, answered one at a time (as
//! iperf3 does), so one test at a time sets up UDP streams. When the client sends
//! `TEST_END`, the receivers read what is still in flight (until 100 ms pass without data)
//! before the results are counted, so the client's sent bytes and the reported received
//! bytes match.

use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::{Counted, Shared, admit};
use crate::bulk::{BulkPlan, BulkStream};
use crate::config::{Protocol, TestParams};
use crate::datagram::Format;
use crate::iperf3::params::{Caps, from_iperf3};
use crate::iperf3::session::{ServerEvent, ServerSession};
use crate::iperf3::wire::{COOKIE_LEN, ErrorCode, Params, Results, UDP_CONNECT_REPLY};
use crate::meter::{Recorder, StreamMeter, StreamSocket};
use crate::tcp::Control;

/// How long the data connections may take to arrive.
const STREAMS_TIMEOUT: Duration = Duration::from_secs(15);
/// After `TEST_END`: the receivers stop once no data came for this long…
const DRAIN_QUIET: Duration = Duration::from_millis(100);
/// …or after this long at most.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// The control connection of an iperf3 client.
type Ctrl = crate::iperf3::ctrl::Ctrl<ServerSession>;

/// One iperf3 client from its cookie to the end of its test.
pub(super) fn session(
    sock: TcpStream,
    peer: SocketAddr,
    cookie: [u8; COOKIE_LEN],
    shared: Arc<Shared>,
) {
    let handshake = Counted(Some(&shared.handshaking));
    let mut ctrl = Ctrl::new(sock);
    if let Err(e) = serve(&mut ctrl, peer, cookie, &shared, handshake) {
        (shared.log)(&format!("{peer}: iperf3 client dropped: {e}"));
    }
    super::return_memory_when_idle(&shared);
}

fn serve(
    ctrl: &mut Ctrl,
    peer: SocketAddr,
    cookie: [u8; COOKIE_LEN],
    shared: &Arc<Shared>,
    mut handshake: Counted<'_>,
) -> Result<(), String> {
    let (mut s, pe) = ServerSession::new(Instant::now());
    ctrl.send(&pe)?;
    let q = loop {
        let evs = ctrl.pump(&mut s, Duration::from_millis(200))?;
        if let Some(ServerEvent::Prepare(q)) = evs.into_iter().next() {
            break q;
        }
        if shared.interrupted() {
            return Err("server interrupted".into());
        }
    };
    handshake.release();
    let Some(slot) = admit(shared) else {
        (shared.log)(&format!(
            "{peer}: iperf3 client refused: at capacity (--max-clients)"
        ));
        return ctrl.send(&s.deny(Instant::now()));
    };
    let caps = Caps {
        max_streams: shared.cfg.max_streams,
        max_time_s: shared.cfg.max_time.map_or(0, |d| d.as_secs().max(1)),
    };
    let mut p = match from_iperf3(&q, caps) {
        Ok(p) => p,
        Err(r) => {
            (shared.log)(&format!("{peer}: iperf3 client refused: {}", r.message));
            return ctrl.send(&s.refuse(r.code, 0, Instant::now()));
        }
    };
    if let Some(cc) = p.congestion.clone() {
        let probe =
            crate::sock::socket_for(&SocketAddr::from(([127, 0, 0, 1], 0)), libc::SOCK_STREAM)
                .map_err(|e| e.to_string())?;
        if crate::sock::set_congestion(probe.as_raw_fd(), &cc).is_err() {
            // iperf3 warns and goes on with the default.
            (shared.log)(&format!(
                "{peer}: congestion control {cc} not available here; using the default"
            ));
            p.congestion = None;
        }
    }
    (shared.log)(&format!(
        "{peer}: iperf3 {} test: {:?} {:?}, {} stream(s), {} s",
        q.client_version.as_deref().unwrap_or("client"),
        p.protocol,
        p.direction,
        p.stream_count(),
        q.time
    ));
    let r = run(ctrl, &mut s, &p, &q, peer, cookie, shared);
    drop(slot);
    if shared.cfg.one_off {
        shared.finished.store(true, Ordering::Release);
    }
    r
}

/// Removes the test's cookie from the rendezvous when the test ends.
struct CookieGuard<'a> {
    shared: &'a Shared,
    cookie: [u8; COOKIE_LEN],
}

impl Drop for CookieGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut t) = self.shared.rendezvous.iperf3.lock() {
            t.remove(&self.cookie);
        }
    }
}

/// Sets the streams up, runs the test and exchanges the results.
fn run(
    ctrl: &mut Ctrl,
    s: &mut ServerSession,
    p: &TestParams,
    q: &Params,
    peer: SocketAddr,
    cookie: [u8; COOKIE_LEN],
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    shared
        .rendezvous
        .iperf3
        .lock()
        .map_err(|_| "internal lock poisoned".to_string())?
        .insert(cookie, tx);
    let _guard = CookieGuard { shared, cookie };
    let sockets = match p.protocol {
        Protocol::Tcp => {
            ctrl.send(&s.create_streams(Instant::now()))?;
            collect_tcp(ctrl, p, &rx)?
        }
        Protocol::Udp => accept_udp(ctrl, s, p, peer, shared)?,
    };
    ctrl.send(&s.started(Instant::now()))?;
    let format = Format::Iperf3 {
        counters_64bit: q.counters_64bit(),
    };
    let cpu0 = nsperf_core::cpu::process_times();
    let t0 = Instant::now();
    let ctl = Arc::new(Control::default());
    let (meters, threads) = match start(p, sockets, format, &ctl) {
        Ok(v) => v,
        Err(e) => {
            ctl.abort.store(true, Ordering::Release);
            let _ = ctrl.send(&s.terminate(Instant::now()));
            return Err(format!("cannot start a data thread: {e}"));
        }
    };
    let mut rec = Recorder::new("server", meters);
    let ended = run_until_end(ctrl, s, p, &mut rec, &ctl, shared);
    if let Err(e) = &ended {
        ctl.abort.store(true, Ordering::Release);
        for h in threads {
            let _ = h.join();
        }
        return Err(e.clone());
    }
    let last_data = drain(&rec, &ctl);
    for h in threads {
        let _ = h.join();
    }
    // The test ends when the last data arrived (TEST_END for a sender), not after the drain.
    rec.tick_at(last_data);
    let elapsed = t0.elapsed();
    let side = rec.finish(0.25);
    let ours = crate::iperf3::local_results(&side, p, cpu0, elapsed);
    exchange(ctrl, s, &ours)?;
    let bytes: i64 = ours.streams.iter().map(|st| st.bytes).sum();
    (shared.log)(&format!(
        "{peer}: iperf3 test done: {} in {:.1} s",
        nsperf_core::units::Bytes(bytes.max(0) as u64),
        elapsed.as_secs_f64()
    ));
    Ok(())
}

/// Collects the TCP data connections the greeter hands over.
fn collect_tcp(
    ctrl: &mut Ctrl,
    p: &TestParams,
    rx: &mpsc::Receiver<(u32, TcpStream)>,
) -> Result<Vec<StreamSocket>, String> {
    let n = p.stream_count() as usize;
    let deadline = Instant::now() + STREAMS_TIMEOUT;
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("only {} of {n} data connections arrived", v.len()));
        }
        match rx.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok((_, sock)) => {
                crate::sock::apply_tcp(sock.as_raw_fd(), p).map_err(|e| e.to_string())?;
                if let Some(tos) = p.tos {
                    let v6 = sock.local_addr().is_ok_and(|a| a.is_ipv6());
                    crate::sock::set_tos(sock.as_raw_fd(), v6, tos).map_err(|e| e.to_string())?;
                }
                v.push(StreamSocket::Tcp(Arc::new(sock)));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = ctrl.sock.set_nonblocking(true);
                let mut b = [0u8; 1];
                let closed = matches!(ctrl.sock.peek(&mut b), Ok(0));
                let _ = ctrl.sock.set_nonblocking(false);
                if closed {
                    return Err("the client left while connecting".into());
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err("internal channel closed".into());
            }
        }
    }
    Ok(v)
}

/// A UDP socket on the server's address and port, shared with the other streams' sockets
/// (`SO_REUSEADDR`; a connected socket takes its own peer's datagrams).
fn udp_listener(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let fd = crate::sock::socket_for(&addr, libc::SOCK_DGRAM)?;
    crate::sock::set_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if addr.is_ipv6() {
        let _ = crate::sock::set_int(fd.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0);
    }
    crate::sock::bind_fd(fd.as_raw_fd(), &addr)?;
    Ok(UdpSocket::from(fd))
}

fn same_host(a: IpAddr, b: IpAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    canon(a) == canon(b)
}

/// Accepts the UDP streams: each connect datagram from the client's host gets a socket
/// connected to its sender and the reply, after the next stream's listener is bound.
fn accept_udp(
    ctrl: &mut Ctrl,
    s: &mut ServerSession,
    p: &TestParams,
    peer: SocketAddr,
    shared: &Shared,
) -> Result<Vec<StreamSocket>, String> {
    let _one_at_a_time = shared
        .iperf3_udp
        .lock()
        .map_err(|_| "internal lock poisoned".to_string())?;
    let local = ctrl.sock.local_addr().map_err(|e| e.to_string())?;
    let bind = SocketAddr::new(shared.cfg.bind, local.port());
    let listen = |a| udp_listener(a).map_err(|e| format!("cannot listen on UDP {a}: {e}"));
    let mut listener = match listen(bind) {
        Ok(l) => l,
        Err(e) => {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            let _ = ctrl.send(&s.refuse(ErrorCode::STREAM_LISTEN, errno, Instant::now()));
            return Err(e);
        }
    };
    ctrl.send(&s.create_streams(Instant::now()))?;
    let deadline = Instant::now() + STREAMS_TIMEOUT;
    let mut v = Vec::with_capacity(p.stream_count() as usize);
    let mut buf = [0u8; 64];
    while v.len() < p.stream_count() as usize {
        if Instant::now() > deadline {
            return Err(format!("only {} UDP streams arrived", v.len()));
        }
        let _ = listener.set_read_timeout(Some(Duration::from_millis(200)));
        let from = match listener.recv_from(&mut buf) {
            Ok((_, from)) if same_host(from.ip(), peer.ip()) => from,
            Ok(_) => continue,
            Err(_) => continue,
        };
        listener.connect(from).map_err(|e| e.to_string())?;
        let next = listen(bind)?;
        let stream = std::mem::replace(&mut listener, next);
        let id = v.len() as u32;
        crate::udp::setup_socket(&stream, p.window, p.stream_is_up(id));
        if let Some(tos) = p.tos {
            crate::sock::set_tos(stream.as_raw_fd(), bind.is_ipv6(), tos)
                .map_err(|e| e.to_string())?;
        }
        stream
            .send(&UDP_CONNECT_REPLY.to_ne_bytes())
            .map_err(|e| e.to_string())?;
        v.push(StreamSocket::Udp(Arc::new(stream)));
    }
    Ok(v)
}

type Started = (Vec<Arc<StreamMeter>>, Vec<std::thread::JoinHandle<()>>);

/// Starts this end's data threads: TCP through the bulk workers, a thread per UDP stream.
fn start(
    p: &TestParams,
    sockets: Vec<StreamSocket>,
    format: Format,
    ctl: &Arc<Control>,
) -> std::io::Result<Started> {
    let per_dir = p.streams.max(1) as u64;
    let mut meters = Vec::with_capacity(sockets.len());
    let mut threads = Vec::new();
    let mut bulk = Vec::new();
    for (i, sock) in sockets.into_iter().enumerate() {
        let id = i as u32;
        let sending = !p.stream_is_up(id);
        let quota = crate::config::quota(p.bytes, per_dir, id as u64 % per_dir);
        let meter = StreamMeter::new(id, sending, sock.clone());
        meters.push(meter.clone());
        match sock {
            StreamSocket::Tcp(t) => bulk.push(BulkStream {
                meter,
                sock: t,
                quota,
            }),
            StreamSocket::Udp(u) => {
                let plan = crate::udp::SendPlan {
                    len: p.len as usize,
                    rate_bps: p.rate_bps,
                    quota,
                    offload: p.udp_offload,
                    format,
                };
                let (ctl, len, offload) = (ctl.clone(), p.len as usize, p.udp_offload);
                threads.push(crate::tcp::spawn(format!("i{id}"), ctl.cpu, move || {
                    if sending {
                        crate::udp::send(&meter, &u, plan, &ctl)
                    } else {
                        crate::udp::receive(&meter, &u, len, offload, format, &ctl)
                    }
                })?);
            }
        }
    }
    if !bulk.is_empty() {
        let plan = BulkPlan {
            len: p.len as usize,
            zerocopy: p.zerocopy,
            streams: p.streams,
            pacing_bps: p.rate_bps,
        };
        threads.extend(crate::bulk::spawn(bulk, plan, ctl, 'i')?);
    }
    Ok((meters, threads))
}

/// Samples each interval until the client's `TEST_END`; stops the senders then.
fn run_until_end(
    ctrl: &mut Ctrl,
    s: &mut ServerSession,
    p: &TestParams,
    rec: &mut Recorder,
    ctl: &Control,
    shared: &Shared,
) -> Result<(), String> {
    let interval = Duration::from_nanos(p.interval_ns);
    let mut next_tick = rec.start() + interval;
    let limit = shared.cfg.max_time.map(|m| m + Duration::from_secs(1));
    loop {
        let now = Instant::now();
        if now >= next_tick {
            rec.tick();
            next_tick += interval;
        }
        if limit.is_some_and(|l| rec.start().elapsed() > l) {
            let _ = ctrl.send(&s.terminate(Instant::now()));
            return Err("the test ran past the server's --max-time".into());
        }
        if shared.interrupted() {
            let _ = ctrl.send(&s.terminate(Instant::now()));
            return Err("server interrupted".into());
        }
        let wait = next_tick
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        if ctrl.pump(s, wait)?.contains(&ServerEvent::Stop) {
            ctl.stop.store(true, Ordering::Release);
            return Ok(());
        }
    }
}

/// Lets the receivers read what is in flight: until no data came for [`DRAIN_QUIET`] (at
/// most [`DRAIN_LIMIT`]), then ends every stream. Returns when data last arrived (now, when
/// this end only sent).
fn drain(rec: &Recorder, ctl: &Control) -> Instant {
    let start = Instant::now();
    let received = || -> u64 {
        rec.meters()
            .iter()
            .filter(|m| !m.sending)
            .map(|m| m.bytes.load(Ordering::Relaxed))
            .sum()
    };
    let mut last = (received(), Instant::now());
    while start.elapsed() < DRAIN_LIMIT && !rec.all_done() {
        std::thread::sleep(Duration::from_millis(5));
        let now = received();
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= DRAIN_QUIET {
            break;
        }
    }
    ctl.abort.store(true, Ordering::Release);
    last.1
}

/// `EXCHANGE_RESULTS`, the client's results in, ours out, and the client's `IPERF_DONE`.
fn exchange(ctrl: &mut Ctrl, s: &mut ServerSession, ours: &Results) -> Result<(), String> {
    ctrl.send(&s.exchange(Instant::now()))?;
    loop {
        let evs = ctrl.pump(s, Duration::from_millis(200))?;
        if evs
            .iter()
            .any(|e| matches!(e, ServerEvent::ClientResults(_)))
        {
            break;
        }
    }
    ctrl.send(&s.send_results(ours, Instant::now()))?;
    // The client's IPERF_DONE; a client that just closes is done too.
    loop {
        match ctrl.pump(s, Duration::from_millis(200)) {
            Ok(evs) if evs.contains(&ServerEvent::Done) => return Ok(()),
            Ok(_) => {}
            Err(_) if s.is_done() => return Ok(()),
            Err(e) if e.contains("closed") => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}
