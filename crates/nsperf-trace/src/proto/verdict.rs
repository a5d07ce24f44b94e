//! The verdict reaches the protocol: from where each request's time went ([`super::pace`])
//! and the TCP verdict of the same connection, what set the protocol's pace — the requests
//! in flight (each waiting out the path RTT: protocol-bound, the ceiling in flight × size /
//! RTT), the server's response time, the client's think time, or moving the data (the
//! network, whose TCP verdict says what in it) — with the figures.
//!
//! The two verdicts never contradict each other: when TCP found the data's sender held back
//! by the network (congestion window, loss, receiver window), the protocol's verdict is the
//! transfer; when TCP found the sender idle with room to send (application-limited), the
//! protocol's verdict is one of the waits and TCP's sentence is told which.

use nsperf_core::BitRate;
use nsperf_core::units::Bytes;

use crate::model::{Diagnosis, Limit, OpSummary, ProtocolDiagnosis, ProtocolLimit, RequestScope};

use super::pace::{CycleSums, Pace};

/// Requests answered below which the pace is not judged.
pub const MIN_REQUESTS: u64 = 8;

fn fmt_ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

fn rate(bps: f64) -> String {
    BitRate(bps).to_string()
}

/// The most answered operation among `ops` that moved data (scope data) or among all.
fn main_op(ops: &[OpSummary], scope: RequestScope) -> String {
    ops.iter()
        .filter(|o| scope == RequestScope::All || o.data_bytes > 0)
        .max_by_key(|o| o.replies)
        .map_or_else(|| "request".to_string(), |o| o.op.clone())
}

/// What set the pace of the connection whose requests went as `pace` says, beside its TCP
/// diagnosis `tcp`.
pub fn diagnose(pace: &Pace, ops: &[OpSummary], tcp: &Diagnosis) -> ProtocolDiagnosis {
    let (scope, s) = if pace.data.requests >= MIN_REQUESTS {
        (RequestScope::Data, pace.data)
    } else {
        (RequestScope::All, pace.all)
    };
    let rtt_ns = if tcp.path_rtt.min_ns > 0 {
        tcp.path_rtt.min_ns
    } else {
        pace.rtt.min_ns[0] + pace.rtt.min_ns[1]
    };
    let mut d = figures(&s, scope, rtt_ns);
    d.op = main_op(ops, scope);
    d.tcp_limit = tcp.limit;
    let span_ok = s.span_ns() > 0 && s.cycle_ns() > 0;
    d.limit = if s.requests < MIN_REQUESTS || !span_ok {
        ProtocolLimit::TooShort
    } else if matches!(
        tcp.limit,
        Limit::Congestion | Limit::Loss | Limit::ReceiverWindow | Limit::WindowUnknown
    ) {
        // TCP found the data's sender held back by the network: the requests' time went
        // into moving the data, whatever else it also spent.
        ProtocolLimit::Transfer
    } else {
        let mut shares = vec![
            (ProtocolLimit::RequestsInFlight, d.rtt_pct),
            (ProtocolLimit::Server, d.server_pct),
            (ProtocolLimit::Client, d.client_pct),
        ];
        if tcp.limit != Limit::Application {
            // Without a TCP verdict to lean on, the transfer competes too (with one, TCP
            // found the sender idle: the network was not what held it).
            shares.push((ProtocolLimit::Transfer, d.transfer_pct));
        }
        shares
            .into_iter()
            .fold((ProtocolLimit::TooShort, -1.0), |best, x| {
                if x.1 > best.1 { x } else { best }
            })
            .0
    };
    d.message = message(&d, tcp);
    d
}

