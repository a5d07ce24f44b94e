//! Counters shared between data threads and the interval sampler of one end.
//!
//! A data thread only stores its running totals into atomics (a plain store, no locked
//! instruction per write); the sampler reads them once per interval together with `TCP_INFO`
//! and the CPU counters, and [`Recorder::finish`] turns the samples into [`SideResults`].

use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// A process-wide reference instant, so threads can store times in an atomic.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

use nsperf_core::cpu::CpuSampler;
use nsperf_core::stats::{LatencyHistogram, LatencySummary};

use crate::results::{
    IntervalMark, SideResults, StreamRecord, StreamSample, UdpCounters, fold_latency,
};

/// The socket of a stream (kept alive by the meter so the sampler may query it).
#[derive(Debug, Clone)]
pub enum StreamSocket {
    /// A TCP connection.
    Tcp(Arc<TcpStream>),
    /// A connected UDP socket.
    Udp(Arc<UdpSocket>),
}

/// UDP receive counters, updated by the receiving thread once per batch.
#[derive(Debug, Default)]
pub struct UdpAtomics {
    /// Distinct datagrams.
    pub datagrams: AtomicU64,
    /// Highest sequence + 1.
    pub expected: AtomicU64,
    /// Late arrivals.
    pub out_of_order: AtomicU64,
    /// Duplicates.
    pub duplicates: AtomicU64,
    /// Jitter in ns, as f64 bits.
    pub jitter_bits: AtomicU64,
    /// Kernel drop counter.
    pub kernel_drops: AtomicU64,
}

/// One stream's shared counters.
#[derive(Debug)]
pub struct StreamMeter {
    /// Stream index.
    pub id: u32,
    /// This end sends on it.
    pub sending: bool,
    /// Payload bytes moved so far.
    pub bytes: AtomicU64,
    /// Datagrams sent (UDP sender) or transactions done (request/response client).
    pub messages: AtomicU64,
    /// UDP receive counters.
    pub udp: UdpAtomics,
    /// Set when the data thread ended.
    pub done: AtomicBool,
    /// The error that ended it, if any.
    pub error: Mutex<Option<String>>,
    /// The socket.
    pub socket: StreamSocket,
    /// When data last moved, ns since the process epoch (see [`StreamMeter::touch`]).
    pub last_active_ns: AtomicU64,
    /// Latency of the transactions of the current interval (request/response client only,
    /// see [`StreamMeter::enable_latency`]); the sampler takes and clears it at each tick.
    latency: OnceLock<Mutex<LatencyHistogram>>,
}

impl StreamMeter {
    /// A meter for one stream.
    pub fn new(id: u32, sending: bool, socket: StreamSocket) -> Arc<Self> {
        Arc::new(StreamMeter {
            id,
            sending,
            bytes: AtomicU64::new(0),
            messages: AtomicU64::new(0),
            udp: UdpAtomics::default(),
            done: AtomicBool::new(false),
            error: Mutex::new(None),
            socket,
            last_active_ns: AtomicU64::new(0),
            latency: OnceLock::new(),
        })
    }

    /// Gives the stream a per-interval latency histogram (a request/response client calls it
    /// before it makes the [`Recorder`]; the histogram is allocated here, never per sample).
    pub fn enable_latency(&self) {
        self.latency
            .get_or_init(|| Mutex::new(LatencyHistogram::new()));
    }

    /// Records one transaction's latency into the current interval (no-op unless enabled).
    /// The lock is the data thread's own except for the sampler's moment at each tick.
    #[inline]
    pub fn record_latency_ns(&self, ns: u64) {
        if let Some(m) = self.latency.get()
            && let Ok(mut h) = m.lock()
        {
            h.record_ns(ns);
        }
    }

    /// Takes the interval's latency: adds it to `all`, returns its summary and clears it.
    fn take_latency(&self, all: &mut LatencyHistogram) -> Option<LatencySummary> {
        let mut h = self.latency.get()?.lock().ok()?;
        all.merge(&h);
        let s = h.summary();
        h.reset();
        Some(s)
    }

    /// Records that data moved now (a UDP receiver calls it per batch; every other data
    /// thread is stamped when it finishes).
    pub fn touch(&self) {
        let ns = epoch().elapsed().as_nanos() as u64;
        self.last_active_ns.store(ns.max(1), Ordering::Relaxed);
    }

