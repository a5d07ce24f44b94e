//! Both ends of an iperf3 control session as pure state machines: peer bytes and the time in,
//! bytes to send and events out. The sockets around them are in `client.rs` (nsperf against
//! an iperf3 server) and `server/iperf3.rs` (nsperf serving an iperf3 client), both over `ctrl.rs`.
//!
//! ```text
//! client                                  server
//! cookie (37 bytes)              ->
//!                                <-       PARAM_EXCHANGE
//! {params} (4-byte length + JSON) ->
//!                                <-       CREATE_STREAMS   | SERVER_ERROR i_errno errno
//! (data connections: cookie / UDP connect datagram and reply)
//!                                <-       TEST_START, TEST_RUNNING
//! TEST_END                       ->       (the client's clock or byte count ended the test)
//!                                <-       EXCHANGE_RESULTS
//! {client results}               ->
//!                                <-       {server results}, DISPLAY_RESULTS
//! IPERF_DONE                     ->
//! ```
//!
//! Each waiting state has a time limit; [`ClientSession::check`] and
//! [`ServerSession::check`] turn an expired one into [`Iperf3Error::Timeout`].

use std::time::{Duration, Instant};

use super::wire::{
    COOKIE_LEN, Iperf3Error, JsonReader, Params, Results, State, json_block, parse_json,
};

/// How long a handshake step may take (iperf3 itself waits without a limit).
pub const STEP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the results may take after the test ended.
pub const RESULTS_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the client session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientState {
    AwaitParamExchange,
    AwaitCreateStreams,
    AwaitTestStart,
    AwaitRunning,
    Running,
    AwaitExchange,
    /// Our results must be sent (the shell calls [`ClientSession::send_results`]).
    OwesResults,
    AwaitServerResults,
    AwaitDisplay,
    AwaitErrorCodes,
    Done,
}

/// A waiting state of either end: what it waits for, and for how long it may.
trait Step: Copy {
    /// What the session is doing, for a timeout's message.
    fn waiting(self) -> &'static str;
    /// How long the state may last (`None`: as long as the test).
    fn limit(self) -> Option<Duration>;
}

/// Fails when `state`, entered at `since`, has lasted longer than its limit at `now`: the
/// `check` of both ends.
fn check_limit(state: impl Step, since: Instant, now: Instant) -> Result<(), Iperf3Error> {
    match state.limit() {
        Some(l) if now.saturating_duration_since(since) > l => Err(Iperf3Error::Timeout {
            waiting: state.waiting(),
            secs: l.as_secs(),
        }),
        _ => Ok(()),
    }
}

impl Step for ClientState {
    fn waiting(self) -> &'static str {
        match self {
            ClientState::AwaitParamExchange => "waiting for PARAM_EXCHANGE",
            ClientState::AwaitCreateStreams => "waiting for CREATE_STREAMS",
            ClientState::AwaitTestStart => "waiting for TEST_START",
            ClientState::AwaitRunning => "waiting for TEST_RUNNING",
            ClientState::Running => "running",
            ClientState::AwaitExchange => "waiting for EXCHANGE_RESULTS",
            ClientState::OwesResults => "sending results",
            ClientState::AwaitServerResults => "waiting for the server's results",
            ClientState::AwaitDisplay => "waiting for DISPLAY_RESULTS",
            ClientState::AwaitErrorCodes => "reading the server's error",
            ClientState::Done => "done",
        }
    }

    fn limit(self) -> Option<Duration> {
        match self {
            ClientState::Running | ClientState::OwesResults | ClientState::Done => None,
            ClientState::AwaitExchange
            | ClientState::AwaitServerResults
            | ClientState::AwaitDisplay => Some(RESULTS_TIMEOUT),
            _ => Some(STEP_TIMEOUT),
        }
    }
}

/// What the client shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// Write these bytes to the control connection.
    Send(Vec<u8>),
    /// Open the data connections now (up streams first with `--bidir`).
    CreateStreams,
    /// The server's clock started: start the data threads and this end's clock.
    Start,
    /// The server wants this end's results: call [`ClientSession::send_results`].
    ResultsWanted,
    /// The server's results.
    ServerResults(Box<Results>),
    /// The session is over (after `IPERF_DONE` was sent).
    Done,
}

