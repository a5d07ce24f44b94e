//! How a lab's sites are joined: the links, their directions (each one queue), and the
//! route of every site pair through them. Pure: built from the site names alone, no I/O.
//!
//! - **mesh** (the default): every pair of sites has its own point-to-point link, named
//!   `a-b`. A route is one direction.
//! - **star**: every site has its own access link into one switch (`sw`); the server's
//!   link is its *port*, a bottleneck every client shares. A route is the source's uplink,
//!   then the destination's downlink: two queues.
//! - **dumbbell**: every site has an access link into its group's switch (`left` or
//!   `right`); the two switches are joined by one shared `wan` link. Within a group a route
//!   is two access directions; across, uplink, WAN direction, downlink: three queues.
//!
//! Each direction knows which sites' traffic can cross it (upstream) and where it can go
//! (downstream), so `--from A` / `--to B` select the directions that carry traffic from A or
//! to B on any topology.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::config::LinkChange;
use crate::error::LabError;

/// The switch of a star.
pub const STAR_SWITCH: &str = "sw";
/// The shared link of a dumbbell.
pub const WAN_LINK: &str = "wan";
/// Names a site may not take in a star or dumbbell (switches, link selectors).
pub const RESERVED: [&str; 6] = ["sw", "left", "right", "wan", "access", "all"];
/// Most hops of a route.
pub const MAX_HOPS: usize = 3;

/// The shape of a lab.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Topology {
    /// Every pair of sites its own link.
    #[default]
    Mesh,
    /// Every site on its own access link into one switch; `server`'s link is the shared port.
    Star {
        /// The site behind the port (default: the first site).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
    },
    /// Two groups of sites, each on access links into its switch, the switches joined by
    /// one WAN link.
    Dumbbell {
        /// The sites of the left group (default: the first half); the rest are right.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left: Vec<String>,
    },
}

/// The topology kinds, as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TopologyKind {
    /// See [`Topology::Mesh`].
    Mesh,
    /// See [`Topology::Star`].
    Star,
    /// See [`Topology::Dumbbell`].
    Dumbbell,
}

impl FromStr for TopologyKind {
    type Err = LabError;
    fn from_str(s: &str) -> Result<Self, LabError> {
        match s.trim() {
            "mesh" | "pairs" => Ok(TopologyKind::Mesh),
            "star" => Ok(TopologyKind::Star),
            "dumbbell" => Ok(TopologyKind::Dumbbell),
            _ => Err(LabError::value("topology", s, "use mesh, star or dumbbell")),
        }
    }
}

impl fmt::Display for TopologyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TopologyKind::Mesh => "mesh",
            TopologyKind::Star => "star",
            TopologyKind::Dumbbell => "dumbbell",
        })
    }
}

impl Topology {
    /// The topology of `kind` with its options: `server` belongs to a star, `left` to a
    /// dumbbell (an option of another kind is refused; both may be left out).
    pub fn of_kind(
        kind: TopologyKind,
        server: Option<String>,
        left: Vec<String>,
    ) -> Result<Topology, LabError> {
        let misplaced = |option: &str, belongs: TopologyKind| {
            Err(LabError::Usage(format!(
                "{option} belongs to topology {belongs}, not {kind}"
            )))
        };
        match kind {
            TopologyKind::Star if !left.is_empty() => misplaced("left", TopologyKind::Dumbbell),
            TopologyKind::Star => Ok(Topology::Star { server }),
            _ if server.is_some() => misplaced("server", TopologyKind::Star),
            TopologyKind::Dumbbell => Ok(Topology::Dumbbell { left }),
            TopologyKind::Mesh if !left.is_empty() => misplaced("left", TopologyKind::Dumbbell),
            TopologyKind::Mesh => Ok(Topology::Mesh),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> TopologyKind {
        match self {
            Topology::Mesh => TopologyKind::Mesh,
            Topology::Star { .. } => TopologyKind::Star,
            Topology::Dumbbell { .. } => TopologyKind::Dumbbell,
        }
    }
}

/// What a link is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// A point-to-point link between two sites (mesh).
    Pair,
    /// A site's access link into a switch.
    Access,
    /// The server's link into the star's switch: the shared bottleneck.
    Port,
    /// The dumbbell's shared link between its two switches.
    Wan,
}

/// One link: two directions, each with its own queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// Its name (`a-b`, a site name for its access link or port, `wan`).
    pub name: String,
    /// What it is.
    pub kind: LinkKind,
    /// Its two ends (sites or switches); direction 0 goes from `ends[0]` to `ends[1]`.
    pub ends: [String; 2],
}

