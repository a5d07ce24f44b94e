//! What a link does, per direction: rate and bottleneck queue, delay and jitter, loss,
//! reorder, duplicate, corrupt, and whether it is up. [`LinkChange`] is a partial update (what
//! `lab set` and a schedule line carry); the value parsers here are shared by the command line
//! and the schedule parser so both accept exactly the same spellings.

use std::time::Duration;

use nsperf_core::units::{BitRate, Bytes, parse_duration};
use serde::{Deserialize, Serialize};

use crate::error::LabError;

/// Bytes of link-layer framing counted per packet on top of the IP packet (an Ethernet
/// header, as tc's rate accounting on an Ethernet device counts it).
pub const FRAME_OVERHEAD_BYTES: u64 = 14;

/// Largest MTU a lab accepts.
pub const MAX_MTU: u32 = 9000;

/// Smallest MTU a lab accepts (IPv4 minimum).
pub const MIN_MTU: u32 = 576;

/// The bottleneck queue limit: drop-tail once this much is waiting to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueLimit {
    /// At most this many wire packets queued.
    Packets(u64),
    /// At most this many wire bytes queued.
    Bytes(u64),
}

/// Parses `1000` (packets) or a size with a unit, `256k`, `1500b`, `1m` (bytes).
impl std::str::FromStr for QueueLimit {
    type Err = LabError;
    fn from_str(s: &str) -> Result<QueueLimit, LabError> {
        let t = s.trim();
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
            let n: u64 = t
                .parse()
                .map_err(|_| LabError::value("queue", s, "too large"))?;
            if n == 0 {
                return Err(LabError::value("queue", s, "must hold at least 1 packet"));
            }
            return Ok(QueueLimit::Packets(n));
        }
        let b = Bytes::parse(t).map_err(|e| LabError::value("queue", s, e.reason))?;
        if b.0 < 64 {
            return Err(LabError::value("queue", s, "must hold at least 64 bytes"));
        }
        Ok(QueueLimit::Bytes(b.0))
    }
}

/// The distribution jitter is drawn from (added to the one-way delay, never below zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JitterDist {
    /// Uniform in [-jitter, +jitter].
    Uniform,
    /// Normal with standard deviation `jitter`.
    Normal,
    /// Pareto (shape 3), shifted to mean zero and scaled to standard deviation `jitter`:
    /// mostly small, with a heavy tail of late packets.
    Pareto,
}

/// `uniform`, `normal` or `pareto` (serde's names); pads to a width.
impl std::fmt::Display for JitterDist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            JitterDist::Uniform => "uniform",
            JitterDist::Normal => "normal",
            JitterDist::Pareto => "pareto",
        })
    }
}

/// Parses `uniform`, `normal` or `pareto` (surrounding blanks ignored).
impl std::str::FromStr for JitterDist {
    type Err = LabError;
    fn from_str(s: &str) -> Result<JitterDist, LabError> {
        match s.trim() {
            "uniform" => Ok(JitterDist::Uniform),
            "normal" => Ok(JitterDist::Normal),
            "pareto" => Ok(JitterDist::Pareto),
            _ => Err(LabError::value(
                "jitter distribution",
                s,
                "use uniform, normal or pareto",
            )),
        }
    }
}

/// Which packets the loss model drops.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "model")]
pub enum LossModel {
    /// No random loss.
    None,
    /// Each packet lost independently with probability `p`.
    Bernoulli {
        /// Loss probability, 0..=1.
        p: f64,
    },
    /// Gilbert–Elliott two-state bursts (the `gemodel` of netem): `p` good→bad and `r`
    /// bad→good transition probabilities per packet, loss probability `bad_loss` in the bad
    /// state and `good_loss` in the good state.
    GilbertElliott {
        /// Probability good → bad.
        p: f64,
        /// Probability bad → good.
        r: f64,
        /// Loss probability in the bad state (netem's 1-h).
        bad_loss: f64,
        /// Loss probability in the good state (netem's 1-k).
        good_loss: f64,
    },
}

