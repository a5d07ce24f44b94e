//! Turns the two ends' measurements into the `net` report: spec, per-interval series (per
//! stream and aggregated per direction), summary and findings.

use nsperf_core::report::{CpuInterval, HostRecord, Report};
use nsperf_core::stats::summarize_series;

use crate::config::{Mode, Protocol};
use crate::drive::ClientRun;
use crate::results::{SideResults, StreamRecord, UdpCounters};
use crate::summary::{
    DirectionSummary, LossSite, NetInterval, NetReport, NetSpec, NetSummary, StreamDirection,
    StreamWindow, UdpSummary,
};

fn delta_msgs(rec: &StreamRecord, i: usize) -> u64 {
    let cur = rec.samples.get(i).map(|s| s.messages).unwrap_or(0);
    let prev = if i == 0 {
        0
    } else {
        rec.samples.get(i - 1).map(|s| s.messages).unwrap_or(0)
    };
    cur.saturating_sub(prev)
}

fn udp_at(rec: &StreamRecord, i: usize) -> Option<UdpCounters> {
    rec.samples.get(i).and_then(|s| s.udp)
}

fn last_total(rec: &StreamRecord) -> u64 {
    rec.samples.last().map(|s| s.bytes).unwrap_or(0)
}

/// Series and summary of one direction: `tx` are the sender's records, `rx` the receiver's.
fn direction(
    name: StreamDirection,
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
    let series = interval_rows(name, &pairs, tx_side, rx_side, udp, out);
    let s = summarize_series(&series, warmup_s);
    let tx: Vec<&StreamRecord> = pairs.iter().map(|(tx, _)| tx).collect();
    let w = window_figures(&tx);
    // A window limits one connection: with several TCP streams each one's own figures.
    let streams = if pairs.len() > 1 && !udp {
        pairs
            .iter()
            .map(|(tx, rx)| {
                let series: Vec<(f64, f64, f64)> = rx_side
                    .intervals
                    .iter()
                    .enumerate()
                    .map(|(i, m)| {
                        let bps = if m.length_s > 0.0 {
                            rx.bytes_in(i) as f64 * 8.0 / m.length_s
                        } else {
                            0.0
                        };
                        (m.start_s, m.length_s, bps)
                    })
                    .collect();
                let f = window_figures(&[tx]);
                StreamWindow {
                    stream: rx.id,
                    throughput_bps: summarize_series(&series, warmup_s).sustained_mean,
                    rtt_mean_us: f.rtt_mean_us,
                    rtt_min_us: f.rtt_min_us,
                    peer_window_bytes: f.peer_window_bytes,
                    rwnd_limited_pct: f.rwnd_limited_pct,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
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
        rtt_mean_us: w.rtt_mean_us,
        rtt_min_us: w.rtt_min_us,
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
        peer_window_bytes: w.peer_window_bytes,
        rwnd_limited_pct: w.rwnd_limited_pct,
        sndbuf_limited_pct: w.sndbuf_limited_pct,
        streams,
    }
}

/// The window figures of the senders' `TCP_INFO` samples of one or more streams.
struct WindowFigures {
    rtt_mean_us: Option<f64>,
    rtt_min_us: Option<f64>,
    peer_window_bytes: Option<u64>,
    rwnd_limited_pct: Option<f64>,
    sndbuf_limited_pct: Option<f64>,
}

fn window_figures(tx: &[&StreamRecord]) -> WindowFigures {
    let tcp = || {
        tx.iter()
            .flat_map(|t| t.samples.iter().filter_map(|s| s.tcp))
    };
    let rtts: Vec<f64> = tcp()
        .map(|t| t.rtt_us as f64)
        .filter(|&r| r > 0.0)
        .collect();
    let wnds: Vec<f64> = tcp()
        .map(|t| t.snd_wnd_bytes as f64)
        .filter(|&w| w > 0.0)
        .collect();
    let (mut busy, mut rwnd, mut sndbuf) = (0u64, 0u64, 0u64);
    for t in tx {
        if let Some(t) = t.samples.iter().rev().find_map(|s| s.tcp) {
            busy += t.busy_time_us;
            rwnd += t.rwnd_limited_us;
            sndbuf += t.sndbuf_limited_us;
        }
    }
    let pct = |x: u64| (busy > 0).then(|| 100.0 * x as f64 / busy as f64);
    WindowFigures {
        rtt_mean_us: nsperf_core::stats::mean(&rtts),
        rtt_min_us: tcp()
            .map(|t| t.min_rtt_us)
            .filter(|&m| m > 0)
            .min()
            .map(f64::from),
        peer_window_bytes: nsperf_core::stats::mean(&wnds).map(|w| w as u64),
        rwnd_limited_pct: pct(rwnd),
        sndbuf_limited_pct: pct(sndbuf),
    }
}

/// The per-interval rows of one direction (one per stream and one aggregate per interval,
/// on the receiver's interval marks) into `out`; returns the aggregate series as
/// (start s, length s, bit/s).
fn interval_rows(
    name: StreamDirection,
    pairs: &[(StreamRecord, StreamRecord)],
    tx_side: &SideResults,
    rx_side: &SideResults,
    udp: bool,
    out: &mut Vec<NetInterval>,
) -> Vec<(f64, f64, f64)> {
    let mut series = Vec::new();
    for (i, mark) in rx_side.intervals.iter().enumerate() {
        let mut agg = NetInterval {
            start_s: mark.start_s,
            length_s: mark.length_s,
            stream: None,
            direction: name,
            ..Default::default()
        };
        let mut lost_total = 0u64;
        let mut any_udp = false;
        for (tx, rx) in pairs {
            let recv = rx.bytes_in(i);
            let sent = tx.bytes_in(i);
            let retr = tx.retransmits_in(i);
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
                direction: name,
                sent_bytes: Some(sent),
                received_bytes: Some(recv),
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
            *agg.sent_bytes.get_or_insert(0) += sent;
            *agg.received_bytes.get_or_insert(0) += recv;
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
            agg.received_bytes.unwrap_or(0) as f64 * 8.0 / mark.length_s
        } else {
            0.0
        };
        series.push((mark.start_s, mark.length_s, agg.throughput_bps));
        out.push(agg);
    }
    series
}

/// UDP totals over all streams of a run.
fn udp_summary(run: &ClientRun, warmup_s: f64) -> UdpSummary {
    let mut s = UdpSummary::default();
    let mut jitters = Vec::new();
    let (mut rx_after, mut t_after) = (0u64, 0f64);
    for (tx_side, rx_side) in [(&run.client, &run.server), (&run.server, &run.client)] {
        for rx in rx_side.streams.iter().filter(|r| !r.sending) {
            let Some(last) = rx.samples.iter().rev().find_map(|x| x.udp) else {
                continue;
            };
            let sent = tx_side
                .streams
                .iter()
                .find(|t| t.id == rx.id && t.sending)
                .and_then(|t| t.samples.last())
                .map(|x| x.messages)
                .unwrap_or(last.expected);
            s.sent_datagrams += sent;
            s.received_datagrams += last.datagrams;
            s.out_of_order += last.out_of_order;
            s.duplicates += last.duplicates;
            s.kernel_drops += last.kernel_drops;
            jitters.push(last.jitter_ns);
            let mut prev = 0u64;
            for (mark, sample) in rx_side.intervals.iter().zip(&rx.samples) {
                let d = sample.udp.map(|u| u.datagrams).unwrap_or(0);
                if mark.start_s + 1e-9 >= warmup_s {
                    rx_after += d.saturating_sub(prev);
                }
                prev = d;
            }
        }
        if t_after == 0.0 && rx_side.streams.iter().any(|r| !r.sending) {
            t_after = rx_side
                .intervals
                .iter()
                .filter(|m| m.start_s + 1e-9 >= warmup_s)
                .map(|m| m.length_s)
                .sum();
        }
    }
    s.lost_datagrams = s.sent_datagrams.saturating_sub(s.received_datagrams);
    // The hosts' counters: the receiving end's RcvbufErrors, the sending end's SndbufErrors.
    let add = |acc: &mut Option<u64>, v: Option<u64>| {
        if let Some(v) = v {
            *acc = Some(acc.unwrap_or(0) + v);
        }
    };
    for side in [&run.client, &run.server] {
        let host = side.udp_host;
        if side.streams.iter().any(|r| !r.sending) {
            add(&mut s.receiver_rcvbuf_errors, host.map(|c| c.rcvbuf_errors));
        }
        if side.streams.iter().any(|r| r.sending) {
            add(&mut s.sender_sndbuf_errors, host.map(|c| c.sndbuf_errors));
        }
    }
    if s.lost_datagrams > 0 {
        s.lost_at = Some(LossSite::place(
            s.kernel_drops,
            s.receiver_rcvbuf_errors,
            s.sender_sndbuf_errors,
        ));
    }
    s.loss_pct = if s.sent_datagrams > 0 {
        100.0 * s.lost_datagrams as f64 / s.sent_datagrams as f64
    } else {
        0.0
    };
    s.jitter_ns = nsperf_core::stats::mean(&jitters).unwrap_or(0.0);
    s.received_datagrams_per_s = if t_after > 0.0 {
        rx_after as f64 / t_after
    } else {
        0.0
    };
    s
}

/// Builds the report of a finished client run.
pub fn build(
    run: &ClientRun,
    spec: NetSpec,
    client_facts: nsperf_core::host::HostFacts,
) -> NetReport {
    if let Some(shared) = &run.iperf3 {
        return crate::iperf3::report::build(run, shared, spec, client_facts);
    }
    let p = &run.params;
    let warmup_s = p.warmup_ns as f64 / 1e9;
    let udp = p.protocol == Protocol::Udp;
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
            StreamDirection::Up,
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
            StreamDirection::Down,
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
            StreamDirection::Down,
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
        let total = |side: &SideResults| {
            side.streams
                .iter()
                .map(|s| s.samples.last().map_or(0, |x| x.messages))
                .sum::<u64>()
        };
        summary.transactions = Some(total(&run.client));
        summary.server_transactions = Some(total(&run.server));
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
    summary.stopped_by = Some(run.stopped_by);
    summary.client_busiest_core_pct = run.client.busiest_core_mean_pct();
    summary.server_busiest_core_pct = run.server.busiest_core_mean_pct();
    summary.client_cpu_awake = run.client.cpu_awake;
    summary.server_cpu_awake = run.server.cpu_awake;
    if udp {
        summary.udp = Some(udp_summary(run, warmup_s));
    }
    let loopback = spec.loopback;
    summary.one_host = loopback || client_facts.same_host(&run.server_facts);
    let mut r = Report::new(nsperf_core::report::Command::Net, spec, summary);
    r.measured_unix_ns = Some(run.measured_unix_ns);
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
    r.findings = crate::findings::all(run, &r.summary, loopback);
    r
}
