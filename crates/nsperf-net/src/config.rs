//! Typed configuration of a test (sent to the server as is) and of the two ends.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Transport of the data streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP streams.
    #[default]
    Tcp,
    /// UDP datagrams.
    Udp,
}

/// Who sends the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client to server (the default, like iperf3).
    #[default]
    Up,
    /// Server to client (`-R`).
    Down,
    /// Both at once (`--bidir`): `streams` each way.
    Both,
}

/// What kind of test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Mode {
    /// Bulk transfer: throughput.
    #[default]
    Stream,
    /// Request/response: the client sends `request_bytes`, the server answers
    /// `response_bytes`, one transaction at a time per stream.
    Rr {
        /// Request size.
        request_bytes: u32,
        /// Response size.
        response_bytes: u32,
    },
    /// NetPIPE-style ping-pong over message sizes from `min_bytes` to `max_bytes`.
    Sweep {
        /// Smallest message.
        min_bytes: u32,
        /// Largest message.
        max_bytes: u32,
    },
}

/// Every parameter of one test; the client sends it to the server verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestParams {
    /// TCP or UDP.
    pub protocol: Protocol,
    /// Stream, request/response or sweep.
    pub mode: Mode,
    /// Parallel streams per direction (`-P`).
    pub streams: u32,
    /// Who sends.
    pub direction: Direction,
    /// Measured time after the warm-up, ns (`-t`); with `bytes` > 0 an upper bound.
    pub duration_ns: u64,
    /// Bytes to send per direction, split over the streams (`-n`); 0 = by time.
    pub bytes: u64,
    /// Warm-up excluded from the summary, ns (`-O`).
    pub warmup_ns: u64,
    /// Reporting interval, ns (`-i`).
    pub interval_ns: u64,
    /// Write size for TCP, datagram size for UDP (`-l`).
    pub len: u32,
    /// Socket send and receive buffer on both ends (`-w`); `None` = kernel autotuning.
    pub window: Option<u64>,
    /// Congestion control (`-C`); `None` = the system default.
    pub congestion: Option<String>,
    /// TCP maximum segment size (`-M`).
    pub mss: Option<u32>,
    /// `TCP_NODELAY` (`--no-delay`).
    pub no_delay: bool,
    /// Send with `sendfile(2)` from a memory file instead of `write(2)` (`--zerocopy`).
    pub zerocopy: bool,
    /// UDP target bit rate per stream (`-b`); 0 = as fast as possible.
    pub rate_bps: f64,
    /// Use UDP segmentation/receive offload (GSO/GRO) where the kernel has it.
    pub udp_offload: bool,
    /// Hold both ends' CPUs out of deep idle states for the test (`--awake`).
    #[serde(default)]
    pub awake: bool,
}

impl Default for TestParams {
    fn default() -> Self {
        TestParams {
            protocol: Protocol::Tcp,
            mode: Mode::Stream,
            streams: 1,
            direction: Direction::Up,
            duration_ns: 10_000_000_000,
            bytes: 0,
            warmup_ns: 0,
            interval_ns: 1_000_000_000,
            len: 128 * 1024,
            window: None,
            congestion: None,
            mss: None,
            no_delay: false,
            zerocopy: false,
            rate_bps: 0.0,
            udp_offload: true,
            awake: false,
        }
    }
}

/// Largest TCP write size, request or sweep message.
pub const MAX_MESSAGE: u32 = 64 << 20;
/// Largest UDP payload over IPv4.
pub const MAX_DATAGRAM: u32 = 65_507;
/// Smallest UDP payload: the sequence header.
pub const MIN_DATAGRAM: u32 = crate::udp::HEADER_LEN as u32;
/// Most streams per direction.
pub const MAX_STREAMS: u32 = 4096;

impl TestParams {
    /// The CPU idle-exit latency hold `--awake` asks for on each end, when this end can have
    /// it (root); otherwise the report says so in the `awake_not_held` finding.
    pub fn awake_hold(&self) -> Option<nsperf_core::cpu::CpuLatencyHold> {
        if !self.awake {
            return None;
        }
        nsperf_core::cpu::CpuLatencyHold::acquire().ok()
    }

    /// Number of data connections (or UDP flows) of the test.
    pub fn stream_count(&self) -> u32 {
        match (self.mode, self.direction) {
            (Mode::Stream, Direction::Both) => self.streams.saturating_mul(2),
            (Mode::Sweep { .. }, _) => 1,
            _ => self.streams,
        }
    }

    /// Warm-up plus measured time, ns.
    pub fn total_time_ns(&self) -> u64 {
        self.warmup_ns.saturating_add(self.duration_ns)
    }

    /// Whether stream `id` carries data from the client to the server.
    pub fn stream_is_up(&self, id: u32) -> bool {
        match self.direction {
            Direction::Up => true,
            Direction::Down => false,
            Direction::Both => id < self.streams,
        }
    }

