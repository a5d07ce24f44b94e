//! Units with their parsers and printers: byte counts, bit rates and durations.
//!
//! Parsing follows the conventions users already type into iperf3, fio and tc:
//! - byte sizes: `4096`, `4k`, `64K`, `1m`, `16MiB`, `1g`, `2G` — suffixes are binary
//!   (1k = 1024), as in iperf3 `-l`/`-w` and fio `bs=`; `kb`/`kib` spellings are accepted too.
//! - bit rates: `45mbit`, `1gbit`, `100M`, `2.5g`, `0` — suffixes are decimal (1m = 10^6
//!   bit/s), as in iperf3 `-b` and tc; a trailing `bit`, `bps` or `bit/s` is optional.
//! - durations: `10` (seconds), `1.5s`, `50ms`, `200us`, `1m` (minute), `1h`.
//!
//! Every parser returns a [`ParseUnitError`] naming the bad input, never panics.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A value that could not be parsed as a size, rate or duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} '{input}': {reason}")]
pub struct ParseUnitError {
    /// What was expected ("size", "bit rate", "duration").
    pub what: &'static str,
    /// The text that was given.
    pub input: String,
    /// Why it was refused.
    pub reason: &'static str,
}

impl crate::failure::Classify for ParseUnitError {
    fn failure(&self) -> crate::Failure {
        crate::Failure::Usage
    }
}

fn err(what: &'static str, input: &str, reason: &'static str) -> ParseUnitError {
    ParseUnitError {
        what,
        input: input.to_string(),
        reason,
    }
}

/// Splits "12.5mbit" into (12.5, "mbit"), refusing empty, negative and non-finite numbers.
fn split_number<'a>(what: &'static str, input: &'a str) -> Result<(f64, &'a str), ParseUnitError> {
    let s = input.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(end);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    if num.is_empty() {
        return Err(err(what, input, "expected a number first"));
    }
    let value: f64 = num.parse().map_err(|_| err(what, input, "not a number"))?;
    if !value.is_finite() {
        return Err(err(what, input, "not a finite number"));
    }
    Ok((value, suffix.trim()))
}

/// A number of bytes. Printed with binary prefixes (KiB, MiB, GiB).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    /// One kibibyte.
    pub const KIB: u64 = 1024;
    /// One mebibyte.
    pub const MIB: u64 = 1024 * 1024;
    /// One gibibyte.
    pub const GIB: u64 = 1024 * 1024 * 1024;

    /// Parses `4096`, `4k`, `64KiB`, `1m`, `2g`, `1t` (binary multiples).
    pub fn parse(input: &str) -> Result<Bytes, ParseUnitError> {
        const W: &str = "size";
        let (value, suffix) = split_number(W, input)?;
        let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => Self::KIB,
            "m" | "mb" | "mib" => Self::MIB,
            "g" | "gb" | "gib" => Self::GIB,
            "t" | "tb" | "tib" => Self::GIB * 1024,
            _ => return Err(err(W, input, "unknown suffix (use k, m, g or t)")),
        };
        let bytes = value * mult as f64;
        if bytes > u64::MAX as f64 / 2.0 {
            return Err(err(W, input, "too large"));
        }
        if bytes.fract() != 0.0 {
            return Err(err(W, input, "not a whole number of bytes"));
        }
        Ok(Bytes(bytes as u64))
    }

    /// The value as `f64`, for arithmetic on rates.
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }
}

impl std::str::FromStr for Bytes {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Bytes::parse(s)
    }
}

impl fmt::Display for Bytes {
    /// `512 B`, `64 KiB`, `1.5 MiB`, `2 GiB`: at most three significant digits, exact
    /// multiples printed without a fraction.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        let units = [
            (Self::GIB * 1024, "TiB"),
            (Self::GIB, "GiB"),
            (Self::MIB, "MiB"),
            (Self::KIB, "KiB"),
        ];
        for (size, name) in units {
            if v >= size {
                let x = v as f64 / size as f64;
                return if v % size == 0 {
                    write!(f, "{} {name}", v / size)
                } else if x < 10.0 {
                    write!(f, "{x:.2} {name}")
                } else if x < 100.0 {
                    write!(f, "{x:.1} {name}")
                } else {
                    write!(f, "{x:.0} {name}")
                };
            }
        }
        write!(f, "{v} B")
    }
}

/// A rate in bits per second. Printed with decimal prefixes (kbit/s, Mbit/s, Gbit/s).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitRate(pub f64);

impl BitRate {
    /// Parses `45mbit`, `1g`, `100M`, `2.5gbit/s`, `800kbps`, `0` (decimal multiples; `bps`
    /// means bits per second, as in tc).
    pub fn parse(input: &str) -> Result<BitRate, ParseUnitError> {
        const W: &str = "bit rate";
        let (value, suffix) = split_number(W, input)?;
        let lower = suffix.to_ascii_lowercase();
        let unit = lower
            .trim_end_matches("/s")
            .trim_end_matches("bps")
            .trim_end_matches("bit");
        let mult = match unit {
            "" => 1.0,
            "k" => 1e3,
            "m" => 1e6,
            "g" => 1e9,
            "t" => 1e12,
            _ => return Err(err(W, input, "unknown suffix (use k, m, g, e.g. 45mbit)")),
        };
        Ok(BitRate(value * mult))
    }

