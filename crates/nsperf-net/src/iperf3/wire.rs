//! iperf3's control protocol on the byte stream, as iperf3 3.9–3.17 speak it
//! (`src/iperf_api.c`, `iperf_client_api.c`, `iperf_server_api.c`, `iperf.h` of esnet/iperf):
//!
//! - the client opens the control connection and writes a 37-byte cookie: 36 characters of
//!   `[a-z2-7]` and a NUL; every data connection starts with the same cookie (TCP), or with
//!   one 4-byte datagram that the server answers (UDP);
//! - after that the server drives the test with one signed state byte at a time
//!   ([`State`]); the client answers `TEST_END`, `IPERF_DONE` or `CLIENT_TERMINATE`;
//! - parameters and results travel as one JSON object each, after a 4-byte big-endian length
//!   ([`json_block`], [`JsonReader`]);
//! - `SERVER_ERROR` is followed by two big-endian `i32`: iperf3's error number and `errno`.
//!
//! Invariant: nothing here panics on peer bytes and nothing allocates more than
//! [`MAX_JSON`] for one block; every malformed input is an [`Iperf3Error`].

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

/// Bytes of a cookie: 36 characters and a NUL.
pub const COOKIE_LEN: usize = 37;
/// The characters of a cookie (`make_cookie` in iperf_util.c).
pub const COOKIE_CHARS: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// Largest JSON block accepted (a results object with `server_output_text` of a long test
/// fits with room to spare).
pub const MAX_JSON: usize = 16 << 20;
/// The UDP "connect" datagram a client sends on each UDP stream (iperf3 3.10+ writes the
/// host-order `u32` 0x36373839; 3.9 wrote 123456789; servers take any 4 bytes).
pub const UDP_CONNECT_MSG: u32 = 0x3637_3839;
/// The server's answer to [`UDP_CONNECT_MSG`] (host order, as iperf3 writes it).
pub const UDP_CONNECT_REPLY: u32 = 0x3938_3736;
/// The answer of iperf3 3.9 and older servers.
pub const LEGACY_UDP_CONNECT_REPLY: u32 = 987_654_321;

/// Whether 4 bytes from a UDP stream are a server's connect reply (either byte order, so a
/// big-endian peer is understood too).
pub fn is_udp_connect_reply(b: [u8; 4]) -> bool {
    [UDP_CONNECT_REPLY, LEGACY_UDP_CONNECT_REPLY]
        .iter()
        .any(|&v| b == v.to_ne_bytes() || b == v.to_be_bytes() || b == v.to_le_bytes())
}

/// One state byte of the control connection (`iperf_api.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum State {
    /// The data connections are in: clocks start.
    TestStart,
    /// Data flows.
    TestRunning,
    /// Client → server: the test is over.
    TestEnd,
    /// The client may send its parameters.
    ParamExchange,
    /// The client may open its data connections.
    CreateStreams,
    /// The server stopped the test (Ctrl-C).
    ServerTerminate,
    /// The client stopped the test (Ctrl-C).
    ClientTerminate,
    /// Both ends send their results, client first.
    ExchangeResults,
    /// The results are in: the client closes.
    DisplayResults,
    /// Client → server: done.
    IperfDone,
    /// The server is busy with another test.
    AccessDenied,
    /// The server failed; two error numbers follow.
    ServerError,
    /// A state iperf3 defines but never sends (`RESULT_REQUEST`, `STREAM_*`, `IPERF_START`).
    Unused(i8),
}

impl State {
    /// The wire byte.
    pub fn byte(self) -> u8 {
        let v: i8 = match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
            State::Unused(v) => v,
        };
        v as u8
    }

    /// Parses a wire byte.
    pub fn from_byte(b: u8) -> Result<State, Iperf3Error> {
        Ok(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            v @ (3 | 5..=8 | 15) => State::Unused(v),
            _ => return Err(Iperf3Error::BadState(b)),
        })
    }
}

