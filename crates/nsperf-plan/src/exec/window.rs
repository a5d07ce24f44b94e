//! Many hosts' measured passes on one clock: each host's interval series placed at its
//! measured start (the coordinator's clock), the window common to all of them, what each
//! moved within it, and their sum re-binned on one grid. Pure: times are inputs.
//!
//! Each host's rate is over its own pass; passes that do not coincide (one host set up
//! faster and ran while others were still starting) make the sum of the hosts' rates
//! overstate what they did together — 370 MiB/s "through" a 114 MiB/s port. The aggregate
//! here is what every host moved within the one window they all measured, over that window,
//! so it can never exceed what the shared path carried (within the resolution of the hosts'
//! intervals, whose rate is taken as even within each interval).

use std::collections::BTreeMap;

use nsperf_results::{Metric, SeriesPoint};

/// One host's measured pass: when it began (ns on the coordinator's clock) and its
/// intervals from then (each `value` a rate, seconds from the start).
#[derive(Debug, Clone, Copy)]
pub(super) struct Placed<'a> {
    /// Start of the pass, ns since the Unix epoch (the coordinator's clock).
    pub(super) start_ns: u64,
    /// Its intervals.
    pub(super) series: &'a [SeriesPoint],
}

impl Placed<'_> {
    /// The end of the pass (the end of its last interval).
    pub(super) fn end_ns(&self) -> u64 {
        let end_s = self
            .series
            .iter()
            .map(|p| p.start_s + p.length_s)
            .fold(0.0, f64::max);
        self.start_ns + (end_s.max(0.0) * 1e9) as u64
    }

    /// The end of its last whole interval: one as long as its first. A pass's last interval
    /// is usually partial or stretched (a time-bound run's requests in flight at its deadline
    /// complete after it, a final flush or COMMIT is in it): its rate is not even over it, so
    /// taking a part of it as its share of the whole would misplace what was moved. The
    /// whole pass when no interval is whole.
    pub(super) fn whole_end_ns(&self) -> u64 {
        let Some(len) = self.series.first().map(|p| p.length_s) else {
            return self.start_ns;
        };
        let whole = |p: &&SeriesPoint| (p.length_s - len).abs() <= len * 1e-6;
        let end_s = match self.series.iter().rposition(|p| whole(&p)) {
            // The last one whole and the pass longer than it: the pass's own end.
            Some(i) if i + 1 == self.series.len() => return self.end_ns(),
            Some(i) => self.series[i].start_s + self.series[i].length_s,
            None => return self.end_ns(),
        };
        self.start_ns + (end_s.max(0.0) * 1e9) as u64
    }

    /// What the host moved within `w` (each interval's rate times its overlap with `w`, in
    /// the rate's unit times seconds).
    pub(super) fn amount_within(&self, w: Window) -> f64 {
        self.series
            .iter()
            .map(|p| {
                let a = self.start_ns as f64 + p.start_s * 1e9;
                let b = a + p.length_s * 1e9;
                let overlap = (b.min(w.end_ns as f64) - a.max(w.start_ns as f64)).max(0.0);
                p.value * overlap / 1e9
            })
            .sum()
    }
}

/// A span of the coordinator's clock, ns since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// Its start.
    pub(crate) start_ns: u64,
    /// Its end (after the start).
    pub(crate) end_ns: u64,
}

impl Window {
    /// The common window of a merged measurement (`common_window_start_s` and
    /// `common_window_s` from its series' time 0, `started_unix_ns`).
    pub(crate) fn of(m: &nsperf_results::Measurement) -> Option<Window> {
        let origin = m.started_unix_ns? as f64;
        let start = m.metrics.get(&Metric::COMMON_WINDOW_START_S)?;
        let len = m.metrics.get(&Metric::COMMON_WINDOW_S)?;
        let start_ns = (origin + start * 1e9).round() as u64;
        let end_ns = (origin + (start + len) * 1e9).round() as u64;
        (end_ns > start_ns).then_some(Window { start_ns, end_ns })
    }

    /// Its length in seconds.
    pub(crate) fn seconds(&self) -> f64 {
        (self.end_ns - self.start_ns) as f64 / 1e9
    }
}