    /// Rate of `bytes` moved in `elapsed`; zero when no time passed.
    pub fn from_bytes(bytes: u64, elapsed: Duration) -> BitRate {
        let secs = elapsed.as_secs_f64();
        if secs <= 0.0 {
            BitRate(0.0)
        } else {
            BitRate(bytes as f64 * 8.0 / secs)
        }
    }

    /// Bits per second.
    pub fn bps(self) -> f64 {
        self.0
    }

    /// Bytes per second.
    pub fn bytes_per_sec(self) -> f64 {
        self.0 / 8.0
    }
}

impl std::str::FromStr for BitRate {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BitRate::parse(s)
    }
}

impl fmt::Display for BitRate {
    /// `950 kbit/s`, `45.0 Mbit/s`, `26.6 Gbit/s` (three significant digits).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        let (x, unit) = if v >= 1e12 {
            (v / 1e12, "Tbit/s")
        } else if v >= 1e9 {
            (v / 1e9, "Gbit/s")
        } else if v >= 1e6 {
            (v / 1e6, "Mbit/s")
        } else if v >= 1e3 {
            (v / 1e3, "kbit/s")
        } else {
            (v, "bit/s")
        };
        if x >= 100.0 {
            write!(f, "{x:.0} {unit}")
        } else if x >= 10.0 {
            write!(f, "{x:.1} {unit}")
        } else {
            write!(f, "{x:.2} {unit}")
        }
    }
}

/// Parses `10` (seconds), `1.5s`, `50ms`, `200us`, `1000ns`, `2m` (minutes), `1h`.
pub fn parse_duration(input: &str) -> Result<Duration, ParseUnitError> {
    const W: &str = "duration";
    let (value, suffix) = split_number(W, input)?;
    let secs = match suffix.to_ascii_lowercase().as_str() {
        "" | "s" | "sec" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "ns" => value / 1e9,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(err(W, input, "unknown suffix (use ns, us, ms, s, m or h)")),
    };
    if secs > 1e9 {
        return Err(err(W, input, "too long"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Prints a duration the short way: `850 ns`, `12.3 µs`, `4.56 ms`, `1.20 s`.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_parse() {
        assert_eq!(Bytes::parse("4096").unwrap(), Bytes(4096));
        assert_eq!(Bytes::parse("4k").unwrap(), Bytes(4096));
        assert_eq!(Bytes::parse("64KiB").unwrap(), Bytes(65536));
        assert_eq!(Bytes::parse("1.5m").unwrap(), Bytes(1572864));
        assert_eq!(Bytes::parse("2G").unwrap(), Bytes(2 << 30));
        assert!(Bytes::parse("").is_err());
        assert!(Bytes::parse("k").is_err());
        assert!(Bytes::parse("-1").is_err());
        assert!(Bytes::parse("1.5").is_err());
        assert!(Bytes::parse("12q").is_err());
        assert!(Bytes::parse("99999999999999999999t").is_err());
    }

    #[test]
    fn bytes_display() {
        assert_eq!(Bytes(512).to_string(), "512 B");
        assert_eq!(Bytes(65536).to_string(), "64 KiB");
        assert_eq!(Bytes(1572864).to_string(), "1.50 MiB");
        assert_eq!(Bytes(3 << 30).to_string(), "3 GiB");
    }

    #[test]
    fn rate_parse_and_display() {
        assert_eq!(BitRate::parse("45mbit").unwrap(), BitRate(45e6));
        assert_eq!(BitRate::parse("1g").unwrap(), BitRate(1e9));
        assert_eq!(BitRate::parse("2.5Gbit/s").unwrap(), BitRate(2.5e9));
        assert_eq!(BitRate::parse("800kbps").unwrap(), BitRate(800e3));
        assert_eq!(BitRate::parse("0").unwrap(), BitRate(0.0));
        assert!(BitRate::parse("fast").is_err());
        assert!(BitRate::parse("10x").is_err());
        assert_eq!(BitRate(26.6e9).to_string(), "26.6 Gbit/s");
        assert_eq!(BitRate(45e6).to_string(), "45.0 Mbit/s");
        assert_eq!(BitRate(310e6).to_string(), "310 Mbit/s");
    }

    #[test]
    fn rate_from_bytes() {
        let r = BitRate::from_bytes(1_000_000, Duration::from_secs(1));
        assert_eq!(r.bps(), 8e6);
        assert_eq!(BitRate::from_bytes(5, Duration::ZERO).bps(), 0.0);
    }

    #[test]
    fn duration_parse() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("200us").unwrap(), Duration::from_micros(200));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5d").is_err());
        assert_eq!(format_duration(Duration::from_micros(1234)), "1.23 ms");
    }
}