/// Why bytes from an iperf3 peer are not what the protocol allows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Iperf3Error {
    /// A byte that is no iperf3 state.
    #[error("iperf3 peer sent an unknown state byte {0}")]
    BadState(u8),
    /// A state that is not allowed now.
    #[error("iperf3 peer sent {got:?} while {waiting}")]
    Unexpected {
        /// What came.
        got: State,
        /// What the session waited for.
        waiting: &'static str,
    },
    /// A JSON block over [`MAX_JSON`].
    #[error("iperf3 peer announced a JSON block of {0} bytes (limit {MAX_JSON})")]
    TooLong(u32),
    /// A JSON block that does not parse or lacks a field.
    #[error("iperf3 peer sent malformed JSON: {0}")]
    BadJson(String),
    /// A cookie that is not 36 cookie characters and a NUL.
    #[error("not an iperf3 cookie")]
    BadCookie,
    /// The server is running another test.
    #[error("the iperf3 server is busy running a test; try again later")]
    Busy,
    /// The server reported an error.
    #[error("the iperf3 server reported: {}", error_text(*.code, *.errno))]
    Server {
        /// iperf3's error number (`i_errno`).
        code: i32,
        /// The server's `errno`.
        errno: i32,
    },
    /// The server stopped the test.
    #[error("the iperf3 server terminated the test")]
    ServerTerminated,
    /// The client stopped the test.
    #[error("the iperf3 client terminated the test")]
    ClientTerminated,
    /// Nothing came in time.
    #[error("no answer from the iperf3 peer within {secs} s while {waiting}")]
    Timeout {
        /// What the session waited for.
        waiting: &'static str,
        /// The limit, seconds.
        secs: u64,
    },
}

/// The text of an iperf3 error number (the ones a server sends before or during a test;
/// others by number).
pub fn error_text(code: i32, errno: i32) -> String {
    let what = match code {
        ErrorCode::DURATION => "test duration too long",
        ErrorCode::NUM_STREAMS => "number of parallel streams too large",
        ErrorCode::BLOCK_SIZE => "block size too large",
        ErrorCode::BUF_SIZE => "socket buffer size too large",
        ErrorCode::MSS => "MSS too large",
        ErrorCode::UNIMPLEMENTED => "not implemented",
        ErrorCode::UDP_BLOCK_SIZE => "block size invalid",
        ErrorCode::TOTAL_RATE => "total required bandwidth is larger than the server limit",
        ErrorCode::RECV_PARAMS => "unable to receive parameters from client",
        ErrorCode::ACCESS_DENIED => "the server is busy running a test",
        ErrorCode::SET_CONGESTION => "unable to set TCP_CONGESTION",
        ErrorCode::AUTH_TEST => "test authorization failed",
        ErrorCode::STREAM_LISTEN => "unable to start stream listener",
        _ => "",
    };
    let errno = if errno != 0 {
        format!(" ({})", std::io::Error::from_raw_os_error(errno))
    } else {
        String::new()
    };
    if what.is_empty() {
        format!("iperf3 error {code}{errno}")
    } else {
        format!("{what}{errno}")
    }
}

/// iperf3's error numbers (`iperf_api.h`, the same from 3.9 to 3.17) that nsperf sends or
/// names.
#[derive(Debug, Clone, Copy)]
pub struct ErrorCode;

