//! `nsperf net --loopback`: a server on 127.0.0.1 in this process and a client against it,
//! with the full report. The quickest check that the host itself (CPU, kernel, memory copy)
//! is not what limits a real test.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::client::{ClientRun, LiveInterval};
use crate::config::{ClientConfig, ServerConfig, TestParams};
use crate::error::NetError;
use crate::server::Server;

/// Runs `params` against an in-process server on a free loopback port.
pub fn run(
    params: TestParams,
    on_interval: impl FnMut(&LiveInterval),
) -> Result<ClientRun, NetError> {
    let server = Server::bind(
        ServerConfig {
            bind: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            port: 0,
            one_off: true,
            max_streams: crate::config::MAX_STREAMS * 2,
            ..ServerConfig::default()
        },
        Arc::new(|_line: &str| {}),
    )?;
    let port = server.local_addr().port();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let handle = std::thread::Builder::new()
        .name("loopback-server".into())
        .spawn(move || server.serve(&stop2))
        .map_err(|e| NetError::Socket(format!("cannot start the loopback server: {e}")))?;
    let result = crate::client::run(
        &ClientConfig {
            host: "127.0.0.1".into(),
            port,
            params,
            psk: None,
            connect_timeout: Duration::from_secs(5),
        },
        on_interval,
    );
    stop.store(true, std::sync::atomic::Ordering::Release);
    let _ = handle.join();
    result
}