/// The client end of an iperf3 session (nsperf against an iperf3 server).
#[derive(Debug)]
pub struct ClientSession {
    params: Params,
    state: ClientState,
    since: Instant,
    buf: Vec<u8>,
    json: JsonReader,
}

impl ClientSession {
    /// A session that will ask for `params`; returns it and the bytes to send first (the
    /// cookie).
    pub fn new(params: Params, cookie: [u8; COOKIE_LEN], now: Instant) -> (Self, Vec<u8>) {
        (
            ClientSession {
                params,
                state: ClientState::AwaitParamExchange,
                since: now,
                buf: Vec::new(),
                json: JsonReader::default(),
            },
            cookie.to_vec(),
        )
    }

    fn to(&mut self, s: ClientState, now: Instant) {
        self.state = s;
        self.since = now;
    }

    /// Bytes the shell may read without reading past what the session expects next (at
    /// least 1).
    pub fn wanted(&self) -> usize {
        match self.state {
            ClientState::AwaitServerResults => self.json.wanted(self.buf.len()),
            ClientState::AwaitErrorCodes => 8usize.saturating_sub(self.buf.len()).max(1),
            _ => 1,
        }
    }

    /// Whether the session is over.
    pub fn is_done(&self) -> bool {
        self.state == ClientState::Done
    }

    /// Fails when the current step has waited longer than its limit at `now`.
    pub fn check(&self, now: Instant) -> Result<(), Iperf3Error> {
        check_limit(self.state, self.since, now)
    }

    /// Feeds bytes from the server.
    pub fn on_bytes(
        &mut self,
        bytes: &[u8],
        now: Instant,
    ) -> Result<Vec<ClientEvent>, Iperf3Error> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        // Bounded: every turn consumes at least one byte or returns.
        for _ in 0..self.buf.len() + 1 {
            match self.state {
                ClientState::AwaitServerResults => match self.json.take(&mut self.buf)? {
                    Some(block) => {
                        let r: Results = parse_json(&block)?;
                        out.push(ClientEvent::ServerResults(Box::new(r)));
                        self.to(ClientState::AwaitDisplay, now);
                        continue;
                    }
                    None => return Ok(out),
                },
                ClientState::AwaitErrorCodes => {
                    if self.buf.len() < 8 {
                        return Ok(out);
                    }
                    let code =
                        i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
                    let errno =
                        i32::from_be_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]]);
                    self.to(ClientState::Done, now);
                    return Err(Iperf3Error::Server { code, errno });
                }
                ClientState::Done => {
                    self.buf.clear();
                    return Ok(out);
                }
                _ => {}
            }
            if self.buf.is_empty() {
                return Ok(out);
            }
            let b = self.buf.remove(0);
            let s = State::from_byte(b)?;
            self.on_state(s, now, &mut out)?;
        }
        Ok(out)
    }

    fn on_state(
        &mut self,
        s: State,
        now: Instant,
        out: &mut Vec<ClientEvent>,
    ) -> Result<(), Iperf3Error> {
        match (self.state, s) {
            (_, State::AccessDenied) => {
                self.to(ClientState::Done, now);
                Err(Iperf3Error::Busy)
            }
            (_, State::ServerError) => {
                self.to(ClientState::AwaitErrorCodes, now);
                Ok(())
            }
            (_, State::ServerTerminate) => {
                self.to(ClientState::Done, now);
                Err(Iperf3Error::ServerTerminated)
            }
            (ClientState::AwaitParamExchange, State::ParamExchange) => {
                out.push(ClientEvent::Send(json_block(&self.params)));
                self.to(ClientState::AwaitCreateStreams, now);
                Ok(())
            }
            (ClientState::AwaitCreateStreams, State::CreateStreams) => {
                out.push(ClientEvent::CreateStreams);
                self.to(ClientState::AwaitTestStart, now);
                Ok(())
            }
            (ClientState::AwaitTestStart, State::TestStart) => {
                self.to(ClientState::AwaitRunning, now);
                Ok(())
            }
            (ClientState::AwaitRunning, State::TestRunning) => {
                out.push(ClientEvent::Start);
                self.to(ClientState::Running, now);
                Ok(())
            }
            (ClientState::AwaitExchange, State::ExchangeResults) => {
                out.push(ClientEvent::ResultsWanted);
                self.to(ClientState::OwesResults, now);
                Ok(())
            }
            (ClientState::AwaitDisplay, State::DisplayResults) => {
                out.push(ClientEvent::Send(vec![State::IperfDone.byte()]));
                out.push(ClientEvent::Done);
                self.to(ClientState::Done, now);
                Ok(())
            }
            (st, got) => Err(Iperf3Error::Unexpected {
                got,
                waiting: st.waiting(),
            }),
        }
    }

    /// The test is over on this end (time, bytes): the `TEST_END` to send. Only while
    /// running; `None` otherwise.
    pub fn end(&mut self, now: Instant) -> Option<Vec<u8>> {
        (self.state == ClientState::Running).then(|| {
            self.to(ClientState::AwaitExchange, now);
            vec![State::TestEnd.byte()]
        })
    }

    /// Ctrl-C: the `CLIENT_TERMINATE` to send; the session is over.
    pub fn terminate(&mut self, now: Instant) -> Vec<u8> {
        self.to(ClientState::Done, now);
        vec![State::ClientTerminate.byte()]
    }

    /// This end's results, after [`ClientEvent::ResultsWanted`]: the bytes to send.
    pub fn send_results(&mut self, results: &Results, now: Instant) -> Vec<u8> {
        self.to(ClientState::AwaitServerResults, now);
        json_block(results)
    }
}