impl ErrorCode {
    /// `IEDURATION`.
    pub const DURATION: i32 = 5;
    /// `IENUMSTREAMS`.
    pub const NUM_STREAMS: i32 = 6;
    /// `IEBLOCKSIZE`.
    pub const BLOCK_SIZE: i32 = 7;
    /// `IEBUFSIZE`.
    pub const BUF_SIZE: i32 = 8;
    /// `IEMSS`.
    pub const MSS: i32 = 10;
    /// `IEUNIMP`.
    pub const UNIMPLEMENTED: i32 = 13;
    /// `IEUDPBLOCKSIZE`.
    pub const UDP_BLOCK_SIZE: i32 = 20;
    /// `IETOTALRATE`.
    pub const TOTAL_RATE: i32 = 27;
    /// `IERECVPARAMS`.
    pub const RECV_PARAMS: i32 = 114;
    /// `IEACCESSDENIED`.
    pub const ACCESS_DENIED: i32 = 121;
    /// `IESETCONGESTION`.
    pub const SET_CONGESTION: i32 = 134;
    /// `IEAUTHTEST`.
    pub const AUTH_TEST: i32 = 142;
    /// `IESTREAMLISTEN`.
    pub const STREAM_LISTEN: i32 = 202;
}

/// A cookie from bytes an iperf3 client sent; `None` unless 36 cookie characters and a NUL.
pub fn parse_cookie(b: &[u8]) -> Option<[u8; COOKIE_LEN]> {
    let c: [u8; COOKIE_LEN] = b.try_into().ok()?;
    let ok = c[..COOKIE_LEN - 1]
        .iter()
        .all(|ch| COOKIE_CHARS.contains(ch))
        && c[COOKIE_LEN - 1] == 0;
    ok.then_some(c)
}

/// Whether `b` can be the start of an iperf3 cookie (all bytes cookie characters, or the NUL
/// at its place): the greeter tells iperf3 clients from nsperf ones by it.
pub fn may_be_cookie(b: &[u8]) -> bool {
    b.len() <= COOKIE_LEN
        && b.iter().enumerate().all(|(i, ch)| {
            if i == COOKIE_LEN - 1 {
                *ch == 0
            } else {
                COOKIE_CHARS.contains(ch)
            }
        })
}

/// A cookie from 37 random bytes (`make_cookie`: each byte modulo 32 picks a character).
pub fn cookie_from(random: [u8; COOKIE_LEN]) -> [u8; COOKIE_LEN] {
    let mut c = random;
    for b in &mut c[..COOKIE_LEN - 1] {
        *b = COOKIE_CHARS[(*b % 32) as usize];
    }
    c[COOKIE_LEN - 1] = 0;
    c
}

/// One JSON block: the length, big endian, and the compact JSON text.
pub fn json_block<T: Serialize>(value: &T) -> Vec<u8> {
    let body = serde_json::to_vec(value).expect("iperf3 messages always serialise");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reads one length-prefixed JSON block from a stream of pushed bytes.
#[derive(Debug, Default)]
pub struct JsonReader {
    want: Option<usize>,
}

impl JsonReader {
    /// Takes a whole block off the front of `buf`: `Ok(None)` when more bytes are needed.
    pub fn take(&mut self, buf: &mut Vec<u8>) -> Result<Option<Vec<u8>>, Iperf3Error> {
        if self.want.is_none() {
            if buf.len() < 4 {
                return Ok(None);
            }
            let n = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            if n as usize > MAX_JSON {
                return Err(Iperf3Error::TooLong(n));
            }
            buf.drain(..4);
            self.want = Some(n as usize);
        }
        let n = self.want.unwrap_or(0);
        if buf.len() < n {
            return Ok(None);
        }
        self.want = None;
        Ok(Some(buf.drain(..n).collect()))
    }

    /// Bytes still needed for the block in progress (at least 1).
    pub fn wanted(&self, buffered: usize) -> usize {
        match self.want {
            None => 4usize.saturating_sub(buffered).max(1),
            Some(n) => n.saturating_sub(buffered).max(1),
        }
    }
}

/// A number from a cJSON document as an integer: cJSON prints large values as doubles
/// (`1.2e+10`), so any JSON number is taken, rounded and clamped.
fn number<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = f64::deserialize(d)?;
    if !v.is_finite() {
        return Err(de::Error::custom("not a finite number"));
    }
    Ok(v.round().clamp(i64::MIN as f64, i64::MAX as f64) as i64)
}

