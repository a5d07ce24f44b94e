//! Where the file server of a target runs, when nsperf can run there too: a lab site whose
//! recorded service (`nsperf lab serve`) offers the target's address and path. Then the
//! storage test runs on the served directory in that site, the network test against an
//! nsperf server started in that site, and the server's processes are watched for CPU.

use std::net::IpAddr;
use std::path::PathBuf;

use nsperf_core::process::ProcessId;
use nsperf_lab::service::Protocol;
use nsperf_lab::service::ServiceRecord;
use nsperf_lab::state::{LabState, SiteState};
use nsperf_nfs::NfsUrl;
use nsperf_smb::SmbUrl;

use crate::config::ServerTarget;
use crate::error::DoctorError;

/// A file server running in a lab site.
#[derive(Debug, Clone)]
pub struct LabServer {
    /// The lab.
    pub lab: LabState,
    /// The site the server runs in.
    pub site: SiteState,
    /// Its service record.
    pub service: ServiceRecord,
    /// The target's directory on the server's file system (sites share this host's).
    pub dir: PathBuf,
    /// The site the client side runs from: `None` when `doctor` already runs in one of the
    /// lab's sites (`lab exec`), else the site to enter.
    pub client_site: Option<SiteState>,
}

impl LabServer {
    /// The server's processes now (everything in the site's namespace).
    pub fn processes(&self) -> Vec<ProcessId> {
        nsperf_lab::netns::processes_in(&self.site.netns)
    }
}

fn host_ip(host: &str) -> Option<IpAddr> {
    host.parse().ok()
}

/// The target's directory on the server's file system when `rec` serves `target`: the same
/// address and protocol, and (NFS) a directory the target's path is in or (SMB) the same
/// share.
fn serves(rec: &ServiceRecord, target: &ServerTarget) -> Option<PathBuf> {
    if !same_server(rec, target) {
        return None;
    }
    let same_host = |h: &str| host_ip(h).is_some() && host_ip(h) == host_ip(target.host());
    match (rec.protocol, target) {
        (Protocol::Nfs, ServerTarget::Nfs(url)) => {
            let r = rec.url.parse::<NfsUrl>().ok()?;
            let p = std::path::Path::new(&url.path);
            (same_host(&r.host) && p.starts_with(&rec.dir)).then(|| p.to_path_buf())
        }
        (Protocol::Smb, ServerTarget::Smb { url, .. }) => {
            let r = rec.url.parse::<SmbUrl>().ok()?;
            (same_host(&r.host) && r.share.eq_ignore_ascii_case(&url.share))
                .then(|| rec.dir.join(&url.path))
        }
        _ => None,
    }
}

/// True when `rec` is a server of the target's protocol at the target's address (whatever
/// directory or share it offers).
fn same_server(rec: &ServiceRecord, target: &ServerTarget) -> bool {
    let host = match (rec.protocol, target) {
        (Protocol::Nfs, ServerTarget::Nfs(_)) => rec.url.parse::<NfsUrl>().ok().map(|u| u.host),
        (Protocol::Smb, ServerTarget::Smb { .. }) => rec.url.parse::<SmbUrl>().ok().map(|u| u.host),
        _ => None,
    };
    host.is_some_and(|h| host_ip(&h).is_some() && host_ip(&h) == host_ip(target.host()))
}

