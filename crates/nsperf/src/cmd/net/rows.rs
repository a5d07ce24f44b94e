//! The human interval rows of `nsperf net`, printed as each interval ends (on a terminal or
//! into a pipe, as iperf3 does): this end's figures per stream and their sum, with the
//! units of `-f` and the time prefix of `--timestamps`.

use std::ffi::CString;
use std::io::Write;
use std::str::FromStr;

use nsperf_core::units::{BitRate, Bytes};
use nsperf_net::{Direction, LiveInterval, Mode, Protocol, StreamDirection, TestParams};

use super::latency_text;

/// The unit of rates in the human output (`-f`, iperf3's letters): lower case bits per
/// second in powers of 1000, upper case bytes per second in powers of 1024.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateUnit {
    /// `k`: kbit/s.
    Kbit,
    /// `m`: Mbit/s.
    Mbit,
    /// `g`: Gbit/s.
    Gbit,
    /// `t`: Tbit/s.
    Tbit,
    /// `K`: KiB/s.
    KiByte,
    /// `M`: MiB/s.
    MiByte,
    /// `G`: GiB/s.
    GiByte,
    /// `T`: TiB/s.
    TiByte,
}

impl FromStr for RateUnit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "k" => RateUnit::Kbit,
            "m" => RateUnit::Mbit,
            "g" => RateUnit::Gbit,
            "t" => RateUnit::Tbit,
            "K" => RateUnit::KiByte,
            "M" => RateUnit::MiByte,
            "G" => RateUnit::GiByte,
            "T" => RateUnit::TiByte,
            _ => {
                return Err(format!(
                    "'{s}' is not a unit: k, m, g, t (bit/s) or K, M, G, T (bytes/s)"
                ));
            }
        })
    }
}

impl std::fmt::Display for RateUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RateUnit::Kbit => "k",
            RateUnit::Mbit => "m",
            RateUnit::Gbit => "g",
            RateUnit::Tbit => "t",
            RateUnit::KiByte => "K",
            RateUnit::MiByte => "M",
            RateUnit::GiByte => "G",
            RateUnit::TiByte => "T",
        })
    }
}

impl RateUnit {
    /// The divisor from bits per second and the label.
    fn scale(self) -> (f64, &'static str) {
        const KI: f64 = 1024.0;
        match self {
            RateUnit::Kbit => (1e3, "kbit/s"),
            RateUnit::Mbit => (1e6, "Mbit/s"),
            RateUnit::Gbit => (1e9, "Gbit/s"),
            RateUnit::Tbit => (1e12, "Tbit/s"),
            RateUnit::KiByte => (8.0 * KI, "KiB/s"),
            RateUnit::MiByte => (8.0 * KI * KI, "MiB/s"),
            RateUnit::GiByte => (8.0 * KI * KI * KI, "GiB/s"),
            RateUnit::TiByte => (8.0 * KI * KI * KI * KI, "TiB/s"),
        }
    }
}

/// How rates print: in `-f`'s unit, or scaled to three significant digits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rates(pub Option<RateUnit>);

impl Rates {
    /// `bps` in the chosen unit (`12.3 Mbit/s`, `1530 KiB/s`).
    pub fn show(self, bps: f64) -> String {
        match self.0 {
            None => BitRate(bps).to_string(),
            Some(u) => {
                let (div, label) = u.scale();
                let x = bps / div;
                if x >= 99.95 {
                    format!("{x:.0} {label}")
                } else if x >= 9.995 {
                    format!("{x:.1} {label}")
                } else {
                    format!("{x:.2} {label}")
                }
            }
        }
    }
}

/// The time prefix of `--timestamps`: a `strftime(3)` format of the local time.
#[derive(Debug, Clone)]
pub struct Timestamps(CString);

/// iperf3's default `--timestamps` format: the locale's date and time, and a space.
pub const DEFAULT_TIMESTAMP_FORMAT: &str = "%c ";

impl FromStr for Timestamps {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.is_empty() || s.len() > 64 {
            return Err("a timestamp format is 1 to 64 characters (strftime, e.g. '%T ')".into());
        }
        CString::new(s)
            .map(Timestamps)
            .map_err(|_| "a timestamp format cannot hold a NUL byte".into())
    }
}