fn opt_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    number(d).map(Some)
}

/// Presence flags (`"tcp": true`, `"reverse": true`): iperf3 only ever sends `true`, and
/// reads a flag by the key's presence, so any value counts as set.
fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d)?;
    Ok(true)
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The test parameters a client sends after `PARAM_EXCHANGE` (`send_parameters`). Unknown
/// keys are ignored, as iperf3 does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// TCP streams.
    #[serde(default, deserialize_with = "flag", skip_serializing_if = "is_false")]
    pub tcp: bool,
    /// UDP streams.
    #[serde(default, deserialize_with = "flag", skip_serializing_if = "is_false")]
    pub udp: bool,
    /// SCTP (not served by nsperf).
    #[serde(default, deserialize_with = "flag", skip_serializing_if = "is_false")]
    pub sctp: bool,
    /// Seconds omitted at the start (`-O`).
    #[serde(default, deserialize_with = "number")]
    pub omit: i64,
    /// Test seconds (`-t`).
    #[serde(default, deserialize_with = "number")]
    pub time: i64,
    /// Bytes to send (`-n`), 0 = by time.
    #[serde(default, deserialize_with = "number")]
    pub num: i64,
    /// Blocks to send (`-k`), 0 = by time.
    #[serde(default, deserialize_with = "number")]
    pub blockcount: i64,
    /// TCP MSS (`-M`).
    #[serde(
        rename = "MSS",
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub mss: Option<i64>,
    /// TCP_NODELAY (`-N`).
    #[serde(default, deserialize_with = "flag", skip_serializing_if = "is_false")]
    pub nodelay: bool,
    /// Streams per direction (`-P`).
    #[serde(default, deserialize_with = "number")]
    pub parallel: i64,
    /// The server sends (`-R`).
    #[serde(default, deserialize_with = "flag", skip_serializing_if = "is_false")]
    pub reverse: bool,
    /// Both directions (`--bidir`).
    #[serde(default, deserialize_with = "flag", skip_serializing_if = "is_false")]
    pub bidirectional: bool,
    /// Socket buffer (`-w`).
    #[serde(
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub window: Option<i64>,
    /// Block size (`-l`).
    #[serde(
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub len: Option<i64>,
    /// Target bit rate per stream (`-b`).
    #[serde(
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub bandwidth: Option<i64>,
    /// Kernel pacing rate (`--fq-rate`).
    #[serde(
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub fqrate: Option<i64>,
    /// IP type of service (`-S`).
    #[serde(
        rename = "TOS",
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub tos: Option<i64>,
    /// Congestion control (`-C`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// The server should return its output with the results (`--get-server-output`).
    #[serde(
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub get_server_output: Option<i64>,
    /// 64-bit UDP sequence numbers (`--udp-counters-64bit`).
    #[serde(
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub udp_counters_64bit: Option<i64>,
    /// Send with sendfile (`-Z`).
    #[serde(
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub zerocopy: Option<i64>,
    /// RSA-encrypted credentials (`--username`; not served by nsperf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authtoken: Option<String>,
    /// The client's version string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
}

impl Params {
    /// Whether UDP datagrams carry 64-bit sequence numbers.
    pub fn counters_64bit(&self) -> bool {
        self.udp_counters_64bit.unwrap_or(0) != 0
    }
}