/// One direction of a link.
#[derive(Debug, Clone, PartialEq)]
pub struct Direction {
    /// Index of its link.
    pub link: usize,
    /// Where it starts (a site or a switch).
    pub from: String,
    /// Where it ends.
    pub to: String,
    /// Sites whose traffic can cross it.
    pub upstream: Vec<usize>,
    /// Sites its traffic can reach.
    pub downstream: Vec<usize>,
}

/// The directions a packet crosses from one site to another, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Route {
    hops: [u16; MAX_HOPS],
    len: u8,
}

impl Route {
    fn of(dirs: &[usize]) -> Route {
        let mut r = Route::default();
        for (i, &d) in dirs.iter().enumerate().take(MAX_HOPS) {
            r.hops[i] = d as u16;
        }
        r.len = dirs.len().min(MAX_HOPS) as u8;
        r
    }

    /// The direction indices, first hop first.
    pub fn hops(&self) -> &[u16] {
        &self.hops[..usize::from(self.len)]
    }
}

/// The links, directions and routes of one lab.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Site names, index = site number.
    pub sites: Vec<String>,
    /// The topology it was built from (defaults filled in).
    pub topology: Topology,
    /// Every link; link `l` has directions `2l` and `2l + 1`.
    pub links: Vec<Link>,
    /// Every direction.
    pub directions: Vec<Direction>,
    routes: Vec<Route>,
}

impl Layout {
    /// Builds the layout of `topology` over `sites` (checked: names unique and valid
    /// elsewhere); fills in the default server / left group.
    pub fn new(topology: &Topology, sites: &[String]) -> Result<Layout, LabError> {
        let n = sites.len();
        let index = |s: &str| {
            sites
                .iter()
                .position(|x| x == s)
                .ok_or_else(|| LabError::Usage(format!("no site named '{s}' in this lab")))
        };
        if topology.kind() != TopologyKind::Mesh
            && let Some(s) = sites.iter().find(|s| RESERVED.contains(&s.as_str()))
        {
            return Err(LabError::Usage(format!(
                "site name '{s}' is reserved in a {} (switches and link names)",
                topology.kind()
            )));
        }
        let mut l = Layout {
            sites: sites.to_vec(),
            topology: topology.clone(),
            links: Vec::new(),
            directions: Vec::new(),
            routes: vec![Route::default(); n * n],
        };
        let all: Vec<usize> = (0..n).collect();
        let others = |i: usize| all.iter().copied().filter(|&j| j != i).collect::<Vec<_>>();
        match topology {
            Topology::Mesh => {
                for a in 0..n {
                    for b in a + 1..n {
                        let d = l.add(
                            &format!("{}-{}", sites[a], sites[b]),
                            LinkKind::Pair,
                            [&sites[a], &sites[b]],
                            [vec![a], vec![b]],
                        );
                        l.routes[a * n + b] = Route::of(&[d]);
                        l.routes[b * n + a] = Route::of(&[d + 1]);
                    }
                }
            }
            Topology::Star { server } => {
                let srv = match server {
                    Some(s) => index(s)?,
                    None => 0,
                };
                l.topology = Topology::Star {
                    server: Some(sites[srv].clone()),
                };
                let mut up = Vec::new();
                for (i, s) in sites.iter().enumerate() {
                    let kind = if i == srv {
                        LinkKind::Port
                    } else {
                        LinkKind::Access
                    };
                    up.push(l.add(s, kind, [s, STAR_SWITCH], [vec![i], others(i)]));
                }
                for a in 0..n {
                    for b in 0..n {
                        if a != b {
                            l.routes[a * n + b] = Route::of(&[up[a], up[b] + 1]);
                        }
                    }
                }
            }
            Topology::Dumbbell { left } => {
                let left: Vec<usize> = if left.is_empty() {
                    (0..n.div_ceil(2)).collect()
                } else {
                    left.iter().map(|s| index(s)).collect::<Result<_, _>>()?
                };
                if left.is_empty() || left.len() >= n {
                    return Err(LabError::Usage(
                        "a dumbbell needs at least one site on each side".into(),
                    ));
                }
                let right: Vec<usize> = (0..n).filter(|i| !left.contains(i)).collect();
                l.topology = Topology::Dumbbell {
                    left: left.iter().map(|&i| sites[i].clone()).collect(),
                };
                let mut up = Vec::new();
                for (i, s) in sites.iter().enumerate() {
                    let sw = if left.contains(&i) { "left" } else { "right" };
                    up.push(l.add(s, LinkKind::Access, [s, sw], [vec![i], others(i)]));
                }
                let wan = l.add(
                    WAN_LINK,
                    LinkKind::Wan,
                    ["left", "right"],
                    [left.clone(), right.clone()],
                );
                for a in 0..n {
                    for b in 0..n {
                        if a == b {
                            continue;
                        }
                        let hops = match (left.contains(&a), left.contains(&b)) {
                            (x, y) if x == y => vec![up[a], up[b] + 1],
                            (true, false) => vec![up[a], wan, up[b] + 1],
                            _ => vec![up[a], wan + 1, up[b] + 1],
                        };
                        l.routes[a * n + b] = Route::of(&hops);
                    }
                }
            }
        }
        Ok(l)
    }

