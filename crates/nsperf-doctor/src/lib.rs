//! `nsperf doctor TARGET`: the layered test a NAS owner does by hand, in one run —
//! (a) the storage at the server (local I/O on the served directory, where nsperf can run
//! there: a lab site), (b) the network to it (TCP both ways, idle RTT, window, MSS/MTU, with
//! an nsperf server started in the server's site or one the user names), (c) the file
//! protocol end to end (sequential write and read through the user-space `nfs` or `smb`
//! engine) —
//! and one verdict per direction naming the limiting layer with its figures and the ceiling
//! arithmetic ([`verdict`], a pure function of the figures).
//!
//! Every measurement goes through its engine as a library (`nsperf-io`, `nsperf-net`,
//! `nsperf-nfs`, `nsperf-smb`); nothing is estimated. A layer nsperf cannot measure from where it runs is
//! reported as not measured with the reason, and the verdict never guesses it.
#![deny(missing_docs)]

pub mod config;
mod cpu;
pub mod error;
mod locate;
pub mod model;
mod probe;
pub mod verdict;

use std::time::Instant;

use nsperf_core::report::{Finding, HostRecord, Severity};
use nsperf_core::units::Bytes;
use nsperf_io::CacheMode;

pub use config::{DoctorConfig, ServerTarget};
pub use error::DoctorError;
pub use model::{
    Direction, DoctorReport, DoctorSpec, DoctorSummary, Figures, Layer, NetworkFigures, Pass,
    ProtocolFigures, StorageFigures,
};
pub use verdict::{Diagnosis, DirectionVerdict, Limit, diagnose};

/// Runs `f` on the client side: in the lab site `ns` when given, else right here.
fn on_client<T: Send>(
    ns: Option<&str>,
    f: impl FnOnce() -> Result<T, DoctorError> + Send,
) -> Result<T, DoctorError> {
    match ns {
        Some(n) => nsperf_lab::netns::with_netns(n, f),
        None => f(),
    }
}

fn is_root() -> bool {
    nsperf_lab::netns::is_root()
}

/// Why a layer has no figures when Ctrl-C came before it.
const NOT_REACHED: &str = "interrupted (Ctrl-C) before this layer was measured";

/// Runs one layer's test unless Ctrl-C already stopped the run: a test that Ctrl-C stops
/// before its figures (`DoctorError::Interrupted`) is "not measured", one it stops during
/// its measured pass keeps what that pass measured; either way the layers after it are not
/// run and `stopped` is set, so the report still says what was measured.
fn layer<T>(
    stopped: &mut bool,
    test: impl FnOnce() -> Result<Layer<T>, DoctorError>,
) -> Result<Layer<T>, DoctorError> {
    let not_reached = || Layer::NotMeasured {
        reason: NOT_REACHED.into(),
    };
    if *stopped || nsperf_core::signal::interrupted() {
        *stopped = true;
        return Ok(not_reached());
    }
    let r = match test() {
        Err(DoctorError::Interrupted) => Ok(not_reached()),
        r => r,
    };
    *stopped |= nsperf_core::signal::interrupted();
    r
}