/// The figures of the requests summed in `s`.
fn figures(s: &CycleSums, scope: RequestScope, rtt_ns: u64) -> ProtocolDiagnosis {
    let n = s.requests.max(1) as f64;
    let cycle = s.cycle_ns() as f64;
    let span_s = s.span_ns() as f64 / 1e9;
    let pct = |x: i64| {
        if cycle > 0.0 {
            x as f64 * 100.0 / cycle
        } else {
            0.0
        }
    };
    let seen = if span_s > 0.0 {
        cycle / 1e9 / span_s
    } else {
        0.0
    };
    let size = if scope == RequestScope::Data {
        s.data_bytes as f64 / n
    } else {
        0.0
    };
    // A request costs at least a round trip and the time its own bytes take to cross.
    let moving = s.moving_ns as f64 / n;
    let rtt_s = (rtt_ns as f64 + moving) / 1e9;
    let measured_per_s = if span_s > 0.0 {
        s.requests as f64 / span_s
    } else {
        0.0
    };
    // Little's law: the rate measured, each request holding its slot at least a round trip
    // and its own transfer, needs at least this many in flight.
    let needed = if rtt_ns > 0 {
        measured_per_s * rtt_s
    } else {
        0.0
    };
    let in_flight = seen.max(needed);
    ProtocolDiagnosis {
        scope,
        requests: s.requests,
        span_s,
        data_bytes: s.data_bytes,
        size_mean_bytes: size,
        in_flight,
        in_flight_at_least: needed > seen,
        path_rtt_ns: rtt_ns,
        transfer_ns: s.transfer_ns as f64 / n,
        moving_ns: moving,
        rtt_ns: s.rtt_ns as f64 / n,
        server_ns: s.server_ns as f64 / n,
        client_ns: s.client_ns as f64 / s.think_samples.max(1) as f64,
        transfer_pct: pct(s.transfer_ns),
        rtt_pct: pct(s.rtt_ns),
        server_pct: pct(s.server_ns),
        client_pct: pct(s.client_ns),
        measured_per_s,
        ceiling_per_s: (rtt_ns > 0).then(|| in_flight / rtt_s),
        measured_bps: if span_s > 0.0 {
            s.data_bytes as f64 * 8.0 / span_s
        } else {
            0.0
        },
        ceiling_bps: (rtt_ns > 0 && scope == RequestScope::Data)
            .then(|| in_flight * size * 8.0 / rtt_s),
        ..ProtocolDiagnosis::default()
    }
}

/// "1.0 READ in flight on average (64 KiB each)".
fn in_flight_text(d: &ProtocolDiagnosis) -> String {
    let each = if d.scope == RequestScope::Data {
        format!(", {} each", Bytes(d.size_mean_bytes.round() as u64))
    } else {
        String::new()
    };
    format!(
        "{}{:.1} {} in flight on average{each}",
        if d.in_flight_at_least {
            "at least "
        } else {
            ""
        },
        d.in_flight,
        d.op
    )
}

/// "5.24 Mbit/s; measured 5.19 Mbit/s (99 % of it)": the ceiling and the measured rate, in
/// bit/s for data, else requests per second.
fn ceiling_text(d: &ProtocolDiagnosis) -> String {
    let at_least = if d.in_flight_at_least {
        "at least "
    } else {
        ""
    };
    match (d.ceiling_bps, d.ceiling_per_s) {
        (Some(c), _) => format!(
            "{at_least}{}; measured {} ({:.0} % of it)",
            rate(c),
            rate(d.measured_bps),
            if c > 0.0 {
                d.measured_bps * 100.0 / c
            } else {
                0.0
            }
        ),
        (None, Some(c)) => format!(
            "{at_least}{c:.0} requests/s; measured {:.0} requests/s ({:.0} % of it)",
            d.measured_per_s,
            if c > 0.0 {
                d.measured_per_s * 100.0 / c
            } else {
                0.0
            }
        ),
        _ => format!(
            "unknown (no path RTT); measured {:.0} requests/s",
            d.measured_per_s
        ),
    }
}

fn shares_text(d: &ProtocolDiagnosis) -> String {
    format!(
        "of each {}'s time: RTT {:.0} %, transfer {:.0} %, server {:.0} %, client {:.0} %",
        d.op, d.rtt_pct, d.transfer_pct, d.server_pct, d.client_pct
    )
}

