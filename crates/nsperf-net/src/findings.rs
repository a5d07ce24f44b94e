//! What the figures of a `net` run mean, in plain sentences with their figures. Each rule is
//! a pure function of recorded measurements, unit-tested on fixed samples.

#[cfg(test)]
use nsperf_core::cpu::{CoreUsage, CpuSample};
use nsperf_core::report::{Finding, Severity, cpu_bound_finding};
use nsperf_core::units::{BitRate, Bytes};

use crate::client::ClientRun;
use crate::report::{DirectionSummary, NetSummary, UdpSummary};
use crate::results::SweepPoint;

/// Every finding of a run.
pub fn all(run: &ClientRun, s: &NetSummary) -> Vec<Finding> {
    let mut v = Vec::new();
    for side in [&run.client, &run.server] {
        if let Some(f) = cpu_bound(&side.role, &side.cpu) {
            v.push(f);
        }
    }
    for (name, d) in [("client to server", &s.up), ("server to client", &s.down)] {
        let Some(d) = d else { continue };
        if run.params.mode != crate::config::Mode::Stream
            || run.params.protocol != crate::config::Protocol::Tcp
        {
            continue;
        }
        v.extend(window_limited(name, d, run.params.window));
        v.extend(sndbuf_limited(name, d));
        v.extend(retransmissions(name, d, run.params.mss.unwrap_or(1448)));
    }
    if let Some(u) = &s.udp {
        v.extend(udp_loss(u));
    }
    v.extend(sweep_saturation(&s.sweep));
    v.extend(awake_not_held(run.params.awake, s));
    if matches!(run.params.mode, crate::config::Mode::Rr { .. }) && !run.params.awake {
        v.extend(idle_wait(s));
    }
    v
}

/// `--awake` was asked for but an end could not hold its CPUs out of deep idle.
pub fn awake_not_held(asked: bool, s: &NetSummary) -> Option<Finding> {
    if !asked || (s.client_cpu_awake && s.server_cpu_awake) {
        return None;
    }
    let ends: Vec<&str> = [
        ("client", s.client_cpu_awake),
        ("server", s.server_cpu_awake),
    ]
    .iter()
    .filter(|(_, held)| !held)
    .map(|(e, _)| *e)
    .collect();
    Some(
        Finding::new(
            "awake_not_held",
            Severity::Warning,
            format!(
                "--awake: the {} did not hold its CPUs out of deep idle \
                 (/dev/cpu_dma_latency needs root; a server may refuse with --deny-awake): \
                 its figures include CPU wake-ups",
                ends.join(" and the ")
            ),
        )
        .with("client_cpu_awake", s.client_cpu_awake as u8 as f64)
        .with("server_cpu_awake", s.server_cpu_awake as u8 as f64),
    )
}

/// Request/response with both ends mostly idle: the round trip is waiting, not work. On one
/// host or on virtual machines much of that wait is CPUs waking from idle, which `--awake`
/// takes out.
pub fn idle_wait(s: &NetSummary) -> Option<Finding> {
    let p50 = s.lat_p50_ns?;
    let busiest = s.client_busiest_core_pct.max(s.server_busiest_core_pct);
    if busiest >= 50.0 || p50 == 0 {
        return None;
    }
    Some(
        Finding::new(
            "idle_wait",
            Severity::Info,
            format!(
                "request/response: the busiest cores were only {:.0} % (client) and {:.0} % \
                 (server) busy at a median latency of {:.1} µs: the ends mostly wait for each \
                 other. Part of that wait can be CPUs waking from idle states; --awake holds \
                 them out of deep idle to show how much",
                s.client_busiest_core_pct,
                s.server_busiest_core_pct,
                p50 as f64 / 1e3
            ),
        )
        .with("client_busiest_core_pct", s.client_busiest_core_pct)
        .with("server_busiest_core_pct", s.server_busiest_core_pct)
        .with("lat_p50_ns", p50 as f64),
    )
}

