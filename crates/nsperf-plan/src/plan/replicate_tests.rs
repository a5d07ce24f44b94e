//! An io step's `replicate`: the mirror peer it makes the plan run, the engine's settings in
//! every cell, the conditions the report draws ceilings from, and the plan errors.

use super::{Action, Plan, ServiceKind};
use nsperf_io::mirror::Protocol;

const LAB: &str = r#"
name = "mirror"
[lab]
sites = ["a", "b"]
rate = "45mbit"
rtt = "{rtt}"
[matrix]
rtt = ["0ms", "50ms"]
protocol = ["A", "C"]
"#;

const STEP: &str = r#"name = "w"
type = "io"
site = "a"
dir = "/tmp/primary"
workload = "seqwrite"
size = "1m"
bs = "64k"
replicate = { peer = "b", protocol = "{protocol}", in_flight = "256k", congestion = "cubic", compare = true }"#;

fn plan(steps: &[&str]) -> Result<Plan, String> {
    let mut text = LAB.to_string();
    for s in steps {
        text.push_str(&format!("\n[[step]]\n{s}\n"));
    }
    Plan::parse(text.as_bytes()).map_err(|e| e.to_string())
}

#[test]
fn a_replicated_io_step_runs_over_rtt_and_protocol_with_one_peer() {
    let p = plan(&[STEP]).unwrap();
    assert_eq!(p.cells.len(), 4, "rtt x protocol");
    assert_eq!(p.services.len(), 1, "{:?}", p.services);
    let peer = &p.services[0];
    assert_eq!(peer.name, "mirror.b");
    assert_eq!(peer.site.as_deref(), Some("b"));
    assert_eq!(
        peer.kind,
        ServiceKind::MirrorPeer {
            dir: "/tmp/primary".into()
        }
    );
    assert_eq!(
        peer.describe(),
        "mirror.b (mirror peer writing under /tmp/primary in site b)"
    );
    for cell in &p.cells {
        let s = &cell.steps[0];
        assert_eq!(s.service(), Some("mirror.b"));
        assert!(s.needs_lab(true));
        let Action::Io(io) = &s.action else { panic!() };
        let r = io.config.replicate.as_ref().unwrap();
        let want: Protocol = cell.params[1].1.parse().unwrap();
        assert_eq!(r.protocol, want);
        assert_eq!(r.peer, "10.77.0.2:0", "the port is the running peer's");
        assert_eq!(r.max_in_flight_bytes, 256 << 10);
        assert_eq!(r.congestion.as_deref(), Some("cubic"));
        assert!(r.compare && !r.check);
        // The report's ceilings: the link, and the mirror's window.
        let c = cell.conditions(s);
        assert!(c.in_lab);
        assert_eq!(c.link_rate_bps, Some(45e6));
        let window = if want == Protocol::A {
            256 << 10
        } else {
            64 << 10
        };
        assert_eq!(c.window_bytes, Some(window), "{want}");
        let names: Vec<&str> = s.params.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["rtt", "protocol"]);
    }
    assert_eq!(
        p.cells[3].conditions(&p.cells[3].steps[0]).rtt_s,
        Some(0.05)
    );
    // Defaults: protocol C, DRBD's 8 MiB in flight, the step's own dir; two steps share the
    // peer when they write under one directory.
    let plain = STEP.replace(
        "{ peer = \"b\", protocol = \"{protocol}\", in_flight = \"256k\", congestion = \"cubic\", compare = true }",
        "{ peer = \"b\" }",
    );
    let other = plain
        .replace("name = \"w\"", "name = \"w2\"")
        .replace("seqwrite", "randwrite");
    let p = plan(&[&plain, &other]).unwrap();
    assert_eq!(p.services.len(), 1);
    let Action::Io(io) = &p.cells[0].steps[0].action else {
        panic!()
    };
    let r = io.config.replicate.as_ref().unwrap();
    assert_eq!(r.protocol, Protocol::C);
    assert_eq!(
        r.max_in_flight_bytes,
        nsperf_io::mirror::DEFAULT_MAX_IN_FLIGHT
    );
    assert!(!r.compare && r.congestion.is_none());
    assert_eq!(p.cells.len(), 2, "repeated over rtt only");
}

