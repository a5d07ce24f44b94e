//! Socket options and connection set-up through `libc`: buffers (and what the kernel
//! granted), congestion control, MSS, `TCP_NODELAY`, and a connect with a time limit that
//! applies the options before the SYN (so the window scale and MSS are negotiated with them).

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

pub use nsperf_core::sockopt::{connect_fd, get_int, set_int, sockaddr, socket_for};

use crate::config::TestParams;
use crate::error::NetError;

/// `SO_SNDBUFFORCE`: set beyond `wmem_max` (needs `CAP_NET_ADMIN`).
const SO_SNDBUFFORCE: libc::c_int = 32;
/// `SO_RCVBUFFORCE`: set beyond `rmem_max` (needs `CAP_NET_ADMIN`).
const SO_RCVBUFFORCE: libc::c_int = 33;

/// `SO_MAX_PACING_RATE`: the kernel paces the socket's sends to this many bytes per second
/// (TCP paces by itself since Linux 4.13, no `fq` qdisc needed).
const SO_MAX_PACING_RATE: libc::c_int = 47;

/// Paces a socket's sends to `bps` bits per second (headers included, as the kernel counts).
pub fn set_pacing(fd: RawFd, bps: f64) -> io::Result<()> {
    let bytes = (bps / 8.0).round().max(1.0);
    if bytes < u32::MAX as f64 {
        return set_int(
            fd,
            libc::SOL_SOCKET,
            SO_MAX_PACING_RATE,
            bytes as u32 as libc::c_int,
        );
    }
    // Above 4 GB/s the kernel (4.20+) takes a 64-bit value.
    let v = bytes as u64;
    // SAFETY: passes a pointer to a live u64 of the stated size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MAX_PACING_RATE,
            (&v as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Raises this process's soft limit of open descriptors to its hard limit (a test of many
/// streams needs one per stream and end) and returns the soft limit now.
pub fn raise_fd_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit read or write one rlimit struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 1024;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                r.rlim_cur = r.rlim_max;
            }
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is 32 bits on 32-bit glibc targets
    let soft = r.rlim_cur as u64;
    soft
}

/// Fails with a clear line when `need` descriptors exceed what this process may open.
pub fn ensure_fds(need: u64, what: &str) -> Result<(), NetError> {
    let limit = raise_fd_limit();
    if need > limit {
        return Err(NetError::Socket(format!(
            "{what} needs about {need} file descriptors but this process may open {limit} \
             (raise the hard limit: ulimit -Hn)"
        )));
    }
    Ok(())
}

/// Sets the IP type-of-service byte (`IP_TOS`, or `IPV6_TCLASS` on an IPv6 socket, which
/// also covers IPv4-mapped peers).
pub fn set_tos(fd: RawFd, ipv6: bool, tos: u8) -> Result<(), NetError> {
    let r = if ipv6 {
        let _ = set_int(fd, libc::IPPROTO_IP, libc::IP_TOS, tos as libc::c_int);
        set_int(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_TCLASS,
            tos as libc::c_int,
        )
    } else {
        set_int(fd, libc::IPPROTO_IP, libc::IP_TOS, tos as libc::c_int)
    };
    r.map_err(|e| NetError::Socket(format!("cannot set the IP TOS byte to {tos:#04x}: {e}")))
}

/// Sets a buffer size, with the `FORCE` variant first so root gets past `rmem_max`/`wmem_max`
/// (the plain option silently clamps).
pub fn set_buffer(fd: RawFd, send: bool, bytes: u64) {
    let v = bytes.min(i32::MAX as u64 / 2) as libc::c_int;
    let (force, plain) = if send {
        (SO_SNDBUFFORCE, libc::SO_SNDBUF)
    } else {
        (SO_RCVBUFFORCE, libc::SO_RCVBUF)
    };
    if set_int(fd, libc::SOL_SOCKET, force, v).is_err() {
        let _ = set_int(fd, libc::SOL_SOCKET, plain, v);
    }
}

/// The (send, receive) buffer sizes the kernel reports for a socket.
pub fn buffers(fd: RawFd) -> (u64, u64) {
    let g = |o| {
        get_int(fd, libc::SOL_SOCKET, o)
            .map(|v| v.max(0) as u64)
            .unwrap_or(0)
    };
    (g(libc::SO_SNDBUF), g(libc::SO_RCVBUF))
}

/// The congestion control of a TCP socket.
pub fn congestion(fd: RawFd) -> Option<String> {
    nsperf_core::sockopt::congestion(fd)
}

/// Sets the congestion control; an unknown name lists the available ones.
pub fn set_congestion(fd: RawFd, name: &str) -> Result<(), NetError> {
    nsperf_core::sockopt::set_congestion(fd, name).map_err(|err| {
        let facts = nsperf_core::host::TcpSysctls::read();
        NetError::UnknownCongestion {
            name: name.to_string(),
            available: facts.available_congestion_control.join(", "),
            reason: err.to_string(),
        }
    })
}

/// Applies the TCP options of `p` that must be set on a data socket (buffers, congestion
/// control, MSS, no-delay). Buffers and MSS only take full effect before connect/listen.
pub fn apply_tcp(fd: RawFd, p: &TestParams) -> Result<(), NetError> {
    if let Some(w) = p.window {
        set_buffer(fd, true, w);
        set_buffer(fd, false, w);
    }
    if let Some(cc) = &p.congestion {
        set_congestion(fd, cc)?;
    }
    if let Some(m) = p.mss {
        set_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, m as libc::c_int)
            .map_err(|e| NetError::Socket(format!("cannot set MSS {m}: {e}")))?;
    }
    if p.no_delay || !matches!(p.mode, crate::config::Mode::Stream) {
        let _ = set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    }
    Ok(())
}

/// Connects a TCP socket to `addr` within `timeout`, calling `setup` on the socket first.
pub fn connect_tcp(
    addr: &SocketAddr,
    timeout: Duration,
    setup: impl FnOnce(RawFd) -> Result<(), NetError>,
) -> Result<TcpStream, NetError> {
    let fd = socket_for(addr, libc::SOCK_STREAM).map_err(|e| NetError::Socket(e.to_string()))?;
    setup(fd.as_raw_fd())?;
    let raw = fd.as_raw_fd();
    connect_fd(raw, addr, timeout).map_err(|e| NetError::connect(addr, e))?;
    Ok(TcpStream::from(fd))
}

/// Resolves `host:port` to socket addresses (IPv4 first).
pub fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, NetError> {
    use std::net::ToSocketAddrs;
    let mut v: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| NetError::Resolve {
            host: host.to_string(),
            reason: e.to_string(),
        })?
        .collect();
    v.sort_by_key(|a| !a.is_ipv4());
    if v.is_empty() {
        return Err(NetError::Resolve {
            host: host.to_string(),
            reason: "no address".into(),
        });
    }
    Ok(v)
}

/// bind(2) on a raw socket.
pub fn bind_fd(fd: RawFd, addr: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: `ss` holds a valid address of `len` bytes.
    let rc = unsafe { libc::bind(fd, (&ss as *const libc::sockaddr_storage).cast(), len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
