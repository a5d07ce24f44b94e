//! A step's `load`: network streams between two lab sites that the runner keeps up while the
//! step runs, and the link they share with the step's own traffic in this cell.

use std::time::Duration;

use nsperf_core::units::Bytes;
use nsperf_net::{DEFAULT_PORT, Direction, Mode, TestParams};

use super::Fields;
use crate::error::PlanError;
use crate::plan::raw::{Param, RawLoad};
use crate::plan::route::{CellLinks, directions};
use crate::plan::{Action, LoadSpec, SharedPath, Target};

/// How often the load reports what it moved: fine enough to take its share over a step of a
/// few seconds.
const LOAD_INTERVAL: Duration = Duration::from_millis(100);

/// The longest `ramp` a load may take before its step.
const MAX_RAMP: Duration = Duration::from_secs(60);

/// The load of a step whose own action (`action`, resolved) it shares the lab with.
pub(super) fn load(f: &Fields<'_>, r: &RawLoad, action: &Action) -> Result<LoadSpec, PlanError> {
    let err = |m: String| f.err("load", m);
    if f.lab.is_none() {
        return Err(err(
            "streams between lab sites: the plan needs a [lab] section".into(),
        ));
    }
    let site = |field: &str, p: &Param| {
        f.site(field, &Some(p.clone()))?
            .ok_or_else(|| err(format!("{field}: empty")))
    };
    let from = site("load.from", &r.from)?;
    let to = site("load.to", &r.to)?;
    if from == to {
        return Err(err(format!(
            "from and to are both \"{from}\": a load crosses the lab's links between two sites"
        )));
    }
    let port = f
        .int("load.port", &r.port, 65535)?
        .map_or(DEFAULT_PORT + 1, |p| p as u16);
    if let Action::Net(n) = action
        && let Target::Lab { server, .. } = &n.target
        && *server == to
        && n.port == port
    {
        return Err(err(format!(
            "port {port} in site {to} is the step's own server's: give the load another port"
        )));
    }
    let window = match f.str("load.window", &r.window)?.as_deref() {
        None | Some("default") => None,
        Some(w) => Some(
            Bytes::parse(w)
                .map_err(|e| f.err("load.window", format!("{e} (or \"default\")")))?
                .0,
        ),
    };
    let params = TestParams {
        mode: Mode::Stream,
        streams: f
            .int("load.streams", &r.streams, u64::from(u32::MAX))?
            .map_or(1, |n| n as u32),
        direction: Direction::Up,
        interval_ns: LOAD_INTERVAL.as_nanos() as u64,
        window,
        congestion: f.str("load.cc", &r.cc)?.filter(|c| !c.is_empty()),
        ..TestParams::default()
    };
    params
        .validate()
        .map_err(|e| err(format!("the network engine refuses it: {e}")))?;
    let ramp = f
        .duration("load.ramp", &r.ramp)?
        .unwrap_or(Duration::from_secs(1));
    if ramp > MAX_RAMP {
        return Err(f.err("load.ramp", "at most 60 s"));
    }
    let to_index = f
        .lab
        .and_then(|l| l.sites.iter().position(|s| *s == to))
        .unwrap_or(0);
    let shared = f
        .ctx
        .links
        .map_or(SharedPath::Unknown, |l| shared(f, l, action, (&from, &to)));
    Ok(LoadSpec {
        from,
        to,
        to_index,
        port,
        params,
        ramp,
        shared,
    })
}

/// The pairs of sites the step's own data flows between, one way each; `None` when its path
/// cannot be told (a command, a URL, a host, a step on hosts).
fn step_flows(f: &Fields<'_>, action: &Action) -> Option<Vec<(String, String)>> {
    let both = |a: &str, b: &str| {
        vec![
            (a.to_string(), b.to_string()),
            (b.to_string(), a.to_string()),
        ]
    };
    match action {
        Action::Net(n) => match &n.target {
            Target::Lab { client, server, .. } => Some(match (n.params.mode, n.params.direction) {
                (Mode::Stream, Direction::Up) => vec![(client.clone(), server.clone())],
                (Mode::Stream, Direction::Down) => vec![(server.clone(), client.clone())],
                _ => both(client, server),
            }),
            _ => None,
        },
        Action::Io(io) => {
            let site = io.site.as_deref()?;
            if let Some(p) = &io.peer {
                return Some(vec![(site.to_string(), p.site.clone())]);
            }
            let Some(svc) = &io.service else {
                // A local directory: no link; a URL: a server somewhere.
                return (!io.is_remote()).then(Vec::new);
            };
            let there = f
                .ctx
                .services
                .iter()
                .find(|s| s.name == svc.name)?
                .site
                .clone()?;
            let w = io.config.workload;
            Some(match (w.reads(), w.writes()) {
                (true, false) => vec![(there, site.to_string())],
                (false, true) => vec![(site.to_string(), there)],
                _ => both(site, &there),
            })
        }
        Action::Bonnie(_) => Some(Vec::new()),
        Action::Replay(r) => {
            let there = f
                .ctx
                .services
                .iter()
                .find(|s| s.name == r.service)?
                .site
                .clone()?;
            Some(both(&r.site, &there))
        }
        Action::Exec(_) => None,
    }
}

/// The narrowest link direction the load and the step's own data both cross, at its rate
/// in this cell as `lab up` sets each direction (a cell may change one link, or one way).
fn shared(f: &Fields<'_>, links: &CellLinks, action: &Action, load: (&str, &str)) -> SharedPath {
    let layout = &links.layout;
    let Some(flows) = step_flows(f, action) else {
        return SharedPath::Unknown;
    };
    let Some(mine) = directions(layout, load.0, load.1) else {
        return SharedPath::Unknown;
    };
    let rate = |d: u16| {
        let link = &layout.links[layout.directions[usize::from(d)].link];
        let rate = links.params.get(usize::from(d)).and_then(|p| p.rate_bps);
        (link.name.clone(), rate)
    };
    let common = flows
        .iter()
        .filter_map(|(a, b)| directions(layout, a, b))
        .flatten()
        .filter(|d| mine.contains(d))
        .map(rate)
        // The narrowest: a limited rate before an unlimited one.
        .min_by(|a, b| {
            a.1.unwrap_or(f64::INFINITY)
                .total_cmp(&b.1.unwrap_or(f64::INFINITY))
        });
    match common {
        Some((name, rate_bps)) => SharedPath::Link { name, rate_bps },
        None => SharedPath::Apart,
    }
}
