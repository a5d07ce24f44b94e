//! Metric names for people, with units: `throughput_bps` is "throughput" in bit/s, shown in
//! the one unit of its family that suits the chart's values (`throughput, Mbit/s`).
//! Machine names stay in CSV headers and JSON; charts, XLSX headers and HTML tables use
//! these.

/// A unit a metric's values are shown in: value shown = value stored × `factor`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Unit {
    /// Multiplier from the stored value (base unit) to this unit.
    pub(crate) factor: f64,
    /// Its name (`Mbit/s`).
    pub(crate) name: &'static str,
}

/// The family of a metric's unit, from the suffix of its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    BitRate,
    ByteRate,
    PerSecond,
    Seconds,
    Nanoseconds,
    Percent,
    Bytes,
    Plain,
}

fn family(metric: &str) -> Family {
    if metric.ends_with("_bps") {
        Family::BitRate
    } else if metric.ends_with("_bytes_per_s") {
        Family::ByteRate
    } else if metric.ends_with("per_s") {
        Family::PerSecond
    } else if metric.ends_with("_ns") {
        Family::Nanoseconds
    } else if metric.ends_with("_s") {
        Family::Seconds
    } else if metric.ends_with("_pct") {
        Family::Percent
    } else if metric.ends_with("_bytes") {
        Family::Bytes
    } else {
        Family::Plain
    }
}

/// What a metric measures, in words: `throughput`, `transactions`, `elapsed time`,
/// `latency p99`.
pub(crate) fn metric_name(metric: &str) -> String {
    match metric {
        "throughput_bps" | "throughput_bytes_per_s" => return "throughput".into(),
        "transactions_per_s" => return "transactions".into(),
        "elapsed_s" => return "elapsed time".into(),
        _ => {}
    }
    if let Some(p) = metric
        .strip_prefix("lat_")
        .and_then(|m| m.strip_suffix("_ns"))
    {
        let p = p.replace("p999", "p99.9");
        return format!("latency {p}");
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
    .find_map(|s| metric.strip_suffix(s))
    .unwrap_or(metric);
    stem.replace('_', " ")
}

/// The unit of `metric`'s family that shows `max` (the largest value of a chart or column,
/// in the base unit) with one to three digits before the point.
pub(crate) fn unit_for(metric: &str, max: f64) -> Unit {
    let steps: &[(f64, &'static str)] = match family(metric) {
        Family::BitRate => &[
            (1.0, "bit/s"),
            (1e3, "kbit/s"),
            (1e6, "Mbit/s"),
            (1e9, "Gbit/s"),
            (1e12, "Tbit/s"),
        ],
        Family::ByteRate => &[
            (1.0, "B/s"),
            (1024.0, "KiB/s"),
            (1048576.0, "MiB/s"),
            (1073741824.0, "GiB/s"),
        ],
        Family::PerSecond => &[(1.0, "/s"), (1e3, "thousand/s"), (1e6, "million/s")],
        Family::Seconds => &[(1e-6, "µs"), (1e-3, "ms"), (1.0, "s")],
        Family::Nanoseconds => &[(1.0, "ns"), (1e3, "µs"), (1e6, "ms"), (1e9, "s")],
        Family::Bytes => &[
            (1.0, "bytes"),
            (1024.0, "KiB"),
            (1048576.0, "MiB"),
            (1073741824.0, "GiB"),
        ],
        Family::Percent => &[(1.0, "%")],
        Family::Plain => &[(1.0, "")],
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

/// `throughput, Mbit/s`: the metric's name and the unit its values are shown in; a count
/// per second reads as its unit: `files/s`, `thousand seeks/s`.
pub(crate) fn metric_label(metric: &str, unit: Unit) -> String {
    if unit.name.is_empty() {
        metric_name(metric)
    } else if family(metric) == Family::PerSecond {
        let what = metric_name(metric);
        match unit.name.strip_suffix("/s") {
            Some("") | None => format!("{what}/s"),
            Some(scale) => format!("{scale} {what}/s"),
        }
    } else {
        format!("{}, {}", metric_name(metric), unit.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_quantity_and_a_unit_that_fits() {
        let u = unit_for("throughput_bps", 43e6);
        assert_eq!(metric_label("throughput_bps", u), "throughput, Mbit/s");
        assert_eq!(u.factor, 1e-6);
        let u = unit_for("throughput_bytes_per_s", 300.0 * 1048576.0);
        assert_eq!(
            metric_label("throughput_bytes_per_s", u),
            "throughput, MiB/s"
        );
        assert_eq!(
            metric_label("elapsed_s", unit_for("elapsed_s", 0.1)),
            "elapsed time, ms"
        );
        assert_eq!(
            metric_label("lat_p999_ns", unit_for("lat_p999_ns", 5000.0)),
            "latency p99.9, µs"
        );
        assert_eq!(metric_name("transactions_per_s"), "transactions");
        // Issue 20 item 3: the metadata and seek tests' headlines.
        assert_eq!(
            metric_label("files_per_s", unit_for("files_per_s", 900.0)),
            "files/s"
        );
        assert_eq!(
            metric_label("seeks_per_s", unit_for("seeks_per_s", 4e5)),
            "thousand seeks/s"
        );
        assert_eq!(metric_name("peak_interval_bps"), "peak interval");
        assert_eq!(unit_for("throughput_bps", 0.0).name, "bit/s");
    }
}