/// Parses `1%`, `0`, or `ge:P%,R%[,BAD%[,GOOD%]]` (Gilbert–Elliott; bad-state loss
/// defaults to 100 %, good-state loss to 0 %).
impl std::str::FromStr for LossModel {
    type Err = LabError;
    fn from_str(s: &str) -> Result<LossModel, LabError> {
        let t = s.trim();
        if let Some(rest) = t.strip_prefix("ge:") {
            let parts: Vec<&str> = rest.split(',').collect();
            if parts.len() < 2 || parts.len() > 4 {
                return Err(LabError::value(
                    "loss",
                    s,
                    "Gilbert-Elliott takes ge:P%,R%[,BAD%[,GOOD%]]",
                ));
            }
            let p = parse_probability("loss", parts[0])?;
            let r = parse_probability("loss", parts[1])?;
            let bad_loss = parts
                .get(2)
                .map(|x| parse_probability("loss", x))
                .transpose()?
                .unwrap_or(1.0);
            let good_loss = parts
                .get(3)
                .map(|x| parse_probability("loss", x))
                .transpose()?
                .unwrap_or(0.0);
            return Ok(LossModel::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
            });
        }
        let p = parse_probability("loss", t)?;
        Ok(if p == 0.0 {
            LossModel::None
        } else {
            LossModel::Bernoulli { p }
        })
    }
}

impl LossModel {
    /// True when this model can drop anything.
    pub fn is_active(&self) -> bool {
        match *self {
            LossModel::None => false,
            LossModel::Bernoulli { p } => p > 0.0,
            LossModel::GilbertElliott { .. } => true,
        }
    }
}

/// Parses a probability written as a percentage, `1%`, `0.5%`, or `0`.
pub fn parse_probability(what: &'static str, s: &str) -> Result<f64, LabError> {
    let t = s.trim();
    let num = match t.strip_suffix('%') {
        Some(n) => n.trim(),
        None if t == "0" => "0",
        None => return Err(LabError::value(what, s, "write a percentage, e.g. 1%")),
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(LabError::value(what, s, "not a percentage"));
    }
    let v: f64 = num
        .parse()
        .map_err(|_| LabError::value(what, s, "not a percentage"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(LabError::value(what, s, "must be between 0% and 100%"));
    }
    Ok(v / 100.0)
}

/// Everything one direction of a link does to the packets crossing it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkParams {
    /// Bottleneck rate in bit/s of wire bytes; `None` is unlimited.
    pub rate_bps: Option<f64>,
    /// The bottleneck queue limit (drop-tail).
    pub queue: QueueLimit,
    /// Added one-way delay in nanoseconds.
    pub delay_ns: u64,
    /// Jitter scale in nanoseconds (see [`JitterDist`]); 0 for none.
    pub jitter_ns: u64,
    /// The jitter distribution.
    pub jitter_dist: JitterDist,
    /// Whether jitter may reorder packets (off: a packet never overtakes an earlier one).
    pub jitter_reorder: bool,
    /// Random loss.
    pub loss: LossModel,
    /// Probability that a packet skips the delay and so overtakes the ones before it.
    pub reorder: f64,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Probability that one random bit after the IP header is flipped.
    pub corrupt: f64,
    /// False while the link is down (a partition): everything is dropped.
    pub up: bool,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            rate_bps: None,
            queue: QueueLimit::Packets(1000),
            delay_ns: 0,
            jitter_ns: 0,
            jitter_dist: JitterDist::Uniform,
            jitter_reorder: false,
            loss: LossModel::None,
            reorder: 0.0,
            duplicate: 0.0,
            corrupt: 0.0,
            up: true,
        }
    }
}

impl LinkParams {
    /// True when an impairment must decide packet by packet (so offloaded super-packets
    /// have to be split into wire packets first).
    pub fn needs_per_packet(&self) -> bool {
        self.loss.is_active() || self.reorder > 0.0 || self.duplicate > 0.0 || self.corrupt > 0.0
    }