/// Finds the lab site serving `url` (only `lab` when given) and the site to run the client
/// side from (`from`, or the site `doctor` runs in, or the first other site of the lab).
pub fn find(
    url: &ServerTarget,
    lab: Option<&str>,
    from: Option<&str>,
) -> Result<Option<LabServer>, DoctorError> {
    let names: Vec<String> = match lab {
        Some(l) => vec![l.to_string()],
        None => LabState::list_names(),
    };
    let mut found: Vec<(LabState, ServiceRecord, PathBuf)> = Vec::new();
    // Servers at the target's address that serve another directory or share.
    let mut elsewhere: Vec<(String, ServiceRecord)> = Vec::new();
    for n in names {
        let Ok(state) = LabState::load(&n) else {
            if lab.is_some() {
                return Err(DoctorError::Usage(format!("no lab named '{n}'")));
            }
            continue;
        };
        for rec in ServiceRecord::load_all(&n)
            .into_iter()
            .filter(|r| r.running())
        {
            match serves(&rec, url) {
                Some(dir) => found.push((state.clone(), rec, dir)),
                None if same_server(&rec, url) => elsewhere.push((n.clone(), rec)),
                None => {}
            }
        }
    }
    // Labs all number their sites alike: prefer the one this thread is inside.
    if found.len() > 1 {
        let inside: Vec<_> = found
            .iter()
            .filter(|(l, _, _)| {
                l.sites
                    .iter()
                    .any(|s| nsperf_lab::netns::thread_is_in(&s.netns))
            })
            .cloned()
            .collect();
        if inside.len() == 1 {
            found = inside;
        } else {
            let labs: Vec<&str> = found.iter().map(|(l, _, _)| l.name.as_str()).collect();
            return Err(DoctorError::Usage(format!(
                "labs {} all serve {}: name one with --lab",
                labs.join(", "),
                url
            )));
        }
    }
    let Some((state, rec, dir)) = found.pop() else {
        if let Some((lab, rec)) = elsewhere.first() {
            return Err(DoctorError::NotFound(format!(
                "{url} is not served: the {} server of lab '{lab}' at that address serves {} ({})",
                rec.protocol,
                rec.dir.display(),
                rec.url
            )));
        }
        if let Some(l) = lab {
            return Err(DoctorError::Usage(format!(
                "lab '{l}' serves nothing at {url} (see `nsperf lab serve`)"
            )));
        }
        if from.is_some() {
            return Err(DoctorError::Usage(format!(
                "--from names a lab site, but no lab serves {url} (see `nsperf lab serve`)"
            )));
        }
        return Ok(None);
    };
    if !dir.is_dir() {
        return Err(DoctorError::NotFound(format!(
            "{url}: no such directory on the server ({} in site {} of lab '{}')",
            dir.display(),
            rec.site,
            state.name
        )));
    }
    let site = state
        .sites
        .iter()
        .find(|s| s.name == rec.site)
        .cloned()
        .ok_or_else(|| {
            DoctorError::Usage(format!("lab '{}' has no site '{}'", state.name, rec.site))
        })?;
    let here = state
        .sites
        .iter()
        .find(|s| nsperf_lab::netns::thread_is_in(&s.netns));
    let client_site = match (from, here) {
        (Some(f), _) => Some(
            state
                .sites
                .iter()
                .find(|s| s.name == f)
                .cloned()
                .ok_or_else(|| {
                    DoctorError::Usage(format!("lab '{}' has no site '{f}'", state.name))
                })?,
        ),
        (None, Some(_)) => None,
        (None, None) => state.sites.iter().find(|s| s.name != rec.site).cloned(),
    };
    if client_site.as_ref().or(here).map(|s| s.name.as_str()) == Some(rec.site.as_str()) {
        return Err(DoctorError::Usage(format!(
            "the client side must run in another site than the server's ({}): --from SITE",
            rec.site
        )));
    }
    Ok(Some(LabServer {
        lab: state,
        site,
        service: rec,
        dir,
        client_site,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_lab::service::{Protocol, ServerKind};

    fn rec(url: &str, dir: &str) -> ServiceRecord {
        ServiceRecord {
            site: "b".into(),
            protocol: Protocol::Nfs,
            server: ServerKind::Embedded,
            dir: dir.into(),
            url: url.into(),
            pid: 1,
            start_ticks: 0,
            log: "/x".into(),
        }
    }

    #[test]
    fn a_service_serves_its_address_and_directories_below_it() {
        let r = rec("nfs://10.77.0.2/srv/share", "/srv/share");
        let u = |s: &str| ServerTarget::Nfs(s.parse::<NfsUrl>().unwrap());
        assert!(serves(&r, &u("nfs://10.77.0.2/srv/share")).is_some());
        assert_eq!(
            serves(&r, &u("nfs://10.77.0.2/srv/share/sub")),
            Some(PathBuf::from("/srv/share/sub"))
        );
        assert!(serves(&r, &u("nfs://10.77.0.2/srv/shared")).is_none());
        assert!(serves(&r, &u("nfs://10.77.0.3/srv/share")).is_none());
        assert!(serves(&r, &u("nfs://nas.example/srv/share")).is_none());
        let mut s = rec("smb://10.77.0.2/share", "/srv/share");
        s.protocol = Protocol::Smb;
        let smb = |x: &str| ServerTarget::Smb {
            url: x.parse().unwrap(),
            credentials: None,
        };
        assert_eq!(
            serves(&s, &smb("smb://10.77.0.2/share/sub")),
            Some(PathBuf::from("/srv/share/sub"))
        );
        assert!(serves(&s, &smb("smb://10.77.0.2/other")).is_none());
        assert!(serves(&s, &u("nfs://10.77.0.2/srv/share")).is_none());
    }
}
