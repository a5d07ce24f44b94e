//! The live view (issue 22, item 5): idle connections aged out in capture time, and the
//! per-interval figures, driven by packets and their times only (no clock).

use crate::reader::RawPacket;
use crate::testkit::{Seg, tcp_frame};
use crate::wire::link::LinkType;
use crate::wire::tcp::flags::{ACK, SYN};
use crate::{Analyzer, TraceConfig};

const S: i64 = 1_000_000_000;

/// A frame of the connection from port `port` to 10.0.0.2:80, sent by the client when
/// `from_a`.
fn frame(port: u16, from_a: bool, seq: u32, ack: u32, flags: u8, len: usize) -> Vec<u8> {
    let (a, b) = (([10, 0, 0, 1], port), ([10, 0, 0, 2], 80));
    tcp_frame(&Seg {
        src: if from_a { a } else { b },
        dst: if from_a { b } else { a },
        seq,
        ack,
        flags,
        window: 1000,
        len,
        ip_id: seq as u16 ^ u16::from(from_a),
        syn_opts: (flags & SYN != 0).then_some((1460, 0)),
        ..Seg::default()
    })
}

fn feed(an: &mut Analyzer, t: i64, f: &[u8]) {
    an.packet(&RawPacket {
        ts_ns: t,
        link: LinkType::Ethernet,
        data: f,
        orig_len: f.len() as u32,
    });
}

/// Connection on `port` opened at `t`: handshake and one data segment each way.
fn open(an: &mut Analyzer, port: u16, t: i64) {
    feed(an, t, &frame(port, true, 0, 0, SYN, 0));
    feed(an, t + 1, &frame(port, false, 0, 1, SYN | ACK, 0));
    feed(an, t + 2, &frame(port, true, 1, 1, ACK, 100));
    feed(an, t + 3, &frame(port, false, 1, 101, ACK, 0));
}

/// Two connections open; one falls silent for longer than the idle timeout while the other
/// keeps sending: the silent one is summarised and released (aged out, counted), and its next
/// packet starts a new connection. With no timeout, nothing is aged out.
#[test]
fn idle_connections_are_aged_out_in_capture_time() {
    let run = |idle_ns: i64| {
        let cfg = TraceConfig {
            idle_ns,
            ..TraceConfig::default()
        };
        let mut an = Analyzer::new(cfg, Vec::new());
        open(&mut an, 1001, 0);
        open(&mut an, 1002, 10);
        let mut most_live_late = 0;
        // port 1002 sends one segment a second for 100 s; port 1001 is silent
        let mut seq = 101;
        for i in 1..=100 {
            feed(&mut an, i * S, &frame(1002, true, seq, 1, ACK, 100));
            seq += 100;
            if i > 61 {
                most_live_late = most_live_late.max(an.live_connections());
            }
        }
        // then port 1001 speaks again
        feed(&mut an, 101 * S, &frame(1001, true, 101, 1, ACK, 100));
        let (s, _) = an.finish(Default::default());
        (s, most_live_late)
    };
    let (aged, live_late) = run(60 * S);
    assert_eq!(live_late, 1, "the idle connection is released after 60 s");
    assert_eq!(aged.connections_aged_out, 1);
    assert_eq!(aged.connection_count, 3, "its next packet starts a new one");
    let c1 = &aged.connections[0];
    assert!(c1.aged_out && c1.a.ends_with(":1001"));
    assert_eq!(c1.a_to_b.packets, 2);
    assert!(!aged.connections[1].aged_out);
    let c3 = &aged.connections[2];
    assert!(c3.a.ends_with(":1001") && !c3.aged_out && !c3.handshake_seen);
    let json = serde_json::to_value(&aged).unwrap();
    assert_eq!(json["connections_aged_out"], 1);
    assert_eq!(json["connections"][0]["aged_out"], true);
    assert!(json["connections"][1].get("aged_out").is_none());

    let (kept, live_late) = run(0);
    assert_eq!(live_late, 2);
    assert_eq!(kept.connections_aged_out, 0);
    assert_eq!(kept.connection_count, 2);
    assert_eq!(kept.connections[0].a_to_b.packets, 3);

    // A packet after a silence longer than the timeout starts a new connection even before
    // a sweep found it (the sweep runs at most once a second of capture time).
    let mut an = Analyzer::new(
        TraceConfig {
            idle_ns: 5 * S,
            ..TraceConfig::default()
        },
        Vec::new(),
    );
    open(&mut an, 1001, 0);
    feed(&mut an, 5 * S + 10, &frame(1001, true, 101, 1, ACK, 100));
    let (s, _) = an.finish(Default::default());
    assert_eq!((s.connection_count, s.connections_aged_out), (2, 1));
}

/// Each interval counts what came since the previous one: packets, bytes, new connections,
/// and the connections most active in it, with their verdict so far.
#[test]
fn intervals_count_what_came_since_the_previous_one() {
    let mut an = Analyzer::new(TraceConfig::default(), Vec::new());
    let first = an.interval(3);
    assert_eq!(first.packets, 0);
    assert_eq!(first.last_packet_unix_ns, 0);
    open(&mut an, 1001, S);
    open(&mut an, 1002, S + 100);
    feed(&mut an, S + 200, &frame(1002, true, 101, 1, ACK, 1000));
    let i1 = an.interval(1);
    assert_eq!(i1.packets, 9);
    assert_eq!((i1.new_connections, i1.active_connections), (2, 2));
    assert_eq!(i1.live_connections, 2);
    assert_eq!(i1.unique_bytes, 1200);
    assert_eq!(i1.connections.len(), 1, "only the most active one");
    let c = &i1.connections[0];
    assert!(c.b.ends_with(":80") && c.a.ends_with(":1002"));
    assert_eq!((c.packets, c.unique_bytes), (5, 1100));
    assert_eq!(c.limit, crate::Limit::TooShort);
    assert_eq!(i1.last_packet_unix_ns, S + 200);
    // next interval: one retransmission on 1001 only
    feed(&mut an, 2 * S, &frame(1001, true, 1, 1, ACK, 100));
    let i2 = an.interval(3);
    assert_eq!(
        (i2.packets, i2.new_connections, i2.active_connections),
        (1, 0, 1)
    );
    assert_eq!(i2.retransmitted_packets, 1);
    assert_eq!(i2.connections.len(), 1);
    assert_eq!(i2.connections[0].retransmitted_packets, 1);
    assert_eq!(i2.connections[0].unique_bytes, 0);
    // the intervals add up to the totals
    let (s, _) = an.finish(Default::default());
    assert_eq!(s.packets, first.packets + i1.packets + i2.packets);
}
