//! Readers, views and the analyser on every pcap/pcapng variant, and on truncated, absurd
//! and random bytes: never a panic, damage counted and reported. (CI has no nightly
//! toolchain for cargo-fuzz, so these seeded loops run the same inputs as `fuzz/`.)

use crate::decode::{Decoded, decode};
use crate::reader::read_all_bytes;
use crate::testkit::{Rng, Seg, pcap, pcapng_section, tcp_frame};
use crate::wire::link::LinkType;
use crate::wire::tcp::flags::{ACK, SYN};
use crate::{TraceConfig, TraceError, analyze_bytes};

fn syn() -> Vec<u8> {
    tcp_frame(&Seg {
        src: ([10, 0, 0, 1], 1234),
        dst: ([10, 0, 0, 2], 80),
        seq: 7,
        ack: 0,
        flags: SYN,
        window: 1000,
        len: 0,
        syn_opts: Some((1460, 7)),
        ..Seg::default()
    })
}

fn data(len: usize) -> Vec<u8> {
    tcp_frame(&Seg {
        src: ([10, 0, 0, 1], 1234),
        dst: ([10, 0, 0, 2], 80),
        seq: 8,
        ack: 1,
        flags: ACK,
        window: 1000,
        len,
        syn_opts: None,
        ..Seg::default()
    })
}

#[test]
fn pcap_both_byte_orders_and_resolutions() {
    let ts = 1_700_000_000_123_456_789i64;
    for be in [false, true] {
        for nanos in [false, true] {
            let f = pcap(be, nanos, 1, &[(ts, syn()), (ts + 1000, data(100))]);
            let (s, _) = analyze_bytes(&f, TraceConfig::default()).unwrap();
            assert_eq!(s.capture.format.to_string(), "pcap");
            assert_eq!(s.tcp_packets, 2, "be {be} nanos {nanos}");
            let want = if nanos { ts } else { ts - 789 };
            assert_eq!(s.first_packet_unix_ns, want, "be {be} nanos {nanos}");
            assert_eq!(s.connections[0].a_to_b.data_bytes, 100);
            assert_eq!(s.connections[0].a_to_b.window_scale_option, Some(7));
        }
    }
}

#[test]
fn pcapng_sections_interfaces_and_resolutions() {
    // Section 1 (little-endian): Ethernet at µs (default) and raw IP at ns (tsresol 9).
    let raw_ip = data(10)[14..].to_vec();
    let mut f = pcapng_section(
        false,
        &[(1, None), (101, Some(9))],
        &[(0, 1_000_000, syn()), (1, 1_500_000_000, raw_ip)],
    );
    // Section 2 (big-endian): a new interface list; interface 0 is Ethernet again.
    f.extend(pcapng_section(
        true,
        &[(1, Some(3))],
        &[(0, 2_000, data(20)), (5, 0, data(1))],
    ));
    let (s, _) = analyze_bytes(&f, TraceConfig::default()).unwrap();
    assert_eq!(s.capture.format.to_string(), "pcapng");
    assert_eq!(s.capture.records, 4);
    assert_eq!(
        s.capture.skipped_records, 1,
        "packet on an undeclared interface"
    );
    assert_eq!(s.tcp_packets, 3);
    assert_eq!(s.first_packet_unix_ns, 1_000_000_000);
    assert_eq!(
        s.capture_duration_ns, 1_000_000_000,
        "2000 ms at tsresol 3 is 2 s"
    );
    assert_eq!(s.connections[0].a_to_b.data_bytes, 30);
}

#[test]
fn compressed_inputs_read_the_same() {
    use std::io::Write;
    let plain = pcap(false, false, 1, &[(0, syn()), (1000, data(5))]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let gz = gz.finish().unwrap();
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut &plain[..], &mut xz).unwrap();
    let zst =
        ruzstd::encoding::compress_to_vec(&plain[..], ruzstd::encoding::CompressionLevel::Fastest);
    for (name, bytes) in [
        ("none", plain.clone()),
        ("gzip", gz),
        ("xz", xz),
        ("zstd", zst),
    ] {
        let (s, _) = analyze_bytes(&bytes, TraceConfig::default()).unwrap();
        assert_eq!(s.capture.compression.to_string(), name);
        assert_eq!(s.tcp_packets, 2, "{name}");
    }
}

#[test]
fn not_a_capture_is_an_error_with_offset() {
    for bytes in [
        &b""[..],
        b"hello world, this is not a capture file",
        &[0xd4, 0xc3],
    ] {
        match analyze_bytes(bytes, TraceConfig::default()) {
            Err(e @ TraceError::NotACapture { offset: 0, .. }) => {
                assert!(e.to_string().contains("byte offset 0"), "{e}");
            }
            other => panic!("{bytes:?}: {other:?}"),
        }
    }
}

