//! Turns the two ends' measurements into the `net` report: spec, per-interval series (per
//! stream and aggregated per direction), summary and findings.

use nsperf_core::report::{CpuInterval, HostRecord, Report};
use nsperf_core::stats::{LatencySummary, summarize_series};
use serde::{Deserialize, Serialize};

use crate::client::ClientRun;
use crate::config::{Mode, TestParams};
use crate::results::{SideResults, StreamRecord, SweepPoint, UdpCounters};
use crate::tcpinfo::TcpInfoSample;

/// The `spec` of a `net` report: the target and every test parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetSpec {
    /// Host name or address given.
    pub target: String,
    /// Control port.
    pub port: u16,
    /// True for `--loopback` (in-process server).
    pub loopback: bool,
    /// The test parameters.
    #[serde(flatten)]
    pub params: TestParams,
}

/// One entry of the `intervals` series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetInterval {
    /// Interval start, seconds since the test started (receiver's clock).
    pub start_s: f64,
    /// Interval length, seconds.
    pub length_s: f64,
    /// Stream index; `null` for the aggregate of all streams of the direction.
    pub stream: Option<u32>,
    /// `up` (client to server) or `down`.
    pub direction: String,
    /// Payload bytes the sender wrote in the interval.
    pub sent_bytes: u64,
    /// Payload bytes the receiver read in the interval.
    pub received_bytes: u64,
    /// Receiver payload bit rate over the interval.
    pub throughput_bps: f64,
    /// Segments retransmitted by the sender in the interval (TCP).
    pub retransmits: Option<u64>,
    /// Transactions (`--rr`) or datagrams received (UDP) in the interval.
    pub messages: Option<u64>,
    /// Sender's `TCP_INFO` at the interval end (per stream only).
    pub sender_tcp: Option<TcpInfoSample>,
    /// Receiver's `TCP_INFO` at the interval end (per stream only).
    pub receiver_tcp: Option<TcpInfoSample>,
    /// UDP: datagrams lost in the interval (by sequence numbers).
    pub lost: Option<u64>,
    /// UDP: RFC 3550 jitter at the interval end, ns.
    pub jitter_ns: Option<f64>,
    /// Request/response: latency of the transactions completed in the interval (client's
    /// clock; all streams in the aggregate row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
}

/// Totals of one direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionSummary {
    /// Receiver payload bit rate after warm-up.
    pub throughput_bps: f64,
    /// Receiver payload bit rate over the whole test, warm-up included.
    pub mean_bps: f64,
    /// Highest interval rate.
    pub peak_interval_bps: f64,
    /// Payload bytes written by the sender.
    pub sent_bytes: u64,
    /// Payload bytes read by the receiver.
    pub received_bytes: u64,
    /// Retransmitted segments (TCP).
    pub retransmits: u64,
    /// Mean smoothed RTT the sender saw, µs (TCP).
    pub rtt_mean_us: Option<f64>,
    /// Send buffer granted on the sender (kernel's figure, doubled).
    pub sender_sndbuf_bytes: u64,
    /// Receive buffer granted on the receiver (kernel's figure, doubled).
    pub receiver_rcvbuf_bytes: u64,
    /// Mean receive window the receiver advertised, as the sender saw it (`TCP_INFO`
    /// `snd_wnd`, kernel 5.4+).
    pub peer_window_bytes: Option<u64>,
    /// Share of busy time the sender was limited by the receive window, % (kernel 4.9+).
    pub rwnd_limited_pct: Option<f64>,
    /// Share of busy time the sender was limited by its send buffer, %.
    pub sndbuf_limited_pct: Option<f64>,
}