    /// A one-line description: `45.0 Mbit/s, delay 25.00 ms, loss 1%`.
    pub fn describe(&self) -> String {
        use nsperf_core::units::format_duration;
        let mut parts = vec![match self.rate_bps {
            Some(r) => BitRate(r).to_string(),
            None => "unlimited".to_string(),
        }];
        match self.queue {
            QueueLimit::Packets(n) => parts.push(format!("queue {n} pkts")),
            QueueLimit::Bytes(b) => parts.push(format!("queue {}", Bytes(b))),
        }
        parts.push(format!(
            "delay {}",
            format_duration(Duration::from_nanos(self.delay_ns))
        ));
        if self.jitter_ns > 0 {
            parts.push(format!(
                "jitter {} {:?}{}",
                format_duration(Duration::from_nanos(self.jitter_ns)),
                self.jitter_dist,
                if self.jitter_reorder {
                    " (reorders)"
                } else {
                    ""
                }
            ));
        }
        match self.loss {
            LossModel::None => {}
            LossModel::Bernoulli { p } => parts.push(format!("loss {}%", p * 100.0)),
            LossModel::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
            } => parts.push(format!(
                "loss ge:{}%,{}%,{}%,{}%",
                p * 100.0,
                r * 100.0,
                bad_loss * 100.0,
                good_loss * 100.0
            )),
        }
        for (name, v) in [
            ("reorder", self.reorder),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
        ] {
            if v > 0.0 {
                parts.push(format!("{name} {}%", v * 100.0));
            }
        }
        if !self.up {
            parts.push("DOWN".into());
        }
        parts.join(", ")
    }
}

/// A partial update of link parameters: only the fields given change. `link`, `from` and
/// `to` select the directions it applies to (see [`crate::topology::Layout::select`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkChange {
    /// Only this link (a link name, `access`, `all`); default the lab's bottleneck.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Only directions carrying traffic from this site.
    pub from: Option<String>,
    /// Only directions carrying traffic to this site.
    pub to: Option<String>,
    /// New rate in bit/s; `Some(0.0)` makes it unlimited.
    pub rate_bps: Option<f64>,
    /// New queue limit.
    pub queue: Option<QueueLimit>,
    /// New one-way delay.
    pub delay_ns: Option<u64>,
    /// New jitter.
    pub jitter_ns: Option<u64>,
    /// New jitter distribution.
    pub jitter_dist: Option<JitterDist>,
    /// Whether jitter may reorder.
    pub jitter_reorder: Option<bool>,
    /// New loss model.
    pub loss: Option<LossModel>,
    /// New reorder probability.
    pub reorder: Option<f64>,
    /// New duplicate probability.
    pub duplicate: Option<f64>,
    /// New corrupt probability.
    pub corrupt: Option<f64>,
    /// Link up (true) or down (false).
    pub up: Option<bool>,
}

impl LinkChange {
    /// True when the change sets nothing.
    pub fn is_empty(&self) -> bool {
        *self
            == LinkChange {
                link: self.link.clone(),
                from: self.from.clone(),
                to: self.to.clone(),
                ..LinkChange::default()
            }
    }

    /// Applies the fields that are set to `p`.
    pub fn apply(&self, p: &mut LinkParams) {
        if let Some(v) = self.rate_bps {
            p.rate_bps = (v > 0.0).then_some(v);
        }
        if let Some(v) = self.queue {
            p.queue = v;
        }
        if let Some(v) = self.delay_ns {
            p.delay_ns = v;
        }
        if let Some(v) = self.jitter_ns {
            p.jitter_ns = v;
        }
        if let Some(v) = self.jitter_dist {
            p.jitter_dist = v;
        }
        if let Some(v) = self.jitter_reorder {
            p.jitter_reorder = v;
        }
        if let Some(v) = self.loss {
            p.loss = v;
        }
        if let Some(v) = self.reorder {
            p.reorder = v;
        }
        if let Some(v) = self.duplicate {
            p.duplicate = v;
        }
        if let Some(v) = self.corrupt {
            p.corrupt = v;
        }
        if let Some(v) = self.up {
            p.up = v;
        }
    }

