//! The human output of `nsperf net` after the run: the per-stream totals, the summary and
//! the findings (the interval rows are printed as they end, `rows`), and the CSV of the
//! intervals.

use std::io::Write;

use nsperf_core::table::Table;
use nsperf_core::units::{BitRate, Bytes};
use nsperf_net::{
    Direction, Mode, NetInterval, NetReport, Peer, Protocol, StreamDirection, TestParams,
};

use super::latency_text;
use super::rows::Rates;

pub fn print_csv(r: &NetReport) -> anyhow::Result<()> {
    let mut w = nsperf_core::csv::CsvWriter::new();
    w.record([
        "start_s",
        "length_s",
        "stream",
        "direction",
        "sent_bytes",
        "received_bytes",
        "throughput_bps",
        "retransmits",
        "messages",
        "lost",
        "jitter_ns",
        "sender_rtt_us",
        "sender_cwnd",
        "lat_p50_ns",
        "lat_p99_ns",
        "lat_max_ns",
    ]);
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    for i in &r.intervals {
        w.record([
            format!("{:.3}", i.start_s),
            format!("{:.3}", i.length_s),
            i.stream
                .map(|s| s.to_string())
                .unwrap_or_else(|| "all".into()),
            i.direction.to_string(),
            opt(i.sent_bytes),
            opt(i.received_bytes),
            format!("{:.0}", i.throughput_bps),
            opt(i.retransmits),
            opt(i.messages),
            opt(i.lost),
            i.jitter_ns.map(|j| format!("{j:.0}")).unwrap_or_default(),
            opt(i.sender_tcp.map(|t| t.rtt_us as u64)),
            opt(i.sender_tcp.map(|t| t.snd_cwnd as u64)),
            opt(i.latency.map(|l| l.p50_ns)),
            opt(i.latency.map(|l| l.p99_ns)),
            opt(i.latency.map(|l| l.max_ns)),
        ]);
    }
    std::io::stdout()
        .lock()
        .write_all(w.into_string().as_bytes())?;
    Ok(())
}

/// The first line: what is measured against whom. Printed as the first interval ends, so
/// the in-process server's port (`--loopback`) is not in it; an iperf3 server is named in
/// the summary.
pub fn describe(target: &str, port: Option<u16>, p: &TestParams, rate_defaulted: bool) -> String {
    let what = match p.mode {
        Mode::Stream => format!(
            "{} {}, {} stream{} of {} {}",
            match p.protocol {
                Protocol::Tcp => "TCP",
                Protocol::Udp => "UDP",
            },
            match p.direction {
                Direction::Up => "client → server",
                Direction::Down => "server → client (-R)",
                Direction::Both => "both ways (--bidir)",
            },
            p.streams,
            if p.streams == 1 { "" } else { "s" },
            Bytes(p.len as u64),
            if p.protocol == Protocol::Udp {
                "datagrams"
            } else {
                "writes"
            },
        ),
        Mode::Rr {
            request_bytes,
            response_bytes,
            burst,
        } => format!(
            "TCP request/response {}/{}, {} stream{}{}",
            Bytes(request_bytes as u64),
            Bytes(response_bytes as u64),
            p.streams,
            if p.streams == 1 { "" } else { "s" },
            if burst > 1 {
                format!(", {burst} transactions in flight on each")
            } else {
                String::new()
            }
        ),
        Mode::Sweep {
            min_bytes,
            max_bytes,
        } => format!(
            "TCP message-size sweep {}..{}",
            Bytes(min_bytes as u64),
            Bytes(max_bytes as u64)
        ),
    };
    let amount = match (p.bytes, p.duration_ns) {
        (0, t) => format!("{} s", t as f64 / 1e9),
        (n, 0) => format!("{} per direction", Bytes(n)),
        (n, t) => format!("{} per direction (at most {} s)", Bytes(n), t as f64 / 1e9),
    };
    let rate = match (p.mode, p.rate_bps) {
        (Mode::Stream, r) if r > 0.0 => format!(
            ", {} per stream{}",
            BitRate(r),
            if rate_defaulted {
                " (UDP's default, as iperf3's; -b 0 for unlimited)"
            } else {
                ""
            }
        ),
        _ => String::new(),
    };
    format!(
        "nsperf net {target}{}: {what}{rate}, {amount}{}{}",
        match port {
            Some(port) => format!(":{port}"),
            None => " (loopback)".into(),
        },
        if p.warmup_ns > 0 {
            format!(" after {} s warm-up", p.warmup_ns as f64 / 1e9)
        } else {
            String::new()
        },
        match p.tos {
            Some(t) => format!(", TOS {t:#04x} (DSCP {})", t >> 2),
            None => String::new(),
        }
    )
}

