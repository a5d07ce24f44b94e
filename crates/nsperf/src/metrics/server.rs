//! The figures of `nsperf server`, read from its counters when scraped: the totals of the
//! tests that ended (as `nsperf run` with hosts stores them) and each running test's bytes
//! as of its last interval.

use std::sync::Arc;
use std::time::Instant;

use nsperf_net::ServerCounters;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::{Family, Labels, bits_per_s, bits_per_second};

/// The server's counters, with when it started serving.
#[derive(Debug)]
pub struct ServerMetrics {
    counters: Arc<ServerCounters>,
    since: Instant,
    cpu_at_start_ns: u64,
}

impl ServerMetrics {
    /// Figures of a server that starts serving now.
    pub fn new(counters: Arc<ServerCounters>) -> Self {
        ServerMetrics {
            counters,
            since: Instant::now(),
            cpu_at_start_ns: crate::cmd::step::process_cpu_ns(),
        }
    }
}

fn dir(d: &str) -> Labels {
    vec![("direction", d.to_string())]
}

impl Collector for ServerMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let l = self.counters.live();
        let e = &l.ended;
        let (bytes, seconds, bps) = (Unit::Bytes, Unit::Seconds, bits_per_second());
        let none = Labels::new();
        Family::new(
            &mut enc,
            "nsperf_server_tests_started",
            "Tests admitted",
            None,
            MetricType::Counter,
        )?
        .counter(&none, e.tests_started)?;
        let mut f = Family::new(
            &mut enc,
            "nsperf_server_tests_ended",
            "Tests ended: completed (results sent to the client) or failed",
            None,
            MetricType::Counter,
        )?;
        f.counter(&vec![("status", "completed".into())], e.tests_completed)?;
        f.counter(&vec![("status", "failed".into())], e.tests_failed)?;
        Family::new(
            &mut enc,
            "nsperf_server_tests_running",
            "Tests running now",
            None,
            MetricType::Gauge,
        )?
        .gauge(&none, l.running.len() as f64)?;
        Family::new(
            &mut enc,
            "nsperf_server_streams",
            "Data streams of the tests that ended",
            None,
            MetricType::Counter,
        )?
        .counter(&none, e.streams)?;
        let live_rx: u64 = l.running.iter().map(|t| t.received_bytes).sum();
        let live_tx: u64 = l.running.iter().map(|t| t.sent_bytes).sum();
        let mut f = Family::new(
            &mut enc,
            "nsperf_server",
            "Payload bytes received and sent over all tests (the running ones to their last interval)",
            Some(&bytes),
            MetricType::Counter,
        )?;
        f.counter(&dir("received"), e.received_bytes + live_rx)?;
        f.counter(&dir("sent"), e.sent_bytes + live_tx)?;
        let test_labels = |t: &nsperf_net::LiveTest, d: &str| -> Labels {
            vec![
                ("test", t.id.to_string()),
                ("peer", t.peer.clone()),
                ("direction", d.to_string()),
            ]
        };
        let mut f = Family::new(
            &mut enc,
            "nsperf_server_test",
            "Payload bytes of each running test so far",
            Some(&bytes),
            MetricType::Counter,
        )?;
        for t in &l.running {
            f.counter(&test_labels(t, "received"), t.received_bytes)?;
            f.counter(&test_labels(t, "sent"), t.sent_bytes)?;
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_server_test_throughput",
            "Payload throughput of each running test over its last interval",
            Some(&bps),
            MetricType::Gauge,
        )?;
        for t in &l.running {
            let rx = bits_per_s(t.interval_received_bytes, t.interval_s);
            let tx = bits_per_s(t.interval_sent_bytes, t.interval_s);
            f.gauge(&test_labels(t, "received"), rx)?;
            f.gauge(&test_labels(t, "sent"), tx)?;
        }
        let cpu_ns = crate::cmd::step::process_cpu_ns().saturating_sub(self.cpu_at_start_ns);
        Family::new(
            &mut enc,
            "nsperf_server_cpu",
            "CPU time of the server process (user and system) since it started serving",
            Some(&seconds),
            MetricType::Counter,
        )?
        .counter_f64(&none, cpu_ns as f64 / 1e9)?;
        Family::new(
            &mut enc,
            "nsperf_server_serving",
            "Time since the server started serving",
            Some(&seconds),
            MetricType::Counter,
        )?
        .counter_f64(&none, self.since.elapsed().as_secs_f64())
    }
}
