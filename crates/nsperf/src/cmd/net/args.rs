//! The flags of `nsperf net` and the typed configuration they build (the test's
//! parameters, the client's own end), validated before anything connects.

use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::Args;
use nsperf_core::units::{BitRate, Bytes};
use nsperf_net::{DEFAULT_PORT, Direction, IpVersion, LocalEnd, Mode, Protocol, TestParams};

use super::rows::{DEFAULT_TIMESTAMP_FORMAT, RateUnit, Timestamps};
use crate::exit::usage;
use crate::output::OutputArgs;

/// Arguments of `nsperf net`.
#[derive(Debug, Args)]
pub struct NetArgs {
    /// The server (name or address); omit with --loopback.
    #[arg(required_unless_present = "loopback")]
    pub host: Option<String>,
    /// Run a server in this process on 127.0.0.1 and test against it.
    #[arg(long, conflicts_with = "host")]
    pub loopback: bool,
    /// Server port.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Measured time after the warm-up (e.g. 10, 30s, 2m) [default: 10s]; with -n, a limit.
    #[arg(short = 't', long, value_parser = nsperf_core::parse_duration)]
    pub time: Option<Duration>,
    /// Send this many bytes per direction instead of running for a time (e.g. 1g): the test
    /// runs until they are sent, or says why it stopped (-t, no data moving for 10 s).
    #[arg(short = 'n', long)]
    pub bytes: Option<Bytes>,
    /// Warm-up excluded from the summary (e.g. 2s).
    #[arg(short = 'O', long = "omit", visible_alias = "warmup", default_value = "0s", value_parser = nsperf_core::parse_duration)]
    pub omit: Duration,
    /// Reporting interval.
    #[arg(short = 'i', long, default_value = "1s", value_parser = nsperf_core::parse_duration)]
    pub interval: Duration,
    /// Write size (TCP) or datagram size (UDP); default 128 KiB for TCP, 1400 B for UDP.
    #[arg(short = 'l', long)]
    pub len: Option<Bytes>,
    /// Socket send and receive buffer on both ends (the kernel's grant is reported).
    #[arg(short = 'w', long)]
    pub window: Option<Bytes>,
    /// Congestion control (e.g. cubic, reno, bbr); an unknown name lists the available ones.
    #[arg(short = 'C', long)]
    pub congestion: Option<String>,
    /// TCP maximum segment size.
    #[arg(short = 'M', long, value_parser = clap::value_parser!(u32).range(88..=65535))]
    pub mss: Option<u32>,
    /// Disable Nagle's algorithm (TCP_NODELAY).
    #[arg(short = 'N', long)]
    pub no_delay: bool,
    /// Parallel streams, each on its own thread.
    #[arg(short = 'P', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub parallel: u32,
    /// Reverse: the server sends.
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once (-P streams each way).
    #[arg(long)]
    pub bidir: bool,
    /// UDP instead of TCP.
    #[arg(short = 'u', long, conflicts_with_all = ["rr", "sweep", "zerocopy", "congestion", "mss", "no_delay"])]
    pub udp: bool,
    /// Target bit rate per stream (e.g. 100mbit, 1g); 0 = unlimited. UDP defaults to
    /// 1 Mbit/s as iperf3 does; TCP is paced by the kernel (SO_MAX_PACING_RATE, headers
    /// included) and unlimited by default.
    #[arg(short = 'b', long, conflicts_with_all = ["rr", "sweep"])]
    pub bitrate: Option<nsperf_core::BitRate>,
    /// UDP: plain datagrams, without segmentation/receive offload (GSO/GRO).
    #[arg(long, requires = "udp")]
    pub no_offload: bool,
    /// Hold the CPUs of both ends out of deep idle states during the test (PM QoS
    /// /dev/cpu_dma_latency = 0, needs root on each end): shows how much of a round trip is
    /// CPU wake-up.
    #[arg(long)]
    pub awake: bool,
    /// Send with sendfile(2) from a memory file (no copy from user space).
    #[arg(short = 'Z', long)]
    pub zerocopy: bool,
    /// Request/response: SIZE or REQUEST/RESPONSE bytes (e.g. 1, 64/4k); transactions per
    /// second and latency percentiles.
    #[arg(long, value_name = "SIZE[/RESP]", conflicts_with_all = ["sweep", "reverse", "bidir", "zerocopy"])]
    pub rr: Option<String>,
    /// NetPIPE-style message-size sweep MIN..MAX (powers of two and ±3 bytes): round-trip
    /// time and throughput per size.
    #[arg(long, value_name = "MIN..MAX", conflicts_with_all = ["reverse", "bidir", "zerocopy", "parallel"])]
    pub sweep: Option<String>,
    /// Request/response: transactions in flight on each connection (netperf's burst; the
    /// replication "window" of a storage link): the client keeps N requests sent and
    /// unanswered.
    #[arg(long, value_name = "N", requires = "rr", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=nsperf_net::MAX_BURST as i64))]
    pub burst: u32,
    /// Local address of the client's sockets (iperf3's -B).
    #[arg(short = 'B', long = "bind", value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Local port of the first data stream; stream i uses PORT + i (iperf3's --cport).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub cport: Option<u16>,
    /// IPv4 only.
    #[arg(short = '4', long = "version4", conflicts_with = "version6")]
    pub version4: bool,
    /// IPv6 only.
    #[arg(short = '6', long = "version6")]
    pub version6: bool,
    /// IP type-of-service byte of both ends' data packets (0-255; 0x.. hex, 0.. octal, as
    /// iperf3's -S): DSCP in the upper six bits, ECN in the lower two.
    #[arg(short = 'S', long = "tos", value_name = "N", value_parser = parse_tos, conflicts_with = "dscp")]
    pub tos: Option<u8>,
    /// DSCP of both ends' data packets: 0-63 or a name (EF, AF11..AF43, CS0..CS7, VA, LE).
    #[arg(long, value_name = "DSCP", value_parser = parse_dscp)]
    pub dscp: Option<u8>,
    /// Pin the data threads to a CPU: N on the client, M on the server (iperf3's -A N,M).
    #[arg(short = 'A', long = "affinity", value_name = "N[,M]", value_parser = parse_affinity)]
    pub affinity: Option<Affinity>,
    /// Unit of the rates printed: k, m, g, t (kbit/s .. Tbit/s) or K, M, G, T (KiB/s ..
    /// TiB/s), as iperf3's -f; default: scaled to each figure.
    #[arg(short = 'f', long = "format", value_name = "UNIT", value_parser = RateUnit::from_str)]
    pub format: Option<RateUnit>,
    /// Prefix each interval row with the local time (a strftime format; default iperf3's
    /// "%c ").
    #[arg(long, value_name = "FORMAT", num_args = 0..=1, require_equals = true,
          default_missing_value = DEFAULT_TIMESTAMP_FORMAT, value_parser = Timestamps::from_str)]
    pub timestamps: Option<Timestamps>,
    /// Write the output to FILE (appended) instead of the terminal, errors included.
    #[arg(long, value_name = "FILE")]
    pub logfile: Option<PathBuf>,
    /// File holding the server's pre-shared key.
    #[arg(long)]
    pub psk_file: Option<PathBuf>,
    /// The server is an iperf3 server: speak iperf3's protocol from the start (without it,
    /// nsperf greets first and switches to iperf3's protocol when the server answers in it).
    #[arg(long, conflicts_with_all = ["loopback", "psk_file", "rr", "sweep"])]
    pub iperf3: bool,
    /// Give up connecting after this long.
    #[arg(long, default_value = "5s", value_parser = nsperf_core::parse_duration)]
    pub connect_timeout: Duration,
    /// Print the result as another tool's JSON document instead (`iperf3`: the keys of
    /// `iperf3 -J`, for scripts and dashboards that read them).
    #[arg(long, value_enum, value_name = "TOOL", conflicts_with_all = ["json_stream", "csv", "rr", "sweep"])]
    pub json_compat: Option<JsonCompat>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
}