    /// Sets one flag from its command-line spelling (without the leading `--`); the same
    /// names and values as `nsperf lab set`. Used by the schedule parser.
    pub fn set_flag(&mut self, flag: &str, value: Option<&str>) -> Result<(), LabError> {
        fn need(v: Option<&str>) -> Result<&str, LabError> {
            v.ok_or_else(|| LabError::Usage("a link flag needs a value".into()))
        }
        match flag {
            "rate" => {
                let v = need(value)?;
                self.rate_bps = Some(parse_rate(v)?.unwrap_or(0.0));
            }
            "queue" => self.queue = Some(need(value)?.parse()?),
            "delay" => self.delay_ns = Some(parse_delay("delay", need(value)?)?),
            "rtt" => self.delay_ns = Some(parse_delay("rtt", need(value)?)? / 2),
            "jitter" => self.jitter_ns = Some(parse_delay("jitter", need(value)?)?),
            "jitter-dist" => self.jitter_dist = Some(need(value)?.parse()?),
            "jitter-reorder" => self.jitter_reorder = Some(true),
            "no-jitter-reorder" => self.jitter_reorder = Some(false),
            "loss" => self.loss = Some(need(value)?.parse()?),
            "reorder" => self.reorder = Some(parse_probability("reorder", need(value)?)?),
            "duplicate" => self.duplicate = Some(parse_probability("duplicate", need(value)?)?),
            "corrupt" => self.corrupt = Some(parse_probability("corrupt", need(value)?)?),
            "link" => self.link = Some(parse_link_name(need(value)?)?),
            "from" => self.from = Some(parse_site_name(need(value)?)?),
            "to" => self.to = Some(parse_site_name(need(value)?)?),
            _ => return Err(LabError::value("flag", flag, "unknown link flag")),
        }
        Ok(())
    }

    /// The change in the command-line spelling, for event logs: `--rate 45.0mbit --delay 25ms`.
    pub fn to_flags(&self) -> String {
        let ms = |ns: u64| format!("{}ms", ns as f64 / 1e6);
        let pct = |p: f64| format!("{}%", p * 100.0);
        let mut v: Vec<String> = Vec::new();
        if let Some(l) = &self.link {
            v.push(format!("--link {l}"));
        }
        if let Some(f) = &self.from {
            v.push(format!("--from {f}"));
        }
        if let Some(t) = &self.to {
            v.push(format!("--to {t}"));
        }
        if let Some(r) = self.rate_bps {
            v.push(format!(
                "--rate {}",
                if r > 0.0 {
                    format!("{}bit", r)
                } else {
                    "0".into()
                }
            ));
        }
        match self.queue {
            Some(QueueLimit::Packets(n)) => v.push(format!("--queue {n}")),
            Some(QueueLimit::Bytes(b)) => v.push(format!("--queue {b}b")),
            None => {}
        }
        if let Some(d) = self.delay_ns {
            v.push(format!("--delay {}", ms(d)));
        }
        if let Some(d) = self.jitter_ns {
            v.push(format!("--jitter {}", ms(d)));
        }
        if let Some(d) = self.jitter_dist {
            v.push(format!("--jitter-dist {}", format!("{d:?}").to_lowercase()));
        }
        match self.jitter_reorder {
            Some(true) => v.push("--jitter-reorder".into()),
            Some(false) => v.push("--no-jitter-reorder".into()),
            None => {}
        }
        match self.loss {
            Some(LossModel::None) => v.push("--loss 0".into()),
            Some(LossModel::Bernoulli { p }) => v.push(format!("--loss {}", pct(p))),
            Some(LossModel::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
            }) => v.push(format!(
                "--loss ge:{},{},{},{}",
                pct(p),
                pct(r),
                pct(bad_loss),
                pct(good_loss)
            )),
            None => {}
        }
        for (name, x) in [
            ("reorder", self.reorder),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
        ] {
            if let Some(x) = x {
                v.push(format!("--{name} {}", pct(x)));
            }
        }
        match self.up {
            Some(true) => v.push("up".into()),
            Some(false) => v.push("down".into()),
            None => {}
        }
        v.join(" ")
    }

    /// Whether a flag takes a value (for token parsing).
    pub fn flag_takes_value(flag: &str) -> bool {
        !matches!(flag, "jitter-reorder" | "no-jitter-reorder")
    }
}

/// Parses a rate: `45mbit`, `1g`; `0` or `unlimited` for no limit.
pub fn parse_rate(s: &str) -> Result<Option<f64>, LabError> {
    if s.trim() == "unlimited" {
        return Ok(None);
    }
    let r = BitRate::parse(s).map_err(|e| LabError::value("rate", s, e.reason))?;
    if r.bps() == 0.0 {
        Ok(None)
    } else if r.bps() < 8_000.0 {
        Err(LabError::value("rate", s, "below 8 kbit/s"))
    } else if r.bps() > 1e12 {
        Err(LabError::value("rate", s, "above 1 Tbit/s"))
    } else {
        Ok(Some(r.bps()))
    }
}

