//! `nsperf net` against an iperf3 server: the socket shell around
//! [`ClientSession`](super::session::ClientSession), with nsperf's own data paths, meters
//! and interval loop on the data connections.
//!
//! Before `TEST_END` this end lets what it sent reach the server (its senders stop, the TCP
//! send queues empty, then a short settle), because iperf3 stops counting at `TEST_END`:
//! so the server's received bytes match the bytes sent.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nsperf_core::host::HostFacts;

use super::ctrl;
use super::session::{ClientEvent, ClientSession};
use super::wire::{self, COOKIE_LEN, Results, UDP_CONNECT_MSG};
use super::{Iperf3Shared, local_results};
use crate::config::{ClientConfig, Protocol, TestParams};
use crate::datagram::Format;
use crate::drive::{ClientRun, LiveInterval, Peer, drive, start_streams};
use crate::error::NetError;
use crate::meter::{Recorder, StreamMeter, StreamSocket};
use crate::results::{SideResults, StopReason};
use crate::tcp::Control;

/// How long the server may take to answer a stream's UDP connect datagram.
const UDP_REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for this end's TCP send queues to empty before `TEST_END`.
const DRAIN_LIMIT: Duration = Duration::from_secs(3);
/// Pause after the queues emptied, so the server reads what arrived before `TEST_END` does.
const SETTLE: Duration = Duration::from_millis(30);

/// The control connection to an iperf3 server.
pub(super) type Ctrl = ctrl::Ctrl<ClientSession>;

impl Ctrl {
    /// Reads what arrives within `wait` and feeds it to the session; sends what it asks to
    /// send and returns its other events.
    fn pump_sending(
        &mut self,
        s: &mut ClientSession,
        wait: Duration,
    ) -> Result<Vec<ClientEvent>, NetError> {
        let mut out = Vec::new();
        for e in self.pump(s, wait)? {
            match e {
                ClientEvent::Send(b) => self.send(&b)?,
                e => out.push(e),
            }
        }
        Ok(out)
    }

    /// Pumps until an event `pick` takes; the other events are returned with it.
    fn until(
        &mut self,
        s: &mut ClientSession,
        pick: impl Fn(&ClientEvent) -> bool,
    ) -> Result<Vec<ClientEvent>, NetError> {
        let mut seen = Vec::new();
        loop {
            let evs = self.pump_sending(s, Duration::from_millis(200))?;
            let found = evs.iter().any(&pick);
            seen.extend(evs);
            if found {
                return Ok(seen);
            }
            if nsperf_core::signal::interrupted() {
                let _ = self.send(&s.terminate(Instant::now()));
                return Err(NetError::Interrupted);
            }
        }
    }
}

/// Random bytes for a cookie.
fn random_cookie() -> Result<[u8; COOKIE_LEN], NetError> {
    let b = nsperf_core::psk::os_random::<COOKIE_LEN>().map_err(NetError::Socket)?;
    Ok(wire::cookie_from(b))
}

/// Connects the control connection, retrying refusals and resets for `retry` (an iperf3 server
/// reopens its listener after each test and after a connection it could not use, such as
/// nsperf's own greeting; a connection queued on the old listener is reset).
fn connect(cfg: &ClientConfig, retry: Duration) -> Result<(TcpStream, SocketAddr), NetError> {
    let until = Instant::now() + retry;
    loop {
        match crate::connect::connect_socket(cfg) {
            Err(e) if e.is_refused_or_reset() && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(100));
            }
            r => return r,
        }
    }
}

