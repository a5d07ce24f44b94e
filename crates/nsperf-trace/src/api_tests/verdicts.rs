//! Verdicts that hold (issue 11, capture analysis): synthetic captures written by the tests'
//! own simulator ([`crate::testkit::sim`]) and frame builders, each with a known truth.

use crate::model::{TcpConnection, TraceSummary, Vantage};
use crate::testkit::sim::{PathSim, simulate};
use crate::testkit::{Seg, pcap, tcp_frame};
use crate::wire::tcp::flags::{ACK, FIN, SYN};
use crate::{Limit, TraceConfig, analyze_bytes};

fn analyse(p: &PathSim) -> TraceSummary {
    let frames = simulate(p);
    analyze_bytes(&pcap(false, true, 1, &frames), TraceConfig::default())
        .unwrap()
        .0
}

fn only(s: &TraceSummary) -> &TcpConnection {
    assert_eq!(s.connections.len(), 1, "{:#?}", s.connections);
    &s.connections[0]
}

/// 45 Mbit/s, 50 ms, as the lab's T3; transfers of a few seconds.
fn t3() -> PathSim {
    PathSim {
        bytes: 4 << 20,
        max_ns: 10_000_000_000,
        ..PathSim::default()
    }
}

/// The five cases of the issue, with the lab's truth.
fn cases() -> Vec<(&'static str, PathSim, Limit)> {
    vec![
        (
            "64 KiB window",
            PathSim {
                rcv_buf: 64 << 10,
                ..t3()
            },
            Limit::ReceiverWindow,
        ),
        (
            "window above the BDP, link full",
            PathSim {
                bytes: 12 << 20,
                initial_ssthresh: Some(150),
                ..t3()
            },
            Limit::Congestion,
        ),
        (
            "application paced at 10 Mbit/s",
            PathSim {
                app_bps: Some(10e6),
                ..t3()
            },
            Limit::Application,
        ),
        (
            "1 % random loss",
            PathSim {
                loss: 0.01,
                bytes: 2 << 20,
                ..t3()
            },
            Limit::Loss,
        ),
        (
            "slow reader (zero windows)",
            PathSim {
                rcv_buf: 256 << 10,
                read_bps: Some(2e6),
                read_chunk: 128 << 10,
                bytes: 1 << 20,
                ..t3()
            },
            Limit::ReceiverWindow,
        ),
    ]
}

/// Item 3: the verdict does not depend on where the capture was taken, and the vantage
/// point is recognised; with and without TCP timestamps.
#[test]
fn verdict_is_the_same_at_every_vantage_point() {
    for timestamps in [true, false] {
        for (name, case, truth) in cases() {
            for (v, where_) in [
                (0.0, Vantage::Sender),
                (0.5, Vantage::Middle),
                (1.0, Vantage::Receiver),
            ] {
                let s = analyse(&PathSim {
                    vantage: v,
                    timestamps,
                    ..case.clone()
                });
                let c = only(&s);
                let d = &c.diagnosis;
                assert_eq!(
                    d.limit, truth,
                    "{name} at {where_} (timestamps {timestamps}): {}",
                    d.message
                );
                assert_eq!(d.vantage, where_, "{name}: {:?}", d.path_rtt);
                let rtt = d.path_rtt.min_ns as f64 / 1e6;
                assert!(
                    (49.0..53.0).contains(&rtt),
                    "{name} at {where_}: path RTT {rtt} ms"
                );
            }
        }
    }
}

/// Item 4: a printed ceiling is never below the measured rate, in any case or vantage point.
#[test]
fn no_ceiling_below_the_measured_rate() {
    for (name, case, _) in cases() {
        for v in [0.0, 0.5, 1.0] {
            for handshake in [true, false] {
                let s = analyse(&PathSim {
                    vantage: v,
                    handshake,
                    ..case.clone()
                });
                let d = &only(&s).diagnosis;
                for (what, c) in [
                    ("window/RTT", d.window_ceiling_bps),
                    ("window/RTT at least", d.window_ceiling_at_least_bps),
                ] {
                    if let Some(c) = c {
                        assert!(
                            c >= d.goodput_bps,
                            "{name} at {v} (handshake {handshake}): {what} {c} below goodput {}",
                            d.goodput_bps
                        );
                    }
                }
                assert!(!d.message.contains("ceiling Mathis"), "{}", d.message);
            }
        }
    }
}

