//! Link events: every change of a running lab's links (a `lab set`, a schedule line, a
//! partition and its end) with its time on both the emulator's clock and the Unix clock,
//! so a result store can lay them over the time series of the runs they overlapped. The
//! emulator appends each as one JSON line to `/run/nsperf/labs/NAME/events.jsonl`
//! ([`read`]); [`outages`] pairs downs with ups, and [`outage_findings`] names the outages a
//! run crossed, with the time the run moved no data when its series is given.

use std::fmt;
use std::path::Path;

use nsperf_core::{Finding, Severity};
use serde::{Deserialize, Serialize};

use crate::config::LinkChange;
use crate::error::{LabError, Result};

/// Who made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventSource {
    /// The emulator itself (start, CPU latency hold).
    Emulator,
    /// `lab set` (or the plan runner through it).
    Set,
    /// A line of a fault schedule.
    Schedule,
    /// A capture on a link started or stopped.
    Capture,
}

impl fmt::Display for EventSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EventSource::Emulator => "emulator",
            EventSource::Set => "set",
            EventSource::Schedule => "schedule",
            EventSource::Capture => "capture",
        })
    }
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Directions went down (a partition starts).
    Down,
    /// Directions came back up.
    Up,
    /// Parameters changed (rate, delay, loss, …).
    Change,
    /// Not a change of the link (emulator start, capture start/stop).
    Note,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkEvent {
    /// Seconds since the emulator started.
    pub t_s: f64,
    /// Unix time, nanoseconds.
    #[serde(default)]
    pub t_unix_ns: u64,
    /// Who made it.
    pub source: EventSource,
    /// What it did.
    #[serde(default = "note")]
    pub kind: EventKind,
    /// The change as written (flags, or the schedule line).
    pub text: String,
    /// The directions it changed (`a -> b`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directions: Vec<String>,
    /// The change itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<LinkChange>,
}

fn note() -> EventKind {
    EventKind::Note
}

/// Reads the events of a lab from its `events.jsonl` (a line that does not parse, say one
/// cut short by a crash, is skipped).
pub fn read(path: &Path) -> Result<Vec<LinkEvent>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| LabError::io(format!("reading {}", path.display()), e))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// A time some directions were down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outage {
    /// The directions that were down.
    pub directions: Vec<String>,
    /// When they went down, Unix ns.
    pub down_unix_ns: u64,
    /// When the last of them came back up; `None` while still down.
    pub up_unix_ns: Option<u64>,
    /// The event that started it, as written.
    pub text: String,
}

impl Outage {
    /// Its length, up to `until_unix_ns` while it lasts.
    pub fn duration_ns(&self, until_unix_ns: u64) -> u64 {
        self.up_unix_ns
            .unwrap_or(until_unix_ns)
            .saturating_sub(self.down_unix_ns)
    }
}

/// The outages in `events` (in time order): each down event starts one over the
/// directions it took down that were up; it ends when the last of them is up again.
pub fn outages(events: &[LinkEvent]) -> Vec<Outage> {
    let mut out: Vec<Outage> = Vec::new();
    // (outage index, directions still down)
    let mut open: Vec<(usize, Vec<String>)> = Vec::new();
    for e in events {
        match e.kind {
            EventKind::Down => {
                let down: Vec<String> = e
                    .directions
                    .iter()
                    .filter(|d| !open.iter().any(|(_, v)| v.contains(d)))
                    .cloned()
                    .collect();
                if down.is_empty() {
                    continue;
                }
                out.push(Outage {
                    directions: down.clone(),
                    down_unix_ns: e.t_unix_ns,
                    up_unix_ns: None,
                    text: e.text.clone(),
                });
                open.push((out.len() - 1, down));
            }
            EventKind::Up => {
                for (i, v) in open.iter_mut() {
                    v.retain(|d| !e.directions.contains(d));
                    if v.is_empty() {
                        out[*i].up_unix_ns = Some(e.t_unix_ns);
                    }
                }
                open.retain(|(_, v)| !v.is_empty());
            }
            EventKind::Change | EventKind::Note => {}
        }
    }
    out
}

