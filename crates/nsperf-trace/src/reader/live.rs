//! Live sources of packets: an `AF_PACKET` socket on one interface (`nsperf trace -i`, no
//! libpcap: the binary stays static), a byte stream that can be told to stop (a pipe from
//! `tcpdump -w -`, or a capture file another process is still writing), and a pcap writer
//! for the packets a live analysis saw (`trace -i … -w FILE`).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::TraceError;
use crate::reader::RawPacket;
use crate::wire::link::LinkType;

/// Bytes read of one packet: the largest segmentation-offload packet Linux hands a packet
/// socket is 64 KiB (BIG TCP's larger ones are cut here and counted at their full length).
const SNAPLEN: usize = 256 * 1024;
/// How long one wait for a packet lasts, so the caller can check its stop flag.
const WAIT: Duration = Duration::from_millis(100);
/// Receive buffer asked for the socket (as root, beyond `rmem_max`).
const RCVBUF: libc::c_int = 8 << 20;

/// An `AF_PACKET` socket bound to one interface, receiving every frame it sends and receives
/// (as `tcpdump -i IFACE` does, without a filter and without promiscuous mode).
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    iface: String,
    link: LinkType,
    link_number: u32,
    /// Loopback: each frame is seen leaving and arriving; only the arrival is kept, as
    /// libpcap does.
    skip_outgoing: bool,
    buf: Vec<u8>,
    dropped: u64,
}

fn io_err(iface: &str, source: std::io::Error) -> TraceError {
    TraceError::Capture {
        iface: iface.to_string(),
        source,
    }
}

fn last_err(iface: &str, what: &str) -> TraceError {
    let e = std::io::Error::last_os_error();
    io_err(iface, std::io::Error::new(e.kind(), format!("{what}: {e}")))
}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, v: &T) -> libc::c_int {
    // SAFETY: `v` points to a live value of the size passed.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    }
}

impl PacketSocket {
    /// Opens a packet socket on interface `iface`. Errors: no such interface (`NotFound`),
    /// not root (`PermissionDenied`), a link type nsperf cannot read (`Unsupported`).
    pub fn open(iface: &str) -> Result<PacketSocket, TraceError> {
        let not_found = || {
            io_err(
                iface,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such network interface"),
            )
        };
        let name = std::ffi::CString::new(iface).map_err(|_| not_found())?;
        // SAFETY: a valid NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 || iface.contains('/') || iface.starts_with('.') {
            return Err(not_found());
        }
        let hw: u32 = std::fs::read_to_string(format!("/sys/class/net/{iface}/type"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let (link_number, skip_outgoing) = match hw {
            1 => (1, false),             // ARPHRD_ETHER
            772 => (1, true),            // ARPHRD_LOOPBACK: Ethernet framing, zero MACs
            65534 | 776 => (101, false), // ARPHRD_NONE (tun), sit: raw IP
            other => {
                return Err(io_err(
                    iface,
                    std::io::Error::new(
                        std::io::ErrorKind::Unsupported,
                        format!(
                            "link type {other} (ARPHRD) is not one nsperf can read; capture with tcpdump -w - and pipe it"
                        ),
                    ),
                ));
            }
        };
        // Protocol 0 receives nothing until bound, so no frame of another interface queues.
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(last_err(iface, "packet socket"));
        }
        // SAFETY: a descriptor just returned by socket(2), owned from here.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let on: libc::c_int = 1;
        if setsockopt(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &on) < 0 {
            return Err(last_err(iface, "SO_TIMESTAMPNS"));
        }
        if setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &RCVBUF) < 0 {
            setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &RCVBUF);
        }
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: WAIT.as_micros() as libc::suseconds_t,
        };
        if setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv) < 0 {
            return Err(last_err(iface, "SO_RCVTIMEO"));
        }
        // SAFETY: zeroed sockaddr_ll is valid; the fields set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = index as i32;
        // SAFETY: a valid sockaddr_ll and its size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(last_err(iface, "bind"));
        }
        Ok(PacketSocket {
            fd,
            iface: iface.to_string(),
            link: LinkType::from_number(link_number),
            link_number,
            skip_outgoing,
            buf: vec![0; SNAPLEN],
            dropped: 0,
        })
    }

    /// The pcap link type of the frames (1 Ethernet, 101 raw IP).
    pub fn link_number(&self) -> u32 {
        self.link_number
    }

    /// The largest number of bytes kept of one packet.
    pub fn snaplen(&self) -> u32 {
        SNAPLEN as u32
    }

    /// The next packet, waiting at most 100 ms for it (`None`: none came, or a signal
    /// interrupted the wait). No allocation.
    pub fn recv(&mut self) -> Result<Option<RawPacket<'_>>, TraceError> {
        loop {
            // SAFETY: zeroed sockaddr_ll, msghdr and cmsg buffer are valid; each pointer set
            // below points to a live buffer of the length given.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut control = [0u64; 16];
            let mut iov = libc::iovec {
                iov_base: self.buf.as_mut_ptr().cast(),
                iov_len: self.buf.len(),
            };
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            // SAFETY: msg describes the buffers above.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                return match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => Ok(None),
                    _ => Err(io_err(&self.iface, e)),
                };
            }
            if self.skip_outgoing && from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let ts_ns = timestamp(&msg).unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as i64)
            });
            let orig_len = n as usize;
            return Ok(Some(RawPacket {
                ts_ns,
                link: self.link,
                data: &self.buf[..orig_len.min(self.buf.len())],
                orig_len: orig_len.min(u32::MAX as usize) as u32,
            }));
        }
    }

    /// Packets the kernel dropped so far (its buffer full: nsperf too slow).
    pub fn kernel_dropped(&mut self) -> u64 {
        // SAFETY: tpacket_stats is plain data; getsockopt writes at most its size.
        let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if r == 0 {
            // the kernel's counters restart at each read
            self.dropped += u64::from(st.tp_drops);
        }
        self.dropped
    }
}