/// Item 1: persist probes into a zero window are not retransmissions, and the time spent
/// waiting on the closed window is the receiver's.
#[test]
fn zero_window_probes_are_not_retransmissions() {
    let (_, slow, _) = cases().remove(4);
    for v in [0.0, 1.0] {
        let s = analyse(&PathSim {
            vantage: v,
            ..slow.clone()
        });
        let c = only(&s);
        assert!(c.b_to_a.zero_window_adverts > 5, "{:?}", c.b_to_a);
        assert!(c.a_to_b.zero_window_probes > 0, "{:?}", c.a_to_b);
        assert_eq!(c.a_to_b.retransmitted_packets, 0, "{:?}", c.a_to_b);
        // probe bytes the receiver took are not unique bytes (tcptrace)
        let (u, pb) = (c.a_to_b.unique_bytes, c.a_to_b.zero_window_probe_bytes);
        assert!(
            u <= 1 << 20 && u + pb >= 1 << 20,
            "unique {u}, probe bytes {pb}"
        );
        let d = &c.diagnosis;
        assert_eq!(d.limit, Limit::ReceiverWindow, "{}", d.message);
        assert!(d.receiver_window_pct > 80.0, "{d:?}");
        assert!(d.loss_pct < 1.0 && d.application_pct < 5.0, "{d:?}");
        assert_eq!(d.loss_rate, 0.0);
        assert!(d.message.contains("zero window"), "{}", d.message);
    }
}

/// Item 2: every frame captured twice is reported, and left out of retransmissions, loss
/// and the diagnosis; issue 22 item 4: both directions, the copy up to 15 ms after the
/// original (a routing host's capture), at the sender and at the receiver.
#[test]
fn frames_captured_twice_are_not_retransmissions() {
    let (_, window, _) = cases().remove(0);
    for vantage in [0.0, 1.0] {
        let window = PathSim {
            vantage,
            ..window.clone()
        };
        let clean = analyse(&window);
        let twice = analyse(&PathSim {
            duplicate_frames: Some(15_000_000),
            ..window
        });
        let (a, b) = (only(&clean), only(&twice));
        assert_eq!(b.a_to_b.duplicated_frames, a.a_to_b.packets);
        assert_eq!(b.b_to_a.duplicated_frames, a.b_to_a.packets);
        assert_eq!(twice.duplicated_frames, a.a_to_b.packets + a.b_to_a.packets);
        assert_eq!(b.a_to_b.packets, 2 * a.a_to_b.packets);
        assert_eq!(b.a_to_b.retransmitted_packets, 0);
        assert_eq!(b.a_to_b.out_of_order_packets, 0);
        assert_eq!(b.b_to_a.duplicate_acks, a.b_to_a.duplicate_acks);
        assert_eq!(b.a_to_b.unique_bytes, a.a_to_b.unique_bytes);
        assert_eq!(b.a_to_b.data_packets, a.a_to_b.data_packets);
        assert_eq!(
            b.diagnosis.limit,
            Limit::ReceiverWindow,
            "{}",
            b.diagnosis.message
        );
        assert_eq!(b.diagnosis.loss_rate, 0.0);
        let f = crate::findings::findings(&twice, 3).unwrap();
        assert!(
            f.iter()
                .any(|f| f.id == "duplicated_frames" && f.message.contains("captured twice")),
            "{f:?}"
        );
    }
}

/// Item 4: the path RTT comes from many samples: a SYN answered three seconds late (a lost
/// SYN) does not make it.
#[test]
fn path_rtt_is_not_one_handshake_sample() {
    let (_, window, _) = cases().remove(0);
    let mut frames = simulate(&window);
    // The client's SYN, captured 3 s before everything else.
    frames[0].0 -= 3_000_000_000;
    let (s, _) = analyze_bytes(&pcap(false, true, 1, &frames), TraceConfig::default()).unwrap();
    let p = only(&s).diagnosis.path_rtt;
    assert!(p.upstream_samples > 100, "{p:?}");
    assert!((49e6..53e6).contains(&(p.min_ns as f64)), "{p:?}");
    assert!((49e6..53e6).contains(&(p.median_ns as f64)), "{p:?}");
}

/// Item 4: a coarse timestamp clock is detected, and no RTT below one tick is reported.
#[test]
fn coarse_timestamp_clock_gives_no_rtt_below_a_tick() {
    let s = analyse(&PathSim {
        rtt_ns: 2_000_000,
        sender_tick_ms: 10,
        ..t3()
    });
    let d = &only(&s).a_to_b;
    let tick = d.timestamp_tick_ns.expect("tick measured");
    assert!((9_500_000..10_500_000).contains(&tick), "{tick}");
    let r = d.rtt_timestamps;
    assert!(
        r.samples == 0 || r.min_ns >= tick,
        "{r:?} with a {tick} ns tick"
    );
    // the receiver's 1 ms clock
    let b = only(&s).b_to_a.timestamp_tick_ns.unwrap();
    assert!((950_000..1_050_000).contains(&b), "{b}");
}

