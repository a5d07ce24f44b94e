//! Requests in flight over time (the protocol's window): the figures over the whole exchange
//! (most at once, time-weighted means) and a series of them in bounded memory. The series
//! has at most [`MAX_POINTS`] bins of one width from the first call on; when a change comes
//! past its last bin, every bin doubles in width (neighbours merged, in place), so the series
//! covers the whole exchange at a coarser grain however long it runs. Each bin holds the
//! integral of requests in flight over it and the most in flight within it: summed over the
//! bins, the integrals give the exchange's mean exactly as [`InFlight::area`] does, and the
//! largest bin maximum is [`InFlight::max`].

use crate::model::{InFlightSeries, ProtocolStats};

/// Bins of the series at most, per connection.
pub const MAX_POINTS: usize = 500;

/// The first bins' width, ns: 1 µs, doubled as often as the exchange needs.
const FIRST_WIDTH_NS: i64 = 1_000;

/// One bin of the series.
#[derive(Debug, Default, Clone, Copy)]
struct Bin {
    /// ∫ in-flight dt over the bin, request·ns.
    area: f64,
    /// Most in flight at once within the bin.
    max: u32,
}

/// Requests in flight over time: the protocol's window.
#[derive(Debug, Clone)]
pub struct InFlight {
    now: u32,
    /// Most in flight at once.
    pub max: u32,
    since: Option<i64>,
    first: Option<i64>,
    /// ∫ in-flight dt, request·ns.
    pub area: f64,
    /// Time with at least one in flight, ns.
    pub busy_ns: i64,
    /// From the first call to the last change, ns.
    pub span_ns: i64,
    /// Width of the series' bins, ns.
    width_ns: i64,
    /// The series, bin 0 starting at the first call.
    bins: Vec<Bin>,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            now: 0,
            max: 0,
            since: None,
            first: None,
            area: 0.0,
            busy_ns: 0,
            span_ns: 0,
            width_ns: FIRST_WIDTH_NS,
            bins: Vec::new(),
        }
    }
}

impl InFlight {
    /// `delta` requests start (or end) at `t`.
    pub(crate) fn step(&mut self, t: i64, delta: i32) {
        let first = *self.first.get_or_insert(t);
        let t = t.max(first);
        if let Some(s) = self.since {
            let dt = (t - s).max(0);
            self.area += f64::from(self.now) * dt as f64;
            if self.now > 0 {
                self.busy_ns += dt;
            }
            self.spread(s, t);
        }
        self.since = Some(t.max(self.since.unwrap_or(t)));
        self.span_ns = (t - first).max(self.span_ns);
        self.now = self.now.saturating_add_signed(delta);
        self.max = self.max.max(self.now);
        let now = self.now;
        self.bin_at(t).max = self.bin_at(t).max.max(now);
    }

    /// Adds the level held from `from` to `to` to the bins it covers.
    fn spread(&mut self, from: i64, to: i64) {
        let first = self.first.unwrap_or(from);
        // The bin of `to` exists (made, widening the bins, when new) before any is indexed.
        let _ = self.bin_at(to);
        let level = self.now;
        let w = self.width_ns;
        let mut a = from - first;
        let end = to - first;
        while a < end {
            let i = (a / w) as usize;
            let bin_end = (i as i64 + 1) * w;
            let b = end.min(bin_end);
            let bin = &mut self.bins[i];
            bin.area += f64::from(level) * (b - a) as f64;
            bin.max = bin.max.max(level);
            a = b;
        }
    }

    /// The bin holding time `t` (at or after the first call), made when new; the bins
    /// double in width until it is within [`MAX_POINTS`].
    fn bin_at(&mut self, t: i64) -> &mut Bin {
        let off = (t - self.first.unwrap_or(t)).max(0);
        while off / self.width_ns >= MAX_POINTS as i64 {
            self.widen();
        }
        let i = (off / self.width_ns) as usize;
        if self.bins.len() <= i {
            self.bins.resize(i + 1, Bin::default());
        }
        &mut self.bins[i]
    }

    /// Bins twice as wide: neighbours merged, in place.
    fn widen(&mut self) {
        let n = self.bins.len().div_ceil(2);
        for i in 0..n {
            let a = self.bins[2 * i];
            let b = self.bins.get(2 * i + 1).copied().unwrap_or_default();
            self.bins[i] = Bin {
                area: a.area + b.area,
                max: a.max.max(b.max),
            };
        }
        self.bins.truncate(n);
        self.width_ns *= 2;
    }

