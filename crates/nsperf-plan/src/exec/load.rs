//! A step's `load` beside its figures: what the load's streams moved within the window the
//! step measured, and a finding on the link they shared: how full it was with both, so a
//! step that had only what the load left is not read as the link's rate. Pure: the two
//! measurements are inputs.

use nsperf_core::report::Severity;
use nsperf_core::units::BitRate;
use nsperf_results::Metric;

use super::Measurement;
use super::served::clients_window;
use super::window::Placed;
use crate::plan::{LoadSpec, SharedPath};

/// Share of the shared link's rate the step and the load used together above which the link
/// was full: the step had what the load left.
const FULL: f64 = 0.85;

/// The step's own rate in bit/s, when its headline is data per second.
fn step_bps(m: &Measurement) -> Option<f64> {
    if m.metric == Metric::THROUGHPUT_BPS {
        Some(m.value)
    } else if m.metric == Metric::THROUGHPUT_BYTES_PER_S {
        Some(m.value * 8.0)
    } else {
        None
    }
}

/// A mirrored step's round trip to its peer, measured at its connect with the load already
/// running (the load's queue is in it), as a clause; empty for other steps.
fn mirror_rtt(m: &Measurement) -> String {
    m.metrics
        .get(&Metric::new("replication.rtt_us"))
        .map(|us| {
            format!(
                "; the mirror's round trip, measured at its connect with the load running, was {:.1} ms",
                us / 1e3
            )
        })
        .unwrap_or_default()
}

