//! A lab's link as plans give it: the link flags of `nsperf lab up` / `lab set` (same names,
//! same values, same parser as the command line and schedule files) plus `--mtu`, which only
//! `lab up` can set, and `--access-rate` / `--access-queue` / `--access-delay`, the access
//! links of a star or dumbbell. A plan is checked with these rules when it is loaded, so what passes
//! `nsperf run --dry-run` is what `lab up` accepts.

use serde::{Deserialize, Serialize};

use crate::config::{LinkChange, LinkParams, MAX_MTU, MIN_MTU};
use crate::error::LabError;

/// The link of a lab: the MTU of its devices and the link parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkSetup {
    /// MTU of every site's link device; `None` keeps the default (1500).
    pub mtu: Option<u32>,
    /// Link parameters, applied to the default link.
    pub change: LinkChange,
    /// The access links of a star or dumbbell (rate, queue, delay), applied to every access
    /// link; empty in a mesh.
    #[serde(default)]
    pub access: LinkChange,
}

/// The MTU of a lab whose setup does not name one.
pub const DEFAULT_MTU: u32 = 1500;

impl LinkSetup {
    /// Parses link flags in their command-line spelling: `--rate 45mbit`, `--loss=1%`,
    /// `--jitter-reorder`, `--mtu 9000`, … Later flags override earlier ones.
    pub fn parse_args<S: AsRef<str>>(args: &[S]) -> Result<LinkSetup, LabError> {
        let mut setup = LinkSetup::default();
        setup.apply_args(args)?;
        Ok(setup)
    }

    /// Applies link flags in their command-line spelling over this setup, as
    /// [`LinkSetup::parse_args`] reads them.
    pub fn apply_args<S: AsRef<str>>(&mut self, args: &[S]) -> Result<(), LabError> {
        let mut it = args.iter().map(AsRef::as_ref);
        while let Some(tok) = it.next() {
            let Some(flag) = tok.strip_prefix("--") else {
                return Err(LabError::value(
                    "link flag",
                    tok,
                    "expected a flag such as --rate, --loss or --mtu",
                ));
            };
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (flag, None),
            };
            let value = match inline {
                Some(v) => Some(v),
                None if name == "mtu" || LinkChange::flag_takes_value(name) => {
                    Some(it.next().ok_or_else(|| {
                        LabError::Usage(format!("link flag --{name} needs a value"))
                    })?)
                }
                None => None,
            };
            self.set(name, value)?;
        }
        Ok(())
    }

    /// Sets one flag by its command-line name without the leading `--` (`rate`, `mtu`,
    /// `access-delay`, …) to `value`, as the command line and a plan's `[lab]` fields give it.
    pub fn set(&mut self, name: &str, value: Option<&str>) -> Result<(), LabError> {
        if name == "mtu" {
            self.mtu = Some(parse_mtu(value.unwrap_or_default())?);
        } else if let Some(access) = name.strip_prefix("access-") {
            if !matches!(access, "rate" | "queue" | "delay") {
                return Err(LabError::value(
                    "flag",
                    name,
                    "the access links take --access-rate, --access-queue, --access-delay",
                ));
            }
            self.access.set_flag(access, value)?;
        } else {
            self.change.set_flag(name, value)?;
        }
        Ok(())
    }

    /// The MTU of the lab's devices.
    pub fn mtu(&self) -> u32 {
        self.mtu.unwrap_or(DEFAULT_MTU)
    }

    /// The changes that make a running lab's links exactly this setup, in order: every
    /// parameter of every link back to the default first, then this setup's change, then its
    /// access links' (as `lab up` applies them).
    pub fn from_default(&self) -> Vec<LinkChange> {
        let mut v = vec![LinkChange {
            link: Some("all".into()),
            ..LinkChange::reset()
        }];
        if !self.change.is_empty() {
            v.push(self.change.clone());
        }
        if !self.access.is_empty() {
            let mut access = self.access.clone();
            access.link.get_or_insert_with(|| "access".into());
            v.push(access);
        }
        v
    }
}

impl LinkChange {
    /// A change that sets every parameter of every direction to the default link's.
    pub fn reset() -> LinkChange {
        let d = LinkParams::default();
        LinkChange {
            link: None,
            from: None,
            to: None,
            rate_bps: Some(d.rate_bps.unwrap_or(0.0)),
            queue: Some(d.queue),
            delay_ns: Some(d.delay_ns),
            jitter_ns: Some(d.jitter_ns),
            jitter_dist: Some(d.jitter_dist),
            jitter_reorder: Some(d.jitter_reorder),
            loss: Some(d.loss),
            reorder: Some(d.reorder),
            duplicate: Some(d.duplicate),
            corrupt: Some(d.corrupt),
            up: Some(d.up),
        }
    }
}

/// Parses an MTU within the lab's limits.
pub fn parse_mtu(s: &str) -> Result<u32, LabError> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| LabError::value("mtu", s, "not a whole number of bytes"))?;
    if !(MIN_MTU..=MAX_MTU).contains(&v) {
        return Err(LabError::value("mtu", s, "outside 576..=9000"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LossModel;

    #[test]
    fn flags_parse_as_the_command_line_does() {
        let s = LinkSetup::parse_args(&[
            "--rate",
            "45mbit",
            "--mtu",
            "9000",
            "--loss=1%",
            "--jitter-reorder",
            "--rtt",
            "50ms",
        ])
        .unwrap();
        assert_eq!(s.mtu(), 9000);
        assert!(s.access.is_empty());
        let a = LinkSetup::parse_args(&["--access-rate", "1g", "--access-delay=1ms"]).unwrap();
        assert_eq!(a.access.rate_bps, Some(1e9));
        assert_eq!(a.access.delay_ns, Some(1_000_000));
        assert!(a.change.is_empty());
        assert_eq!(s.change.rate_bps, Some(45e6));
        assert_eq!(s.change.loss, Some(LossModel::Bernoulli { p: 0.01 }));
        assert_eq!(s.change.jitter_reorder, Some(true));
        assert_eq!(s.change.delay_ns, Some(25_000_000));
        assert_eq!(LinkSetup::parse_args::<&str>(&[]).unwrap().mtu(), 1500);
        for bad in [
            &["--mtu", "10000"][..],
            &["--mtu"],
            &["--speed", "1"],
            &["rate", "1g"],
            &["--loss", "1"],
            &["--schedule", "x"],
            &["--access-loss", "1%"],
        ] {
            assert!(LinkSetup::parse_args(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reset_then_change_gives_exactly_the_setup() {
        let mut p = LinkParams {
            rate_bps: Some(1e6),
            delay_ns: 7,
            loss: LossModel::Bernoulli { p: 0.5 },
            ..LinkParams::default()
        };
        let s = LinkSetup::parse_args(&["--rate", "45mbit"]).unwrap();
        assert_eq!(s.from_default().len(), 2, "no access change");
        for c in s.from_default() {
            c.apply(&mut p);
        }
        assert_eq!(
            p,
            LinkParams {
                rate_bps: Some(45e6),
                ..LinkParams::default()
            }
        );
    }
}
