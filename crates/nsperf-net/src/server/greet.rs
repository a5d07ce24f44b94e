//! The accept loop's pure parts: a connection's greeting read without over-reading, the
//! table of connections waiting to greet, the rate limit of repeated log lines and the
//! back-off after failed accepts (time is an input, so they are tested without sleeping).

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::MAX_BACKOFF;
use crate::iperf3::wire::{COOKIE_LEN, may_be_cookie, parse_cookie};
use crate::proto::DataHello;
use crate::proto::frame::{DATA_MAGIC, MAGIC};

/// One kind of repeated log line, emitted at most once per period with a count of the rest
/// (time is an input, so it is tested without sleeping).
#[derive(Debug)]
pub(super) struct RateLimited {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimited {
    pub(super) fn new(every: Duration) -> Self {
        RateLimited {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// The line to log for an occurrence at `now`, or `None` when it is counted for later.
    pub(super) fn line(&mut self, now: Instant, text: &str) -> Option<String> {
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < self.every)
        {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        let n = std::mem::take(&mut self.suppressed);
        Some(if n > 0 {
            format!("{text} (and {n} more like it in the last {:?})", self.every)
        } else {
            text.to_string()
        })
    }
}

/// Growing pause after failed accepts: 10 ms doubling to [`MAX_BACKOFF`], reset by a success.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    delay: Duration,
    pub(super) until: Option<Instant>,
}

impl Backoff {
    pub(super) fn failed(&mut self, now: Instant) -> Duration {
        self.delay = (self.delay * 2).clamp(Duration::from_millis(10), MAX_BACKOFF);
        self.until = Some(now + self.delay);
        self.delay
    }

    pub(super) fn succeeded(&mut self) {
        self.delay = Duration::ZERO;
    }
}

/// A connection waiting for its first bytes.
pub(super) struct Greeting {
    pub(super) sock: TcpStream,
    pub(super) peer: SocketAddr,
    /// The first bytes: an nsperf magic or data hello, or an iperf3 cookie (the longest).
    pub(super) head: [u8; COOKIE_LEN],
    pub(super) got: usize,
    pub(super) deadline: Instant,
}

/// What a greeting turned out to be.
pub(super) enum Greeted {
    More,
    Control,
    Data(DataHello),
    /// An iperf3 client's cookie: its control connection, or a data connection of its test.
    Iperf3([u8; COOKIE_LEN]),
    Drop(String),
}

impl Greeting {
    /// Reads what has arrived, never past the greeting (a control connection's following
    /// bytes are left for its session).
    pub(super) fn read(&mut self) -> Greeted {
        use std::io::Read;
        let want = if self.got >= 4 && self.head[..4] == DATA_MAGIC {
            DataHello::LEN
        } else if self.got >= 1 && may_be_cookie(&self.head[..self.got]) {
            COOKIE_LEN
        } else {
            4
        };
        match (&self.sock).read(&mut self.head[self.got..want]) {
            Ok(0) => return Greeted::Drop("closed before its greeting".into()),
            Ok(n) => self.got += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Greeted::More,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Greeted::More,
            Err(e) => return Greeted::Drop(format!("no greeting ({e})")),
        }
        let head = &self.head[..self.got];
        if may_be_cookie(head) {
            if self.got < COOKIE_LEN {
                return Greeted::More;
            }
            return match parse_cookie(head) {
                Some(c) => Greeted::Iperf3(c),
                None => Greeted::Drop("malformed iperf3 cookie".into()),
            };
        }
        match (self.got, head.get(..4)) {
            (n, _) if n < 4 => Greeted::More,
            (4, Some(m)) if m == MAGIC => Greeted::Control,
            (_, Some(m)) if m == DATA_MAGIC => {
                if self.got < DataHello::LEN {
                    Greeted::More
                } else {
                    match DataHello::decode(
                        &self.head[..DataHello::LEN]
                            .try_into()
                            .unwrap_or([0; DataHello::LEN]),
                    ) {
                        Some(h) => Greeted::Data(h),
                        None => Greeted::Drop("malformed data hello".into()),
                    }
                }
            }
            (_, m) => Greeted::Drop(format!(
                "not an nsperf client (first bytes {:02x?})",
                m.unwrap_or_default()
            )),
        }
    }
}

/// The greeter's table of connections waiting for their first bytes: slots reused, the
/// poller token is the slot index.
#[derive(Default)]
pub(super) struct Greetings {
    pub(super) slots: Vec<Option<Greeting>>,
    free: Vec<usize>,
    pub(super) live: usize,
}

impl Greetings {
    pub(super) fn insert(&mut self, g: Greeting) -> usize {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(g);
                i
            }
            None => {
                self.slots.push(Some(g));
                self.slots.len() - 1
            }
        }
    }