    /// Checks every value; the message is one line for the user.
    pub fn validate(&self) -> Result<(), String> {
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return Err(format!(
                "parallel streams must be 1..={MAX_STREAMS}, got {}",
                self.streams
            ));
        }
        if self.duration_ns == 0 && self.bytes == 0 {
            return Err("the test needs a time (-t) or a byte count (-n)".into());
        }
        if self.interval_ns < 10_000_000 {
            return Err("the reporting interval must be at least 10 ms".into());
        }
        match self.protocol {
            Protocol::Tcp if self.len == 0 || self.len > MAX_MESSAGE => {
                return Err(format!("message size must be 1..={MAX_MESSAGE} bytes"));
            }
            Protocol::Udp if !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&self.len) => {
                return Err(format!(
                    "UDP datagram size must be {MIN_DATAGRAM}..={MAX_DATAGRAM} bytes, got {}",
                    self.len
                ));
            }
            _ => {}
        }
        if !(self.rate_bps.is_finite() && self.rate_bps >= 0.0) {
            return Err("the bit rate must be a non-negative number".into());
        }
        if let Some(w) = self.window
            && !(1024..=1 << 30).contains(&w)
        {
            return Err(format!("socket buffer must be 1 KiB..1 GiB, got {w} bytes"));
        }
        if let Some(m) = self.mss
            && !(88..=65_535).contains(&m)
        {
            return Err(format!("MSS must be 88..=65535, got {m}"));
        }
        if let Some(cc) = &self.congestion
            && (cc.is_empty()
                || cc.len() > 15
                || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        {
            return Err(format!("'{cc}' is not a congestion control name"));
        }
        match self.mode {
            Mode::Stream => {}
            Mode::Rr {
                request_bytes,
                response_bytes,
            } => {
                if self.protocol != Protocol::Tcp {
                    return Err("request/response runs over TCP".into());
                }
                for s in [request_bytes, response_bytes] {
                    if s == 0 || s > MAX_MESSAGE {
                        return Err(format!("request/response sizes must be 1..={MAX_MESSAGE}"));
                    }
                }
            }
            Mode::Sweep {
                min_bytes,
                max_bytes,
            } => {
                if self.protocol != Protocol::Tcp {
                    return Err("the sweep runs over TCP".into());
                }
                if min_bytes == 0 || min_bytes > max_bytes || max_bytes > MAX_MESSAGE {
                    return Err(format!(
                        "sweep range must be 1 <= MIN <= MAX <= {MAX_MESSAGE} bytes"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// How the client reaches the server.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Host name or address of the server.
    pub host: String,
    /// Control port.
    pub port: u16,
    /// The test.
    pub params: TestParams,
    /// Pre-shared key, when the server wants one.
    pub psk: Option<Vec<u8>>,
    /// Give up connecting after this long.
    pub connect_timeout: Duration,
}

/// The server's settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on.
    pub bind: std::net::IpAddr,
    /// Control (and TCP data) port; 0 = any free port.
    pub port: u16,
    /// Most clients served at once (`--max-clients`).
    pub max_clients: u32,
    /// Most streams per test (`--max-streams`).
    pub max_streams: u32,
    /// Longest test, warm-up included (`--max-time`); `None` = no limit.
    pub max_time: Option<Duration>,
    /// Pre-shared key that clients must prove (`--psk-file`).
    pub psk: Option<Vec<u8>>,
    /// Serve one client, then exit (`--one-off`).
    pub one_off: bool,
    /// Ignore clients' `--awake` (`--deny-awake`): this host's CPU power states are not
    /// the clients' to change.
    pub deny_awake: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            port: 5301,
            max_clients: 64,
            max_streams: 256,
            max_time: None,
            psk: None,
            one_off: false,
            deny_awake: false,
        }
    }
}

/// The default control port.
pub const DEFAULT_PORT: u16 = 5301;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_named() {
        assert!(TestParams::default().validate().is_ok());
        let bad = |f: fn(&mut TestParams)| {
            let mut p = TestParams::default();
            f(&mut p);
            p.validate().unwrap_err()
        };
        assert!(bad(|p| p.streams = 0).contains("parallel streams"));
        assert!(bad(|p| p.len = 0).contains("message size"));
        assert!(
            bad(|p| {
                p.protocol = Protocol::Udp;
                p.len = 70_000
            })
            .contains("datagram")
        );
        assert!(bad(|p| p.congestion = Some("a b".into())).contains("congestion"));
        assert!(bad(|p| p.window = Some(10)).contains("socket buffer"));
        assert!(
            bad(|p| p.mode = Mode::Sweep {
                min_bytes: 9,
                max_bytes: 3
            })
            .contains("sweep")
        );
    }

    #[test]
    fn bidir_doubles_streams() {
        let p = TestParams {
            streams: 3,
            direction: Direction::Both,
            ..Default::default()
        };
        assert_eq!(p.stream_count(), 6);
        assert!(p.stream_is_up(2));
        assert!(!p.stream_is_up(3));
    }
}
