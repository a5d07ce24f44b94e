//! What limited a sender: the time between its data segments is attributed to the state it
//! was in after the earlier one, and the shares become the diagnosis. The split follows the
//! sender-limit timers of RFC 4898 (TCP ESTATS MIB: SndLimTimeRwin, SndLimTimeCwnd,
//! SndLimTimeSnd), inferred from a capture instead of read from the kernel.
//!
//! States: the receiver window was full (`ReceiverWindow`); the sender was recovering from
//! loss (`Loss`: duplicate ACKs pending or a retransmission within two RTTs); there was room
//! in the receiver window but the sender did not use it (`Congestion`: the congestion window);
//! everything sent was acknowledged and the sender was silent for at least an RTT
//! (`Application`); everything sent was acknowledged but the sender kept sending back-to-back
//! (`Sender`: its link, shaper, qdisc, CPU or application set the pace, not TCP); or the
//! window could have been full but its scale is unknown (`WindowUnknown`).

use crate::model::{Diagnosis, DirectionStats};

/// What held the sender back after a data segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendState {
    /// In flight reached the receiver's advertised window.
    ReceiverWindow,
    /// Recovering from loss.
    Loss,
    /// Room in the receiver window, not used: congestion window.
    #[default]
    Congestion,
    /// The window may have been full; its scale was not captured.
    WindowUnknown,
}

/// Shortest silence, with everything acknowledged, that counts as the application pausing
/// (when the RTT is shorter).
const MIN_APP_PAUSE_NS: i64 = 100_000;

/// Time spent in each state, in nanoseconds.
#[derive(Debug, Clone, Default)]
pub struct LimitAccount {
    last: Option<(i64, SendState)>,
    /// Sender pace: nothing outstanding, yet no pause.
    pub sender_ns: i64,
    /// Receiver window full.
    pub receiver_window_ns: i64,
    /// Loss recovery.
    pub loss_ns: i64,
    /// Congestion window.
    pub congestion_ns: i64,
    /// Application idle.
    pub application_ns: i64,
    /// Unknown window scale.
    pub window_unknown_ns: i64,
}

impl LimitAccount {
    /// A data segment was sent at `ts_ns`; `idle` when everything before was acknowledged;
    /// `rtt_ns` the smallest RTT measured so far.
    pub fn on_data(&mut self, ts_ns: i64, idle: bool, state: SendState, rtt_ns: Option<i64>) {
        if let Some((t, s)) = self.last {
            let dt = (ts_ns - t).max(0);
            if idle {
                if dt >= rtt_ns.unwrap_or(0).max(MIN_APP_PAUSE_NS) {
                    self.application_ns += dt;
                } else {
                    self.sender_ns += dt;
                }
            } else {
                match s {
                    SendState::ReceiverWindow => self.receiver_window_ns += dt,
                    SendState::Loss => self.loss_ns += dt,
                    SendState::Congestion => self.congestion_ns += dt,
                    SendState::WindowUnknown => self.window_unknown_ns += dt,
                }
            }
        }
        self.last = Some((ts_ns, state));
    }

    fn total(&self) -> i64 {
        self.receiver_window_ns
            + self.sender_ns
            + self.loss_ns
            + self.congestion_ns
            + self.application_ns
            + self.window_unknown_ns
    }
}

fn fmt_rate(bps: f64) -> String {
    nsperf_core::BitRate(bps).to_string()
}

