//! Link events: every change of a running lab's links (a `lab set`, a schedule line, a
//! partition and its end) with its time on both the emulator's clock and the Unix clock,
//! so a result store can lay them over the time series of the runs they overlapped. The
//! emulator appends each as one JSON line to `/run/nsperf/labs/NAME/events.jsonl`
//! ([`read`]); [`outages`] pairs downs with ups, [`during`] picks the changes a run
//! overlapped, and [`outage_findings`] names the outages a run crossed, with the time the run
//! moved no data, as its own interval series has it.

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
    /// The links it changed whole (both directions), by name (`a-b`, `wan`, a site's
    /// access link).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
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
    /// The links that were down whole (both directions), by name.
    pub links: Vec<String>,
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
                // The event's whole links, when every direction it took down was up.
                let links = if down.len() == e.directions.len() {
                    e.links.clone()
                } else {
                    Vec::new()
                };
                out.push(Outage {
                    directions: down.clone(),
                    links,
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

/// The link changes a run from `start_unix_ns` to `end_unix_ns` overlapped, in time
/// order: every down, up and change within it, and a down still in force when it started;
/// each down with the end of the outage it began (`None`: not over by the run's end, or it
/// took down only directions already down).
pub fn during(
    events: &[LinkEvent],
    start_unix_ns: u64,
    end_unix_ns: u64,
) -> Vec<(&LinkEvent, Option<u64>)> {
    let outages = outages(events);
    let outage_of = |e: &LinkEvent| {
        outages
            .iter()
            .find(|o| o.down_unix_ns == e.t_unix_ns && o.text == e.text)
    };
    events
        .iter()
        .filter(|e| e.kind != EventKind::Note)
        .filter_map(|e| {
            let o = (e.kind == EventKind::Down).then(|| outage_of(e)).flatten();
            let up = o.and_then(|o| o.up_unix_ns);
            let within = (start_unix_ns..=end_unix_ns).contains(&e.t_unix_ns);
            let in_force =
                e.t_unix_ns < start_unix_ns && o.is_some() && up.is_none_or(|u| u > start_unix_ns);
            (within || in_force).then_some((e, up.filter(|&u| u <= end_unix_ns)))
        })
        .collect()
}

/// One interval of a run's series: start and length in seconds from the run's start, and
/// what moved in it (only whether it is zero matters).
pub type Interval = (f64, f64, f64);

/// What a run moved, for the findings' sentences: its intervals, and the cause to name
/// when it stayed silent after the link was back (`retransmission backoff` for TCP).
#[derive(Debug, Clone, Copy)]
pub struct RunSeries<'a> {
    /// The intervals, in time order.
    pub intervals: &'a [Interval],
    /// What a silence after the outage is, when the kind of traffic says.
    pub backoff_cause: Option<&'a str>,
}

/// Findings for a run from `start_unix_ns` to `end_unix_ns`: one `link_outage` per outage
/// the run crossed ("link a-b partitioned 3.0 s at 12.4 s into the run"); with the run's
/// series, the longest stretch of empty intervals from the outage on, as the series has it
/// (so the figures never contradict the intervals beside them), and how much of it came
/// after the link was back.
pub fn outage_findings(
    events: &[LinkEvent],
    start_unix_ns: u64,
    end_unix_ns: u64,
    series: Option<RunSeries<'_>>,
) -> Vec<Finding> {
    let mut v = Vec::new();
    for o in outages(events) {
        let up = o.up_unix_ns.unwrap_or(u64::MAX);
        if o.down_unix_ns >= end_unix_ns || up <= start_unix_ns {
            continue;
        }
        let rel = |t: u64| (t as f64 - start_unix_ns as f64) / 1e9;
        let at_s = rel(o.down_unix_ns);
        let len_s = o.duration_ns(end_unix_ns) as f64 / 1e9;
        let ended = o.up_unix_ns.filter(|&u| u <= end_unix_ns);
        let what = match o.links.is_empty() {
            false => format!("link {} partitioned", o.links.join(", ")),
            true => format!("link {} down", o.directions.join(", ")),
        };
        let what = match ended {
            Some(_) => format!("{what} {len_s:.1} s"),
            None => format!("{what} (still at the run's end, {len_s:.1} s in all)"),
        };
        let when = if at_s >= 0.0 {
            format!("at {at_s:.1} s")
        } else {
            format!("from {:.1} s before the run started", -at_s)
        };
        let mut msg = format!("{what} {when} ({})", o.text);
        let mut f = Finding::new("link_outage", Severity::Warning, "")
            .with("outage_start_s", at_s)
            .with("outage_s", len_s);
        if let Some(series) = series {
            let up_s = ended.map(rel);
            match zero_stretch(series.intervals, at_s.max(0.0), up_s.unwrap_or(f64::MAX)) {
                Some((from, to)) => {
                    msg.push_str(&format!(
                        ": 0 bytes moved for {:.1} s ({from:.1}-{to:.1} s)",
                        to - from
                    ));
                    f = f
                        .with("zero_bytes_s", to - from)
                        .with("zero_bytes_from_s", from);
                    if let Some(u) = up_s.filter(|&u| to > u + 1e-9) {
                        msg.push_str(&format!(", {:.1} s of it after the link was back", to - u));
                        if let Some(cause) = series.backoff_cause {
                            msg.push_str(&format!(" ({cause})"));
                        }
                        f = f.with("zero_bytes_after_up_s", to - u);
                    }
                }
                None => msg.push_str(&format!(
                    ": no interval of the run was empty ({:.1} s intervals)",
                    series.intervals.first().map_or(0.0, |i| i.1)
                )),
            }
        }
        f.message = msg;
        v.push(f);
    }
    v
}

/// The longest stretch of consecutive empty intervals that overlaps the outage from
/// `down_s` to `up_s` (seconds from the run's start): (start, end).
fn zero_stretch(series: &[Interval], down_s: f64, up_s: f64) -> Option<(f64, f64)> {
    let mut best: Option<(f64, f64)> = None;
    let mut cur: Option<(f64, f64)> = None;
    for &(start, len, value) in series {
        let end = start + len;
        // Intervals follow each other within a few per cent of their length (an engine's
        // interval timer is not exact): such a gap does not break a stretch.
        let joined = |e: f64| (start - e).abs() <= (0.05 * len).max(1e-3);
        cur = match cur {
            _ if value != 0.0 => None,
            Some((s, e)) if joined(e) => Some((s, end)),
            _ => Some((start, end)),
        };
        if let Some((s, e)) = cur
            && e > down_s
            && s < up_s.max(down_s) + 1e-9
            && best.is_none_or(|b| e - s > b.1 - b.0)
        {
            best = Some((s, e));
        }
    }
    best
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
            links: Vec::new(),
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
        let mut down = ev(12.0, EventKind::Down, &["a -> b", "b -> a"], "12s down");
        down.links = vec!["a-b".into()];
        let e = [
            down,
            ev(15.0, EventKind::Up, &["a -> b", "b -> a"], "15s up"),
            ev(40.0, EventKind::Down, &["a -> b"], "40s down --from a"),
        ];
        // A run from 0.6 s to 30.6 s: sees the first, not the second. Its intervals of 1 s
        // are empty from 12 s to 17 s (on its clock): the outage 11.4-14.4 s and 2.6 s more.
        let start = T0 + 600_000_000;
        // Starts drift by 10 µs per interval, as an engine's timer does.
        let series: Vec<Interval> = (0..30)
            .map(|i| {
                let v = if (12..17).contains(&i) { 0.0 } else { 1e6 };
                (f64::from(i) * 1.00001, 1.0, v)
            })
            .collect();
        let run = RunSeries {
            intervals: &series,
            backoff_cause: Some("TCP's retransmission backoff"),
        };
        let f = outage_findings(&e, start, start + 30_000_000_000, Some(run));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "link_outage");
        assert_eq!(
            f[0].message,
            "link a-b partitioned 3.0 s at 11.4 s (12s down): 0 bytes moved for 5.0 s \
             (12.0-17.0 s), 2.6 s of it after the link was back (TCP's retransmission backoff)"
        );
        assert!((f[0].evidence["zero_bytes_s"] - 5.00004).abs() < 1e-9);
        // The figures are the series': every interval of the stretch is empty.
        assert!(
            series
                .iter()
                .filter(|i| i.0 >= 12.0 && i.0 < 17.0)
                .all(|i| i.2 == 0.0)
        );
        assert!((f[0].evidence["zero_bytes_from_s"] - 12.00012).abs() < 1e-9);
        // An outage inside one interval leaves none empty: said so, not invented.
        let short: Vec<Interval> = (0..30).map(|i| (f64::from(i), 1.0, 5.0)).collect();
        let run = RunSeries {
            intervals: &short,
            backoff_cause: None,
        };
        let f = outage_findings(&e, start, start + 30_000_000_000, Some(run));
        assert!(
            f[0].message
                .ends_with(": no interval of the run was empty (1.0 s intervals)"),
            "{}",
            f[0].message
        );
        // Without a series, just the outage; a run after the second down sees it still down.
        let late = T0 + 41_000_000_000;
        let f = outage_findings(&e, late, late + 2_000_000_000, None);
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].message,
            "link a -> b down (still at the run's end, 3.0 s in all) from 1.0 s before the \
             run started (40s down --from a)"
        );
        assert!(outage_findings(&e, T0, T0 + 1_000_000_000, None).is_empty());
    }

    #[test]
    fn a_run_overlaps_changes_within_it_and_downs_still_in_force() {
        let e = [
            ev(1.0, EventKind::Note, &[], "emulator started"),
            ev(2.0, EventKind::Down, &["a -> b"], "2s down --from a"),
            ev(3.0, EventKind::Change, &["a -> b"], "--loss 1%"),
            ev(6.0, EventKind::Up, &["a -> b"], "6s up --from a"),
            ev(7.0, EventKind::Change, &["a -> b"], "--loss 0"),
        ];
        let at = |s: f64| T0 + (s * 1e9) as u64;
        // A run from 4 s to 5 s: the down still in force, not over by its end.
        let d = during(&e, at(4.0), at(5.0));
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].0.text.as_str(), d[0].1), ("2s down --from a", None));
        // From 2.5 s to 6.5 s: the down (over at 6 s), the change, the up.
        let d = during(&e, at(2.5), at(6.5));
        let texts: Vec<&str> = d.iter().map(|x| x.0.text.as_str()).collect();
        assert_eq!(texts, ["2s down --from a", "--loss 1%", "6s up --from a"]);
        assert_eq!(d[0].1, Some(at(6.0)));
        assert!(during(&e, at(7.5), at(9.0)).is_empty());
    }
}