/// Findings for a run from `start_unix_ns` to `end_unix_ns`: one `link_outage` per outage
/// the run crossed ("link a -> b, b -> a down 3.0 s at 12.4 s into the run"), and when
/// `intervals` (seconds from the run's start and the bytes moved in each interval that
/// ends there) are given, how long the run moved no data from the outage on — the outage
/// plus the time TCP took to notice the link was back (RTO backoff).
pub fn outage_findings(
    events: &[LinkEvent],
    start_unix_ns: u64,
    end_unix_ns: u64,
    intervals: Option<&[(f64, u64)]>,
) -> Vec<Finding> {
    let mut v = Vec::new();
    for o in outages(events) {
        let up = o.up_unix_ns.unwrap_or(u64::MAX);
        if o.down_unix_ns >= end_unix_ns || up <= start_unix_ns {
            continue;
        }
        let at_s = (o.down_unix_ns as f64 - start_unix_ns as f64) / 1e9;
        let len_s = o.duration_ns(end_unix_ns) as f64 / 1e9;
        let what = if o.up_unix_ns.is_some_and(|u| u <= end_unix_ns) {
            format!("down {len_s:.1} s")
        } else {
            format!("down for the rest of the run ({len_s:.1} s)")
        };
        let when = if at_s >= 0.0 {
            format!("at {at_s:.1} s into the run")
        } else {
            format!("{:.1} s before the run started", -at_s)
        };
        let mut msg = format!(
            "link {} {what} {when} ({})",
            o.directions.join(", "),
            o.text
        );
        let mut f = Finding::new("link_outage", Severity::Warning, "")
            .with("outage_start_s", at_s)
            .with("outage_s", len_s);
        if let Some(series) = intervals
            && let Some(stall) = zero_stretch(series, at_s.max(0.0))
        {
            msg.push_str(&format!(
                ": the run moved 0 bytes for {:.1} s from {:.1} s{}",
                stall.1 - stall.0,
                stall.0,
                if stall.1 - stall.0 > len_s + 0.5 {
                    " (the outage plus TCP's retransmission backoff)"
                } else {
                    ""
                }
            ));
            f = f.with("zero_bytes_s", stall.1 - stall.0);
        }
        f.message = msg;
        v.push(f);
    }
    v
}

/// The longest run of intervals with no bytes that overlaps or starts within one
/// interval of `from_s`: (start, end) in seconds from the run's start.
fn zero_stretch(series: &[(f64, u64)], from_s: f64) -> Option<(f64, f64)> {
    let mut best: Option<(f64, f64)> = None;
    let mut cur: Option<f64> = None;
    let mut prev_end = 0.0;
    for &(end, bytes) in series {
        if bytes == 0 {
            cur.get_or_insert(prev_end);
        } else if let Some(s) = cur.take() {
            consider(&mut best, (s, prev_end), from_s, end - prev_end);
        }
        prev_end = end;
    }
    if let Some(s) = cur {
        consider(&mut best, (s, prev_end), from_s, 0.0);
    }
    best
}

fn consider(best: &mut Option<(f64, f64)>, span: (f64, f64), from_s: f64, slack: f64) {
    let near = span.1 > from_s && span.0 <= from_s + slack.max(1.0);
    if near && best.is_none_or(|b| span.1 - span.0 > b.1 - b.0) {
        *best = Some(span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t_s: f64, kind: EventKind, dirs: &[&str], text: &str) -> LinkEvent {
        LinkEvent {
            t_s,
            t_unix_ns: (t_s * 1e9) as u64 + 1_000_000_000_000,
            source: EventSource::Schedule,
            kind,
            text: text.into(),
            directions: dirs.iter().map(|s| s.to_string()).collect(),
            change: None,
        }
    }

    const T0: u64 = 1_000_000_000_000;

    #[test]
    fn downs_pair_with_ups() {
        let e = [
            ev(1.0, EventKind::Note, &[], "emulator started"),
            ev(5.0, EventKind::Down, &["a -> b", "b -> a"], "5s down"),
            ev(6.0, EventKind::Down, &["a -> b"], "6s down --from a"),
            ev(7.0, EventKind::Up, &["a -> b"], "7s up --from a"),
            ev(8.0, EventKind::Up, &["b -> a"], "8s up --from b"),
            ev(9.0, EventKind::Down, &["b -> a"], "9s down --from b"),
        ];
        let o = outages(&e);
        assert_eq!(o.len(), 2, "{o:?}");
        assert_eq!(o[0].directions, ["a -> b", "b -> a"]);
        assert_eq!(o[0].duration_ns(0), 3_000_000_000);
        assert_eq!(o[1].up_unix_ns, None);
        assert_eq!(o[1].duration_ns(T0 + 10_000_000_000), 1_000_000_000);
    }

    #[test]
    fn findings_name_outages_the_run_crossed_with_the_stall() {
        let e = [
            ev(12.0, EventKind::Down, &["a -> b", "b -> a"], "12s down"),
            ev(15.0, EventKind::Up, &["a -> b", "b -> a"], "15s up"),
            ev(40.0, EventKind::Down, &["a -> b"], "40s down --from a"),
        ];
        // A run from 0.6 s to 30.6 s: sees the first, not the second.
        let start = T0 + 600_000_000;
        let series: Vec<(f64, u64)> = (1..=30)
            .map(|i| (f64::from(i), if (12..=16).contains(&i) { 0 } else { 1000 }))
            .collect();
        let f = outage_findings(&e, start, start + 30_000_000_000, Some(&series));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "link_outage");
        assert_eq!(
            f[0].message,
            "link a -> b, b -> a down 3.0 s at 11.4 s into the run (12s down): the run moved \
             0 bytes for 5.0 s from 11.0 s (the outage plus TCP's retransmission backoff)"
        );
        assert_eq!(f[0].evidence["zero_bytes_s"], 5.0);
        // Without a series, just the outage; a run after the second down sees it still down.
        let late = T0 + 41_000_000_000;
        let f = outage_findings(&e, late, late + 2_000_000_000, None);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("down for the rest of the run"),
            "{}",
            f[0].message
        );
        assert!(
            f[0].message.contains("1.0 s before the run started"),
            "{}",
            f[0].message
        );
        assert!(outage_findings(&e, T0, T0 + 1_000_000_000, None).is_empty());
    }
}