/// Runs one test against an iperf3 server. `retry` is how long refused connections are
/// retried (after a detection probe).
pub fn run(
    cfg: &ClientConfig,
    retry: Duration,
    on_interval: &mut dyn FnMut(&LiveInterval),
) -> Result<ClientRun, NetError> {
    let p = cfg.params.clone();
    p.validate().map_err(NetError::Usage)?;
    let q = super::params::to_iperf3(&p).map_err(NetError::Usage)?;
    crate::connect::preflight(cfg)?;
    let until = Instant::now() + retry;
    let (mut ctrl, mut s, cookie, addr) = loop {
        let (sock, addr) = connect(cfg, retry)?;
        let mut ctrl = Ctrl::new(sock);
        let (mut s, cookie) = ClientSession::new(q.clone(), random_cookie()?, Instant::now());
        let opened = ctrl
            .send(&cookie)
            .and_then(|()| ctrl.until(&mut s, |e| *e == ClientEvent::CreateStreams));
        match opened {
            Ok(_) => break (ctrl, s, cookie, addr),
            // A server still closing the connection of the probe: try again.
            Err(NetError::Control(_)) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    };
    let cookie: [u8; COOKIE_LEN] = cookie.try_into().expect("a cookie is 37 bytes");
    let sockets = match p.protocol {
        Protocol::Tcp => open_tcp(cfg, addr, &cookie)?,
        Protocol::Udp => open_udp(cfg, addr)?,
    };
    ctrl.until(&mut s, |e| *e == ClientEvent::Start)?;
    let awake = p.awake_hold();
    let t_run = Instant::now();
    let measured_unix_ns = nsperf_core::clock::unix_time_ns();
    let cpu0 = nsperf_core::cpu::process_times();
    let ctl = Arc::new(Control::on_cpu(cfg.local.cpu));
    let format = |_| Format::Iperf3 {
        counters_64bit: true,
    };
    let streams = match start_streams(&p, &sockets, &format, &ctl, t_run) {
        Ok(st) => st,
        Err(e) => {
            ctl.abort.store(true, Ordering::Release);
            let _ = ctrl.send(&s.terminate(Instant::now()));
            return Err(e);
        }
    };
    let mut rec = Recorder::new("client", streams.meters);
    let mut peer = Iperf3Peer {
        ctrl: &mut ctrl,
        session: &mut s,
        udp: p.protocol == Protocol::Udp,
    };
    let stopped_by = drive(&mut rec, &p, &ctl, &mut peer, on_interval)?;
    for h in streams.threads {
        let _ = h.join();
    }
    let elapsed = t_run.elapsed();
    let mut client = rec.finish(p.interval_ns as f64 / 1e9 / 4.0);
    client.cpu_awake = awake.is_some();
    let ours = local_results(&client, &p, cpu0, elapsed);
    let server = exchange(&mut ctrl, &mut s, &ours)?;
    if stopped_by == StopReason::Interrupted {
        nsperf_core::signal::request_stop();
    }
    Ok(ClientRun {
        params: p,
        server_addr: addr,
        client,
        server: SideResults {
            role: "server".into(),
            ..SideResults::default()
        },
        server_facts: HostFacts::default(),
        rr_latency: None,
        sweep: Vec::new(),
        duration_ns: elapsed.as_nanos() as u64,
        stopped_by,
        measured_unix_ns,
        iperf3: Some(Iperf3Shared {
            server,
            client: ours,
        }),
    })
}

/// The results exchange after `TEST_END`: ours out, the server's in, `IPERF_DONE`.
fn exchange(ctrl: &mut Ctrl, s: &mut ClientSession, ours: &Results) -> Result<Results, NetError> {
    ctrl.until(s, |e| *e == ClientEvent::ResultsWanted)?;
    let bytes = s.send_results(ours, Instant::now());
    ctrl.send(&bytes)?;
    let mut server = None;
    // Bounded by the session's time limit on each step (`pump` checks it).
    while !s.is_done() {
        for e in ctrl.pump_sending(s, Duration::from_millis(200))? {
            if let ClientEvent::ServerResults(r) = e {
                server = Some(*r);
            }
        }
    }
    server.ok_or_else(|| NetError::Control("the iperf3 server sent no results".into()))
}

/// Opens the TCP data connections, each starting with the cookie (up streams first).
fn open_tcp(
    cfg: &ClientConfig,
    addr: SocketAddr,
    cookie: &[u8; COOKIE_LEN],
) -> Result<Vec<StreamSocket>, NetError> {
    let p = &cfg.params;
    let mut v = Vec::with_capacity(p.stream_count() as usize);
    for id in 0..p.stream_count() {
        let s = crate::connect::connect_data(cfg, &addr, id)?;
        (&s).write_all(cookie)
            .map_err(|e| NetError::connect(&addr, e))?;
        v.push(StreamSocket::Tcp(Arc::new(s)));
    }
    Ok(v)
}

/// Opens the UDP streams: a connect datagram each to the server's port, answered before the
/// next (iperf3 accepts one UDP stream at a time on that port).
fn open_udp(cfg: &ClientConfig, addr: SocketAddr) -> Result<Vec<StreamSocket>, NetError> {
    let p = &cfg.params;
    let mut v = Vec::with_capacity(p.stream_count() as usize);
    for id in 0..p.stream_count() {
        let u = crate::connect::bind_udp(cfg, &addr, id)?;
        crate::udp::setup_socket(&u, p.window, !p.stream_is_up(id));
        u.connect(addr).map_err(|e| NetError::connect(&addr, e))?;
        u.send(&UDP_CONNECT_MSG.to_ne_bytes())
            .map_err(|e| NetError::connect(&addr, e))?;
        await_udp_reply(&u, p)?;
        v.push(StreamSocket::Udp(Arc::new(u)));
    }
    Ok(v)
}

fn await_udp_reply(u: &UdpSocket, p: &TestParams) -> Result<(), NetError> {
    let until = Instant::now() + UDP_REPLY_TIMEOUT;
    let mut buf = vec![0u8; (p.len as usize).max(16)];
    let _ = u.set_read_timeout(Some(Duration::from_millis(200)));
    while Instant::now() < until {
        match u.recv(&mut buf) {
            Ok(4) if wire::is_udp_connect_reply([buf[0], buf[1], buf[2], buf[3]]) => {
                return Ok(());
            }
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                return Err(NetError::Control(
                    "the iperf3 server's UDP port refused the stream".into(),
                ));
            }
            Err(_) => {}
        }
        if nsperf_core::signal::interrupted() {
            return Err(NetError::Interrupted);
        }
    }
    Err(NetError::Control(format!(
        "the iperf3 server did not answer a UDP stream within {} s",
        UDP_REPLY_TIMEOUT.as_secs()
    )))
}