/// One stream in a results object (`send_results`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// Stream id: 1, 3, 4, 5, … in creation order (iperf3 skips 2).
    #[serde(deserialize_with = "number")]
    pub id: i64,
    /// Bytes after the omitted seconds: sent by a sender, received by a receiver.
    #[serde(deserialize_with = "number")]
    pub bytes: i64,
    /// TCP retransmissions of a sender, -1 otherwise.
    #[serde(deserialize_with = "number")]
    pub retransmits: i64,
    /// UDP receiver: RFC 1889 jitter, seconds.
    pub jitter: f64,
    /// UDP receiver: datagrams missing by sequence number.
    #[serde(deserialize_with = "number")]
    pub errors: i64,
    /// UDP receiver: errors in the omitted seconds (3.13+).
    #[serde(
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub omitted_errors: Option<i64>,
    /// UDP: datagrams sent (sender) or the highest sequence number seen (receiver).
    #[serde(deserialize_with = "number")]
    pub packets: i64,
    /// UDP: packets in the omitted seconds (3.13+).
    #[serde(
        default,
        deserialize_with = "opt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub omitted_packets: Option<i64>,
    /// Seconds from the stream start to the start of counting (0).
    #[serde(default)]
    pub start_time: f64,
    /// Seconds from the stream start (after the omitted ones) to the end.
    #[serde(default)]
    pub end_time: f64,
}

/// What one end tells the other after `EXCHANGE_RESULTS`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Process CPU over the test, % of one core (user + system).
    pub cpu_util_total: f64,
    /// User share.
    pub cpu_util_user: f64,
    /// System share.
    pub cpu_util_system: f64,
    /// 1 when this end sent TCP and can count retransmissions, 0 when it cannot, -1 when it
    /// only received.
    #[serde(deserialize_with = "number")]
    pub sender_has_retransmits: i64,
    /// Congestion control this end used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// The streams.
    pub streams: Vec<StreamResult>,
    /// The server's text output (`--get-server-output` against a server without `-J`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
}

/// Parses a JSON block into `T`.
pub fn parse_json<T: for<'de> Deserialize<'de>>(block: &[u8]) -> Result<T, Iperf3Error> {
    serde_json::from_slice(block).map_err(|e| Iperf3Error::BadJson(e.to_string()))
}

/// iperf3's stream id of the `index`-th stream of a test (0-based): 1, 3, 4, 5, …
/// (`iperf_add_stream` skips 2 and keeps it for compatibility).
pub fn stream_id(index: u32) -> i64 {
    if index == 0 { 1 } else { index as i64 + 2 }
}

