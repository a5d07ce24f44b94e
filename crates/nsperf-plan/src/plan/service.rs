//! `[[service]]` tables (file servers the plan runs), and the target of an io step that goes
//! through one or names an `nfs://` URL: which cache phases it can mean, and what the engine
//! is told about the path (the server runs on this host; the lab link's rate).

use std::path::{Component, Path, PathBuf};

use nsperf_io::{CacheMode, EngineKind, NetworkPath, PathCeiling, Target as IoTarget};
use nsperf_lab::service::{Protocol, ServerKind, ServiceConfig};
use nsperf_nfs::NfsUrl;
use nsperf_smb::SmbUrl;

use super::ctx::{check_name, invalid};
use super::raw::{RawService, RawStep};
use super::{Cell, LabSpec, Phase, ServiceKind, ServiceSpec, ServiceUse};
use crate::error::PlanError;
use crate::exec::ServiceAnswer;

/// The plan's services, checked by the lab's rules (names, sites, server and protocol).
pub(super) fn services(
    raw: &[RawService],
    lab: Option<&LabSpec>,
) -> Result<Vec<ServiceSpec>, PlanError> {
    let mut out: Vec<ServiceSpec> = Vec::new();
    for r in raw {
        check_name("service name", &r.name)?;
        let at = format!("service \"{}\"", r.name);
        if out.iter().any(|o| o.name == r.name) {
            return Err(invalid(format!("{at}: the name appears twice")));
        }
        let protocol: Protocol = r
            .kind
            .as_deref()
            .unwrap_or("nfs")
            .parse()
            .map_err(|e| invalid(format!("{at} kind: {e}")))?;
        let server: ServerKind = match &r.server {
            Some(s) => s
                .parse()
                .map_err(|e| invalid(format!("{at} server: {e}")))?,
            None => protocol.default_server(),
        };
        let site_index = match (&r.site, lab) {
            (None, _) => None,
            (Some(_), None) => return Err(invalid(format!("{at} site: sites need a [lab]"))),
            (Some(s), Some(l)) => Some(l.sites.iter().position(|x| x == s).ok_or_else(|| {
                invalid(format!(
                    "{at} site: no site \"{s}\" in the lab (sites: {})",
                    l.sites.join(", ")
                ))
            })?),
        };
        if r.dir.trim().is_empty() {
            return Err(invalid(format!("{at} dir: empty")));
        }
        let config = ServiceConfig {
            protocol,
            server,
            dir: absolute(Path::new(&r.dir)),
            read_only: r.read_only.unwrap_or(false),
            nfs_versions: r
                .nfs_versions
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|e| invalid(format!("{at} nfs_versions: {e}")))?,
        };
        config
            .validate(r.site.is_some())
            .map_err(|e| invalid(format!("{at}: {e}")))?;
        if let Some(o) = out.iter().find(|o| {
            o.site.is_some()
                && o.site == r.site
                && matches!(&o.kind, ServiceKind::Files(c) if c.protocol == protocol)
        }) {
            return Err(invalid(format!(
                "{at}: site {} already runs {} service \"{}\" (its ports are taken): one per site",
                r.site.as_deref().unwrap_or(""),
                protocol,
                o.name
            )));
        }
        out.push(ServiceSpec {
            name: r.name.clone(),
            site: r.site.clone(),
            site_index,
            kind: ServiceKind::Files(config),
        });
    }
    Ok(out)
}

/// Every service is used by some step (a typo in a step's `service` is caught by the step).
pub(super) fn check_used(services: &[ServiceSpec], steps: &[RawStep]) -> Result<(), PlanError> {
    for svc in services {
        if !steps
            .iter()
            .any(|s| s.service.as_deref() == Some(svc.name.as_str()))
        {
            return Err(invalid(format!(
                "service \"{0}\": no step uses it (an io step names it with service = \"{0}\")",
                svc.name
            )));
        }
    }
    Ok(())
}

