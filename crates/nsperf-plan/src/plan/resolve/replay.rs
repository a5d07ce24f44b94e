//! A replay step: a captured NFSv3 or NFSv4 workload replayed from a lab site against the
//! plan's NFS service in another site (an NFSv4 one over NFSv4.1, from ganesha), beside the
//! model at the cell's path between the two (the round trip and narrowest rate of the links
//! crossed there and back). The capture is read at
//! load: an unreadable file, one without an NFS workload to replay, or a version the
//! service does not offer is a plan error.

use nsperf_lab::service::{NfsVersions, Protocol, ServerKind, ServiceConfig};
use nsperf_trace::proto::requests::Protocol as TraceProtocol;

use super::Fields;
use crate::error::PlanError;
use crate::plan::raw::RawStep;
use crate::plan::{ReplayStep, ServiceKind};

pub(super) fn replay(f: &Fields<'_>, s: &RawStep) -> Result<ReplayStep, PlanError> {
    let site = f.site("site", &s.site)?.ok_or_else(|| {
        f.err(
            "site",
            "a replay step needs site = \"SITE\" (the lab site the replayer runs in)",
        )
    })?;
    let name = s.service.as_deref().ok_or_else(|| {
        f.err(
            "service",
            "a replay step needs service = \"NAME\" (a [[service]] serving NFS in another lab site)",
        )
    })?;
    let svc = f
        .ctx
        .services
        .iter()
        .find(|x| x.name == name)
        .ok_or_else(|| f.err("service", format!("no [[service]] named \"{name}\"")))?;
    let ServiceKind::Files(config) = &svc.kind else {
        return Err(f.err("service", format!("\"{name}\" is not a file server")));
    };
    if config.protocol != Protocol::Nfs {
        return Err(f.err(
            "service",
            format!(
                "\"{name}\" serves {}: the replay is of NFS",
                config.protocol
            ),
        ));
    }
    let there = match svc.site.as_deref() {
        Some(sv) if sv != site => sv,
        Some(_) => {
            return Err(f.err(
                "service",
                format!("\"{name}\" runs in the step's own site {site}: the replay crosses the lab's link to another"),
            ));
        }
        None => {
            return Err(f.err(
                "service",
                format!(
                    "\"{name}\" runs on this host's loopback: give it site = \"SITE\" in the lab"
                ),
            ));
        }
    };
    // The model is given the path the replay crosses, there and back, as this cell's lab
    // sets its links: the main link's, or only access links' (one side of a dumbbell).
    let link = f
        .ctx
        .links
        .and_then(|l| l.path(&site, there))
        .ok_or_else(|| f.err("site", format!("no path from {site} to {there} in the lab")))?;
    let window_bytes = match f.size("window", &s.window)? {
        Some(w) if w.0 == 0 => return Err(f.err("window", "0 bytes holds no byte")),
        w => w.map(|w| w.0),
    };
    let path = f
        .str("capture", &s.capture)?
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| {
            f.err(
                "capture",
                "a replay step needs capture = \"FILE\" (pcap or pcapng)",
            )
        })?;
    let capture = crate::plan::service::absolute(std::path::Path::new(&path));
    let (_, _, proto, capture_gaps) = nsperf_trace::replay::script::nfs_replay(&capture)
        .map_err(|e| f.err("capture", format!("{}: {e}", capture.display())))?;
    let v4 = proto == TraceProtocol::Nfs4;
    versions_offered(f, name, config, v4)?;
    Ok(ReplayStep {
        site,
        service: name.to_string(),
        capture,
        capture_gaps,
        window_bytes,
        v4,
        rtt_ms: link.rtt_ms,
        rate_bps: link.rate_bps,
    })
}

/// Whether the service offers the capture's NFS version (`v4`: NFSv4's): the embedded
/// server speaks NFSv3 only, ganesha the versions of its `nfs_versions`.
fn versions_offered(
    f: &Fields<'_>,
    name: &str,
    config: &ServiceConfig,
    v4: bool,
) -> Result<(), PlanError> {
    let versions = config.nfs_versions.unwrap_or(NfsVersions::Both);
    let why = match (v4, config.server) {
        (true, ServerKind::Ganesha) if versions.v4() => return Ok(()),
        (false, _) if versions.v3() => return Ok(()),
        (true, ServerKind::Ganesha) => {
            "offers NFSv3 only (nfs_versions = \"3\"): the capture is NFSv4's".to_string()
        }
        (true, server) => format!(
            "is the {server} server, which speaks NFSv3 only: the capture is NFSv4's (give the service server = \"ganesha\")"
        ),
        (false, _) => {
            "offers NFSv4 only (nfs_versions = \"4\"): the capture is NFSv3's".to_string()
        }
    };
    Err(f.err("service", format!("\"{name}\" {why}")))
}