/// The `summary` of a `net` report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetSummary {
    /// The headline: receiver payload bit rate after warm-up (both directions summed).
    pub throughput_bps: f64,
    /// Receiver payload bit rate over the whole test, warm-up included.
    pub mean_bps: f64,
    /// Highest aggregate interval rate.
    pub peak_interval_bps: f64,
    /// Payload bytes written by the senders.
    pub sent_bytes: u64,
    /// Payload bytes read by the receivers.
    pub received_bytes: u64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Client to server, when that direction carried data.
    pub up: Option<DirectionSummary>,
    /// Server to client, when that direction carried data.
    pub down: Option<DirectionSummary>,
    /// Busiest core of the client, mean busy % over the test.
    pub client_busiest_core_pct: f64,
    /// Busiest core of the server, mean busy % over the test.
    pub server_busiest_core_pct: f64,
    /// The client held its CPUs out of deep idle (`--awake`).
    #[serde(default)]
    pub client_cpu_awake: bool,
    /// The server held its CPUs out of deep idle (`--awake`).
    #[serde(default)]
    pub server_cpu_awake: bool,
    /// Request/response: transactions per second after warm-up.
    pub transactions_per_s: Option<f64>,
    /// Request/response latency percentiles, ns.
    pub lat_p50_ns: Option<u64>,
    /// 90th percentile, ns.
    pub lat_p90_ns: Option<u64>,
    /// 99th percentile, ns.
    pub lat_p99_ns: Option<u64>,
    /// 99.9th percentile, ns.
    pub lat_p999_ns: Option<u64>,
    /// Mean latency, ns.
    pub lat_mean_ns: Option<f64>,
    /// Largest latency, ns.
    pub lat_max_ns: Option<u64>,
    /// Message-size sweep points.
    pub sweep: Vec<SweepPoint>,
    /// UDP totals, when UDP.
    pub udp: Option<UdpSummary>,
}

/// UDP totals over all streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpSummary {
    /// Datagrams the senders sent.
    pub sent_datagrams: u64,
    /// Distinct datagrams received.
    pub received_datagrams: u64,
    /// Datagrams received per second after warm-up.
    pub received_datagrams_per_s: f64,
    /// Sent minus received (distinct).
    pub lost_datagrams: u64,
    /// Lost, % of sent.
    pub loss_pct: f64,
    /// Arrivals after a later datagram.
    pub out_of_order: u64,
    /// Datagrams received twice.
    pub duplicates: u64,
    /// Mean RFC 3550 jitter at the end of each stream, ns.
    pub jitter_ns: f64,
    /// Drops the receiving kernel counted on the sockets (`SO_RXQ_OVFL`).
    pub kernel_drops: u64,
}

/// The `net` report.
pub type NetReport = Report<NetSpec, NetInterval, NetSummary>;

fn delta_bytes(rec: &StreamRecord, i: usize) -> u64 {
    let cur = rec.samples.get(i).map(|s| s.bytes);
    let prev = if i == 0 {
        Some(0)
    } else {
        rec.samples.get(i - 1).map(|s| s.bytes)
    };
    match (cur, prev) {
        (Some(c), Some(p)) => c.saturating_sub(p),
        _ => 0,
    }
}

fn delta_msgs(rec: &StreamRecord, i: usize) -> u64 {
    let cur = rec.samples.get(i).map(|s| s.messages).unwrap_or(0);
    let prev = if i == 0 {
        0
    } else {
        rec.samples.get(i - 1).map(|s| s.messages).unwrap_or(0)
    };
    cur.saturating_sub(prev)
}

fn retrans_at(rec: &StreamRecord, i: usize) -> u64 {
    let r = |j: usize| {
        rec.samples
            .get(j)
            .and_then(|s| s.tcp)
            .map(|t| t.total_retrans as u64)
    };
    match (r(i), if i == 0 { Some(0) } else { r(i - 1) }) {
        (Some(c), Some(p)) => c.saturating_sub(p),
        _ => 0,
    }
}

fn udp_at(rec: &StreamRecord, i: usize) -> Option<UdpCounters> {
    rec.samples.get(i).and_then(|s| s.udp)
}