impl Timestamps {
    /// The local time now in this format (empty when it does not fit 128 bytes).
    pub fn now(&self) -> String {
        let mut buf = [0u8; 128];
        // SAFETY: time(NULL) and localtime_r into a zeroed tm are always valid; strftime
        // writes at most buf.len() bytes including the NUL and returns the count without it.
        let n = unsafe {
            let t = libc::time(std::ptr::null_mut());
            let mut tm: libc::tm = std::mem::zeroed();
            if libc::localtime_r(&t, &mut tm).is_null() {
                return String::new();
            }
            libc::strftime(buf.as_mut_ptr().cast(), buf.len(), self.0.as_ptr(), &tm)
        };
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// What each live row shows, fixed when the test starts so rows line up as they come.
#[derive(Debug)]
pub struct LiveRows {
    rates: Rates,
    timestamps: Option<Timestamps>,
    /// One row per stream and a sum per direction (more than one stream).
    per_stream: bool,
    /// TCP streams this end sends on: retransmissions and congestion window.
    tcp_sender: bool,
    udp: bool,
    rr: bool,
    header_done: bool,
    /// A last interval shorter than this (the drain after the stop) is not shown: as in the
    /// report, its bytes count in the totals below the rows.
    min_tail_s: f64,
}

const W_INTERVAL: usize = 13;
const W_STREAM: usize = 6;
const W_DIR: usize = 4;
const W_BYTES: usize = 10;
const W_RATE: usize = 13;
const W_RETR: usize = 6;
const W_CWND: usize = 10;
const W_MSGS: usize = 12;
const W_LAT: usize = 10;

impl LiveRows {
    /// The rows of a test with these parameters (`None` for a sweep: it has no rows).
    pub fn new(p: &TestParams, rates: Rates, timestamps: Option<Timestamps>) -> Option<Self> {
        if matches!(p.mode, Mode::Sweep { .. }) {
            return None;
        }
        let rr = matches!(p.mode, Mode::Rr { .. });
        let udp = p.protocol == Protocol::Udp;
        Some(LiveRows {
            rates,
            timestamps,
            per_stream: p.stream_count() > 1,
            tcp_sender: !udp && !rr && p.direction != Direction::Down,
            udp,
            rr,
            header_done: false,
            min_tail_s: p.interval_ns as f64 / 1e9 / 4.0,
        })
    }

    fn prefix(&self) -> String {
        self.timestamps
            .as_ref()
            .map(Timestamps::now)
            .unwrap_or_default()
    }

    fn header(&self) -> String {
        let mut h = format!("{}{:<W_INTERVAL$}", self.prefix(), "interval s");
        if self.per_stream {
            h += &format!("  {:<W_STREAM$}", "stream");
        }
        h += &format!(
            "  {:<W_DIR$}  {:>W_BYTES$}  {:>W_RATE$}",
            "dir", "transfer", "throughput"
        );
        if self.tcp_sender {
            h += &format!("  {:>W_RETR$}  {:>W_CWND$}", "retr", "cwnd");
        }
        if self.udp {
            h += &format!("  {:>W_MSGS$}", "datagrams");
        }
        if self.rr {
            h += &format!(
                "  {:>W_MSGS$}  {:>W_LAT$}  {:>W_LAT$}  {:>W_LAT$}",
                "transactions", "p50", "p99", "max"
            );
        }
        h
    }

    /// One row: `who` is the stream number or `sum`.
    fn row(&self, iv: &LiveInterval, who: &str, sel: &[usize], sending: bool) -> String {
        let bytes: u64 = sel.iter().map(|&i| iv.stream_bytes[i]).sum();
        let bps = if iv.length_s > 0.0 {
            bytes as f64 * 8.0 / iv.length_s
        } else {
            0.0
        };
        let interval = format!("{:.2}-{:.2}", iv.start_s, iv.start_s + iv.length_s);
        let mut r = format!("{}{interval:<W_INTERVAL$}", self.prefix());
        if self.per_stream {
            r += &format!("  {who:<W_STREAM$}");
        }
        r += &format!(
            "  {:<W_DIR$}  {:>W_BYTES$}  {:>W_RATE$}",
            StreamDirection::of_client(sending),
            Bytes(bytes).to_string(),
            self.rates.show(bps)
        );
        if self.tcp_sender {
            let (retr, cwnd) = if sending {
                let retr: u64 = sel
                    .iter()
                    .filter_map(|&i| iv.stream_retransmits.get(i).copied().flatten())
                    .sum();
                // The window of one stream; a sum of windows means nothing.
                let cwnd = match sel {
                    [one] => iv
                        .stream_tcp
                        .get(*one)
                        .copied()
                        .flatten()
                        .map(|t| Bytes(t.snd_cwnd as u64 * t.snd_mss as u64).to_string()),
                    _ => None,
                };
                (retr.to_string(), cwnd.unwrap_or_default())
            } else {
                (String::new(), String::new())
            };
            r += &format!("  {retr:>W_RETR$}  {cwnd:>W_CWND$}");
        }
        let msgs: u64 = sel.iter().map(|&i| iv.stream_messages[i]).sum();
        if self.udp {
            r += &format!("  {msgs:>W_MSGS$}");
        }
        if self.rr {
            r += &format!("  {msgs:>W_MSGS$}");
            // Latency is measured over all streams together.
            match iv.latency.filter(|_| who == "sum" || !self.per_stream) {
                Some(l) => {
                    r += &format!(
                        "  {:>W_LAT$}  {:>W_LAT$}  {:>W_LAT$}",
                        latency_text(l.p50_ns),
                        latency_text(l.p99_ns),
                        latency_text(l.max_ns)
                    )
                }
                None => r += &format!("  {:>W_LAT$}  {:>W_LAT$}  {:>W_LAT$}", "", "", ""),
            }
        }
        r.trim_end().to_string()
    }

    /// Prints the interval's rows (the header before the first) and flushes them.
    pub fn print(&mut self, iv: &LiveInterval) {
        let n = iv.stream_bytes.len();
        if n == 0 || (iv.start_s > 0.0 && iv.length_s < self.min_tail_s) {
            return;
        }
        let mut out = String::new();
        if !std::mem::replace(&mut self.header_done, true) {
            out += &self.header();
            out.push('\n');
        }
        // The client sends on "up" streams (request/response: its requests go up, but the
        // rows count the answers it reads, so they are "down").
        let up = |i: usize| iv.stream_sending.get(i).copied().unwrap_or(false) && !self.rr;
        for dir_up in [true, false] {
            let sel: Vec<usize> = (0..n).filter(|&i| up(i) == dir_up).collect();
            if sel.is_empty() {
                continue;
            }
            if self.per_stream {
                for &i in &sel {
                    out += &self.row(iv, &i.to_string(), &[i], dir_up);
                    out.push('\n');
                }
            }
            if !self.per_stream || sel.len() > 1 {
                out += &self.row(iv, "sum", &sel, dir_up);
                out.push('\n');
            }
        }
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(out.as_bytes());
        let _ = o.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_as_iperf3_letters() {
        let m: RateUnit = "m".parse().unwrap();
        assert_eq!(Rates(Some(m)).show(42.9e6), "42.9 Mbit/s");
        assert_eq!(
            Rates(Some("k".parse().unwrap())).show(42.9e6),
            "42900 kbit/s"
        );
        assert_eq!(
            Rates(Some("g".parse().unwrap())).show(42.9e6),
            "0.04 Gbit/s"
        );
        // Upper case: bytes per second, powers of 1024.
        assert_eq!(
            Rates(Some("M".parse().unwrap())).show(8.0 * 1024.0 * 1024.0 * 5.0),
            "5.00 MiB/s"
        );
        assert_eq!(
            Rates(Some("K".parse().unwrap())).show(8.0 * 1024.0 * 300.0),
            "300 KiB/s"
        );
        assert_eq!(Rates(None).show(42.9e6), "42.9 Mbit/s");
        assert!("x".parse::<RateUnit>().unwrap_err().contains("not a unit"));
        for u in ["k", "m", "g", "t", "K", "M", "G", "T"] {
            assert_eq!(u.parse::<RateUnit>().unwrap().to_string(), u);
        }
    }

    #[test]
    fn timestamps_follow_the_format() {
        let t: Timestamps = "%Y!".parse().unwrap();
        let s = t.now();
        assert_eq!(s.len(), 5, "{s}");
        assert!(s.ends_with('!') && s.starts_with("20"), "{s}");
        assert!("".parse::<Timestamps>().is_err());
        assert!("a\0b".parse::<Timestamps>().is_err());
    }
}
