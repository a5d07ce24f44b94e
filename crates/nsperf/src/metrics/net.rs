//! The figures of `nsperf net`, from the client's interval callback (the rows and the
//! `--json-stream` lines come from the same [`LiveInterval`]).

use std::sync::{Arc, Mutex};

use nsperf_core::stats::LatencySummary;
use nsperf_net::LiveInterval;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::{Family, Labels, bits_per_s, bits_per_second};

/// One stream's figures: totals so far and the last interval's.
#[derive(Debug, Clone, Default)]
struct Stream {
    sending: bool,
    bytes: u64,
    messages: u64,
    retransmits: Option<u64>,
    throughput_bps: f64,
    cwnd_bytes: Option<u64>,
    rtt_s: Option<f64>,
}

#[derive(Debug, Default)]
struct State {
    streams: Vec<Stream>,
    intervals: u64,
    elapsed_s: f64,
    latency: Option<LatencySummary>,
}

/// The live figures of one `nsperf net` test (shared with the endpoint).
#[derive(Debug, Clone, Default)]
pub struct NetMetrics {
    state: Arc<Mutex<State>>,
}

impl NetMetrics {
    /// Takes in an interval as it ends.
    pub fn interval(&self, iv: &LiveInterval) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let n = iv.stream_bytes.len();
        if s.streams.len() < n {
            s.streams.resize(n, Stream::default());
        }
        for (i, st) in s.streams.iter_mut().enumerate().take(n) {
            st.sending = iv.stream_sending.get(i).copied().unwrap_or(false);
            st.bytes += iv.stream_bytes[i];
            st.messages += iv.stream_messages.get(i).copied().unwrap_or(0);
            if let Some(r) = iv.stream_retransmits.get(i).copied().flatten() {
                *st.retransmits.get_or_insert(0) += r;
            }
            st.throughput_bps = bits_per_s(iv.stream_bytes[i], iv.length_s);
            let tcp = iv.stream_tcp.get(i).copied().flatten();
            st.cwnd_bytes = tcp
                .filter(|_| st.sending)
                .map(|t| t.snd_cwnd as u64 * t.snd_mss as u64);
            st.rtt_s = tcp.map(|t| t.rtt_us as f64 / 1e6);
        }
        s.intervals += 1;
        s.elapsed_s = iv.start_s + iv.length_s;
        s.latency = iv.latency;
    }
}

fn labels(i: usize, st: &Stream) -> Labels {
    let dir = if st.sending { "up" } else { "down" };
    vec![("stream", i.to_string()), ("direction", dir.to_string())]
}

impl Collector for NetMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let Ok(s) = self.state.lock() else {
            return Ok(());
        };
        let (bytes, seconds, bps) = (Unit::Bytes, Unit::Seconds, bits_per_second());
        let mut f = Family::new(
            &mut enc,
            "nsperf_net",
            "Payload bytes this end moved per stream (up: it sends, down: it receives)",
            Some(&bytes),
            MetricType::Counter,
        )?;
        for (i, st) in s.streams.iter().enumerate() {
            f.counter(&labels(i, st), st.bytes)?;
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_net_messages",
            "Messages per stream: transactions, datagrams sent, or distinct datagrams received",
            None,
            MetricType::Counter,
        )?;
        for (i, st) in s.streams.iter().enumerate() {
            f.counter(&labels(i, st), st.messages)?;
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_net_throughput",
            "Payload throughput per stream over the last interval",
            Some(&bps),
            MetricType::Gauge,
        )?;
        for (i, st) in s.streams.iter().enumerate() {
            f.gauge(&labels(i, st), st.throughput_bps)?;
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_net_retransmits",
            "TCP segments this end retransmitted per stream",
            None,
            MetricType::Counter,
        )?;
        for (i, st) in s.streams.iter().enumerate() {
            if let Some(r) = st.retransmits {
                f.counter(&labels(i, st), r)?;
            }
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_net_cwnd",
            "Congestion window of each TCP stream this end sends on, at the last interval's end",
            Some(&bytes),
            MetricType::Gauge,
        )?;
        for (i, st) in s.streams.iter().enumerate() {
            if let Some(c) = st.cwnd_bytes {
                f.gauge(&labels(i, st), c as f64)?;
            }
        }
        let mut f = Family::new(
            &mut enc,
            "nsperf_net_rtt",
            "Smoothed round-trip time of each TCP stream (TCP_INFO) at the last interval's end",
            Some(&seconds),
            MetricType::Gauge,
        )?;
        for (i, st) in s.streams.iter().enumerate() {
            if let Some(r) = st.rtt_s {
                f.gauge(&labels(i, st), r)?;
            }
        }
        if let Some(l) = s.latency {
            let mut f = Family::new(
                &mut enc,
                "nsperf_net_rr_latency",
                "Request/response latency over all streams in the last interval",
                Some(&seconds),
                MetricType::Gauge,
            )?;
            for (stat, ns) in [
                ("p50", l.p50_ns as f64),
                ("p99", l.p99_ns as f64),
                ("max", l.max_ns as f64),
                ("mean", l.mean_ns),
            ] {
                f.gauge(&vec![("statistic", stat.to_string())], ns / 1e9)?;
            }
        }
        Family::new(
            &mut enc,
            "nsperf_net_intervals",
            "Intervals ended",
            None,
            MetricType::Counter,
        )?
        .counter(&Vec::new(), s.intervals)?;
        Family::new(
            &mut enc,
            "nsperf_net_elapsed",
            "Time from the start of the test to the end of the last interval",
            Some(&seconds),
            MetricType::Gauge,
        )?
        .gauge(&Vec::new(), s.elapsed_s)
    }
}