/// A saturated core counts only when nsperf itself used at least half a core on that end:
/// a core kept busy by other work is reported by `nsperf host`, not blamed on the test.
pub fn cpu_bound(role: &str, samples: &[nsperf_core::cpu::CpuSample]) -> Option<Finding> {
    let own: Vec<f64> = samples.iter().map(|s| s.process_pct).collect();
    let own_mean = nsperf_core::stats::mean(&own)?;
    if own_mean < 50.0 {
        return None;
    }
    cpu_bound_finding(role, samples, 95.0, 0.5).map(|f| f.with("process_pct", own_mean))
}

/// The window/RTT ceiling: a sender cannot have more than one window in flight per round
/// trip. `window` is the `-w` request (the kernel doubles it for bookkeeping and advertises
/// about the requested size), else half the receive buffer granted.
pub fn window_limited(name: &str, d: &DirectionSummary, requested: Option<u64>) -> Option<Finding> {
    let rtt_us = d.rtt_mean_us?;
    if rtt_us < 500.0 {
        return None;
    }
    // The window actually advertised when the kernel tells it, else the request, else half
    // the receive buffer granted (the kernel keeps the other half for its bookkeeping).
    let buffer = requested.unwrap_or(d.receiver_rcvbuf_bytes / 2);
    let window = d.peer_window_bytes.filter(|&w| w > 0).unwrap_or(buffer);
    if window == 0 {
        return None;
    }
    let rtt_s = rtt_us / 1e6;
    let ceiling = window as f64 * 8.0 / rtt_s;
    let near_ceiling = d.throughput_bps >= 0.6 * ceiling;
    let rwnd = d.rwnd_limited_pct.unwrap_or(0.0);
    if !(near_ceiling || rwnd >= 50.0) {
        return None;
    }
    let what = match requested {
        Some(w) => format!("socket buffer {} (-w)", Bytes(w)),
        None => format!(
            "receive buffer {} (autotuned)",
            Bytes(d.receiver_rcvbuf_bytes)
        ),
    };
    Some(
        Finding::new(
            "window_limited",
            Severity::Limit,
            format!(
                "{name}: {what}, advertised window {} at {:.1} ms RTT: window-limited to {} \
                 (window / RTT); measured {}; receive-window-limited {:.0} % of the busy time. \
                 Going faster needs a buffer of one bandwidth-delay product (e.g. 1 Gbit/s × \
                 {:.1} ms = {})",
                Bytes(window),
                rtt_us / 1e3,
                BitRate(ceiling),
                BitRate(d.throughput_bps),
                rwnd,
                rtt_us / 1e3,
                Bytes((1e9 / 8.0 * rtt_s) as u64),
            ),
        )
        .with("window_bytes", window as f64)
        .with("buffer_bytes", buffer as f64)
        .with("rtt_us", rtt_us)
        .with("ceiling_bps", ceiling)
        .with("throughput_bps", d.throughput_bps)
        .with("rwnd_limited_pct", rwnd),
    )
}

/// The sender's own buffer held it back most of the time.
pub fn sndbuf_limited(name: &str, d: &DirectionSummary) -> Option<Finding> {
    let pct = d.sndbuf_limited_pct?;
    (pct >= 50.0).then(|| {
        Finding::new(
            "sndbuf_limited",
            Severity::Warning,
            format!(
                "{name}: the sender was limited by its send buffer ({}) {pct:.0} % of the busy time",
                Bytes(d.sender_sndbuf_bytes)
            ),
        )
        .with("sndbuf_limited_pct", pct)
        .with("sndbuf_bytes", d.sender_sndbuf_bytes as f64)
    })
}

