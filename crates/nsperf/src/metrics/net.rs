//! The figures of `nsperf net`, from the client's interval callback (the rows and the
//! `--json-stream` lines come from the same [`LiveInterval`]).

use std::sync::{Arc, Mutex};

use nsperf_core::stats::LatencySummary;
use nsperf_net::{LiveInterval, StreamDirection};
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

/// A counter's or a gauge's value.
enum Sample {
    Count(u64),
    Level(f64),
}

/// A family with one sample per stream (`None`: the stream has none, e.g. UDP's window).
struct PerStream {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    ty: MetricType,
    value: fn(&Stream) -> Option<Sample>,
}

/// The per-stream families, in the order they are served.
fn per_stream() -> [PerStream; 6] {
    use MetricType::{Counter, Gauge};
    let (bytes, seconds) = (Some(Unit::Bytes), Some(Unit::Seconds));
    [
        PerStream {
            name: "nsperf_net",
            help: "Payload bytes this end moved per stream (up: it sends, down: it receives)",
            unit: bytes.clone(),
            ty: Counter,
            value: |st| Some(Sample::Count(st.bytes)),
        },
        PerStream {
            name: "nsperf_net_messages",
            help: "Messages per stream: transactions, datagrams sent, or distinct datagrams received",
            unit: None,
            ty: Counter,
            value: |st| Some(Sample::Count(st.messages)),
        },
        PerStream {
            name: "nsperf_net_throughput",
            help: "Payload throughput per stream over the last interval",
            unit: Some(bits_per_second()),
            ty: Gauge,
            value: |st| Some(Sample::Level(st.throughput_bps)),
        },
        PerStream {
            name: "nsperf_net_retransmits",
            help: "TCP segments this end retransmitted per stream",
            unit: None,
            ty: Counter,
            value: |st| st.retransmits.map(Sample::Count),
        },
        PerStream {
            name: "nsperf_net_cwnd",
            help: "Congestion window of each TCP stream this end sends on, at the last interval's end",
            unit: bytes,
            ty: Gauge,
            value: |st| st.cwnd_bytes.map(|c| Sample::Level(c as f64)),
        },
        PerStream {
            name: "nsperf_net_rtt",
            help: "Smoothed round-trip time of each TCP stream (TCP_INFO) at the last interval's end",
            unit: seconds,
            ty: Gauge,
            value: |st| st.rtt_s.map(Sample::Level),
        },
    ]
}

fn labels(i: usize, st: &Stream) -> Labels {
    let dir = StreamDirection::of_client(st.sending);
    vec![("stream", i.to_string()), ("direction", dir.to_string())]
}

impl Collector for NetMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let Ok(s) = self.state.lock() else {
            return Ok(());
        };
        for fam in per_stream() {
            let mut f = Family::new(&mut enc, fam.name, fam.help, fam.unit.as_ref(), fam.ty)?;
            for (i, st) in s.streams.iter().enumerate() {
                match (fam.value)(st) {
                    Some(Sample::Count(v)) => f.counter(&labels(i, st), v)?,
                    Some(Sample::Level(v)) => f.gauge(&labels(i, st), v)?,
                    None => {}
                }
            }
        }
        let seconds = Unit::Seconds;
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
