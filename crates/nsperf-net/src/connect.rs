//! The client's sockets to a server, whichever protocol it speaks: the control connection,
//! TCP data connections and UDP sockets, bound as `-4`/`-6`, `-B` and `--cport` ask, with the
//! test's socket options; and the checks made before any of them is opened.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;

use crate::config::{ClientConfig, IpVersion};
use crate::error::NetError;

/// The server's addresses, of the asked IP version only (`-4`/`-6`), IPv4 first.
fn resolve(cfg: &ClientConfig) -> Result<Vec<SocketAddr>, NetError> {
    let mut addrs = crate::sock::resolve(&cfg.host, cfg.port)?;
    if let Some(v) = cfg.local.version {
        addrs.retain(|a| v.matches(a));
        if addrs.is_empty() {
            return Err(NetError::Resolve {
                host: cfg.host.clone(),
                reason: format!(
                    "no {} address",
                    if v == IpVersion::V4 { "IPv4" } else { "IPv6" }
                ),
            });
        }
    }
    if let Some(b) = cfg.local.bind {
        addrs.retain(|a| a.is_ipv4() == b.is_ipv4());
        if addrs.is_empty() {
            return Err(NetError::Usage(format!(
                "-B {b} is of another IP version than every address of {}",
                cfg.host
            )));
        }
    }
    Ok(addrs)
}

/// Binds `fd` to the local end of `-B` (any port when `port` is 0).
fn bind_local(
    fd: std::os::fd::RawFd,
    cfg: &ClientConfig,
    peer: &SocketAddr,
    port: u16,
) -> Result<(), NetError> {
    if cfg.local.bind.is_none() && port == 0 {
        return Ok(());
    }
    let ip = cfg.local.bind.unwrap_or(if peer.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    });
    if port != 0 {
        let _ = crate::sock::set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
    }
    let local = SocketAddr::new(ip, port);
    crate::sock::bind_fd(fd, &local)
        .map_err(|e| NetError::Socket(format!("cannot bind to {local}: {e}")))
}

/// The local port of data stream `id` (`--cport`: `cport + id`, as iperf3), 0 = any.
fn data_port(cfg: &ClientConfig, id: u32) -> Result<u16, NetError> {
    match cfg.local.cport {
        None => Ok(0),
        Some(c) => u16::try_from(c as u32 + id)
            .map_err(|_| NetError::Usage(format!("--cport {c} + {id} streams passes port 65535"))),
    }
}

/// Connects a control connection (TCP) and returns it with the address that answered.
pub(crate) fn connect_socket(cfg: &ClientConfig) -> Result<(TcpStream, SocketAddr), NetError> {
    let mut last = None;
    for a in resolve(cfg)? {
        match crate::sock::connect_tcp(&a, cfg.connect_timeout, |fd| bind_local(fd, cfg, &a, 0)) {
            Ok(s) => return Ok((s, a)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(NetError::Connect {
        addr: cfg.host.clone(),
        reason: "no address".into(),
        kind: None,
    }))
}

/// Connects data stream `id` to `addr` with the test's socket options.
pub(crate) fn connect_data(
    cfg: &ClientConfig,
    addr: &SocketAddr,
    id: u32,
) -> Result<TcpStream, NetError> {
    let p = &cfg.params;
    let port = data_port(cfg, id)?;
    crate::sock::connect_tcp(addr, cfg.connect_timeout, |fd| {
        crate::sock::apply_tcp(fd, p)?;
        if let Some(tos) = p.tos {
            crate::sock::set_tos(fd, addr.is_ipv6(), tos)?;
        }
        bind_local(fd, cfg, addr, port)
    })
}

/// A UDP socket for stream `id`, bound as `-B`/`--cport` ask, for talking to `addr`.
pub(crate) fn bind_udp(
    cfg: &ClientConfig,
    addr: &SocketAddr,
    id: u32,
) -> Result<UdpSocket, NetError> {
    let ip = cfg.local.bind.unwrap_or(if addr.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    });
    let local = SocketAddr::new(ip, data_port(cfg, id)?);
    let u = UdpSocket::bind(local)
        .map_err(|e| NetError::Socket(format!("cannot bind a UDP socket to {local}: {e}")))?;
    if let Some(tos) = cfg.params.tos {
        crate::sock::set_tos(u.as_raw_fd(), addr.is_ipv6(), tos)?;
    }
    Ok(u)
}

/// Fails before touching the server when this kernel lacks the congestion control asked.
pub(crate) fn preflight(cfg: &ClientConfig) -> Result<(), NetError> {
    let p = &cfg.params;
    if let Some(cpu) = cfg.local.cpu {
        crate::tcp::check_cpu(cpu, "client").map_err(NetError::Usage)?;
    }
    if let Some(cc) = &p.congestion {
        let probe =
            crate::sock::socket_for(&SocketAddr::from(([127, 0, 0, 1], 0)), libc::SOCK_STREAM)
                .map_err(|e| NetError::Socket(e.to_string()))?;
        crate::sock::set_congestion(probe.as_raw_fd(), cc)?;
    }
    crate::sock::ensure_fds(
        p.stream_count() as u64 + 64,
        &format!("a test of {} streams", p.stream_count()),
    )?;
    Ok(())
}