    /// Marks the stream finished, with an error if it failed.
    pub fn finish(&self, error: Option<String>) {
        // A UDP receiver ends an idle drain after its last datagram: keep that time.
        if self.sending || !matches!(self.socket, StreamSocket::Udp(_)) {
            self.touch();
        }
        if let Some(e) = error
            && let Ok(mut g) = self.error.lock()
        {
            *g = Some(e);
        }
        self.done.store(true, Ordering::Release);
    }

    fn sample(&self, with_tcp_info: bool) -> StreamSample {
        let tcp = match &self.socket {
            StreamSocket::Tcp(s) if with_tcp_info => crate::tcpinfo::sample(&**s),
            _ => None,
        };
        let udp = match &self.socket {
            StreamSocket::Udp(_) if !self.sending => Some(UdpCounters {
                datagrams: self.udp.datagrams.load(Ordering::Relaxed),
                expected: self.udp.expected.load(Ordering::Relaxed),
                out_of_order: self.udp.out_of_order.load(Ordering::Relaxed),
                duplicates: self.udp.duplicates.load(Ordering::Relaxed),
                jitter_ns: f64::from_bits(self.udp.jitter_bits.load(Ordering::Relaxed)),
                kernel_drops: self.udp.kernel_drops.load(Ordering::Relaxed),
            }),
            _ => None,
        };
        StreamSample {
            bytes: self.bytes.load(Ordering::Relaxed),
            messages: self.messages.load(Ordering::Relaxed),
            tcp,
            udp,
            latency: None,
        }
    }

    fn record(&self) -> StreamRecord {
        let fd = match &self.socket {
            StreamSocket::Tcp(s) => s.as_raw_fd(),
            StreamSocket::Udp(s) => s.as_raw_fd(),
        };
        let (snd, rcv) = crate::sock::buffers(fd);
        let is_tcp = matches!(self.socket, StreamSocket::Tcp(_));
        StreamRecord {
            id: self.id,
            sending: self.sending,
            sndbuf_bytes: snd,
            rcvbuf_bytes: rcv,
            congestion: if is_tcp {
                crate::sock::congestion(fd)
            } else {
                None
            },
            mss: if is_tcp {
                crate::sock::get_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG)
                    .ok()
                    .map(|m| m as u32)
            } else {
                None
            },
            samples: Vec::new(),
            error: self.error.lock().ok().and_then(|g| g.clone()),
        }
    }
}

/// Samples the streams and the CPU of one end at each interval.
#[derive(Debug)]
pub struct Recorder {
    role: String,
    start: Instant,
    last: Instant,
    cpu: CpuSampler,
    meters: Vec<Arc<StreamMeter>>,
    records: Vec<StreamRecord>,
    results: SideResults,
    tcp_info: bool,
    /// All streams' latency of the current interval (request/response), allocated once.
    latency: Option<LatencyHistogram>,
    /// UDP tests: the host's UDP counters at the start.
    udp_host: Option<crate::snmp::UdpHostCounters>,
    /// This process's CPU quota, with its throttling counters at the start.
    cpu_quota: Option<(
        nsperf_core::cgroup::CpuQuota,
        Option<nsperf_core::cgroup::CpuThrottling>,
    )>,
}

impl Recorder {
    /// Starts the clock of this end now.
    pub fn new(role: &str, meters: Vec<Arc<StreamMeter>>) -> Self {
        let _ = epoch();
        let now = Instant::now();
        let records = meters.iter().map(|m| m.record()).collect();
        // Request/response meters have their histograms before the recorder starts.
        let latency = meters
            .iter()
            .any(|m| m.latency.get().is_some())
            .then(LatencyHistogram::new);
        let udp_host = meters
            .iter()
            .any(|m| matches!(m.socket, StreamSocket::Udp(_)))
            .then(crate::snmp::UdpHostCounters::read)
            .flatten();
        Recorder {
            role: role.to_string(),
            start: now,
            last: now,
            cpu: CpuSampler::new(),
            meters,
            records,
            results: SideResults {
                role: role.to_string(),
                ..Default::default()
            },
            tcp_info: true,
            latency,
            udp_host,
            cpu_quota: nsperf_core::cgroup::CpuQuota::of_this_process().map(|q| {
                let t = q.throttling();
                (q, t)
            }),
        }
    }

    /// The start instant.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// All streams' latency in the interval closed last (request/response client).
    pub fn last_latency(&self) -> Option<LatencySummary> {
        self.results.latency.last().copied().flatten()
    }

