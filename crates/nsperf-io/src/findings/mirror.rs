//! What limited a mirrored run (`--replicate`): the local disk, the peer's disk, the link,
//! the bytes in flight over the round trip, or the protocol's round trip per write. Each
//! part is a measured figure (the local write's time, the peer's from its acks, the round
//! trip to the peer measured at connect); what a write took beyond them is moving it (the link's
//! rate and its queue). When a part cannot be measured the finding says so.

use nsperf_core::report::{Finding, Severity};
use nsperf_core::units::{BitRate, Bytes};

use crate::mirror::{Protocol, ReplicationFacts};

/// Share of the writes that waited for room above which the in-flight limit is the brake.
const WAITED_SHARE: f64 = 0.1;

/// The mirror's finding, from the facts and the write latency and rate the run measured.
pub(super) fn mirror_limit(
    m: &ReplicationFacts,
    write_latency_mean_ns: f64,
    rate_bytes_per_s: f64,
    iodepth: u32,
) -> Option<Finding> {
    if m.writes == 0 || write_latency_mean_ns <= 0.0 {
        return None;
    }
    let protocol = m.protocol?;
    let ms = |ns: f64| ns / 1e6;
    let rtt_ns = m.rtt_us * 1e3;
    let bs = m.bytes as f64 / m.writes as f64;
    let waited = m.waited_for_room as f64 / m.writes as f64;
    let f = |id: &str, text: String| {
        Finding::new(id, Severity::Info, text)
            .with("write_latency_mean_ns", write_latency_mean_ns)
            .with("local_write_mean_ns", m.local_write_mean_ns)
            .with("peer_write_mean_ns", m.peer_write_mean_ns)
            .with("rtt_ns", rtt_ns)
            .with("waited_for_room_share", waited)
    };
    if waited >= WAITED_SHARE {
        if rtt_ns <= 0.0 {
            return Some(f(
                "mirror_in_flight",
                format!(
                    "mirror: {:.0} % of the writes waited for room (at most {} in flight); the round trip to the peer is unknown, so nsperf cannot tell the link from the in-flight limit",
                    waited * 100.0,
                    Bytes(m.max_in_flight_bytes)
                ),
            ));
        }
        let ceiling = m.max_in_flight_bytes as f64 / (rtt_ns / 1e9);
        return Some(if rate_bytes_per_s >= 0.8 * ceiling {
            f(
                "mirror_in_flight",
                format!(
                    "mirror: bytes in flight over the round trip: {:.0} % of the writes waited for room; {} in flight over {:.2} ms allow {} and the run wrote {}: raise --replicate-in-flight (DRBD's max-buffers) to use more of the link",
                    waited * 100.0,
                    Bytes(m.max_in_flight_bytes),
                    ms(rtt_ns),
                    BitRate(ceiling * 8.0),
                    BitRate(rate_bytes_per_s * 8.0)
                ),
            )
            .with("in_flight_ceiling_bytes_per_s", ceiling)
        } else {
            f(
                "mirror_link",
                format!(
                    "mirror: the link to the peer: {:.0} % of the writes waited for room, and the {} run stayed under the {} that {} in flight over {:.2} ms would allow: the link (or the peer) drains the writes slower than they come",
                    waited * 100.0,
                    BitRate(rate_bytes_per_s * 8.0),
                    BitRate(ceiling * 8.0),
                    Bytes(m.max_in_flight_bytes),
                    ms(rtt_ns)
                ),
            )
            .with("in_flight_ceiling_bytes_per_s", ceiling)
        });
    }
    // A without waits for room whose writes took mostly something else than the local
    // write: the rest is handing the data to the connection, whose send buffer was full (the
    // link drains it slower than the writes come).
    if protocol == Protocol::A && m.local_write_mean_ns * 2.0 < write_latency_mean_ns {
        return Some(f(
            "mirror_link",
            format!(
                "mirror: the link to the peer: protocol A did not wait for room, but a write took {:.3} ms of which the local write {:.3} ms: the rest was handing it to the connection, whose send buffer the link drains slower than the writes come ({} written)",
                ms(write_latency_mean_ns),
                ms(m.local_write_mean_ns),
                BitRate(rate_bytes_per_s * 8.0)
            ),
        ));
    }
    if protocol == Protocol::A {
        return Some(f(
            "mirror_local_disk",
            format!(
                "mirror: protocol A did not wait for the peer (no write waited for room): the local writes set the rate ({:.3} ms each of the {:.3} ms a write took)",
                ms(m.local_write_mean_ns),
                ms(write_latency_mean_ns)
            ),
        ));
    }
    if rtt_ns <= 0.0 {
        return Some(f(
            "mirror_unknown",
            format!(
                "mirror: a write took {:.3} ms, the local write {:.3} ms; the round trip to the peer is unknown, so nsperf cannot split the rest between the link and the round trip",
                ms(write_latency_mean_ns),
                ms(m.local_write_mean_ns)
            ),
        ));
    }
    // One write's time, in parts (with several in flight, a write also waits behind others:
    // that lands in "moving").
    let peer = if protocol == Protocol::C {
        m.peer_write_mean_ns
    } else {
        0.0
    };
    let moving = (write_latency_mean_ns - m.local_write_mean_ns - peer - rtt_ns).max(0.0);
    let parts = [
        ("mirror_round_trip", rtt_ns),
        ("mirror_link", moving),
        ("mirror_peer_disk", peer),
        ("mirror_local_disk", m.local_write_mean_ns),
    ];
    let (id, largest) = parts
        .iter()
        .copied()
        .fold(("", -1.0), |a, b| if b.1 > a.1 { b } else { a });
    let split = format!(
        "of the {:.3} ms a write took: round trip {:.3} ms, moving it {:.3} ms, peer's write {:.3} ms, local write {:.3} ms",
        ms(write_latency_mean_ns),
        ms(rtt_ns),
        ms(moving),
        ms(peer),
        ms(m.local_write_mean_ns)
    );
    let text = match id {
        "mirror_round_trip" => format!(
            "mirror: the protocol's round trip per write ({protocol} waits for the peer, {iodepth} write(s) in flight) {split}; more writes in flight (--iodepth) or protocol A hide it"
        ),
        "mirror_link" => format!(
            "mirror: moving the writes to the peer (the link's rate and its queue: {} per write of {} takes {:.3} ms at {}) {split}",
            Bytes(bs as u64),
            Bytes(bs as u64),
            ms(moving),
            BitRate(if moving > 0.0 {
                bs * 8.0 / (moving / 1e9)
            } else {
                0.0
            })
        ),
        "mirror_peer_disk" => format!("mirror: the peer's disk {split}"),
        _ => format!("mirror: the local disk {split}"),
    };
    Some(
        f(id, text)
            .with("moving_ns", moving)
            .with("largest_ns", largest),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(
        p: Protocol,
        rtt_us: f64,
        local_ns: f64,
        peer_ns: f64,
        waited: u64,
    ) -> ReplicationFacts {
        ReplicationFacts {
            peer: "10.77.0.2:7789".into(),
            protocol: Some(p),
            max_in_flight_bytes: 256 << 10,
            writes: 100,
            bytes: 100 << 16,
            local_write_mean_ns: local_ns,
            peer_write_mean_ns: peer_ns,
            rtt_us,
            waited_for_room: waited,
            ..Default::default()
        }
    }

    #[test]
    fn the_largest_part_names_the_limit() {
        // 50 ms round trip, 5.5 ms to move 64 KiB at 100 Mbit/s.
        let f = mirror_limit(
            &facts(Protocol::B, 50_000.0, 30e3, 0.0, 0),
            55.6e6,
            1.18e6,
            1,
        )
        .unwrap();
        assert_eq!(f.id, "mirror_round_trip", "{}", f.message);
        assert!(f.message.contains("round trip 50.000 ms"), "{}", f.message);
        // No delay: moving the data is most of it.
        let f = mirror_limit(&facts(Protocol::C, 150.0, 30e3, 60e3, 0), 5.8e6, 11.3e6, 1).unwrap();
        assert_eq!(f.id, "mirror_link", "{}", f.message);
        // A slow peer disk.
        let f = mirror_limit(&facts(Protocol::C, 150.0, 30e3, 9e6, 0), 15e6, 4e6, 1).unwrap();
        assert_eq!(f.id, "mirror_peer_disk");
        // Protocol A without waits: the local disk.
        let f = mirror_limit(&facts(Protocol::A, 50_000.0, 30e3, 0.0, 0), 40e3, 1e9, 1).unwrap();
        assert_eq!(f.id, "mirror_local_disk");
        // Protocol A without waits whose writes blocked on the connection (a T3 at 50 ms,
        // 64 KiB writes, the whole file within the bytes in flight): the link.
        let f = mirror_limit(&facts(Protocol::A, 50_000.0, 30e3, 0.0, 0), 8.7e6, 7.5e6, 1).unwrap();
        assert_eq!(f.id, "mirror_link", "{}", f.message);
        assert!(
            f.message.contains("of which the local write 0.030 ms"),
            "{}",
            f.message
        );
    }

    #[test]
    fn waiting_for_room_is_the_in_flight_limit_or_the_link() {
        // 256 KiB over 50 ms allow 5.2 MB/s; the run wrote 4.7: the in-flight limit.
        let f = mirror_limit(&facts(Protocol::A, 50_000.0, 30e3, 0.0, 90), 40e6, 4.7e6, 1).unwrap();
        assert_eq!(f.id, "mirror_in_flight", "{}", f.message);
        // The same limit at 1 ms would allow 262 MB/s; 11.9 MB/s is the link's.
        let f = mirror_limit(&facts(Protocol::A, 1_000.0, 30e3, 0.0, 90), 20e6, 11.9e6, 1).unwrap();
        assert_eq!(f.id, "mirror_link", "{}", f.message);
        // No RTT: cannot tell, and says so.
        let f = mirror_limit(&facts(Protocol::A, 0.0, 30e3, 0.0, 90), 20e6, 11.9e6, 1).unwrap();
        assert!(f.message.contains("cannot tell"), "{}", f.message);
    }

    #[test]
    fn nothing_to_say_without_writes() {
        let mut m = facts(Protocol::C, 100.0, 1.0, 1.0, 0);
        m.writes = 0;
        assert!(mirror_limit(&m, 1e6, 1e6, 1).is_none());
    }
}