/// The 0-based index of an iperf3 stream id, `None` for ids iperf3 never gives.
pub fn stream_index(id: i64) -> Option<u32> {
    match id {
        1 => Some(0),
        i if i >= 3 => u32::try_from(i - 2).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_unknown_bytes_are_errors() {
        for b in 0..=255u8 {
            match State::from_byte(b) {
                Ok(s) => assert_eq!(s.byte(), b),
                Err(e) => assert_eq!(e, Iperf3Error::BadState(b)),
            }
        }
        assert_eq!(State::from_byte(9), Ok(State::ParamExchange));
        assert_eq!(State::from_byte(0xff), Ok(State::AccessDenied));
        assert_eq!(State::from_byte(0xfe), Ok(State::ServerError));
        assert!(State::from_byte(0).is_err());
        assert!(State::from_byte(17).is_err());
    }

    #[test]
    fn cookies_are_recognised() {
        let c = cookie_from([200; COOKIE_LEN]);
        assert_eq!(parse_cookie(&c), Some(c));
        assert!(may_be_cookie(&c[..4]));
        assert!(may_be_cookie(&c));
        assert!(!may_be_cookie(b"NSPF"));
        assert!(!may_be_cookie(b"NSPD"));
        let mut bad = c;
        bad[36] = b'a';
        assert_eq!(parse_cookie(&bad), None);
        bad = c;
        bad[3] = b'A';
        assert_eq!(parse_cookie(&bad), None);
        assert_eq!(parse_cookie(&c[..36]), None);
    }

    #[test]
    fn udp_connect_reply_in_any_order() {
        assert!(is_udp_connect_reply(*b"6789") || is_udp_connect_reply(*b"9876"));
        assert!(is_udp_connect_reply(UDP_CONNECT_REPLY.to_ne_bytes()));
        assert!(is_udp_connect_reply(LEGACY_UDP_CONNECT_REPLY.to_ne_bytes()));
        assert!(!is_udp_connect_reply([0, 0, 0, 0]));
    }

    /// The parameters exactly as iperf3 3.12 sends them for `-u -b 2M -P 2 -R -t 3`.
    #[test]
    fn parses_iperf3_parameters() {
        let text = br#"{"udp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":2,"reverse":true,"len":1448,"bandwidth":2000000,"pacing_timer":1000,"client_version":"3.12"}"#;
        let p: Params = parse_json(text).unwrap();
        assert!(p.udp && !p.tcp && p.reverse && !p.bidirectional);
        assert_eq!(
            (p.time, p.parallel, p.len, p.bandwidth),
            (3, 2, Some(1448), Some(2_000_000))
        );
        // cJSON prints large numbers as doubles.
        let p: Params = parse_json(br#"{"tcp":true,"num":1.2e+10,"time":10}"#).unwrap();
        assert_eq!(p.num, 12_000_000_000);
        assert!(parse_json::<Params>(b"{\"time\":\"x\"}").is_err());
        assert!(parse_json::<Params>(b"null").is_err());
    }

    #[test]
    fn parses_iperf3_results() {
        let text = br#"{"cpu_util_total":1.5,"cpu_util_user":0.25,"cpu_util_system":1.25,"sender_has_retransmits":-1,"congestion_used":"cubic","streams":[{"id":1,"bytes":27164672000,"retransmits":-1,"jitter":0,"errors":0,"omitted_errors":0,"packets":0,"omitted_packets":0,"start_time":0,"end_time":10.000068}]}"#;
        let r: Results = parse_json(text).unwrap();
        assert_eq!(r.streams[0].bytes, 27_164_672_000);
        assert_eq!(r.sender_has_retransmits, -1);
        // 3.9 sends no omitted_* keys.
        let r: Results = parse_json(br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":1,"streams":[{"id":3,"bytes":5,"retransmits":2,"jitter":0,"errors":0,"packets":0}]}"#).unwrap();
        assert_eq!(stream_index(r.streams[0].id), Some(1));
        // Missing required keys are errors, as in iperf3's get_results.
        assert!(parse_json::<Results>(br#"{"cpu_util_total":1,"streams":[]}"#).is_err());
    }

    #[test]
    fn json_blocks_round_trip_in_pieces() {
        let r = Results {
            streams: vec![StreamResult {
                id: 1,
                bytes: 99,
                ..Default::default()
            }],
            ..Default::default()
        };
        let wire = json_block(&r);
        let mut buf = Vec::new();
        let mut rd = JsonReader::default();
        let mut got = None;
        for b in &wire {
            buf.push(*b);
            if let Some(block) = rd.take(&mut buf).unwrap() {
                got = Some(parse_json::<Results>(&block).unwrap());
            }
        }
        assert_eq!(got, Some(r));
        assert!(buf.is_empty());
        let mut huge = (MAX_JSON as u32 + 1).to_be_bytes().to_vec();
        assert!(matches!(
            JsonReader::default().take(&mut huge),
            Err(Iperf3Error::TooLong(_))
        ));
    }

    #[test]
    fn stream_ids_skip_two() {
        assert_eq!((0..4).map(stream_id).collect::<Vec<_>>(), [1, 3, 4, 5]);
        for i in 0..100 {
            assert_eq!(stream_index(stream_id(i)), Some(i));
        }
        assert_eq!(stream_index(2), None);
        assert_eq!(stream_index(0), None);
        assert_eq!(stream_index(-5), None);
    }

    #[test]
    fn error_numbers_are_named() {
        assert!(error_text(ErrorCode::NUM_STREAMS, 0).contains("parallel streams"));
        assert!(error_text(9999, 0).contains("9999"));
        assert!(error_text(ErrorCode::STREAM_LISTEN, libc::EADDRINUSE).contains("in use"));
    }
}