/// Retransmissions worth a look: more than 0.1 % of the data sent again.
pub fn retransmissions(name: &str, d: &DirectionSummary, mss: u32) -> Option<Finding> {
    if d.retransmits == 0 || d.sent_bytes == 0 {
        return None;
    }
    let share = 100.0 * d.retransmits as f64 * mss as f64 / d.sent_bytes as f64;
    (share >= 0.1).then(|| {
        Finding::new(
            "retransmissions",
            Severity::Warning,
            format!(
                "{name}: {} segments retransmitted (about {share:.2} % of the data): loss or \
                 reordering on the path",
                d.retransmits
            ),
        )
        .with("retransmits", d.retransmits as f64)
        .with("retransmitted_pct", share)
    })
}

/// UDP loss, and whether the receiving socket overflowed (a receiver-bound test).
pub fn udp_loss(u: &UdpSummary) -> Option<Finding> {
    if u.lost_datagrams == 0 {
        return None;
    }
    let mut msg = format!(
        "UDP: {} of {} datagrams lost ({:.2} %)",
        u.lost_datagrams, u.sent_datagrams, u.loss_pct
    );
    if u.kernel_drops > 0 {
        msg.push_str(&format!(
            "; the receiving socket overflowed {} times: receiver-bound (raise -w or lower -b)",
            u.kernel_drops
        ));
    }
    Some(
        Finding::new(
            "udp_loss",
            if u.loss_pct >= 1.0 {
                Severity::Warning
            } else {
                Severity::Info
            },
            msg,
        )
        .with("lost_datagrams", u.lost_datagrams as f64)
        .with("loss_pct", u.loss_pct)
        .with("kernel_drops", u.kernel_drops as f64),
    )
}

