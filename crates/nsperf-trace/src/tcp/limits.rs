//! What limited a sender. The time between a sender's data segments is attributed to what
//! held it back (a [`Gap`]), judged from the sender's own view of the receiver's ACKs (see
//! [`crate::tcp::view`]), so the verdict is the same wherever the capture was taken. The
//! split follows the sender-limit timers of RFC 4898 (TCP ESTATS MIB: SndLimTimeRwin,
//! SndLimTimeCwnd, SndLimTimeSnd), inferred from a capture instead of read from the kernel;
//! the verdict for time spent under the congestion window follows T-RAT (Zhang, Breslau,
//! Paxson, Shenker 2002): kept small by loss while the path had room, or the path was full.

use crate::kinds::{Direction, Limit, Vantage};
use crate::model::{Diagnosis, DirectionStats, PathRtt};

/// What held a sender back between two of its segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gap {
    /// The receiver window was full or zero.
    ReceiverWindow,
    /// Loss: recovering, or the time before a retransmission.
    Loss,
    /// Data outstanding, room in the receiver window, sending as ACKs came: the congestion
    /// window.
    #[default]
    Congestion,
    /// Room in both windows, not sending: the application.
    Application,
    /// The raw window was full; its scale is unknown.
    WindowUnknown,
}

/// Time spent in each state, ns.
#[derive(Debug, Clone, Copy, Default)]
pub struct LimitAccount {
    /// Receiver window full or zero.
    pub receiver_window_ns: i64,
    /// Loss recovery.
    pub loss_ns: i64,
    /// Congestion window.
    pub congestion_ns: i64,
    /// Application.
    pub application_ns: i64,
    /// Unknown window scale.
    pub window_unknown_ns: i64,
}

impl LimitAccount {
    /// Adds `dt` ns of `gap`.
    pub fn add(&mut self, gap: Gap, dt: i64) {
        let dt = dt.max(0);
        match gap {
            Gap::ReceiverWindow => self.receiver_window_ns += dt,
            Gap::Loss => self.loss_ns += dt,
            Gap::Congestion => self.congestion_ns += dt,
            Gap::Application => self.application_ns += dt,
            Gap::WindowUnknown => self.window_unknown_ns += dt,
        }
    }

    fn total(&self) -> i64 {
        self.receiver_window_ns
            + self.loss_ns
            + self.congestion_ns
            + self.application_ns
            + self.window_unknown_ns
    }
}

/// Fewer data segments than this are too few to diagnose.
pub const MIN_DATA_SEGMENTS: u64 = 16;
/// Sending for fewer path RTTs than this is too short to diagnose.
pub const MIN_ROUND_TRIPS: f64 = 4.0;
/// A median path RTT this much above the smallest means a queue built up at the bottleneck.
const QUEUE_INFLATION: f64 = 1.25;
/// Capture point within this share of the RTT from one end counts as at that end.
const END_SHARE: f64 = 0.2;

/// What one direction's figures and time account say.
#[derive(Debug, Clone, Copy, Default)]
pub struct Evidence<'a> {
    /// The direction diagnosed.
    pub direction: Direction,
    /// Its time account.
    pub account: LimitAccount,
    /// What the sender sent.
    pub sender: Option<&'a DirectionStats>,
    /// What the receiver sent (its windows).
    pub receiver: Option<&'a DirectionStats>,
    /// Window scale known (both SYNs captured).
    pub scale_known: bool,
    /// Largest raw window the receiver advertised.
    pub receiver_window_raw_max: u16,
    /// Segments lost (retransmissions seen plus holes filled late).
    pub lost_segments: u64,
    /// Path RTT.
    pub path: PathRtt,
    /// Time from the first to the last data segment, ns.
    pub data_span_ns: i64,
}

fn fmt_rate(bps: f64) -> String {
    nsperf_core::BitRate(bps).to_string()
}

