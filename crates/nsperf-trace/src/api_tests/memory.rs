//! Memory bounded by the live connections (issue 11, item 6). Alone in its process (a
//! child of the unit-test binary), so the process's resident memory is this test's.

use super::alone::{alone, test_name};

use crate::reader::RawPacket;
use crate::testkit::{Seg, tcp_frame};
use crate::wire::link::LinkType;
use crate::wire::tcp::flags::{ACK, FIN, SYN};
use crate::{Analyzer, ConnectionSpool, ConnectionStore, TraceConfig};

/// Item 6: 100 000 sequential connections analysed with memory bounded by the live ones.
#[test]
fn memory_is_bounded_by_the_live_connections() {
    // Alone in a process: the process's resident memory is this test's.
    alone(
        &test_name(module_path!(), "memory_is_bounded_by_the_live_connections"),
        memory_is_bounded_by_the_live_connections_body,
    );
}

fn memory_is_bounded_by_the_live_connections_body() {
    let n = 100_000u32;
    let mut an = Analyzer::new(TraceConfig::default(), ConnectionSpool::new());
    let rss_before = rss_bytes();
    let mut most_live = 0;
    let ms = 1_000_000i64;
    let mut frames = Vec::new();
    for i in 0..n {
        let t0 = i as i64 * 10 * ms;
        let port = 1024 + (i % 60000) as u16;
        let (a, b) = (([10, 0, (i >> 16) as u8, 1], port), ([10, 0, 0, 2], 80));
        let mk = |from_a: bool, seq: u32, ack: u32, flags: u8, len: usize| {
            tcp_frame(&Seg {
                src: if from_a { a } else { b },
                dst: if from_a { b } else { a },
                seq,
                ack,
                flags,
                window: 1000,
                len,
                ip_id: (i as u16).wrapping_mul(7).wrapping_add(flags as u16),
                syn_opts: (flags & SYN != 0).then_some((1460, 0)),
                ..Seg::default()
            })
        };
        frames.clear();
        frames.push((t0, mk(true, 0, 0, SYN, 0)));
        frames.push((t0 + ms, mk(false, 0, 1, SYN | ACK, 0)));
        frames.push((t0 + ms + 1, mk(true, 1, 1, ACK, 100)));
        frames.push((t0 + 2 * ms, mk(false, 1, 101, ACK, 1000)));
        frames.push((t0 + 3 * ms, mk(true, 101, 1001, ACK | FIN, 0)));
        frames.push((t0 + 4 * ms, mk(false, 1001, 102, ACK | FIN, 0)));
        frames.push((t0 + 5 * ms, mk(true, 102, 1002, ACK, 0)));
        for (t, f) in &frames {
            an.packet(&RawPacket {
                ts_ns: *t,
                link: LinkType::Ethernet,
                data: f,
                orig_len: f.len() as u32,
            });
        }
        most_live = most_live.max(an.live_connections());
    }
    let (s, _) = an.finish(Default::default());
    let grown = rss_bytes().saturating_sub(rss_before);
    assert_eq!(s.connection_count, u64::from(n));
    // two seconds of linger at one connection per 10 ms
    assert!(most_live <= 250, "{most_live} connections held at once");
    let mut count = 0u32;
    s.connections
        .each(&mut |c| {
            count += 1;
            assert_eq!(c.id, count);
        })
        .unwrap();
    assert_eq!(count, n);
    eprintln!("100000 connections: RSS grew by {} KiB", grown / 1024);
    assert!(grown < 48 << 20, "RSS grew by {grown} bytes");
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
