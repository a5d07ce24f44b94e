//! Typed parameter values: what a matrix parameter was in one run, resolved (a template such as
//! `{bdp}` replaced by its value in that cell, the template kept beside), with its kind and its
//! number in the kind's base unit, so that `100ms` sorts after `50ms`, `1m` (a record size)
//! after `64k`, and a chart can put it on an axis.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use nsperf_core::units::{BitRate, Bytes, parse_duration};
use serde::{Deserialize, Serialize};

/// What a parameter's value is; the unit of [`ParamValue::number`] follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamKind {
    /// A byte count (number in bytes): socket buffers, file and record sizes, message sizes.
    Size,
    /// A duration (number in seconds): RTT, test time.
    Duration,
    /// A bit rate (number in bit/s): a lab's link rate.
    Rate,
    /// A plain number (streams, queue depth, port).
    Number,
    /// Anything else (`default`, `cubic`, `seqread`); no number.
    Text,
}

impl ParamKind {
    /// The name used in the store and the exports.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamKind::Size => "size",
            ParamKind::Duration => "duration",
            ParamKind::Rate => "rate",
            ParamKind::Number => "number",
            ParamKind::Text => "text",
        }
    }

    /// The base unit of the number, as a column suffix (`bytes`, `s`, `bps`), when it has one.
    pub fn unit(self) -> Option<&'static str> {
        match self {
            ParamKind::Size => Some("bytes"),
            ParamKind::Duration => Some("s"),
            ParamKind::Rate => Some("bps"),
            ParamKind::Number | ParamKind::Text => None,
        }
    }

    /// The number of `text` in this kind's base unit, when it parses as one.
    fn parse_number(self, text: &str) -> Option<f64> {
        let t = text.trim();
        match self {
            ParamKind::Size => Bytes::parse(t).ok().map(|b| b.0 as f64),
            ParamKind::Duration => parse_duration(t).ok().map(|d| d.as_secs_f64()),
            ParamKind::Rate => BitRate::parse(t).ok().map(|r| r.0),
            ParamKind::Number => t.parse::<f64>().ok().filter(|x| x.is_finite()),
            ParamKind::Text => None,
        }
    }
}

impl fmt::Display for ParamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a parameter kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not size, duration, rate, number or text")]
pub struct UnknownParamKind(pub String);

impl FromStr for ParamKind {
    type Err = UnknownParamKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "size" => ParamKind::Size,
            "duration" => ParamKind::Duration,
            "rate" => ParamKind::Rate,
            "number" => ParamKind::Number,
            "text" => ParamKind::Text,
            _ => return Err(UnknownParamKind(s.to_string())),
        })
    }
}

/// One parameter's value in one run.
///
/// Ordering: values with a number first, by number (then text), then text values by text, so
/// a sweep sorts `0ms, 50ms, 100ms, 150ms` and `4k, 64k, 1m`, with `default` after them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParamValue {
    /// The value as resolved: the plan's text with every template replaced (`{bdp}` becomes
    /// the byte count it stood for in that cell).
    pub value: String,
    /// The plan's text when it held a template (`{bdp}`), else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// What the value is.
    pub kind: ParamKind,
    /// The value in the kind's base unit (bytes, seconds, bit/s, or the number), absent for
    /// text and for a value of a typed field that is a word (`window = "default"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<f64>,
}

impl ParamValue {
    /// A value of a field of kind `kind`: `value` is parsed as that kind; a word that does not
    /// parse (`default`) is kept as text.
    pub fn typed(kind: ParamKind, value: &str, template: Option<&str>) -> ParamValue {
        let number = kind.parse_number(value);
        ParamValue {
            value: value.to_string(),
            template: template.filter(|t| *t != value).map(str::to_string),
            kind: if number.is_some() {
                kind
            } else {
                ParamKind::Text
            },
            number,
        }
    }

    /// A value whose field is unknown (an `exec` step's command, a store written before
    /// parameters were typed), typed from its spelling: a plain number, a duration with a
    /// time suffix (`50ms`, `1.5s`), a rate with a bit suffix (`45mbit`), a size (`64k`,
    /// `1m`: a bare `m` is read as MiB, the common case in matrices), else text.
    pub fn inferred(value: &str, template: Option<&str>) -> ParamValue {
        let t = value.trim().to_ascii_lowercase();
        let time = ["ns", "us", "µs", "ms", "s", "sec", "min", "h"];
        let kind = if ParamKind::Number.parse_number(&t).is_some() {
            ParamKind::Number
        } else if time.iter().any(|s| {
            t.strip_suffix(s)
                .is_some_and(|n| n.ends_with(|c: char| c.is_ascii_digit()))
        }) {
            ParamKind::Duration
        } else if t.contains("bit") || t.ends_with("bps") {
            ParamKind::Rate
        } else {
            ParamKind::Size
        };
        ParamValue::typed(kind, value, template)
    }

    /// The value for people: sizes in binary units (`64 KiB`, `1 MiB`), durations in ms or s
    /// (`50 ms`, `1.5 s`), rates in bit/s (`45.0 Mbit/s`), numbers and words as written.
    pub fn label(&self) -> String {
        match (self.kind, self.number) {
            (ParamKind::Size, Some(n)) => Bytes(n as u64).to_string(),
            (ParamKind::Duration, Some(s)) => short_duration(Duration::from_secs_f64(s)),
            (ParamKind::Rate, Some(r)) => BitRate(r).to_string(),
            _ => self.value.clone(),
        }
    }