/// Bytes this end sent on a TCP socket that the peer has not acknowledged yet
/// (`SIOCOUTQ`).
fn unacked(sock: &TcpStream) -> Option<i32> {
    let mut v: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::TIOCOUTQ as _, &mut v) };
    (rc == 0).then_some(v)
}

/// The iperf3 server as the interval loop sees it.
struct Iperf3Peer<'a> {
    ctrl: &'a mut Ctrl,
    session: &'a mut ClientSession,
    udp: bool,
}

impl Peer for Iperf3Peer<'_> {
    fn watch(&mut self) -> Result<(), NetError> {
        // The server only speaks during the test to end it (SERVER_TERMINATE, an error).
        self.ctrl
            .pump_sending(self.session, Duration::from_millis(1))
            .map(drop)
    }

    fn stop(&mut self, reason: StopReason, meters: &[Arc<StreamMeter>]) -> Result<(), NetError> {
        if reason != StopReason::Interrupted {
            let until = Instant::now() + DRAIN_LIMIT;
            let drained = |m: &Arc<StreamMeter>| {
                !m.sending
                    || (m.done.load(Ordering::Acquire)
                        && match &m.socket {
                            StreamSocket::Tcp(t) => unacked(t).is_none_or(|n| n == 0),
                            StreamSocket::Udp(_) => true,
                        })
            };
            while Instant::now() < until && !meters.iter().all(drained) {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(if self.udp { SETTLE * 3 } else { SETTLE });
        }
        match self.session.end(Instant::now()) {
            Some(b) => self.ctrl.send(&b),
            None => Ok(()),
        }
    }
}
