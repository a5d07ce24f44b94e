//! Where a step's packet capture is taken: the emulated link its packets cross (the lab's
//! bottleneck on their path) or a site, from the step's and its target's sites.

use nsperf_io::RunConfig;
use nsperf_lab::topology::{Layout, LinkKind};

use super::Fields;
use crate::error::PlanError;
use crate::plan::raw::RawStep;
use crate::plan::{CapturePoint, LabSpec, Target};

/// Where a network step's capture is taken: `"link"` is the emulated link its packets
/// cross (the lab's bottleneck on their path), any other value a site (tcpdump there).
pub(super) fn capture_point(
    f: &Fields<'_>,
    s: &RawStep,
    target: &Target,
) -> Result<Option<CapturePoint>, PlanError> {
    if s.capture.is_none() {
        return Ok(None);
    }
    let Target::Lab { client, server, .. } = target else {
        return Err(f.err(
            "capture",
            "captures are taken in a lab site or on its link (\"link\")",
        ));
    };
    capture_between(f, s, client, server)
}

/// Where an io step's capture is taken: as a network step's, its client being the step's
/// site and its server the site that serves its target — the plan service's, or the lab
/// site whose address its `nfs://` or `smb://` URL names.
pub(super) fn io_capture_point(
    f: &Fields<'_>,
    s: &RawStep,
    site: Option<&str>,
    config: &RunConfig,
    service: Option<&crate::plan::ServiceUse>,
) -> Result<Option<CapturePoint>, PlanError> {
    if s.capture.is_none() {
        return Ok(None);
    }
    let server = match service {
        Some(u) => f
            .ctx
            .services
            .iter()
            .find(|x| x.name == u.name)
            .and_then(|x| x.site.clone()),
        None => url_site(f.lab, &config.target),
    };
    match (site, server) {
        (Some(client), Some(server)) => capture_between(f, s, client, &server),
        _ => Err(f.err(
            "capture",
            "an io step's capture is taken in a lab: the step needs site = \"CLIENT SITE\" and a target served in a lab site (a [[service]] with a site, or an nfs:// or smb:// URL to a site's address)",
        )),
    }
}

/// The lab site whose address an `nfs://` or `smb://` target names.
fn url_site(lab: Option<&LabSpec>, target: &nsperf_io::Target) -> Option<String> {
    let host = match target {
        nsperf_io::Target::Nfs { url } => &url.host,
        nsperf_io::Target::Smb { url, .. } => &url.host,
        _ => return None,
    };
    let addr: std::net::Ipv4Addr = host.parse().ok()?;
    let sites = &lab?.sites;
    (0..sites.len())
        .find(|&i| nsperf_lab::site_addr(i) == addr)
        .map(|i| sites[i].clone())
}

/// The capture point `capture` names for packets between sites `client` and `server`.
fn capture_between(
    f: &Fields<'_>,
    s: &RawStep,
    client: &str,
    server: &str,
) -> Result<Option<CapturePoint>, PlanError> {
    let (Some(at), Some(lab)) = (f.str("capture", &s.capture)?, f.lab) else {
        return Err(f.err(
            "capture",
            "captures are taken in a lab site or on its link (\"link\")",
        ));
    };
    if at != "link" {
        return Ok(f.site("capture", &s.capture)?.map(CapturePoint::Site));
    }
    let layout = Layout::new(&lab.shape.topology, &lab.sites)
        .map_err(|e| f.err("capture", e.to_string()))?;
    let index = |s: &str| lab.sites.iter().position(|x| x == s).unwrap_or(0);
    let (c, v) = (index(client), index(server));
    // The bottleneck of the path: the mesh's pair link, the star's port, the dumbbell's WAN
    // (or, within one group, the server's access link).
    let hops = layout.route(c, v);
    let dir = hops
        .hops()
        .iter()
        .map(|&d| usize::from(d))
        .find(|&d| {
            let kind = layout.links[layout.directions[d].link].kind;
            kind != LinkKind::Access
        })
        .or_else(|| hops.hops().last().map(|&d| usize::from(d)))
        .ok_or_else(|| f.err("capture", "the client and server share no link"))?;
    Ok(Some(CapturePoint::Link(
        layout.links[layout.directions[dir].link].name.clone(),
    )))
}