#[test]
fn every_truncation_is_partial_or_error_never_a_panic() {
    let f = pcap(
        false,
        false,
        1,
        &[(0, syn()), (1000, data(50)), (2000, data(60))],
    );
    for n in 0..f.len() {
        match read_all_bytes(&f[..n]) {
            Ok((lens, stats)) => {
                assert!(lens.len() <= 3);
                if n > 24 && n < f.len() && stats.stopped_early.is_none() {
                    // ends exactly on a record boundary
                    assert!(!stats.truncated);
                }
            }
            Err(TraceError::NotACapture { .. }) => assert!(n < 24, "{n}"),
            Err(e) => panic!("{n}: {e}"),
        }
    }
    let (_, stats) = read_all_bytes(&f[..f.len() - 3]).unwrap();
    assert!(stats.truncated);
    assert!(stats.stopped_early.unwrap().contains("byte offset"));
}

#[test]
fn absurd_record_length_stops_with_offset() {
    let mut f = pcap(false, false, 1, &[(0, syn()), (1000, data(5))]);
    let second = 24 + 16 + syn().len();
    f[second + 8..second + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let (lens, stats) = read_all_bytes(&f).unwrap();
    assert_eq!(lens.len(), 1);
    let why = stats.stopped_early.unwrap();
    assert!(why.contains(&format!("byte offset {second}")), "{why}");
}

#[test]
fn snaplen_cut_headers_are_counted_unusable() {
    let full = data(100);
    let f = pcap(
        false,
        false,
        1,
        &[(0, full[..40].to_vec()), (1, full[..60].to_vec())],
    );
    let (s, _) = analyze_bytes(&f, TraceConfig::default()).unwrap();
    assert_eq!(s.unusable_packets, 1, "TCP header cut");
    assert_eq!(s.tcp_packets, 1);
    assert_eq!(
        s.connections[0].a_to_b.data_bytes, 100,
        "payload length from the IP header"
    );
}

/// Random bytes, random mutations of valid captures, and random frames for every link type.
#[test]
fn seeded_random_inputs_never_panic() {
    let mut rng = Rng::new(0x5eed_cafe);
    let valid = [
        pcap(
            false,
            false,
            1,
            &[(0, syn()), (1000, data(50)), (2000, data(60))],
        ),
        pcap(
            true,
            true,
            101,
            &[(0, syn()[14..].to_vec()), (5, data(9)[14..].to_vec())],
        ),
        pcapng_section(
            false,
            &[(1, Some(9)), (113, None)],
            &[(0, 1, syn()), (1, 2, data(3))],
        ),
    ];
    for i in 0..3000 {
        let bytes = match i % 3 {
            0 => {
                let n = rng.below(3000);
                rng.bytes(n)
            }
            1 => {
                // a valid header followed by garbage
                let mut v = valid[rng.below(valid.len())].clone();
                let keep = rng.below(v.len());
                v.truncate(keep.max(24));
                let extra = rng.below(200);
                v.extend(rng.bytes(extra));
                v
            }
            _ => {
                let mut v = valid[rng.below(valid.len())].clone();
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(v.len());
                    v[at] = rng.next_u64() as u8;
                }
                v
            }
        };
        let _ = analyze_bytes(&bytes, TraceConfig::default());
    }
    let links = [0, 1, 10, 12, 101, 108, 113, 228, 229, 276, 147];
    for _ in 0..20_000 {
        let link = LinkType::from_number(links[rng.below(links.len())]);
        let n = rng.below(120);
        let mut frame = if rng.below(2) == 0 {
            data(n / 3)
        } else {
            rng.bytes(n)
        };
        if !frame.is_empty() && rng.below(2) == 0 {
            let at = rng.below(frame.len());
            frame[at] = rng.next_u64() as u8;
        }
        let cut = rng.below(frame.len() + 1);
        if let Decoded::Tcp(t) = decode(link, &frame[..cut]) {
            let _ = t.options.sack_blocks();
        }
    }
}

