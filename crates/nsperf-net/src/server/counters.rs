//! The server's own account of what it served: per test and in total, so that the target's
//! figures can be stored beside the sum of its clients' (`nsperf run` with hosts compares
//! the two). Counted from the server's stream meters when each test ends: a test's bytes are
//! the payload this end received and sent, as its own report to the client says. Running
//! tests publish their figures once per interval too ([`LiveTest`]), for a metrics endpoint.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::results::SideResults;

/// Per-test records kept (the most recent); the totals count every test.
pub const MAX_TEST_RECORDS: usize = 4096;

/// One test as the server saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedTest {
    /// The client's control connection.
    pub peer: String,
    /// When the test ended, nanoseconds since the Unix epoch.
    pub ended_unix_ns: u64,
    /// Payload bytes the server received.
    pub received_bytes: u64,
    /// Payload bytes the server sent.
    pub sent_bytes: u64,
    /// Data streams (connections or UDP sockets).
    pub streams: u32,
    /// Why the test did not end as planned, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTotals {
    /// Control connections that reached a test request.
    pub tests_started: u64,
    /// Tests that ended with results sent to the client.
    pub tests_completed: u64,
    /// Tests that ended otherwise (client lost, server limits, errors).
    pub tests_failed: u64,
    /// Data streams of all tests.
    pub streams: u64,
    /// Payload bytes received over all tests.
    pub received_bytes: u64,
    /// Payload bytes sent over all tests.
    pub sent_bytes: u64,
    /// CPU time of the server process while it served (user + system), ns.
    pub cpu_ns: u64,
    /// How long it served, ns.
    pub serving_ns: u64,
    /// The most recent tests, oldest first (at most [`MAX_TEST_RECORDS`]).
    pub tests: Vec<ServedTest>,
    /// Tests no longer listed in `tests` (counted in the totals).
    pub tests_not_listed: u64,
}

/// A running test's figures, as of its last interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveTest {
    /// The test's number on this server (1 for the first test it admitted).
    pub id: u64,
    /// The client's control connection.
    pub peer: String,
    /// Data streams.
    pub streams: u32,
    /// Payload bytes received so far.
    pub received_bytes: u64,
    /// Payload bytes sent so far.
    pub sent_bytes: u64,
    /// Length of the last interval, seconds (0 before the first).
    pub interval_s: f64,
    /// Payload bytes received in the last interval.
    pub interval_received_bytes: u64,
    /// Payload bytes sent in the last interval.
    pub interval_sent_bytes: u64,
}

/// The totals and the running tests, read together (so no test is counted twice or lost
/// between the two).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveTotals {
    /// The totals of the tests that ended (`tests` is left empty).
    pub ended: ServerTotals,
    /// The tests running now, by number.
    pub running: Vec<LiveTest>,
}

/// Counters shared by the server's threads; read with [`ServerCounters::snapshot`].
#[derive(Debug, Default)]
pub struct ServerCounters {
    /// Running tests by number; also guards the byte totals' updates (see [`Self::live`]).
    live: Mutex<BTreeMap<u64, LiveTest>>,
    started: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    streams: AtomicU64,
    received: AtomicU64,
    sent: AtomicU64,
    dropped_records: AtomicU64,
    tests: Mutex<VecDeque<ServedTest>>,
}

impl ServerCounters {
    /// A test was admitted: its number.
    pub(super) fn test_started(&self, peer: SocketAddr) -> u64 {
        let id = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        if let Ok(mut live) = self.live.lock() {
            live.insert(
                id,
                LiveTest {
                    id,
                    peer: peer.to_string(),
                    ..LiveTest::default()
                },
            );
        }
        id
    }

    /// Test `id` closed an interval of `length_s` in which its streams moved `deltas` bytes
    /// (`sending[i]`: this end sends on stream `i`).
    pub(super) fn test_interval(&self, id: u64, sending: &[bool], deltas: &[u64], length_s: f64) {
        let (mut received, mut sent) = (0u64, 0u64);
        for (&s, &d) in sending.iter().zip(deltas) {
            if s {
                sent += d;
            } else {
                received += d;
            }
        }
        if let Ok(mut live) = self.live.lock()
            && let Some(t) = live.get_mut(&id)
        {
            t.streams = deltas.len() as u32;
            t.received_bytes += received;
            t.sent_bytes += sent;
            t.interval_s = length_s;
            t.interval_received_bytes = received;
            t.interval_sent_bytes = sent;
        }
    }

    /// A test ended after moving what `results` says (this end's streams).
    pub(super) fn test_ended(
        &self,
        id: u64,
        peer: SocketAddr,
        results: &SideResults,
        error: Option<&str>,
    ) {
        let (mut received, mut sent) = (0u64, 0u64);
        for s in &results.streams {
            let bytes = s.samples.last().map(|x| x.bytes).unwrap_or(0);
            if s.sending {
                sent += bytes;
            } else {
                received += bytes;
            }
        }
        self.record(
            id,
            ServedTest {
                peer: peer.to_string(),
                ended_unix_ns: nsperf_core::clock::unix_time_ns(),
                received_bytes: received,
                sent_bytes: sent,
                streams: results.streams.len() as u32,
                error: error.map(str::to_string),
            },
        );
    }

    /// A test ended without results of this end (it failed before any stream ran, or the
    /// client went away: then the bytes its intervals counted are its figures).
    pub(super) fn test_failed(&self, id: u64, peer: SocketAddr, error: &str) {
        self.record(
            id,
            ServedTest {
                peer: peer.to_string(),
                ended_unix_ns: nsperf_core::clock::unix_time_ns(),
                received_bytes: 0,
                sent_bytes: 0,
                streams: 0,
                error: Some(error.to_string()),
            },
        );
    }