#[test]
fn bad_replicate_settings_are_plan_errors_at_load() {
    let with = |from: &str, to: &str| STEP.replace(from, to);
    let cases: Vec<(String, &str)> = vec![
        (
            with("peer = \"b\"", "peer = \"moon\""),
            "no site \"moon\" in the lab",
        ),
        (
            with("peer = \"b\"", "peer = \"a\""),
            "is the step's own site",
        ),
        (with("site = \"a\"\n", ""), "the step needs site = \"SITE\""),
        (
            with("seqwrite", "meta"),
            "mirrors the record workloads (seqwrite, randwrite, randrw, …), not meta",
        ),
        (
            with("dir = \"/tmp/primary\"", "dir = \"nfs://10.77.0.2/srv\""),
            "mirrors the files of a local directory, not nfs://",
        ),
        (
            with("protocol = \"{protocol}\"", "protocol = \"D\""),
            "unknown replication protocol \"D\"",
        ),
        (
            with("compare = true", "compare = true, port = 1"),
            "unknown field `port`",
        ),
        (
            with("in_flight = \"256k\"", "in_flight = \"lots\""),
            "replicate.in_flight",
        ),
        (
            with("in_flight = \"256k\"", "in_flight = \"0\""),
            "in_flight: must be at least 1 byte",
        ),
        (
            with(
                "workload = \"seqwrite\"",
                "workload = \"seqwrite\"\nengine = \"uring\"",
            ),
            "not --engine uring",
        ),
    ];
    for (step, want) in &cases {
        let e = plan(&[step]).unwrap_err();
        assert!(e.contains(want), "want {want:?} in: {e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
    // Two steps asking the one peer of site b to write under two directories.
    let other = STEP
        .replace("name = \"w\"", "name = \"w2\"")
        .replace("/tmp/primary", "/tmp/other");
    let e = plan(&[STEP, &other]).unwrap_err();
    assert!(e.contains("one peer per site"), "{e}");
    // Without a lab there is no site to replicate to.
    let e = Plan::parse(
        format!(
            "name = \"x\"\n[[step]]\n{}",
            STEP.replace("site = \"a\"\n", "")
        )
        .as_bytes(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("sites need a [lab] section"), "{e}");
    // A [[service]] named as the peer.
    let e = Plan::parse(
        format!("{LAB}\n[[service]]\nname = \"mirror.b\"\nsite = \"b\"\ndir = \"/srv\"\n[[step]]\n{STEP}\n[[step]]\nname = \"r\"\ntype = \"io\"\nservice = \"mirror.b\"\nsite = \"a\"\nworkload = \"seqread\"\n").as_bytes(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("name the [[service]] otherwise"), "{e}");
}

#[test]
fn the_example_plan_mirrors_over_the_access_links_and_across_the_wan() {
    let p = Plan::parse(include_str!("../../../../examples/replication.toml").as_bytes()).unwrap();
    assert_eq!(p.services.len(), 2);
    let mut seen = (0, 0);
    for cell in &p.cells {
        for s in &cell.steps {
            let Action::Io(io) = &s.action else { panic!() };
            let peer = io.peer.as_ref().unwrap();
            let c = cell.conditions(s);
            match s.name.as_str() {
                // primary and ha share the dumbbell's left side: their access links only.
                "ha-pair" => {
                    seen.0 += 1;
                    assert!(!peer.crosses_link);
                    assert_eq!((c.link_rate_bps, c.rtt_s), (Some(1e9), None));
                    assert_eq!(io.config.replicate.as_ref().unwrap().peer, "10.77.0.2:0");
                }
                _ => {
                    seen.1 += 1;
                    // The shared step's load crosses the WAN the mirror crosses.
                    if let Some(l) = &s.load {
                        assert_eq!(s.name, "two-site-shared");
                        assert!(
                            matches!(&l.shared, super::SharedPath::Link { name, rate_bps: Some(r) } if name == "wan" && *r == 45e6)
                        );
                    }
                    assert!(peer.crosses_link);
                    assert_eq!(c.link_rate_bps, Some(45e6));
                    assert_eq!(io.config.replicate.as_ref().unwrap().peer, "10.77.0.3:0");
                }
            }
        }
    }
    // ha-pair once: it crosses only the access links, so neither the WAN's rtt nor the
    // protocol (which it does not name) repeats it; two-site and two-site-shared per rtt
    // and protocol.
    assert_eq!(seen, (1, 16));
}
