//! A step's `load`: the streams the runner keeps between two lab sites while the step runs,
//! the link they share with the step's own traffic in each cell, and the plan errors.

use super::{Action, Plan, SharedPath};

const LAB: &str = r#"
name = "shared"
[lab]
sites = ["primary", "ha", "dr"]
topology = "dumbbell"
left = ["primary", "ha"]
rate = "45mbit"
rtt = "{rtt}"
access_rate = "1gbit"
[matrix]
rtt = ["0ms", "50ms"]
"#;

fn plan(step: &str) -> Result<Plan, String> {
    Plan::parse(format!("{LAB}\n[[step]]\n{step}\n").as_bytes()).map_err(|e| e.to_string())
}

const MIRROR: &str = r#"name = "w"
type = "io"
site = "primary"
dir = "/tmp/primary"
workload = "seqwrite"
replicate = { peer = "dr" }"#;

#[test]
fn a_load_across_the_wan_shares_it_with_the_mirror() {
    let p = plan(&format!(
        "{MIRROR}\nload = {{ from = \"ha\", to = \"dr\", streams = 4, cc = \"cubic\", ramp = \"2s\" }}"
    ))
    .unwrap();
    assert_eq!(
        p.cells.len(),
        2,
        "the step crosses the WAN: one run per rtt"
    );
    let s = &p.cells[1].steps[0];
    let l = s.load.as_ref().unwrap();
    assert_eq!(
        (l.from.as_str(), l.to.as_str(), l.to_index),
        ("ha", "dr", 2)
    );
    assert_eq!(l.params.streams, 4);
    assert_eq!(l.params.congestion.as_deref(), Some("cubic"));
    assert_eq!(l.ramp.as_secs(), 2);
    assert_eq!(l.port, nsperf_net::DEFAULT_PORT + 1);
    assert_eq!(
        l.shared,
        SharedPath::Link {
            name: "wan".into(),
            rate_bps: Some(45e6)
        }
    );
    assert!(s.needs_lab(true));
    assert!(
        l.to_string().contains("shares link wan (45.0 Mbit/s)"),
        "{l}"
    );
}

#[test]
fn what_a_load_shares_follows_the_traffics_directions() {
    // Into primary's side while the mirror sends out of it: no direction in common.
    let p = plan(&format!(
        "{MIRROR}\nload = {{ from = \"dr\", to = \"ha\" }}"
    ))
    .unwrap();
    assert_eq!(
        p.cells[0].steps[0].load.as_ref().unwrap().shared,
        SharedPath::Apart
    );
    // Out of primary's own access link: the access link (1 Gbit/s) is narrower than
    // nothing else shared.
    let p = plan(&format!(
        "{MIRROR}\nload = {{ from = \"primary\", to = \"ha\" }}"
    ))
    .unwrap();
    assert_eq!(
        p.cells[0].steps[0].load.as_ref().unwrap().shared,
        SharedPath::Link {
            name: "primary".into(),
            rate_bps: Some(1e9)
        }
    );
    // Out of primary across the WAN: the WAN, the narrowest of the three hops shared.
    let p = plan(&format!(
        "{MIRROR}\nload = {{ from = \"primary\", to = \"dr\" }}"
    ))
    .unwrap();
    let Some(SharedPath::Link { name, .. }) = p.cells[0].steps[0].load.as_ref().map(|l| &l.shared)
    else {
        panic!()
    };
    assert_eq!(name, "wan");
    // A network step's reverse test flows server to client; a command's path is unknown.
    let net = "name = \"n\"\ntype = \"net\"\nclient = \"dr\"\nserver = \"primary\"\nreverse = true";
    let p = plan(&format!("{net}\nload = {{ from = \"ha\", to = \"dr\" }}")).unwrap();
    assert!(matches!(
        p.cells[0].steps[0].load.as_ref().unwrap().shared,
        SharedPath::Link { .. }
    ));
    let cmd = "name = \"c\"\ntype = \"exec\"\nsite = \"primary\"\ncommand = [\"true\"]";
    let p = plan(&format!("{cmd}\nload = {{ from = \"ha\", to = \"dr\" }}")).unwrap();
    assert_eq!(
        p.cells[0].steps[0].load.as_ref().unwrap().shared,
        SharedPath::Unknown
    );
    let Action::Exec(_) = &p.cells[0].steps[0].action else {
        panic!()
    };
}