/// Tools whose JSON `--json-compat` can print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum JsonCompat {
    /// iperf3's `-J` document.
    Iperf3,
}

fn parse_rr(s: &str, burst: u32) -> anyhow::Result<Mode> {
    let (a, b) = s.split_once('/').unwrap_or((s, s));
    let req = Bytes::parse(a.trim())?.0;
    let resp = Bytes::parse(b.trim())?.0;
    let cap = |v: u64| u32::try_from(v).map_err(|_| usage(format!("--rr size {v} is too large")));
    Ok(Mode::Rr {
        request_bytes: cap(req)?,
        response_bytes: cap(resp)?,
        burst,
    })
}

fn parse_sweep(s: &str) -> anyhow::Result<Mode> {
    let (a, b) = s.split_once("..").ok_or_else(|| {
        usage(format!(
            "invalid sweep range '{s}': expected MIN..MAX (e.g. 1..4m)"
        ))
    })?;
    let lo = Bytes::parse(a.trim())?.0;
    let hi = Bytes::parse(b.trim())?.0;
    let cap = |v: u64| u32::try_from(v).map_err(|_| usage(format!("sweep size {v} is too large")));
    Ok(Mode::Sweep {
        min_bytes: cap(lo)?,
        max_bytes: cap(hi)?,
    })
}

