//! nsperf's [`TestParams`] to iperf3's parameters and back.
//!
//! iperf3 counts `-t` and `-O` in whole seconds; the end of a test is the client's
//! `TEST_END`, so an nsperf client ends on its own clock and sends iperf3 the seconds rounded
//! up (the server only uses them for its give-up timer). `-O` resets the server's counters, so
//! it must be whole seconds to mean the same on both ends.

use crate::config::{Direction, MAX_DATAGRAM, MAX_MESSAGE, Mode, Protocol, TestParams};
use crate::datagram::Format;

use super::wire::{ErrorCode, Params};

/// Default TCP block size of iperf3 (`DEFAULT_TCP_BLKSIZE`).
const IPERF3_TCP_LEN: u32 = 128 * 1024;
/// Default UDP block size of iperf3 when the client sent none (`DEFAULT_UDP_BLKSIZE`).
const IPERF3_UDP_LEN: u32 = 1460;

/// The iperf3 parameters for an nsperf test, or why an iperf3 server cannot run it.
pub fn to_iperf3(p: &TestParams) -> Result<Params, String> {
    if p.mode != Mode::Stream {
        return Err("an iperf3 server runs bulk TCP and UDP tests only; --rr and --sweep need an nsperf server".into());
    }
    if p.server_cpu.is_some() {
        return Err("-A's server CPU needs an nsperf server".into());
    }
    if p.warmup_ns % 1_000_000_000 != 0 {
        return Err("-O must be whole seconds against an iperf3 server".into());
    }
    if p.protocol == Protocol::Udp
        && p.len
            < (Format::Iperf3 {
                counters_64bit: true,
            })
            .header_len() as u32
    {
        return Err("UDP datagrams to an iperf3 server must be at least 16 bytes".into());
    }
    let secs = |ns: u64| ns.div_ceil(1_000_000_000) as i64;
    Ok(Params {
        tcp: p.protocol == Protocol::Tcp,
        udp: p.protocol == Protocol::Udp,
        omit: secs(p.warmup_ns),
        time: secs(p.duration_ns),
        num: p.bytes.min(i64::MAX as u64) as i64,
        parallel: p.streams as i64,
        reverse: p.direction == Direction::Down,
        bidirectional: p.direction == Direction::Both,
        mss: p.mss.map(i64::from),
        nodelay: p.no_delay,
        window: p.window.map(|w| w as i64),
        len: Some(p.len as i64),
        bandwidth: (p.rate_bps > 0.0).then_some(p.rate_bps.round() as i64),
        congestion: p.congestion.clone(),
        zerocopy: p.zerocopy.then_some(1),
        tos: p.tos.map(i64::from),
        udp_counters_64bit: (p.protocol == Protocol::Udp).then_some(1),
        client_version: Some(format!("nsperf {}", env!("CARGO_PKG_VERSION"))),
        ..Params::default()
    })
}

/// Why a served iperf3 client's test cannot run: iperf3's error number and one line.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// iperf3's error number, sent with `SERVER_ERROR`.
    pub code: i32,
    /// The server's log line.
    pub message: String,
}

fn refuse(code: i32, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
    }
}

/// What the server allows (`--max-streams`, `--max-time`).
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Most streams per test (both directions together).
    pub max_streams: u32,
    /// Longest test, seconds, omitted ones included; 0 = no limit.
    pub max_time_s: u64,
}