#[test]
fn a_bad_load_is_a_plan_error() {
    for (load, says) in [
        ("{ from = \"ha\", to = \"ha\" }", "both \"ha\""),
        ("{ from = \"ha\", to = \"nowhere\" }", "no site \"nowhere\""),
        ("{ from = \"ha\" }", "missing field `to`"),
        (
            "{ from = \"ha\", to = \"dr\", streams = 0 }",
            "load.streams",
        ),
        (
            "{ from = \"ha\", to = \"dr\", cc = \"no such\" }",
            "congestion",
        ),
        (
            "{ from = \"ha\", to = \"dr\", ramp = \"2m\" }",
            "at most 60 s",
        ),
        (
            "{ from = \"ha\", to = \"dr\", window = \"lots\" }",
            "load.window",
        ),
        (
            "{ from = \"ha\", to = \"dr\", rate = \"1m\" }",
            "unknown field `rate`",
        ),
    ] {
        let e = plan(&format!("{MIRROR}\nload = {load}")).unwrap_err();
        assert!(e.contains(says), "{load}: {e}");
    }
    // The step's own server's port in the same site.
    let net = "name = \"n\"\ntype = \"net\"\nclient = \"primary\"\nserver = \"dr\"\nport = 6000";
    let e = plan(&format!(
        "{net}\nload = {{ from = \"ha\", to = \"dr\", port = 6000 }}"
    ))
    .unwrap_err();
    assert!(e.contains("port 6000"), "{e}");
    // Without a lab.
    let e = Plan::parse(
        b"name = \"x\"\n[[step]]\nname = \"c\"\ntype = \"exec\"\ncommand = [\"true\"]\nload = { from = \"a\", to = \"b\" }\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("load"), "{e}");
}

/// Issue 25: what a load shares is read from the cell's links as `lab up` sets them, not from
/// the kind of link: a cell that slows one access link (`link_args`, per cell) or one way of
/// a mesh's link is seen.
#[test]
fn what_a_load_shares_is_the_cells_own_rate_of_each_link() {
    // primary's access link at the matrix's rate, the other access links unlimited (an
    // `access_rate` would be set over every access link after it, as `lab up` does): the
    // load out of primary shares its access link with the mirror at that rate.
    let text = format!(
        r#"name = "one-slow-access"
[lab]
sites = ["primary", "ha", "dr"]
topology = "dumbbell"
left = ["primary", "ha"]
rate = "45mbit"
link_args = ["--link", "primary", "--rate", "{{slow}}"]
[matrix]
slow = ["10mbit", "100mbit"]
[[step]]
{MIRROR}
load = {{ from = "primary", to = "ha" }}
"#
    );
    let p = Plan::parse(text.as_bytes()).unwrap();
    let shared: Vec<_> = p
        .cells
        .iter()
        .map(|c| c.steps[0].load.as_ref().unwrap().shared.clone())
        .collect();
    let link = |r: f64| SharedPath::Link {
        name: "primary".into(),
        rate_bps: Some(r),
    };
    assert_eq!(shared, [link(10e6), link(100e6)], "per cell");
    // A mesh whose way into dr alone is limited: a load from ha to dr shares that way with
    // a net step sending from ha to dr, at its rate; into ha nothing is limited.
    let mesh = |to: &str| {
        format!(
            r#"name = "one-way"
[lab]
sites = ["ha", "dr"]
link_args = ["--to", "{to}", "--rate", "20mbit"]
[[step]]
name = "n"
type = "net"
client = "ha"
server = "dr"
load = {{ from = "ha", to = "dr" }}
"#
        )
    };
    let shared = |text: String| {
        let p = Plan::parse(text.as_bytes()).unwrap();
        p.cells[0].steps[0].load.as_ref().unwrap().shared.clone()
    };
    assert_eq!(
        shared(mesh("dr")),
        SharedPath::Link {
            name: "ha-dr".into(),
            rate_bps: Some(20e6)
        }
    );
    assert_eq!(
        shared(mesh("ha")),
        SharedPath::Link {
            name: "ha-dr".into(),
            rate_bps: None
        }
    );
}
