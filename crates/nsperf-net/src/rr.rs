//! Request/response (`--rr`): one transaction at a time per connection, timed on the client
//! with the monotonic clock.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Instant;

use nsperf_core::stats::LatencyHistogram;

use crate::meter::StreamMeter;
use crate::tcp::{Control, POLL};

fn retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Reads exactly `buf.len()` bytes, riding out the poll timeouts; `Ok(false)` on a clean end
/// of stream before the first byte or on abort.
pub(crate) fn read_full(mut sock: &TcpStream, buf: &mut [u8], ctl: &Control) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match sock.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if retryable(&e) => {
                if ctl.abort.load(Ordering::Relaxed) || nsperf_core::signal::interrupted() {
                    return Ok(false);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

pub(crate) fn write_full(mut sock: &TcpStream, buf: &[u8], ctl: &Control) -> io::Result<bool> {
    let mut put = 0;
    while put < buf.len() {
        match sock.write(&buf[put..]) {
            Ok(n) => put += n,
            Err(e) if retryable(&e) => {
                if ctl.abort.load(Ordering::Relaxed) || nsperf_core::signal::interrupted() {
                    return Ok(false);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Most requests answered with one write on the server (`--burst`), and most bytes of
/// requests or responses held per connection for it.
const MAX_BATCH: usize = 64;
const MAX_BATCH_BYTES: usize = 1 << 20;

/// Server side of `--rr`: answers each request of `request_bytes` with `response_bytes`.
/// With several in flight (`--burst`) the requests that arrived together are answered with
/// one write, in order, so the server's syscalls are not the limit.
pub fn respond(meter: &StreamMeter, mut sock: &TcpStream, shape: Shape, ctl: &Control) {
    let _ = sock.set_read_timeout(Some(POLL));
    let _ = sock.set_write_timeout(Some(POLL));
    let (req, resp) = (shape.request_bytes as usize, shape.response_bytes as usize);
    let batch = (shape.burst as usize)
        .min(MAX_BATCH)
        .min(MAX_BATCH_BYTES / req.max(resp))
        .max(1);
    let mut inb = vec![0u8; req * batch];
    let out = vec![0x5au8; resp * batch];
    // Bytes of requests read and not yet answered (the payload is filler: only counted).
    let mut have = 0usize;
    let mut n = 0u64;
    let err = loop {
        match sock.read(&mut inb[have..]) {
            Ok(0) if have == 0 => break None,
            Ok(0) => break Some("the client closed in the middle of a request".to_string()),
            Ok(got) => have += got,
            Err(e) if retryable(&e) => {
                if ctl.abort.load(Ordering::Relaxed) || nsperf_core::signal::interrupted() {
                    break None;
                }
                continue;
            }
            Err(e) => break Some(e.to_string()),
        }
        let complete = have / req;
        if complete == 0 {
            continue;
        }
        match write_full(sock, &out[..complete * resp], ctl) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
        have -= complete * req;
        n += complete as u64;
        meter.bytes.store(n * req as u64, Ordering::Relaxed);
        meter.messages.store(n, Ordering::Relaxed);
    };
    meter.finish(err);
}

/// Client side of `--rr` on one connection: transactions until `ctl.stop`, `burst` of them
/// in flight (`--burst`; 1 = one at a time, a blocking write then a blocking read). Returns
/// the latency histogram of the transactions completed after `warmup_end`. Every request
/// sent is answered and counted before the connection closes, so both ends count the same
/// transactions.
pub fn request(
    meter: &StreamMeter,
    sock: &TcpStream,
    shape: Shape,
    warmup_end: Instant,
    ctl: &Control,
) -> LatencyHistogram {
    let _ = sock.set_read_timeout(Some(POLL));
    let _ = sock.set_write_timeout(Some(POLL));
    let mut t = Tally {
        meter,
        hist: LatencyHistogram::new(),
        warmup_end,
        resp: shape.response_bytes as u64,
        n: 0,
    };
    let err = if shape.burst <= 1 {
        one_at_a_time(sock, shape, ctl, &mut t)
    } else {
        in_flight(sock, shape, ctl, &mut t)
    };
    let _ = sock.shutdown(std::net::Shutdown::Write);
    meter.finish(err);
    t.hist
}

/// The transactions of one connection: sizes and how many in flight.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Request bytes.
    pub request_bytes: u32,
    /// Response bytes.
    pub response_bytes: u32,
    /// Transactions in flight (`--burst`).
    pub burst: u32,
}

/// Counts completed transactions into the meter and the histogram.
struct Tally<'a> {
    meter: &'a StreamMeter,
    hist: LatencyHistogram,
    warmup_end: Instant,
    resp: u64,
    n: u64,
}

impl Tally<'_> {
    fn done(&mut self, started: Instant, ended: Instant) {
        let ns = ended.saturating_duration_since(started).as_nanos() as u64;
        self.meter.record_latency_ns(ns);
        if started >= self.warmup_end {
            self.hist.record_ns(ns);
        }
        self.n += 1;
        self.meter
            .bytes
            .store(self.n * self.resp, Ordering::Relaxed);
        self.meter.messages.store(self.n, Ordering::Relaxed);
    }
}

fn one_at_a_time(sock: &TcpStream, shape: Shape, ctl: &Control, t: &mut Tally) -> Option<String> {
    let out = vec![0x5au8; shape.request_bytes as usize];
    let mut inb = vec![0u8; shape.response_bytes as usize];
    loop {
        if ctl.stop.load(Ordering::Relaxed) {
            return None;
        }
        let t0 = Instant::now();
        match write_full(sock, &out, ctl) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => return Some(e.to_string()),
        }
        match read_full(sock, &mut inb, ctl) {
            Ok(true) => {}
            Ok(false) => return Some("server closed the connection".into()),
            Err(e) => return Some(e.to_string()),
        }
        t.done(t0, Instant::now());
    }
}

/// How long the client waits for the answers still in flight after the stop.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);
/// Most bytes of responses read per call.
const MAX_READ: usize = 1 << 20;

/// `burst` transactions in flight: one non-blocking socket waited on with `poll(2)`, requests
/// written while fewer than `burst` are unanswered, responses read as they come. Each
/// request is stamped when the write that carries its first byte starts; its latency ends
/// when the read that completes its response returns. Buffers are allocated once.
fn in_flight(sock: &TcpStream, shape: Shape, ctl: &Control, t: &mut Tally) -> Option<String> {
    let (req, resp, burst) = (
        shape.request_bytes as usize,
        shape.response_bytes as usize,
        shape.burst as usize,
    );
    if let Err(e) = sock.set_nonblocking(true) {
        return Some(e.to_string());
    }
    let out = vec![0x5au8; req * burst];
    let mut inb = vec![0u8; (resp * burst).clamp(resp.min(MAX_READ), MAX_READ)];
    let mut started: std::collections::VecDeque<Instant> =
        std::collections::VecDeque::with_capacity(burst);
    // Bytes of the request being written, and of the response being read.
    let (mut out_pos, mut in_pos) = (0usize, 0usize);
    let mut stop_at: Option<Instant> = None;
    let fd = std::os::fd::AsRawFd::as_raw_fd(sock);
    loop {
        if ctl.abort.load(Ordering::Relaxed) {
            return None;
        }
        if stop_at.is_none()
            && (ctl.stop.load(Ordering::Relaxed) || nsperf_core::signal::interrupted())
        {
            stop_at = Some(Instant::now());
        }
        if let Some(s) = stop_at {
            if started.is_empty() {
                return None;
            }
            if s.elapsed() > DRAIN {
                return Some(format!(
                    "{} transactions still unanswered {} s after the stop",
                    started.len(),
                    DRAIN.as_secs()
                ));
            }
        }
        // The rest of a started request, then new ones up to the burst (none once stopping).
        let pending = if out_pos > 0 { req - out_pos } else { 0 };
        let room = if stop_at.is_some() {
            0
        } else {
            burst - started.len()
        };
        let to_write = pending + room * req;
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN | if to_write > 0 { libc::POLLOUT } else { 0 },
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, POLL.as_millis() as libc::c_int) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Some(e.to_string());
        }
        if to_write > 0 && pfd.revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0 {
            let t0 = Instant::now();
            match (&*sock).write(&out[..to_write]) {
                Ok(n) => {
                    // Requests whose first byte went out in this write start now.
                    let fresh = n.saturating_sub(pending).div_ceil(req);
                    started.extend(std::iter::repeat_n(t0, fresh));
                    out_pos = (out_pos + n) % req;
                }
                Err(e) if retryable(&e) => {}
                Err(e) => return Some(e.to_string()),
            }
        }
        if pfd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0 {
            match (&*sock).read(&mut inb) {
                Ok(0) => return Some("server closed the connection".into()),
                Ok(n) => {
                    let now = Instant::now();
                    in_pos += n;
                    while in_pos >= resp {
                        in_pos -= resp;
                        match started.pop_front() {
                            Some(t0) => t.done(t0, now),
                            None => return Some("more responses than requests".into()),
                        }
                    }
                }
                Err(e) if retryable(&e) => {}
                Err(e) => return Some(e.to_string()),
            }
        }
    }
}