/// nsperf's test parameters for an iperf3 client's request. `duration_ns` is the client's
/// `-t` (the client ends the test), `bytes` its `-n` (or `-k` blocks times `-l`).
pub fn from_iperf3(q: &Params, caps: Caps) -> Result<TestParams, Refusal> {
    if q.sctp {
        return Err(refuse(ErrorCode::UNIMPLEMENTED, "SCTP is not served"));
    }
    let protocol = if q.udp { Protocol::Udp } else { Protocol::Tcp };
    let streams = u32::try_from(q.parallel.max(1))
        .ok()
        .filter(|&n| n <= crate::config::MAX_STREAMS)
        .ok_or_else(|| refuse(ErrorCode::NUM_STREAMS, "too many streams"))?;
    let direction = match (q.reverse, q.bidirectional) {
        (_, true) => Direction::Both,
        (true, false) => Direction::Down,
        _ => Direction::Up,
    };
    let per_dir = if direction == Direction::Both { 2 } else { 1 };
    if streams * per_dir > caps.max_streams {
        return Err(refuse(
            ErrorCode::NUM_STREAMS,
            format!(
                "test asks for {} streams, the server allows {} (--max-streams)",
                streams * per_dir,
                caps.max_streams
            ),
        ));
    }
    let (time, omit) = (q.time.max(0) as u64, q.omit.max(0) as u64);
    if caps.max_time_s > 0 && (time == 0 || time + omit > caps.max_time_s) {
        return Err(refuse(
            ErrorCode::DURATION,
            format!(
                "test asks for {} s, the server allows {} s (--max-time)",
                time + omit,
                caps.max_time_s
            ),
        ));
    }
    let len = match (q.len, protocol) {
        (Some(l), _) => u32::try_from(l).unwrap_or(0),
        (None, Protocol::Tcp) => IPERF3_TCP_LEN,
        (None, Protocol::Udp) => IPERF3_UDP_LEN,
    };
    let header = Format::Iperf3 {
        counters_64bit: q.counters_64bit(),
    }
    .header_len() as u32;
    match protocol {
        Protocol::Tcp if len == 0 || len > MAX_MESSAGE => {
            return Err(refuse(ErrorCode::BLOCK_SIZE, format!("block size {len}")));
        }
        Protocol::Udp if !(header..=MAX_DATAGRAM).contains(&len) => {
            return Err(refuse(
                ErrorCode::UDP_BLOCK_SIZE,
                format!("UDP block size {len}"),
            ));
        }
        _ => {}
    }
    let mss = match q.mss {
        None => None,
        Some(m) if (88..=65_535).contains(&m) => Some(m as u32),
        Some(m) => return Err(refuse(ErrorCode::MSS, format!("MSS {m}"))),
    };
    let window = match q.window {
        None => None,
        Some(w) if (1024..=1 << 30).contains(&w) => Some(w as u64),
        Some(w) => return Err(refuse(ErrorCode::BUF_SIZE, format!("socket buffer {w}"))),
    };
    let blocks = (q.blockcount.max(0) as u64).saturating_mul(len as u64);
    let rate = q
        .fqrate
        .filter(|&r| r > 0)
        .or(q.bandwidth)
        .unwrap_or(0)
        .max(0);
    Ok(TestParams {
        server_cpu: None,
        protocol,
        mode: Mode::Stream,
        streams,
        direction,
        duration_ns: time.saturating_mul(1_000_000_000),
        bytes: if q.num > 0 { q.num as u64 } else { blocks },
        warmup_ns: omit.saturating_mul(1_000_000_000),
        interval_ns: 1_000_000_000,
        len,
        window,
        congestion: q.congestion.clone().filter(|c| {
            !c.is_empty()
                && c.len() <= 15
                && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }),
        mss,
        no_delay: q.nodelay,
        zerocopy: q.zerocopy.unwrap_or(0) != 0,
        rate_bps: rate as f64,
        udp_offload: true,
        awake: false,
        tos: q.tos.and_then(|t| u8::try_from(t).ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: Caps = Caps {
        max_streams: 64,
        max_time_s: 0,
    };

    #[test]
    fn nsperf_tests_map_both_ways() {
        let p = TestParams {
            protocol: Protocol::Udp,
            streams: 3,
            direction: Direction::Both,
            duration_ns: 2_500_000_000,
            warmup_ns: 1_000_000_000,
            len: 1400,
            rate_bps: 5e6,
            ..TestParams::default()
        };
        let q = to_iperf3(&p).unwrap();
        assert!(q.udp && q.bidirectional && !q.reverse);
        assert_eq!((q.time, q.omit, q.parallel), (3, 1, 3));
        assert_eq!(q.bandwidth, Some(5_000_000));
        assert!(q.counters_64bit());
        let back = from_iperf3(&q, CAPS).unwrap();
        assert_eq!(back.protocol, Protocol::Udp);
        assert_eq!(back.direction, Direction::Both);
        assert_eq!((back.streams, back.len, back.rate_bps), (3, 1400, 5e6));
        assert_eq!(back.warmup_ns, 1_000_000_000);
    }

    #[test]
    fn what_iperf3_cannot_do_is_named() {
        let rr = TestParams {
            mode: Mode::Rr {
                request_bytes: 1,
                response_bytes: 1,
                burst: 1,
            },
            ..TestParams::default()
        };
        assert!(to_iperf3(&rr).unwrap_err().contains("--rr"));
        let half = TestParams {
            warmup_ns: 500_000_000,
            ..TestParams::default()
        };
        assert!(to_iperf3(&half).unwrap_err().contains("-O"));
    }

    #[test]
    fn served_requests_are_checked() {
        let q = |f: fn(&mut Params)| {
            let mut q = Params {
                tcp: true,
                time: 10,
                parallel: 1,
                ..Params::default()
            };
            f(&mut q);
            from_iperf3(
                &q,
                Caps {
                    max_streams: 8,
                    max_time_s: 60,
                },
            )
        };
        assert_eq!(q(|_| {}).unwrap().len, 128 * 1024);
        assert_eq!(
            q(|q| q.parallel = 9).unwrap_err().code,
            ErrorCode::NUM_STREAMS
        );
        assert_eq!(
            q(|q| {
                q.parallel = 5;
                q.bidirectional = true
            })
            .unwrap_err()
            .code,
            ErrorCode::NUM_STREAMS
        );
        assert_eq!(q(|q| q.time = 61).unwrap_err().code, ErrorCode::DURATION);
        assert_eq!(
            q(|q| q.sctp = true).unwrap_err().code,
            ErrorCode::UNIMPLEMENTED
        );
        assert_eq!(q(|q| q.mss = Some(9)).unwrap_err().code, ErrorCode::MSS);
        assert_eq!(
            q(|q| {
                q.tcp = false;
                q.udp = true;
                q.len = Some(8)
            })
            .unwrap_err()
            .code,
            ErrorCode::UDP_BLOCK_SIZE
        );
        let blocks = q(|q| {
            q.blockcount = 10;
            q.len = Some(1000)
        })
        .unwrap();
        assert_eq!(blocks.bytes, 10_000);
        assert_eq!(
            q(|q| q.congestion = Some("a b".into())).unwrap().congestion,
            None
        );
    }
}
