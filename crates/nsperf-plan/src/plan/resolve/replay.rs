//! A replay step: a captured NFSv3 workload replayed from a lab site against the plan's NFS
//! service in another site, beside the model at the cell's path between the two (the round
//! trip and narrowest rate of the links crossed there and back). The capture is read at
//! load (an unreadable file, or one without an NFSv3 workload to replay, is a plan error).

use nsperf_lab::service::Protocol;

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
                "\"{name}\" serves {}: the replay is of NFSv3",
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
    nsperf_trace::replay::script::nfs3_replay(&capture)
        .map_err(|e| f.err("capture", format!("{}: {e}", capture.display())))?;
    Ok(ReplayStep {
        site,
        service: name.to_string(),
        capture,
        window_bytes,
        rtt_ms: link.rtt_ms,
        rate_bps: link.rate_bps,
    })
}
