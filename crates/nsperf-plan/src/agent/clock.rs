//! An agent's clock against the coordinator's, from probes over the control connection
//! (Cristian's algorithm, as NTP's on-wire exchange without the server's processing time:
//! the agent reads its clock once, between the coordinator's send and receive).
//!
//! For a probe sent at `t1` and answered at `t3` (coordinator's clock) carrying the agent's
//! reading `t2`, the offset `t2 - (t1 + t3) / 2` is wrong by at most half the round trip
//! `(t3 - t1) / 2`, whatever the asymmetry of the path. The probe with the shortest round trip
//! gives the tightest bound, so that one is kept.

use serde::{Deserialize, Serialize};

/// One probe: the coordinator's send and receive times and the agent's reading, ns since the
/// Unix epoch on each side's wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Coordinator's clock when the probe left.
    pub sent_ns: u64,
    /// Agent's clock when it read the probe.
    pub agent_ns: u64,
    /// Coordinator's clock when the echo arrived.
    pub received_ns: u64,
}

/// The agent's clock relative to the coordinator's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// Agent clock minus coordinator clock, ns.
    pub offset_ns: i64,
    /// The offset is right within ± this, ns (half the best probe's round trip).
    pub error_ns: u64,
    /// Probes the estimate was made from.
    pub probes: u32,
}

impl ClockOffset {
    /// The estimate from `samples` (those with the receive before the send are ignored);
    /// `None` without a usable sample.
    pub fn estimate(samples: &[ClockSample]) -> Option<ClockOffset> {
        let best = samples
            .iter()
            .filter(|s| s.received_ns >= s.sent_ns)
            .min_by_key(|s| s.received_ns - s.sent_ns)?;
        let rtt = best.received_ns - best.sent_ns;
        let mid = best.sent_ns as i128 + i128::from(rtt / 2);
        let offset = (best.agent_ns as i128 - mid).clamp(i64::MIN as i128, i64::MAX as i128);
        Some(ClockOffset {
            offset_ns: offset as i64,
            error_ns: rtt.div_ceil(2),
            probes: samples.len() as u32,
        })
    }

    /// A time on the coordinator's clock, read on the agent's.
    pub fn to_agent(&self, coordinator_ns: u64) -> u64 {
        coordinator_ns.saturating_add_signed(self.offset_ns)
    }

    /// A time on the agent's clock, read on the coordinator's.
    pub fn to_coordinator(&self, agent_ns: u64) -> u64 {
        agent_ns.saturating_add_signed(-self.offset_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_round_trip_wins_and_bounds_the_error() {
        // The agent's clock is 5 ms ahead; probes with 2 ms, 200 us and 900 us round trips,
        // the agent reading its clock anywhere within each.
        let ahead = 5_000_000u64;
        let s = [
            ClockSample {
                sent_ns: 1_000_000_000,
                agent_ns: 1_000_000_000 + ahead + 1_900_000,
                received_ns: 1_002_000_000,
            },
            ClockSample {
                sent_ns: 2_000_000_000,
                agent_ns: 2_000_000_000 + ahead + 10_000,
                received_ns: 2_000_200_000,
            },
            ClockSample {
                sent_ns: 3_000_000_000,
                agent_ns: 3_000_000_000 + ahead + 450_000,
                received_ns: 3_000_900_000,
            },
        ];
        let o = ClockOffset::estimate(&s).unwrap();
        assert_eq!(o.error_ns, 100_000);
        assert_eq!(o.probes, 3);
        let wrong = (o.offset_ns - ahead as i64).unsigned_abs();
        assert!(wrong <= o.error_ns, "{o:?}");
        assert_eq!(o.to_coordinator(o.to_agent(123_456_789)), 123_456_789);
    }

    #[test]
    fn no_usable_sample_gives_no_estimate() {
        assert_eq!(ClockOffset::estimate(&[]), None);
        let backwards = ClockSample {
            sent_ns: 10,
            agent_ns: 5,
            received_ns: 9,
        };
        assert_eq!(ClockOffset::estimate(&[backwards]), None);
    }

    #[test]
    fn an_agent_behind_gives_a_negative_offset() {
        let s = ClockSample {
            sent_ns: 1_000_000,
            agent_ns: 400_000,
            received_ns: 1_000_100,
        };
        let o = ClockOffset::estimate(&[s]).unwrap();
        assert_eq!(o.offset_ns, 400_000 - 1_000_050);
        assert_eq!(o.to_agent(0), 0, "saturates at the epoch");
    }
}