/// The window every pass covers with whole intervals: from the latest start to the
/// earliest end of a last whole interval ([`Placed::whole_end_ns`]); `None` when they do not
/// overlap (or there is no pass with intervals).
pub(super) fn common_window(parts: &[Placed<'_>]) -> Option<Window> {
    let measured: Vec<&Placed<'_>> = parts.iter().filter(|p| !p.series.is_empty()).collect();
    let start_ns = measured.iter().map(|p| p.start_ns).max()?;
    let end_ns = measured.iter().map(|p| p.whole_end_ns()).min()?;
    (end_ns > start_ns).then_some(Window { start_ns, end_ns })
}

/// The passes summed on one grid of `len_s` intervals with a boundary at `anchor_ns`, each
/// interval's amount spread over the bins it overlaps; times from `origin_ns`. Bins cover
/// the whole span of the passes (so nothing moved is dropped).
pub(super) fn rebinned(
    parts: &[Placed<'_>],
    origin_ns: u64,
    anchor_ns: u64,
    len_s: f64,
) -> Vec<SeriesPoint> {
    let len_ns = (len_s * 1e9).max(1.0);
    let mut bins: BTreeMap<i64, f64> = BTreeMap::new();
    for part in parts {
        for p in part.series {
            // From the anchor, ns.
            let a = part.start_ns as f64 + p.start_s * 1e9 - anchor_ns as f64;
            let b = a + p.length_s * 1e9;
            if b <= a {
                continue;
            }
            let amount = p.value * p.length_s;
            let (first, last) = ((a / len_ns).floor() as i64, (b / len_ns).ceil() as i64);
            for k in first..last {
                let (lo, hi) = (k as f64 * len_ns, (k + 1) as f64 * len_ns);
                let overlap = (b.min(hi) - a.max(lo)).max(0.0);
                if overlap > 0.0 {
                    *bins.entry(k).or_default() += amount * overlap / (b - a);
                }
            }
        }
    }
    let shift_s = (anchor_ns as f64 - origin_ns as f64) / 1e9;
    bins.into_iter()
        .map(|(k, amount)| SeriesPoint {
            start_s: shift_s + k as f64 * len_s,
            length_s: len_s,
            value: amount / len_s,
        })
        .collect()
}

/// The passes summed over the common window `w` alone, in intervals of `len_s` from its
/// start (the last one cut at its end, left out when shorter than half an interval); times
/// from `origin_ns`. Outside the window not every host was measuring, and a pass's first and
/// last intervals hold its ramp and its drain (requests queued at a shared port complete
/// after the deadline, more than the port carries over that interval): an aggregate series
/// with them would show a peak above what the hosts could do together.
pub(super) fn within_window(
    parts: &[Placed<'_>],
    origin_ns: u64,
    w: Window,
    len_s: f64,
) -> Vec<SeriesPoint> {
    let len_ns = (len_s * 1e9).max(1.0) as u64;
    let mut out = Vec::new();
    let mut at = w.start_ns;
    while at < w.end_ns {
        let bin = Window {
            start_ns: at,
            end_ns: (at + len_ns).min(w.end_ns),
        };
        at = bin.end_ns;
        if (bin.end_ns - bin.start_ns) * 2 < len_ns {
            break;
        }
        let amount: f64 = parts.iter().map(|p| p.amount_within(bin)).sum();
        out.push(SeriesPoint {
            start_s: (bin.start_ns as f64 - origin_ns as f64) / 1e9,
            length_s: bin.seconds(),
            value: amount / bin.seconds(),
        });
    }
    out
}

/// A cumulative count sampled over time (`(at_ns, count)`, in time order) read at `t`:
/// linear between the samples around it; `None` outside the samples.
pub(super) fn count_at(samples: &[(u64, u64)], t: u64) -> Option<f64> {
    let i = samples.partition_point(|s| s.0 <= t);
    if i == 0 {
        return None;
    }
    let (t0, c0) = samples[i - 1];
    if t0 == t {
        return Some(c0 as f64);
    }
    let &(t1, c1) = samples.get(i)?;
    let f = (t - t0) as f64 / (t1 - t0) as f64;
    Some(c0 as f64 + (c1 as f64 - c0 as f64) * f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(len: f64, vals: &[f64]) -> Vec<SeriesPoint> {
        vals.iter()
            .enumerate()
            .map(|(i, &v)| SeriesPoint {
                start_s: i as f64 * len,
                length_s: len,
                value: v,
            })
            .collect()
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn the_common_window_is_the_latest_start_to_the_earliest_end() {
        let a = pts(1.0, &[10.0, 10.0, 10.0]);
        let b = pts(1.0, &[10.0, 10.0]);
        let t = 100 * S;
        let parts = [
            Placed {
                start_ns: t,
                series: &a,
            },
            Placed {
                start_ns: t + S / 2,
                series: &b,
            },
        ];
        let w = common_window(&parts).unwrap();
        assert_eq!(
            w,
            Window {
                start_ns: t + S / 2,
                end_ns: t + 5 * S / 2
            }
        );
        assert_eq!(w.seconds(), 2.0);
        // Host a moved 10/s over the 2 s both ran: 20, whatever it did alone.
        assert!((parts[0].amount_within(w) - 20.0).abs() < 1e-9);
        assert!((parts[1].amount_within(w) - 20.0).abs() < 1e-9);
        // Passes that do not meet have no common window.
        let late = [
            parts[0],
            Placed {
                start_ns: t + 10 * S,
                series: &b,
            },
        ];
        assert_eq!(common_window(&late), None);
        assert_eq!(common_window(&[]), None);
    }

    /// A time-bound pass's last interval holds the requests that completed after its
    /// deadline: 0.2 s more at a falling rate. The window ends where the earliest last
    /// whole interval does, not inside anyone's stretched tail.
    #[test]
    fn the_window_ends_with_whole_intervals() {
        let mut a = pts(1.0, &[10.0, 10.0, 10.0]);
        a[2].length_s = 1.2;
        let b = pts(1.0, &[10.0, 10.0, 10.0]);
        let t = 3 * S;
        let pa = Placed {
            start_ns: t,
            series: &a,
        };
        assert_eq!(pa.end_ns(), t + 3_200_000_000);
        assert_eq!(pa.whole_end_ns(), t + 2 * S);
        let pb = Placed {
            start_ns: t,
            series: &b,
        };
        assert_eq!(pb.whole_end_ns(), t + 3 * S, "all whole: its end");
        let w = common_window(&[pa, pb]).unwrap();
        assert_eq!((w.start_ns, w.end_ns), (t, t + 2 * S));
        // One interval, partial: the pass itself.
        let c = pts(0.4, &[10.0]);
        let pc = Placed {
            start_ns: t,
            series: &c,
        };
        assert_eq!(pc.whole_end_ns(), t + 400_000_000);
    }

    /// The "370 through 114" case in small: two hosts through a port of 100/s, one alone for
    /// its first second (100/s), then both sharing it (50/s each). Each host's own rate
    /// (a: 100+50+50 over 3 s = 66.7; b: 50+50 over 2 s = 50) sums to 116.7, above the port;
    /// over the common window they moved 100/s, exactly the port.
    #[test]
    fn over_the_common_window_the_aggregate_is_what_the_port_carried() {
        let a = pts(1.0, &[100.0, 50.0, 50.0]);
        let b = pts(1.0, &[50.0, 50.0]);
        let t = 7 * S;
        let parts = [
            Placed {
                start_ns: t,
                series: &a,
            },
            Placed {
                start_ns: t + S,
                series: &b,
            },
        ];
        let own: f64 = 200.0 / 3.0 + 50.0;
        assert!(own > 100.0);
        let w = common_window(&parts).unwrap();
        let agg: f64 = parts.iter().map(|p| p.amount_within(w)).sum::<f64>() / w.seconds();
        assert!((agg - 100.0).abs() < 1e-9, "{agg}");
    }

    #[test]
    fn rebinning_spreads_each_interval_and_keeps_every_byte() {
        let a = pts(1.0, &[10.0, 20.0]);
        let b = pts(1.0, &[40.0, 40.0]);
        let t = 50 * S;
        // b starts 0.25 s after a: its first second is split 3/4 + 1/4.
        let parts = [
            Placed {
                start_ns: t,
                series: &a,
            },
            Placed {
                start_ns: t + S / 4,
                series: &b,
            },
        ];
        let s = rebinned(&parts, t - S, t, 1.0);
        let vals: Vec<f64> = s.iter().map(|p| p.value).collect();
        assert_eq!(vals, [10.0 + 30.0, 20.0 + 10.0 + 30.0, 10.0]);
        assert_eq!(s[0].start_s, 1.0, "times from the origin");
        let total: f64 = s.iter().map(|p| p.value * p.length_s).sum();
        assert!((total - (30.0 + 80.0)).abs() < 1e-9);
    }

    /// Over the window alone: the tail of a pass that drained a port's queue (a's last
    /// interval, 30/s) is not an interval of the aggregate; a last bin under half an
    /// interval is left out.
    #[test]
    fn the_series_within_the_window() {
        let mut a = pts(1.0, &[10.0, 10.0, 30.0]);
        a[2].length_s = 1.1;
        let b = pts(1.0, &[10.0, 10.0, 10.0]);
        let t = 20 * S;
        let parts = [
            Placed {
                start_ns: t,
                series: &a,
            },
            Placed {
                start_ns: t + 3 * S / 4,
                series: &b,
            },
        ];
        let w = common_window(&parts).unwrap();
        assert_eq!((w.start_ns, w.end_ns), (t + 3 * S / 4, t + 2 * S));
        let s = within_window(&parts, t, w, 1.0);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!((s[0].start_s, s[0].length_s, s[0].value), (0.75, 1.0, 20.0));
        // Half intervals: the last, 0.15 s, left out.
        let w = Window {
            start_ns: t + 3 * S / 4,
            end_ns: t + 2 * S - S / 10,
        };
        let s = within_window(&parts, t, w, 0.5);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s.iter().all(|p| p.value == 20.0 && p.length_s == 0.5));
    }

    #[test]
    fn a_cumulative_count_between_samples() {
        let s = [(10, 0), (20, 100), (30, 100), (40, 400)];
        assert_eq!(count_at(&s, 5), None);
        assert_eq!(count_at(&s, 10), Some(0.0));
        assert_eq!(count_at(&s, 15), Some(50.0));
        assert_eq!(count_at(&s, 25), Some(100.0));
        assert_eq!(count_at(&s, 35), Some(250.0));
        assert_eq!(count_at(&s, 40), Some(400.0));
        assert_eq!(count_at(&s, 41), None);
        assert_eq!(count_at(&[], 1), None);
    }
}
