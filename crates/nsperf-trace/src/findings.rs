//! What the figures of a capture mean, as findings: damage, frames captured twice, and what
//! limited the largest connections. Bounded: one finding per detailed connection and one
//! count of the verdicts of all connections.

use std::collections::BTreeMap;

use nsperf_core::report::{Finding, Severity};

use crate::model::{Limit, ProtocolLimit, TcpConnection, TraceSummary};
use crate::store::ConnectionStore;

/// The finding id of a verdict.
pub fn finding_id(limit: Limit) -> &'static str {
    match limit {
        Limit::ReceiverWindow => "window_limited",
        Limit::Loss => "loss_limited",
        Limit::Congestion => "congestion_limited",
        Limit::Application => "application_limited",
        Limit::WindowUnknown => "window_scale_unknown",
        Limit::TooShort => "too_short",
        Limit::None => "no_data",
    }
}

/// The `top` largest connections (by wire bytes, both ways), largest first.
pub fn largest<S: ConnectionStore>(
    s: &TraceSummary<S>,
    top: usize,
) -> std::io::Result<Vec<TcpConnection>> {
    let size = |c: &TcpConnection| c.a_to_b.wire_bytes + c.b_to_a.wire_bytes;
    let mut best: Vec<TcpConnection> = Vec::new();
    s.connections.each(&mut |c| {
        if top == 0 {
            return;
        }
        if best.len() < top {
            best.push(c.clone());
        } else if let Some((i, m)) = best.iter().enumerate().min_by_key(|(_, b)| size(b)) {
            if size(c) > size(m) {
                best[i] = c.clone();
            }
        }
    })?;
    best.sort_by_key(|c| std::cmp::Reverse(size(c)));
    Ok(best)
}

/// The findings of an analysed capture; per-connection findings for the `top` largest.
pub fn findings<S: ConnectionStore>(
    s: &TraceSummary<S>,
    top: usize,
) -> std::io::Result<Vec<Finding>> {
    let mut out = Vec::new();
    if let Some(why) = &s.capture.stopped_early {
        out.push(
            Finding::new(
                "capture_damaged",
                Severity::Warning,
                format!("capture read only in part: {why}"),
            )
            .with("records_read", s.capture.records as f64),
        );
    }
    if s.unusable_packets > 0 {
        out.push(
            Finding::new(
                "unusable_packets",
                Severity::Info,
                format!(
                    "{} packets had headers cut by the snapshot length or malformed and were skipped",
                    s.unusable_packets
                ),
            )
            .with("packets", s.unusable_packets as f64),
        );
    }
    if s.duplicated_frames > 0 {
        out.push(
            Finding::new(
                "duplicated_frames",
                Severity::Warning,
                format!(
                    "{} of {} TCP frames were captured twice (same IP ID, sequence, length, flags and timestamp, up to 200 ms apart: the capture saw the link at two points, e.g. a routing host or a mirror port on both sides of a router); the copies are left out of retransmissions, loss and the diagnosis",
                    s.duplicated_frames, s.tcp_packets
                ),
            )
            .with("frames", s.duplicated_frames as f64)
            .with("tcp_packets", s.tcp_packets as f64),
        );
    }
    if let Some(b) = s.series.filter(|b| b.used_s > b.asked_s) {
        let d = |s: f64| nsperf_core::units::format_duration(std::time::Duration::from_secs_f64(s));
        out.push(
            Finding::new(
                "series_widened",
                Severity::Info,
                format!(
                    "the series bins are {} wide, not the {} asked: {} of capture in bins of {} would need more than the {} bins (or per-connection cells) the series holds at most, so neighbouring bins were merged",
                    d(b.used_s),
                    d(b.asked_s),
                    d(s.capture_duration_ns as f64 / 1e9),
                    d(b.asked_s),
                    crate::series::MAX_BINS
                ),
            )
            .with("asked_s", b.asked_s)
            .with("used_s", b.used_s),
        );
    }
    let mut verdicts: BTreeMap<String, u64> = BTreeMap::new();
    s.connections.each(&mut |c| {
        *verdicts.entry(c.diagnosis.limit.to_string()).or_default() += 1;
    })?;
    for c in largest(s, top)? {
        if let Some(f) = connection_finding(&c) {
            out.push(f);
        }
        if let Some(f) = protocol_finding(&c) {
            out.push(f);
        }
    }
    if s.connection_count as usize > top.max(1) {
        let text: Vec<String> = verdicts.iter().map(|(k, v)| format!("{v} {k}")).collect();
        let mut f = Finding::new(
            "connection_verdicts",
            Severity::Info,
            format!(
                "{} TCP connections: {}",
                s.connection_count,
                text.join(", ")
            ),
        );
        for (k, v) in &verdicts {
            f = f.with(k, *v as f64);
        }
        out.push(f);
    }
    Ok(out)
}