    /// The series: per bin, the time-weighted mean in flight over the part of it the
    /// exchange covered (the last bin ends at the last change) and the most at once.
    pub fn series(&self) -> Option<InFlightSeries> {
        let first = self.first?;
        let end = self.span_ns;
        let w = self.width_ns;
        let mean = self
            .bins
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let covered = end.min((i as i64 + 1) * w) - i as i64 * w;
                if covered > 0 {
                    b.area / covered as f64
                } else {
                    f64::from(b.max)
                }
            })
            .collect();
        Some(InFlightSeries {
            first_unix_ns: first,
            bin_s: w as f64 / 1e9,
            mean,
            max: self.bins.iter().map(|b| b.max).collect(),
        })
    }

    /// Sets the figures of the exchange in `s`: most at once, means, busy time, span and
    /// the series.
    pub(crate) fn fill(&self, s: &mut ProtocolStats) {
        s.in_flight_max = self.max;
        s.in_flight_mean = if self.span_ns > 0 {
            self.area / self.span_ns as f64
        } else {
            0.0
        };
        s.in_flight_busy_mean = if self.busy_ns > 0 {
            self.area / self.busy_ns as f64
        } else {
            0.0
        };
        s.busy_s = self.busy_ns as f64 / 1e9;
        s.span_s = self.span_ns as f64 / 1e9;
        s.in_flight_series = self.series();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The series of a known exchange: its bins' integrals are the exchange's, its maxima
    /// the most at once, and a long exchange stays within [`MAX_POINTS`] bins.
    #[test]
    fn series_agrees_with_the_figures_and_stays_bounded() {
        let mut f = InFlight::default();
        // Two in flight for 3 µs, one for 2 µs, none for 5 µs, then 4 for 10 µs.
        let t0 = 1_000_000_000;
        f.step(t0, 1);
        f.step(t0, 1);
        f.step(t0 + 3_000, -1);
        f.step(t0 + 5_000, -1);
        for _ in 0..4 {
            f.step(t0 + 10_000, 1);
        }
        f.step(t0 + 20_000, -4);
        let s = f.series().unwrap();
        assert_eq!(s.first_unix_ns, t0);
        assert_eq!(s.bin_s, 1e-6);
        assert_eq!(s.mean.len(), 21);
        assert_eq!(&s.mean[..6], &[2.0, 2.0, 2.0, 1.0, 1.0, 0.0]);
        assert_eq!(s.mean[10], 4.0);
        assert_eq!((s.max[4], s.max[5]), (1, 0), "the last one ended at 5 µs");
        assert_eq!(s.max.iter().max(), Some(&f.max));
        let area: f64 = s.mean.iter().take(20).map(|m| m * 1_000.0).sum();
        assert_eq!(area, f.area);
        assert_eq!(f.area, 2.0 * 3_000.0 + 2_000.0 + 4.0 * 10_000.0);

        // A long exchange: a request every 1 ms for 10 s, 3 in flight each 100 µs.
        let mut g = InFlight::default();
        for k in 0..10_000i64 {
            let t = t0 + k * 1_000_000;
            for _ in 0..3 {
                g.step(t, 1);
            }
            g.step(t + 100_000, -3);
        }
        let s = g.series().unwrap();
        assert!(s.mean.len() <= MAX_POINTS, "{}", s.mean.len());
        assert!(s.mean.len() > MAX_POINTS / 2, "{}", s.mean.len());
        let w = s.bin_s * 1e9;
        let total: f64 = s
            .mean
            .iter()
            .enumerate()
            .map(|(i, m)| m * (g.span_ns as f64).min((i + 1) as f64 * w) - m * i as f64 * w)
            .sum();
        assert!((total - g.area).abs() < 1e-6 * g.area, "{total} {}", g.area);
        // 3 in flight 10 % of the time: a mean of 0.3 in every full bin.
        assert!(
            s.mean[1..s.mean.len() - 1]
                .iter()
                .all(|m| (m - 0.3).abs() < 0.02)
        );
        assert!(s.max.iter().all(|&m| m == 3));
    }
}