fn fmt_ms(ns: u64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

fn mss_of(sender: &DirectionStats, receiver: &DirectionStats) -> u64 {
    u64::from(sender.mss.or(receiver.mss).unwrap_or(536))
}

/// Where the capture point is, from the two parts of the path RTT.
pub fn vantage(path: &PathRtt) -> Vantage {
    if path.downstream_samples == 0 || path.upstream_samples == 0 || path.min_ns == 0 {
        return Vantage::Unknown;
    }
    let behind = path.upstream_min_ns as f64 / path.min_ns as f64;
    if behind < END_SHARE {
        Vantage::Sender
    } else if behind > 1.0 - END_SHARE {
        Vantage::Receiver
    } else {
        Vantage::Middle
    }
}

/// Smallest window shift that makes a raw window of `raw_max` hold `in_flight` bytes.
pub fn scale_at_least(raw_max: u16, in_flight: u64) -> Option<u8> {
    (raw_max > 0).then(|| {
        (0..=14u8)
            .find(|&s| u64::from(raw_max) << s >= in_flight)
            .unwrap_or(14)
    })
}

/// The diagnosis of one direction.
pub fn diagnose(e: &Evidence<'_>) -> Diagnosis {
    let default = DirectionStats::default();
    let sender = e.sender.unwrap_or(&default);
    let receiver = e.receiver.unwrap_or(&default);
    let acc = e.account;
    let total = acc.total();
    let pct = |x: i64| {
        if total > 0 {
            x as f64 * 100.0 / total as f64
        } else {
            0.0
        }
    };
    let mut d = Diagnosis {
        direction: e.direction,
        vantage: vantage(&e.path),
        receiver_window_pct: pct(acc.receiver_window_ns),
        loss_pct: pct(acc.loss_ns),
        congestion_pct: pct(acc.congestion_ns),
        application_pct: pct(acc.application_ns),
        window_unknown_pct: pct(acc.window_unknown_ns),
        goodput_bps: sender.goodput_bps,
        path_rtt: e.path,
        ..Diagnosis::default()
    };
    d.loss_rate = if sender.data_packets > 0 {
        (e.lost_segments as f64 / sender.data_packets as f64).min(1.0)
    } else {
        0.0
    };
    let rtt_s = (e.path.min_ns > 0).then(|| e.path.min_ns as f64 / 1e9);
    if let Some(rtt) = rtt_s {
        if e.scale_known {
            if receiver.window_max_bytes > 0 {
                d.window_ceiling_bps = Some(receiver.window_max_bytes as f64 * 8.0 / rtt);
            }
        } else if let Some(s) =
            scale_at_least(e.receiver_window_raw_max, sender.in_flight_max_bytes)
        {
            d.window_scale_at_least = Some(s);
            d.window_ceiling_at_least_bps =
                Some((u64::from(e.receiver_window_raw_max) << s) as f64 * 8.0 / rtt);
        }
        let mss = sender.mss.or(receiver.mss).map(f64::from).unwrap_or(536.0);
        if d.loss_rate > 0.0 {
            // Mathis, Semke, Mahdavi, Ott 1997: rate = MSS/RTT * C/sqrt(p), C = sqrt(3/2).
            d.mathis_model_bps = Some(mss * 8.0 / rtt * 1.22 / d.loss_rate.sqrt());
        }
    }
    let queued =
        e.path.min_ns > 0 && e.path.median_ns as f64 > QUEUE_INFLATION * e.path.min_ns as f64;
    let shares = [
        (Limit::ReceiverWindow, d.receiver_window_pct),
        (Limit::Loss, d.loss_pct),
        (Limit::Congestion, d.congestion_pct),
        (Limit::Application, d.application_pct),
        (Limit::WindowUnknown, d.window_unknown_pct),
    ];
    let (top, share) =
        shares.iter().copied().fold(
            (Limit::None, 0.0),
            |best, x| if x.1 > best.1 { x } else { best },
        );
    let round_trips = rtt_s.map(|r| e.data_span_ns as f64 / 1e9 / r);
    d.limit = if sender.data_packets == 0 {
        Limit::None
    } else if sender.data_packets < MIN_DATA_SEGMENTS
        || total == 0
        || round_trips.is_some_and(|n| n < MIN_ROUND_TRIPS)
    {
        Limit::TooShort
    } else if top == Limit::Congestion
        && e.lost_segments == 0
        && e.scale_known
        && receiver.window_max_bytes > 0
        && sender.in_flight_max_bytes + 2 * mss_of(sender, receiver) >= receiver.window_max_bytes
        && d.receiver_window_pct >= 25.0
    {
        // No loss, and the bytes in flight reached the receiver's largest window: the
        // congestion window had grown to the receiver window (Linux grows it no further when
        // it does not limit), so the receiver window is what capped the connection.
        Limit::ReceiverWindow
    } else if matches!(top, Limit::Congestion | Limit::Loss) && e.lost_segments > 0 && !queued {
        // Under the congestion window, with losses and no queue: the window was kept small
        // by loss while the path had room.
        Limit::Loss
    } else {
        top
    };
    d.message = message(&d, e, sender, receiver, share, queued, round_trips);
    d
}

fn message(
    d: &Diagnosis,
    e: &Evidence<'_>,
    sender: &DirectionStats,
    receiver: &DirectionStats,
    share: f64,
    queued: bool,
    round_trips: Option<f64>,
) -> String {
    let p = &e.path;
    let rtt = if p.min_ns > 0 {
        format!(
            "path RTT {} (median {})",
            fmt_ms(p.min_ns),
            fmt_ms(p.median_ns)
        )
    } else {
        "path RTT unmeasured".to_string()
    };
    let win = receiver.window_max_bytes;
    let ceiling = match (d.window_ceiling_bps, d.window_ceiling_at_least_bps) {
        (Some(c), _) => format!("; ceiling window/RTT {}", fmt_rate(c)),
        (None, Some(c)) => format!(
            "; ceiling window/RTT at least {} (scale at least {}, proven by {} B in flight)",
            fmt_rate(c),
            d.window_scale_at_least.unwrap_or(0),
            sender.in_flight_max_bytes
        ),
        _ => String::new(),
    };
    let mathis = d
        .mathis_model_bps
        .map(|m| {
            let cmp = if m < d.goodput_bps {
                "the measured rate is above it: the sender recovers better than Reno"
            } else {
                "a model of a Reno sender, not a ceiling"
            };
            format!("; Reno loss model (Mathis) {} ({cmp})", fmt_rate(m))
        })
        .unwrap_or_default();
    let lost = format!(
        "{} of {} data segments lost ({:.2} %)",
        e.lost_segments,
        sender.data_packets,
        d.loss_rate * 100.0
    );
    let mut m = match d.limit {
        Limit::None => "no data sent".to_string(),
        Limit::TooShort => format!(
            "too short to diagnose: {} data segments over {}{}",
            sender.data_packets,
            fmt_ms(e.data_span_ns.max(0) as u64),
            round_trips
                .map(|n| format!(" ({n:.1} round trips)"))
                .unwrap_or_default()
        ),
        Limit::ReceiverWindow => format!(
            "receiver-window-limited ({:.0} % of the time at the window's edge): the sender had the receiver's window in flight (max window {win} B, in flight max {} B){}; {rtt}{ceiling}",
            d.receiver_window_pct,
            sender.in_flight_max_bytes,
            if receiver.zero_window_adverts > 0 {
                format!(
                    ", and the receiver closed it {} times (zero window: a slow reader)",
                    receiver.zero_window_adverts
                )
            } else {
                String::new()
            }
        ),
        Limit::Loss => format!(
            "loss-limited: {lost}; {:.0} % of the time recovering, {:.0} % under a congestion window cut by loss{}; {rtt}{mathis}",
            d.loss_pct,
            d.congestion_pct,
            if queued {
                ""
            } else {
                ", and the RTT did not grow (no queue: the path had room)"
            }
        ),
        Limit::Congestion => format!(
            "congestion-window-limited {share:.0} % of the time: data outstanding and room in the receiver window (max {win} B) left unused, in flight max {} B; {}; {rtt}{ceiling}",
            sender.in_flight_max_bytes,
            if queued {
                "the RTT grew under load (a queue at the bottleneck: the path was full)"
            } else {
                "the RTT did not grow (the window was still opening)"
            }
        ),
        Limit::Application => format!(
            "application-limited {share:.0} % of the time: the sender had room in both windows and did not send (the application, or a shaper or CPU on the sending host, did not supply data); {rtt}"
        ),
        Limit::WindowUnknown => format!(
            "window scale unknown (handshake not captured): the raw window (max {} B) was full {share:.0} % of the time, so the connection was possibly receiver-window-limited{ceiling}",
            e.receiver_window_raw_max
        ),
    };
    if d.limit.is_verdict() {
        if d.limit != Limit::Loss && e.lost_segments > 0 {
            m.push_str(&format!("; {lost}"));
        }
        if !e.scale_known && d.limit != Limit::WindowUnknown {
            m.push_str("; window scale unknown (handshake not captured), windows shown raw");
        }
        if d.vantage != Vantage::Unknown {
            m.push_str(&format!(
                "; captured near the {} ({} of the RTT behind the capture point, {} beyond)",
                d.vantage,
                fmt_ms(p.upstream_min_ns),
                fmt_ms(p.downstream_min_ns)
            ));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_time_and_limits_parse() {
        let mut a = LimitAccount::default();
        a.add(Gap::ReceiverWindow, 300);
        a.add(Gap::Congestion, 100);
        a.add(Gap::Application, 100);
        let s = DirectionStats {
            data_packets: 100,
            ..DirectionStats::default()
        };
        let d = diagnose(&Evidence {
            account: a,
            sender: Some(&s),
            scale_known: true,
            ..Evidence::default()
        });
        assert_eq!(d.limit, Limit::ReceiverWindow);
        assert!((d.receiver_window_pct - 60.0).abs() < 1e-9);
        for l in Limit::ALL {
            assert_eq!(l.to_string().parse::<Limit>(), Ok(l));
            assert_eq!(serde_json::to_value(l).unwrap(), l.to_string());
        }
        assert!("sender".parse::<Limit>().is_err());
    }

    #[test]
    fn too_few_segments_or_round_trips_are_too_short() {
        let mut a = LimitAccount::default();
        a.add(Gap::Congestion, 1_000);
        let few = DirectionStats {
            data_packets: 7,
            goodput_bps: 1e12,
            ..DirectionStats::default()
        };
        let d = diagnose(&Evidence {
            account: a,
            sender: Some(&few),
            ..Evidence::default()
        });
        assert_eq!(d.limit, Limit::TooShort);
        assert!(
            d.message
                .starts_with("too short to diagnose: 7 data segments"),
            "{}",
            d.message
        );
        let many = DirectionStats {
            data_packets: 1000,
            ..DirectionStats::default()
        };
        let d = diagnose(&Evidence {
            account: a,
            sender: Some(&many),
            path: PathRtt {
                min_ns: 10_000_000,
                median_ns: 10_000_000,
                ..PathRtt::default()
            },
            data_span_ns: 20_000_000,
            ..Evidence::default()
        });
        assert_eq!(d.limit, Limit::TooShort, "2 round trips");
    }

    #[test]
    fn scale_bound_from_bytes_in_flight() {
        assert_eq!(scale_at_least(125, 100), Some(0));
        assert_eq!(scale_at_least(125, 16_000), Some(7));
        assert_eq!(scale_at_least(125, 15_000), Some(7));
        assert_eq!(scale_at_least(125, 8_000), Some(6));
        assert_eq!(scale_at_least(0, 8_000), None);
    }

    #[test]
    fn vantage_from_the_rtt_split() {
        let p = |up: u64, down: u64| PathRtt {
            min_ns: up + down,
            upstream_min_ns: up,
            downstream_min_ns: down,
            upstream_samples: 10,
            downstream_samples: 10,
            ..PathRtt::default()
        };
        assert_eq!(vantage(&p(1, 99)), Vantage::Sender);
        assert_eq!(vantage(&p(99, 1)), Vantage::Receiver);
        assert_eq!(vantage(&p(50, 50)), Vantage::Middle);
        assert_eq!(vantage(&PathRtt::default()), Vantage::Unknown);
    }
}