/// Parses a delay: `50ms`, `0`, `1.5s`; at most one hour.
pub fn parse_delay(what: &'static str, s: &str) -> Result<u64, LabError> {
    let d = parse_duration(s).map_err(|e| LabError::value(what, s, e.reason))?;
    if d > Duration::from_secs(3600) {
        return Err(LabError::value(what, s, "longer than one hour"));
    }
    Ok(d.as_nanos() as u64)
}

/// Checks a lab or site name: 1–12 of `a-z 0-9 _`, starting with a letter.
pub fn check_name(what: &'static str, s: &str) -> Result<(), LabError> {
    let ok = !s.is_empty()
        && s.len() <= 12
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(LabError::value(
            what,
            s,
            "use 1-12 characters a-z, 0-9, _ starting with a letter",
        ))
    }
}

/// Checks a link name: a site name, `a-b` (two site names), `wan`, `access` or `all`.
pub fn parse_link_name(s: &str) -> Result<String, LabError> {
    let ok = s.split('-').count() <= 2 && s.split('-').all(|p| check_name("link", p).is_ok());
    if ok {
        Ok(s.to_string())
    } else {
        Err(LabError::value(
            "link",
            s,
            "a site name, two joined by '-' (a-b), wan, access or all",
        ))
    }
}

fn parse_site_name(s: &str) -> Result<String, LabError> {
    check_name("site", s)?;
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_names_match_display_and_from_str() {
        for (d, name) in [
            (JitterDist::Uniform, "uniform"),
            (JitterDist::Normal, "normal"),
            (JitterDist::Pareto, "pareto"),
        ] {
            assert_eq!(d.to_string(), name);
            assert_eq!(name.parse::<JitterDist>().ok(), Some(d));
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{name}\""));
        }
    }

    #[test]
    fn values_parse() {
        assert_eq!(
            "100".parse::<QueueLimit>().unwrap(),
            QueueLimit::Packets(100)
        );
        assert_eq!(
            "64k".parse::<QueueLimit>().unwrap(),
            QueueLimit::Bytes(65536)
        );
        assert!("0".parse::<QueueLimit>().is_err());
        assert!("x".parse::<QueueLimit>().is_err());
        assert_eq!(parse_probability("loss", "1%").unwrap(), 0.01);
        assert_eq!(parse_probability("loss", "0").unwrap(), 0.0);
        assert!(parse_probability("loss", "1").is_err());
        assert!(parse_probability("loss", "101%").is_err());
        assert!(parse_probability("loss", "-1%").is_err());
        assert_eq!(
            "ge:1%,30%".parse::<LossModel>().unwrap(),
            LossModel::GilbertElliott {
                p: 0.01,
                r: 0.3,
                bad_loss: 1.0,
                good_loss: 0.0
            }
        );
        assert_eq!("0%".parse::<LossModel>().unwrap(), LossModel::None);
        assert!("ge:1%".parse::<LossModel>().is_err());
        assert_eq!(parse_rate("45mbit").unwrap(), Some(45e6));
        assert_eq!(parse_rate("0").unwrap(), None);
        assert!(parse_rate("1bit").is_err());
        assert_eq!(parse_delay("delay", "25ms").unwrap(), 25_000_000);
        assert!(check_name("lab", "t3").is_ok());
        assert!(check_name("lab", "T3").is_err());
        assert!(check_name("lab", "a-b").is_err());
        assert!(check_name("lab", "").is_err());
    }

    #[test]
    fn change_applies_only_what_is_set() {
        let mut c = LinkChange::default();
        assert!(c.is_empty());
        c.set_flag("rtt", Some("50ms")).unwrap();
        c.set_flag("loss", Some("1%")).unwrap();
        assert!(!c.is_empty());
        let mut p = LinkParams::default();
        c.apply(&mut p);
        assert_eq!(p.delay_ns, 25_000_000);
        assert_eq!(p.loss, LossModel::Bernoulli { p: 0.01 });
        assert_eq!(p.rate_bps, None);
        assert!(p.needs_per_packet());
        c.set_flag("from", Some("b")).unwrap();
        c.set_flag("link", Some("a-b")).unwrap();
        assert_eq!(c.to_flags(), "--link a-b --from b --delay 25ms --loss 1%");
        assert!(c.set_flag("link", Some("a-b-c")).is_err());
        assert!(c.set_flag("speed", Some("1")).is_err());
        assert!(c.set_flag("rate", None).is_err());
    }
}
