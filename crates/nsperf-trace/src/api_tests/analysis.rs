//! The analysis on synthetic transfers built with a virtual clock: window-limited,
//! congestion-limited, and a capture that misses the handshake.

use crate::testkit::{Seg, pcap, tcp_frame};
use crate::wire::tcp::flags::{ACK, SYN};
use crate::{Limit, TraceConfig, analyze_bytes};

const C: ([u8; 4], u16) = ([10, 0, 0, 1], 40000);
const S: ([u8; 4], u16) = ([10, 0, 0, 2], 5201);
const MSS: u32 = 1000;
const RTT_NS: i64 = 10_000_000;

/// An ack-clocked bulk transfer of `n` segments with `w` segments in flight, the receiver
/// advertising `rwnd` bytes with window scale `ws`; the capture is at the sender.
fn transfer(n: usize, w: usize, rwnd: u32, ws: u8, handshake: bool) -> Vec<u8> {
    let mut pk: Vec<(i64, Vec<u8>)> = Vec::new();
    let (isn_c, isn_s) = (1000u32, 5000u32);
    let mut t0 = 0;
    if handshake {
        pk.push((
            0,
            tcp_frame(&Seg {
                src: C,
                dst: S,
                seq: isn_c,
                ack: 0,
                flags: SYN,
                window: 64240,
                len: 0,
                syn_opts: Some((1460, ws)),
                ..Seg::default()
            }),
        ));
        pk.push((
            RTT_NS,
            tcp_frame(&Seg {
                src: S,
                dst: C,
                seq: isn_s,
                ack: isn_c + 1,
                flags: SYN | ACK,
                window: rwnd.min(65535) as u16,
                len: 0,
                syn_opts: Some((1460, ws)),
                ..Seg::default()
            }),
        ));
        t0 = RTT_NS + 1000;
        pk.push((
            t0,
            tcp_frame(&Seg {
                src: C,
                dst: S,
                seq: isn_c + 1,
                ack: isn_s + 1,
                flags: ACK,
                window: 502,
                len: 0,
                syn_opts: None,
                ..Seg::default()
            }),
        ));
    }
    let mut send = vec![0i64; n];
    for i in 0..n {
        send[i] = if i < w {
            t0 + 10_000 * (i as i64 + 1)
        } else {
            send[i - w] + RTT_NS + 1000
        };
        let seq = isn_c + 1 + i as u32 * MSS;
        pk.push((
            send[i],
            tcp_frame(&Seg {
                src: C,
                dst: S,
                seq,
                ack: isn_s + 1,
                flags: ACK,
                window: 502,
                len: MSS as usize,
                syn_opts: None,
                ..Seg::default()
            }),
        ));
        pk.push((
            send[i] + RTT_NS,
            tcp_frame(&Seg {
                src: S,
                dst: C,
                seq: isn_s + 1,
                ack: seq + MSS,
                flags: ACK,
                window: (rwnd >> ws) as u16,
                len: 0,
                syn_opts: None,
                ..Seg::default()
            }),
        ));
    }
    pk.sort_by_key(|p| p.0);
    pcap(false, true, 1, &pk)
}

#[test]
fn small_receive_window_is_receiver_window_limited() {
    // 16 segments in flight = the whole 16 000-byte window.
    let cap = transfer(2000, 16, 16 * MSS, 2, true);
    let (s, _) = analyze_bytes(&cap, TraceConfig::default()).unwrap();
    let c = &s.connections[0];
    assert!(c.window_scale_known);
    assert_eq!(c.b_to_a.window_scale, Some(2));
    assert_eq!(c.b_to_a.window_max_bytes, u64::from(16 * MSS));
    assert_eq!(c.a_to_b.unique_bytes, 2000 * u64::from(MSS));
    assert_eq!(c.a_to_b.retransmitted_packets, 0);
    let rtt = c.a_to_b.rtt;
    assert_eq!(rtt.min_ns, RTT_NS as u64);
    assert!(rtt.samples > 1900, "{rtt:?}");
    assert_eq!(
        c.diagnosis.limit,
        Limit::ReceiverWindow,
        "{:?}",
        c.diagnosis
    );
    assert!(c.diagnosis.receiver_window_pct > 90.0, "{:?}", c.diagnosis);
    // window/RTT = 16 000 B / 10 ms = 12.8 Mbit/s, and the goodput is close to it
    let ceil = c.diagnosis.window_ceiling_bps.unwrap();
    assert!((ceil - 12.8e6).abs() < 0.001 * 12.8e6, "{ceil}");
    assert!(c.diagnosis.goodput_bps > 0.9 * ceil && c.diagnosis.goodput_bps <= ceil * 1.01);
}

#[test]
fn room_in_the_window_is_congestion_limited() {
    let cap = transfer(2000, 8, 64 * MSS, 2, true);
    let (s, _) = analyze_bytes(&cap, TraceConfig::default()).unwrap();
    let d = &s.connections[0].diagnosis;
    assert_eq!(d.limit, Limit::Congestion, "{d:?}");
    assert!(d.receiver_window_pct < 5.0, "{d:?}");
}