/// `-t` when neither it nor `-n` is given.
const DEFAULT_TIME: Duration = Duration::from_secs(10);
/// UDP's rate per stream without `-b`: iperf3's default, so a habit cannot flood a link.
pub const UDP_DEFAULT_RATE: BitRate = BitRate(1e6);

/// Builds the typed test parameters from the flags.
pub fn params(a: &NetArgs) -> anyhow::Result<TestParams> {
    let protocol = if a.udp { Protocol::Udp } else { Protocol::Tcp };
    let mode = match (&a.rr, &a.sweep) {
        (Some(r), _) => parse_rr(r, a.burst)?,
        (_, Some(s)) => parse_sweep(s)?,
        _ => Mode::Stream,
    };
    let default_len = if a.udp { 1400 } else { 128 * 1024 };
    let len = match a.len {
        Some(b) => u32::try_from(b.0).map_err(|_| usage("-l is too large"))?,
        None => default_len,
    };
    let p = TestParams {
        protocol,
        mode,
        streams: a.parallel,
        direction: if a.bidir {
            Direction::Both
        } else if a.reverse {
            Direction::Down
        } else {
            Direction::Up
        },
        duration_ns: match (a.time, a.bytes) {
            (Some(t), _) => t.as_nanos() as u64,
            (None, Some(_)) => 0,
            (None, None) => DEFAULT_TIME.as_nanos() as u64,
        },
        bytes: a.bytes.map(|b| b.0).unwrap_or(0),
        warmup_ns: a.omit.as_nanos() as u64,
        interval_ns: a.interval.as_nanos() as u64,
        len,
        window: a.window.map(|b| b.0),
        congestion: a.congestion.clone(),
        mss: a.mss,
        no_delay: a.no_delay,
        zerocopy: a.zerocopy,
        rate_bps: match a.bitrate {
            Some(b) => b.bps(),
            None if a.udp => UDP_DEFAULT_RATE.bps(),
            None => 0.0,
        },
        udp_offload: !a.no_offload,
        awake: a.awake,
        tos: a.tos.or(a.dscp.map(|d| d << 2)),
        server_cpu: a.affinity.and_then(|x| x.server),
    };
    p.validate().map_err(usage)?;
    if a.bytes.is_some_and(|b| b.0 == 0) {
        return Err(usage("-n must be more than 0 bytes"));
    }
    Ok(p)
}

/// The client's own end from `-B`, `--cport`, `-4`/`-6` and `-A`.
pub fn local_end(a: &NetArgs) -> anyhow::Result<LocalEnd> {
    let version = match (a.version4, a.version6) {
        (true, _) => Some(IpVersion::V4),
        (_, true) => Some(IpVersion::V6),
        _ => None,
    };
    if let (Some(v), Some(b)) = (version, a.bind)
        && b.is_ipv4() != (v == IpVersion::V4)
    {
        return Err(usage(format!(
            "-B {b} is not an {} address",
            if v == IpVersion::V4 { "IPv4" } else { "IPv6" }
        )));
    }
    let streams = params(a)?.stream_count();
    if let Some(c) = a.cport
        && c as u32 + streams - 1 > 65535
    {
        return Err(usage(format!(
            "--cport {c} with {streams} streams passes port 65535"
        )));
    }
    Ok(LocalEnd {
        bind: a.bind,
        cport: a.cport,
        version,
        cpu: a.affinity.map(|x| x.client),
    })
}

