//! UDP data path: sequence-numbered datagrams sent in batches (`sendmmsg(2)`, with UDP GSO
//! where the kernel has it) and received in batches (`recvmmsg(2)`, with UDP GRO), paced to
//! the target rate; loss, reordering, duplicates and RFC 3550 jitter on the receiver.
//!
//! The datagram format is in `datagram`. Buffers are allocated once per stream; the loops
//! only rewrite headers in place.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::datagram::{Format, SequenceTracker};
use crate::meter::StreamMeter;
use crate::tcp::Control;

const SOL_UDP: libc::c_int = 17;
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
const SO_TIMESTAMPNS: libc::c_int = 35;
const SO_RXQ_OVFL: libc::c_int = 40;

/// Most segments in one GSO send.
const GSO_MAX_SEGMENTS: usize = 64;
/// Largest GSO send.
const GSO_MAX_BYTES: usize = 65_000;

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
    /// The datagram header (nsperf's, with the stream and cookie, or iperf3's).
    pub format: Format,
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
            plan.format
                .write(seq + i as u64, tx_ns, &mut buf[off..off + len]);
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
        plan.format.write(seq, realtime_ns(), &mut buf);
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
    format: Format,
    ctl: &Control,
) {
    let r = receive_loop(meter, sock, len, offload, format, ctl);
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
    format: Format,
    ctl: &Control,
) -> io::Result<()> {
    let fd = sock.as_raw_fd();
    let gro = offload && crate::sock::set_int(fd, SOL_UDP, UDP_GRO, 1).is_ok();
    let (msgs, slot) = if gro {
        (16, 65_536)
    } else {
        (64, len.max(format.header_len()))
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
                libc::MSG_WAITFORONE as _,
                std::ptr::null_mut(),
            )
        };
        if rc <= 0 {
            let e = io::Error::last_os_error();
            if rc == 0 || would_block(&e) || e.raw_os_error() == Some(libc::ECONNREFUSED) {
                if ctl.abort.load(Ordering::Relaxed) {
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
                if let Some((seq, tx_ns)) = format.read(&data[off..end]) {
                    t.record(seq, tx_ns, rx_ns);
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