/// Everything after the interval rows: per-stream totals (several streams), the summary and
/// the findings; the sweep's table for a sweep.
pub fn print_human(r: &NetReport, rates: Rates) {
    let s = &r.summary;
    let p = &r.spec.params;
    if let Mode::Sweep { .. } = p.mode {
        let mut t = Table::new([
            "message bytes",
            "round trips",
            "RTT p50",
            "RTT best trial",
            "throughput",
        ]);
        for pt in &s.sweep {
            t.row([
                pt.size_bytes.to_string(),
                pt.round_trips.to_string(),
                format!("{:.1} µs", pt.rtt_p50_ns as f64 / 1e3),
                format!("{:.1} µs", pt.rtt_best_ns / 1e3),
                rates.show(pt.throughput_bps),
            ]);
        }
        print!("{}", t.render());
    } else if p.mode == Mode::Stream && p.stream_count() > 1 {
        println!();
        print!("{}", per_stream(r, rates).render());
    }
    println!();
    let mut t = Table::new(["summary", ""]);
    let sweep = matches!(p.mode, Mode::Sweep { .. });
    if !sweep {
        throughput_rows(&mut t, r, rates);
    }
    if r.spec.peer == Peer::Iperf3 {
        t.row([
            "server".to_string(),
            "an iperf3 server: it shares only its totals and CPU".to_string(),
        ]);
    }
    let server_cpu = match &s.iperf3_server {
        // iperf3 shares its process's CPU share of the whole host, not per core.
        Some(i3) => format!(
            "server (iperf3's own figure) {:.0} % of the host",
            i3.cpu_util_total
        ),
        None => format!("server {:.0} %", s.server_busiest_core_pct),
    };
    t.row([
        "busiest core, mean".to_string(),
        format!(
            "client {:.0} % / {server_cpu}{}",
            s.client_busiest_core_pct,
            if s.one_host {
                " (one host: the same cores)"
            } else {
                ""
            }
        ),
    ]);
    if p.awake {
        let yes = |b: bool| if b { "held" } else { "not held (needs root)" };
        t.row([
            "CPUs out of deep idle (--awake)".to_string(),
            format!(
                "client {} / server {}",
                yes(s.client_cpu_awake),
                yes(s.server_cpu_awake)
            ),
        ]);
    }
    print!("{}", t.render());
    if !r.findings.is_empty() {
        println!();
        println!("findings:");
        for f in &r.findings {
            println!("  - {}", f.message);
        }
    }
}

fn throughput_rows(t: &mut Table, r: &NetReport, rates: Rates) {
    let s = &r.summary;
    let p = &r.spec.params;
    t.row([
        "throughput (receiver, after warm-up)".to_string(),
        rates.show(s.throughput_bps),
    ]);
    t.row(["mean incl. warm-up".to_string(), rates.show(s.mean_bps)]);
    t.row(["peak interval".to_string(), rates.show(s.peak_interval_bps)]);
    t.row([
        "sent / received".to_string(),
        format!("{} / {}", Bytes(s.sent_bytes), Bytes(s.received_bytes)),
    ]);
    if p.protocol == Protocol::Tcp {
        t.row(["retransmits".to_string(), s.retransmits.to_string()]);
    }
    for (name, d) in [
        (StreamDirection::Up, &s.up),
        (StreamDirection::Down, &s.down),
    ] {
        if let Some(d) = d {
            if s.up.is_some() && s.down.is_some() {
                t.row([format!("{name} throughput"), rates.show(d.throughput_bps)]);
            }
            // An iperf3 server does not share its socket buffers: its end is unknown.
            let iperf3 = s.iperf3_server.is_some();
            let unknown = "? (iperf3 does not share it)".to_string();
            let (snd, rcv) = match (iperf3, name) {
                (true, StreamDirection::Up) => (Bytes(d.sender_sndbuf_bytes).to_string(), unknown),
                (true, _) => (unknown, Bytes(d.receiver_rcvbuf_bytes).to_string()),
                _ => (
                    Bytes(d.sender_sndbuf_bytes).to_string(),
                    Bytes(d.receiver_rcvbuf_bytes).to_string(),
                ),
            };
            t.row([
                format!("{name} buffers (kernel's grant)"),
                format!("sender snd {snd} / receiver rcv {rcv}"),
            ]);
            if let Some(cwnd) = last_cwnd(r, name) {
                t.row([
                    format!("{name} cwnd (sender, last interval)"),
                    Bytes(cwnd).to_string(),
                ]);
            }
            if let Some(rtt) = d.rtt_mean_us {
                t.row([
                    format!("{name} RTT (sender, mean)"),
                    if rtt >= 1000.0 {
                        format!("{:.1} ms", rtt / 1e3)
                    } else {
                        format!("{rtt:.1} µs")
                    },
                ]);
            }
        }
    }
    if let Some(tps) = s.transactions_per_s {
        t.row(["transactions".to_string(), format!("{tps:.0} /s")]);
        if let (Some(c), Some(sv)) = (s.transactions, s.server_transactions) {
            t.row([
                "transactions done / answered".to_string(),
                format!("client {c} / server {sv}"),
            ]);
        }
        let us = |v: Option<u64>| {
            v.map(|x| format!("{:.1}", x as f64 / 1e3))
                .unwrap_or_default()
        };
        t.row([
            "latency p50 / p90 / p99 / p99.9".to_string(),
            format!(
                "{} / {} / {} / {} µs",
                us(s.lat_p50_ns),
                us(s.lat_p90_ns),
                us(s.lat_p99_ns),
                us(s.lat_p999_ns)
            ),
        ]);
    }
    if let Some(u) = &s.udp {
        t.row([
            "datagrams sent / received".to_string(),
            format!("{} / {}", u.sent_datagrams, u.received_datagrams),
        ]);
        t.row([
            "received datagrams/s".to_string(),
            format!("{:.0}", u.received_datagrams_per_s),
        ]);
        t.row([
            "lost".to_string(),
            format!("{} ({:.3} %)", u.lost_datagrams, u.loss_pct),
        ]);
        t.row([
            "out of order / duplicates".to_string(),
            format!("{} / {}", u.out_of_order, u.duplicates),
        ]);
        t.row([
            "jitter (RFC 3550)".to_string(),
            format!("{:.1} µs", u.jitter_ns / 1e3),
        ]);
    }
}