fn last_total(rec: &StreamRecord) -> u64 {
    rec.samples.last().map(|s| s.bytes).unwrap_or(0)
}

/// Series and summary of one direction: `tx` are the sender's records, `rx` the receiver's.
fn direction(
    name: &str,
    tx_side: &SideResults,
    rx_side: &SideResults,
    ids: &[u32],
    warmup_s: f64,
    udp: bool,
    out: &mut Vec<NetInterval>,
) -> DirectionSummary {
    let find = |side: &SideResults, id: u32| {
        side.streams
            .iter()
            .find(|s| s.id == id)
            .cloned()
            .unwrap_or_default()
    };
    let pairs: Vec<(StreamRecord, StreamRecord)> = ids
        .iter()
        .map(|&id| (find(tx_side, id), find(rx_side, id)))
        .collect();
    let mut series = Vec::new();
    for (i, mark) in rx_side.intervals.iter().enumerate() {
        let mut agg = NetInterval {
            start_s: mark.start_s,
            length_s: mark.length_s,
            stream: None,
            direction: name.to_string(),
            ..Default::default()
        };
        let mut lost_total = 0u64;
        let mut any_udp = false;
        for (tx, rx) in &pairs {
            let recv = delta_bytes(rx, i);
            let sent = delta_bytes(tx, i);
            let retr = retrans_at(tx, i);
            let tx_tcp = tx.samples.get(i).and_then(|s| s.tcp);
            let rx_tcp = rx.samples.get(i).and_then(|s| s.tcp);
            let (lost, jitter, msgs) = match (
                udp_at(rx, i),
                if i == 0 {
                    Some(UdpCounters::default())
                } else {
                    udp_at(rx, i - 1)
                },
            ) {
                (Some(c), Some(p)) => {
                    any_udp = true;
                    let l = (c.expected - c.datagrams).saturating_sub(p.expected - p.datagrams);
                    (
                        Some(l),
                        Some(c.jitter_ns),
                        Some(c.datagrams.saturating_sub(p.datagrams)),
                    )
                }
                // Transactions are counted by the client, which times them: the receiver
                // of the responses for rr and sweep (`down`).
                _ => (
                    None,
                    None,
                    if rx.samples.iter().any(|s| s.messages > 0) {
                        Some(delta_msgs(rx, i))
                    } else if tx.samples.iter().any(|s| s.messages > 0) {
                        Some(delta_msgs(tx, i))
                    } else {
                        None
                    },
                ),
            };
            lost_total += lost.unwrap_or(0);
            out.push(NetInterval {
                start_s: mark.start_s,
                length_s: mark.length_s,
                stream: Some(rx.id),
                direction: name.to_string(),
                sent_bytes: sent,
                received_bytes: recv,
                throughput_bps: if mark.length_s > 0.0 {
                    recv as f64 * 8.0 / mark.length_s
                } else {
                    0.0
                },
                retransmits: (!udp).then_some(retr),
                messages: msgs,
                sender_tcp: tx_tcp,
                receiver_tcp: rx_tcp,
                lost,
                jitter_ns: jitter,
                latency: rx
                    .samples
                    .get(i)
                    .and_then(|s| s.latency)
                    .or_else(|| tx.samples.get(i).and_then(|s| s.latency)),
            });
            agg.sent_bytes += sent;
            agg.received_bytes += recv;
            if !udp {
                *agg.retransmits.get_or_insert(0) += retr;
            }
            if let Some(m) = msgs {
                *agg.messages.get_or_insert(0) += m;
            }
        }
        if any_udp {
            agg.lost = Some(lost_total);
        }
        agg.latency = rx_side
            .latency
            .get(i)
            .or(tx_side.latency.get(i))
            .copied()
            .flatten();
        agg.throughput_bps = if mark.length_s > 0.0 {
            agg.received_bytes as f64 * 8.0 / mark.length_s
        } else {
            0.0
        };
        series.push((mark.start_s, mark.length_s, agg.throughput_bps));
        out.push(agg);
    }
    let s = summarize_series(&series, warmup_s);
    let rtts: Vec<f64> = pairs
        .iter()
        .flat_map(|(tx, _)| {
            tx.samples
                .iter()
                .filter_map(|s| s.tcp)
                .map(|t| t.rtt_us as f64)
        })
        .filter(|&r| r > 0.0)
        .collect();
    let (mut busy, mut rwnd, mut sndbuf) = (0u64, 0u64, 0u64);
    for (tx, _) in &pairs {
        if let Some(t) = tx.samples.iter().rev().find_map(|s| s.tcp) {
            busy += t.busy_time_us;
            rwnd += t.rwnd_limited_us;
            sndbuf += t.sndbuf_limited_us;
        }
    }
    let pct = |x: u64| (busy > 0).then(|| 100.0 * x as f64 / busy as f64);
    let wnds: Vec<f64> = pairs
        .iter()
        .flat_map(|(tx, _)| {
            tx.samples
                .iter()
                .filter_map(|s| s.tcp)
                .map(|t| t.snd_wnd_bytes as f64)
        })
        .filter(|&w| w > 0.0)
        .collect();
    DirectionSummary {
        throughput_bps: s.sustained_mean,
        mean_bps: s.mean,
        peak_interval_bps: s.peak,
        sent_bytes: pairs.iter().map(|(tx, _)| last_total(tx)).sum(),
        received_bytes: pairs.iter().map(|(_, rx)| last_total(rx)).sum(),
        retransmits: pairs
            .iter()
            .filter_map(|(tx, _)| tx.samples.iter().rev().find_map(|s| s.tcp))
            .map(|t| t.total_retrans as u64)
            .sum(),
        rtt_mean_us: nsperf_core::stats::mean(&rtts),
        sender_sndbuf_bytes: pairs
            .iter()
            .map(|(tx, _)| tx.sndbuf_bytes)
            .max()
            .unwrap_or(0),
        receiver_rcvbuf_bytes: pairs
            .iter()
            .map(|(_, rx)| rx.rcvbuf_bytes)
            .max()
            .unwrap_or(0),
        peer_window_bytes: nsperf_core::stats::mean(&wnds).map(|w| w as u64),
        rwnd_limited_pct: pct(rwnd),
        sndbuf_limited_pct: pct(sndbuf),
    }
}

