//! The run from its hosts' parts: the aggregate headline, series, peak and sustained
//! figures, start skew, each host's share, and the hosts' CPU beside it.

use std::collections::BTreeMap;

use nsperf_results::{HostPart, HostRole, Measurement, Metric, SeriesPoint};

use super::fairness::fairness;
use super::parts::Parts;
use crate::exec::window::{Placed, Window, common_window, rebinned, within_window};

/// The run from its hosts' parts: the aggregate headline (for a rate, what every host
/// moved within the window common to all of them, over that window; the longest elapsed
/// time otherwise), the aggregate series on the coordinator's clock, peak and sustained
/// figures, start skew, each host's share, and every part.
pub(super) fn merge(p: Parts, role: HostRole) -> Measurement {
    let mut m = Measurement::default();
    let ok: Vec<&(HostPart, Vec<SeriesPoint>, _)> = p
        .parts
        .iter()
        .filter(|(h, _, _)| h.error.is_none())
        .collect();
    m.metric = ok
        .first()
        .map(|(h, _, _)| h.metric.clone())
        .unwrap_or_else(|| Metric::ELAPSED_S);
    let payload: u64 = ok.iter().filter_map(|(h, _, _)| h.payload_bytes).sum();
    m.payload_bytes = ok
        .iter()
        .any(|(h, _, _)| h.payload_bytes.is_some())
        .then_some(payload);
    let placed: Vec<Placed<'_>> = ok
        .iter()
        .map(|(h, s, _)| Placed {
            start_ns: h.started_unix_ns,
            series: s.as_slice(),
        })
        .collect();
    let rates = rates(&m.metric, &ok, &placed);
    m.value = match &rates {
        Rates::Elapsed => ok.iter().map(|(h, _, _)| h.value).fold(0.0, f64::max),
        Rates::Own(r) => r.iter().sum(),
        Rates::Window(w, r) => {
            m.metrics.insert(Metric::COMMON_WINDOW_S, w.seconds());
            m.metrics.insert(
                Metric::COMMON_WINDOW_START_S,
                (w.start_ns as f64 - p.barrier_ns as f64) / 1e9,
            );
            r.iter().sum()
        }
    };
    let len = placed
        .iter()
        .find_map(|p| p.series.first().map(|x| x.length_s))
        .filter(|l| *l > 0.0)
        .unwrap_or(1.0);
    // Over the common window when there is one (the headline's), else every pass's span.
    m.series = match &rates {
        Rates::Window(w, _) => within_window(&placed, p.barrier_ns, *w, len),
        _ => {
            let anchor = placed.iter().map(|p| p.start_ns).min();
            rebinned(&placed, p.barrier_ns, anchor.unwrap_or(p.barrier_ns), len)
        }
    };
    // The series' time 0 (the barrier), on the coordinator's clock.
    m.started_unix_ns = Some(p.barrier_ns);
    if let Some(st) = nsperf_results::stats::series_stats(&m.series) {
        m.metrics.insert(Metric::PEAK_INTERVAL, st.peak);
        m.metrics.insert(Metric::SUSTAINED_MEAN, st.sustained_mean);
        m.metrics.insert(Metric::STEADY_START_S, st.steady_start_s);
    }
    let starts: Vec<u64> = ok.iter().map(|(h, _, _)| h.started_unix_ns).collect();
    if let (Some(a), Some(b)) = (starts.iter().min(), starts.iter().max()) {
        m.metrics.insert(Metric::START_SKEW_NS, (b - a) as f64);
        m.metrics.insert(
            "start_after_barrier_ns".into(),
            a.saturating_sub(p.barrier_ns) as f64,
        );
    }
    let clock_error = p
        .parts
        .iter()
        .map(|(h, _, _)| h.clock_error_ns)
        .max()
        .unwrap_or(0);
    m.metrics
        .insert("clock_error_max_ns".into(), clock_error as f64);
    m.metrics.insert("hosts_measured".into(), ok.len() as f64);
    m.metrics
        .insert("hosts_failed".into(), (p.parts.len() - ok.len()) as f64);
    let mut sums: BTreeMap<Metric, f64> = BTreeMap::new();
    for (h, _, _) in &ok {
        for k in ["sent_bytes", "received_bytes", "bytes"] {
            if let Some(v) = h.metrics.get(k) {
                *sums.entry(Metric::new(k)).or_default() += v;
            }
        }
    }
    m.metrics.extend(sums);
    // Shares and fairness of the rates over one window when there is one.
    let (per_host, in_window): (Vec<f64>, bool) = match &rates {
        Rates::Window(_, r) => (r.clone(), true),
        Rates::Own(r) => (r.clone(), false),
        Rates::Elapsed => (Vec::new(), false),
    };
    let named: Vec<(&str, f64)> = ok
        .iter()
        .zip(&per_host)
        .map(|((h, _, _), &r)| (h.host.as_str(), r))
        .collect();
    let fair = fairness(&named);
    if let Some(f) = &fair {
        m.metrics.insert(Metric::FAIRNESS_JAIN, f.jain);
        m.findings.push(f.finding(&m.metric, named.len()));
    }
    drop(named);
    drop(placed);
    drop(ok);
    let mut rate_of = per_host.iter();
    for (mut h, series, cpu) in p.parts {
        h.role = role;
        // Its intervals on the run's clock (time 0 the barrier), as they went into the sum.
        let shift_s = (h.started_unix_ns as f64 - p.barrier_ns as f64) / 1e9;
        h.series = series
            .into_iter()
            .map(|s| SeriesPoint {
                start_s: s.start_s + shift_s,
                ..s
            })
            .collect();
        if h.error.is_none()
            && let Some(r) = rate_of.next()
        {
            if in_window {
                h.metrics.insert(Metric::WINDOW_RATE, *r);
            }
            if fair.is_some() && m.value > 0.0 {
                h.metrics.insert(Metric::SHARE_PCT, r / m.value * 100.0);
            }
        }
        m.cpu.extend(cpu);
        m.hosts.push(h);
    }
    hosts_cpu(&mut m);
    m
}

