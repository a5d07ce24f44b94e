//! Memory with a throughput series (issue 11, item 6: `--bin 100us` over 20 000 short
//! connections reached 4.8 GB). Alone in its process (a child of the unit-test
//! binary) and one test, so the process's peak resident memory is this test's.

use super::alone::{alone, test_name};

use crate::reader::RawPacket;
use crate::testkit::{Seg, tcp_frame};
use crate::wire::link::LinkType;
use crate::wire::tcp::flags::{ACK, FIN, SYN};
use crate::{Analyzer, ConnectionSpool, ConnectionStore, TraceConfig, TraceInterval};

const MS: i64 = 1_000_000;

/// 100 µs bins, a series of their own for the 3 largest connections (`--bin 100us`).
fn config() -> TraceConfig {
    TraceConfig {
        bin_ns: 100_000,
        series_connections: 3,
        ..TraceConfig::default()
    }
}

/// Feeds one frame; returns its wire length.
fn feed(an: &mut Analyzer<ConnectionSpool>, t: i64, s: &Seg) -> u64 {
    let f = tcp_frame(s);
    an.packet(&RawPacket {
        ts_ns: t,
        link: LinkType::Ethernet,
        data: &f,
        orig_len: f.len() as u32,
    });
    f.len() as u64
}

fn seg(a: ([u8; 4], u16), b: ([u8; 4], u16), from_a: bool, seq: u32, ack: u32, flags: u8) -> Seg {
    Seg {
        src: if from_a { a } else { b },
        dst: if from_a { b } else { a },
        seq,
        ack,
        flags,
        window: 1000,
        ip_id: seq as u16 ^ ack as u16 ^ flags as u16,
        syn_opts: (flags & SYN != 0).then_some((1460, 0)),
        ..Seg::default()
    }
}

/// The aggregate rows: they must cover `[0, duration]` and add up to `wire` bytes.
fn check_aggregate(iv: &[TraceInterval], duration_s: f64, wire: u64) {
    let agg: Vec<&TraceInterval> = iv.iter().filter(|i| i.stream.is_none()).collect();
    let last = agg.last().expect("an aggregate series");
    assert!(
        last.start_s + last.length_s >= duration_s,
        "the series ends at {} s of a {duration_s} s capture",
        last.start_s + last.length_s
    );
    let bytes: f64 = agg
        .iter()
        .map(|i| i.throughput_bps * i.length_s / 8.0)
        .sum();
    assert!(
        (bytes - wire as f64).abs() < 1.0,
        "the series holds {bytes} of {wire} bytes"
    );
}

#[test]
fn series_memory_is_bounded_whatever_the_connections() {
    // Alone in a process: the process's peak resident memory is this test's.
    alone(
        &test_name(
            module_path!(),
            "series_memory_is_bounded_whatever_the_connections",
        ),
        series_memory_is_bounded_whatever_the_connections_body,
    );
}