#[test]
fn missing_handshake_leaves_the_window_scale_unknown() {
    // Scale 7: the raw field says 125, the real window is 16 000 bytes.
    let cap = transfer(2000, 16, 16 * MSS, 7, false);
    let (s, _) = analyze_bytes(&cap, TraceConfig::default()).unwrap();
    let c = &s.connections[0];
    assert!(!c.handshake_seen);
    assert!(!c.window_scale_known);
    assert_eq!(c.b_to_a.window_scale, None);
    // raw figures, marked as such, never a made-up 64 KiB
    assert_eq!(c.b_to_a.window_max_bytes, u64::from((16 * MSS) >> 7));
    assert_eq!(c.diagnosis.limit, Limit::WindowUnknown, "{:?}", c.diagnosis);
    assert!(
        c.diagnosis.message.contains("window scale unknown"),
        "{}",
        c.diagnosis.message
    );
}

#[test]
fn series_bins_add_up() {
    let cap = transfer(500, 8, 64 * MSS, 0, true);
    let cfg = TraceConfig {
        bin_ns: 100_000_000,
        series_connections: 1,
        ..TraceConfig::default()
    };
    let (s, series) = analyze_bytes(&cap, cfg).unwrap();
    let total: f64 = series
        .iter()
        .filter(|i| i.stream.is_none())
        .map(|i| i.goodput_bps * i.length_s / 8.0)
        .sum();
    assert!((total - s.connections[0].a_to_b.unique_bytes as f64).abs() < 1.0);
    assert!(series.iter().any(|i| i.stream == Some(1)));
}

/// A transfer seen in the middle of a path that drops nothing: segment `k` is sent again
/// after a timeout although the original arrived (its ACK was only late), and the receiver
/// reports the copy with a D-SACK block below its cumulative ACK (RFC 2883).
fn spurious_timeout(n: usize, k: usize, dsack: bool) -> Vec<u8> {
    let (isn_c, isn_s) = (1000u32, 5000u32);
    let data = |t: i64, i: usize| {
        (
            t,
            tcp_frame(&Seg {
                src: C,
                dst: S,
                seq: isn_c + 1 + i as u32 * MSS,
                ack: isn_s + 1,
                flags: ACK,
                window: 502,
                len: MSS as usize,
                ..Seg::default()
            }),
        )
    };
    let ack = |t: i64, upto: usize, sack: Option<(u32, u32)>| {
        (
            t,
            tcp_frame(&Seg {
                src: S,
                dst: C,
                seq: isn_s + 1,
                ack: isn_c + 1 + upto as u32 * MSS,
                flags: ACK,
                window: 1000,
                sack,
                ..Seg::default()
            }),
        )
    };
    let mut pk = vec![
        (
            0,
            tcp_frame(&Seg {
                src: C,
                dst: S,
                seq: isn_c,
                flags: SYN,
                window: 64240,
                syn_opts: Some((1460, 0)),
                ..Seg::default()
            }),
        ),
        (
            RTT_NS,
            tcp_frame(&Seg {
                src: S,
                dst: C,
                seq: isn_s,
                ack: isn_c + 1,
                flags: SYN | ACK,
                window: 65535,
                syn_opts: Some((1460, 0)),
                ..Seg::default()
            }),
        ),
    ];
    // One segment per RTT, each acknowledged an RTT later; the ACK of `k` is 3 RTTs late.
    let mut t = RTT_NS + 1000;
    for i in 0..n {
        pk.push(data(t, i));
        if i == k {
            pk.push(data(t + 2 * RTT_NS, i));
            let seg = isn_c + 1 + k as u32 * MSS;
            pk.push(ack(t + 3 * RTT_NS, i + 1, None));
            let d = dsack.then_some((seg, seg + MSS));
            pk.push(ack(t + 3 * RTT_NS + 1000, i + 1, d));
            t += 4 * RTT_NS;
        } else {
            pk.push(ack(t + RTT_NS, i + 1, None));
            t += RTT_NS + 1000;
        }
    }
    pk.sort_by_key(|p| p.0);
    pcap(false, true, 1, &pk)
}

#[test]
fn a_dsacked_retransmission_is_spurious_not_a_loss() {
    let (s, _) = analyze_bytes(&spurious_timeout(40, 20, true), TraceConfig::default()).unwrap();
    let c = &s.connections[0];
    assert_eq!(c.a_to_b.retransmitted_packets, 1);
    assert_eq!(c.a_to_b.spurious_retransmissions, 1, "{:?}", c.a_to_b);
    assert_eq!(c.b_to_a.dsack_packets, 1);
    let d = &c.diagnosis;
    assert!(!d.message.contains("lost"), "{}", d.message);
    assert_ne!(d.limit, Limit::Loss, "{d:?}");
    // Without the D-SACK the capture cannot tell: the retransmission counts as a loss.
    let (s, _) = analyze_bytes(&spurious_timeout(40, 20, false), TraceConfig::default()).unwrap();
    let c = &s.connections[0];
    assert_eq!(c.a_to_b.spurious_retransmissions, 0);
    assert!(
        c.diagnosis.message.contains("1 of 41 data segments lost"),
        "{}",
        c.diagnosis.message
    );
}
