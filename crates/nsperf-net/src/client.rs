//! `nsperf net HOST`: the client end. Opens the control session, the data connections, runs
//! the data threads and the interval sampler, and collects the server's measurements.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nsperf_core::host::HostFacts;
use nsperf_core::stats::{LatencyHistogram, LatencySummary};

use crate::config::{ClientConfig, Mode, Protocol, TestParams};
use crate::control::{ControlConn, RecvError};
use crate::error::NetError;
use crate::meter::{Recorder, StreamMeter, StreamSocket};
use crate::proto::session::{ClientEvent, ClientSession};
use crate::proto::{Accepted, DataHello, Msg};
use crate::results::{SideResults, SweepPoint};
use crate::tcp::{self, Control};

/// What the client shows while the test runs, once per interval.
#[derive(Debug, Clone)]
pub struct LiveInterval {
    /// Interval start, seconds since the start.
    pub start_s: f64,
    /// Interval length, seconds.
    pub length_s: f64,
    /// Payload bytes this end moved per stream in the interval.
    pub stream_bytes: Vec<u64>,
    /// Whether this end sends on each stream.
    pub stream_sending: Vec<bool>,
    /// Messages (transactions, datagrams) per stream in the interval.
    pub stream_messages: Vec<u64>,
    /// Total planned time, seconds (0 when unknown).
    pub total_s: f64,
    /// Request/response: latency of all streams' transactions in the interval.
    pub latency: Option<LatencySummary>,
}

/// Everything a finished client run measured, before it becomes a report.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// The parameters as sent.
    pub params: TestParams,
    /// The server address used.
    pub server_addr: SocketAddr,
    /// The client's measurements.
    pub client: SideResults,
    /// The server's measurements.
    pub server: SideResults,
    /// The server's host facts.
    pub server_facts: HostFacts,
    /// Request/response latency over all streams (after warm-up).
    pub rr_latency: Option<LatencyHistogram>,
    /// Sweep points.
    pub sweep: Vec<SweepPoint>,
    /// Measured duration from start to results, ns.
    pub duration_ns: u64,
}

/// Bytes stream `index` of `streams` sends out of a total of `bytes` (0 = unlimited).
pub fn quota(bytes: u64, streams: u64, index: u64) -> u64 {
    if bytes == 0 {
        return 0;
    }
    let base = bytes / streams.max(1);
    let extra = if index < bytes % streams.max(1) { 1 } else { 0 };
    (base + extra).max(1)
}

fn recv_msg(conn: &mut ControlConn, timeout: Duration, what: &str) -> Result<Msg, NetError> {
    match conn.recv(Some(timeout)) {
        Ok(Some(m)) => Ok(m),
        Ok(None) => Err(NetError::Control(format!(
            "no {what} from the server within {timeout:?}"
        ))),
        Err(RecvError::Closed) => Err(NetError::Control(format!(
            "server closed the control connection while waiting for {what}"
        ))),
        Err(RecvError::Proto(p)) => Err(NetError::Proto(p)),
        Err(RecvError::Io(e)) => Err(NetError::Control(e.to_string())),
    }
}