fn series_memory_is_bounded_whatever_the_connections_body() {
    let base = peak_rss_bytes();
    // 20 000 sequential short connections, 10 ms apart (200 s of capture).
    let n = 20_000u32;
    let mut an = Analyzer::new(config(), ConnectionSpool::new());
    let mut wire = 0;
    for i in 0..n {
        let t0 = i as i64 * 10 * MS;
        let a = (
            [10, 0, (i >> 16) as u8, (i >> 8) as u8],
            1024 + (i % 60000) as u16,
        );
        let b = ([10, 0, 0, 2], 80);
        let mut d = |from_a, seq, ack, flags, len: usize, dt: i64| {
            let mut s = seg(a, b, from_a, seq, ack, flags);
            s.len = len;
            wire += feed(&mut an, t0 + dt, &s);
        };
        d(true, 0, 0, SYN, 0, 0);
        d(false, 0, 1, SYN | ACK, 0, MS);
        d(true, 1, 1, ACK, 100, MS + 1);
        d(false, 1, 101, ACK, 1000, 2 * MS);
        d(true, 101, 1001, ACK | FIN, 0, 3 * MS);
        d(false, 1001, 102, ACK | FIN, 0, 4 * MS);
        d(true, 102, 1002, ACK, 0, 5 * MS);
    }
    let (s, iv) = an.finish(Default::default());
    assert_eq!(s.connection_count, u64::from(n));
    let bins = s.series.expect("the series' bins");
    assert_eq!(bins.asked_s, 1e-4);
    check_aggregate(&iv, s.capture_duration_ns as f64 / 1e9, wire);
    let short = peak_rss_bytes().saturating_sub(base);
    eprintln!(
        "{n} short connections, --bin 100us: {} aggregate rows of {} s, peak RSS +{} MiB",
        iv.iter().filter(|i| i.stream.is_none()).count(),
        bins.used_s,
        short >> 20
    );
    drop(iv);
    drop(s);

    // 500 connections open at once for 40 s, each sending every 50 ms: every live connection
    // has a series until the end (before: 100 000 cells each, 1.2 GB).
    reset_peak_rss();
    let base = peak_rss_bytes();
    let conns = 500u32;
    let mut an = Analyzer::new(config(), ConnectionSpool::new());
    let mut wire = 0;
    let mut most_live = 0;
    let peer = |i: u32| ([10, 1, (i >> 8) as u8, i as u8], 2000 + i as u16);
    let server = ([10, 0, 0, 2], 80);
    for i in 0..conns {
        let t = i as i64 * 10_000;
        wire += feed(&mut an, t, &seg(peer(i), server, true, 0, 0, SYN));
        wire += feed(
            &mut an,
            t + 1000,
            &seg(peer(i), server, false, 0, 1, SYN | ACK),
        );
    }
    for round in 1..=800u32 {
        for i in 0..conns {
            let t = round as i64 * 50 * MS + i as i64 * 10_000;
            let seq = 1 + (round - 1) * 100 * (1 + i % 7);
            let mut d = seg(peer(i), server, true, seq, 1, ACK);
            d.len = 100 * (1 + i as usize % 7);
            wire += feed(&mut an, t, &d);
            let next = seq + d.len as u32;
            wire += feed(
                &mut an,
                t + 2000,
                &seg(peer(i), server, false, 1, next, ACK),
            );
        }
        most_live = most_live.max(an.live_connections());
    }
    let (s, iv) = an.finish(Default::default());
    assert_eq!(most_live, conns as usize);
    let bins = s.series.expect("the series' bins");
    assert!(bins.used_s > bins.asked_s, "{bins:?}");
    check_aggregate(&iv, s.capture_duration_ns as f64 / 1e9, wire);
    // The three largest connections have their series, complete.
    let mut largest = Vec::new();
    s.connections
        .each(&mut |c| largest.push((c.a_to_b.wire_bytes + c.b_to_a.wire_bytes, c.id)))
        .unwrap();
    // Largest first; the first seen among equals, as `--top` picks them.
    largest.sort_unstable_by_key(|&(bytes, id)| (std::cmp::Reverse(bytes), id));
    for &(bytes, id) in &largest[..3] {
        let got: f64 = iv
            .iter()
            .filter(|i| i.stream == Some(id))
            .map(|i| i.throughput_bps * i.length_s / 8.0)
            .sum();
        assert!(
            (got - bytes as f64).abs() < 1.0,
            "connection {id}: {got} of {bytes} bytes"
        );
    }
    let long = peak_rss_bytes().saturating_sub(base);
    eprintln!(
        "{conns} long connections at once, --bin 100us: bins of {} s, peak RSS +{} MiB",
        bins.used_s,
        long >> 20
    );
    for (what, grown) in [("short", short), ("long", long)] {
        assert!(
            grown < 160 << 20,
            "{what} connections: peak RSS grew by {grown} bytes"
        );
    }
}

/// The process's peak resident memory (VmHWM).
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Starts the peak over from the current resident memory (`clear_refs` 5, Linux 4.0+); when
/// the kernel refuses, the second figure also counts the first part's peak (a looser check).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
