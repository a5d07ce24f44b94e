//! `--json-compat iperf3`: a `net` report as the document `iperf3 -c … -J` prints, so the
//! scripts and dashboards that read iperf3's keys keep working (`start.test_start`,
//! `intervals[].streams[]`/`.sum`/`.sum_bidir_reverse`, `end.streams[]`, `end.sum_sent`,
//! `end.sum_received`, their `_bidir_reverse` twins, UDP's `end.sum`, and
//! `end.cpu_utilization_percent`).
//!
//! The figures are nsperf's: interval rows are the client's own (what it sent, or received
//! with `-R`), as in iperf3; the sums count from the end of the warm-up (`-O`), as iperf3's
//! do. Fields iperf3 has and nsperf does not measure (`pmtu`, the per-stream `socket`
//! descriptor) are left out; `socket` holds iperf3's stream id instead.

use serde_json::{Map, Value, json};

use super::wire::stream_id;
use crate::config::{Direction, Protocol};
use crate::summary::{DirectionSummary, NetInterval, NetReport, StreamDirection};

/// One direction's rows after the warm-up.
struct Dir<'a> {
    rows: Vec<&'a NetInterval>,
    summary: &'a DirectionSummary,
    /// The client sends in this direction.
    client_sends: bool,
}

fn rate(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    }
}

/// The client's own byte count of a row (iperf3 intervals are the client's view).
fn client_bytes(row: &NetInterval, client_sends: bool) -> u64 {
    if client_sends {
        row.sent_bytes
    } else {
        row.received_bytes
    }
    .unwrap_or(0)
}

/// `sum_sent`, `sum_received` (and UDP's `sum`) of one direction.
fn sums(r: &NetReport, d: &Dir<'_>, warm: f64) -> (Value, Value, Option<Value>) {
    let agg: Vec<&&NetInterval> = d.rows.iter().filter(|i| i.stream.is_none()).collect();
    let secs: f64 = agg.iter().map(|i| i.length_s).sum();
    let all = |f: fn(&NetInterval) -> Option<u64>| -> Option<u64> {
        agg.iter().map(|i| f(i)).sum::<Option<u64>>()
    };
    // Per-interval sums after the warm-up when both ends' rows exist; else the totals.
    let warm_free = warm <= 0.0;
    let sent = all(|i| i.sent_bytes)
        .filter(|_| !warm_free || r.spec.peer == crate::summary::Peer::Nsperf)
        .unwrap_or(d.summary.sent_bytes);
    let received = all(|i| i.received_bytes)
        .filter(|_| !warm_free || r.spec.peer == crate::summary::Peer::Nsperf)
        .unwrap_or(d.summary.received_bytes);
    let tcp = r.spec.params.protocol == Protocol::Tcp;
    let mut s = json!({
        "start": 0, "end": secs, "seconds": secs, "bytes": sent,
        "bits_per_second": rate(sent, secs), "sender": d.client_sends,
    });
    let mut rcv = json!({
        "start": 0, "end": secs, "seconds": secs, "bytes": received,
        "bits_per_second": rate(received, secs), "sender": d.client_sends,
    });
    if tcp {
        s["retransmits"] = json!(d.summary.retransmits);
        return (s, rcv, None);
    }
    // UDP: loss and jitter from the receiver's rows, else the run's totals.
    let lost = agg.iter().map(|i| i.lost).sum::<Option<u64>>();
    let got = agg.iter().map(|i| i.messages).sum::<Option<u64>>();
    let jitters: Vec<f64> = d
        .rows
        .iter()
        .filter(|i| i.stream.is_some())
        .filter_map(|i| i.jitter_ns)
        .collect();
    let (lost, packets, jitter_ns) = match (lost, got, &r.summary.udp) {
        (Some(l), Some(g), _) => (l, l + g, jitters.last().copied().unwrap_or(0.0)),
        (_, _, Some(u)) => (u.lost_datagrams, u.sent_datagrams, u.jitter_ns),
        _ => (0, 0, 0.0),
    };
    let pct = if packets > 0 {
        100.0 * lost as f64 / packets as f64
    } else {
        0.0
    };
    for v in [&mut s, &mut rcv] {
        v["lost_packets"] = json!(lost);
        v["packets"] = json!(packets);
        v["lost_percent"] = json!(pct);
    }
    s["jitter_ms"] = json!(0);
    rcv["jitter_ms"] = json!(jitter_ns / 1e6);
    rcv["sender"] = json!(false);
    let mut sum = rcv.clone();
    sum["sender"] = json!(d.client_sends);
    (s, rcv, Some(sum))
}

