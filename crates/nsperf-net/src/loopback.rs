//! `nsperf net --loopback`: a server on 127.0.0.1 in this process and a client against it,
//! with the full report. The quickest check that the host itself (CPU, kernel, memory copy)
//! is not what limits a real test.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::config::{ClientConfig, IpVersion, LocalEnd, ServerConfig, TestParams};
use crate::drive::{ClientRun, LiveInterval};
use crate::error::NetError;
use crate::server::Server;

/// Runs `params` against an in-process server on a free loopback port: 127.0.0.1, or ::1
/// when `local` asks for IPv6 (`-6`, or `-B` an IPv6 address). `local` is the client's end
/// (`-B`, `--cport`, `-A`).
pub fn run(
    params: TestParams,
    local: LocalEnd,
    on_interval: impl FnMut(&LiveInterval),
) -> Result<ClientRun, NetError> {
    let v6 = local.version == Some(IpVersion::V6) || local.bind.is_some_and(|b| b.is_ipv6());
    let server_ip = if v6 {
        std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
    } else {
        std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
    };
    // Both ends in this process: a descriptor per stream and end.
    crate::sock::ensure_fds(
        2 * params.stream_count() as u64 + 64,
        &format!("a loopback test of {} streams", params.stream_count()),
    )?;
    let server = Server::bind(
        ServerConfig {
            bind: server_ip,
            port: 0,
            one_off: true,
            max_streams: crate::config::MAX_STREAMS * 2,
            ..ServerConfig::default()
        },
        Arc::new(|_line: &str| {}),
    )?
    .in_process();
    let port = server.local_addr().port();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let handle = std::thread::Builder::new()
        .name("loopback-server".into())
        .spawn(move || server.serve(&stop2))
        .map_err(|e| NetError::Socket(format!("cannot start the loopback server: {e}")))?;
    let result = crate::client::run(
        &ClientConfig {
            host: server_ip.to_string(),
            port,
            params,
            psk: None,
            connect_timeout: Duration::from_secs(5),
            server_kind: crate::config::ServerKind::Nsperf,
            local,
        },
        on_interval,
    );
    stop.store(true, std::sync::atomic::Ordering::Release);
    let _ = handle.join();
    result
}