    /// Each stream's `TCP_INFO` taken at the last tick (`None` for UDP, or when it failed).
    pub fn last_tcp(&self) -> impl Iterator<Item = Option<crate::tcpinfo::TcpInfoSample>> + '_ {
        self.records
            .iter()
            .map(|r| r.samples.last().and_then(|s| s.tcp))
    }

    /// The meters.
    pub fn meters(&self) -> &[Arc<StreamMeter>] {
        &self.meters
    }

    /// True when every data thread has ended.
    pub fn all_done(&self) -> bool {
        self.meters.iter().all(|m| m.done.load(Ordering::Acquire))
    }

    /// When data last moved on any stream (the recorder's start if never).
    pub fn last_activity(&self) -> Instant {
        let ns = self
            .meters
            .iter()
            .map(|m| m.last_active_ns.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        if ns == 0 {
            self.start
        } else {
            (epoch() + std::time::Duration::from_nanos(ns)).max(self.start)
        }
    }

    /// Closes the current interval now; returns its mark and the bytes per stream in it.
    pub fn tick(&mut self) -> (IntervalMark, Vec<u64>) {
        self.tick_at(Instant::now())
    }

    /// Closes the last interval at `end` (when the data stopped moving, which may be before
    /// now: a receiver waits out an idle drain). Counters are read now.
    pub fn tick_at(&mut self, end: Instant) -> (IntervalMark, Vec<u64>) {
        let now = end.max(self.last);
        let length_s = (now - self.last).as_secs_f64();
        let mark = IntervalMark {
            start_s: (self.last - self.start).as_secs_f64(),
            length_s,
        };
        self.last = now;
        let cpu = self.cpu.sample(length_s);
        let mut deltas = Vec::with_capacity(self.meters.len());
        for (m, rec) in self.meters.iter().zip(self.records.iter_mut()) {
            let mut s = m.sample(self.tcp_info);
            if let Some(all) = self.latency.as_mut() {
                s.latency = m.take_latency(all);
            }
            let prev = rec.samples.last().map(|p| p.bytes).unwrap_or(0);
            deltas.push(s.bytes.saturating_sub(prev));
            rec.samples.push(s);
        }
        if let Some(all) = self.latency.as_mut() {
            self.results
                .latency
                .push((all.count() > 0).then(|| all.summary()));
            all.reset();
        }
        self.results.intervals.push(mark);
        self.results.cpu.push(cpu);
        (mark, deltas)
    }

    /// The results of this end (call after the last tick). A last interval shorter than
    /// `min_tail_s` (the drain after the stop) is folded into the one before, so tables do
    /// not end with a sliver; the byte counters are cumulative, so nothing is lost.
    pub fn finish(mut self, min_tail_s: f64) -> SideResults {
        let n = self.results.intervals.len();
        if n >= 2 && self.results.intervals[n - 1].length_s < min_tail_s {
            let tail = self.results.intervals.pop().expect("n >= 2");
            self.results.intervals[n - 2].length_s += tail.length_s;
            self.results.cpu.pop();
            for rec in &mut self.records {
                if rec.samples.len() == n {
                    let mut last = rec.samples.pop().expect("n >= 2");
                    last.latency = fold_latency(rec.samples[n - 2].latency, last.latency);
                    rec.samples[n - 2] = last;
                }
            }
            if self.results.latency.len() == n {
                let tail = self.results.latency.pop().flatten();
                let before = self.results.latency[n - 2];
                self.results.latency[n - 2] = fold_latency(before, tail);
            }
        }
        for (m, rec) in self.meters.iter().zip(self.records.iter_mut()) {
            let fresh = m.record();
            rec.error = fresh.error;
            rec.sndbuf_bytes = fresh.sndbuf_bytes;
            rec.rcvbuf_bytes = fresh.rcvbuf_bytes;
        }
        self.results.streams = std::mem::take(&mut self.records);
        if let Some((quota, before)) = self.cpu_quota.take() {
            let during = before
                .zip(quota.throttling())
                .map(|(b, now)| now.since(&b))
                .filter(|d| d.periods > 0);
            self.results.cpu_limit = Some(crate::results::CpuLimitUse {
                throttled_pct: during.map(|d| 100.0 * d.throttled as f64 / d.periods as f64),
                quota,
            });
        }
        if let Some(before) = self.udp_host
            && let Some(now) = crate::snmp::UdpHostCounters::read()
        {
            self.results.udp_host = Some(now.since(&before));
        }
        self.results.role = self.role;
        self.results
    }
}