/// The finding of one connection's diagnosis (none for "too short" or "no data").
pub fn connection_finding(c: &TcpConnection) -> Option<Finding> {
    let d = &c.diagnosis;
    if !d.limit.is_verdict() {
        return None;
    }
    let severity = if d.limit == Limit::Application {
        Severity::Info
    } else {
        Severity::Limit
    };
    let mut f = Finding::new(
        finding_id(d.limit),
        severity,
        format!("connection {} ({} -> {}): {}", c.id, c.a, c.b, d.message),
    )
    .with("connection", f64::from(c.id))
    .with("goodput_bps", d.goodput_bps)
    .with("receiver_window_pct", d.receiver_window_pct)
    .with("loss_pct", d.loss_pct)
    .with("congestion_pct", d.congestion_pct)
    .with("application_pct", d.application_pct)
    .with("window_unknown_pct", d.window_unknown_pct)
    .with("loss_rate", d.loss_rate)
    .with("path_rtt_min_ns", d.path_rtt.min_ns as f64);
    for (name, v) in [
        ("window_ceiling_bps", d.window_ceiling_bps),
        ("window_ceiling_at_least_bps", d.window_ceiling_at_least_bps),
        ("mathis_model_bps", d.mathis_model_bps),
    ] {
        if let Some(v) = v {
            f = f.with(name, v);
        }
    }
    Some(f)
}

/// The finding id of a protocol verdict.
pub fn protocol_finding_id(limit: ProtocolLimit) -> &'static str {
    match limit {
        ProtocolLimit::RequestsInFlight => "protocol_bound",
        ProtocolLimit::Server => "server_bound",
        ProtocolLimit::Client => "client_bound",
        ProtocolLimit::Transfer => "network_bound",
        ProtocolLimit::TooShort => "protocol_too_short",
    }
}

/// The finding of what set a connection's storage protocol's pace (none when too few
/// requests).
pub fn protocol_finding(c: &TcpConnection) -> Option<Finding> {
    let d = c.protocol.as_ref()?.diagnosis.as_ref()?;
    if d.limit == ProtocolLimit::TooShort {
        return None;
    }
    let mut f = Finding::new(
        protocol_finding_id(d.limit),
        Severity::Limit,
        format!(
            "connection {} ({} -> {}), {}: {}",
            c.id, c.a, c.b, d.op, d.message
        ),
    )
    .with("connection", f64::from(c.id))
    .with("requests", d.requests as f64)
    .with("in_flight", d.in_flight)
    .with("size_mean_bytes", d.size_mean_bytes)
    .with("path_rtt_ns", d.path_rtt_ns as f64)
    .with("measured_bps", d.measured_bps)
    .with("rtt_pct", d.rtt_pct)
    .with("transfer_pct", d.transfer_pct)
    .with("server_pct", d.server_pct)
    .with("client_pct", d.client_pct)
    .with("server_ns", d.server_ns)
    .with("client_ns", d.client_ns);
    if let Some(c) = d.ceiling_bps {
        f = f.with("ceiling_bps", c);
    }
    Some(f)
}
