//! `nsperf net HOST`: the client end. Picks the server's protocol (nsperf's, or iperf3's in
//! `iperf3::client`); against an nsperf server opens the control session and the data
//! connections, runs the data paths and the interval loop (`drive`), and collects the
//! server's measurements.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nsperf_core::stats::LatencyHistogram;

use crate::config::{ClientConfig, Protocol, ServerKind};
use crate::connect::{bind_udp, connect_data, connect_socket, preflight};
use crate::control::{ControlConn, RecvError};
use crate::datagram::Format;
use crate::drive::{ClientRun, LiveInterval, Peer, drive, start_streams};
use crate::error::NetError;
use crate::meter::{Recorder, StreamMeter, StreamSocket};
use crate::proto::session::{ClientEvent, ClientSession};
use crate::proto::{Accepted, DataHello, Msg};
use crate::results::{STALL_TIMEOUT, SideResults, StopReason};
use crate::tcp::Control;

fn recv_msg(conn: &mut ControlConn, timeout: Duration, what: &str) -> Result<Msg, NetError> {
    match conn.recv(Some(timeout)) {
        Ok(Some(m)) => Ok(m),
        Ok(None) => Err(NetError::PeerLost(format!(
            "the server stopped answering: no {what} from it within {timeout:?}"
        ))),
        Err(RecvError::Closed) => Err(NetError::PeerLost(format!(
            "the server went away: it closed the control connection while this end waited for {what}"
        ))),
        Err(RecvError::Proto(p)) => Err(NetError::Proto(p)),
        Err(RecvError::Io(e)) => Err(NetError::PeerLost(format!(
            "the server went away: the control connection failed while this end waited for {what}: {e}"
        ))),
    }
}

/// Runs one test against a server: nsperf's protocol, iperf3's, or nsperf's first and
/// iperf3's when the server answers in it (`cfg.server_kind`). `on_interval` is called at
/// each interval end with this end's figures (for the progress line and `--json-stream`).
pub fn run(
    cfg: &ClientConfig,
    mut on_interval: impl FnMut(&LiveInterval),
) -> Result<ClientRun, NetError> {
    match cfg.server_kind {
        // An iperf3 server resets connections while it reopens its listener after a failed
        // one (a port probe, say): refusals and resets before its first byte are retried.
        ServerKind::Iperf3 => {
            crate::iperf3::client::run(cfg, Duration::from_secs(2), &mut on_interval)
        }
        ServerKind::Nsperf => run_nsperf(cfg, &mut on_interval),
        ServerKind::Detect => match run_nsperf(cfg, &mut on_interval) {
            // An iperf3 server reopens its listener after the greeting it could not read.
            Err(NetError::PeerIsIperf3 { busy: false, .. }) => {
                crate::iperf3::client::run(cfg, Duration::from_secs(3), &mut on_interval)
            }
            Err(NetError::PeerIsIperf3 { busy: true, .. }) => {
                Err(crate::iperf3::wire::Iperf3Error::Busy.into())
            }
            // Maybe an iperf3 server that reset the connection before its first byte came
            // through: ask in iperf3's protocol; if that fails too, the first error stands.
            Err(e @ NetError::GreetingDropped(_)) => {
                crate::iperf3::client::run(cfg, Duration::from_secs(3), &mut on_interval)
                    .map_err(|_| e)
            }
            r => r,
        },
    }
}

/// One test against an nsperf server.
fn run_nsperf(
    cfg: &ClientConfig,
    on_interval: &mut dyn FnMut(&LiveInterval),
) -> Result<ClientRun, NetError> {
    let p = cfg.params.clone();
    p.validate().map_err(NetError::Usage)?;
    preflight(cfg)?;
    let (sock, addr) = connect_socket(cfg)?;
    let mut conn = ControlConn::new(sock, &[]);
    let (mut session, hello) = ClientSession::new(p.clone(), cfg.psk.clone());
    conn.send(&hello)
        .map_err(|e| NetError::Control(e.to_string()))?;
    let accepted = match handshake(&mut conn, &mut session) {
        // iperf3's first state byte: PARAM_EXCHANGE, or ACCESS_DENIED when busy.
        Err(NetError::Proto(crate::proto::ProtoError::BadMagic([b, ..])))
            if b == 9 || b == 0xff =>
        {
            return Err(NetError::PeerIsIperf3 {
                addr: addr.to_string(),
                busy: b == 0xff,
            });
        }
        r => r?,
    };
    // Data connections (TCP) or sockets (UDP), then Start.
    let sockets = if p.protocol == Protocol::Udp {
        open_udp(&mut conn, &mut session, cfg, addr, &accepted)?
    } else {
        open_tcp(&mut conn, &mut session, cfg, addr, &accepted)?
    };
    // `--awake`: held until the results are in (released on drop, also on an error).
    let awake = p.awake_hold();
    let t_run = Instant::now();
    let measured_unix_ns = nsperf_core::clock::unix_time_ns();
    let ctl = Arc::new(Control::on_cpu(cfg.local.cpu));
    let cookie = accepted.cookie as u32;
    let format = |stream| Format::Nsperf { stream, cookie };
    let streams = match start_streams(&p, &sockets, &format, &ctl, t_run) {
        Ok(s) => s,
        Err(e) => {
            ctl.abort.store(true, Ordering::Release);
            return Err(e);
        }
    };
    let mut rec = Recorder::new("client", streams.meters);
    let mut peer = NsperfPeer {
        conn: &mut conn,
        session: &mut session,
    };
    let stopped_by = drive(&mut rec, &p, &ctl, &mut peer, on_interval)?;
    for h in streams.threads {
        let _ = h.join();
    }
    let mut rr: Option<LatencyHistogram> = None;
    for h in streams.rr_threads {
        if let Ok(hist) = h.join() {
            match &mut rr {
                Some(all) => all.merge(&hist),
                None => rr = Some(hist),
            }
        }
    }
    let mut client = rec.finish(p.interval_ns as f64 / 1e9 / 4.0);
    client.cpu_awake = awake.is_some();
    let server = results(&mut conn, &mut session, stopped_by)?;
    if stopped_by == StopReason::Interrupted {
        nsperf_core::signal::request_stop();
    }
    let sweep = streams.sweep.lock().map(|g| g.clone()).unwrap_or_default();
    Ok(ClientRun {
        params: p,
        server_addr: addr,
        client,
        server,
        server_facts: accepted.facts,
        rr_latency: rr,
        sweep,
        duration_ns: t_run.elapsed().as_nanos() as u64,
        stopped_by,
        measured_unix_ns,
        iperf3: None,
    })
}

