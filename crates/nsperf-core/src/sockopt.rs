//! Sockets through `libc` as every data path needs them: an address for the kernel, a socket
//! of the address's family, a connect with a time limit (options set before the SYN), an
//! integer option, and the TCP congestion control by name.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

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

/// A TCP connection to `addr` within `timeout`, `setup` called on the socket before the SYN
/// (options such as the congestion control take full effect only then: BBR's pacing, once
/// set up at connect, stays when the algorithm is changed afterwards).
pub fn connect_tcp(
    addr: &SocketAddr,
    timeout: Duration,
    setup: impl FnOnce(RawFd) -> io::Result<()>,
) -> io::Result<std::net::TcpStream> {
    use std::os::fd::AsRawFd;
    let fd = socket_for(addr, libc::SOCK_STREAM)?;
    setup(fd.as_raw_fd())?;
    connect_fd(fd.as_raw_fd(), addr, timeout)?;
    Ok(std::net::TcpStream::from(fd))
}

/// The congestion control of a TCP socket (`cubic`, `bbr`), `None` when it cannot be read.
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

/// Sets the congestion control of a TCP socket by name (the kernel's error when it has no
/// such algorithm or refuses it).
pub fn set_congestion(fd: RawFd, name: &str) -> io::Result<()> {
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
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn reno_is_always_there() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_congestion(s.as_raw_fd(), "reno").unwrap();
        assert_eq!(congestion(s.as_raw_fd()).as_deref(), Some("reno"));
        assert!(set_congestion(s.as_raw_fd(), "no-such-cc").is_err());
    }
}
