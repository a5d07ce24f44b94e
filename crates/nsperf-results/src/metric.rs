//! Metric names: what the store keys a figure by, with its unit in the name's suffix
//! (`throughput_bps`, `throughput_bytes_per_s`, `lat_p99_ns`, `share_pct`), and what that
//! name means for people: the quantity (`throughput`, `latency p99.9`), the unit family its
//! values are shown in at a scale that fits (`Mbit/s`, `MiB/s`, `µs`), and one value written
//! out (`42.5 Mbit/s`). One type for the run's headline, the flattened figures beside it, the
//! hosts' parts, the statistics, the report's charts and tables and the exports.
//!
//! The set of names is open — a run's flattened figures are its engine's summary fields — so
//! a [`Metric`] holds any name; the ones the code chooses or looks up are constants here.
//! In JSON and SQLite it is the bare name (the schema's text is unchanged).

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::str::FromStr;

use rusqlite::types::{FromSql, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use serde::{Deserialize, Serialize};

/// A metric's name, its unit in the suffix: see the module's documentation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Metric(Cow<'static, str>);

impl Metric {
    /// Network throughput, bit/s: the headline of a net step's TCP and UDP tests.
    pub const THROUGHPUT_BPS: Metric = Metric::known("throughput_bps");
    /// Storage throughput, bytes/s: the headline of io steps that move data.
    pub const THROUGHPUT_BYTES_PER_S: Metric = Metric::known("throughput_bytes_per_s");
    /// Request/response transactions per second: the headline of a net step's rr test.
    pub const TRANSACTIONS_PER_S: Metric = Metric::known("transactions_per_s");
    /// Wall time, s: the headline of exec steps and of io steps that count time.
    pub const ELAPSED_S: Metric = Metric::known("elapsed_s");
    /// Payload bytes moved (an exec step that says).
    pub const PAYLOAD_BYTES: Metric = Metric::known("payload_bytes");
    /// Files per second: the headline of the metadata workload.
    pub const FILES_PER_S: Metric = Metric::known("files_per_s");
    /// Seeks per second: the headline of the seeks workload.
    pub const SEEKS_PER_S: Metric = Metric::known("seeks_per_s");
    /// Operations per second (a bonnie row that counts operations).
    pub const OPS_PER_S: Metric = Metric::known("ops_per_s");
    /// The CPU time of the measuring process, % of one core (bonnie++'s %CP).
    pub const CPU_PROCESS_PCT: Metric = Metric::known("cpu_process_pct");
    /// Median latency, ns.
    pub const LAT_P50_NS: Metric = Metric::known("lat_p50_ns");
    /// 99th-percentile latency, ns.
    pub const LAT_P99_NS: Metric = Metric::known("lat_p99_ns");
    /// 99.9th-percentile latency, ns.
    pub const LAT_P999_NS: Metric = Metric::known("lat_p999_ns");
    /// What the server counted over the clients' window, as a percentage of their sum.
    pub const SERVER_VS_CLIENTS_PCT: Metric = Metric::known("server_vs_clients_pct");
    /// How far apart the hosts of a step started, ns.
    pub const START_SKEW_NS: Metric = Metric::known("start_skew_ns");
    /// A host's share of a step's total, %.
    pub const SHARE_PCT: Metric = Metric::known("share_pct");
    /// Jain's fairness index over the hosts' rates (0–1).
    pub const FAIRNESS_JAIN: Metric = Metric::known("fairness_jain");
    /// Start of the window every host of a step was measuring in, s from the run's time 0.
    pub const COMMON_WINDOW_START_S: Metric = Metric::known("common_window_start_s");
    /// Length of that window, s.
    pub const COMMON_WINDOW_S: Metric = Metric::known("common_window_s");
    /// A host's rate over the common window, in the headline's unit.
    pub const WINDOW_RATE: Metric = Metric::known("window_rate");
    /// The best interval's aggregate, in the headline's unit.
    pub const PEAK_INTERVAL: Metric = Metric::known("peak_interval");
    /// The mean over the steady intervals, in the headline's unit.
    pub const SUSTAINED_MEAN: Metric = Metric::known("sustained_mean");
    /// When the steady intervals start, s from the run's time 0.
    pub const STEADY_START_S: Metric = Metric::known("steady_start_s");
    /// The rate of the port the clients share (the lab's link), bit/s.
    pub const PORT_RATE_BPS: Metric = Metric::known("port.rate_bps");
    /// The payload that port can carry, in the headline's unit.
    pub const PORT_PAYLOAD_CEILING: Metric = Metric::known("port.payload_ceiling");
    /// The clients' sum as a percentage of that ceiling.
    pub const PORT_PAYLOAD_PCT: Metric = Metric::known("port.payload_pct");

    const fn known(name: &'static str) -> Metric {
        Metric(Cow::Borrowed(name))
    }

    /// The metric called `name` (any name: a run's flattened figures are open).
    pub fn new(name: impl Into<String>) -> Metric {
        Metric(Cow::Owned(name.into()))
    }

    /// Its name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The family of its unit, from its name's suffix.
    pub fn family(&self) -> UnitFamily {
        let m = self.as_str();
        if m.ends_with("_bps") {
            UnitFamily::BitRate
        } else if m.ends_with("_bytes_per_s") {
            UnitFamily::ByteRate
        } else if m.ends_with("per_s") {
            UnitFamily::PerSecond
        } else if m.ends_with("_ns") {
            UnitFamily::Nanoseconds
        } else if m.ends_with("_s") {
            UnitFamily::Seconds
        } else if m.ends_with("_pct") {
            UnitFamily::Percent
        } else if m.ends_with("_bytes") {
            UnitFamily::Bytes
        } else {
            UnitFamily::Plain
        }
    }

    /// Bits per unit of a data rate (1 for bit/s, 8 for bytes/s), so two rates compare;
    /// `None` for a metric that is not a data rate.
    pub fn bits_per_unit(&self) -> Option<f64> {
        match self.family() {
            UnitFamily::BitRate => Some(1.0),
            UnitFamily::ByteRate => Some(8.0),
            _ => None,
        }
    }

    /// What it measures, in words: `throughput`, `transactions`, `elapsed time`,
    /// `latency p99.9`, `peak interval`.
    pub fn quantity(&self) -> String {
        let m = self.as_str();
        if self == &Metric::THROUGHPUT_BPS || self == &Metric::THROUGHPUT_BYTES_PER_S {
            return "throughput".into();
        }
        if self == &Metric::TRANSACTIONS_PER_S {
            return "transactions".into();
        }
        if self == &Metric::ELAPSED_S {
            return "elapsed time".into();
        }
        if let Some(p) = m.strip_prefix("lat_").and_then(|m| m.strip_suffix("_ns")) {
            return format!("latency {}", p.replace("p999", "p99.9"));
        }
        let stem = [
            "_bytes_per_s",
            "_per_s",
            "_bps",
            "_ns",
            "_s",
            "_pct",
            "_bytes",
        ]
        .iter()
        .find_map(|s| m.strip_suffix(s))
        .unwrap_or(m);
        stem.replace('_', " ")
    }

    /// The unit of its family that shows `max` (the largest value of a chart or column, in
    /// the stored unit) with one to three digits before the point.
    pub fn unit_for(&self, max: f64) -> Unit {
        let steps: &[(f64, &'static str)] = match self.family() {
            UnitFamily::BitRate => &[
                (1.0, "bit/s"),
                (1e3, "kbit/s"),
                (1e6, "Mbit/s"),
                (1e9, "Gbit/s"),
                (1e12, "Tbit/s"),
            ],
            UnitFamily::ByteRate => &[
                (1.0, "B/s"),
                (1024.0, "KiB/s"),
                (1048576.0, "MiB/s"),
                (1073741824.0, "GiB/s"),
            ],
            UnitFamily::PerSecond => &[(1.0, "/s"), (1e3, "thousand/s"), (1e6, "million/s")],
            UnitFamily::Seconds => &[(1e-6, "µs"), (1e-3, "ms"), (1.0, "s")],
            UnitFamily::Nanoseconds => &[(1.0, "ns"), (1e3, "µs"), (1e6, "ms"), (1e9, "s")],
            UnitFamily::Bytes => &[
                (1.0, "bytes"),
                (1024.0, "KiB"),
                (1048576.0, "MiB"),
                (1073741824.0, "GiB"),
            ],
            UnitFamily::Percent => &[(1.0, "%")],
            UnitFamily::Plain => &[(1.0, "")],
        };
        let m = max.abs();
        let (size, name) = steps
            .iter()
            .rev()
            .find(|(s, _)| m >= *s)
            .or(steps.first())
            .copied()
            .unwrap_or((1.0, ""));
        Unit {
            factor: 1.0 / size,
            name,
        }
    }

    /// `throughput, Mbit/s`: the quantity and the unit its values are shown in; a count per
    /// second reads as its unit: `files/s`, `thousand seeks/s`.
    pub fn label(&self, unit: Unit) -> String {
        if unit.name.is_empty() {
            self.quantity()
        } else if self.family() == UnitFamily::PerSecond {
            let what = self.quantity();
            match unit.name.strip_suffix("/s") {
                Some("") | None => format!("{what}/s"),
                Some(scale) => format!("{scale} {what}/s"),
            }
        } else {
            format!("{}, {}", self.quantity(), unit.name)
        }
    }

    /// One value for people, with its unit: `42.5 Mbit/s`, `688 MiB/s`, `1235 files/s`,
    /// `2.000 s`, `1.2ms`.
    pub fn format(&self, v: f64) -> String {
        let m = self.as_str();
        match self.family() {
            UnitFamily::BitRate => nsperf_core::BitRate(v).to_string(),
            UnitFamily::ByteRate => {
                let mib = v / (1024.0 * 1024.0);
                if v < 0.0 {
                    format!("-{}", self.format(-v))
                } else if mib >= 100.0 {
                    format!("{mib:.0} MiB/s")
                } else if mib >= 1.0 {
                    format!("{mib:.1} MiB/s")
                } else {
                    format!("{:.1} KiB/s", v / 1024.0)
                }
            }
            UnitFamily::PerSecond => match m.strip_suffix("_per_s") {
                // files_per_s: "1235 files/s", "12.5 files/s".
                Some(what) => {
                    let what = what.replace('_', " ");
                    if v.abs() >= 100.0 {
                        format!("{v:.0} {what}/s")
                    } else {
                        format!("{v:.1} {what}/s")
                    }
                }
                None => format!("{v:.1}/s"),
            },
            UnitFamily::Seconds => format!("{v:.3} s"),
            UnitFamily::Nanoseconds => nsperf_core::units::format_duration(
                std::time::Duration::from_nanos(v.max(0.0) as u64),
            ),
            UnitFamily::Percent | UnitFamily::Bytes | UnitFamily::Plain => format!("{v:.3}"),
        }
    }
}

/// The family of a metric's unit (its name's suffix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitFamily {
    /// `_bps`: bit/s.
    BitRate,
    /// `_bytes_per_s`: bytes/s.
    ByteRate,
    /// `_per_s`: a count per second.
    PerSecond,
    /// `_s`: seconds.
    Seconds,
    /// `_ns`: nanoseconds.
    Nanoseconds,
    /// `_pct`: a percentage.
    Percent,
    /// `_bytes`: bytes.
    Bytes,
    /// Anything else: a plain number.
    Plain,
}

/// A unit a metric's values are shown in: value shown = value stored × `factor`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unit {
    /// Multiplier from the stored value (base unit) to this unit.
    pub factor: f64,
    /// Its name (`Mbit/s`).
    pub name: &'static str,
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A metric name that is not one: empty, or not made of `a-z`, `0-9`, `_` and `.` (a
/// bonnie run's figures are `TEST.FIGURE`: `block_output.throughput_bytes_per_s`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metric name '{0}': letters a-z, digits, _ and . (e.g. throughput_bps)")]
pub struct BadMetricName(pub String);

impl FromStr for Metric {
    type Err = BadMetricName;
    fn from_str(s: &str) -> Result<Metric, BadMetricName> {
        let ok = !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.');
        if ok {
            Ok(Metric::new(s))
        } else {
            Err(BadMetricName(s.to_string()))
        }
    }
}

impl Borrow<str> for Metric {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Metric {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Metric {
    fn from(s: &str) -> Metric {
        Metric::new(s)
    }
}

impl From<String> for Metric {
    fn from(s: String) -> Metric {
        Metric::new(s)
    }
}

impl PartialEq<str> for Metric {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Metric {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Default for Metric {
    /// The empty name: a record not yet filled in (a failed part).
    fn default() -> Metric {
        Metric::known("")
    }
}

impl ToSql for Metric {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(
            self.as_str().as_bytes(),
        )))
    }
}

impl FromSql for Metric {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Metric> {
        String::column_result(value).map(Metric::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_quantity_and_a_unit_that_fits() {
        let m = Metric::THROUGHPUT_BPS;
        let u = m.unit_for(43e6);
        assert_eq!(m.label(u), "throughput, Mbit/s");
        assert_eq!(u.factor, 1e-6);
        let m = Metric::THROUGHPUT_BYTES_PER_S;
        assert_eq!(m.label(m.unit_for(300.0 * 1048576.0)), "throughput, MiB/s");
        let m = Metric::ELAPSED_S;
        assert_eq!(m.label(m.unit_for(0.1)), "elapsed time, ms");
        let m = Metric::LAT_P999_NS;
        assert_eq!(m.label(m.unit_for(5000.0)), "latency p99.9, µs");
        assert_eq!(Metric::TRANSACTIONS_PER_S.quantity(), "transactions");
        // Issue 20 item 3: the metadata and seek tests' headlines.
        let m = Metric::FILES_PER_S;
        assert_eq!(m.label(m.unit_for(900.0)), "files/s");
        let m = Metric::SEEKS_PER_S;
        assert_eq!(m.label(m.unit_for(4e5)), "thousand seeks/s");
        assert_eq!(Metric::new("peak_interval_bps").quantity(), "peak interval");
        assert_eq!(Metric::THROUGHPUT_BPS.unit_for(0.0).name, "bit/s");
    }

    #[test]
    fn values_are_written_with_their_unit() {
        assert_eq!(Metric::FILES_PER_S.format(1234.56), "1235 files/s");
        assert_eq!(Metric::SEEKS_PER_S.format(25.0), "25.0 seeks/s");
        assert_eq!(
            Metric::THROUGHPUT_BYTES_PER_S.format(200.0 * 1048576.0),
            "200 MiB/s"
        );
        assert_eq!(
            Metric::THROUGHPUT_BYTES_PER_S.format(-2.5 * 1048576.0),
            "-2.5 MiB/s"
        );
        assert_eq!(Metric::ELAPSED_S.format(2.0), "2.000 s");
        assert_eq!(Metric::new("ratio").format(0.5), "0.500");
        assert_eq!(Metric::THROUGHPUT_BPS.bits_per_unit(), Some(1.0));
        assert_eq!(Metric::THROUGHPUT_BYTES_PER_S.bits_per_unit(), Some(8.0));
        assert_eq!(Metric::ELAPSED_S.bits_per_unit(), None);
    }

    #[test]
    fn the_text_is_the_bare_name_everywhere() {
        let m = Metric::LAT_P99_NS;
        assert_eq!(serde_json::to_string(&m).unwrap(), "\"lat_p99_ns\"");
        let back: Metric = serde_json::from_str("\"lat_p99_ns\"").unwrap();
        assert_eq!(back, m);
        assert_eq!(m.to_string(), "lat_p99_ns");
        // As a map key (a run's flattened figures), and looked up by its name.
        let mut figures = std::collections::BTreeMap::new();
        figures.insert(Metric::ELAPSED_S, 2.0);
        assert_eq!(
            serde_json::to_string(&figures).unwrap(),
            "{\"elapsed_s\":2.0}"
        );
        assert_eq!(figures.get("elapsed_s"), Some(&2.0));
        assert_eq!(
            "seeks_per_s".parse::<Metric>().unwrap(),
            Metric::SEEKS_PER_S
        );
        assert!("block_output.cpu_process_pct".parse::<Metric>().is_ok());
        for bad in ["", "Throughput", "a b", "x-y"] {
            assert!(bad.parse::<Metric>().is_err(), "{bad}");
        }
        let db = rusqlite::Connection::open_in_memory().unwrap();
        let got: Metric = db
            .query_row("SELECT ?1", [&Metric::FILES_PER_S], |r| r.get(0))
            .unwrap();
        assert_eq!(got, Metric::FILES_PER_S);
    }
}