    fn record(&self, id: u64, mut t: ServedTest) {
        let counter = if t.error.is_none() {
            &self.completed
        } else {
            &self.failed
        };
        {
            // Under the lock of the running tests, so a reader of both sees the test in
            // exactly one of them; what its intervals counted is never taken back.
            let mut live = self.live.lock().ok();
            if let Some(l) = live.as_mut().and_then(|m| m.remove(&id)) {
                t.received_bytes = t.received_bytes.max(l.received_bytes);
                t.sent_bytes = t.sent_bytes.max(l.sent_bytes);
                t.streams = t.streams.max(l.streams);
            }
            counter.fetch_add(1, Ordering::Relaxed);
            self.streams
                .fetch_add(u64::from(t.streams), Ordering::Relaxed);
            self.received.fetch_add(t.received_bytes, Ordering::Relaxed);
            self.sent.fetch_add(t.sent_bytes, Ordering::Relaxed);
        }
        if let Ok(mut v) = self.tests.lock() {
            if v.len() >= MAX_TEST_RECORDS {
                v.pop_front();
                self.dropped_records.fetch_add(1, Ordering::Relaxed);
            }
            v.push_back(t);
        }
    }

    /// The totals of the ended tests and the figures of the running ones, read together.
    pub fn live(&self) -> LiveTotals {
        let live = self.live.lock();
        let running = live
            .as_ref()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        LiveTotals {
            ended: self.counts(),
            running,
        }
    }

    /// The counters now. `cpu_ns` and `serving_ns` are left for the caller, who knows the
    /// process and how long it served.
    pub fn snapshot(&self) -> ServerTotals {
        ServerTotals {
            tests: self
                .tests
                .lock()
                .map(|v| v.iter().cloned().collect())
                .unwrap_or_default(),
            ..self.counts()
        }
    }

    /// The counters without the list of tests.
    fn counts(&self) -> ServerTotals {
        ServerTotals {
            tests_started: self.started.load(Ordering::Relaxed),
            tests_completed: self.completed.load(Ordering::Relaxed),
            tests_failed: self.failed.load(Ordering::Relaxed),
            streams: self.streams.load(Ordering::Relaxed),
            received_bytes: self.received.load(Ordering::Relaxed),
            sent_bytes: self.sent.load(Ordering::Relaxed),
            cpu_ns: 0,
            serving_ns: 0,
            tests: Vec::new(),
            tests_not_listed: self.dropped_records.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{StreamRecord, StreamSample};

    fn stream(sending: bool, bytes: u64) -> StreamRecord {
        StreamRecord {
            sending,
            samples: vec![
                StreamSample {
                    bytes: bytes / 2,
                    ..Default::default()
                },
                StreamSample {
                    bytes,
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn totals_add_every_test_and_keep_the_latest_records() {
        let c = ServerCounters::default();
        let peer: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let r = SideResults {
            streams: vec![stream(false, 1000), stream(false, 500), stream(true, 7)],
            ..Default::default()
        };
        for _ in 0..MAX_TEST_RECORDS + 2 {
            let id = c.test_started(peer);
            c.test_ended(id, peer, &r, None);
        }
        let id = c.test_started(peer);
        c.test_failed(id, peer, "client left");
        let t = c.snapshot();
        let n = MAX_TEST_RECORDS as u64 + 2;
        assert_eq!(t.tests_started, n + 1);
        assert_eq!(t.tests_completed, n);
        assert_eq!(t.tests_failed, 1);
        assert_eq!(t.received_bytes, 1500 * n);
        assert_eq!(t.sent_bytes, 7 * n);
        assert_eq!(t.streams, 3 * n);
        assert_eq!(t.tests.len(), MAX_TEST_RECORDS);
        assert_eq!(t.tests_not_listed, 3);
        assert_eq!(
            t.tests.last().unwrap().error.as_deref(),
            Some("client left")
        );
        assert!(c.live().running.is_empty());
    }

    #[test]
    fn running_tests_count_until_they_end_and_their_bytes_stay_counted() {
        let c = ServerCounters::default();
        let peer: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let a = c.test_started(peer);
        let b = c.test_started(peer);
        c.test_interval(a, &[false, true], &[100, 7], 1.0);
        c.test_interval(a, &[false, true], &[50, 3], 0.5);
        c.test_interval(b, &[false], &[1000], 1.0);
        let l = c.live();
        assert_eq!(l.running.len(), 2);
        let ta = &l.running[0];
        assert_eq!((ta.id, ta.received_bytes, ta.sent_bytes), (a, 150, 10));
        assert_eq!((ta.interval_s, ta.interval_received_bytes), (0.5, 50));
        assert_eq!(l.ended.received_bytes, 0);
        // Ended with its results: the results' figures (at least what was counted live).
        let r = SideResults {
            streams: vec![stream(false, 160), stream(true, 10)],
            ..Default::default()
        };
        c.test_ended(a, peer, &r, None);
        // Lost: the bytes its intervals counted stay in the totals.
        c.test_failed(b, peer, "client left during the test");
        let l = c.live();
        assert!(l.running.is_empty());
        assert_eq!(l.ended.received_bytes, 160 + 1000);
        assert_eq!(l.ended.sent_bytes, 10);
        assert_eq!((l.ended.tests_completed, l.ended.tests_failed), (1, 1));
        assert_eq!(c.snapshot().tests[1].received_bytes, 1000);
    }
}