/// Where the server session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    AwaitParams,
    /// The shell sets the test up ([`ServerSession::create_streams`] or
    /// [`ServerSession::refuse`]) and collects the data connections.
    Preparing,
    Running,
    /// The shell stops the data and calls [`ServerSession::exchange`].
    Stopping,
    AwaitClientResults,
    /// The shell sends its results ([`ServerSession::send_results`]).
    OwesResults,
    AwaitDone,
    Done,
}

impl Step for ServerState {
    fn waiting(self) -> &'static str {
        match self {
            ServerState::AwaitParams => "waiting for the client's parameters",
            ServerState::Preparing => "preparing the test",
            ServerState::Running => "running",
            ServerState::Stopping => "stopping",
            ServerState::AwaitClientResults => "waiting for the client's results",
            ServerState::OwesResults => "sending results",
            ServerState::AwaitDone => "waiting for IPERF_DONE",
            ServerState::Done => "done",
        }
    }

    fn limit(self) -> Option<Duration> {
        match self {
            ServerState::AwaitParams => Some(STEP_TIMEOUT),
            ServerState::AwaitClientResults | ServerState::AwaitDone => Some(RESULTS_TIMEOUT),
            _ => None,
        }
    }
}

/// What the server shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// The client's parameters: set the test up.
    Prepare(Box<Params>),
    /// The client ended the test (`TEST_END`): stop sending, let the receivers drain, then
    /// call [`ServerSession::exchange`].
    Stop,
    /// The client's results: reply with [`ServerSession::send_results`].
    ClientResults(Box<Results>),
    /// The session is over.
    Done,
}

/// The server end of an iperf3 session (nsperf serving an iperf3 client), from the moment the
/// control connection's cookie was read.
#[derive(Debug)]
pub struct ServerSession {
    state: ServerState,
    since: Instant,
    buf: Vec<u8>,
    json: JsonReader,
}

impl ServerSession {
    /// A session for a client whose cookie was read; returns it and the `PARAM_EXCHANGE` to
    /// send.
    pub fn new(now: Instant) -> (Self, Vec<u8>) {
        (
            ServerSession {
                state: ServerState::AwaitParams,
                since: now,
                buf: Vec::new(),
                json: JsonReader::default(),
            },
            vec![State::ParamExchange.byte()],
        )
    }

    fn to(&mut self, s: ServerState, now: Instant) {
        self.state = s;
        self.since = now;
    }

    /// Bytes the shell may read without reading past the current step (at least 1).
    pub fn wanted(&self) -> usize {
        match self.state {
            ServerState::AwaitParams | ServerState::AwaitClientResults => {
                self.json.wanted(self.buf.len())
            }
            _ => 1,
        }
    }

    /// Whether the session is over.
    pub fn is_done(&self) -> bool {
        self.state == ServerState::Done
    }

