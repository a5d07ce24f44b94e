//! Which of the lab's links a step's traffic crosses, from the sites it names: whether a
//! step depends on the settings of the lab's main link (a dumbbell's WAN, a star's port,
//! a mesh's pairs) or only on the access links, and which link directions two flows share.

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
}