/// The sender's congestion window at the last interval of a single-stream direction (the
/// per-stream table has it with several), bytes.
fn last_cwnd(r: &NetReport, dir: StreamDirection) -> Option<u64> {
    if r.spec.params.stream_count() > 1 || r.spec.params.protocol != Protocol::Tcp {
        return None;
    }
    r.intervals
        .iter()
        .rev()
        .filter(|i| i.stream.is_some() && i.direction == dir)
        .find_map(|i| i.sender_tcp)
        .map(|t| t.snd_cwnd as u64 * t.snd_mss as u64)
}

/// One row per stream: the receiver's bytes and rate after the warm-up, the sender's
/// retransmissions, and its congestion window and RTT at the last interval (iperf3's
/// per-stream lines, with both ends' figures).
fn per_stream(r: &NetReport, rates: Rates) -> Table {
    let p = &r.spec.params;
    let udp = p.protocol == Protocol::Udp;
    let warmup_s = p.warmup_ns as f64 / 1e9;
    let mut head = vec!["stream", "dir", "sent", "received", "throughput"];
    head.extend(if udp {
        ["lost", "jitter"]
    } else {
        ["retr", "cwnd"]
    });
    if !udp {
        head.push("rtt");
    }
    let mut t = Table::new(head);
    // By stream, then direction (`StreamDirection`'s order is its names': down, up).
    let mut ids: Vec<(u32, StreamDirection)> = r
        .intervals
        .iter()
        .filter_map(|i| i.stream.map(|s| (s, i.direction)))
        .collect();
    ids.sort();
    ids.dedup();
    for (id, dir) in ids {
        let rows: Vec<&NetInterval> = r
            .intervals
            .iter()
            .filter(|i| i.stream == Some(id) && i.direction == dir)
            .collect();
        let sum = |f: fn(&NetInterval) -> Option<u64>| -> Option<u64> {
            rows.iter().map(|i| f(i)).sum::<Option<u64>>()
        };
        let after: Vec<&&NetInterval> = rows
            .iter()
            .filter(|i| i.start_s + 1e-9 >= warmup_s)
            .collect();
        let secs: f64 = after.iter().map(|i| i.length_s).sum();
        // None when the receiver keeps its figures to itself (an iperf3 server).
        let got: Option<u64> = after.iter().map(|i| i.received_bytes).sum();
        let opt = |v: Option<u64>, show: fn(u64) -> String| v.map(show).unwrap_or_default();
        let last_tcp = rows.iter().rev().find_map(|i| i.sender_tcp);
        let mut row = vec![
            id.to_string(),
            dir.to_string(),
            opt(sum(|i| i.sent_bytes), |b| Bytes(b).to_string()),
            opt(sum(|i| i.received_bytes), |b| Bytes(b).to_string()),
            match got {
                Some(got) if secs > 0.0 => rates.show(got as f64 * 8.0 / secs),
                Some(_) => String::new(),
                None => "? (not shared)".into(),
            },
        ];
        if udp {
            row.push(opt(sum(|i| i.lost), |l| l.to_string()));
            row.push(
                rows.iter()
                    .rev()
                    .find_map(|i| i.jitter_ns)
                    .map(|j| format!("{:.1} µs", j / 1e3))
                    .unwrap_or_default(),
            );
        } else {
            row.push(opt(sum(|i| i.retransmits), |n| n.to_string()));
            row.push(opt(
                last_tcp.map(|t| t.snd_cwnd as u64 * t.snd_mss as u64),
                |b| Bytes(b).to_string(),
            ));
            row.push(opt(last_tcp.map(|t| t.rtt_us as u64), |us| {
                latency_text(us * 1000)
            }));
        }
        t.row(row);
    }
    t
}