/// The mirror peers the io steps of `cells` replicate to (`replicate = { peer = "SITE" }`):
/// one per site, named `mirror.SITE`, writing under the one directory every step that uses
/// it gives (its `replicate.dir`, or its own dir).
pub(super) fn mirror_peers(
    cells: &[Cell],
    files: &[ServiceSpec],
    lab: Option<&LabSpec>,
) -> Result<Vec<ServiceSpec>, PlanError> {
    let mut out: Vec<ServiceSpec> = Vec::new();
    let uses = cells
        .iter()
        .flat_map(|c| &c.steps)
        .filter_map(|s| match &s.action {
            super::Action::Io(io) => io.peer.as_ref().map(|p| (s.name.as_str(), p)),
            _ => None,
        });
    for (step, p) in uses {
        if files.iter().any(|f| f.name == p.name) {
            return Err(invalid(format!(
                "service \"{}\": the name is the mirror peer's that step \"{step}\" replicates to: name the [[service]] otherwise",
                p.name
            )));
        }
        match out.iter().find(|o| o.name == p.name) {
            Some(ServiceSpec {
                kind: ServiceKind::MirrorPeer { dir },
                ..
            }) if *dir != p.dir => {
                return Err(invalid(format!(
                    "step \"{step}\" replicate: the peer in site {} writes under {}, but another step (or cell) has it write under {}: one peer per site, give the same replicate.dir",
                    p.site,
                    dir.display(),
                    p.dir.display()
                )));
            }
            Some(_) => {}
            None => out.push(ServiceSpec {
                name: p.name.clone(),
                site: Some(p.site.clone()),
                site_index: lab.and_then(|l| l.sites.iter().position(|x| *x == p.site)),
                kind: ServiceKind::MirrorPeer { dir: p.dir.clone() },
            }),
        }
    }
    Ok(out)
}

/// `dir` made absolute against the directory nsperf runs in (not resolved: it may not
/// exist before a setup command makes it; the runner resolves it when it starts the service).
pub(super) fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut out = base;
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Where an io step's I/O goes, as resolved at load time.
pub(super) struct IoWhere {
    pub(super) target: IoTarget,
    pub(super) service: Option<ServiceUse>,
    /// What the engine is told about the network path.
    pub(super) path: NetworkPath,
}

/// Where an io step runs, as far as reaching a service goes.
#[derive(Debug, Clone, Copy)]
pub(super) enum StepSite<'a> {
    /// On this host (no site, no `on`).
    ThisHost,
    /// In a lab site (`site = "…"`).
    Site(&'a str),
    /// `on` hosts or lab sites (which of them reach the service is checked with `on`).
    OnHosts,
}

