//! The `net` report of a run against an iperf3 server, which shares only its totals: each
//! stream's bytes (after the omitted seconds), TCP retransmissions, UDP loss and jitter, and
//! its process CPU. The interval rows are this end's; totals of the server's side come from
//! its results, and the headline of the direction nsperf sends is iperf3's receiver figure
//! (bytes over the receiver's seconds), as iperf3 itself reports it.

use nsperf_core::report::{CpuInterval, HostRecord, Report};
use nsperf_core::stats::summarize_series;

use super::Iperf3Shared;
use super::wire::{Results, StreamResult, stream_index};
use crate::config::Protocol;
use crate::drive::ClientRun;
use crate::results::{SideResults, StreamRecord};
use crate::summary::{
    DirectionSummary, NetInterval, NetReport, NetSpec, NetSummary, Peer, StreamDirection,
    UdpSummary,
};

/// The iperf3 peer's result of stream `index` (0-based).
fn peer_stream(r: &Results, index: u32) -> Option<&StreamResult> {
    r.streams.iter().find(|s| stream_index(s.id) == Some(index))
}

/// One direction: this end's records `ours` (all sending, or all receiving).
fn direction(
    name: StreamDirection,
    side: &SideResults,
    ours: &[&StreamRecord],
    peer: &Results,
    p: &crate::config::TestParams,
    out: &mut Vec<NetInterval>,
) -> DirectionSummary {
    let warm = p.warmup_ns as f64 / 1e9;
    let sending = ours.first().is_some_and(|r| r.sending);
    let mut series = Vec::new();
    for (i, mark) in side.intervals.iter().enumerate() {
        let rate = |b: u64| {
            if mark.length_s > 0.0 {
                b as f64 * 8.0 / mark.length_s
            } else {
                0.0
            }
        };
        let mut agg = NetInterval {
            start_s: mark.start_s,
            length_s: mark.length_s,
            direction: name,
            ..NetInterval::default()
        };
        let mut total = 0u64;
        for rec in ours {
            let b = rec.bytes_in(i);
            total += b;
            let sample = rec.samples.get(i);
            let udp_rx = sample.and_then(|s| s.udp);
            let prev_udp = if i == 0 {
                Some(Default::default())
            } else {
                rec.samples.get(i - 1).and_then(|s| s.udp)
            };
            let (lost, msgs) = match (udp_rx, prev_udp) {
                (Some(c), Some(pv)) => (
                    Some((c.expected - c.datagrams).saturating_sub(pv.expected - pv.datagrams)),
                    Some(c.datagrams.saturating_sub(pv.datagrams)),
                ),
                _ => (None, None),
            };
            let retr = (sending && p.protocol == Protocol::Tcp).then(|| rec.retransmits_in(i));
            out.push(NetInterval {
                start_s: mark.start_s,
                length_s: mark.length_s,
                stream: Some(rec.id),
                direction: name,
                sent_bytes: sending.then_some(b),
                received_bytes: (!sending).then_some(b),
                throughput_bps: rate(b),
                retransmits: retr,
                messages: msgs,
                sender_tcp: if sending {
                    sample.and_then(|s| s.tcp)
                } else {
                    None
                },
                receiver_tcp: if sending {
                    None
                } else {
                    sample.and_then(|s| s.tcp)
                },
                lost,
                jitter_ns: udp_rx.map(|u| u.jitter_ns),
                latency: None,
            });
            if let Some(r) = retr {
                *agg.retransmits.get_or_insert(0) += r;
            }
            if let Some(l) = lost {
                *agg.lost.get_or_insert(0) += l;
            }
            if let Some(m) = msgs {
                *agg.messages.get_or_insert(0) += m;
            }
        }
        if sending {
            agg.sent_bytes = Some(total);
        } else {
            agg.received_bytes = Some(total);
        }
        agg.throughput_bps = rate(total);
        series.push((mark.start_s, mark.length_s, agg.throughput_bps));
        out.push(agg);
    }
    let s = summarize_series(&series, warm);
    let mine: u64 = ours
        .iter()
        .map(|r| super::bytes_after_warmup(side, r, warm))
        .sum();
    let theirs: Vec<&StreamResult> = ours
        .iter()
        .filter_map(|r| peer_stream(peer, r.id))
        .collect();
    let their_bytes: u64 = theirs.iter().map(|s| s.bytes.max(0) as u64).sum();
    let their_secs = theirs
        .iter()
        .map(|s| s.end_time - s.start_time)
        .fold(0.0, f64::max);
    let tcp_last = |r: &&StreamRecord| r.samples.iter().rev().find_map(|s| s.tcp);
    let rtts: Vec<f64> = ours
        .iter()
        .flat_map(|r| r.samples.iter().filter_map(|s| s.tcp))
        .map(|t| t.rtt_us as f64)
        .filter(|&r| r > 0.0)
        .collect();
    let mut d = DirectionSummary {
        throughput_bps: s.sustained_mean,
        mean_bps: s.mean,
        peak_interval_bps: s.peak,
        ..DirectionSummary::default()
    };
    if sending {
        // iperf3's receiver figure: its bytes over its seconds.
        d.sent_bytes = mine;
        d.received_bytes = their_bytes;
        if their_secs > 0.0 {
            d.throughput_bps = their_bytes as f64 * 8.0 / their_secs;
        }
        d.retransmits = ours
            .iter()
            .filter_map(tcp_last)
            .map(|t| t.total_retrans as u64)
            .sum();
        d.rtt_mean_us = nsperf_core::stats::mean(&rtts);
        d.sender_sndbuf_bytes = ours.iter().map(|r| r.sndbuf_bytes).max().unwrap_or(0);
    } else {
        d.sent_bytes = their_bytes;
        d.received_bytes = mine;
        d.retransmits = theirs.iter().map(|s| s.retransmits.max(0) as u64).sum();
        d.receiver_rcvbuf_bytes = ours.iter().map(|r| r.rcvbuf_bytes).max().unwrap_or(0);
    }
    d
}