fn busiest_mean(side: &SideResults) -> f64 {
    let cores: std::collections::BTreeSet<u32> = side
        .cpu
        .iter()
        .flat_map(|s| s.per_core.iter().map(|c| c.core))
        .collect();
    cores
        .into_iter()
        .map(|core| {
            let v: Vec<f64> = side
                .cpu
                .iter()
                .filter_map(|s| {
                    s.per_core
                        .iter()
                        .find(|c| c.core == core)
                        .map(|c| c.busy_pct)
                })
                .collect();
            nsperf_core::stats::mean(&v).unwrap_or(0.0)
        })
        .fold(0.0, f64::max)
}

/// Builds the report of a finished client run.
pub fn build(
    run: &ClientRun,
    spec: NetSpec,
    client_facts: nsperf_core::host::HostFacts,
) -> NetReport {
    let p = &run.params;
    let warmup_s = p.warmup_ns as f64 / 1e9;
    let udp = p.protocol == crate::config::Protocol::Udp;
    let mut intervals = Vec::new();
    let ids: Vec<u32> = (0..p.stream_count()).collect();
    let up_ids: Vec<u32> = ids.iter().copied().filter(|&i| p.stream_is_up(i)).collect();
    let down_ids: Vec<u32> = ids
        .iter()
        .copied()
        .filter(|&i| !p.stream_is_up(i))
        .collect();
    let stream_mode = p.mode == Mode::Stream;
    let mut summary = NetSummary::default();
    if stream_mode && !up_ids.is_empty() {
        summary.up = Some(direction(
            "up",
            &run.client,
            &run.server,
            &up_ids,
            warmup_s,
            udp,
            &mut intervals,
        ));
    }
    if stream_mode && !down_ids.is_empty() {
        summary.down = Some(direction(
            "down",
            &run.server,
            &run.client,
            &down_ids,
            warmup_s,
            udp,
            &mut intervals,
        ));
    }
    if !stream_mode {
        // rr and sweep: the client's figures are the ones that matter (responses received).
        let d = direction(
            "down",
            &run.server,
            &run.client,
            &ids,
            warmup_s,
            udp,
            &mut intervals,
        );
        summary.down = Some(d);
    }
    for d in [&summary.up, &summary.down].into_iter().flatten() {
        summary.throughput_bps += d.throughput_bps;
        summary.mean_bps += d.mean_bps;
        summary.sent_bytes += d.sent_bytes;
        summary.received_bytes += d.received_bytes;
        summary.retransmits += d.retransmits;
    }
    // Peak of the summed aggregates per interval index.
    let mut per_start: Vec<(f64, f64)> = Vec::new();
    for iv in intervals.iter().filter(|i| i.stream.is_none()) {
        match per_start
            .iter_mut()
            .find(|(s, _)| (s - iv.start_s).abs() < iv.length_s.max(1e-3) / 2.0)
        {
            Some((_, v)) => *v += iv.throughput_bps,
            None => per_start.push((iv.start_s, iv.throughput_bps)),
        }
    }
    summary.peak_interval_bps = per_start.iter().map(|x| x.1).fold(0.0, f64::max);
    if let Mode::Rr { .. } = p.mode {
        let tx_after: u64 = intervals
            .iter()
            .filter(|i| i.stream.is_none() && i.start_s + 1e-9 >= warmup_s)
            .map(|i| i.messages.unwrap_or(0))
            .sum();
        let t_after: f64 = intervals
            .iter()
            .filter(|i| i.stream.is_none() && i.start_s + 1e-9 >= warmup_s)
            .map(|i| i.length_s)
            .sum();
        summary.transactions_per_s = Some(if t_after > 0.0 {
            tx_after as f64 / t_after
        } else {
            0.0
        });
        if let Some(h) = &run.rr_latency {
            let l = h.summary();
            summary.lat_p50_ns = Some(l.p50_ns);
            summary.lat_p90_ns = Some(l.p90_ns);
            summary.lat_p99_ns = Some(l.p99_ns);
            summary.lat_p999_ns = Some(l.p999_ns);
            summary.lat_mean_ns = Some(l.mean_ns);
            summary.lat_max_ns = Some(l.max_ns);
        }
    }
    summary.sweep = run.sweep.clone();
    summary.client_busiest_core_pct = busiest_mean(&run.client);
    summary.server_busiest_core_pct = busiest_mean(&run.server);
    summary.client_cpu_awake = run.client.cpu_awake;
    summary.server_cpu_awake = run.server.cpu_awake;
    if udp {
        summary.udp = Some(crate::udp::summarize(run, warmup_s));
    }
    let mut r = Report::new("net", spec, summary);
    r.duration_ns = run.duration_ns;
    r.intervals = intervals;
    r.hosts = vec![
        HostRecord {
            role: "client".into(),
            facts: client_facts,
        },
        HostRecord {
            role: "server".into(),
            facts: run.server_facts.clone(),
        },
    ];
    for side in [&run.client, &run.server] {
        for (mark, cpu) in side.intervals.iter().zip(&side.cpu) {
            r.cpu.push(CpuInterval {
                role: side.role.clone(),
                start_s: mark.start_s,
                length_s: mark.length_s,
                cpu: cpu.clone(),
            });
        }
    }
    r.findings = crate::findings::all(run, &r.summary);
    r
}
