//! Fault schedules: timed link changes read from a file, one event per line.
//!
//! ```text
//! # time   action  flags (the same as `nsperf lab set`)
//! 0s       set     --rate 45mbit --rtt 50ms
//! 5s       down                      # partition: every direction drops everything
//! 7s       up
//! 10s      set     --loss 20%        # a loss burst ...
//! 10.5s    set     --loss 0          # ... of 500 ms
//! 12s      down    --from a          # one direction only
//! ```
//!
//! Times are offsets from the start of the schedule (when `lab up` or `lab set --schedule`
//! ran) and must not decrease. The parser is strict: every error names the line and what is
//! wrong, and no input makes it panic (it is fuzzed: `fuzz/fuzz_targets/lab_schedule.rs`).

use serde::{Deserialize, Serialize};

use crate::config::{LinkChange, parse_delay};
use crate::error::LabError;

/// Most events a schedule may hold.
pub const MAX_EVENTS: usize = 100_000;
/// Longest line accepted.
pub const MAX_LINE: usize = 4096;

/// One timed change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduledEvent {
    /// Offset from the start of the schedule, nanoseconds.
    pub at_ns: u64,
    /// What changes.
    pub change: LinkChange,
    /// The line as written (without comment), for the event log.
    pub text: String,
}

/// A parsed schedule: events in time order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// The events, times non-decreasing.
    pub events: Vec<ScheduledEvent>,
}

impl Schedule {
    /// Parses schedule bytes; `file` names the source in error messages.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Schedule, LabError> {
        let err = |line: usize, message: String| LabError::Schedule {
            file: file.to_string(),
            line,
            message,
        };
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let line = bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            err(line, "not UTF-8 text".into())
        })?;
        let mut events = Vec::new();
        let mut last_ns = 0u64;
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            if raw.len() > MAX_LINE {
                return Err(err(n, format!("line longer than {MAX_LINE} bytes")));
            }
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if events.len() >= MAX_EVENTS {
                return Err(err(n, format!("more than {MAX_EVENTS} events")));
            }
            let mut tokens = line.split_whitespace();
            let time = tokens.next().unwrap_or("");
            let at_ns = parse_delay("time", time).map_err(|e| err(n, e.to_string()))?;
            if at_ns < last_ns {
                return Err(err(
                    n,
                    format!("time {time} is earlier than the event before it"),
                ));
            }
            last_ns = at_ns;
            let action = tokens.next().ok_or_else(|| {
                err(
                    n,
                    "expected an action (set, down, up) after the time".into(),
                )
            })?;
            let mut change = LinkChange::default();
            let rest: Vec<&str> = tokens.collect();
            parse_flags(&rest, &mut change).map_err(|m| err(n, m))?;
            match action {
                "set" => {
                    if change.is_empty() {
                        return Err(err(n, "`set` needs at least one link flag".into()));
                    }
                    if change.up.is_some() {
                        return Err(err(n, "use the `up`/`down` actions".into()));
                    }
                }
                "down" | "up" => {
                    if !change.is_empty() {
                        return Err(err(
                            n,
                            format!("`{action}` takes only --link, --from and --to"),
                        ));
                    }
                    change.up = Some(action == "up");
                }
                other => {
                    return Err(err(
                        n,
                        format!("unknown action '{other}' (use set, down or up)"),
                    ));
                }
            }
            events.push(ScheduledEvent {
                at_ns,
                change,
                text: line.to_string(),
            });
        }
        Ok(Schedule { events })
    }
}

fn parse_flags(tokens: &[&str], change: &mut LinkChange) -> Result<(), String> {
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        let Some(flag) = t.strip_prefix("--") else {
            return Err(format!("expected a flag such as --rate, found '{t}'"));
        };
        let (name, inline) = match flag.split_once('=') {
            Some((a, b)) => (a, Some(b)),
            None => (flag, None),
        };
        let value = if LinkChange::flag_takes_value(name) {
            match inline {
                Some(v) => Some(v),
                None => {
                    i += 1;
                    Some(
                        *tokens
                            .get(i)
                            .ok_or_else(|| format!("--{name} needs a value"))?,
                    )
                }
            }
        } else {
            if inline.is_some() {
                return Err(format!("--{name} takes no value"));
            }
            None
        };
        if name == "up" {
            return Err("unknown link flag --up (use the `up`/`down` actions)".into());
        }
        change.set_flag(name, value).map_err(|e| e.to_string())?;
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn parses_the_documented_example() {
        let s = Schedule::parse(
            "t",
            b"# a comment\n0s set --rate 45mbit --rtt 50ms\n5s down\n7s up # back\n\
              10s set --loss 20%\n10.5s set --loss=0\n12s down --from a\n",
        )
        .unwrap();
        assert_eq!(s.events.len(), 6);
        assert_eq!(s.events[0].change.rate_bps, Some(45e6));
        assert_eq!(s.events[0].change.delay_ns, Some(25_000_000));
        assert_eq!(s.events[1].at_ns, 5_000_000_000);
        assert_eq!(s.events[1].change.up, Some(false));
        assert_eq!(s.events[2].change.up, Some(true));
        assert_eq!(s.events[4].at_ns, 10_500_000_000);
        assert_eq!(s.events[5].change.from.as_deref(), Some("a"));
        assert_eq!(s.events[2].text, "7s up");
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&[u8], &str)] = &[
            (b"5s\n", "line 1: expected an action"),
            (b"\n5s explode\n", "line 2: unknown action 'explode'"),
            (b"soon down\n", "line 1: invalid time 'soon'"),
            (b"5s down\n4s up\n", "line 2: time 4s is earlier"),
            (b"1s set\n", "line 1: `set` needs at least one"),
            (b"1s set --rate\n", "line 1: --rate needs a value"),
            (b"1s set rate 5\n", "line 1: expected a flag"),
            (b"1s set --speed 5\n", "unknown link flag"),
            (
                b"1s down --rate 1g\n",
                "`down` takes only --link, --from and --to",
            ),
            (b"1s set --loss 5\n", "write a percentage"),
            (b"\xff\n", "line 1: not UTF-8"),
        ];
        for (input, want) in cases {
            let e = Schedule::parse("f.sched", input).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should contain {want:?}");
            assert!(e.starts_with("schedule f.sched, line "), "{e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn random_and_truncated_bytes_never_panic() {
        let good =
            b"0s set --rate 45mbit --rtt 50ms --queue 64k --jitter 1ms --jitter-dist pareto\n\
                     1s down --from a --to b\n2s up\n3s set --loss ge:1%,30%,90%,1% --reorder 1%\n";
        for cut in 0..good.len() {
            let _ = Schedule::parse("t", &good[..cut]);
        }
        let mut rng = Rng::seeded(0x5eed);
        let alphabet = b"0123456789.smu% -#\nsetdownup--ratedelayloss:ge,k";
        for round in 0..20_000 {
            let len = rng.below(120) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    if round % 2 == 0 {
                        rng.next_u64() as u8
                    } else {
                        alphabet[rng.below(alphabet.len() as u64) as usize]
                    }
                })
                .collect();
            let _ = Schedule::parse("t", &bytes);
            // Mutations of a good file.
            let mut m = good.to_vec();
            for _ in 0..3 {
                let i = rng.below(m.len() as u64) as usize;
                m[i] = rng.next_u64() as u8;
            }
            let _ = Schedule::parse("t", &m);
        }
    }
}