#[test]
fn udp_flows_and_ipv6_connections() {
    // UDP over raw IPv4: 10.0.0.1:5000 -> 10.0.0.2:53, 100 bytes of payload, twice, one reply.
    let udp = |src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16, len: usize| {
        let total = 28 + len;
        let mut p = vec![
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0,
            0,
            64,
            17,
            0,
            0,
        ];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sp.to_be_bytes());
        p.extend_from_slice(&dp.to_be_bytes());
        p.extend_from_slice(&((8 + len) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend(std::iter::repeat_n(0u8, len));
        p
    };
    // TCP over raw IPv6: a SYN from [2001:db8::1]:40000 to [2001:db8::2]:443.
    let mut v6 = vec![0x60, 0, 0, 0, 0, 20, 6, 64];
    v6.extend_from_slice(
        &"2001:db8::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    v6.extend_from_slice(
        &"2001:db8::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    v6.extend_from_slice(&[
        0x9c, 0x40, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    let f = pcap(
        false,
        false,
        101,
        &[
            (0, udp([10, 0, 0, 1], [10, 0, 0, 2], 5000, 53, 100)),
            (
                500_000_000,
                udp([10, 0, 0, 1], [10, 0, 0, 2], 5000, 53, 100),
            ),
            (
                1_000_000_000,
                udp([10, 0, 0, 2], [10, 0, 0, 1], 53, 5000, 10),
            ),
            (1_000_000_001, v6),
        ],
    );
    let (s, _) = analyze_bytes(&f, TraceConfig::default()).unwrap();
    assert_eq!(s.udp_packets, 3);
    let u = &s.udp_flows[0];
    assert_eq!(
        (u.a.as_str(), u.b.as_str()),
        ("10.0.0.1:5000", "10.0.0.2:53")
    );
    assert_eq!(
        (
            u.a_to_b_packets,
            u.a_to_b_bytes,
            u.b_to_a_packets,
            u.b_to_a_bytes
        ),
        (2, 256, 1, 38)
    );
    assert!((u.duration_s - 1.0).abs() < 1e-9);
    assert!((u.rate_bps - 294.0 * 8.0).abs() < 1e-6);
    let c = &s.connections[0];
    assert_eq!(
        (c.a.as_str(), c.b.as_str()),
        ("[2001:db8::1]:40000", "[2001:db8::2]:443")
    );
    assert_eq!(c.a_to_b.syn, 1);
}

/// Issue 11 item 7: a cut gzip capture yields the packets decodable before the damage, and
/// says where it stopped in plain words.
#[test]
fn cut_gzip_capture_yields_the_packets_before_the_damage() {
    use std::io::Write;
    let packets: Vec<(i64, Vec<u8>)> = (0..3000)
        .map(|i| (i * 1000, data(200 + i as usize % 50)))
        .collect();
    let plain = pcap(false, false, 1, &packets);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let gz = gz.finish().unwrap();
    for cut in [gz.len() / 10, gz.len() / 2, gz.len() - 20] {
        let (s, _) = analyze_bytes(&gz[..cut], TraceConfig::default())
            .unwrap_or_else(|e| panic!("cut at {cut} of {}: {e}", gz.len()));
        let n = s.tcp_packets;
        assert!(n > 0 && n < 3000, "cut at {cut}: {n} packets");
        assert!(s.capture.truncated);
        let why = s.capture.stopped_early.unwrap();
        assert!(why.contains("the compressed file is cut short"), "{why}");
        assert!(
            why.contains(&format!("the {n} packets before it were read")),
            "{why}"
        );
    }
}

/// Issue 13: a record claiming 0xFFFFFFF0 bytes names the snapshot length.
#[test]
fn record_longer_than_the_snapshot_length_is_named() {
    let mut f = pcap(false, false, 1, &[(0, syn()), (1000, data(5))]);
    let second = 24 + 16 + syn().len();
    f[second + 8..second + 12].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    let (lens, stats) = read_all_bytes(&f).unwrap();
    assert_eq!(lens.len(), 1);
    let why = stats.stopped_early.unwrap();
    assert!(
        why.contains("record length 4294967280 exceeds the snapshot length 65535"),
        "{why}"
    );
    // and a damaged pcapng block says what is wrong, not a parser's internal name
    let mut ng = pcapng_section(false, &[(1, None)], &[(0, 1, syn()), (0, 2, data(3))]);
    let len = ng.len();
    ng[len - 4..].copy_from_slice(&7u32.to_le_bytes());
    let (lens, stats) = read_all_bytes(&ng).unwrap();
    assert_eq!(lens.len(), 1, "the packet before the damaged block is read");
    let why = stats
        .stopped_early
        .expect("a block whose trailing length disagrees stops the reading");
    assert!(
        why.contains("a damaged pcapng block (its two length fields disagree or are impossible)"),
        "{why}"
    );
    assert!(!why.contains("Verify") && !why.contains("Nom"), "{why}");
}