/// Measures the three layers of `cfg.target` and diagnoses them. `progress` hears one line
/// as each test starts.
pub fn run(
    cfg: &DoctorConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<DoctorReport, DoctorError> {
    cfg.validate()?;
    let started_unix_ns = nsperf_core::clock::unix_time_ns();
    let t0 = Instant::now();
    let srv = locate::find(&cfg.target, cfg.lab.as_deref(), cfg.from_site.as_deref())?;
    let here = srv.is_some() && is_root();
    let read_cache = match cfg.read_cache {
        Some(CacheMode::Cold) if !here => {
            return Err(DoctorError::Usage(
                "--cache cold needs the server on this host (a lab site served with `nsperf lab serve`) and root: its cache is evicted with drop_caches".into(),
            ));
        }
        Some(c) => c,
        None if here => CacheMode::Cold,
        None => CacheMode::RemoteWarm,
    };
    let client_ns = srv
        .as_ref()
        .and_then(|s| s.client_site.as_ref())
        .map(|s| s.netns.clone());
    let client_ns = client_ns.as_deref();
    let url = &cfg.target;
    let mut findings: Vec<Finding> = Vec::new();
    let mut stopped = false;

    progress(&format!("protocol: mounting {url}"));
    let (pre, facts) = on_client(client_ns, || {
        Ok((
            probe::preflight(url, cfg.connect_timeout)?,
            nsperf_core::host::HostFacts::collect(),
        ))
    })?;

    let storage = match &srv {
        Some(s) => {
            progress(&format!(
                "storage at the server (site {}): write and cold read of {} in {}",
                s.site.name,
                Bytes(cfg.size_bytes),
                s.dir.display()
            ));
            layer(&mut stopped, || probe::storage(cfg, s, &mut findings))?
        }
        None => Layer::NotMeasured {
            reason: format!(
                "nsperf does not run at {} (only a lab site's server is reachable; run `nsperf io run DIR -w seqread --cache cold` on the server)",
                url.host()
            ),
        },
    };

    let at = match (&cfg.net_server, &srv) {
        (Some((h, p)), _) => probe::NetServer::Named(h.clone(), *p),
        (None, Some(s)) => probe::NetServer::InSite(s),
        (None, None) => probe::NetServer::Probe(url.host().to_string()),
    };
    progress(&format!(
        "network: TCP both ways ({} each after 1 s warm-up) and the idle RTT",
        nsperf_core::units::format_duration(cfg.net_time)
    ));
    let network = layer(&mut stopped, || {
        on_client(client_ns, || probe::network(cfg, at, &mut findings))
    })?;

    progress(&format!(
        "protocol: write and {} read of {} through {url}",
        read_cache,
        Bytes(cfg.size_bytes)
    ));
    let protocol = layer(&mut stopped, || {
        on_client(client_ns, || {
            probe::protocol(cfg, url, srv.as_ref(), pre, read_cache, &mut findings)
        })
    })?;
    if stopped {
        findings.push(Finding::new(
            "interrupted",
            Severity::Warning,
            "interrupted by Ctrl-C: the figures are what was measured before it (a pass it stopped is shorter); the layers after it were not measured".to_string(),
        ));
    }

    let figures = Figures {
        storage,
        network,
        protocol,
    };
    let diagnosis = diagnose(&figures);
    let mut all = verdict_findings(&diagnosis);
    all.extend(findings);
    let spec = DoctorSpec {
        target: url.to_string(),
        place: srv.as_ref().map(probe::place),
        size_bytes: cfg.size_bytes,
        bs_bytes: cfg.bs_bytes,
        rpcs_in_flight: cfg.iodepth,
        pass_time_s: cfg.pass_time.as_secs_f64(),
        net_time_s: cfg.net_time.as_secs_f64(),
        read_cache,
    };
    let mut rep = DoctorReport::new(
        nsperf_core::report::Command::Doctor,
        spec,
        DoctorSummary { figures, diagnosis },
    );
    rep.started_unix_ns = started_unix_ns;
    rep.duration_ns = t0.elapsed().as_nanos() as u64;
    rep.hosts.push(HostRecord {
        role: "client".into(),
        facts,
    });
    rep.findings = all;
    Ok(rep)
}

/// One finding per direction (the verdict) and one per inconsistency.
fn verdict_findings(d: &Diagnosis) -> Vec<Finding> {
    let mut out = Vec::new();
    for dir in Direction::BOTH {
        let v = d.of(dir);
        let mut f = Finding::new(
            &format!("{dir}_limit"),
            if v.limit == Limit::NotMeasured {
                Severity::Warning
            } else {
                Severity::Limit
            },
            format!("{dir}: {}", v.message),
        );
        if let Some(x) = v.protocol_bytes_per_s {
            f = f.with("protocol_bytes_per_s", x);
        }
        for c in &v.ceilings {
            f = f.with(&format!("{}_bytes_per_s", c.kind), c.bytes_per_s);
        }
        out.push(f);
        for i in &v.inconsistent {
            out.push(Finding::new(
                "inconsistent_figures",
                Severity::Warning,
                i.clone(),
            ));
        }
    }
    out
}
