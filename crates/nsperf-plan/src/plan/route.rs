//! Which of the lab's links a step's traffic crosses, from the sites it names: whether a
//! step depends on the settings of the lab's main link (a dumbbell's WAN, a star's port,
//! a mesh's pairs) or only on the access links, and which link directions two flows share.

use nsperf_lab::LinkParams;
use nsperf_lab::topology::{Layout, LinkKind};

use super::LabSpec;
use super::raw::{Param, RawPlan, RawStep};

/// The layout of the plan's lab (`None` when its topology cannot be laid out: the plan is
/// refused elsewhere).
pub(super) fn layout(lab: &LabSpec) -> Option<Layout> {
    Layout::new(&lab.shape.topology, &lab.sites).ok()
}

/// The directions (`2 × link + way`) a packet from `from` to `to` crosses, first hop first;
/// `None` for a site the lab does not have.
pub(super) fn directions(layout: &Layout, from: &str, to: &str) -> Option<Vec<u16>> {
    let i = layout.sites.iter().position(|s| s == from)?;
    let j = layout.sites.iter().position(|s| s == to)?;
    Some(layout.route(i, j).hops().to_vec())
}

/// True when every hop from `from` to `to` is an access link (a dumbbell's two sites on
/// one side, a star's two clients): the lab's main link settings do not touch it.
fn access_only(layout: &Layout, from: &str, to: &str) -> bool {
    directions(layout, from, to).is_some_and(|hops| {
        hops.iter()
            .all(|&d| layout.links[layout.directions[usize::from(d)].link].kind == LinkKind::Access)
    })
}

/// One cell's lab as `lab up` builds it: its layout and every direction's parameters.
#[derive(Debug, Clone)]
pub(super) struct CellLinks {
    /// The links and routes.
    pub(super) layout: Layout,
    /// The parameters of direction `d` (`2 × link + way`) at `params[d]`.
    pub(super) params: Vec<LinkParams>,
}

/// What a path between two sites is made of, from its links' settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct PathLink {
    /// The one-way delays of its hops there and back, summed, ms.
    pub(super) rtt_ms: f64,
    /// The narrowest rate of those hops, bit/s; `None` when none is limited.
    pub(super) rate_bps: Option<f64>,
}

impl CellLinks {
    /// The round trip and narrowest rate of the path from `from` to `to` and back, from the
    /// hops of both routes; `None` for a site the lab does not have.
    pub(super) fn path(&self, from: &str, to: &str) -> Option<PathLink> {
        let mut hops = directions(&self.layout, from, to)?;
        hops.extend(directions(&self.layout, to, from)?);
        let params = hops.iter().map(|&d| self.params[usize::from(d)]);
        let delay_ns: u64 = params.clone().map(|p| p.delay_ns).sum();
        let rate_bps = params
            .filter_map(|p| p.rate_bps)
            .min_by(|a, b| a.total_cmp(b));
        Some(PathLink {
            rtt_ms: delay_ns as f64 / 1e6,
            rate_bps,
        })
    }
}

/// A site a step names: `None` when it is templated (known per cell only) or absent.
fn named(p: &Option<Param>) -> Option<Option<String>> {
    match p {
        None => Some(None),
        Some(p) => {
            let v = p.to_string();
            (!v.contains('{')).then_some(Some(v))
        }
    }
}

/// The pairs of sites between which the step moves data, or `None` when that cannot be
/// told from the plan's text (a templated site, a step on hosts or lab sites through
/// agents, a user's command, which may reach any site, a fault schedule, a server named
/// by address: a `host`, or a URL in `dir`).
fn flows(s: &RawStep, raw: &RawPlan) -> Option<Vec<(String, String)>> {
    if s.on.is_some() || s.schedule.is_some() || s.kind == "exec" || s.host.is_some() {
        return None;
    }
    if let Some(d) = &s.dir {
        let d = d.to_string();
        if d.contains("://") || d.contains('{') {
            return None;
        }
    }
    let mut pairs = Vec::new();
    if let (Some(c), Some(sv)) = (named(&s.client)?, named(&s.server)?) {
        pairs.push((c, sv));
    }
    let site = named(&s.site)?;
    if let (Some(me), Some(r)) = (&site, &s.replicate) {
        pairs.push((me.clone(), named(&Some(r.peer.clone()))??));
    }
    if let Some(svc) = &s.service {
        let at = raw.service.iter().find(|x| &x.name == svc)?;
        if let (Some(me), Some(there)) = (&site, &at.site) {
            pairs.push((me.clone(), there.clone()));
        }
    }
    if let Some(l) = &s.load {
        pairs.push((named(&Some(l.from.clone()))??, named(&Some(l.to.clone()))??));
    }
    Some(pairs)
}