/// Item 4: with the window scale unknown, no raw-window ceiling: the scale that the bytes
/// in flight prove, and the ceiling from it, labelled as a bound.
#[test]
fn unknown_scale_gives_a_proven_bound_not_a_raw_ceiling() {
    let (_, window, _) = cases().remove(0);
    for v in [0.0, 1.0] {
        let s = analyse(&PathSim {
            handshake: false,
            vantage: v,
            ..window.clone()
        });
        let c = only(&s);
        assert!(!c.window_scale_known);
        let d = &c.diagnosis;
        assert_eq!(d.window_ceiling_bps, None, "{d:?}");
        assert_eq!(d.window_scale_at_least, Some(7), "{d:?}");
        let bound = d.window_ceiling_at_least_bps.unwrap();
        // 64 KiB / 50 ms = 10.5 Mbit/s
        assert!((10.4e6..10.6e6).contains(&bound), "{bound}");
        assert!(bound >= d.goodput_bps);
        assert!(d.message.contains("at least"), "{}", d.message);
    }
}

fn seg(from_a: bool, seq: u32, ack: u32, flags: u8, len: usize, ip_id: u16) -> Vec<u8> {
    let (a, b) = (([10, 0, 0, 1], 40000), ([10, 0, 0, 2], 80));
    tcp_frame(&Seg {
        src: if from_a { a } else { b },
        dst: if from_a { b } else { a },
        seq,
        ack,
        flags,
        window: 1000,
        len,
        ip_id,
        syn_opts: (flags & SYN != 0).then_some((1460, 0)),
        ..Seg::default()
    })
}

/// Item 4: a connection of a handful of segments says it is too short, not
/// "congestion-window-limited 100 %".
#[test]
fn a_handful_of_segments_is_too_short() {
    let ms = 1_000_000i64;
    let mut p = vec![
        (0, seg(true, 0, 0, SYN, 0, 1)),
        (ms, seg(false, 0, 1, SYN | ACK, 0, 1)),
        (2 * ms, seg(true, 1, 1, ACK, 0, 2)),
    ];
    for i in 0..5u32 {
        p.push((
            2 * ms + 10 * i as i64,
            seg(true, 1 + i * 1000, 1, ACK, 1000, 3 + i as u16),
        ));
    }
    let (s, _) = analyze_bytes(&pcap(false, true, 1, &p), TraceConfig::default()).unwrap();
    let d = &only(&s).diagnosis;
    assert_eq!(d.limit, Limit::TooShort, "{}", d.message);
    assert!(
        d.message.contains("too short to diagnose: 5 data segments"),
        "{}",
        d.message
    );
    assert!(crate::findings::connection_finding(only(&s)).is_none());
}

/// Item 5: the duplicate-ACK count restarts after a timeout (a lost fast retransmission
/// followed by backed-off timeouts is 1 fast / 4 timeout), and the last FIN's RTT is kept.
#[test]
fn fast_and_timeout_retransmissions_and_the_last_fin() {
    let s = 1_000_000_000i64;
    let ms = 1_000_000i64;
    let mut p = vec![
        (0, seg(true, 0, 0, SYN, 0, 1)),
        (10 * ms, seg(false, 0, 1, SYN | ACK, 0, 1)),
        (10 * ms + 1, seg(true, 1, 1, ACK, 0, 2)),
    ];
    let mut id = 3u16;
    let mut data = |t: i64, seq: u32, p: &mut Vec<(i64, Vec<u8>)>| {
        id += 1;
        p.push((t, seg(true, seq, 1, ACK, 1000, id)));
    };
    // 10 segments; segment 2 (seq 1001) is lost
    for i in 0..10u32 {
        data(20 * ms + i as i64 * ms, 1 + i * 1000, &mut p);
    }
    p.push((30 * ms, seg(false, 1, 1001, ACK, 0, 2)));
    for k in 0..8 {
        // duplicate ACKs for the later segments
        p.push((31 * ms + k, seg(false, 1, 1001, ACK, 0, 3 + k as u16)));
    }
    // fast retransmission after the third dup ACK ... lost too
    data(32 * ms, 1001, &mut p);
    // timeouts, backed off: 1 s, 2 s, 4 s, 8 s after the previous
    let mut t = 32 * ms;
    for k in 0..4 {
        t += s << k;
        data(t, 1001, &mut p);
    }
    // finally acknowledged, then both FINs and the last ACK
    p.push((t + 10 * ms, seg(false, 1, 10_001, ACK, 0, 20)));
    p.push((t + 20 * ms, seg(true, 10_001, 1, ACK | FIN, 0, 99)));
    p.push((t + 30 * ms, seg(false, 1, 10_002, ACK | FIN, 0, 21)));
    p.push((t + 37 * ms, seg(true, 10_002, 2, ACK, 0, 100)));
    let (sum, _) = analyze_bytes(&pcap(false, true, 1, &p), TraceConfig::default()).unwrap();
    let c = only(&sum);
    let a = &c.a_to_b;
    assert_eq!(a.retransmitted_packets, 5, "{a:?}");
    assert_eq!(
        (a.fast_retransmissions, a.timeout_retransmissions),
        (1, 4),
        "{a:?}"
    );
    // b's FIN (the last one) was acknowledged 7 ms later
    let b = &c.b_to_a.rtt;
    assert_eq!(b.max_ns, 7_000_000, "{b:?}");
    assert!(c.closed);
}