fn message(d: &ProtocolDiagnosis, tcp: &Diagnosis) -> String {
    let rtt = fmt_ms(d.path_rtt_ns as f64);
    match d.limit {
        ProtocolLimit::TooShort => format!(
            "too few requests to judge the protocol's pace: {} answered (at least {MIN_REQUESTS})",
            d.requests
        ),
        ProtocolLimit::RequestsInFlight => format!(
            "protocol-bound, not TCP: {}, each costing the path RTT {rtt} and {} for its own bytes to cross → ceiling {}: each {} waited out the path RTT ({}); more requests in flight, or larger ones, would go faster",
            in_flight_text(d),
            fmt_ms(d.moving_ns),
            ceiling_text(d),
            d.op,
            shares_text(d)
        ),
        ProtocolLimit::Server => format!(
            "server-bound: the server took {} per {} beyond the path RTT (mean; {:.0} % of each {}'s time), {}, path RTT {rtt}; without the server's time the requests in flight would allow {}",
            fmt_ms(d.server_ns),
            d.op,
            d.server_pct,
            d.op,
            in_flight_text(d),
            ceiling_text(d)
        ),
        ProtocolLimit::Client => format!(
            "client-bound: the client took {} between a reply and its next request (mean think time; {:.0} % of each {}'s time), {}, path RTT {rtt}; without the think time the requests in flight would allow {}",
            fmt_ms(d.client_ns),
            d.client_pct,
            d.op,
            in_flight_text(d),
            ceiling_text(d)
        ),
        ProtocolLimit::Transfer => {
            // TCP's shares, not the protocol's split: seen from the capture point, the
            // network's queues on the far side of it show up in the waits.
            let share = match tcp.limit {
                Limit::ReceiverWindow => tcp.receiver_window_pct,
                Limit::Loss => tcp.loss_pct + tcp.congestion_pct,
                Limit::Congestion => tcp.congestion_pct,
                Limit::WindowUnknown => tcp.window_unknown_pct,
                _ => d.transfer_pct,
            };
            let idle = if tcp.limit.is_verdict() && tcp.application_pct >= 20.0 {
                format!(
                    "; the sender also sat idle {:.0} % of its time: more requests in flight would fill the path",
                    tcp.application_pct
                )
            } else {
                String::new()
            };
            format!(
                "the network set the pace ({}): {}, path RTT {rtt}: the requests in flight allowed {}{idle}",
                if tcp.limit.is_verdict() {
                    format!(
                        "TCP: {} {share:.0} % of the sending time, see its verdict",
                        tcp.limit
                    )
                } else {
                    format!("moving the data took {share:.0} % of each {}'s time", d.op)
                },
                in_flight_text(d),
                ceiling_text(d)
            )
        }
    }
}