    /// The label, and the template it came from when there was one: `275 KiB ({bdp})`.
    pub fn label_with_template(&self) -> String {
        match &self.template {
            Some(t) => format!("{} ({t})", self.label()),
            None => self.label(),
        }
    }

    /// What identifies the series a value belongs to across cells: the template when there
    /// is one (`{bdp}` is one series whose value changes with the RTT), else the value.
    pub fn series_key(&self) -> &str {
        self.template.as_deref().unwrap_or(&self.value)
    }
}

/// `0 ms`, `50 ms`, `1.5 s`, `2 min`: the unit people use for that size of duration, without
/// trailing zeros.
fn short_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    let (x, unit) = if s == 0.0 {
        (0.0, "ms")
    } else if s < 1e-3 {
        (s * 1e6, "µs")
    } else if s < 1.0 {
        (s * 1e3, "ms")
    } else if s < 120.0 {
        (s, "s")
    } else {
        (s / 60.0, "min")
    };
    let t = format!("{x:.3}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    format!("{t} {unit}")
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl PartialEq for ParamValue {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ParamValue {}

impl PartialOrd for ParamValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ParamValue {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.number, other.number) {
            (Some(a), Some(b)) => a.total_cmp(&b).then_with(|| self.value.cmp(&other.value)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => self.value.cmp(&other.value),
        }
        .then_with(|| self.template.cmp(&other.template))
    }
}

/// The parameters of a run: name → value.
pub type Params = std::collections::BTreeMap<String, ParamValue>;

/// `name=label, …` of a run's parameters for people (`all` when there are none), leaving out
/// the parameter named `skip`; a value from a template names it (`window=64 KiB (bdp)`), so it
/// is not taken for a value written as such.
pub fn params_label(p: &Params, skip: &str) -> String {
    let v: Vec<String> = p
        .iter()
        .filter(|(k, _)| k.as_str() != skip)
        .map(|(k, v)| match &v.template {
            Some(t) => format!(
                "{k}={} ({})",
                v.label(),
                t.trim_matches(|c| c == '{' || c == '}')
            ),
            None => format!("{k}={}", v.label()),
        })
        .collect();
    if v.is_empty() {
        "all".into()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_values_sort_by_their_number() {
        let d = |v| ParamValue::typed(ParamKind::Duration, v, None);
        let mut rtts = [d("100ms"), d("50ms"), d("0ms"), d("150ms"), d("1.5s")];
        rtts.sort();
        let v: Vec<&str> = rtts.iter().map(|p| p.value.as_str()).collect();
        assert_eq!(v, ["0ms", "50ms", "100ms", "150ms", "1.5s"]);
        let s = |v| ParamValue::typed(ParamKind::Size, v, None);
        let mut sizes = [s("1m"), s("64k"), s("default"), s("4k")];
        sizes.sort();
        let v: Vec<&str> = sizes.iter().map(|p| p.value.as_str()).collect();
        assert_eq!(v, ["4k", "64k", "1m", "default"]);
        assert_eq!(s("default").kind, ParamKind::Text);
        assert_eq!(s("1m").number, Some(1048576.0));
    }

    #[test]
    fn labels_are_for_people_and_keep_the_template() {
        let bdp = ParamValue::typed(ParamKind::Size, "281600", Some("{bdp}"));
        assert_eq!(bdp.label(), "275 KiB");
        assert_eq!(bdp.label_with_template(), "275 KiB ({bdp})");
        assert_eq!(bdp.series_key(), "{bdp}");
        let same = ParamValue::typed(ParamKind::Size, "64k", Some("64k"));
        assert_eq!(same.template, None);
        assert_eq!(
            ParamValue::typed(ParamKind::Duration, "50ms", None).label(),
            "50 ms"
        );
        assert_eq!(
            ParamValue::typed(ParamKind::Duration, "0ms", None).label(),
            "0 ms"
        );
        assert_eq!(
            ParamValue::typed(ParamKind::Duration, "1.5s", None).label(),
            "1.5 s"
        );
        assert_eq!(
            ParamValue::typed(ParamKind::Rate, "45mbit", None).label(),
            "45.0 Mbit/s"
        );
    }

    #[test]
    fn spelling_gives_the_kind_when_the_field_is_unknown() {
        let k = |v| ParamValue::inferred(v, None).kind;
        assert_eq!(k("50ms"), ParamKind::Duration);
        assert_eq!(k("10s"), ParamKind::Duration);
        assert_eq!(k("45mbit"), ParamKind::Rate);
        assert_eq!(k("64k"), ParamKind::Size);
        assert_eq!(k("1m"), ParamKind::Size);
        assert_eq!(k("3"), ParamKind::Number);
        assert_eq!(k("cubic"), ParamKind::Text);
        assert_eq!(k("{bdp}"), ParamKind::Text);
        // serde round trip
        let v = ParamValue::typed(ParamKind::Size, "281600", Some("{bdp}"));
        let j = serde_json::to_string(&v).unwrap();
        assert_eq!(
            j,
            r#"{"value":"281600","template":"{bdp}","kind":"size","number":281600.0}"#
        );
        let back: ParamValue = serde_json::from_str(&j).unwrap();
        assert_eq!(back, v);
    }
}
