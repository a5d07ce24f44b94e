//! What `lab stats` reports: per link and per direction (each direction is one queue), the
//! parameters, counters and queue occupancy, the queue series and the events.

use serde::{Deserialize, Serialize};

use crate::config::LinkParams;
use crate::events::LinkEvent;
use crate::model::DirectionCounters;
use crate::topology::{Link, Topology};

/// Queue occupancy of every direction at one time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueSample {
    /// Seconds since the emulator started.
    pub t_s: f64,
    /// Packets queued per direction, in the order of [`LabStats::directions`].
    pub queue_packets: Vec<u64>,
    /// Bytes queued per direction.
    pub queue_bytes: Vec<u64>,
}

/// Statistics of one direction of a link (one queue).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// The link it belongs to.
    #[serde(default)]
    pub link: String,
    /// Where it starts (a site, or a switch of a star or dumbbell).
    pub from: String,
    /// Where it ends.
    pub to: String,
    /// Current parameters.
    pub params: LinkParams,
    /// Counters so far.
    pub counters: DirectionCounters,
    /// Packets at the bottleneck now.
    pub queue_packets: u64,
    /// Bytes at the bottleneck now.
    pub queue_bytes: u64,
}

/// Everything `lab stats` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabStats {
    /// Seconds since the emulator started.
    pub uptime_s: f64,
    /// The lab's shape.
    #[serde(default)]
    pub topology: Topology,
    /// Its links; link `l` has directions `2l` and `2l + 1` in `directions`.
    #[serde(default)]
    pub links: Vec<Link>,
    /// Every direction, link by link.
    pub directions: Vec<DirectionStats>,
    /// Queue occupancy over the last minute, every 100 ms.
    pub queue_series: Vec<QueueSample>,
    /// Changes applied, with their times.
    pub events: Vec<LinkEvent>,
    /// Packets that had no destination site (IPv6, broadcast), all sites together.
    pub unroutable_packets: u64,
    /// Writes to a TUN device that failed.
    pub write_errors: u64,
    /// Packets dropped before the link because the delay lines held the whole memory
    /// budget (raise `lab up --memory`).
    #[serde(default)]
    pub overrun_packets: u64,
    /// Bytes of packet buffers the delay lines hold now.
    #[serde(default)]
    pub held_bytes: u64,
    /// The delay lines' memory budget.
    #[serde(default)]
    pub memory_limit_bytes: u64,
}

/// One direction of a lab's links over one run: its parameters at the end and what its
/// counters grew by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionOverRun {
    /// The link it belongs to.
    pub link: String,
    /// Where it starts.
    pub from: String,
    /// Where it ends.
    pub to: String,
    /// Its parameters when the run ended.
    pub params: LinkParams,
    /// The growth of its counters over the run (the maxima are those since the lab began).
    pub counters: DirectionCounters,
}

/// A lab's links over one run, what a result store keeps beside the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinksOverRun {
    /// The lab's shape.
    pub topology: Topology,
    /// Every direction, link by link.
    pub directions: Vec<DirectionOverRun>,
    /// Packets dropped before the link over the run (the delay lines were full).
    pub overrun_packets: u64,
}

impl LinksOverRun {
    /// The lab's links between two reports of its statistics (`before` taken as the run
    /// started, `after` as it ended).
    pub fn between(before: &LabStats, after: &LabStats) -> LinksOverRun {
        let directions = after
            .directions
            .iter()
            .enumerate()
            .map(|(i, d)| DirectionOverRun {
                link: d.link.clone(),
                from: d.from.clone(),
                to: d.to.clone(),
                params: d.params,
                counters: match before.directions.get(i) {
                    Some(b) => crate::capture::counters_delta(&b.counters, &d.counters),
                    None => d.counters,
                },
            })
            .collect();
        LinksOverRun {
            topology: after.topology.clone(),
            directions,
            overrun_packets: after.overrun_packets.saturating_sub(before.overrun_packets),
        }
    }
}
