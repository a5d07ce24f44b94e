//! The path between two sites of a running lab, as its links are configured now: what
//! `nsperf doctor` and `nsperf io` compare a measured rate with.

use crate::error::{LabError, Result};
use crate::lab::stats;
use crate::netns;
use crate::state::LabState;
use crate::stats::LabStats;
use crate::topology::Layout;

/// The path between two sites of a running lab: what its links are configured to carry.
#[derive(Debug, Clone, PartialEq)]
pub struct SitePath {
    /// The lab.
    pub lab: String,
    /// The site the path starts from (the client's).
    pub from: String,
    /// The site it goes to (the server's).
    pub to: String,
    /// The lowest configured rate of the directions the path crosses, either way (bit/s of
    /// wire bytes); `None` when no direction of it has a rate (unlimited).
    pub rate_bps: Option<f64>,
}

/// The lowest configured rate on the route between sites `a` and `b` of `layout`, both
/// directions (a file transfer's data goes one way, its requests and acknowledgements the
/// other); `None` when none of them is rate-limited. `stats` are the emulator's directions,
/// in the layout's order.
pub fn route_rate_bps(layout: &Layout, stats: &LabStats, a: usize, b: usize) -> Option<f64> {
    [layout.route(a, b), layout.route(b, a)]
        .iter()
        .flat_map(|r| r.hops().iter().copied())
        .filter_map(|d| stats.directions.get(usize::from(d))?.params.rate_bps)
        .reduce(f64::min)
}

/// The path from site `from` of lab `state` to site `to`, with the rates the emulator has
/// now.
pub fn site_path(state: &LabState, from: &str, to: &str) -> Result<SitePath> {
    let names: Vec<String> = state.sites.iter().map(|s| s.name.clone()).collect();
    let layout = Layout::new(&state.topology, &names)?;
    let index = |s: &str| {
        names
            .iter()
            .position(|n| n == s)
            .ok_or_else(|| LabError::Usage(format!("lab '{}' has no site '{s}'", state.name)))
    };
    let (a, b) = (index(from)?, index(to)?);
    let stats = stats(&state.name)?;
    Ok(SitePath {
        lab: state.name.clone(),
        from: from.to_string(),
        to: to.to_string(),
        rate_bps: route_rate_bps(&layout, &stats, a, b),
    })
}

/// When the calling thread runs in a site of a lab and `addr` is another site of that lab:
/// the path there. `None` otherwise (not in a lab, an address outside it, the lab's
/// emulator not answering).
pub fn path_from_here(addr: std::net::IpAddr) -> Option<SitePath> {
    LabState::list_names().into_iter().find_map(|n| {
        let state = LabState::load(&n).ok()?;
        let here = state.sites.iter().find(|s| netns::thread_is_in(&s.netns))?;
        let there = state
            .sites
            .iter()
            .find(|s| std::net::IpAddr::V4(s.addr) == addr && s.name != here.name)?;
        site_path(&state, &here.name, &there.name).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LinkParams;
    use crate::stats::DirectionStats;
    use crate::topology::Topology;

    fn stats(layout: &Layout, rates: &[Option<f64>]) -> LabStats {
        LabStats {
            uptime_s: 1.0,
            topology: layout.topology.clone(),
            links: layout.links.clone(),
            directions: layout
                .directions
                .iter()
                .zip(rates)
                .map(|(d, &rate_bps)| DirectionStats {
                    link: layout.links[d.link].name.clone(),
                    from: d.from.clone(),
                    to: d.to.clone(),
                    params: LinkParams {
                        rate_bps,
                        ..LinkParams::default()
                    },
                    counters: Default::default(),
                    queue_packets: 0,
                    queue_bytes: 0,
                })
                .collect(),
            queue_series: Vec::new(),
            events: Vec::new(),
            unroutable_packets: 0,
            write_errors: 0,
            overrun_packets: 0,
            held_bytes: 0,
            memory_limit_bytes: 0,
        }
    }

    #[test]
    fn a_path_carries_the_lowest_configured_rate_of_its_directions() {
        let sites: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let mesh = Layout::new(&Topology::Mesh, &sites).unwrap();
        // a-b 1 Gbit/s one way, 100 Mbit/s back; a-c and b-c unlimited.
        let mut rates = vec![None; mesh.directions.len()];
        rates[0] = Some(1e9);
        rates[1] = Some(100e6);
        let s = stats(&mesh, &rates);
        assert_eq!(route_rate_bps(&mesh, &s, 0, 1), Some(100e6));
        assert_eq!(route_rate_bps(&mesh, &s, 1, 0), Some(100e6));
        assert_eq!(route_rate_bps(&mesh, &s, 0, 2), None);
        // A star: the client's access link and the server's port, the lower of them.
        let star = Layout::new(&Topology::Star { server: None }, &sites).unwrap();
        let rates: Vec<Option<f64>> = (0..star.directions.len())
            .map(|d| Some(if d < 2 { 45e6 } else { 1e9 }))
            .collect();
        let s = stats(&star, &rates);
        assert_eq!(route_rate_bps(&star, &s, 2, 0), Some(45e6));
        assert_eq!(route_rate_bps(&star, &s, 1, 2), Some(1e9));
    }
}