/// At or beyond this share of a core busy on average over the hosts' passes, the hosts'
/// machines may set the pace, not the server nor the network.
/// (50 client sites through a 10 Gbit/s lab port on 2 cores: the port 85 % used, the
/// clients' busiest core 89 % and the server host's cores 88 % busy.)
const HOSTS_CORE_BUSY_PCT: f64 = 85.0;

/// The hosts' CPU beside the aggregate: their step processes' CPU time summed
/// (`hosts.cpu_s`, and as % of one core over the longest pass, `hosts.cpu_pct`), the busiest
/// core each saw over its pass, averaged and at most (`hosts.busiest_core_pct_mean`,
/// `…_max`), and a `hosts_cpu_busy` warning when that average is at or beyond
/// [`HOSTS_CORE_BUSY_PCT`]: then the machines, not what they measure, may be the limit (in
/// a lab on one machine every site shares its cores: 50 client sites on 2 cores).
fn hosts_cpu(m: &mut Measurement) {
    let clients: Vec<&HostPart> = m
        .hosts
        .iter()
        .filter(|h| h.error.is_none() && h.role != HostRole::Server)
        .collect();
    let cpu_s: Vec<f64> = clients
        .iter()
        .filter_map(|h| h.metrics.get("process.cpu_s").copied())
        .collect();
    let busiest: Vec<f64> = clients
        .iter()
        .filter_map(|h| h.metrics.get("cpu_busiest_core_pct").copied())
        .collect();
    let longest = clients
        .iter()
        .filter_map(|h| h.metrics.get(&Metric::ELAPSED_S).copied())
        .fold(0.0, f64::max);
    let n = clients.len();
    if !cpu_s.is_empty() {
        let sum: f64 = cpu_s.iter().sum();
        m.metrics.insert("hosts.cpu_s".into(), sum);
        if longest > 0.0 {
            m.metrics
                .insert("hosts.cpu_pct".into(), sum / longest * 100.0);
        }
    }
    if busiest.is_empty() {
        return;
    }
    let mean = busiest.iter().sum::<f64>() / busiest.len() as f64;
    let max = busiest.iter().copied().fold(0.0, f64::max);
    m.metrics.insert("hosts.busiest_core_pct_mean".into(), mean);
    m.metrics.insert("hosts.busiest_core_pct_max".into(), max);
    if mean < HOSTS_CORE_BUSY_PCT {
        return;
    }
    let own = m
        .metrics
        .get("hosts.cpu_pct")
        .map(|p| format!("; their {n} step processes used {p:.0} % of one core together"))
        .unwrap_or_default();
    m.findings.push(
        nsperf_core::Finding::new(
            "hosts_cpu_busy",
            nsperf_core::report::Severity::Warning,
            format!(
                "the hosts' busiest core was {mean:.0} % busy on average over their passes (at most {max:.0} %){own}: their machines may set the pace, not the server nor the network — in a lab on one machine every site shares its cores, so fewer sites or more cores tell"
            ),
        )
        .with("busiest_core_pct_mean", mean)
        .with("busiest_core_pct_max", max),
    );
}