    /// Fails when the current step has waited longer than its limit at `now`.
    pub fn check(&self, now: Instant) -> Result<(), Iperf3Error> {
        check_limit(self.state, self.since, now)
    }

    /// Feeds bytes from the client.
    pub fn on_bytes(
        &mut self,
        bytes: &[u8],
        now: Instant,
    ) -> Result<Vec<ServerEvent>, Iperf3Error> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        for _ in 0..self.buf.len() + 1 {
            match self.state {
                ServerState::AwaitParams | ServerState::AwaitClientResults => {
                    let Some(block) = self.json.take(&mut self.buf)? else {
                        return Ok(out);
                    };
                    if self.state == ServerState::AwaitParams {
                        let p: Params = parse_json(&block)?;
                        out.push(ServerEvent::Prepare(Box::new(p)));
                        self.to(ServerState::Preparing, now);
                    } else {
                        let r: Results = parse_json(&block)?;
                        out.push(ServerEvent::ClientResults(Box::new(r)));
                        self.to(ServerState::OwesResults, now);
                    }
                    continue;
                }
                ServerState::Done => {
                    self.buf.clear();
                    return Ok(out);
                }
                _ => {}
            }
            if self.buf.is_empty() {
                return Ok(out);
            }
            let b = self.buf.remove(0);
            let s = State::from_byte(b)?;
            match (self.state, s) {
                (_, State::ClientTerminate) => {
                    self.to(ServerState::Done, now);
                    return Err(Iperf3Error::ClientTerminated);
                }
                (ServerState::Running, State::TestEnd) => {
                    out.push(ServerEvent::Stop);
                    self.to(ServerState::Stopping, now);
                }
                (ServerState::Running | ServerState::Preparing, State::TestStart) => {}
                (ServerState::AwaitDone, State::IperfDone) => {
                    out.push(ServerEvent::Done);
                    self.to(ServerState::Done, now);
                }
                (st, got) => {
                    return Err(Iperf3Error::Unexpected {
                        got,
                        waiting: st.waiting(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// The test is set up: the `CREATE_STREAMS` to send.
    pub fn create_streams(&mut self, now: Instant) -> Vec<u8> {
        self.since = now;
        vec![State::CreateStreams.byte()]
    }

    /// The test cannot run: `SERVER_ERROR` with iperf3's error number and an `errno`; the
    /// session is over.
    pub fn refuse(&mut self, code: i32, errno: i32, now: Instant) -> Vec<u8> {
        self.to(ServerState::Done, now);
        let mut v = vec![State::ServerError.byte()];
        v.extend_from_slice(&code.to_be_bytes());
        v.extend_from_slice(&errno.to_be_bytes());
        v
    }

    /// The server is busy (`--max-clients`): `ACCESS_DENIED`; the session is over.
    pub fn deny(&mut self, now: Instant) -> Vec<u8> {
        self.to(ServerState::Done, now);
        vec![State::AccessDenied.byte()]
    }

    /// Every data connection is in: `TEST_START` and `TEST_RUNNING` to send.
    pub fn started(&mut self, now: Instant) -> Vec<u8> {
        self.to(ServerState::Running, now);
        vec![State::TestStart.byte(), State::TestRunning.byte()]
    }

    /// The data stopped after [`ServerEvent::Stop`]: the `EXCHANGE_RESULTS` to send.
    pub fn exchange(&mut self, now: Instant) -> Vec<u8> {
        self.to(ServerState::AwaitClientResults, now);
        vec![State::ExchangeResults.byte()]
    }

    /// This end's results and `DISPLAY_RESULTS`, after [`ServerEvent::ClientResults`].
    pub fn send_results(&mut self, results: &Results, now: Instant) -> Vec<u8> {
        self.to(ServerState::AwaitDone, now);
        let mut v = json_block(results);
        v.push(State::DisplayResults.byte());
        v
    }

    /// The server stops the test (Ctrl-C): `SERVER_TERMINATE`; the session is over.
    pub fn terminate(&mut self, now: Instant) -> Vec<u8> {
        self.to(ServerState::Done, now);
        vec![State::ServerTerminate.byte()]
    }
}

/// Feeds arbitrary bytes to both session machines in every state they can reach (the body of
/// the `net_iperf3` fuzz target, also run by unit tests). Never panics.
pub fn fuzz(data: &[u8]) {
    let now = Instant::now();
    let cut = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    // The client, driven to each of its waiting states by a well-behaved server first.
    let script: [&[u8]; 5] = [&[], &[9], &[9, 10], &[9, 10, 1, 2], &[9, 10, 1, 2]];
    for (i, pre) in script.iter().enumerate() {
        let (mut c, _) = ClientSession::new(Params::default(), [b'a'; COOKIE_LEN], now);
        let _ = c.on_bytes(pre, now);
        if i == 4 {
            let _ = c.end(now);
            let _ = c.on_bytes(&[13], now);
            let _ = c.send_results(&Results::default(), now);
        }
        let _ = c.wanted();
        let _ = c.on_bytes(&data[..cut], now);
        let _ = c.on_bytes(&data[cut..], now);
        let _ = c.check(now + Duration::from_secs(100));
    }
    // The server, awaiting parameters, then running, then awaiting results.
    for stage in 0..3 {
        let (mut s, _) = ServerSession::new(now);
        if stage > 0 {
            let _ = s.on_bytes(&json_block(&Params::default()), now);
            let _ = s.create_streams(now);
            let _ = s.started(now);
        }
        if stage > 1 {
            let _ = s.on_bytes(&[4], now);
            let _ = s.exchange(now);
        }
        let _ = s.wanted();
        let _ = s.on_bytes(&data[..cut], now);
        let _ = s.on_bytes(&data[cut..], now);
        let _ = s.check(now + Duration::from_secs(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iperf3::wire::{ErrorCode, StreamResult};

    fn results(bytes: i64) -> Results {
        Results {
            cpu_util_total: 3.0,
            sender_has_retransmits: 1,
            streams: vec![StreamResult {
                id: 1,
                bytes,
                retransmits: 0,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// Runs a whole session in memory, the bytes cut into `chunk`-sized pieces both ways, as
    /// a socket may deliver them. Returns (server's view of the client's results, client's
    /// view of the server's).
    fn converse(chunk: usize) -> (Results, Results) {
        let t0 = Instant::now();
        let params = Params {
            tcp: true,
            time: 2,
            parallel: 1,
            ..Default::default()
        };
        let (mut c, cookie) = ClientSession::new(params.clone(), [b'q'; COOKIE_LEN], t0);
        assert_eq!(cookie.len(), COOKIE_LEN);
        let (mut s, mut to_client) = ServerSession::new(t0);
        let mut to_server: Vec<u8> = Vec::new();
        let (mut got_client, mut got_server) = (None, None);
        let mut ended = false;
        for round in 0..64 {
            let now = t0 + Duration::from_millis(round);
            for piece in std::mem::take(&mut to_client).chunks(chunk) {
                for e in c.on_bytes(piece, now).unwrap() {
                    match e {
                        ClientEvent::Send(b) => to_server.extend(b),
                        ClientEvent::CreateStreams => {}
                        ClientEvent::Start => {}
                        ClientEvent::ResultsWanted => {
                            to_server.extend(c.send_results(&results(100), now))
                        }
                        ClientEvent::ServerResults(r) => got_server = Some(*r),
                        ClientEvent::Done => {}
                    }
                }
            }
            if c.is_done() && s.is_done() {
                return (got_client.unwrap(), got_server.unwrap());
            }
            if !ended && let Some(b) = c.end(now) {
                ended = true;
                to_server.extend(b);
            }
            for piece in std::mem::take(&mut to_server).chunks(chunk) {
                for e in s.on_bytes(piece, now).unwrap() {
                    match e {
                        ServerEvent::Prepare(p) => {
                            assert_eq!(*p, params);
                            to_client.extend(s.create_streams(now));
                            to_client.extend(s.started(now));
                        }
                        ServerEvent::Stop => to_client.extend(s.exchange(now)),
                        ServerEvent::ClientResults(r) => {
                            got_client = Some(*r);
                            to_client.extend(s.send_results(&results(99), now));
                        }
                        ServerEvent::Done => {}
                    }
                }
            }
        }
        panic!("session did not end");
    }

    #[test]
    fn whole_session_in_any_chunking() {
        for chunk in [1, 2, 3, 7, 4096] {
            let (client, server) = converse(chunk);
            assert_eq!(client.streams[0].bytes, 100);
            assert_eq!(server.streams[0].bytes, 99);
        }
    }

    #[test]
    fn server_error_carries_both_numbers() {
        let t0 = Instant::now();
        let (mut c, _) = ClientSession::new(Params::default(), [b'a'; COOKIE_LEN], t0);
        let (mut s, pe) = ServerSession::new(t0);
        c.on_bytes(&pe, t0).unwrap();
        let wire = s.refuse(ErrorCode::NUM_STREAMS, 0, t0);
        // The error numbers may arrive byte by byte.
        let (head, tail) = wire.split_at(3);
        assert!(c.on_bytes(head, t0).unwrap().is_empty());
        let e = c.on_bytes(tail, t0).unwrap_err();
        assert_eq!(
            e,
            Iperf3Error::Server {
                code: ErrorCode::NUM_STREAMS,
                errno: 0
            }
        );
        assert!(e.to_string().contains("parallel streams"));
    }

    #[test]
    fn busy_terminate_and_out_of_order_are_errors() {
        let t0 = Instant::now();
        let (mut c, _) = ClientSession::new(Params::default(), [b'a'; COOKIE_LEN], t0);
        assert_eq!(c.on_bytes(&[0xff], t0), Err(Iperf3Error::Busy));
        let (mut c, _) = ClientSession::new(Params::default(), [b'a'; COOKIE_LEN], t0);
        assert!(matches!(
            c.on_bytes(&[1], t0),
            Err(Iperf3Error::Unexpected { .. })
        ));
        let (mut c, _) = ClientSession::new(Params::default(), [b'a'; COOKIE_LEN], t0);
        assert_eq!(
            c.on_bytes(&[9, 10, 1, 2, 11], t0).unwrap_err(),
            Iperf3Error::ServerTerminated
        );
        assert!(c.end(t0).is_none());
        let (mut s, _) = ServerSession::new(t0);
        s.on_bytes(&json_block(&Params::default()), t0).unwrap();
        s.started(t0);
        assert_eq!(s.on_bytes(&[12], t0), Err(Iperf3Error::ClientTerminated));
        let (mut s, _) = ServerSession::new(t0);
        s.on_bytes(&json_block(&Params::default()), t0).unwrap();
        s.started(t0);
        assert!(s.on_bytes(&[13], t0).is_err());
    }

    #[test]
    fn steps_time_out_with_time_as_input() {
        let t0 = Instant::now();
        let (c, _) = ClientSession::new(Params::default(), [b'a'; COOKIE_LEN], t0);
        assert!(c.check(t0 + STEP_TIMEOUT).is_ok());
        let e = c
            .check(t0 + STEP_TIMEOUT + Duration::from_millis(1))
            .unwrap_err();
        assert!(e.to_string().contains("PARAM_EXCHANGE"), "{e}");
        let (mut s, _) = ServerSession::new(t0);
        assert!(s.check(t0 + STEP_TIMEOUT * 2).is_err());
        s.on_bytes(&json_block(&Params::default()), t0).unwrap();
        s.started(t0);
        // A running test has no limit here (its length is the client's to choose).
        assert!(s.check(t0 + Duration::from_secs(3600)).is_ok());
    }

    #[test]
    fn reader_never_reads_past_the_step() {
        let t0 = Instant::now();
        let (mut s, _) = ServerSession::new(t0);
        assert_eq!(s.wanted(), 4);
        s.on_bytes(&[0, 0, 0, 10], t0).unwrap();
        assert_eq!(s.wanted(), 10);
    }

    /// Random and mutated input never panics either machine (the fuzz target's body).
    #[test]
    fn machines_survive_random_bytes() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut valid = json_block(&results(5));
        valid.extend([2, 4, 13, 14, 16, 0xfe, 0, 0, 0, 6]);
        for round in 0..5_000 {
            let input: Vec<u8> = if round % 2 == 0 {
                (0..next() % 200).map(|_| next() as u8).collect()
            } else {
                let mut v = valid.clone();
                for _ in 0..1 + next() % 3 {
                    let i = next() as usize % v.len();
                    v[i] = next() as u8;
                }
                v
            };
            fuzz(&input);
        }
    }
}