/// Connects the control session and returns it with the address that answered.
fn connect_control(cfg: &ClientConfig) -> Result<(ControlConn, SocketAddr), NetError> {
    let addrs = crate::sock::resolve(&cfg.host, cfg.port)?;
    let mut last = None;
    for a in addrs {
        match crate::sock::connect_tcp(&a, cfg.connect_timeout, |_| Ok(())) {
            Ok(s) => return Ok((ControlConn::new(s, &[]), a)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(NetError::Connect {
        addr: cfg.host.clone(),
        reason: "no address".into(),
    }))
}

/// Runs one test against a server. `on_interval` is called at each interval end with this
/// end's figures (for the progress line and `--json-stream`).
pub fn run(
    cfg: &ClientConfig,
    mut on_interval: impl FnMut(&LiveInterval),
) -> Result<ClientRun, NetError> {
    let p = cfg.params.clone();
    p.validate().map_err(NetError::Usage)?;
    if let Some(cc) = &p.congestion {
        // Fail before touching the server when this kernel lacks it.
        let probe =
            crate::sock::socket_for(&SocketAddr::from(([127, 0, 0, 1], 0)), libc::SOCK_STREAM)
                .map_err(|e| NetError::Socket(e.to_string()))?;
        crate::sock::set_congestion(probe.as_raw_fd(), cc)?;
    }
    let (mut conn, addr) = connect_control(cfg)?;
    let (mut session, hello) = ClientSession::new(p.clone(), cfg.psk.clone());
    conn.send(&hello)
        .map_err(|e| NetError::Control(e.to_string()))?;
    // Handshake up to Accepted.
    let accepted: Accepted = loop {
        let m = recv_msg(&mut conn, Duration::from_secs(30), "handshake")?;
        let mut acc = None;
        for e in session.on_msg(m)? {
            match e {
                ClientEvent::Send(m) => conn
                    .send(&m)
                    .map_err(|e| NetError::Control(e.to_string()))?,
                ClientEvent::Accepted(a) => acc = Some(a),
                _ => {}
            }
        }
        if let Some(a) = acc {
            break a;
        }
    };
    // Data connections (TCP) or sockets (UDP), then Start.
    let n = p.stream_count();
    let mut sockets: Vec<StreamSocket> = Vec::with_capacity(n as usize);
    if p.protocol == Protocol::Udp {
        if accepted.udp_ports.len() != n as usize {
            return Err(NetError::Proto(crate::proto::ProtoError::BadBody(format!(
                "server gave {} UDP ports for {n} streams",
                accepted.udp_ports.len()
            ))));
        }
        let local: std::net::IpAddr = if addr.is_ipv4() {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        };
        for id in 0..n {
            let u = std::net::UdpSocket::bind((local, 0))
                .map_err(|e| NetError::Socket(e.to_string()))?;
            crate::udp::setup_socket(&u, p.window, !p.stream_is_up(id));
            u.connect((addr.ip(), accepted.udp_ports[id as usize]))
                .map_err(|e| NetError::connect(&addr, e))?;
            sockets.push(StreamSocket::Udp(Arc::new(u)));
        }
        // Hello datagrams until the server has seen them all and says Start.
        loop {
            for (id, s) in sockets.iter().enumerate() {
                if let StreamSocket::Udp(u) = s {
                    let _ = u.send(&crate::udp::hello(id as u32, accepted.cookie));
                }
            }
            match conn.recv(Some(Duration::from_millis(100))) {
                Ok(None) => continue,
                Ok(Some(m)) => {
                    if session.on_msg(m)?.contains(&ClientEvent::Start) {
                        break;
                    }
                }
                Err(RecvError::Closed) => {
                    return Err(NetError::Control(
                        "server closed the control connection during UDP set-up".into(),
                    ));
                }
                Err(RecvError::Proto(e)) => return Err(NetError::Proto(e)),
                Err(RecvError::Io(e)) => return Err(NetError::Control(e.to_string())),
            }
        }
    } else {
        for id in 0..n {
            let s = crate::sock::connect_tcp(&addr, cfg.connect_timeout, |fd| {
                crate::sock::apply_tcp(fd, &p)
            })?;
            let mut w = &s;
            std::io::Write::write_all(
                &mut w,
                &DataHello {
                    cookie: accepted.cookie,
                    stream: id,
                }
                .encode(),
            )
            .map_err(|e| NetError::connect(&addr, e))?;
            sockets.push(StreamSocket::Tcp(Arc::new(s)));
        }
        loop {
            let m = recv_msg(&mut conn, Duration::from_secs(30), "the start")?;
            if session.on_msg(m)?.contains(&ClientEvent::Start) {
                break;
            }
        }
    }
    // `--awake`: held until the results are in (released on drop, also on an error).
    let awake = p.awake_hold();
    let t_run = Instant::now();
    let ctl = Arc::new(Control::default());
    let warmup_end = t_run + Duration::from_nanos(p.warmup_ns);
    let streams_per_dir = p.streams.max(1) as u64;
    let mut meters = Vec::with_capacity(n as usize);
    let mut handles: Vec<std::thread::JoinHandle<Option<LatencyHistogram>>> = Vec::new();
    let sweep_points = Arc::new(std::sync::Mutex::new(Vec::new()));
    for (i, sock) in sockets.iter().enumerate() {
        let id = i as u32;
        let sending = p.stream_is_up(id);
        let quota = quota(p.bytes, streams_per_dir, id as u64 % streams_per_dir);
        let meter = StreamMeter::new(id, sending, sock.clone());
        if matches!(p.mode, Mode::Rr { .. }) {
            meter.enable_latency();
        }
        meters.push(meter.clone());
        let (ctl, p2) = (ctl.clone(), p.clone());
        let cookie = accepted.cookie;
        let s = match sock {
            StreamSocket::Tcp(t) => t.clone(),
            StreamSocket::Udp(u) => {
                let u = u.clone();
                let plan = crate::udp::SendPlan {
                    len: p.len as usize,
                    rate_bps: p.rate_bps,
                    quota,
                    offload: p.udp_offload,
                    stream: id,
                    cookie,
                };
                let h = std::thread::Builder::new()
                    .name(format!("u{id}"))
                    .stack_size(256 * 1024)
                    .spawn(move || {
                        if sending {
                            crate::udp::send(&meter, &u, plan, &ctl)
                        } else {
                            crate::udp::receive(
                                &meter,
                                &u,
                                p2.len as usize,
                                p2.udp_offload,
                                cookie,
                                &ctl,
                            )
                        }
                        None
                    })
                    .map_err(|e| NetError::Socket(format!("cannot start a data thread: {e}")))?;
                handles.push(h);
                continue;
            }
        };
        let points = sweep_points.clone();
        let h = std::thread::Builder::new()
            .name(format!("c{id}"))
            .stack_size(256 * 1024)
            .spawn(move || match p2.mode {
                Mode::Stream if sending => {
                    tcp::send(&meter, &s, p2.len as usize, quota, p2.zerocopy, &ctl);
                    None
                }
                Mode::Stream => {
                    tcp::receive(&meter, &s, p2.len as usize, p2.streams, &ctl);
                    None
                }
                Mode::Rr {
                    request_bytes,
                    response_bytes,
                } => Some(crate::rr::request(
                    &meter,
                    &s,
                    request_bytes,
                    response_bytes,
                    warmup_end,
                    &ctl,
                )),
                Mode::Sweep {
                    min_bytes,
                    max_bytes,
                } => {
                    let sizes = crate::rr::sweep_sizes(min_bytes, max_bytes);
                    let per = Duration::from_nanos(p2.duration_ns / sizes.len().max(1) as u64)
                        .max(Duration::from_millis(20));
                    let r = crate::rr::sweep(&s, &sizes, per, &ctl, |pt| {
                        // The untimed warm-up round trip of each size moved bytes too.
                        meter
                            .messages
                            .fetch_add(pt.round_trips + 1, Ordering::Relaxed);
                        meter.bytes.fetch_add(
                            (pt.round_trips + 1) * pt.size_bytes as u64,
                            Ordering::Relaxed,
                        );
                    });
                    match r {
                        Ok(v) => {
                            if let Ok(mut g) = points.lock() {
                                *g = v;
                            }
                            meter.finish(None);
                        }
                        Err(e) => meter.finish(Some(e.to_string())),
                    }
                    None
                }
            })
            .map_err(|e| NetError::Socket(format!("cannot start a data thread: {e}")))?;
        handles.push(h);
    }
    let mut rec = Recorder::new("client", meters);
    let interval = Duration::from_nanos(p.interval_ns);
    let total = Duration::from_nanos(p.total_time_ns());
    let by_time = p.bytes == 0 && !matches!(p.mode, Mode::Sweep { .. });
    let hard_end = total * 2 + Duration::from_secs(30);
    let mut next_tick = rec.start() + interval;
    let mut stopped = false;
    let mut stop_at = None::<Instant>;
    let sending_flags: Vec<bool> = rec.meters().iter().map(|m| m.sending).collect();
    let mut prev_msgs = vec![0u64; n as usize];
    let mut interrupted = false;
    let total_s = if by_time { total.as_secs_f64() } else { 0.0 };
    // Closes an interval and shows it.
    let mut emit =
        |rec: &mut Recorder, end: Instant, on_interval: &mut dyn FnMut(&LiveInterval)| {
            let (mark, bytes) = rec.tick_at(end);
            let msgs: Vec<u64> = rec
                .meters()
                .iter()
                .zip(prev_msgs.iter_mut())
                .map(|(m, prev)| {
                    let v = m.messages.load(Ordering::Relaxed);
                    let d = v.saturating_sub(*prev);
                    *prev = v;
                    d
                })
                .collect();
            on_interval(&LiveInterval {
                start_s: mark.start_s,
                length_s: mark.length_s,
                stream_bytes: bytes,
                stream_sending: sending_flags.clone(),
                stream_messages: msgs,
                total_s,
                latency: rec.last_latency(),
            });
        };
    loop {
        let now = Instant::now();
        let elapsed = now - rec.start();
        if stopped {
            if rec.all_done() {
                // The last interval ends when the last data moved.
                let end = rec.last_activity().max(stop_at.unwrap_or(now));
                emit(&mut rec, end, &mut on_interval);
                break;
            }
            if stop_at.is_some_and(|t| t.elapsed() > Duration::from_secs(15)) {
                ctl.abort.store(true, Ordering::Release);
            }
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        if now >= next_tick {
            emit(&mut rec, now, &mut on_interval);
            next_tick += interval;
            if next_tick < now {
                next_tick = now + interval;
            }
        }
        let local_senders_done = rec
            .meters()
            .iter()
            .all(|m| !m.sending || m.done.load(Ordering::Acquire));
        let time_up = if by_time {
            elapsed >= total
        } else {
            elapsed >= hard_end
        };
        let bytes_sent = p.bytes > 0
            && p.mode == Mode::Stream
            && local_senders_done
            && sending_flags.iter().all(|&s| s);
        let sig = nsperf_core::signal::interrupted();
        if time_up || rec.all_done() || bytes_sent || sig {
            interrupted = sig;
            ctl.stop.store(true, Ordering::Release);
            let m = session.stop();
            let sent = conn.send(&m);
            if !sig {
                sent.map_err(|e| NetError::Control(e.to_string()))?;
            }
            stopped = true;
            stop_at = Some(Instant::now());
            continue;
        }
        let wait = next_tick
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        std::thread::sleep(wait);
    }
    let mut rr: Option<LatencyHistogram> = None;
    for h in handles {
        if let Ok(Some(hist)) = h.join() {
            match &mut rr {
                Some(all) => all.merge(&hist),
                None => rr = Some(hist),
            }
        }
    }
    let mut client = rec.finish(p.interval_ns as f64 / 1e9 / 4.0);
    client.cpu_awake = awake.is_some();
    // The server's results.
    let server = loop {
        let m = recv_msg(&mut conn, Duration::from_secs(30), "the results")?;
        let mut got = None;
        for e in session.on_msg(m)? {
            if let ClientEvent::Results(r) = e {
                got = Some(*r);
            }
        }
        if let Some(r) = got {
            break r;
        }
    };
    if interrupted {
        nsperf_core::signal::request_stop();
    }
    let sweep = sweep_points.lock().map(|g| g.clone()).unwrap_or_default();
    Ok(ClientRun {
        params: p,
        server_addr: addr,
        client,
        server,
        server_facts: accepted.facts,
        rr_latency: rr,
        sweep,
        duration_ns: t_run.elapsed().as_nanos() as u64,
    })
}

/// Opens a plain TCP connection (used by tests to play a hostile client).
pub fn raw_connect(addr: &SocketAddr) -> std::io::Result<TcpStream> {
    TcpStream::connect_timeout(addr, Duration::from_secs(5))
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotas_add_up() {
        let q: u64 = (0..3).map(|i| super::quota(10, 3, i)).sum();
        assert_eq!(q, 10);
        assert_eq!(super::quota(0, 3, 1), 0);
    }
}