/// The hosts' rates the aggregate is the sum of.
#[derive(Debug)]
enum Rates {
    /// Not a rate: the step's elapsed time.
    Elapsed,
    /// Each host's rate over its own pass (one host, passes one after another, or passes
    /// without intervals).
    Own(Vec<f64>),
    /// Each host's rate over the window common to all of them.
    Window(Window, Vec<f64>),
}

fn rates(
    metric: &Metric,
    ok: &[&(
        HostPart,
        Vec<SeriesPoint>,
        Vec<nsperf_core::report::CpuInterval>,
    )],
    placed: &[Placed<'_>],
) -> Rates {
    if *metric == Metric::ELAPSED_S {
        return Rates::Elapsed;
    }
    let own = || Rates::Own(ok.iter().map(|(h, _, _)| h.value).collect());
    if ok.len() < 2 || placed.iter().any(|p| p.series.is_empty()) {
        return own();
    }
    match common_window(placed) {
        Some(w) => Rates::Window(
            w,
            placed
                .iter()
                .map(|p| p.amount_within(w) / w.seconds())
                .collect(),
        ),
        None => own(),
    }
}

/// The hosts' errors when no host measured (the server's count aside): such a run failed.
pub(super) fn every_part_failed(m: &Measurement) -> Option<String> {
    let mut measuring = m
        .hosts
        .iter()
        .filter(|h| h.role != HostRole::Server)
        .peekable();
    measuring.peek()?;
    if measuring.all(|h| h.error.is_some()) {
        return Some(m.host_errors().unwrap_or_default());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::exec::hosts::fixtures::{part, pts};

    /// Two hosts through one port: a alone for its first second, then both. Each one's own
    /// rate sums to more than the port carried; the aggregate over the window both measured
    /// is what they moved together, their shares and fairness from that window too.
    #[test]
    fn the_aggregate_is_over_the_window_every_host_measured() {
        let b = 1_000_000_000_000u64;
        let s = 1_000_000_000u64;
        let p = Parts {
            barrier_ns: b,
            parts: vec![
                (
                    part("a", 200.0 / 3.0, b, 200.0),
                    pts(&[100.0, 50.0, 50.0]),
                    vec![],
                ),
                (part("c", 50.0, b + s, 100.0), pts(&[50.0, 50.0]), vec![]),
            ],
        };
        let m = merge(p, HostRole::Client);
        assert!((m.value - 100.0).abs() < 1e-9, "{}", m.value);
        assert_eq!(m.metrics["common_window_s"], 2.0);
        assert_eq!(m.metrics["common_window_start_s"], 1.0);
        assert_eq!(m.metrics["start_skew_ns"], 1e9);
        assert_eq!(m.started_unix_ns, Some(b));
        assert_eq!(
            Window::of(&m),
            Some(Window {
                start_ns: b + s,
                end_ns: b + 3 * s
            })
        );
        assert!((m.metrics["fairness_jain"] - 1.0).abs() < 1e-12);
        for h in &m.hosts {
            assert!((h.metrics["share_pct"] - 50.0).abs() < 1e-9, "{h:?}");
            assert!((h.metrics["window_rate"] - 50.0).abs() < 1e-9, "{h:?}");
        }
        // The series over the window, on one grid from its start.
        let vals: Vec<f64> = m.series.iter().map(|p| p.value).collect();
        assert_eq!(vals, [100.0, 100.0]);
        // Each host's intervals kept on the run's clock (c began 1 s after the barrier).
        let starts =
            |i: usize| -> Vec<f64> { m.hosts[i].series.iter().map(|p| p.start_s).collect() };
        assert_eq!(starts(0), [0.0, 1.0, 2.0]);
        assert_eq!(starts(1), [1.0, 2.0]);
        assert_eq!(m.hosts[1].series[0].value, 50.0);
        assert_eq!(m.series[0].start_s, 1.0);
        assert_eq!(m.metrics["peak_interval"], 100.0);
        // Every payload byte counts in the total, inside the window or not.
        assert_eq!(m.payload_bytes, Some(300));
    }

    #[test]
    fn the_hosts_cpu_beside_the_aggregate_and_a_warning_when_their_cores_are_busy() {
        let b = 5_000_000_000u64;
        let with_cpu = |name: &str, cpu_s: f64, busiest: f64| {
            let mut h = part(name, 100.0, b, 1000.0);
            h.metrics.insert("process.cpu_s".into(), cpu_s);
            h.metrics.insert("cpu_busiest_core_pct".into(), busiest);
            h.metrics.insert(Metric::ELAPSED_S, 2.0);
            (h, pts(&[100.0, 100.0]), vec![])
        };
        let m = merge(
            Parts {
                barrier_ns: b,
                parts: vec![with_cpu("c1", 0.5, 95.0), with_cpu("c2", 0.3, 91.0)],
            },
            HostRole::Client,
        );
        assert_eq!(m.metrics["hosts.cpu_s"], 0.8);
        assert!((m.metrics["hosts.cpu_pct"] - 40.0).abs() < 1e-9);
        assert_eq!(m.metrics["hosts.busiest_core_pct_mean"], 93.0);
        assert_eq!(m.metrics["hosts.busiest_core_pct_max"], 95.0);
        let f = m
            .findings
            .iter()
            .find(|f| f.id == "hosts_cpu_busy")
            .unwrap();
        assert!(f.message.contains("93 %") && f.message.contains("40 % of one core"));
        // Half as busy: the figures, no warning.
        let m = merge(
            Parts {
                barrier_ns: b,
                parts: vec![with_cpu("c1", 0.5, 45.0), with_cpu("c2", 0.3, 41.0)],
            },
            HostRole::Client,
        );
        assert_eq!(m.metrics["hosts.busiest_core_pct_mean"], 43.0);
        assert!(!m.findings.iter().any(|f| f.id == "hosts_cpu_busy"));
    }

    #[test]
    fn a_failed_host_leaves_the_others_and_makes_the_run_partial() {
        let b = 5_000_000_000u64;
        let mut failed = part("c3", 0.0, 0, 0.0);
        failed.error = Some("c3: agent lost: connection closed".into());
        let p = Parts {
            barrier_ns: b,
            parts: vec![
                (
                    part("c1", 100.0, b + 1_000, 1000.0),
                    pts(&[90.0, 100.0, 100.0]),
                    vec![],
                ),
                (
                    part("c2", 50.0, b + 3_000, 500.0),
                    pts(&[40.0, 50.0, 50.0]),
                    vec![],
                ),
                (failed, vec![], vec![]),
            ],
        };
        let m = merge(p, HostRole::Client);
        // Over the window both measured (2 µs short of 3 s): about 96.7 + 46.7.
        assert!((m.value - 430.0 / 3.0).abs() < 0.01, "{}", m.value);
        assert_eq!(m.metrics["hosts_measured"], 2.0);
        assert_eq!(m.metrics["hosts_failed"], 1.0);
        assert_eq!(m.metrics["start_skew_ns"], 2_000.0);
        assert_eq!(m.metrics["sent_bytes"], 1500.0);
        assert!((m.metrics["peak_interval"] - 150.0).abs() < 0.01);
        assert_eq!(m.payload_bytes, Some(1500));
        // The hosts that measured: 96.7 and 46.7 over the window, Jain (Σx)² / (2·Σx²).
        let (x, y) = (290.0 / 3.0, 140.0 / 3.0);
        let jain = (x + y) * (x + y) / (2.0 * (x * x + y * y));
        assert!((m.metrics["fairness_jain"] - jain).abs() < 1e-4);
        assert!((m.hosts[1].metrics["share_pct"] - y / (x + y) * 100.0).abs() < 1e-3);
        assert!(m.findings.iter().any(|f| f.id == "host_shares"));
        assert!(m.partial());
        assert_eq!(every_part_failed(&m), None);
        assert_eq!(m.hosts.len(), 3);
        assert!(m.hosts.iter().all(|h| h.role == HostRole::Client));
        assert!(m.host_errors().unwrap().contains("c3: agent lost"));
    }

    #[test]
    fn a_run_in_which_every_host_failed_is_failed_not_partial() {
        let mut a = part("c1", 0.0, 0, 0.0);
        a.error = Some("c1: false exited 1".into());
        let mut b = part("c2", 0.0, 0, 0.0);
        b.error = Some("c2: false exited 1".into());
        let mut m = merge(
            Parts {
                barrier_ns: 0,
                parts: vec![(a, vec![], vec![]), (b, vec![], vec![])],
            },
            HostRole::Client,
        );
        // The server counted (nothing): it is not a host that measured.
        m.hosts.push(HostPart {
            host: "srv".into(),
            role: HostRole::Server,
            ..HostPart::default()
        });
        let why = every_part_failed(&m).expect("every host failed");
        assert!(
            why.contains("c1: false") && why.contains("c2: false"),
            "{why}"
        );
    }
}
