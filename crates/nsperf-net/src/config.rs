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
    /// `response_bytes`, `burst` transactions in flight per stream (netperf's `-b`).
    Rr {
        /// Request size.
        request_bytes: u32,
        /// Response size.
        response_bytes: u32,
        /// Transactions in flight on each connection (`--burst`): the client keeps this many
        /// requests sent and unanswered; the server answers each as it arrives. 1 = one at a
        /// time.
        #[serde(default = "one")]
        burst: u32,
    },
    /// NetPIPE-style ping-pong over message sizes from `min_bytes` to `max_bytes`.
    Sweep {
        /// Smallest message.
        min_bytes: u32,
        /// Largest message.
        max_bytes: u32,
    },
}

fn one() -> u32 {
    1
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
    /// IP type-of-service byte of the data sockets on both ends (`-S`/`--dscp`): DSCP in the
    /// upper six bits, ECN in the lower two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// The CPU the server pins its data threads to (the second number of `-A N,M`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<u32>,
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
            tos: None,
            server_cpu: None,
        }
    }
}

/// Largest TCP write size, request or sweep message.
pub const MAX_MESSAGE: u32 = 64 << 20;
/// Largest UDP payload over IPv4.
pub const MAX_DATAGRAM: u32 = 65_507;
/// Smallest UDP payload: the sequence header.
pub const MIN_DATAGRAM: u32 = crate::datagram::HEADER_LEN as u32;
/// Most streams per direction.
pub const MAX_STREAMS: u32 = 4096;
/// Most request/response transactions in flight per connection (`--burst`).
pub const MAX_BURST: u32 = 4096;

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
                burst,
            } => {
                if self.protocol != Protocol::Tcp {
                    return Err("request/response runs over TCP".into());
                }
                for s in [request_bytes, response_bytes] {
                    if s == 0 || s > MAX_MESSAGE {
                        return Err(format!("request/response sizes must be 1..={MAX_MESSAGE}"));
                    }
                }
                if burst == 0 || burst > MAX_BURST {
                    return Err(format!(
                        "transactions in flight (--burst) must be 1..={MAX_BURST}, got {burst}"
                    ));
                }
                // The client holds a burst of responses and of requests in memory.
                let held = (request_bytes as u64 + response_bytes as u64) * burst as u64;
                if held > 1 << 30 {
                    return Err(format!(
                        "--burst {burst} of {request_bytes}/{response_bytes} bytes would hold {held} bytes in flight; at most 1 GiB"
                    ));
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

/// Bytes stream `index` of `streams` sends out of a total of `bytes` (0 = unlimited).
pub fn quota(bytes: u64, streams: u64, index: u64) -> u64 {
    if bytes == 0 {
        return 0;
    }
    let base = bytes / streams.max(1);
    let extra = if index < bytes % streams.max(1) { 1 } else { 0 };
    (base + extra).max(1)
}

/// Which protocol the client speaks to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerKind {
    /// nsperf's; when the server answers in iperf3's, reconnect speaking iperf3.
    #[default]
    Detect,
    /// nsperf's only (an iperf3 server is an error).
    Nsperf,
    /// iperf3's (`--iperf3`): no nsperf greeting first.
    Iperf3,
}

/// An IP version (`-4`, `-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IpVersion {
    /// IPv4 only.
    V4,
    /// IPv6 only.
    V6,
}

impl IpVersion {
    /// Whether `a` is of this version.
    pub fn matches(self, a: &std::net::SocketAddr) -> bool {
        match self {
            IpVersion::V4 => a.is_ipv4(),
            IpVersion::V6 => a.is_ipv6(),
        }
    }
}

/// The client's own end: where its sockets start (`-B`, `--cport`, `-4`/`-6`) and where its
/// data threads run (`-A`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LocalEnd {
    /// Local address of every socket (`-B`).
    pub bind: Option<std::net::IpAddr>,
    /// Local port of the first data stream; stream `i` uses `cport + i`, as iperf3 does
    /// (`--cport`). The control connection keeps an ephemeral port.
    pub cport: Option<u16>,
    /// Only this IP version (`-4`, `-6`).
    pub version: Option<IpVersion>,
    /// The CPU the client's data threads are pinned to (the first number of `-A N,M`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
}

impl LocalEnd {
    /// True when nothing is asked (every field at its default).
    pub fn is_default(&self) -> bool {
        *self == LocalEnd::default()
    }
}

/// How the client reaches the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientConfig {
    /// Host name or address of the server.
    pub host: String,
    /// Control port.
    pub port: u16,
    /// The test.
    pub params: TestParams,
    /// Pre-shared key, when the server wants one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psk: Option<Vec<u8>>,
    /// Give up connecting after this long.
    pub connect_timeout: Duration,
    /// nsperf's protocol, iperf3's, or detect.
    #[serde(default)]
    pub server_kind: ServerKind,
    /// Local address, ports and IP version.
    #[serde(default)]
    pub local: LocalEnd,
}

/// The server's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psk: Option<Vec<u8>>,
    /// Serve one client, then exit (`--one-off`).
    pub one_off: bool,
    /// Ignore clients' `--awake` (`--deny-awake`): this host's CPU power states are not
    /// the clients' to change.
    pub deny_awake: bool,
    /// On an IPv6 address, serve IPv6 clients only (`-6`); otherwise the IPv6 wildcard takes
    /// IPv4 clients too.
    #[serde(default)]
    pub ipv6_only: bool,
    /// A test whose client goes silent (no stop and no data moving, or no stop this long
    /// past its planned end) is ended and the client dropped (`--silent-timeout`).
    #[serde(default = "default_silent_client")]
    pub silent_client: Duration,
}

/// How long the server waits for a silent client by default.
pub(crate) const DEFAULT_SILENT_CLIENT: Duration = Duration::from_secs(30);

fn default_silent_client() -> Duration {
    DEFAULT_SILENT_CLIENT
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
            ipv6_only: false,
            silent_client: DEFAULT_SILENT_CLIENT,
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
    fn quotas_add_up() {
        let q: u64 = (0..3).map(|i| quota(10, 3, i)).sum();
        assert_eq!(q, 10);
        assert_eq!(quota(0, 3, 1), 0);
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
