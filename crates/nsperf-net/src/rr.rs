//! Request/response (`--rr`) and the NetPIPE-style message-size sweep (`--sweep`): one
//! transaction at a time per connection, timed on the client with the monotonic clock.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nsperf_core::stats::LatencyHistogram;

use crate::meter::StreamMeter;
use crate::results::SweepPoint;
use crate::tcp::{Control, POLL};

fn retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Reads exactly `buf.len()` bytes, riding out the poll timeouts; `Ok(false)` on a clean end
/// of stream before the first byte or on abort.
fn read_full(mut sock: &TcpStream, buf: &mut [u8], ctl: &Control) -> io::Result<bool> {
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

fn write_full(mut sock: &TcpStream, buf: &[u8], ctl: &Control) -> io::Result<bool> {
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

/// Server side of `--rr`: answers each request of `req` bytes with `resp` bytes.
pub fn respond(meter: &StreamMeter, sock: &TcpStream, req: u32, resp: u32, ctl: &Control) {
    let _ = sock.set_read_timeout(Some(POLL));
    let _ = sock.set_write_timeout(Some(POLL));
    let mut inb = vec![0u8; req as usize];
    let out = vec![0x5au8; resp as usize];
    let mut moved = 0u64;
    let mut n = 0u64;
    let err = loop {
        match read_full(sock, &mut inb, ctl) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
        match write_full(sock, &out, ctl) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
        n += 1;
        moved += req as u64;
        meter.bytes.store(moved, Ordering::Relaxed);
        meter.messages.store(n, Ordering::Relaxed);
    };
    meter.finish(err);
}

/// Server side of `--sweep`: sends back every byte it reads.
pub fn echo(meter: &StreamMeter, sock: &TcpStream, ctl: &Control) {
    let _ = sock.set_read_timeout(Some(POLL));
    let _ = sock.set_write_timeout(Some(POLL));
    let mut buf = vec![0u8; 256 * 1024];
    let mut moved = 0u64;
    let mut r = sock;
    let err = loop {
        match r.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => {
                match write_full(sock, &buf[..n], ctl) {
                    Ok(true) => {}
                    Ok(false) => break None,
                    Err(e) => break Some(e.to_string()),
                }
                moved += n as u64;
                meter.bytes.store(moved, Ordering::Relaxed);
            }
            Err(e) if retryable(&e) => {
                if ctl.abort.load(Ordering::Relaxed) || nsperf_core::signal::interrupted() {
                    break None;
                }
            }
            Err(e) => break Some(e.to_string()),
        }
    };
    meter.finish(err);
}

/// Client side of `--rr` on one connection: transactions until `ctl.stop`. Returns the
/// latency histogram of the transactions completed after `warmup_end`.
pub fn request(
    meter: &StreamMeter,
    sock: &TcpStream,
    req: u32,
    resp: u32,
    warmup_end: Instant,
    ctl: &Control,
) -> LatencyHistogram {
    let _ = sock.set_read_timeout(Some(POLL));
    let _ = sock.set_write_timeout(Some(POLL));
    let out = vec![0x5au8; req as usize];
    let mut inb = vec![0u8; resp as usize];
    let mut hist = LatencyHistogram::new();
    let mut n = 0u64;
    let mut moved = 0u64;
    let err = loop {
        if ctl.stop.load(Ordering::Relaxed) {
            break None;
        }
        let t0 = Instant::now();
        match write_full(sock, &out, ctl) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
        match read_full(sock, &mut inb, ctl) {
            Ok(true) => {}
            Ok(false) => break Some("server closed the connection".into()),
            Err(e) => break Some(e.to_string()),
        }
        let ns = t0.elapsed().as_nanos() as u64;
        meter.record_latency_ns(ns);
        if t0 >= warmup_end {
            hist.record_ns(ns);
        }
        n += 1;
        moved += resp as u64;
        meter.bytes.store(moved, Ordering::Relaxed);
        meter.messages.store(n, Ordering::Relaxed);
    };
    let _ = sock.shutdown(std::net::Shutdown::Write);
    meter.finish(err);
    hist
}

/// The message sizes of a sweep: each power of two in range with its ±3 byte neighbours
/// (NetPIPE's perturbations), plus both ends of the range, ascending and distinct.
pub fn sweep_sizes(min: u32, max: u32) -> Vec<u32> {
    let mut v = vec![min, max];
    let mut p: u64 = 1;
    while p <= max as u64 {
        for s in [p.saturating_sub(3), p, p + 3] {
            if s >= min as u64 && s <= max as u64 {
                v.push(s as u32);
            }
        }
        p *= 2;
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// One round trip of `size` bytes: write them and read them back. Large messages are written
/// in chunks with the echoed bytes drained between them, so neither side blocks the other.
fn round_trip(sock: &TcpStream, out: &[u8], inb: &mut [u8], ctl: &Control) -> io::Result<bool> {
    let size = out.len();
    if size <= 64 * 1024 {
        return Ok(write_full(sock, out, ctl)? && read_full(sock, inb, ctl)?);
    }
    let fd = sock.as_raw_fd();
    let mut got = 0usize;
    for chunk in out.chunks(64 * 1024) {
        if !write_full(sock, chunk, ctl)? {
            return Ok(false);
        }
        loop {
            // SAFETY: receives into the unfilled part of `inb`.
            let n = unsafe {
                libc::recv(
                    fd,
                    inb[got..].as_mut_ptr().cast(),
                    size - got,
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                got += n as usize;
            } else if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            } else {
                break;
            }
        }
    }
    read_full(sock, &mut inb[got..], ctl)
}

/// Client side of `--sweep`: ping-pong at each size for `per_size` of time (at least three
/// round trips). `progress` is called after each size.
pub fn sweep(
    sock: &TcpStream,
    sizes: &[u32],
    per_size: Duration,
    ctl: &Control,
    mut progress: impl FnMut(&SweepPoint),
) -> io::Result<Vec<SweepPoint>> {
    let _ = sock.set_read_timeout(Some(POLL));
    let _ = sock.set_write_timeout(Some(POLL));
    let max = sizes.iter().copied().max().unwrap_or(1) as usize;
    let out = vec![0x5au8; max];
    let mut inb = vec![0u8; max];
    let mut points = Vec::with_capacity(sizes.len());
    for &size in sizes {
        let s = size as usize;
        // One untimed round trip warms the path for this size.
        if !round_trip(sock, &out[..s], &mut inb[..s], ctl)? {
            break;
        }
        let mut hist = LatencyHistogram::new();
        let t_end = Instant::now() + per_size;
        let mut n = 0u64;
        while n < 3 || Instant::now() < t_end {
            if ctl.stop.load(Ordering::Relaxed) || ctl.abort.load(Ordering::Relaxed) {
                break;
            }
            let t0 = Instant::now();
            if !round_trip(sock, &out[..s], &mut inb[..s], ctl)? {
                break;
            }
            hist.record_ns(t0.elapsed().as_nanos() as u64);
            n += 1;
        }
        let sum = hist.summary();
        let p50 = sum.p50_ns.max(1);
        let point = SweepPoint {
            size_bytes: size,
            round_trips: n,
            rtt_p50_ns: sum.p50_ns,
            rtt_mean_ns: sum.mean_ns,
            // NetPIPE: one message each way per round trip, so one-way time is RTT / 2.
            throughput_bps: size as f64 * 8.0 / (p50 as f64 / 2.0 / 1e9),
        };
        progress(&point);
        points.push(point);
        if ctl.stop.load(Ordering::Relaxed) || ctl.abort.load(Ordering::Relaxed) {
            break;
        }
    }
    let _ = sock.shutdown(std::net::Shutdown::Write);
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_sizes_have_perturbations() {
        let v = sweep_sizes(1, 64);
        assert_eq!(
            v,
            vec![1, 2, 4, 5, 7, 8, 11, 13, 16, 19, 29, 32, 35, 61, 64]
        );
        let v = sweep_sizes(1000, 5000);
        assert_eq!(
            v,
            vec![
                1000, 1021, 1024, 1027, 2045, 2048, 2051, 4093, 4096, 4099, 5000
            ]
        );
    }
}