/// UDP totals: for the direction nsperf sends, the iperf3 receiver's loss and jitter.
fn udp(side: &SideResults, peer: &Results, t_after: f64) -> UdpSummary {
    let mut u = UdpSummary::default();
    let mut jitters = Vec::new();
    for rec in &side.streams {
        let last = rec.samples.last().cloned().unwrap_or_default();
        let theirs = peer_stream(peer, rec.id);
        if rec.sending {
            u.sent_datagrams += last.messages;
            if let Some(t) = theirs {
                let got = (t.packets - t.errors).max(0) as u64;
                u.received_datagrams += got;
                jitters.push(t.jitter * 1e9);
            }
        } else if let Some(c) = last.udp {
            u.sent_datagrams += theirs.map_or(c.expected, |t| t.packets.max(0) as u64);
            u.received_datagrams += c.datagrams;
            u.out_of_order += c.out_of_order;
            u.duplicates += c.duplicates;
            u.kernel_drops += c.kernel_drops;
            jitters.push(c.jitter_ns);
        }
    }
    u.lost_datagrams = u.sent_datagrams.saturating_sub(u.received_datagrams);
    if u.sent_datagrams > 0 {
        u.loss_pct = 100.0 * u.lost_datagrams as f64 / u.sent_datagrams as f64;
    }
    u.jitter_ns = nsperf_core::stats::mean(&jitters).unwrap_or(0.0);
    if t_after > 0.0 {
        u.received_datagrams_per_s = u.received_datagrams as f64 / t_after;
    }
    u
}

/// Builds the report of a run against an iperf3 server.
pub fn build(
    run: &ClientRun,
    shared: &Iperf3Shared,
    mut spec: NetSpec,
    client_facts: nsperf_core::host::HostFacts,
) -> NetReport {
    spec.peer = Peer::Iperf3;
    let p = &run.params;
    let side = &run.client;
    let mut intervals = Vec::new();
    let mut summary = NetSummary::default();
    let up: Vec<&StreamRecord> = side.streams.iter().filter(|r| r.sending).collect();
    let down: Vec<&StreamRecord> = side.streams.iter().filter(|r| !r.sending).collect();
    if !up.is_empty() {
        summary.up = Some(direction(
            StreamDirection::Up,
            side,
            &up,
            &shared.server,
            p,
            &mut intervals,
        ));
    }
    if !down.is_empty() {
        summary.down = Some(direction(
            StreamDirection::Down,
            side,
            &down,
            &shared.server,
            p,
            &mut intervals,
        ));
    }
    for d in [&summary.up, &summary.down].into_iter().flatten() {
        summary.throughput_bps += d.throughput_bps;
        summary.mean_bps += d.mean_bps;
        summary.sent_bytes += d.sent_bytes;
        summary.received_bytes += d.received_bytes;
        summary.retransmits += d.retransmits;
    }
    summary.peak_interval_bps = side
        .intervals
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let b: u64 = side.streams.iter().map(|r| r.bytes_in(i)).sum();
            if m.length_s > 0.0 {
                b as f64 * 8.0 / m.length_s
            } else {
                0.0
            }
        })
        .fold(0.0, f64::max);
    let warm = p.warmup_ns as f64 / 1e9;
    if p.protocol == Protocol::Udp {
        let t_after: f64 = side.intervals.iter().map(|m| m.length_s).sum::<f64>() - warm;
        summary.udp = Some(udp(side, &shared.server, t_after));
    }
    summary.stopped_by = Some(run.stopped_by);
    summary.client_busiest_core_pct = side.busiest_core_mean_pct();
    summary.client_cpu_awake = side.cpu_awake;
    summary.iperf3_server = Some(shared.server.clone());
    let mut r = Report::new(nsperf_core::report::Command::Net, spec, summary);
    r.measured_unix_ns = Some(run.measured_unix_ns);
    r.duration_ns = run.duration_ns;
    r.intervals = intervals;
    r.hosts = vec![HostRecord {
        role: "client".into(),
        facts: client_facts,
    }];
    for (mark, cpu) in side.intervals.iter().zip(&side.cpu) {
        r.cpu.push(CpuInterval {
            role: side.role.clone(),
            start_s: mark.start_s,
            length_s: mark.length_s,
            cpu: cpu.clone(),
        });
    }
    r.findings = crate::findings::all(run, &r.summary, false);
    r
}