    /// Adds a link whose direction 0 carries traffic of `sides[0]` to `sides[1]`; returns
    /// the index of direction 0.
    fn add(
        &mut self,
        name: &str,
        kind: LinkKind,
        ends: [&str; 2],
        sides: [Vec<usize>; 2],
    ) -> usize {
        let link = self.links.len();
        self.links.push(Link {
            name: name.to_string(),
            kind,
            ends: [ends[0].to_string(), ends[1].to_string()],
        });
        let [a, b] = sides;
        self.directions.push(Direction {
            link,
            from: ends[0].to_string(),
            to: ends[1].to_string(),
            upstream: a.clone(),
            downstream: b.clone(),
        });
        self.directions.push(Direction {
            link,
            from: ends[1].to_string(),
            to: ends[0].to_string(),
            upstream: b,
            downstream: a,
        });
        2 * link
    }

    /// The route from site `src` to site `dst` (empty for `src == dst`).
    pub fn route(&self, src: usize, dst: usize) -> Route {
        self.routes
            .get(src * self.sites.len() + dst)
            .copied()
            .unwrap_or_default()
    }

    /// A direction's name: `a -> b`, `c1 -> sw`, `left -> right`.
    pub fn direction_name(&self, d: usize) -> String {
        let x = &self.directions[d];
        format!("{} -> {}", x.from, x.to)
    }

    /// The link a change without `--link` applies to: every link of a mesh, the port of a
    /// star, the WAN of a dumbbell ("the link" of the lab's link flags).
    fn is_bottleneck(&self, link: usize) -> bool {
        match self.topology.kind() {
            TopologyKind::Mesh => true,
            TopologyKind::Star => self.links[link].kind == LinkKind::Port,
            TopologyKind::Dumbbell => self.links[link].kind == LinkKind::Wan,
        }
    }