/// True when the step's traffic provably crosses only access links (or no link at all: a
/// local io run in a site), so the lab's main link settings (`rate`, `rtt`) do not change
/// what it measures and it need not repeat over them.
pub(super) fn crosses_access_only(s: &RawStep, raw: &RawPlan, lab: &LabSpec) -> bool {
    let Some(layout) = layout(lab) else {
        return false;
    };
    flows(s, raw).is_some_and(|pairs| {
        pairs
            .iter()
            .all(|(a, b)| access_only(&layout, a, b) && access_only(&layout, b, a))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_lab::Topology;

    fn dumbbell() -> LabSpec {
        LabSpec {
            name: None,
            sites: vec!["primary".into(), "ha".into(), "dr".into()],
            shape: super::super::LabShape {
                topology: Topology::Dumbbell {
                    left: vec!["primary".into(), "ha".into()],
                },
                ..Default::default()
            },
        }
    }

    #[test]
    fn one_side_of_a_dumbbell_crosses_only_access_links() {
        let lab = dumbbell();
        let l = layout(&lab).unwrap();
        assert!(access_only(&l, "primary", "ha"));
        assert!(!access_only(&l, "primary", "dr"));
        let ha = directions(&l, "primary", "ha").unwrap();
        let dr = directions(&l, "primary", "dr").unwrap();
        assert_eq!(
            ha.len(),
            2,
            "out through primary's access link, in through ha's"
        );
        assert_eq!(
            dr.len(),
            3,
            "primary's access link, the WAN, dr's access link"
        );
        assert_eq!(ha[0], dr[0], "both leave through primary's access link");
        assert!(directions(&l, "primary", "nowhere").is_none());
    }

    /// The lab's links as `lab up` sets them from `flags` (the flags of `nsperf lab up`).
    fn links(lab: &LabSpec, flags: &[&str]) -> CellLinks {
        let link = nsperf_lab::LinkSetup::parse_args(flags).unwrap();
        let cfg = super::super::up_config("t", &lab.sites, &lab.shape, &link);
        let (_, layout, params) = nsperf_lab::lab::plan(&cfg).unwrap();
        CellLinks { layout, params }
    }

    #[test]
    fn a_path_sums_its_hops_delays_both_ways_and_takes_the_narrowest_rate() {
        let lab = dumbbell();
        let wan = ["--rate", "45mbit", "--rtt", "50ms"];
        let access = ["--access-rate", "1gbit", "--access-delay", "1ms"];
        let l = links(&lab, &[&wan[..], &access[..]].concat());
        // Out through primary's access link, in through ha's, and back: 4 x 1 ms.
        let ha = l.path("primary", "ha").unwrap();
        assert_eq!(ha.rtt_ms, 4.0);
        assert_eq!(ha.rate_bps, Some(1e9));
        // Two access links and the WAN (25 ms each way), each way.
        let dr = l.path("primary", "dr").unwrap();
        assert_eq!(dr.rtt_ms, 54.0);
        assert_eq!(dr.rate_bps, Some(45e6));
        assert_eq!(l.path("dr", "primary"), Some(dr));
        // Without access settings one side of the dumbbell is a path of no delay and no
        // limit, whatever the WAN's.
        let l = links(&lab, &wan);
        let ha = l.path("ha", "primary").unwrap();
        assert_eq!((ha.rtt_ms, ha.rate_bps), (0.0, None));
        assert!(l.path("primary", "nowhere").is_none());
    }

    #[test]
    fn a_path_of_a_star_or_a_mesh_and_one_limited_way() {
        let star = LabSpec {
            name: None,
            sites: vec!["srv".into(), "c1".into(), "c2".into()],
            shape: super::super::LabShape {
                topology: Topology::Star { server: None },
                ..Default::default()
            },
        };
        let l = links(&star, &["--rtt", "20ms", "--access-delay", "2ms"]);
        // Two clients: each one's access link, there and back.
        assert_eq!(l.path("c1", "c2").unwrap().rtt_ms, 8.0);
        // A client and the server: its access link and the port (10 ms each way).
        assert_eq!(l.path("c1", "srv").unwrap().rtt_ms, 24.0);
        let mesh = LabSpec {
            name: None,
            sites: vec!["a".into(), "b".into()],
            shape: super::super::LabShape::default(),
        };
        // A change to b only sets the way to b, its delay (15 ms) as its rate: the round
        // trip is that way's delay alone, and its rate the narrowest of the path.
        let l = links(&mesh, &["--rtt", "30ms", "--rate", "10mbit", "--to", "b"]);
        let p = l.path("b", "a").unwrap();
        assert_eq!((p.rtt_ms, p.rate_bps), (15.0, Some(10e6)));
    }
}