    pub(super) fn remove(&mut self, i: usize) -> Option<Greeting> {
        let g = self.slots.get_mut(i)?.take()?;
        self.free.push(i);
        self.live -= 1;
        Some(g)
    }

    pub(super) fn expired(&self, now: Instant) -> Vec<usize> {
        (self.slots.iter().enumerate())
            .filter_map(|(i, g)| g.as_ref().filter(|g| now >= g.deadline).map(|_| i))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_lines_are_rate_limited_and_counted() {
        let t0 = Instant::now();
        let mut r = RateLimited::new(Duration::from_secs(10));
        assert_eq!(r.line(t0, "x").as_deref(), Some("x"));
        for i in 1..=1000 {
            assert_eq!(r.line(t0 + Duration::from_millis(i), "x"), None);
        }
        let l = r.line(t0 + Duration::from_secs(10), "x").unwrap();
        assert!(l.starts_with("x (and 1000 more like it"), "{l}");
        assert_eq!(r.line(t0 + Duration::from_secs(11), "x"), None);
    }

    #[test]
    fn backoff_doubles_to_a_second_and_resets() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        assert_eq!(b.failed(t0), Duration::from_millis(10));
        assert_eq!(b.failed(t0), Duration::from_millis(20));
        for _ in 0..20 {
            b.failed(t0);
        }
        assert_eq!(b.failed(t0), MAX_BACKOFF);
        b.succeeded();
        assert_eq!(b.failed(t0), Duration::from_millis(10));
    }

    fn greeting(bytes: &[u8]) -> (Greeting, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        std::io::Write::write_all(&mut c, bytes).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        s.set_nonblocking(true).unwrap();
        let g = Greeting {
            sock: s,
            peer,
            head: [0; COOKIE_LEN],
            got: 0,
            deadline: Instant::now(),
        };
        (g, c)
    }

    #[test]
    fn greetings_are_told_apart_without_reading_past_them() {
        // A control greeting followed by a frame: only the magic is taken.
        let (mut g, _c) = greeting(b"NSPF\x00\x01rest-of-frame");
        assert!(matches!(g.read(), Greeted::Control));
        assert_eq!(g.got, 4);
        // A data hello, in two reads.
        let hello = DataHello {
            cookie: 77,
            stream: 3,
        }
        .encode();
        let (mut g, _c) = greeting(&hello);
        let mut out = g.read();
        if matches!(out, Greeted::More) {
            out = g.read();
        }
        assert!(matches!(out, Greeted::Data(h) if h.cookie == 77 && h.stream == 3));
        // Garbage, and a peer that closes.
        // An iperf3 cookie, whole.
        let cookie = crate::iperf3::wire::cookie_from([7; COOKIE_LEN]);
        let (mut g, _c) = greeting(&cookie);
        let mut out = g.read();
        for _ in 0..3 {
            if matches!(out, Greeted::More) {
                out = g.read();
            }
        }
        assert!(matches!(out, Greeted::Iperf3(c) if c == cookie));
        let (mut g, _c) = greeting(b"GET / HTTP/1.0");
        assert!(matches!(g.read(), Greeted::Drop(m) if m.contains("not an nsperf client")));
        let (mut g, c) = greeting(b"");
        assert!(matches!(g.read(), Greeted::More));
        drop(c);
        std::thread::sleep(Duration::from_millis(20));
        assert!(matches!(g.read(), Greeted::Drop(_)));
    }
}