/// The target of an io step: a local directory, an `nfs://` URL, or a directory inside a
/// service's export (`service = "NAME"`, `dir` relative to the export).
pub(super) fn io_target(
    at: &str,
    dir: Option<String>,
    service: Option<&str>,
    site: StepSite<'_>,
    services: &[ServiceSpec],
    link_rate_bps: Option<f64>,
) -> Result<IoWhere, PlanError> {
    let err = |field: &str, m: String| invalid(format!("{at} {field}: {m}"));
    let Some(name) = service else {
        let dir = dir.unwrap_or_else(|| ".".into());
        if NfsUrl::is_nfs_url(&dir) || SmbUrl::is_smb_url(&dir) {
            return Ok(IoWhere {
                target: target_at(&dir, "", None).map_err(|e| err("dir", e))?,
                service: None,
                path: NetworkPath::default(),
            });
        }
        return Ok(IoWhere {
            target: IoTarget::Dir { path: dir.into() },
            service: None,
            path: NetworkPath::default(),
        });
    };
    let svc = services.iter().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
        err(
            "service",
            format!(
                "no [[service]] named \"{name}\" (services: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        )
    })?;
    let rel = dir.unwrap_or_default();
    let relp = Path::new(&rel);
    if relp.is_absolute() || relp.components().any(|c| c == Component::ParentDir) {
        return Err(err(
            "dir",
            format!(
                "through service \"{name}\", dir is a path inside its export (e.g. \"sub/dir\"), not \"{rel}\""
            ),
        ));
    }
    match (&svc.site, site) {
        (_, StepSite::OnHosts) => {}
        (Some(s), StepSite::ThisHost) => {
            return Err(err(
                "site",
                format!(
                    "service \"{name}\" runs in lab site {s}: the step needs site = \"CLIENT SITE\" to reach it across the lab's link"
                ),
            ));
        }
        (None, StepSite::Site(_)) => {
            return Err(err(
                "site",
                format!(
                    "service \"{name}\" runs on this host's loopback, which a lab site cannot reach: leave site out"
                ),
            ));
        }
        _ => {}
    }
    let ServiceKind::Files(config) = &svc.kind else {
        return Err(err(
            "service",
            format!("\"{name}\" is a mirror peer, which an io step reaches with replicate"),
        ));
    };
    let rel: String = relp
        .components()
        .filter_map(|c| match c {
            Component::Normal(x) => x.to_str(),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/");
    let host = match svc.site_index {
        Some(i) => nsperf_lab::site_addr(i).to_string(),
        None => "127.0.0.1".into(),
    };
    let base = match config.protocol {
        Protocol::Nfs => format!("nfs://{host}{}", config.dir.display()),
        Protocol::Smb => format!(
            "smb://{host}/{}",
            nsperf_lab::samba::share_name(&config.dir)
        ),
    };
    // An SMB share's credentials file is known once its server runs.
    let target = target_at(&base, &rel, None).map_err(|e| err("dir", e))?;
    // Across the lab's link, when the step runs in another site than the server.
    let crosses = match site {
        StepSite::Site(me) => svc.site.as_deref().is_some_and(|s| s != me),
        // Sites `on` the step are clients of another site's server.
        StepSite::OnHosts => svc.site.is_some(),
        StepSite::ThisHost => false,
    };
    Ok(IoWhere {
        target,
        service: Some(ServiceUse {
            name: name.to_string(),
            path: rel,
        }),
        path: NetworkPath {
            server_on_this_host: Some(true),
            ceiling: link_rate_bps
                .filter(|_| crosses)
                .map(|rate_bps| PathCeiling::LabLink { rate_bps }),
        },
    })
}

/// The target of a directory inside a running service: where it answers and a relative path.
pub fn service_target(answer: &ServiceAnswer, rel: &str) -> Result<IoTarget, String> {
    target_at(&answer.url, rel, answer.credentials.clone())
}

/// The target of a directory under an `nfs://` or `smb://` URL.
fn target_at(base: &str, rel: &str, credentials: Option<PathBuf>) -> Result<IoTarget, String> {
    let full = if rel.is_empty() {
        base.to_string()
    } else {
        format!("{}/{rel}", base.trim_end_matches('/'))
    };
    if SmbUrl::is_smb_url(&full) {
        let url = full.parse::<SmbUrl>().map_err(|e| e.to_string())?;
        return Ok(IoTarget::Smb { url, credentials });
    }
    let url = full
        .parse::<NfsUrl>()
        .map_err(|e: nsperf_nfs::url::UrlError| e.to_string())?;
    Ok(IoTarget::Nfs { url })
}

/// An io step's `credentials` (an smbclient-style file) for its `smb://` URL; a share of the
/// plan's own Samba service comes with its own.
pub(super) fn with_credentials(
    at: &str,
    mut w: IoWhere,
    file: Option<String>,
) -> Result<IoWhere, PlanError> {
    let Some(file) = file else {
        return Ok(w);
    };
    match (&mut w.target, &w.service) {
        (IoTarget::Smb { credentials, .. }, None) => {
            *credentials = Some(absolute(Path::new(&file)));
            Ok(w)
        }
        (IoTarget::Smb { .. }, Some(s)) => Err(invalid(format!(
            "{at} credentials: service \"{}\" gives its clients its own credentials file: leave credentials out",
            s.name
        ))),
        _ => Err(invalid(format!(
            "{at} credentials: an smbclient-style file for an smb:// target; this step's target is not one"
        ))),
    }
}

/// Checks the cache phases of an io step against its target and sets the cache mode of a
/// step without phases: a phase must mean what it says there.
pub(super) fn io_phases(
    at: &str,
    phases: &[Phase],
    w: &IoWhere,
    cache: Option<CacheMode>,
) -> Result<Option<CacheMode>, PlanError> {
    let err = |m: &str| invalid(format!("{at} phases: {m}"));
    let remote = w.target.is_remote();
    let ours = w.service.is_some();
    for p in phases {
        match p {
            Phase::Warm if remote => {
                return Err(err(
                    "warm means the client's page cache holds the data; the nfs and smb engines keep none (every read crosses the network): use remote-warm (only the server's cache holds it) or cold",
                ));
            }
            Phase::Cold if remote && !ours => {
                return Err(err(
                    "cold needs the server's copy evicted, which nsperf can do only for a server it runs on this host: serve the directory with a [[service]], or use remote-warm",
                ));
            }
            Phase::RemoteWarm if !remote => {
                return Err(err(
                    "remote-warm applies to io steps through a [[service]] or an nfs:// or smb:// target (the server's cache holds the data, the client's none), and to exec steps with a prime command",
                ));
            }
            _ => {}
        }
    }
    if !remote {
        return Ok(cache);
    }
    Ok(Some(match cache {
        None => CacheMode::RemoteWarm,
        Some(CacheMode::Cold) if !ours => {
            return Err(invalid(format!(
                "{at} cache: cold needs the server's copy evicted, which nsperf can do only for a [[service]] it runs on this host: use remote-warm"
            )));
        }
        Some(c) => c,
    }))
}

/// The engine of an io step's target: nfs or smb for a network target (an `engine` naming
/// another is refused).
pub(super) fn io_engine(
    at: &str,
    w: &IoWhere,
    asked: Option<EngineKind>,
) -> Result<Option<EngineKind>, PlanError> {
    let needs = match &w.target {
        IoTarget::Nfs { .. } => EngineKind::Nfs,
        IoTarget::Smb { .. } => EngineKind::Smb,
        _ => return Ok(asked),
    };
    match asked {
        None => Ok(Some(needs)),
        Some(e) if e == needs => Ok(Some(e)),
        Some(e) => Err(invalid(format!(
            "{at} engine: an {needs}:// target or service is done by the {needs} engine, not {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::{Action, Plan};

    const LAB: &str = r#"
name = "svc"
[lab]
sites = ["client", "server"]
rate = "45mbit"
rtt = "{rtt}"
[matrix]
rtt = ["0ms", "50ms"]
"#;

    fn plan(service: &str, step: &str) -> Result<Plan, String> {
        Plan::parse(format!("{LAB}\n[[service]]\n{service}\n[[step]]\n{step}\n").as_bytes())
            .map_err(|e| e.to_string())
    }

    const SVC: &str = "name = \"nas\"\nsite = \"server\"\ndir = \"/srv/nas\"";
    const STEP: &str = "name = \"r\"\ntype = \"io\"\nservice = \"nas\"\nsite = \"client\"\nworkload = \"seqread\"\nsize = \"1m\"\nbs = \"64k\"\niodepth = 16";

    #[test]
    fn an_io_step_through_a_lab_service() {
        let p = plan(
            SVC,
            &format!("{STEP}\nphases = [\"cold\", \"remote-warm\"]"),
        )
        .unwrap();
        assert_eq!(p.services.len(), 1);
        assert_eq!(
            p.services[0].describe(),
            "nas (embedded nfs of /srv/nas in site server)"
        );
        assert_eq!(p.cells.len(), 2, "repeated over the lab's rtt");
        let s = &p.cells[1].steps[0];
        assert_eq!(s.service(), Some("nas"));
        assert!(s.engine_sets_cache());
        let Action::Io(io) = &s.action else { panic!() };
        assert_eq!(io.config.target.to_string(), "nfs://10.77.0.2/srv/nas");
        assert_eq!(io.config.engine, nsperf_io::EngineKind::Nfs);
        assert_eq!(io.config.network_path.server_on_this_host, Some(true));
        assert_eq!(
            io.config.network_path.ceiling,
            Some(nsperf_io::PathCeiling::LabLink { rate_bps: 45e6 })
        );
        let c = p.cells[1].conditions(s);
        assert!(c.in_lab);
        assert_eq!(c.link_rate_bps, Some(45e6));
        assert_eq!(c.window_bytes, Some(16 * 65536));
        // A directory inside the export.
        let p = plan(SVC, &format!("{STEP}\ndir = \"a/b\"")).unwrap();
        let Action::Io(io) = &p.cells[0].steps[0].action else {
            panic!()
        };
        assert_eq!(io.config.target.to_string(), "nfs://10.77.0.2/srv/nas/a/b");
        assert_eq!(io.service.as_ref().unwrap().path, "a/b");
    }

    /// Issue 22 item 6: an io step takes a capture as a network step does, between its site
    /// and the site serving its target (a service's, or the site its URL names).
    #[test]
    fn an_io_steps_capture_is_between_its_site_and_the_server() {
        use crate::plan::CapturePoint;
        let at = |svc: &str, step: &str| -> Result<Option<CapturePoint>, String> {
            let p = plan(svc, step)?;
            let Action::Io(io) = &p.cells[0].steps[0].action else {
                panic!()
            };
            Ok(io.capture.clone())
        };
        let link = Some(CapturePoint::Link("client-server".into()));
        assert_eq!(
            at(SVC, &format!("{STEP}\ncapture = \"link\"")),
            Ok(link.clone())
        );
        assert_eq!(
            at(SVC, &format!("{STEP}\ncapture = \"server\"")),
            Ok(Some(CapturePoint::Site("server".into())))
        );
        assert_eq!(at(SVC, STEP), Ok(None));
        // An nfs:// URL to a site's address, no service: the same link.
        let url = "name = \"u\"\ntype = \"io\"\ndir = \"nfs://10.77.0.2/srv/nas\"\nsite = \"client\"\nworkload = \"seqread\"\ncapture = \"link\"";
        let p = Plan::parse(format!("{LAB}\n[[step]]\n{url}\n").as_bytes()).unwrap();
        let Action::Io(io) = &p.cells[0].steps[0].action else {
            panic!()
        };
        assert_eq!(io.capture, link);
        // As --keep-captures asks of every step (it said "no step takes a capture" of a plan
        // whose captures were all on io steps).
        assert_eq!(p.cells[0].steps[0].capture(), link.as_ref());
        // Outside a lab, or to a server no site holds: said at load.
        for (svc, step) in [
            (
                "name = \"nas\"\ndir = \"/x\"",
                STEP.replace("site = \"client\"\n", ""),
            ),
            (SVC, STEP.replace("site = \"client\"\n", "")),
        ] {
            let e = at(svc, &format!("{step}\ncapture = \"link\"")).unwrap_err();
            assert!(e.contains("capture") || e.contains("site"), "{e}");
        }
        let far = url.replace("10.77.0.2", "192.0.2.1");
        let e = Plan::parse(format!("{LAB}\n[[step]]\n{far}\n").as_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains("an io step's capture is taken in a lab"), "{e}");
    }

    #[test]
    fn bad_service_references_are_named_at_load() {
        let cases: &[(&str, &str, &str)] = &[
            (
                SVC,
                &STEP.replace("\"nas\"", "\"nope\""),
                "no [[service]] named \"nope\"",
            ),
            (
                SVC,
                "name = \"x\"\ntype = \"exec\"\ncommand = [\"true\"]",
                "service \"nas\": no step uses it",
            ),
            (
                "name = \"nas\"\nsite = \"moon\"\ndir = \"/x\"",
                STEP,
                "no site \"moon\"",
            ),
            (
                SVC,
                &STEP.replace("site = \"client\"\n", ""),
                "needs site = \"CLIENT SITE\"",
            ),
            (
                "name = \"nas\"\ndir = \"/x\"",
                STEP,
                "runs on this host's loopback",
            ),
            (
                "name = \"nas\"\nserver = \"ganesha\"\ndir = \"/x\"",
                "name = \"r\"\ntype = \"io\"\nservice = \"nas\"\nworkload = \"seqread\"",
                "runs in a lab site",
            ),
            (
                &format!("{SVC}\nkind = \"ftp\""),
                STEP,
                "unknown file protocol 'ftp'",
            ),
            (
                &format!("{SVC}\nserver = \"iis\""),
                STEP,
                "unknown server 'iis'",
            ),
            (&format!("{SVC}\nport = 1"), STEP, "unknown field `port`"),
            (
                &format!("{SVC}\nnfs_versions = \"4.2\""),
                STEP,
                "nfs_versions: NFS versions '4.2': a list of 3 and 4",
            ),
            (
                &format!("{SVC}\nnfs_versions = \"4\""),
                STEP,
                "the embedded server speaks NFSv3 only",
            ),
            (
                SVC,
                &format!("{STEP}\nphases = [\"warm\"]"),
                "warm means the client's page cache",
            ),
            (
                SVC,
                &format!("{STEP}\nengine = \"psync\""),
                "done by the nfs engine, not psync",
            ),
            (
                SVC,
                &format!("{STEP}\ndir = \"/etc\""),
                "a path inside its export",
            ),
            (
                SVC,
                &format!("{STEP}\ndir = \"../up\""),
                "a path inside its export",
            ),
            (
                SVC,
                "name = \"w\"\ntype = \"exec\"\ncommand = [\"true\"]\nservice = \"nas\"",
                "field \"service\" does not apply to a exec step",
            ),
        ];
        for (svc, step, want) in cases {
            let e = plan(svc, step).unwrap_err();
            assert!(e.contains(want), "want {want:?} in: {e}");
        }
        // Two services in one site, and a name given twice.
        let two = Plan::parse(
            format!("{LAB}\n[[service]]\n{SVC}\n[[service]]\nname = \"b\"\nsite = \"server\"\ndir = \"/y\"\n[[step]]\n{STEP}\n").as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(two.contains("one per site"), "{two}");
    }

    #[test]
    fn phases_mean_what_they_say_per_target() {
        let url = "name = \"r\"\ntype = \"io\"\ndir = \"nfs://nas.example/export\"\nworkload = \"seqread\"";
        let p = Plan::parse(
            format!("name = \"u\"\n[[step]]\n{url}\nphases = [\"remote-warm\"]").as_bytes(),
        )
        .unwrap();
        let Action::Io(io) = &p.cells[0].steps[0].action else {
            panic!()
        };
        assert_eq!(io.config.cache, nsperf_io::CacheMode::RemoteWarm);
        assert_eq!(io.config.network_path.server_on_this_host, None);
        let e =
            Plan::parse(format!("name = \"u\"\n[[step]]\n{url}\nphases = [\"cold\"]").as_bytes())
                .unwrap_err()
                .to_string();
        assert!(e.contains("only for a server it runs on this host"), "{e}");
        let local = "name = \"r\"\ntype = \"io\"\ndir = \".\"\nworkload = \"seqread\"\nphases = [\"remote-warm\"]";
        let e = Plan::parse(format!("name = \"u\"\n[[step]]\n{local}").as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("remote-warm applies to io steps through a [[service]]"),
            "{e}"
        );
    }

    #[test]
    fn an_io_step_through_a_samba_service_and_an_smb_url() {
        let smb = "name = \"nas\"\nkind = \"smb\"\nsite = \"server\"\ndir = \"/srv/Share\"";
        let p = plan(
            smb,
            &format!("{STEP}\ndir = \"a\"\nphases = [\"cold\", \"remote-warm\"]"),
        )
        .unwrap();
        assert_eq!(
            p.services[0].describe(),
            "nas (samba smb of /srv/Share in site server)"
        );
        let s = &p.cells[1].steps[0];
        assert!(s.engine_sets_cache());
        let Action::Io(io) = &s.action else { panic!() };
        // The share is the directory's last component; the credentials come with the server.
        assert_eq!(io.config.target.to_string(), "smb://10.77.0.2/Share/a");
        assert_eq!(io.config.engine, nsperf_io::EngineKind::Smb);
        let answer = crate::exec::ServiceAnswer {
            url: "smb://10.77.0.2/Share".into(),
            credentials: Some("/run/creds".into()),
        };
        let t = super::service_target(&answer, &io.service.as_ref().unwrap().path).unwrap();
        let nsperf_io::Target::Smb { url, credentials } = &t else {
            panic!("{t:?}")
        };
        assert_eq!(url.to_string(), "smb://10.77.0.2/Share/a");
        assert_eq!(
            credentials.as_deref(),
            Some(std::path::Path::new("/run/creds"))
        );
        // An smb:// URL of the step's own, with a credentials file.
        let url = "name = \"r\"\ntype = \"io\"\ndir = \"smb://nas.example/share/d\"\nworkload = \"seqread\"\ncredentials = \"/etc/nas.cred\"";
        let p = Plan::parse(format!("name = \"u\"\n[[step]]\n{url}").as_bytes()).unwrap();
        let Action::Io(io) = &p.cells[0].steps[0].action else {
            panic!()
        };
        assert_eq!(io.config.engine, nsperf_io::EngineKind::Smb);
        assert_eq!(io.config.cache, nsperf_io::CacheMode::RemoteWarm);
        let nsperf_io::Target::Smb { credentials, .. } = &io.config.target else {
            panic!()
        };
        assert_eq!(
            credentials.as_deref(),
            Some(std::path::Path::new("/etc/nas.cred"))
        );
        for (svc, step, want) in [
            (
                smb,
                format!("{STEP}\ncredentials = \"/x\""),
                "gives its clients its own credentials file",
            ),
            (
                SVC,
                format!("{STEP}\ncredentials = \"/x\""),
                "this step's target is not one",
            ),
            (
                smb,
                format!("{STEP}\nengine = \"nfs\""),
                "done by the smb engine, not nfs",
            ),
            (
                "name = \"nas\"\nkind = \"smb\"\ndir = \"/srv/Share\"",
                STEP.to_string(),
                "runs in a lab site",
            ),
        ] {
            let e = plan(svc, &step).unwrap_err();
            assert!(e.contains(want), "want {want:?} in: {e}");
        }
    }

    #[test]
    fn setup_and_teardown_are_templated_per_cell() {
        let p = plan(
            SVC,
            &format!("{STEP}\nsetup = [\"mkdir\", \"-p\", \"/tmp/x-{{rtt}}\"]\nteardown = [\"rm\", \"-r\", \"/tmp/x-{{rtt}}\"]"),
        )
        .unwrap();
        let s = &p.cells[1].steps[0];
        assert_eq!(s.setup.as_deref().unwrap(), ["mkdir", "-p", "/tmp/x-50ms"]);
        assert_eq!(s.teardown.as_deref().unwrap(), ["rm", "-r", "/tmp/x-50ms"]);
        let e = plan(SVC, &format!("{STEP}\nsetup = []")).unwrap_err();
        assert!(e.contains("setup: the command is empty"), "{e}");
    }
}