/// The `SCM_TIMESTAMPNS` of a received message.
fn timestamp(msg: &libc::msghdr) -> Option<i64> {
    // SAFETY: the CMSG macros walk the control buffer recvmsg filled, within its length.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                return Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec);
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

/// A byte stream read by a live analysis: it waits for data at most 100 ms at a time, so a
/// stop asked through `stop` is seen. A pipe (`follow` false) ends at the stop at once; a
/// file another process is still writing (`follow` true: read on at its end) is read to its
/// end once the stop is asked (the writer has finished by then).
#[derive(Debug)]
pub struct LiveInput {
    file: File,
    follow: bool,
    stop: Arc<AtomicBool>,
}

impl LiveInput {
    /// A stream over `file`.
    pub fn new(file: File, follow: bool, stop: Arc<AtomicBool>) -> LiveInput {
        LiveInput { file, follow, stop }
    }

    /// Standard input.
    pub fn stdin(stop: Arc<AtomicBool>) -> std::io::Result<LiveInput> {
        use std::os::fd::AsFd;
        let fd = std::io::stdin().as_fd().try_clone_to_owned()?;
        Ok(LiveInput::new(File::from(fd), false, stop))
    }

    /// True when data can be read within the wait (or the descriptor is not pollable).
    fn wait_readable(&self) -> std::io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, WAIT.as_millis() as libc::c_int) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        Ok(n > 0)
    }
}

impl Read for LiveInput {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let stopping = self.stop.load(Ordering::Relaxed);
            if !self.follow {
                if stopping {
                    return Ok(0);
                }
                if !self.wait_readable()? {
                    continue;
                }
            }
            match self.file.read(buf) {
                Ok(0) if self.follow && !stopping => std::thread::sleep(WAIT / 5),
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Writes packets into a pcap file (nanosecond timestamps), as a live analysis sees them.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    w: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header: link type `link` (1 Ethernet, 101 raw IP), snapshot length.
    pub fn new(mut w: W, link: u32, snaplen: u32) -> std::io::Result<PcapWriter<W>> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        h[16..20].copy_from_slice(&snaplen.to_le_bytes());
        h[20..24].copy_from_slice(&link.to_le_bytes());
        w.write_all(&h)?;
        Ok(PcapWriter { w })
    }

    /// Writes one packet.
    pub fn packet(&mut self, p: &RawPacket<'_>) -> std::io::Result<()> {
        let mut h = [0u8; 16];
        let ts = p.ts_ns.max(0);
        h[0..4].copy_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(p.data.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&p.orig_len.to_le_bytes());
        self.w.write_all(&h)?;
        self.w.write_all(p.data)
    }

    /// Flushes what is buffered.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcap_written_reads_back_the_same_packets() {
        let mut w = PcapWriter::new(Vec::new(), 1, 65535).unwrap();
        let frames: Vec<(i64, Vec<u8>)> = vec![
            (1_700_000_000_123_456_789, vec![1; 60]),
            (1_700_000_001_000_000_001, vec![2; 1514]),
        ];
        for (t, f) in &frames {
            w.packet(&RawPacket {
                ts_ns: *t,
                link: LinkType::Ethernet,
                data: f,
                orig_len: f.len() as u32 + 4,
            })
            .unwrap();
        }
        let bytes = w.w;
        let mut r = crate::CaptureReader::from_reader(std::io::Cursor::new(bytes)).unwrap();
        let mut got = Vec::new();
        r.for_each_packet(|p| got.push((p.ts_ns, p.data.to_vec(), p.orig_len)))
            .unwrap();
        assert_eq!(got.len(), 2);
        for ((t, f), (gt, gf, gl)) in frames.iter().zip(&got) {
            assert_eq!((t, f, f.len() as u32 + 4), (gt, gf, *gl));
        }
    }

    #[test]
    fn no_such_interface_is_not_found() {
        let e = PacketSocket::open("nsperf-none0").unwrap_err();
        assert!(
            matches!(e, TraceError::Capture { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound)
        );
        assert_eq!(
            e.to_string(),
            "cannot capture on nsperf-none0: no such network interface"
        );
    }
}