    /// Index of the link named `name`.
    pub fn link_index(&self, name: &str) -> Result<usize, LabError> {
        self.links
            .iter()
            .position(|l| l.name == name)
            .ok_or_else(|| {
                LabError::Usage(format!(
                    "no link named '{name}' in this lab (links: {})",
                    self.links
                        .iter()
                        .map(|l| l.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }

    /// The directions a change selects: its `link` (a link name, `access` for every access
    /// link, `all`; default the bottleneck, see above), narrowed by `from` (directions that
    /// carry traffic from that site) and `to` (traffic to that site).
    pub fn select(&self, change: &LinkChange) -> Result<Vec<usize>, LabError> {
        let site = |s: &Option<String>| -> Result<Option<usize>, LabError> {
            s.as_ref()
                .map(|s| {
                    self.sites
                        .iter()
                        .position(|x| x == s)
                        .ok_or_else(|| LabError::Usage(format!("no site named '{s}' in this lab")))
                })
                .transpose()
        };
        let (from, to) = (site(&change.from)?, site(&change.to)?);
        let links: Vec<usize> = match change.link.as_deref() {
            None => (0..self.links.len())
                .filter(|&l| self.is_bottleneck(l))
                .collect(),
            Some("all") => (0..self.links.len()).collect(),
            Some("access") => (0..self.links.len())
                .filter(|&l| self.links[l].kind == LinkKind::Access)
                .collect(),
            Some(name) => vec![self.link_index(name)?],
        };
        Ok(links
            .into_iter()
            .flat_map(|l| [2 * l, 2 * l + 1])
            .filter(|&d| from.is_none_or(|f| self.directions[d].upstream.contains(&f)))
            .filter(|&d| to.is_none_or(|t| self.directions[d].downstream.contains(&t)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn route_names(l: &Layout, a: usize, b: usize) -> Vec<String> {
        l.route(a, b)
            .hops()
            .iter()
            .map(|&d| l.direction_name(usize::from(d)))
            .collect()
    }

    fn change(link: Option<&str>, from: Option<&str>, to: Option<&str>) -> LinkChange {
        LinkChange {
            link: link.map(String::from),
            from: from.map(String::from),
            to: to.map(String::from),
            ..LinkChange::default()
        }
    }

    #[test]
    fn mesh_has_a_link_per_pair() {
        let l = Layout::new(&Topology::Mesh, &names(&["a", "b", "c"])).unwrap();
        assert_eq!(l.links.len(), 3);
        assert_eq!(l.links[0].name, "a-b");
        assert_eq!(route_names(&l, 2, 0), ["c -> a"]);
        assert_eq!(l.select(&LinkChange::default()).unwrap().len(), 6);
        let from_a = l.select(&change(None, Some("a"), None)).unwrap();
        let named: Vec<String> = from_a.iter().map(|&d| l.direction_name(d)).collect();
        assert_eq!(named, ["a -> b", "a -> c"]);
        assert!(l.select(&change(None, Some("zz"), None)).is_err());
        assert!(l.select(&change(Some("a-zz"), None, None)).is_err());
    }

    #[test]
    fn star_routes_through_the_servers_port() {
        let sites = names(&["srv", "c1", "c2"]);
        let l = Layout::new(&Topology::Star { server: None }, &sites).unwrap();
        assert_eq!(
            l.topology,
            Topology::Star {
                server: Some("srv".into())
            }
        );
        assert_eq!(l.links[0].kind, LinkKind::Port);
        assert_eq!(route_names(&l, 1, 0), ["c1 -> sw", "sw -> srv"]);
        assert_eq!(route_names(&l, 0, 2), ["srv -> sw", "sw -> c2"]);
        assert_eq!(route_names(&l, 1, 2), ["c1 -> sw", "sw -> c2"]);
        // Default selection: the port; --to srv narrows it to the direction into the server.
        let port = l.select(&LinkChange::default()).unwrap();
        assert_eq!(port, [0, 1]);
        assert_eq!(l.select(&change(None, None, Some("srv"))).unwrap(), [1]);
        assert_eq!(l.select(&change(None, Some("c2"), None)).unwrap(), [1]);
        assert_eq!(
            l.select(&change(Some("access"), None, None)).unwrap().len(),
            4
        );
        assert_eq!(l.select(&change(Some("all"), None, None)).unwrap().len(), 6);
        assert_eq!(l.select(&change(Some("c1"), None, None)).unwrap(), [2, 3]);
        let bad = Layout::new(&Topology::Star { server: None }, &names(&["sw", "b"]));
        assert!(bad.unwrap_err().to_string().contains("reserved"));
    }

    #[test]
    fn dumbbell_crosses_the_wan_between_groups_only() {
        let sites = names(&["a1", "a2", "b1", "b2", "b3"]);
        let l = Layout::new(&Topology::Dumbbell { left: vec![] }, &sites).unwrap();
        assert_eq!(
            l.topology,
            Topology::Dumbbell {
                left: names(&["a1", "a2", "b1"])
            }
        );
        let l = Layout::new(
            &Topology::Dumbbell {
                left: names(&["a1", "a2"]),
            },
            &sites,
        )
        .unwrap();
        assert_eq!(
            route_names(&l, 0, 3),
            ["a1 -> left", "left -> right", "right -> b2"]
        );
        assert_eq!(
            route_names(&l, 4, 1),
            ["b3 -> right", "right -> left", "left -> a2"]
        );
        assert_eq!(route_names(&l, 0, 1), ["a1 -> left", "left -> a2"]);
        let wan = l.select(&LinkChange::default()).unwrap();
        assert_eq!(
            wan.iter().map(|&d| l.direction_name(d)).collect::<Vec<_>>(),
            ["left -> right", "right -> left"]
        );
        assert_eq!(l.select(&change(None, Some("b1"), None)).unwrap().len(), 1);
        let one_side = Topology::Dumbbell {
            left: sites.clone(),
        };
        assert!(Layout::new(&one_side, &sites).is_err());
    }

    #[test]
    fn options_belong_to_their_kind() {
        let k = |s: &str| s.parse::<TopologyKind>().unwrap();
        let srv = || Some("srv".to_string());
        assert_eq!(
            Topology::of_kind(k("star"), srv(), vec![]).unwrap(),
            Topology::Star { server: srv() }
        );
        assert_eq!(
            Topology::of_kind(k("dumbbell"), None, names(&["a"])).unwrap(),
            Topology::Dumbbell {
                left: names(&["a"])
            }
        );
        let e = Topology::of_kind(k("mesh"), srv(), vec![]).unwrap_err();
        assert_eq!(e.to_string(), "server belongs to topology star, not mesh");
        assert!(Topology::of_kind(k("star"), None, names(&["a"])).is_err());
        assert!(Topology::of_kind(k("dumbbell"), srv(), vec![]).is_err());
        assert!(Topology::of_kind(k("mesh"), None, names(&["a"])).is_err());
    }

    #[test]
    fn topology_kinds_round_trip() {
        for k in ["mesh", "star", "dumbbell"] {
            assert_eq!(k.parse::<TopologyKind>().unwrap().to_string(), k);
        }
        assert!("ring".parse::<TopologyKind>().is_err());
        let t: Topology = serde_json::from_str(r#"{"kind":"star"}"#).unwrap();
        assert_eq!(t, Topology::Star { server: None });
    }
}
