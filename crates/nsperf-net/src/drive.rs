//! What both client shells (nsperf's protocol in `client`, iperf3's in `iperf3::client`)
//! share: the run's model ([`ClientRun`], [`LiveInterval`]), starting the data paths on the
//! opened sockets, and the interval loop that ends the test and tells the peer ([`Peer`]).

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nsperf_core::host::HostFacts;
use nsperf_core::stats::{LatencyHistogram, LatencySummary};

use crate::bulk::{BulkPlan, BulkStream};
use crate::config::{Mode, TestParams};
use crate::datagram::Format;
use crate::error::NetError;
use crate::meter::{Recorder, StreamMeter, StreamSocket};
use crate::results::{STALL_TIMEOUT, SideResults, StopReason, SweepPoint};
use crate::tcp::Control;
use crate::tcpinfo::TcpInfoSample;

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
    /// Messages per stream in the interval: transactions, datagrams sent, or (a receiving UDP
    /// stream) distinct datagrams received.
    pub stream_messages: Vec<u64>,
    /// Total planned time, seconds (0 when unknown).
    pub total_s: f64,
    /// Request/response: latency of all streams' transactions in the interval.
    pub latency: Option<LatencySummary>,
    /// This end's `TCP_INFO` of each stream at the interval end (`None` for UDP): the
    /// congestion window of the streams it sends on.
    pub stream_tcp: Vec<Option<TcpInfoSample>>,
    /// Segments this end retransmitted on each stream in the interval (TCP).
    pub stream_retransmits: Vec<Option<u64>>,
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
    /// When the data streams started (the zero of the intervals), wall clock, ns since the
    /// Unix epoch.
    pub measured_unix_ns: u64,
    /// Why the client ended the test.
    pub stopped_by: StopReason,
    /// Against an iperf3 server: the results both ends exchanged (the server's are all it
    /// shares: per stream bytes, retransmissions, UDP loss and jitter, and its CPU).
    pub iperf3: Option<crate::iperf3::Iperf3Shared>,
}

/// The client's running data paths.
pub(crate) struct Streams {
    pub(crate) meters: Vec<Arc<StreamMeter>>,
    pub(crate) threads: Vec<JoinHandle<()>>,
    /// Request/response threads return their latency histograms.
    pub(crate) rr_threads: Vec<JoinHandle<LatencyHistogram>>,
    pub(crate) sweep: Arc<Mutex<Vec<SweepPoint>>>,
}

fn thread_error(e: std::io::Error) -> NetError {
    NetError::Socket(format!("cannot start a data thread: {e}"))
}

