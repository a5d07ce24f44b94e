//! What the figures of a `net` run mean, in plain sentences with their figures. Each rule is
//! a pure function of recorded measurements, unit-tested on fixed samples.

#[cfg(test)]
use nsperf_core::cpu::CoreUsage;
use nsperf_core::cpu::CpuSample;
use nsperf_core::report::{Finding, Severity, cpu_bound_finding};
use nsperf_core::units::{BitRate, Bytes};

use crate::drive::ClientRun;
use crate::results::{SideResults, StopReason, SweepPoint};
use crate::summary::{DirectionSummary, LossSite, NetSummary, UdpSummary};

/// Every finding of a run; `loopback` when both ends ran in this one process.
pub fn all(run: &ClientRun, s: &NetSummary, loopback: bool) -> Vec<Finding> {
    let mut v = Vec::new();
    if s.one_host {
        v.extend(cpu_bound_one_host(&run.client, &run.server, loopback));
    } else {
        for side in [&run.client, &run.server] {
            v.extend(cpu_bound(&side.role, &side.cpu));
        }
    }
    // In one process both ends have the same quota: name it once.
    let ends = if loopback {
        vec![&run.client]
    } else {
        vec![&run.client, &run.server]
    };
    for side in ends {
        v.extend(cpu_limited(
            if loopback { "nsperf" } else { &side.role },
            side,
        ));
    }
    for (name, d) in [("client to server", &s.up), ("server to client", &s.down)] {
        let Some(d) = d else { continue };
        if run.params.mode != crate::config::Mode::Stream
            || run.params.protocol != crate::config::Protocol::Tcp
        {
            continue;
        }
        v.extend(window_limited(
            name,
            d,
            run.params.window,
            run.params.streams,
        ));
        v.extend(sndbuf_limited(name, d));
        v.extend(retransmissions(name, d, run.params.mss.unwrap_or(1448)));
    }
    if let Some(u) = &s.udp {
        v.extend(udp_loss(u));
    }
    v.extend(sweep_saturation(&s.sweep));
    v.extend(incomplete(run, s));
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

/// Mean CPU use of an end's own process, % of one core.
fn process_mean(samples: &[CpuSample]) -> Option<f64> {
    let own: Vec<f64> = samples.iter().map(|s| s.process_pct).collect();
    nsperf_core::stats::mean(&own)
}

/// A saturated core counts only when nsperf itself used at least half a core on that end:
/// a core kept busy by other work is reported by `nsperf host`, not blamed on the test.
pub fn cpu_bound(role: &str, samples: &[CpuSample]) -> Option<Finding> {
    let own_mean = process_mean(samples)?;
    if own_mean < 50.0 {
        return None;
    }
    let mut f = cpu_bound_finding(role, samples, 95.0, 0.5)?;
    f.message.push_str(&format!(
        "; the {role} process used {own_mean:.0} % of a core"
    ));
    Some(f.with("process_pct", own_mean))
}

/// Both ends on one host: their "busiest core" figures are the same cores, so one finding
/// names the core once and attributes the CPU to the two processes.
pub fn cpu_bound_one_host(
    client: &SideResults,
    server: &SideResults,
    one_process: bool,
) -> Option<Finding> {
    let c = process_mean(&client.cpu)?;
    let s = process_mean(&server.cpu).unwrap_or(0.0);
    let ours = if one_process { c } else { c + s };
    if ours < 50.0 {
        return None;
    }
    let mut f = cpu_bound_finding("host", &client.cpu, 95.0, 0.5)?;
    f.message.push_str(&if one_process {
        format!(
            "; client and server run in one process (--loopback), which used {c:.0} % of a core"
        )
    } else {
        format!(
            "; client and server run on this one host, so their busiest cores are the same \
             cores: the client process used {c:.0} %, the server process {s:.0} % of a core"
        )
    });
    Some(
        f.with("client_process_pct", c)
            .with("server_process_pct", s),
    )
}

/// An end's process held to a CPU quota (cgroup `cpu.max` / `cpu.cfs_quota_us`) and using
/// it all: the quota, not a core or the network, limits that end.
pub fn cpu_limited(role: &str, side: &SideResults) -> Option<Finding> {
    let lim = side.cpu_limit.as_ref()?;
    let own = process_mean(&side.cpu)?;
    let quota_pct = lim.quota.cores * 100.0;
    let throttled = lim.throttled_pct.unwrap_or(0.0);
    if own < 0.85 * quota_pct && throttled < 50.0 {
        return None;
    }
    let mut msg = format!(
        "{role} process at its CPU limit ({quota_pct:.0} % of a core, {} of cgroup {}): it \
         used {own:.1} % of a core",
        lim.quota.source, lim.quota.cgroup
    );
    if let Some(t) = lim.throttled_pct {
        msg.push_str(&format!(", throttled in {t:.0} % of the scheduler periods"));
    }
    Some(
        Finding::new("cpu_limited", Severity::Limit, msg)
            .with("quota_pct", quota_pct)
            .with("process_pct", own)
            .with("throttled_pct", lim.throttled_pct.unwrap_or(f64::NAN)),
    )
}

/// One stream judged against its own window / RTT (see [`window_limited`]).
#[derive(Debug, Clone, Copy)]
struct StreamJudged {
    window: u64,
    rtt_us: f64,
    base_us: f64,
    rate_bps: f64,
    /// window / RTT.
    ceiling_bps: f64,
    /// rate × smoothed RTT.
    in_flight: f64,
    /// rate × base RTT.
    bdp: f64,
    limited: bool,
}

/// One stream's figures against its window; `None` when they cannot tell (no RTT, no
/// window, no rate).
fn judge_stream(
    rate_bps: f64,
    rtt_us: Option<f64>,
    rtt_min_us: Option<f64>,
    window: Option<u64>,
    rwnd_pct: Option<f64>,
    buffer: u64,
) -> Option<StreamJudged> {
    let rtt_us = rtt_us?;
    // The window actually advertised when the kernel tells it, else the buffer.
    let window = window.filter(|&w| w > 0).unwrap_or(buffer);
    if rtt_us < 500.0 || window == 0 || rate_bps <= 0.0 {
        return None;
    }
    let in_flight = rate_bps / 8.0 * rtt_us / 1e6;
    let base_us = rtt_min_us
        .filter(|&m| m > 0.0)
        .unwrap_or(rtt_us)
        .min(rtt_us);
    let queue_free = rtt_us <= 1.2 * base_us + 1000.0;
    let never_rwnd = rwnd_pct.is_some_and(|r| r < 5.0);
    Some(StreamJudged {
        window,
        rtt_us,
        base_us,
        rate_bps,
        ceiling_bps: window as f64 * 8.0 / (rtt_us / 1e6),
        in_flight,
        bdp: rate_bps / 8.0 * base_us / 1e6,
        limited: in_flight >= 0.7 * window as f64 && queue_free && !never_rwnd,
    })
}

/// The window/RTT ceiling: a sender cannot have more than one window in flight per round
/// trip. A window belongs to one connection, so with several streams (`-P`) each stream's
/// rate is judged against its own window / RTT, and the sentence gives the per-stream and
/// the total figures. A stream is window-limited only when the window was what held it back:
/// - what its measured rate kept in flight (rate × smoothed RTT) fills at least 70 % of the
///   advertised window: the sender ran out of window, and
/// - no queue built up: the smoothed RTT stays within 20 % (+1 ms) of the path's base RTT
///   (`tcpi_min_rtt`). A window larger than the bandwidth-delay product fills a queue at the
///   bottleneck instead, the RTT grows to window / rate, and window / RTT is then the link
///   rate, not a window limit; and
/// - the kernel does not say the receive window never limited the sender
///   (`tcpi_rwnd_limited` under 5 % of the busy time). The kernel's share is not required
///   to be high: it counts only the moments a send was refused, and under-counts a sender
///   that waits for acknowledgements with its socket buffer full.
///
/// `streams` is the number of streams of the direction; when the summary has no per-stream
/// figures (one stream, an iperf3 peer, an older report) each stream is taken at the mean
/// rate of the direction. The advice is the window the measured path needs: rate × base RTT,
/// from the measured figures, never from an assumed link rate.
pub fn window_limited(
    name: &str,
    d: &DirectionSummary,
    requested: Option<u64>,
    streams: u32,
) -> Option<Finding> {
    // The request, else half the receive buffer granted (the kernel keeps the other half
    // for its bookkeeping).
    let buffer = requested.unwrap_or(d.receiver_rcvbuf_bytes / 2);
    let judged: Vec<StreamJudged> = if d.streams.is_empty() {
        let n = streams.max(1);
        let one = judge_stream(
            d.throughput_bps / n as f64,
            d.rtt_mean_us,
            d.rtt_min_us,
            d.peer_window_bytes,
            d.rwnd_limited_pct,
            buffer,
        )?;
        vec![one; n as usize]
    } else {
        d.streams
            .iter()
            .filter_map(|s| {
                judge_stream(
                    s.throughput_bps,
                    s.rtt_mean_us,
                    s.rtt_min_us,
                    s.peer_window_bytes,
                    s.rwnd_limited_pct,
                    buffer,
                )
            })
            .collect()
    };
    let limited: Vec<&StreamJudged> = judged.iter().filter(|j| j.limited).collect();
    if limited.is_empty() {
        return None;
    }
    let mean = |f: fn(&StreamJudged) -> f64| {
        limited.iter().map(|j| f(j)).sum::<f64>() / limited.len() as f64
    };
    let window = mean(|j| j.window as f64);
    let (rtt_us, base_us) = (mean(|j| j.rtt_us), mean(|j| j.base_us));
    let (ceiling, rate) = (mean(|j| j.ceiling_bps), mean(|j| j.rate_bps));
    let (in_flight, bdp) = (mean(|j| j.in_flight), mean(|j| j.bdp));
    let total_ceiling: f64 = judged.iter().map(|j| j.ceiling_bps).sum();
    let (n, k) = (judged.len(), limited.len());
    let what = match requested {
        Some(w) => format!("socket buffer {} (-w)", Bytes(w)),
        None => format!(
            "receive buffer {} (autotuned)",
            Bytes(d.receiver_rcvbuf_bytes)
        ),
    };
    let per_10m = 10e6 / 8.0 * base_us / 1e6;
    let message = if n == 1 {
        format!(
            "{name}: {what}, advertised window {} at {:.1} ms RTT: window-limited to {} \
             (window / RTT); measured {}, {} in flight per round trip ({:.0} % of the \
             window) and no queue (RTT {:.1} ms, base {:.1} ms). Going faster needs a \
             larger receive window: the rate wanted × the base RTT ({} per 10 Mbit/s; \
             twice the measured rate needs {})",
            Bytes(window as u64),
            rtt_us / 1e3,
            BitRate(ceiling),
            BitRate(rate),
            Bytes(in_flight as u64),
            100.0 * in_flight / window,
            rtt_us / 1e3,
            base_us / 1e3,
            Bytes(per_10m as u64),
            Bytes((2.0 * bdp) as u64),
        )
    } else {
        let which = if k == n {
            format!("each of the {n} streams")
        } else {
            format!("{k} of the {n} streams")
        };
        format!(
            "{name}, {n} streams: {what} each, advertised window {} at {:.1} ms RTT: \
             {which} window-limited to {} (its window / RTT; {} for the {n} streams); \
             measured {} per stream ({} in total), {} in flight per stream per round trip \
             ({:.0} % of its window) and no queue (RTT {:.1} ms, base {:.1} ms). Going \
             faster needs a larger receive window per stream: the rate wanted per stream × \
             the base RTT ({} per 10 Mbit/s; twice the measured rate needs {} per stream)",
            Bytes(window as u64),
            rtt_us / 1e3,
            BitRate(ceiling),
            BitRate(total_ceiling),
            BitRate(rate),
            BitRate(d.throughput_bps),
            Bytes(in_flight as u64),
            100.0 * in_flight / window,
            rtt_us / 1e3,
            base_us / 1e3,
            Bytes(per_10m as u64),
            Bytes((2.0 * bdp) as u64),
        )
    };
    Some(
        Finding::new("window_limited", Severity::Limit, message)
            .with("window_bytes", window)
            .with("buffer_bytes", buffer as f64)
            .with("rtt_us", rtt_us)
            .with("base_rtt_us", base_us)
            .with("ceiling_bps", ceiling)
            .with("throughput_bps", rate)
            .with("in_flight_bytes", in_flight)
            .with("bdp_bytes", bdp)
            .with("streams", n as f64)
            .with("limited_streams", k as f64)
            .with("total_throughput_bps", d.throughput_bps)
            .with("total_ceiling_bps", total_ceiling)
            .with("rwnd_limited_pct", d.rwnd_limited_pct.unwrap_or(f64::NAN)),
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

/// UDP loss and where it happened: the receiving socket's buffer, the sending host, or the
/// network (neither kernel dropped any).
pub fn udp_loss(u: &UdpSummary) -> Option<Finding> {
    if u.lost_datagrams == 0 {
        return None;
    }
    let site = u.lost_at.unwrap_or(LossSite::Unknown);
    let rx = format!(
        "the receiving socket's buffer overflowed {} times (SO_RXQ_OVFL{})",
        u.kernel_drops,
        u.receiver_rcvbuf_errors
            .map(|n| format!("; host RcvbufErrors +{n}"))
            .unwrap_or_default()
    );
    let tx = format!(
        "the sending host dropped {} datagrams it had accepted (SndbufErrors)",
        u.sender_sndbuf_errors.unwrap_or(0)
    );
    let where_ = match site {
        LossSite::ReceiverBuffer => format!("lost at the receiver: {rx}; raise -w or lower -b"),
        LossSite::Sender => format!("lost at the sender: {tx}; lower -b"),
        LossSite::BothHosts => format!("lost in both hosts: {rx}; {tx}"),
        LossSite::Network => "lost in the network: neither host's kernel dropped any \
             (receiver RcvbufErrors +0 and no socket overflow, sender SndbufErrors +0)"
            .to_string(),
        LossSite::Unknown => {
            "where is unknown: the kernels' UDP counters could not be read".to_string()
        }
    };
    let msg = format!(
        "UDP: {} of {} datagrams lost ({:.2} %), {where_}",
        u.lost_datagrams, u.sent_datagrams, u.loss_pct
    );
    let site_code = match site {
        LossSite::ReceiverBuffer => 1.0,
        LossSite::Sender => 2.0,
        LossSite::BothHosts => 3.0,
        LossSite::Network => 4.0,
        LossSite::Unknown => 0.0,
    };
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
        .with("kernel_drops", u.kernel_drops as f64)
        .with(
            "receiver_rcvbuf_errors",
            u.receiver_rcvbuf_errors.map_or(f64::NAN, |n| n as f64),
        )
        .with(
            "sender_sndbuf_errors",
            u.sender_sndbuf_errors.map_or(f64::NAN, |n| n as f64),
        )
        .with("lost_at", site_code),
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

/// A byte count (`-n`) not sent in full, and why the test stopped before it was.
pub fn incomplete(run: &ClientRun, s: &NetSummary) -> Option<Finding> {
    let p = &run.params;
    if p.bytes == 0 || p.mode != crate::config::Mode::Stream {
        return None;
    }
    let directions = if p.direction == crate::config::Direction::Both {
        2
    } else {
        1
    };
    let asked = p.bytes * directions;
    if s.sent_bytes >= asked {
        return None;
    }
    let stream_error = [&run.client, &run.server].into_iter().find_map(|side| {
        side.streams.iter().find_map(|r| {
            r.error
                .as_ref()
                .map(|e| format!("stream {} failed on the {}: {e}", r.id, side.role))
        })
    });
    let why = match (
        run.stopped_by,
        &run.server.ended_early,
        &run.client.ended_early,
    ) {
        (_, Some(note), _) | (_, _, Some(note)) => note.clone(),
        (StopReason::Time, ..) => format!(
            "the time limit (-t {:.1} s) came first",
            p.duration_ns as f64 / 1e9
        ),
        (StopReason::Streams, ..) => {
            stream_error.unwrap_or_else(|| "the data streams ended early".into())
        }
        (reason, ..) => reason.to_string(),
    };
    Some(
        Finding::new(
            "incomplete",
            Severity::Warning,
            format!(
                "only {} of the {} asked for (-n) were sent: {why}",
                Bytes(s.sent_bytes),
                Bytes(asked)
            ),
        )
        .with("sent_bytes", s.sent_bytes as f64)
        .with("asked_bytes", asked as f64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::StreamWindow;

    /// Recorded over a 45 Mbit/s, 50 ms RTT lab link with `-w 64k`.
    fn wan_64k() -> DirectionSummary {
        DirectionSummary {
            throughput_bps: 10.1e6,
            rtt_mean_us: Some(50_400.0),
            sender_sndbuf_bytes: 131_072,
            receiver_rcvbuf_bytes: 131_072,
            rtt_min_us: Some(50_100.0),
            peer_window_bytes: Some(65_535),
            rwnd_limited_pct: Some(87.0),
            sent_bytes: 12_600_000,
            ..Default::default()
        }
    }

    #[test]
    fn small_buffer_on_long_path_is_window_limited() {
        let f = window_limited("client to server", &wan_64k(), Some(65_536), 1).unwrap();
        assert_eq!(f.id, "window_limited");
        // 64 KiB / 50.4 ms = 10.4 Mbit/s
        assert!(
            (f.evidence["ceiling_bps"] - 10.40e6).abs() < 0.05e6,
            "{f:?}"
        );
        assert!(f.message.contains("64 KiB"), "{}", f.message);
        assert!(f.message.contains("50.4 ms"), "{}", f.message);
        // The advice comes from the measured 10.1 Mbit/s and 50.1 ms base RTT (twice the
        // rate: 126 KB = 124 KiB), never from an assumed 1 Gbit/s (6 MiB).
        assert!(f.message.contains("needs 124 KiB"), "{}", f.message);
        assert!(!f.message.contains("MiB"), "{}", f.message);
    }

    #[test]
    fn not_window_limited_when_the_window_is_not_used_or_never_refused() {
        // Issue 11: it fired at "receive-window-limited 0 %".
        let mut d = wan_64k();
        d.rwnd_limited_pct = Some(0.0);
        assert!(window_limited("x", &d, Some(65_536), 1).is_none());
        // The kernel's share need not be high (it under-counts, see the rule).
        d.rwnd_limited_pct = Some(20.0);
        assert!(window_limited("x", &d, Some(65_536), 1).is_some());
        d.rwnd_limited_pct = None;
        assert!(window_limited("x", &d, Some(65_536), 1).is_some());
        // A sender that kept half the window in flight was held back by something else.
        d.throughput_bps = 5e6;
        assert!(window_limited("x", &d, Some(65_536), 1).is_none());
    }

    #[test]
    fn window_above_the_bdp_is_not_window_limited() {
        // 45 Mbit/s, 50 ms base RTT, a 1 MiB window: the queue holds the rest, the smoothed
        // RTT grows to window / rate and the sender meets the receive window although the
        // link is full (issue 11: it fired when the window exceeded the BDP).
        let d = DirectionSummary {
            throughput_bps: 43e6,
            rtt_mean_us: Some(195_000.0),
            rtt_min_us: Some(50_100.0),
            peer_window_bytes: Some(1 << 20),
            receiver_rcvbuf_bytes: 2 << 20,
            rwnd_limited_pct: Some(80.0),
            ..Default::default()
        };
        assert!(window_limited("x", &d, Some(1 << 20), 1).is_none());
        let lo = DirectionSummary {
            throughput_bps: 30e9,
            rtt_mean_us: Some(40.0),
            receiver_rcvbuf_bytes: 6 << 20,
            sender_sndbuf_bytes: 4 << 20,
            ..Default::default()
        };
        assert!(window_limited("x", &lo, None, 1).is_none());
    }

    /// Issue 20 item 1: `-P 2 -w 128k` on 1 Gbit/s, 10 ms: 305 Mbit/s in total, about
    /// 152 Mbit/s per stream, each against its own ~203 KiB window. The total against one
    /// window read "185 % of the window".
    fn two_streams_128k() -> DirectionSummary {
        let stream = |id, bps| StreamWindow {
            stream: id,
            throughput_bps: bps,
            rtt_mean_us: Some(10_000.0),
            rtt_min_us: Some(9_900.0),
            peer_window_bytes: Some(207_500),
            rwnd_limited_pct: Some(60.0),
        };
        DirectionSummary {
            throughput_bps: 305e6,
            rtt_mean_us: Some(10_000.0),
            rtt_min_us: Some(9_900.0),
            peer_window_bytes: Some(207_500),
            receiver_rcvbuf_bytes: 262_144,
            rwnd_limited_pct: Some(60.0),
            streams: vec![stream(0, 151e6), stream(1, 154e6)],
            ..Default::default()
        }
    }

    #[test]
    fn parallel_streams_are_judged_each_against_its_own_window() {
        let d = two_streams_128k();
        let f = window_limited("client to server", &d, Some(131_072), 2).unwrap();
        let e = &f.evidence;
        // Per stream: ~152 Mbit/s of a 166 Mbit/s window / RTT, 91-93 % of the window.
        assert!(e["in_flight_bytes"] <= e["window_bytes"], "{f:?}");
        assert!((e["ceiling_bps"] - 166e6).abs() < 1e6, "{f:?}");
        assert!((e["throughput_bps"] - 152.5e6).abs() < 1e3, "{f:?}");
        assert!((e["total_ceiling_bps"] - 332e6).abs() < 2e6, "{f:?}");
        assert_eq!(e["total_throughput_bps"], 305e6);
        assert_eq!((e["streams"], e["limited_streams"]), (2.0, 2.0));
        let m = &f.message;
        for want in [
            "2 streams",
            "each of the 2 streams window-limited to 166 Mbit/s",
            "332 Mbit/s for the 2 streams",
            "per stream (305 Mbit/s in total)",
            "(92 % of its window)",
        ] {
            assert!(m.contains(want), "{want:?} not in {m}");
        }
        // No figure beside the verdict says more than a window was in flight.
        assert!(!m.contains("185 %"), "{m}");
        // Without per-stream figures (an iperf3 peer), the mean rate per stream.
        let mut agg = d.clone();
        agg.streams.clear();
        let f = window_limited("x", &agg, Some(131_072), 2).unwrap();
        assert!(f.evidence["in_flight_bytes"] <= f.evidence["window_bytes"]);
        assert!(f.message.contains("each of the 2 streams"), "{}", f.message);
    }

    #[test]
    fn parallel_streams_under_their_windows_are_not_window_limited() {
        // Two streams each at 45 % of its own window: the total fills 90 % of one window,
        // which the old rule called window-limited.
        let mut d = two_streams_128k();
        for s in &mut d.streams {
            s.throughput_bps = 75e6;
        }
        d.throughput_bps = 150e6;
        assert!(window_limited("x", &d, Some(131_072), 2).is_none());
        // One of the two at its window: the finding says which share.
        d.streams[1].throughput_bps = 160e6;
        d.throughput_bps = 235e6;
        let f = window_limited("x", &d, Some(131_072), 2).unwrap();
        assert!(f.message.contains("1 of the 2 streams"), "{}", f.message);
        assert!(f.message.contains("235 Mbit/s in total"), "{}", f.message);
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
    fn udp_loss_says_where() {
        let mut u = UdpSummary {
            sent_datagrams: 1000,
            received_datagrams: 900,
            lost_datagrams: 100,
            loss_pct: 10.0,
            kernel_drops: 100,
            receiver_rcvbuf_errors: Some(100),
            sender_sndbuf_errors: Some(0),
            lost_at: Some(LossSite::place(100, Some(100), Some(0))),
            ..Default::default()
        };
        let f = udp_loss(&u).unwrap();
        assert!(f.message.contains("lost at the receiver"), "{}", f.message);
        u.kernel_drops = 0;
        u.receiver_rcvbuf_errors = Some(0);
        u.lost_at = Some(LossSite::place(0, Some(0), Some(0)));
        let f = udp_loss(&u).unwrap();
        assert!(f.message.contains("lost in the network"), "{}", f.message);
        u.sender_sndbuf_errors = Some(40);
        u.lost_at = Some(LossSite::place(0, Some(0), Some(40)));
        assert!(udp_loss(&u).unwrap().message.contains("lost at the sender"));
        assert_eq!(LossSite::place(0, None, None), LossSite::Unknown);
        assert_eq!(LossSite::place(3, None, None), LossSite::ReceiverBuffer);
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

    fn side(role: &str, busy: f64, own: f64) -> SideResults {
        SideResults {
            role: role.into(),
            cpu: (0..4)
                .map(|_| CpuSample {
                    per_core: vec![CoreUsage {
                        core: 1,
                        busy_pct: busy,
                        ..Default::default()
                    }],
                    process_pct: own,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn one_host_names_the_core_once() {
        // Issue 11: on one host both ends reported "core 0 at 100 %: CPU-bound".
        let (c, s) = (side("client", 100.0, 60.0), side("server", 100.0, 40.0));
        let f = cpu_bound_one_host(&c, &s, false).unwrap();
        assert!(f.message.contains("same cores"), "{}", f.message);
        assert!(
            f.message.contains("client process used 60 %"),
            "{}",
            f.message
        );
        assert!(f.message.contains("server process 40 %"), "{}", f.message);
        let f = cpu_bound_one_host(&c, &c, true).unwrap();
        assert!(f.message.contains("one process"), "{}", f.message);
        let idle = side("client", 100.0, 10.0);
        assert!(cpu_bound_one_host(&idle, &idle, false).is_none());
    }

    #[test]
    fn a_process_at_its_quota_is_found() {
        let quota = |cores: f64, throttled: Option<f64>| {
            Some(crate::results::CpuLimitUse {
                quota: nsperf_core::cgroup::CpuQuota {
                    cgroup: "/lim".into(),
                    cores,
                    source: "cpu.max".into(),
                    dir: Default::default(),
                },
                throttled_pct: throttled,
            })
        };
        let mut s = side("server", 30.0, 2.9);
        s.cpu_limit = quota(0.03, Some(96.0));
        let f = cpu_limited("server", &s).unwrap();
        assert!(
            f.message
                .starts_with("server process at its CPU limit (3 % of a core"),
            "{}",
            f.message
        );
        assert!(f.message.contains("throttled in 96 %"), "{}", f.message);
        // A generous quota the process does not reach is no limit.
        s.cpu_limit = quota(2.0, Some(0.0));
        assert!(cpu_limited("server", &s).is_none());
        s.cpu_limit = None;
        assert!(cpu_limited("server", &s).is_none());
    }
}
