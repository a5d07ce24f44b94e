//! The server's own account of what it served: per test and in total, so that the target's
//! figures can be stored beside the sum of its clients' (`nsperf run` with hosts compares
//! the two). Counted from the server's stream meters when each test ends: a test's bytes are
//! the payload this end received and sent, as its own report to the client says.

use std::collections::VecDeque;
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

/// Counters shared by the server's threads; read with [`ServerCounters::snapshot`].
#[derive(Debug, Default)]
pub struct ServerCounters {
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
    /// A test was admitted.
    pub(super) fn test_started(&self) {
        self.started.fetch_add(1, Ordering::Relaxed);
    }

    /// A test ended after moving what `results` says (this end's streams).
    pub(super) fn test_ended(&self, peer: SocketAddr, results: &SideResults, error: Option<&str>) {
        let (mut received, mut sent) = (0u64, 0u64);
        for s in &results.streams {
            let bytes = s.samples.last().map(|x| x.bytes).unwrap_or(0);
            if s.sending {
                sent += bytes;
            } else {
                received += bytes;
            }
        }
        self.record(ServedTest {
            peer: peer.to_string(),
            ended_unix_ns: nsperf_core::clock::unix_time_ns(),
            received_bytes: received,
            sent_bytes: sent,
            streams: results.streams.len() as u32,
            error: error.map(str::to_string),
        });
    }

    /// A test ended without results of this end (it failed before any stream ran).
    pub(super) fn test_failed(&self, peer: SocketAddr, error: &str) {
        self.record(ServedTest {
            peer: peer.to_string(),
            ended_unix_ns: nsperf_core::clock::unix_time_ns(),
            received_bytes: 0,
            sent_bytes: 0,
            streams: 0,
            error: Some(error.to_string()),
        });
    }

    fn record(&self, t: ServedTest) {
        let counter = if t.error.is_none() {
            &self.completed
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.streams
            .fetch_add(u64::from(t.streams), Ordering::Relaxed);
        self.received.fetch_add(t.received_bytes, Ordering::Relaxed);
        self.sent.fetch_add(t.sent_bytes, Ordering::Relaxed);
        if let Ok(mut v) = self.tests.lock() {
            if v.len() >= MAX_TEST_RECORDS {
                v.pop_front();
                self.dropped_records.fetch_add(1, Ordering::Relaxed);
            }
            v.push_back(t);
        }
    }

    /// The counters now. `cpu_ns` and `serving_ns` are left for the caller, who knows the
    /// process and how long it served.
    pub fn snapshot(&self) -> ServerTotals {
        ServerTotals {
            tests_started: self.started.load(Ordering::Relaxed),
            tests_completed: self.completed.load(Ordering::Relaxed),
            tests_failed: self.failed.load(Ordering::Relaxed),
            streams: self.streams.load(Ordering::Relaxed),
            received_bytes: self.received.load(Ordering::Relaxed),
            sent_bytes: self.sent.load(Ordering::Relaxed),
            cpu_ns: 0,
            serving_ns: 0,
            tests: self
                .tests
                .lock()
                .map(|v| v.iter().cloned().collect())
                .unwrap_or_default(),
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
            c.test_started();
            c.test_ended(peer, &r, None);
        }
        c.test_failed(peer, "client left");
        let t = c.snapshot();
        let n = MAX_TEST_RECORDS as u64 + 2;
        assert_eq!(t.tests_started, n);
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
    }
}