/// Sets the load's figures beside the step's (`load.*` metrics) and the finding on their
/// shared link. `load` is the load's own measurement (its series at 100 ms); without a
/// window the step measured, the load's whole run stands for it.
pub(crate) fn beside_step(m: &mut Measurement, spec: &LoadSpec, load: &Measurement) {
    let placed = load.started_unix_ns.map(|start_ns| Placed {
        start_ns,
        series: &load.series,
    });
    let (load_bps, seconds) = match (clients_window(m), placed) {
        (Some(w), Some(p)) => (p.amount_within(w) / w.seconds(), w.seconds()),
        _ => (load.value, load.duration_ns as f64 / 1e9),
    };
    m.metrics.insert("load.throughput_bps".into(), load_bps);
    m.metrics.insert("load.window_s".into(), seconds);
    m.metrics
        .insert("load.streams".into(), f64::from(spec.params.streams));
    let who = format!(
        "the load ({} stream{} {} -> {})",
        spec.params.streams,
        if spec.params.streams == 1 { "" } else { "s" },
        spec.from,
        spec.to
    );
    let finding = match (&spec.shared, step_bps(m)) {
        (SharedPath::Link { name, rate_bps }, Some(step)) => {
            let together = step + load_bps;
            match rate_bps {
                Some(r) => {
                    let share = together / r;
                    m.metrics.insert("load.link_share_pct".into(), share * 100.0);
                    let (id, tail) = if share >= FULL {
                        (
                            "load_link_full",
                            format!(
                                "the link was full: the step had {:.0} % of it beside the load's {:.0} %, its share, not the link's rate{}",
                                step / r * 100.0,
                                load_bps / r * 100.0,
                                mirror_rtt(m)
                            ),
                        )
                    } else {
                        (
                            "load_link_room",
                            "the link had room: the load did not set the step's rate".into(),
                        )
                    };
                    nsperf_core::Finding::new(
                        id,
                        Severity::Info,
                        format!(
                            "link {name} ({}) was shared with {who}: over the step's {seconds:.2} s the load moved {} and the step {}, together {} = {:.0} % of the link; {tail}",
                            BitRate(*r),
                            BitRate(load_bps),
                            BitRate(step),
                            BitRate(together),
                            share * 100.0
                        ),
                    )
                    .with("link_rate_bps", *r)
                    .with("share", share)
                }
                None => nsperf_core::Finding::new(
                    "load_link_unknown",
                    Severity::Info,
                    format!(
                        "link {name} was shared with {who}: the load moved {} and the step {} over the step's {seconds:.2} s; the link's rate is not set, so nsperf cannot tell how full it was",
                        BitRate(load_bps),
                        BitRate(step)
                    ),
                ),
            }
            .with("load_bps", load_bps)
            .with("step_bps", step)
        }
        (SharedPath::Apart, _) => nsperf_core::Finding::new(
            "load_apart",
            Severity::Info,
            format!(
                "{who} moved {} over the step's {seconds:.2} s on links the step's own traffic does not cross (in that direction): it did not share the step's path",
                BitRate(load_bps)
            ),
        )
        .with("load_bps", load_bps),
        _ => nsperf_core::Finding::new(
            "load_unknown",
            Severity::Info,
            format!(
                "{who} moved {} over the step's {seconds:.2} s; nsperf cannot tell which links the step's own traffic crossed, or its rate, so not what the load took from it",
                BitRate(load_bps)
            ),
        )
        .with("load_bps", load_bps),
    };
    m.findings.push(finding);
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_results::SeriesPoint;
    use std::time::Duration;

    fn spec(shared: SharedPath) -> LoadSpec {
        LoadSpec {
            from: "ha".into(),
            to: "dr".into(),
            to_index: 2,
            port: 5302,
            params: nsperf_net::TestParams {
                streams: 2,
                ..Default::default()
            },
            ramp: Duration::from_secs(1),
            shared,
        }
    }

    /// A measurement whose pass starts at `start_s` (s since the epoch) with `rates` over
    /// `len_s` intervals.
    fn run(metric: Metric, value: f64, start_s: u64, len_s: f64, rates: &[f64]) -> Measurement {
        Measurement {
            metric,
            value,
            started_unix_ns: Some(start_s * 1_000_000_000),
            series: rates
                .iter()
                .enumerate()
                .map(|(i, &v)| SeriesPoint {
                    start_s: i as f64 * len_s,
                    length_s: len_s,
                    value: v,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_loads_share_over_the_steps_window_and_a_full_link() {
        // The step (a mirror at 2.5 MB/s = 20 Mbit/s) from 10 s to 12 s; the load from 9 s,
        // at 10 Mbit/s before the step and 24 Mbit/s during it.
        let mut m = run(
            Metric::THROUGHPUT_BYTES_PER_S,
            2.5e6,
            10,
            1.0,
            &[2.5e6, 2.5e6],
        );
        let load = run(
            Metric::THROUGHPUT_BPS,
            0.0,
            9,
            0.5,
            &[10e6, 10e6, 24e6, 24e6, 24e6, 24e6, 10e6],
        );
        let s = spec(SharedPath::Link {
            name: "wan".into(),
            rate_bps: Some(45e6),
        });
        beside_step(&mut m, &s, &load);
        let got = m.metrics[&Metric::new("load.throughput_bps")];
        assert!((got - 24e6).abs() < 1.0, "{got}");
        let share = m.metrics[&Metric::new("load.link_share_pct")];
        assert!((share - 44e6 / 45e6 * 100.0).abs() < 1e-6, "{share}");
        let f = &m.findings[0];
        assert_eq!(f.id, "load_link_full", "{}", f.message);
        assert!(
            f.message.contains("wan")
                && f.message.contains("had 44 % of it beside the load's 53 %"),
            "{}",
            f.message
        );
    }

    #[test]
    fn room_on_the_link_apart_and_unknown() {
        let load = run(Metric::THROUGHPUT_BPS, 5e6, 10, 1.0, &[5e6, 5e6]);
        let step = || run(Metric::THROUGHPUT_BPS, 10e6, 10, 1.0, &[10e6, 10e6]);
        let mut m = step();
        let s = spec(SharedPath::Link {
            name: "wan".into(),
            rate_bps: Some(100e6),
        });
        beside_step(&mut m, &s, &load);
        assert_eq!(m.findings[0].id, "load_link_room");
        let mut m = step();
        beside_step(&mut m, &spec(SharedPath::Apart), &load);
        assert_eq!(m.findings[0].id, "load_apart");
        assert!(!m.metrics.contains_key(&Metric::new("load.link_share_pct")));
        let mut m = step();
        let unlimited = SharedPath::Link {
            name: "a-b".into(),
            rate_bps: None,
        };
        beside_step(&mut m, &spec(unlimited), &load);
        assert_eq!(m.findings[0].id, "load_link_unknown");
        // A step in files per second: its rate on the link is not known.
        let mut m = run(Metric::new("files_per_s"), 100.0, 10, 1.0, &[100.0]);
        beside_step(&mut m, &spec(SharedPath::Unknown), &load);
        assert_eq!(m.findings[0].id, "load_unknown");
    }
}
