//! UDP data path: sequence-numbered datagrams sent in batches (`sendmmsg(2)`, with UDP GSO
//! where the kernel has it) and received in batches (`recvmmsg(2)`, with UDP GRO), paced to
//! the target rate; loss, reordering, duplicates and RFC 3550 jitter on the receiver.
//!
//! Every datagram starts with a [`HEADER_LEN`]-byte header; the payload after it is filler.
//! Buffers are allocated once per stream; the loops only rewrite headers in place.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::client::ClientRun;
use crate::meter::StreamMeter;
use crate::report::UdpSummary;
use crate::tcp::Control;

/// Bytes of the header at the start of every datagram: sequence number (u64), send time in
/// ns of CLOCK_REALTIME (u64), stream id (u32), test cookie low bits (u32), big endian.
pub const HEADER_LEN: usize = 24;

/// Sequence number of the hello datagrams that tell the server where the client's socket is.
pub const HELLO_SEQ: u64 = u64::MAX;

const SOL_UDP: libc::c_int = 17;
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
const SO_TIMESTAMPNS: libc::c_int = 35;
const SO_RXQ_OVFL: libc::c_int = 40;

/// Most segments in one GSO send.
const GSO_MAX_SEGMENTS: usize = 64;
/// Largest GSO send.
const GSO_MAX_BYTES: usize = 65_000;

/// The header of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Sequence number within the stream, from 0.
    pub seq: u64,
    /// Send time, ns of CLOCK_REALTIME.
    pub tx_ns: u64,
    /// Stream id.
    pub stream: u32,
    /// Low 32 bits of the test cookie.
    pub cookie: u32,
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `b` (which must be that long).
    pub fn write(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..16].copy_from_slice(&self.tx_ns.to_be_bytes());
        b[16..20].copy_from_slice(&self.stream.to_be_bytes());
        b[20..24].copy_from_slice(&self.cookie.to_be_bytes());
    }

    /// Reads a header; `None` when `b` is shorter than [`HEADER_LEN`].
    pub fn read(b: &[u8]) -> Option<Header> {
        let b = b.get(..HEADER_LEN)?;
        Some(Header {
            seq: u64::from_be_bytes(b[0..8].try_into().ok()?),
            tx_ns: u64::from_be_bytes(b[8..16].try_into().ok()?),
            stream: u32::from_be_bytes(b[16..20].try_into().ok()?),
            cookie: u32::from_be_bytes(b[20..24].try_into().ok()?),
        })
    }
}

/// CLOCK_REALTIME in ns (the receiver's kernel timestamps use the same clock).
fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Receive-side bookkeeping of one stream: distinct datagrams, loss by sequence numbers,
/// late arrivals, duplicates (within a window of [`SequenceTracker::WINDOW`] sequence
/// numbers) and RFC 3550 interarrival jitter.
#[derive(Debug, Clone)]
pub struct SequenceTracker {
    /// Highest sequence seen + 1.
    pub expected: u64,
    /// Distinct datagrams.
    pub received: u64,
    /// Arrivals with a sequence below one already seen.
    pub out_of_order: u64,
    /// Datagrams seen twice.
    pub duplicates: u64,
    /// RFC 3550 jitter estimate, ns.
    pub jitter_ns: f64,
    last_transit: Option<i64>,
    seen: Box<[u64]>,
}

impl Default for SequenceTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SequenceTracker {
    /// Sequence numbers remembered for duplicate detection.
    pub const WINDOW: u64 = 1 << 16;

    /// A fresh tracker.
    pub fn new() -> Self {
        SequenceTracker {
            expected: 0,
            received: 0,
            out_of_order: 0,
            duplicates: 0,
            jitter_ns: 0.0,
            last_transit: None,
            seen: vec![0u64; (Self::WINDOW / 64) as usize].into_boxed_slice(),
        }
    }