/// Starts the data paths: bulk TCP streams on a bounded set of threads, a thread per UDP,
/// request/response or sweep stream. `format` gives each UDP stream's datagram header.
pub(crate) fn start_streams(
    p: &TestParams,
    sockets: &[StreamSocket],
    format: &dyn Fn(u32) -> Format,
    ctl: &Arc<Control>,
    t_run: Instant,
) -> Result<Streams, NetError> {
    let warmup_end = t_run + Duration::from_nanos(p.warmup_ns);
    let streams_per_dir = p.streams.max(1) as u64;
    let mut out = Streams {
        meters: Vec::with_capacity(sockets.len()),
        threads: Vec::new(),
        rr_threads: Vec::new(),
        sweep: Arc::new(Mutex::new(Vec::new())),
    };
    let mut bulk = Vec::new();
    for (i, sock) in sockets.iter().enumerate() {
        let id = i as u32;
        let sending = p.stream_is_up(id);
        let quota = crate::config::quota(p.bytes, streams_per_dir, id as u64 % streams_per_dir);
        let meter = StreamMeter::new(id, sending, sock.clone());
        if matches!(p.mode, Mode::Rr { .. }) {
            meter.enable_latency();
        }
        out.meters.push(meter.clone());
        let ctl = ctl.clone();
        let s = match sock {
            StreamSocket::Udp(u) => {
                let u = u.clone();
                let plan = crate::udp::SendPlan {
                    len: p.len as usize,
                    rate_bps: p.rate_bps,
                    quota,
                    offload: p.udp_offload,
                    format: format(id),
                };
                let format = format(id);
                let (len, offload) = (p.len as usize, p.udp_offload);
                let h = crate::tcp::spawn(format!("u{id}"), ctl.cpu, move || {
                    if sending {
                        crate::udp::send(&meter, &u, plan, &ctl)
                    } else {
                        crate::udp::receive(&meter, &u, len, offload, format, &ctl)
                    }
                })
                .map_err(thread_error)?;
                out.threads.push(h);
                continue;
            }
            StreamSocket::Tcp(t) => t.clone(),
        };
        match p.mode {
            Mode::Stream => bulk.push(BulkStream {
                meter,
                sock: s,
                quota,
            }),
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
                let h = crate::tcp::spawn(format!("c{id}"), ctl.cpu, move || {
                    crate::rr::request(&meter, &s, shape, warmup_end, &ctl)
                })
                .map_err(thread_error)?;
                out.rr_threads.push(h);
            }
            Mode::Sweep {
                min_bytes,
                max_bytes,
            } => {
                let points = out.sweep.clone();
                let duration_ns = p.duration_ns;
                let h = crate::tcp::spawn(format!("c{id}"), ctl.cpu, move || {
                    sweep(&meter, &s, min_bytes, max_bytes, duration_ns, &points, &ctl)
                })
                .map_err(thread_error)?;
                out.threads.push(h);
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
        let hs = crate::bulk::spawn(bulk, plan, ctl, 'c').map_err(thread_error)?;
        out.threads.extend(hs);
    }
    Ok(out)
}

/// The sweep's data thread: every size in turn, the points into `points`.
fn sweep(
    meter: &StreamMeter,
    s: &TcpStream,
    min_bytes: u32,
    max_bytes: u32,
    duration_ns: u64,
    points: &Mutex<Vec<SweepPoint>>,
    ctl: &Control,
) {
    let sizes = crate::sweep::sweep_sizes(min_bytes, max_bytes);
    let per = Duration::from_nanos(duration_ns / sizes.len().max(1) as u64)
        .max(Duration::from_millis(20));
    let r = crate::sweep::sweep(s, &sizes, per, ctl, |pt, round_trips| {
        // Warm-up round trips moved bytes too.
        meter.messages.fetch_add(round_trips, Ordering::Relaxed);
        meter
            .bytes
            .fetch_add(round_trips * pt.size_bytes as u64, Ordering::Relaxed);
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
}

/// The other end of the test as the interval loop sees it.
pub(crate) trait Peer {
    /// Called at every turn of the loop while data flows: an error ends the test (the peer
    /// stopped it or went away).
    fn watch(&mut self) -> Result<(), NetError> {
        Ok(())
    }

    /// This end's senders are told to stop (`ctl.stop`): tell the peer the test is over.
    /// `meters` are this end's streams.
    fn stop(&mut self, reason: StopReason, meters: &[Arc<StreamMeter>]) -> Result<(), NetError>;
}

/// Closes intervals and shows them.
struct Progress {
    sending: Vec<bool>,
    prev_msgs: Vec<u64>,
    prev_retrans: Vec<u32>,
    total_s: f64,
}

impl Progress {
    fn emit(
        &mut self,
        rec: &mut Recorder,
        end: Instant,
        on_interval: &mut dyn FnMut(&LiveInterval),
    ) {
        let (mark, bytes) = rec.tick_at(end);
        let msgs: Vec<u64> = rec
            .meters()
            .iter()
            .zip(self.prev_msgs.iter_mut())
            .map(|(m, prev)| {
                // A UDP receiver counts distinct datagrams; every other stream its messages.
                let v = match m.socket {
                    StreamSocket::Udp(_) if !m.sending => m.udp.datagrams.load(Ordering::Relaxed),
                    _ => m.messages.load(Ordering::Relaxed),
                };
                let d = v.saturating_sub(*prev);
                *prev = v;
                d
            })
            .collect();
        let stream_tcp: Vec<Option<TcpInfoSample>> = rec.last_tcp().collect();
        let stream_retransmits = stream_tcp
            .iter()
            .zip(self.prev_retrans.iter_mut())
            .map(|(t, prev)| {
                t.map(|t| {
                    let d = t.total_retrans.saturating_sub(*prev);
                    *prev = t.total_retrans;
                    d as u64
                })
            })
            .collect();
        on_interval(&LiveInterval {
            start_s: mark.start_s,
            length_s: mark.length_s,
            stream_bytes: bytes,
            stream_sending: self.sending.clone(),
            stream_messages: msgs,
            total_s: self.total_s,
            latency: rec.last_latency(),
            stream_tcp,
            stream_retransmits,
        });
    }
}

/// Samples each interval until the test ends, tells the peer, waits for this end's data
/// threads.
pub(crate) fn drive(
    rec: &mut Recorder,
    p: &TestParams,
    ctl: &Control,
    peer: &mut dyn Peer,
    on_interval: &mut dyn FnMut(&LiveInterval),
) -> Result<StopReason, NetError> {
    let interval = Duration::from_nanos(p.interval_ns);
    let total = Duration::from_nanos(p.total_time_ns());
    // The sweep times itself; a byte count runs until sent unless -t bounds it too.
    let time_limit = (p.duration_ns > 0 && !matches!(p.mode, Mode::Sweep { .. })).then_some(total);
    let watch_stall = p.bytes > 0 && time_limit.is_none();
    let sending: Vec<bool> = rec.meters().iter().map(|m| m.sending).collect();
    let mut progress = Progress {
        prev_msgs: vec![0; sending.len()],
        prev_retrans: vec![0; sending.len()],
        total_s: time_limit.map_or(0.0, |t| t.as_secs_f64()),
        sending,
    };
    let mut next_tick = rec.start() + interval;
    let mut moved = (0u64, Instant::now());
    let reason = loop {
        let now = Instant::now();
        if now >= next_tick {
            progress.emit(rec, now, on_interval);
            next_tick += interval;
            if next_tick < now {
                next_tick = now + interval;
            }
        }
        let bytes: u64 = rec
            .meters()
            .iter()
            .map(|m| m.bytes.load(Ordering::Relaxed))
            .sum();
        if bytes != moved.0 {
            moved = (bytes, now);
        }
        let local_senders_done = rec
            .meters()
            .iter()
            .all(|m| !m.sending || m.done.load(Ordering::Acquire));
        let all_sending = progress.sending.iter().all(|&s| s);
        if nsperf_core::signal::interrupted() {
            break StopReason::Interrupted;
        }
        if time_limit.is_some_and(|t| now - rec.start() >= t) {
            break StopReason::Time;
        }
        if p.bytes > 0 && p.mode == Mode::Stream && all_sending && local_senders_done {
            break StopReason::Bytes;
        }
        if rec.all_done() {
            break StopReason::Streams;
        }
        if watch_stall && now - moved.1 >= STALL_TIMEOUT {
            break StopReason::Stalled;
        }
        if let Err(e) = peer.watch() {
            ctl.abort.store(true, Ordering::Release);
            return Err(e);
        }
        let wait = next_tick
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        std::thread::sleep(wait);
    };
    ctl.stop.store(true, Ordering::Release);
    if matches!(reason, StopReason::Interrupted | StopReason::Stalled) {
        // Receivers end now too; the peer still reports what it measured.
        ctl.abort.store(true, Ordering::Release);
    }
    if let Err(e) = peer.stop(reason, rec.meters()) {
        ctl.abort.store(true, Ordering::Release);
        return Err(e);
    }
    let stop_at = Instant::now();
    while !rec.all_done() {
        if stop_at.elapsed() > Duration::from_secs(15) {
            ctl.abort.store(true, Ordering::Release);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    // The last interval ends when the last data moved.
    let end = rec.last_activity().max(stop_at);
    progress.emit(rec, end, on_interval);
    Ok(reason)
}