/// TCP's sentence told what the protocol found, when TCP found the data's sender idle with
/// room to send and the protocol says why.
pub fn amend_tcp(tcp: &mut Diagnosis, p: &ProtocolDiagnosis) {
    if tcp.limit != Limit::Application {
        return;
    }
    let why = match p.limit {
        ProtocolLimit::RequestsInFlight => format!(
            "the client kept {}, across a {} path (protocol-bound)",
            in_flight_text(p),
            fmt_ms(p.path_rtt_ns as f64)
        ),
        ProtocolLimit::Server => format!(
            "the server took {} per {} (server-bound)",
            fmt_ms(p.server_ns),
            p.op
        ),
        ProtocolLimit::Client => format!(
            "the client took {} between a reply and its next request (client-bound)",
            fmt_ms(p.client_ns)
        ),
        ProtocolLimit::Transfer | ProtocolLimit::TooShort => return,
    };
    tcp.message
        .push_str(&format!("; the storage protocol above it says why: {why}"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PathRtt;

    const MS: i64 = 1_000_000;

    fn pace(n: u64, transfer: i64, rtt: i64, server: i64, client: i64, size: u64) -> Pace {
        let cycle = transfer + rtt + server + client;
        let s = CycleSums {
            requests: n,
            data_bytes: n * size,
            first_ns: Some(0),
            last_ns: n as i64 * cycle,
            transfer_ns: n as i64 * transfer,
            moving_ns: n as i64 * transfer,
            rtt_ns: n as i64 * rtt,
            server_ns: n as i64 * server,
            client_ns: n as i64 * client,
            think_samples: n,
        };
        let mut p = Pace::default();
        (p.data, p.all) = (s, s);
        p
    }

    fn tcp(limit: Limit, rtt_ms: i64) -> Diagnosis {
        Diagnosis {
            limit,
            path_rtt: PathRtt {
                min_ns: (rtt_ms * MS) as u64,
                ..PathRtt::default()
            },
            message: "application-limited".into(),
            ..Diagnosis::default()
        }
    }

    fn read_op() -> Vec<OpSummary> {
        vec![OpSummary {
            op: "READ".into(),
            replies: 100,
            data_bytes: 1,
            ..OpSummary::default()
        }]
    }

    /// The case: one 64 KiB READ in flight across 150 ms.
    #[test]
    fn one_read_in_flight_across_150_ms_is_protocol_bound() {
        let p = pace(100, 3 * MS, 150 * MS, MS / 2, MS / 2, 65536);
        let mut t = tcp(Limit::Application, 150);
        let d = diagnose(&p, &read_op(), &t);
        assert_eq!(d.limit, ProtocolLimit::RequestsInFlight);
        assert!((d.in_flight - 1.0).abs() < 1e-9, "{}", d.in_flight);
        // 1 × 64 KiB / (150 ms + 3 ms to cross) = 428 KB/s = 3.43 Mbit/s
        let c = d.ceiling_bps.unwrap();
        assert!((c - 65536.0 * 8.0 / 0.153).abs() < 1.0, "{c}");
        assert!(d.measured_bps < c && d.measured_bps > 0.95 * c);
        assert!(
            d.message.starts_with("protocol-bound, not TCP: 1.0 READ in flight on average, 64 KiB each, each costing the path RTT 150.00 ms and 3.00 ms for its own bytes to cross → ceiling 3.43 Mbit/s; measured 3.40 Mbit/s (99 % of it)"),
            "{}",
            d.message
        );
        amend_tcp(&mut t, &d);
        assert!(
            t.message.contains("says why: the client kept 1.0 READ"),
            "{}",
            t.message
        );
    }

    #[test]
    fn each_wait_names_its_verdict_and_tcp_network_limits_mean_transfer() {
        let cases = [
            (
                (MS, 10 * MS, 90 * MS, 0),
                Limit::Application,
                ProtocolLimit::Server,
            ),
            (
                (MS, 10 * MS, 0, 90 * MS),
                Limit::Application,
                ProtocolLimit::Client,
            ),
            // TCP found the sender idle: the transfer cannot be the verdict
            (
                (90 * MS, 10 * MS, 5 * MS, 0),
                Limit::Application,
                ProtocolLimit::RequestsInFlight,
            ),
            (
                (90 * MS, 10 * MS, 5 * MS, 0),
                Limit::TooShort,
                ProtocolLimit::Transfer,
            ),
            // TCP found the network holding the sender: transfer, whatever the shares
            (
                (10 * MS, 90 * MS, 0, 0),
                Limit::Congestion,
                ProtocolLimit::Transfer,
            ),
            (
                (10 * MS, 90 * MS, 0, 0),
                Limit::Loss,
                ProtocolLimit::Transfer,
            ),
        ];
        for ((tr, rtt, srv, cl), tl, want) in cases {
            let d = diagnose(&pace(20, tr, rtt, srv, cl, 4096), &read_op(), &tcp(tl, 10));
            assert_eq!(d.limit, want, "{tl:?}: {}", d.message);
            // the ceiling is a bound: never below the measured rate
            assert!(
                d.ceiling_bps.unwrap() >= d.measured_bps * 0.999,
                "{}",
                d.message
            );
        }
        let d = diagnose(
            &pace(5, MS, MS, 0, 0, 1),
            &read_op(),
            &tcp(Limit::Application, 1),
        );
        assert_eq!(d.limit, ProtocolLimit::TooShort);
        for l in ProtocolLimit::ALL {
            assert_eq!(l.to_string().parse::<ProtocolLimit>(), Ok(l));
            assert_eq!(serde_json::to_value(l).unwrap(), l.to_string());
        }
    }
}