/// The diagnosis of one direction, from its time account and figures.
pub fn diagnose(
    direction: &str,
    acc: &LimitAccount,
    sender: &DirectionStats,
    receiver: &DirectionStats,
    scale_known: bool,
) -> Diagnosis {
    let total = acc.total();
    let pct = |x: i64| {
        if total > 0 {
            x as f64 * 100.0 / total as f64
        } else {
            0.0
        }
    };
    let mut d = Diagnosis {
        direction: direction.to_string(),
        receiver_window_pct: pct(acc.receiver_window_ns),
        loss_pct: pct(acc.loss_ns),
        congestion_pct: pct(acc.congestion_ns),
        application_pct: pct(acc.application_ns),
        sender_pct: pct(acc.sender_ns),
        window_unknown_pct: pct(acc.window_unknown_ns),
        goodput_bps: sender.goodput_bps,
        ..Diagnosis::default()
    };
    d.loss_rate = if sender.data_packets > 0 {
        sender.retransmitted_packets as f64 / sender.data_packets as f64
    } else {
        0.0
    };
    // The ceilings use the median path RTT, queueing included: the sum of both directions'
    // data->ACK medians, each measured from the capture point to one end and back.
    let path_ns = sender.rtt.median_ns + receiver.rtt.median_ns;
    let rtt_s = (sender.rtt.samples + receiver.rtt.samples > 0 && path_ns > 0)
        .then(|| path_ns as f64 / 1e9);
    if let Some(rtt) = rtt_s {
        if receiver.window_max_bytes > 0 {
            d.window_ceiling_bps = Some(receiver.window_max_bytes as f64 * 8.0 / rtt);
        }
        let mss = sender.mss.or(receiver.mss).map(f64::from).unwrap_or(536.0);
        if d.loss_rate > 0.0 {
            // Mathis, Semke, Mahdavi, Ott 1997: rate <= MSS/RTT * C/sqrt(p), C = sqrt(3/2).
            d.mathis_ceiling_bps = Some(mss * 8.0 / rtt * 1.22 / d.loss_rate.sqrt());
        }
    }
    let shares = [
        ("receiver_window", d.receiver_window_pct),
        ("loss", d.loss_pct),
        ("congestion", d.congestion_pct),
        ("application", d.application_pct),
        ("sender", d.sender_pct),
        ("window_unknown", d.window_unknown_pct),
    ];
    let (limit, share) = shares
        .iter()
        .copied()
        .fold(("none", 0.0), |best, x| if x.1 > best.1 { x } else { best });
    d.limit = if sender.data_packets < 2 || total == 0 {
        "none".to_string()
    } else {
        limit.to_string()
    };
    let rtt_txt = rtt_s
        .map(|r| format!("{:.2} ms", r * 1e3))
        .unwrap_or_else(|| "unmeasured".into());
    let win = receiver.window_max_bytes;
    d.message = match d.limit.as_str() {
        "none" => "too little data to diagnose".to_string(),
        "receiver_window" => format!(
            "receiver-window-limited {share:.0} % of the time: in flight reached the advertised window (max {} B, in flight max {} B) at RTT {rtt_txt}; ceiling window/RTT {}",
            win,
            sender.in_flight_max_bytes,
            d.window_ceiling_bps
                .map(fmt_rate)
                .unwrap_or_else(|| "n/a".into())
        ),
        "loss" => format!(
            "loss-limited {share:.0} % of the time: {} retransmitted of {} data segments ({:.2} %), goodput {}; Mathis ceiling {} (Reno model: CUBIC and BBR can exceed it)",
            sender.retransmitted_packets,
            sender.data_packets,
            d.loss_rate * 100.0,
            fmt_rate(sender.goodput_bps),
            d.mathis_ceiling_bps
                .map(fmt_rate)
                .unwrap_or_else(|| "n/a".into())
        ),
        "congestion" => format!(
            "congestion-window-limited {share:.0} % of the time: room in the receiver window (max {} B) left unused, in flight max {} B, RTT {rtt_txt}",
            win, sender.in_flight_max_bytes
        ),
        "application" => format!(
            "application-limited {share:.0} % of the time: everything sent was acknowledged and the sender paused for an RTT or more (the application, or a shaper or CPU on the sending host, did not supply data)"
        ),
        "sender" => format!(
            "sender-paced {share:.0} % of the time: the receiver window never filled and ACKs drained the pipe, yet data left back-to-back at {} (in flight max {} B): the sending host's link, shaper, CPU or application set the pace, not TCP",
            fmt_rate(sender.goodput_bps),
            sender.in_flight_max_bytes
        ),
        _ => format!(
            "window scale unknown (handshake not captured): the raw window (max {} B) was full {share:.0} % of the time, so the connection was possibly receiver-window-limited; the real window may be up to 16384 times larger",
            win
        ),
    };
    if !scale_known && d.limit != "window_unknown" && d.limit != "none" {
        d.message
            .push_str("; window scale unknown (handshake not captured), windows shown raw");
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_time() {
        let mut a = LimitAccount::default();
        a.on_data(0, false, SendState::ReceiverWindow, None);
        a.on_data(300_000, false, SendState::Congestion, None);
        a.on_data(400_000, true, SendState::Congestion, None);
        a.on_data(400_010, true, SendState::Congestion, None);
        let s = DirectionStats {
            data_packets: 3,
            ..DirectionStats::default()
        };
        let d = diagnose("a_to_b", &a, &s, &DirectionStats::default(), true);
        assert_eq!(d.limit, "receiver_window");
        assert!((d.receiver_window_pct - 300_000.0 / 400_010.0 * 100.0).abs() < 1e-9);
        assert!(d.sender_pct > 0.0);
        assert!((d.application_pct - 100_000.0 / 400_010.0 * 100.0).abs() < 1e-9);
    }
}