fn interval_row(row: &NetInterval, d: &Dir<'_>, warm: f64, tcp: bool) -> Value {
    let bytes = client_bytes(row, d.client_sends);
    let mut v = json!({
        "start": row.start_s, "end": row.start_s + row.length_s, "seconds": row.length_s,
        "bytes": bytes, "bits_per_second": rate(bytes, row.length_s),
        "omitted": row.start_s + 1e-9 < warm, "sender": d.client_sends,
    });
    if let Some(id) = row.stream {
        v["socket"] = json!(stream_id(id));
    }
    if tcp && d.client_sends {
        v["retransmits"] = json!(row.retransmits.unwrap_or(0));
        if let Some(t) = row.sender_tcp {
            v["snd_cwnd"] = json!(t.snd_cwnd as u64 * t.snd_mss.max(1) as u64);
            v["snd_wnd"] = json!(t.snd_wnd_bytes);
            v["rtt"] = json!(t.rtt_us);
            v["rttvar"] = json!(t.rttvar_us);
        }
    }
    if !tcp && let Some(m) = row.messages.or(row.stream.map(|_| 0)) {
        v["packets"] = json!(m);
    }
    v
}

/// The iperf3-shaped document of a `net` report (stream tests; request/response and the
/// sweep have no iperf3 equivalent and give `None`).
pub fn document(r: &NetReport) -> Option<Value> {
    let p = &r.spec.params;
    if p.mode != crate::config::Mode::Stream {
        return None;
    }
    let warm = p.warmup_ns as f64 / 1e9;
    let tcp = p.protocol == Protocol::Tcp;
    let after = |way: StreamDirection| -> Vec<&NetInterval> {
        r.intervals
            .iter()
            .filter(|i| i.direction == way && i.start_s + 1e-9 >= warm)
            .collect()
    };
    let mut dirs = Vec::new();
    if let Some(s) = &r.summary.up {
        dirs.push(Dir {
            rows: after(StreamDirection::Up),
            summary: s,
            client_sends: true,
        });
    }
    if let Some(s) = &r.summary.down {
        dirs.push(Dir {
            rows: after(StreamDirection::Down),
            summary: s,
            client_sends: false,
        });
    }
    // The main direction first (iperf3's `sum`), the other one as `_bidir_reverse`.
    let mut end = Map::new();
    let mut end_streams = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        let (sent, received, udp_sum) = sums(r, d, warm);
        end.insert(format!("sum_sent{}", suffix(i)), sent.clone());
        end.insert(format!("sum_received{}", suffix(i)), received.clone());
        if let Some(u) = udp_sum {
            end.insert(format!("sum{}", suffix(i)), u);
        }
        end_streams.extend(stream_ends(d, tcp));
    }
    end.insert("streams".into(), Value::Array(end_streams));
    end.insert("cpu_utilization_percent".into(), cpu_utilization(r));
    if let Some(cc) = r
        .summary
        .iperf3_server
        .as_ref()
        .and_then(|s| s.congestion_used.clone())
        .or(p.congestion.clone())
    {
        end.insert("receiver_tcp_congestion".into(), json!(cc));
    }
    let intervals = intervals(&dirs, warm, tcp);
    let start = start(r, warm, tcp);
    Some(json!({"start": start, "intervals": intervals, "end": end}))
}

/// iperf3's key suffix of direction `i`: the main one plain (`sum`), the other
/// `_bidir_reverse`.
fn suffix(i: usize) -> &'static str {
    if i == 0 { "" } else { "_bidir_reverse" }
}

/// The `end.streams` entries of one direction: each stream's totals (TCP: sender and
/// receiver, with retransmits and the sender's RTT and cwnd; UDP: loss and jitter).
fn stream_ends(d: &Dir<'_>, tcp: bool) -> Vec<Value> {
    let mut end_streams = Vec::new();
    let ids: std::collections::BTreeSet<u32> = d.rows.iter().filter_map(|x| x.stream).collect();
    for id in ids {
        let rows: Vec<&&NetInterval> = d.rows.iter().filter(|x| x.stream == Some(id)).collect();
        let secs: f64 = rows.iter().map(|x| x.length_s).sum();
        let b = |f: fn(&NetInterval) -> Option<u64>| rows.iter().map(|x| f(x)).sum::<Option<u64>>();
        let one = |bytes: Option<u64>| {
            json!({"socket": stream_id(id), "start": 0, "end": secs, "seconds": secs,
                   "bytes": bytes, "bits_per_second": bytes.map(|v| rate(v, secs)),
                   "sender": d.client_sends})
        };
        if tcp {
            let mut snd = one(b(|x| x.sent_bytes));
            let rtts: Vec<u32> = rows
                .iter()
                .filter_map(|x| x.sender_tcp)
                .map(|t| t.rtt_us)
                .collect();
            snd["retransmits"] = json!(rows.iter().filter_map(|x| x.retransmits).sum::<u64>());
            if let (Some(mx), Some(mn)) = (rtts.iter().max(), rtts.iter().min()) {
                snd["max_rtt"] = json!(mx);
                snd["min_rtt"] = json!(mn);
                snd["mean_rtt"] =
                    json!(rtts.iter().map(|&v| v as u64).sum::<u64>() / rtts.len() as u64);
                snd["max_snd_cwnd"] = json!(
                    rows.iter()
                        .filter_map(|x| x.sender_tcp)
                        .map(|t| t.snd_cwnd as u64 * t.snd_mss.max(1) as u64)
                        .max()
                );
            }
            end_streams.push(json!({"sender": snd, "receiver": one(b(|x| x.received_bytes))}));
        } else {
            let mut u = one(b(|x| x.received_bytes).or(b(|x| x.sent_bytes)));
            let lost: u64 = rows.iter().filter_map(|x| x.lost).sum();
            let got: u64 = rows.iter().filter_map(|x| x.messages).sum();
            u["lost_packets"] = json!(lost);
            u["packets"] = json!(lost + got);
            u["jitter_ms"] =
                json!(rows.iter().rev().find_map(|x| x.jitter_ns).unwrap_or(0.0) / 1e6);
            u["out_of_order"] = json!(0);
            end_streams.push(json!({"udp": u}));
        }
    }
    end_streams
}