/// Where a message-size sweep saturates: the smallest message reaching 90 % of the best
/// throughput, and what 16 KiB messages get (the classic replicated-block-device trap).
pub fn sweep_saturation(points: &[SweepPoint]) -> Option<Finding> {
    let best = points.iter().map(|p| p.throughput_bps).fold(0.0, f64::max);
    if best <= 0.0 {
        return None;
    }
    let knee = points.iter().find(|p| p.throughput_bps >= 0.9 * best)?;
    let mut msg = format!(
        "sweep: throughput reaches 90 % of its best ({}) from {} messages",
        BitRate(best),
        Bytes(knee.size_bytes as u64)
    );
    let mut f = Finding::new("sweep_saturation", Severity::Info, String::new())
        .with("best_bps", best)
        .with("knee_bytes", knee.size_bytes as f64);
    if let Some(p16) = points.iter().find(|p| p.size_bytes == 16 * 1024) {
        msg.push_str(&format!(
            "; 16 KiB messages get {} ({:.0} % of it)",
            BitRate(p16.throughput_bps),
            100.0 * p16.throughput_bps / best
        ));
        f = f.with("at_16k_bps", p16.throughput_bps);
    }
    f.message = msg;
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded over a 45 Mbit/s, 50 ms RTT lab link with `-w 64k`.
    fn wan_64k() -> DirectionSummary {
        DirectionSummary {
            throughput_bps: 10.1e6,
            rtt_mean_us: Some(50_400.0),
            sender_sndbuf_bytes: 131_072,
            receiver_rcvbuf_bytes: 131_072,
            rwnd_limited_pct: Some(87.0),
            sent_bytes: 12_600_000,
            ..Default::default()
        }
    }

    #[test]
    fn small_buffer_on_long_path_is_window_limited() {
        let f = window_limited("client to server", &wan_64k(), Some(65_536)).unwrap();
        assert_eq!(f.id, "window_limited");
        // 64 KiB / 50.4 ms = 10.4 Mbit/s
        assert!(
            (f.evidence["ceiling_bps"] - 10.40e6).abs() < 0.05e6,
            "{f:?}"
        );
        assert!(f.message.contains("64 KiB"), "{}", f.message);
        assert!(f.message.contains("50.4 ms"), "{}", f.message);
    }

    #[test]
    fn big_buffer_or_short_path_is_not() {
        let mut d = wan_64k();
        d.rwnd_limited_pct = Some(0.0);
        assert!(window_limited("x", &d, Some(4 << 20)).is_none());
        let lo = DirectionSummary {
            throughput_bps: 30e9,
            rtt_mean_us: Some(40.0),
            receiver_rcvbuf_bytes: 6 << 20,
            sender_sndbuf_bytes: 4 << 20,
            ..Default::default()
        };
        assert!(window_limited("x", &lo, None).is_none());
    }

    #[test]
    fn retransmissions_and_sndbuf() {
        let mut d = wan_64k();
        d.retransmits = 100;
        assert!(retransmissions("x", &d, 1448).is_some());
        d.retransmits = 1;
        assert!(retransmissions("x", &d, 1448).is_none());
        d.sndbuf_limited_pct = Some(70.0);
        assert_eq!(sndbuf_limited("x", &d).unwrap().id, "sndbuf_limited");
    }

    #[test]
    fn sweep_knee_and_16k() {
        let pts: Vec<SweepPoint> = [
            (1024u32, 100e6),
            (16384, 380e6),
            (65536, 900e6),
            (1 << 20, 950e6),
        ]
        .iter()
        .map(|&(s, t)| SweepPoint {
            size_bytes: s,
            throughput_bps: t,
            ..Default::default()
        })
        .collect();
        let f = sweep_saturation(&pts).unwrap();
        assert_eq!(f.evidence["knee_bytes"], 65536.0);
        assert!(f.message.contains("16 KiB messages get"), "{}", f.message);
    }

    #[test]
    fn busy_core_blamed_only_when_nsperf_used_it() {
        let sample = |own: f64| CpuSample {
            per_core: vec![CoreUsage {
                core: 0,
                busy_pct: 99.0,
                ..Default::default()
            }],
            process_pct: own,
        };
        let others: Vec<CpuSample> = (0..5).map(|_| sample(3.0)).collect();
        assert!(cpu_bound("client", &others).is_none());
        let ours: Vec<CpuSample> = (0..5).map(|_| sample(97.0)).collect();
        assert_eq!(cpu_bound("client", &ours).unwrap().id, "cpu_bound");
    }

    #[test]
    fn udp_loss_names_receiver_overflow() {
        let u = UdpSummary {
            sent_datagrams: 1000,
            received_datagrams: 900,
            lost_datagrams: 100,
            loss_pct: 10.0,
            kernel_drops: 100,
            ..Default::default()
        };
        let f = udp_loss(&u).unwrap();
        assert!(f.message.contains("receiver-bound"));
    }

    #[test]
    fn idle_wait_only_when_both_ends_mostly_idle() {
        let mut s = NetSummary {
            client_busiest_core_pct: 34.0,
            server_busiest_core_pct: 33.0,
            lat_p50_ns: Some(65_200),
            ..Default::default()
        };
        let f = idle_wait(&s).unwrap();
        assert!(f.message.contains("65.2 µs"), "{}", f.message);
        s.server_busiest_core_pct = 97.0;
        assert!(idle_wait(&s).is_none());
        s.server_busiest_core_pct = 20.0;
        s.lat_p50_ns = None;
        assert!(idle_wait(&s).is_none());
    }

    #[test]
    fn awake_not_held_names_the_end() {
        let mut s = NetSummary {
            client_cpu_awake: true,
            ..Default::default()
        };
        assert!(awake_not_held(false, &s).is_none());
        let f = awake_not_held(true, &s).unwrap();
        assert!(f.message.contains("the server did not"), "{}", f.message);
        s.server_cpu_awake = true;
        assert!(awake_not_held(true, &s).is_none());
        s.client_cpu_awake = false;
        s.server_cpu_awake = false;
        let f = awake_not_held(true, &s).unwrap();
        assert!(f.message.contains("client and the server"), "{}", f.message);
    }
}
