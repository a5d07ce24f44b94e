//! TCP connections to a server: a timed connect that first binds a reserved source port when
//! running as root (servers that export with `secure`, the Linux default, refuse others),
//! with `TCP_NODELAY`. Socket buffers are left to the kernel's autotuning (setting them would
//! cap them at `net.core.rmem_max`, below what a long fat link needs), unless a window is
//! asked ([`connect_window`]: a replay at a given TCP window).

use std::io;

use nsperf_core::sockopt::{get_int, set_int};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::FromRawFd;
use std::time::Duration;

/// Connects to `addr` within `timeout`; as root, from a port below 1024 when one is free.
pub fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    connect_window(addr, timeout, None)
}

/// [`connect`], with the send and receive buffers set to `window` bytes before the
/// connection opens (so the window scale it negotiates fits), as `nsperf net --window` sets
/// them: past `wmem_max`/`rmem_max` as root (`SO_SNDBUFFORCE`), clamped to them otherwise.
pub fn connect_window(
    addr: SocketAddr,
    timeout: Duration,
    window: Option<u64>,
) -> io::Result<TcpStream> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        // A few candidates spread over the reserved range; any failure falls back below.
        let seed = std::process::id() as u16 ^ (nsperf_core::clock::unix_time_ns() as u16);
        // Only a port that is taken makes another candidate worth trying: a connect that
        // timed out, was refused or found no route fails the same from any port (trying
        // all eight turned one 30 s timeout into 270 s, issue 20).
        for i in 0..8u16 {
            let port = 600 + (seed.wrapping_add(i.wrapping_mul(53)) % 423);
            match connect_from(addr, Some(port), timeout, window) {
                Ok(s) => return Ok(s),
                Err(e) if port_taken(&e) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EACCES) => break,
                Err(e) => return Err(e),
            }
        }
    }
    connect_from(addr, None, timeout, window)
}

/// The local port (or the address pair) is in use: another candidate port may work.
fn port_taken(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EADDRINUSE) | Some(libc::EADDRNOTAVAIL)
    )
}

fn connect_from(
    addr: SocketAddr,
    port: Option<u16>,
    timeout: Duration,
    window: Option<u64>,
) -> io::Result<TcpStream> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: a new socket; ownership passes to the TcpStream at once.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket we own.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    if let Some(w) = window {
        set_buffers(fd, w);
    }
    if let Some(p) = port {
        let local: SocketAddr = if addr.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, p).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, p).into()
        };
        let (sa, len) = sockaddr(&local);
        // SAFETY: sa is a valid sockaddr of len bytes.
        if unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    stream.set_nonblocking(true)?;
    let (sa, len) = sockaddr(&addr);
    // SAFETY: sa is a valid sockaddr of len bytes.
    let r = unsafe { libc::connect(fd, (&sa as *const libc::sockaddr_storage).cast(), len) };
    if r != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
    }
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// `SO_SNDBUFFORCE` and `SO_RCVBUFFORCE` (past the sysctl caps, with `CAP_NET_ADMIN`).
const SO_SNDBUFFORCE: libc::c_int = 32;
const SO_RCVBUFFORCE: libc::c_int = 33;

/// Wakes a reader of `fd` (and makes `poll` report it readable) only once `bytes` are
/// queued: `SO_RCVLOWAT`, 1 by default.
pub(crate) fn set_rcvlowat(fd: libc::c_int, bytes: usize) -> io::Result<()> {
    set_int(
        fd,
        libc::SOL_SOCKET,
        libc::SO_RCVLOWAT,
        bytes.clamp(1, i32::MAX as usize) as libc::c_int,
    )
}

/// The receive buffer the kernel granted `fd` now (it grows with autotuning); 0 when it
/// cannot be read.
pub(crate) fn rcvbuf(fd: libc::c_int) -> usize {
    get_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF).map_or(0, |v| v.max(0) as usize)
}

/// Bounds the bytes in flight each way to about `bytes`: the receive window clamped to it
/// exactly (`TCP_WINDOW_CLAMP`, with a receive buffer that holds it), and a send buffer of
/// `bytes` as the kernel counts it (it doubles what it is asked for its bookkeeping, so half
/// is asked): the unacknowledged data sent stays below it. The `FORCE` options first (past
/// the sysctl caps, as root), the plain ones (clamped to the caps) when refused.
fn set_buffers(fd: libc::c_int, bytes: u64) {
    let w = bytes.min(i32::MAX as u64 / 2) as libc::c_int;
    for (force, plain, v) in [
        (SO_SNDBUFFORCE, libc::SO_SNDBUF, (w / 2).max(1)),
        (SO_RCVBUFFORCE, libc::SO_RCVBUF, w),
    ] {
        if set_int(fd, libc::SOL_SOCKET, force, v).is_err() {
            let _ = set_int(fd, libc::SOL_SOCKET, plain, v);
        }
    }
    let _ = set_int(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, w);
}

fn sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: zeroed sockaddr_storage is valid; we fill the family's fields below.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            (
                ss,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            (
                ss,
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        }
    }
}
