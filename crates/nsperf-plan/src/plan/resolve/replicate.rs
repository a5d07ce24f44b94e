//! An io step's `replicate`: the mirror's settings as the engine takes them, checked against
//! the lab (the peer a site across its link, the step's own site the writing side), and the
//! mirror peer the runner starts in that site.

use nsperf_io::RunConfig;
use nsperf_io::mirror::{Protocol, Replicate};
use nsperf_lab::topology::{Layout, LinkKind};

use super::Fields;
use crate::error::PlanError;
use crate::plan::PeerUse;
use crate::plan::raw::RawReplicate;

/// An io step's `replicate`: its writes mirrored to the plan's peer in another lab site,
/// which the runner starts there (`nsperf io peer`). The mirror's settings as the engine
/// takes them (the peer's address with port 0: the running peer's port is put in when the
/// step runs), and the peer the step uses.
pub(super) fn replicate(
    f: &Fields<'_>,
    r: &RawReplicate,
    site: Option<&str>,
    config: &RunConfig,
) -> Result<(Replicate, PeerUse), PlanError> {
    let err = |m: String| f.err("replicate", m);
    let peer_field = Some(r.peer.clone());
    let Some(peer) = f.site("replicate.peer", &peer_field)? else {
        return Err(err("peer: empty".into()));
    };
    let Some(me) = site else {
        return Err(err(format!(
            "the mirror crosses the lab's link from the step's site to peer site {peer}: the step needs site = \"SITE\" (the writing side)"
        )));
    };
    if me == peer {
        return Err(err(format!(
            "peer \"{peer}\" is the step's own site: the mirror must cross the lab's link to another site"
        )));
    }
    let nsperf_io::Target::Dir { path } = &config.target else {
        return Err(err(format!(
            "mirrors the files of a local directory, not {}",
            config.target
        )));
    };
    if !config.workload.is_block() {
        return Err(err(format!(
            "mirrors the record workloads (seqwrite, randwrite, randrw, …), not {}",
            config.workload
        )));
    }
    let protocol = f
        .parsed("replicate.protocol", &r.protocol, str::parse::<Protocol>)?
        .unwrap_or(Protocol::C);
    let max_in_flight_bytes = f
        .size("replicate.in_flight", &r.in_flight)?
        .map_or(nsperf_io::mirror::DEFAULT_MAX_IN_FLIGHT, |b| b.0);
    if max_in_flight_bytes == 0 {
        return Err(err("in_flight: must be at least 1 byte".into()));
    }
    let index = |s: &str| {
        f.lab
            .and_then(|l| l.sites.iter().position(|x| *x == s))
            .unwrap_or(0)
    };
    let crosses_link = match f.lab {
        Some(lab) => {
            let layout =
                Layout::new(&lab.shape.topology, &lab.sites).map_err(|e| err(e.to_string()))?;
            let hops = layout.route(index(me), index(&peer));
            hops.hops().iter().any(|&d| {
                layout.links[layout.directions[usize::from(d)].link].kind != LinkKind::Access
            })
        }
        None => true,
    };
    let dir = match f.str("replicate.dir", &r.dir)? {
        Some(d) if d.trim().is_empty() => return Err(err("dir: empty".into())),
        Some(d) => crate::plan::service::absolute(std::path::Path::new(&d)),
        None => crate::plan::service::absolute(path),
    };
    let rep = Replicate {
        peer: format!("{}:0", nsperf_lab::site_addr(index(&peer))),
        protocol,
        max_in_flight_bytes,
        check: f.bool("replicate.check", &r.check)?,
        congestion: f
            .str("replicate.congestion", &r.congestion)?
            .filter(|c| !c.is_empty()),
        compare: f.bool("replicate.compare", &r.compare)?,
    };
    Ok((
        rep,
        PeerUse {
            name: format!("mirror.{peer}"),
            site: peer,
            dir,
            crosses_link,
        },
    ))
}