    fn bit(&self, seq: u64) -> bool {
        let i = (seq % Self::WINDOW) as usize;
        self.seen[i / 64] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, seq: u64, on: bool) {
        let i = (seq % Self::WINDOW) as usize;
        if on {
            self.seen[i / 64] |= 1 << (i % 64);
        } else {
            self.seen[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Datagrams missing so far (by sequence numbers; late arrivals reduce it).
    pub fn lost(&self) -> u64 {
        self.expected.saturating_sub(self.received)
    }

    /// Accounts one datagram sent at `tx_ns` and received at `rx_ns`.
    pub fn record(&mut self, seq: u64, tx_ns: u64, rx_ns: u64) {
        if seq >= self.expected {
            // Clear the bits of the sequence numbers skipped (they are missing for now).
            let gap = seq - self.expected;
            if gap >= Self::WINDOW {
                self.seen.fill(0);
            } else {
                for s in self.expected..seq {
                    self.set(s, false);
                }
            }
            self.set(seq, true);
            self.expected = seq + 1;
            self.received += 1;
        } else if self.expected - seq >= Self::WINDOW {
            // Too old to tell a duplicate: count it as a late arrival.
            self.out_of_order += 1;
            self.received += 1;
        } else if self.bit(seq) {
            self.duplicates += 1;
            return;
        } else {
            self.set(seq, true);
            self.out_of_order += 1;
            self.received += 1;
        }
        // RFC 3550 §6.4.1 and A.8: J += (|D| - J) / 16 over the transit-time differences.
        let transit = rx_ns as i64 - tx_ns as i64;
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
    }
}

/// Sets the socket buffers of a UDP data socket: `-w` when given, else large ones so the
/// receiver is not what drops (root may exceed `rmem_max`).
pub fn setup_socket(sock: &UdpSocket, window: Option<u64>, receiving: bool) {
    let fd = sock.as_raw_fd();
    let size = window.unwrap_or(if receiving { 32 << 20 } else { 4 << 20 });
    crate::sock::set_buffer(fd, !receiving, size);
    if receiving {
        let _ = crate::sock::set_int(fd, libc::SOL_SOCKET, SO_RXQ_OVFL, 1);
        let _ = crate::sock::set_int(fd, libc::SOL_SOCKET, SO_TIMESTAMPNS, 1);
    }
}

/// Datagrams the kernel dropped on this socket (the `drops` column of /proc/net/udp{,6}),
/// exact per datagram when GRO is off.
pub fn socket_drops(sock: &UdpSocket) -> Option<u64> {
    // SAFETY: fstat into a zeroed stat struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and pointer.
    if unsafe { libc::fstat(sock.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    let ino = st.st_ino.to_string();
    for f in ["/proc/self/net/udp", "/proc/self/net/udp6"] {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.get(9) == Some(&ino.as_str()) {
                return cols.last()?.parse().ok();
            }
        }
    }
    None
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// How one UDP sender runs.
#[derive(Debug, Clone, Copy)]
pub struct SendPlan {
    /// Datagram size.
    pub len: usize,
    /// Target bit rate of payload, 0 = as fast as possible.
    pub rate_bps: f64,
    /// Payload bytes to send, 0 = until stopped.
    pub quota: u64,
    /// Use UDP GSO when the kernel has it.
    pub offload: bool,
    /// Stream id.
    pub stream: u32,
    /// Test cookie.
    pub cookie: u64,
}

/// What a sender does next.
enum Next {
    /// Stopped, aborted, interrupted or the quota is sent.
    Stop,
    /// Ahead of the rate: it slept or yielded; ask again.
    Wait,
    /// Send a batch.
    Send,
}

/// The stop flags, the quota and the pacing every UDP send loop obeys.
#[derive(Debug, Clone, Copy)]
struct Pace {
    start: Instant,
    bytes_per_s: f64,
    quota: u64,
}

impl Pace {
    fn new(plan: &SendPlan, start: Instant) -> Pace {
        Pace {
            start,
            bytes_per_s: plan.rate_bps / 8.0,
            quota: plan.quota,
        }
    }

    /// After `bytes` sent: stop, wait (sleeping up to 50 ms, or yielding when the next send
    /// is due within 50 µs), or send.
    fn next(&self, ctl: &Control, bytes: u64) -> Next {
        if ctl.stop.load(Ordering::Relaxed)
            || ctl.abort.load(Ordering::Relaxed)
            || nsperf_core::signal::interrupted()
            || (self.quota > 0 && bytes >= self.quota)
        {
            return Next::Stop;
        }
        if self.bytes_per_s > 0.0 {
            let due = Duration::from_secs_f64(bytes as f64 / self.bytes_per_s);
            let el = self.start.elapsed();
            if due > el {
                let wait = due - el;
                if wait > Duration::from_micros(50) {
                    std::thread::sleep(wait.min(Duration::from_millis(50)));
                } else {
                    std::thread::yield_now();
                }
                return Next::Wait;
            }
        }
        Next::Send
    }
}

/// Sends paced, sequence-numbered datagrams until `ctl.stop` (or the quota).
pub fn send(meter: &StreamMeter, sock: &UdpSocket, plan: SendPlan, ctl: &Control) {
    let r = send_loop(meter, sock, plan, ctl);
    meter.finish(r.err().map(|e| e.to_string()));
}

fn send_loop(
    meter: &StreamMeter,
    sock: &UdpSocket,
    plan: SendPlan,
    ctl: &Control,
) -> io::Result<()> {
    let fd = sock.as_raw_fd();
    let len = plan.len;
    let _ = sock.set_write_timeout(Some(Duration::from_millis(200)));
    // Segments per message (GSO) and messages per sendmmsg.
    let mut seg = if plan.offload {
        (GSO_MAX_BYTES / len).min(GSO_MAX_SEGMENTS)
    } else {
        1
    };
    if seg >= 2 && crate::sock::set_int(fd, SOL_UDP, UDP_SEGMENT, len as libc::c_int).is_err() {
        seg = 1;
    }
    if seg < 2 {
        seg = 1;
    }
    let msgs = if seg > 1 { 8 } else { 64 };
    // Under a rate, keep bursts to about one millisecond of traffic.
    let burst_limit = if plan.rate_bps > 0.0 {
        ((plan.rate_bps / 8.0 * 1e-3) / len as f64).max(1.0) as usize
    } else {
        usize::MAX
    };
    let mut buf = vec![0x5au8; msgs * seg * len];
    let mut iov: Vec<libc::iovec> = (0..msgs)
        .map(|i| libc::iovec {
            iov_base: buf[i * seg * len..].as_mut_ptr().cast(),
            iov_len: seg * len,
        })
        .collect();
    // SAFETY: mmsghdr is plain data; zero is a valid "no address, no control" header.
    let mut hdrs: Vec<libc::mmsghdr> = (0..msgs).map(|_| unsafe { std::mem::zeroed() }).collect();
    let cookie = plan.cookie as u32;
    let pace = Pace::new(&plan, Instant::now());
    let mut seq = 0u64;
    let mut bytes = 0u64;
    loop {
        match pace.next(ctl, bytes) {
            Next::Stop => return Ok(()),
            Next::Wait => continue,
            Next::Send => {}
        }
        // How many datagrams this batch.
        let mut want = msgs * seg;
        want = want.min(burst_limit);
        if plan.quota > 0 {
            let left = (plan.quota - bytes).div_ceil(len as u64) as usize;
            want = want.min(left.max(1));
        }
        let tx_ns = realtime_ns();
        let nmsg = want.div_ceil(seg);
        for i in 0..want {
            let off = i * len;
            Header {
                seq: seq + i as u64,
                tx_ns,
                stream: plan.stream,
                cookie,
            }
            .write(&mut buf[off..off + HEADER_LEN]);
        }
        for (m, h) in hdrs.iter_mut().enumerate().take(nmsg) {
            let n_seg = (want - m * seg).min(seg);
            iov[m].iov_base = buf[m * seg * len..].as_mut_ptr().cast();
            iov[m].iov_len = n_seg * len;
            h.msg_hdr.msg_iov = &mut iov[m];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_len = 0;
        }
        // SAFETY: `hdrs[..nmsg]` point at live iovecs over `buf`.
        let rc = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), nmsg as libc::c_uint, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if would_block(&e)
                || e.raw_os_error() == Some(libc::ENOBUFS)
                || e.raw_os_error() == Some(libc::ECONNREFUSED)
            {
                continue;
            }
            if seg > 1 && matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::EINVAL)) {
                // The device cannot segment: fall back to plain datagrams.
                return fallback_plain(meter, sock, plan, ctl, seq, bytes, pace);
            }
            return Err(e);
        }
        let mut sent = 0usize;
        for h in hdrs.iter().take(rc as usize) {
            sent += h.msg_len as usize / len;
        }
        seq += sent as u64;
        bytes += (sent * len) as u64;
        meter.bytes.store(bytes, Ordering::Relaxed);
        meter.messages.store(seq, Ordering::Relaxed);
    }
}

fn fallback_plain(
    meter: &StreamMeter,
    sock: &UdpSocket,
    plan: SendPlan,
    ctl: &Control,
    seq0: u64,
    bytes0: u64,
    pace: Pace,
) -> io::Result<()> {
    let _ = crate::sock::set_int(sock.as_raw_fd(), SOL_UDP, UDP_SEGMENT, 0);
    let mut buf = vec![0x5au8; plan.len];
    let (mut seq, mut bytes) = (seq0, bytes0);
    loop {
        match pace.next(ctl, bytes) {
            Next::Stop => return Ok(()),
            Next::Wait => continue,
            Next::Send => {}
        }
        Header {
            seq,
            tx_ns: realtime_ns(),
            stream: plan.stream,
            cookie: plan.cookie as u32,
        }
        .write(&mut buf[..HEADER_LEN]);
        match sock.send(&buf) {
            Ok(_) => {
                seq += 1;
                bytes += plan.len as u64;
                meter.bytes.store(bytes, Ordering::Relaxed);
                meter.messages.store(seq, Ordering::Relaxed);
            }
            Err(e)
                if would_block(&e)
                    || e.raw_os_error() == Some(libc::ENOBUFS)
                    || e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
            Err(e) => return Err(e),
        }
    }
}

/// How long a receiver keeps reading after the stop with nothing arriving.
pub const DRAIN_IDLE: Duration = Duration::from_millis(150);

/// Receives datagrams until `ctl.stop` and then [`DRAIN_IDLE`] without any (or `ctl.abort`).
pub fn receive(
    meter: &StreamMeter,
    sock: &UdpSocket,
    len: usize,
    offload: bool,
    cookie: u64,
    ctl: &Control,
) {
    let r = receive_loop(meter, sock, len, offload, cookie, ctl);
    if let Some(d) = socket_drops(sock) {
        meter.udp.kernel_drops.store(d, Ordering::Relaxed);
    }
    meter.finish(r.err().map(|e| e.to_string()));
}

fn cmsg_space(payload: usize) -> usize {
    // SAFETY: CMSG_SPACE is a pure size computation.
    unsafe { libc::CMSG_SPACE(payload as libc::c_uint) as usize }
}

fn receive_loop(
    meter: &StreamMeter,
    sock: &UdpSocket,
    len: usize,
    offload: bool,
    cookie: u64,
    ctl: &Control,
) -> io::Result<()> {
    let fd = sock.as_raw_fd();
    let gro = offload && crate::sock::set_int(fd, SOL_UDP, UDP_GRO, 1).is_ok();
    let (msgs, slot) = if gro {
        (16, 65_536)
    } else {
        (64, len.max(HEADER_LEN))
    };
    let _ = sock.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = vec![0u8; msgs * slot];
    let ctrl_len =
        cmsg_space(std::mem::size_of::<libc::timespec>()) + cmsg_space(4) + cmsg_space(4) + 64;
    let mut ctrl = vec![0u8; msgs * ctrl_len];
    let mut iov: Vec<libc::iovec> = (0..msgs)
        .map(|i| libc::iovec {
            iov_base: buf[i * slot..].as_mut_ptr().cast(),
            iov_len: slot,
        })
        .collect();
    // SAFETY: zeroed mmsghdr is a valid empty header.
    let mut hdrs: Vec<libc::mmsghdr> = (0..msgs).map(|_| unsafe { std::mem::zeroed() }).collect();
    let cookie = cookie as u32;
    let mut t = SequenceTracker::new();
    let mut bytes = 0u64;
    let mut drops = 0u64;
    let mut idle_since: Option<Instant> = None;
    loop {
        for (i, h) in hdrs.iter_mut().enumerate() {
            h.msg_hdr.msg_iov = &mut iov[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = ctrl[i * ctrl_len..].as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = ctrl_len as _;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: every header points at live buffers of the stated sizes.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                msgs as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if rc <= 0 {
            let e = io::Error::last_os_error();
            if rc == 0 || would_block(&e) || e.raw_os_error() == Some(libc::ECONNREFUSED) {
                if ctl.abort.load(Ordering::Relaxed) || nsperf_core::signal::interrupted() {
                    return Ok(());
                }
                if ctl.stop.load(Ordering::Relaxed) {
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= DRAIN_IDLE {
                        return Ok(());
                    }
                }
                continue;
            }
            return Err(e);
        }
        idle_since = None;
        let fallback_rx = realtime_ns();
        for (i, h) in hdrs.iter().enumerate().take(rc as usize) {
            let n = h.msg_len as usize;
            let mut seg_size = n;
            let mut rx_ns = fallback_rx;
            // SAFETY: walking the control messages the kernel wrote into msg_control.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
                while !c.is_null() {
                    let data = libc::CMSG_DATA(c);
                    match ((*c).cmsg_level, (*c).cmsg_type) {
                        (SOL_UDP, UDP_GRO) => {
                            let v = std::ptr::read_unaligned(data as *const libc::c_int);
                            if v > 0 {
                                seg_size = v as usize;
                            }
                        }
                        (libc::SOL_SOCKET, SO_RXQ_OVFL) => {
                            drops = drops.max(std::ptr::read_unaligned(data as *const u32) as u64);
                        }
                        (libc::SOL_SOCKET, SO_TIMESTAMPNS) => {
                            let ts = std::ptr::read_unaligned(data as *const libc::timespec);
                            rx_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                        }
                        _ => {}
                    }
                    c = libc::CMSG_NXTHDR(&h.msg_hdr, c);
                }
            }
            let data = &buf[i * slot..i * slot + n.min(slot)];
            let mut off = 0;
            while off < data.len() {
                let end = (off + seg_size).min(data.len());
                if let Some(hd) = Header::read(&data[off..end])
                    && hd.cookie == cookie
                    && hd.seq != HELLO_SEQ
                {
                    t.record(hd.seq, hd.tx_ns, rx_ns);
                    bytes += (end - off) as u64;
                }
                off = end;
            }
        }
        meter.bytes.store(bytes, Ordering::Relaxed);
        meter.touch();
        let u = &meter.udp;
        u.datagrams.store(t.received, Ordering::Relaxed);
        u.expected.store(t.expected, Ordering::Relaxed);
        u.out_of_order.store(t.out_of_order, Ordering::Relaxed);
        u.duplicates.store(t.duplicates, Ordering::Relaxed);
        u.jitter_bits
            .store(t.jitter_ns.to_bits(), Ordering::Relaxed);
        u.kernel_drops.store(drops, Ordering::Relaxed);
    }
}

/// Encodes a hello datagram for `stream` of the test `cookie`.
pub fn hello(stream: u32, cookie: u64) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    Header {
        seq: HELLO_SEQ,
        tx_ns: 0,
        stream,
        cookie: cookie as u32,
    }
    .write(&mut b);
    b
}

/// UDP totals over all streams of a run.
pub fn summarize(run: &ClientRun, warmup_s: f64) -> UdpSummary {
    let mut s = UdpSummary::default();
    let mut jitters = Vec::new();
    let (mut rx_after, mut t_after) = (0u64, 0f64);
    for (tx_side, rx_side) in [(&run.client, &run.server), (&run.server, &run.client)] {
        for rx in rx_side.streams.iter().filter(|r| !r.sending) {
            let Some(last) = rx.samples.iter().rev().find_map(|x| x.udp) else {
                continue;
            };
            let sent = tx_side
                .streams
                .iter()
                .find(|t| t.id == rx.id && t.sending)
                .and_then(|t| t.samples.last())
                .map(|x| x.messages)
                .unwrap_or(last.expected);
            s.sent_datagrams += sent;
            s.received_datagrams += last.datagrams;
            s.out_of_order += last.out_of_order;
            s.duplicates += last.duplicates;
            s.kernel_drops += last.kernel_drops;
            jitters.push(last.jitter_ns);
            let mut prev = 0u64;
            for (mark, sample) in rx_side.intervals.iter().zip(&rx.samples) {
                let d = sample.udp.map(|u| u.datagrams).unwrap_or(0);
                if mark.start_s + 1e-9 >= warmup_s {
                    rx_after += d.saturating_sub(prev);
                }
                prev = d;
            }
        }
        if t_after == 0.0 && rx_side.streams.iter().any(|r| !r.sending) {
            t_after = rx_side
                .intervals
                .iter()
                .filter(|m| m.start_s + 1e-9 >= warmup_s)
                .map(|m| m.length_s)
                .sum();
        }
    }
    s.lost_datagrams = s.sent_datagrams.saturating_sub(s.received_datagrams);
    s.loss_pct = if s.sent_datagrams > 0 {
        100.0 * s.lost_datagrams as f64 / s.sent_datagrams as f64
    } else {
        0.0
    };
    s.jitter_ns = nsperf_core::stats::mean(&jitters).unwrap_or(0.0);
    s.received_datagrams_per_s = if t_after > 0.0 {
        rx_after as f64 / t_after
    } else {
        0.0
    };
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_short_is_none() {
        let h = Header {
            seq: 5,
            tx_ns: 77,
            stream: 3,
            cookie: 9,
        };
        let mut b = [0u8; 30];
        h.write(&mut b);
        assert_eq!(Header::read(&b), Some(h));
        assert_eq!(Header::read(&b[..23]), None);
    }

    #[test]
    fn tracker_counts_loss_reorder_duplicates() {
        let mut t = SequenceTracker::new();
        for s in [0, 1, 2, 5, 3, 3, 7] {
            t.record(s, 0, 0);
        }
        // 0,1,2,3,5,7 distinct; 4 and 6 missing; 3 late and once duplicated.
        assert_eq!(t.received, 6);
        assert_eq!(t.expected, 8);
        assert_eq!(t.lost(), 2);
        assert_eq!(t.out_of_order, 1);
        assert_eq!(t.duplicates, 1);
        // A jump beyond the window and an ancient straggler do not panic.
        t.record(1 << 40, 0, 0);
        t.record(10, 0, 0);
        assert_eq!(t.out_of_order, 2);
    }

    #[test]
    fn jitter_follows_rfc3550() {
        let mut t = SequenceTracker::new();
        // Constant transit: no jitter. Then one 1.6 ms excursion: J = 1.6 ms / 16.
        for i in 0..10u64 {
            t.record(i, i * 1_000_000, i * 1_000_000 + 500);
        }
        assert_eq!(t.jitter_ns, 0.0);
        t.record(10, 10_000_000, 10_000_000 + 500 + 1_600_000);
        assert!((t.jitter_ns - 100_000.0).abs() < 1e-6, "{}", t.jitter_ns);
    }
}