/// Sends what the session says until the server accepts the test.
fn handshake(conn: &mut ControlConn, session: &mut ClientSession) -> Result<Accepted, NetError> {
    let mut first = true;
    loop {
        let r = conn.recv(Some(Duration::from_secs(30)));
        if std::mem::take(&mut first)
            && let Err(e @ (RecvError::Closed | RecvError::Io(_))) = &r
        {
            // Dropped before any answer: not an nsperf server (an iperf3 server resets the
            // connection when it cannot read nsperf's greeting as its parameters).
            return Err(NetError::GreetingDropped(e.to_string()));
        }
        let m = match r {
            Ok(Some(m)) => m,
            Ok(None) => {
                return Err(NetError::Control(
                    "no handshake from the server within 30s".into(),
                ));
            }
            Err(RecvError::Closed) => {
                return Err(NetError::Control(
                    "server closed the control connection while waiting for handshake".into(),
                ));
            }
            Err(RecvError::Proto(p)) => return Err(NetError::Proto(p)),
            Err(RecvError::Io(e)) => return Err(NetError::Control(e.to_string())),
        };
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
            return Ok(a);
        }
    }
}

/// Opens the UDP sockets and sends hello datagrams until the server says Start.
fn open_udp(
    conn: &mut ControlConn,
    session: &mut ClientSession,
    cfg: &ClientConfig,
    addr: SocketAddr,
    accepted: &Accepted,
) -> Result<Vec<StreamSocket>, NetError> {
    let p = &cfg.params;
    let n = p.stream_count();
    if accepted.udp_ports.len() != n as usize {
        return Err(NetError::Proto(crate::proto::ProtoError::BadBody(format!(
            "server gave {} UDP ports for {n} streams",
            accepted.udp_ports.len()
        ))));
    }
    let mut sockets = Vec::with_capacity(n as usize);
    for id in 0..n {
        let u = bind_udp(cfg, &addr, id)?;
        crate::udp::setup_socket(&u, p.window, !p.stream_is_up(id));
        u.connect((addr.ip(), accepted.udp_ports[id as usize]))
            .map_err(|e| NetError::connect(&addr, e))?;
        sockets.push(StreamSocket::Udp(Arc::new(u)));
    }
    loop {
        for (id, s) in sockets.iter().enumerate() {
            if let StreamSocket::Udp(u) = s {
                let _ = u.send(&crate::datagram::hello(id as u32, accepted.cookie));
            }
        }
        match conn.recv(Some(Duration::from_millis(100))) {
            Ok(None) => continue,
            Ok(Some(m)) => {
                if session.on_msg(m)?.contains(&ClientEvent::Start) {
                    return Ok(sockets);
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
}

/// Opens the data connections, each with its hello, and waits for Start.
fn open_tcp(
    conn: &mut ControlConn,
    session: &mut ClientSession,
    cfg: &ClientConfig,
    addr: SocketAddr,
    accepted: &Accepted,
) -> Result<Vec<StreamSocket>, NetError> {
    let p = &cfg.params;
    let n = p.stream_count();
    let mut sockets = Vec::with_capacity(n as usize);
    for id in 0..n {
        let s = connect_data(cfg, &addr, id)?;
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
        let m = recv_msg(conn, Duration::from_secs(30), "the start")?;
        if session.on_msg(m)?.contains(&ClientEvent::Start) {
            return Ok(sockets);
        }
    }
}

/// An nsperf server: a `Stop` message on the control connection.
struct NsperfPeer<'a> {
    conn: &'a mut ControlConn,
    session: &'a mut ClientSession,
}

impl Peer for NsperfPeer<'_> {
    fn stop(&mut self, reason: StopReason, _meters: &[Arc<StreamMeter>]) -> Result<(), NetError> {
        let m = self.session.stop();
        let sent = self.conn.send(&m);
        if reason != StopReason::Interrupted {
            sent.map_err(|e| {
                NetError::PeerLost(format!("the server went away: sending the stop: {e}"))
            })?;
        }
        Ok(())
    }
}

/// The server's measurements after the Stop.
fn results(
    conn: &mut ControlConn,
    session: &mut ClientSession,
    stopped_by: StopReason,
) -> Result<SideResults, NetError> {
    let wait = if stopped_by == StopReason::Stalled {
        STALL_TIMEOUT
    } else {
        Duration::from_secs(30)
    };
    loop {
        let m = recv_msg(conn, wait, "the results").map_err(|e| match stopped_by {
            StopReason::Stalled => NetError::PeerLost(format!(
                "the server stopped answering: the transfer stalled: {stopped_by}, and the server sent no results ({e})"
            )),
            _ => e,
        })?;
        for e in session.on_msg(m)? {
            if let ClientEvent::Results(r) = e {
                return Ok(*r);
            }
        }
    }
}
