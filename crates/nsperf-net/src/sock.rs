//! Socket options and connection set-up through `libc`: buffers (and what the kernel
//! granted), congestion control, MSS, `TCP_NODELAY`, and a connect with a time limit that
//! applies the options before the SYN (so the window scale and MSS are negotiated with them).

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::config::TestParams;
use crate::error::NetError;

/// `SO_SNDBUFFORCE`: set beyond `wmem_max` (needs `CAP_NET_ADMIN`).
const SO_SNDBUFFORCE: libc::c_int = 32;
/// `SO_RCVBUFFORCE`: set beyond `rmem_max` (needs `CAP_NET_ADMIN`).
const SO_RCVBUFFORCE: libc::c_int = 33;

/// Sets an integer socket option.
pub fn set_int(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    val: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int of the stated size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

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

/// Reads an integer socket option.
pub fn get_int(fd: RawFd, level: libc::c_int, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut val: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `val`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            opt,
            (&mut val as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(val)
    } else {
        Err(io::Error::last_os_error())
    }
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
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let s = &buf[..(len as usize).min(buf.len())];
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    Some(String::from_utf8_lossy(&s[..end]).into_owned())
}

/// Sets the congestion control; an unknown name lists the available ones.
pub fn set_congestion(fd: RawFd, name: &str) -> Result<(), NetError> {
    // SAFETY: passes a pointer to `name`'s bytes and their length.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    let facts = nsperf_core::host::TcpSysctls::read();
    Err(NetError::UnknownCongestion {
        name: name.to_string(),
        available: facts.available_congestion_control.join(", "),
        reason: err.to_string(),
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

/// A `sockaddr_storage` for `addr` and its length.
pub fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// A new socket of `ty` for the family of `addr`.
pub fn socket_for(addr: &SocketAddr, ty: libc::c_int) -> io::Result<OwnedFd> {
    let fam = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(fam, ty | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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

/// connect(2) on `fd` with a time limit (non-blocking connect and poll), then back to blocking.
pub fn connect_fd(fd: RawFd, addr: &SocketAddr, timeout: Duration) -> io::Result<()> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: fcntl on an fd we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) };
    // SAFETY: `ss` holds a valid address of `len` bytes.
    let rc = unsafe { libc::connect(fd, (&ss as *const libc::sockaddr_storage).cast(), len) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection timed out",
            ));
        }
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let err = get_int(fd, libc::SOL_SOCKET, libc::SO_ERROR)?;
        if err != 0 {
            return Err(io::Error::from_raw_os_error(err));
        }
    }
    // SAFETY: restore blocking mode.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) };
    Ok(())
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