/// `end.cpu_utilization_percent`: this host's, and the server's (iperf3's own figures
/// against an iperf3 server).
fn cpu_utilization(r: &NetReport) -> Value {
    let mean_cpu = |role: &str| {
        let v: Vec<f64> = r
            .cpu
            .iter()
            .filter(|c| c.role == role)
            .map(|c| c.cpu.process_pct)
            .collect();
        nsperf_core::stats::mean(&v).unwrap_or(0.0)
    };
    let mut cpu = json!({"host_total": mean_cpu("client")});
    match &r.summary.iperf3_server {
        Some(s) => {
            cpu["remote_total"] = json!(s.cpu_util_total);
            cpu["remote_user"] = json!(s.cpu_util_user);
            cpu["remote_system"] = json!(s.cpu_util_system);
        }
        None => cpu["remote_total"] = json!(mean_cpu("server")),
    }
    cpu
}

/// The `intervals`: one entry per interval of the main direction, the other direction's
/// interval of the same index beside it (each direction is on its receiver's clock).
fn intervals(dirs: &[Dir<'_>], warm: f64, tcp: bool) -> Vec<Value> {
    let starts = |d: &Dir<'_>| -> Vec<f64> {
        d.rows
            .iter()
            .filter(|x| x.stream.is_none())
            .map(|x| x.start_s)
            .collect()
    };
    let all_starts: Vec<Vec<f64>> = dirs.iter().map(starts).collect();
    let count = all_starts.first().map_or(0, Vec::len);
    let mut intervals = Vec::with_capacity(count);
    for k in 0..count {
        let mut streams = Vec::new();
        let mut entry = Map::new();
        for (i, d) in dirs.iter().enumerate() {
            let Some(&start) = all_starts[i].get(k) else {
                continue;
            };
            for row in d.rows.iter().filter(|x| (x.start_s - start).abs() < 1e-9) {
                let v = interval_row(row, d, warm, tcp);
                if row.stream.is_some() {
                    streams.push(v);
                } else {
                    entry.insert(format!("sum{}", suffix(i)), v);
                }
            }
        }
        entry.insert("streams".into(), Value::Array(streams));
        intervals.push(Value::Object(entry));
    }
    intervals
}

/// The `start` section: who, when, and the test's settings.
fn start(r: &NetReport, warm: f64, tcp: bool) -> Value {
    let p = &r.spec.params;
    let client = r.hosts.iter().find(|h| h.role == "client");
    let secs = r.started_unix_ns / 1_000_000_000;
    json!({
        "connected": [],
        "version": format!("nsperf {} (iperf3-compatible JSON)", r.nsperf_version),
        "system_info": client.map(|h| format!("{} {} {}", h.facts.hostname, h.facts.kernel, h.facts.arch)),
        "timestamp": {"timesecs": secs},
        "connecting_to": {"host": r.spec.target, "port": r.spec.port},
        "sock_bufsize": p.window.unwrap_or(0),
        "test_start": {
            "protocol": if tcp { "TCP" } else { "UDP" },
            "num_streams": p.streams,
            "blksize": p.len,
            "omit": warm,
            "duration": p.duration_ns as f64 / 1e9,
            "bytes": p.bytes,
            "blocks": 0,
            "reverse": u8::from(p.direction == Direction::Down),
            "bidir": u8::from(p.direction == Direction::Both),
            "tos": p.tos.unwrap_or(0),
            "target_bitrate": p.rate_bps,
        },
    })
}