/// `-A N[,M]`: the client's CPU and the server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Affinity {
    /// The client's data threads.
    pub client: u32,
    /// The server's data threads.
    pub server: Option<u32>,
}

fn parse_affinity(s: &str) -> Result<Affinity, String> {
    let cpu = |t: &str| {
        t.trim()
            .parse::<u32>()
            .ok()
            .filter(|&c| c < 1024)
            .ok_or_else(|| format!("'{t}' is not a CPU number (0-1023)"))
    };
    let (c, srv) = match s.split_once(',') {
        Some((c, m)) => (c, Some(cpu(m)?)),
        None => (s, None),
    };
    Ok(Affinity {
        client: cpu(c)?,
        server: srv,
    })
}

/// A number as C reads it: `0x` hex, a leading `0` octal, else decimal (iperf3's -S).
fn parse_tos(s: &str) -> Result<u8, String> {
    let t = s.trim();
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(h, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        u32::from_str_radix(&t[1..], 8)
    } else {
        t.parse()
    };
    v.ok()
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| format!("'{s}' is not a TOS byte (0-255, e.g. 0xb8)"))
}

/// A DSCP number or its name (RFC 2474 class selectors, RFC 2597 AF, RFC 3246 EF, RFC 5865
/// VOICE-ADMIT, RFC 8622 LE), as iperf3's --dscp.
fn parse_dscp(s: &str) -> Result<u8, String> {
    let t = s.trim().to_ascii_uppercase();
    let named = match t.as_str() {
        "EF" => Some(46),
        "VA" => Some(44),
        "LE" => Some(1),
        _ => None,
    };
    let v = named
        .or_else(|| {
            let cs = t
                .strip_prefix("CS")?
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= 7)?;
            Some(cs << 3)
        })
        .or_else(|| {
            let af = t.strip_prefix("AF")?;
            let (class, drop) = af.split_at_checked(1)?;
            let (c, d) = (class.parse::<u8>().ok()?, drop.parse::<u8>().ok()?);
            ((1..=4).contains(&c) && (1..=3).contains(&d)).then_some(c * 8 + d * 2)
        })
        .or_else(|| t.parse::<u8>().ok().filter(|&v| v < 64));
    v.ok_or_else(|| format!("'{s}' is not a DSCP (0-63, EF, AF11..AF43, CS0..CS7, VA, LE)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tos_dscp_and_affinity_parse_as_iperf3() {
        assert_eq!(parse_tos("0xb8"), Ok(0xb8));
        assert_eq!(parse_tos("184"), Ok(184));
        assert_eq!(parse_tos("0270"), Ok(0o270));
        assert_eq!(parse_tos("0"), Ok(0));
        assert!(parse_tos("256").is_err());
        assert!(parse_tos("0x1ff").is_err());
        assert_eq!(parse_dscp("ef"), Ok(46));
        assert_eq!(parse_dscp("AF11"), Ok(10));
        assert_eq!(parse_dscp("AF43"), Ok(38));
        assert_eq!(parse_dscp("CS7"), Ok(56));
        assert_eq!(parse_dscp("63"), Ok(63));
        assert!(parse_dscp("64").is_err());
        assert!(parse_dscp("AF51").is_err());
        assert!(parse_dscp("CS8").is_err());
        assert_eq!(
            parse_affinity("1,0"),
            Ok(Affinity {
                client: 1,
                server: Some(0)
            })
        );
        assert_eq!(parse_affinity("3").unwrap().server, None);
        assert!(parse_affinity("x").is_err());
        assert!(parse_affinity("1,").is_err());
    }
}
