use nsperf_core::Bytes;
use nsperf_net::Mode;
use nsperf_results::ParamKind;

use super::*;

const SMALL: &str = r#"
name = "small"
repetitions = 2

[matrix]
n = [1, 2]
mode = ["a", "b"]

[[step]]
name = "sleepy"
type = "exec"
command = ["sleep", "0.{n}"]
payload = "1m"

[[step]]
name = "other"
type = "exec"
command = ["echo", "{mode}"]
"#;

fn err_of(text: &str) -> String {
    Plan::parse(text.as_bytes()).unwrap_err().to_string()
}

#[test]
fn matrix_expands_per_step_parameters() {
    let p = Plan::parse(SMALL.as_bytes()).unwrap();
    assert_eq!(p.repetitions, 2);
    assert_eq!(p.matrix.len(), 2);
    // sleepy depends on n only (2 cells), other on mode only (2 cells).
    let runs = p.runs();
    let sleepy = runs.iter().filter(|r| r.2.step == "sleepy").count();
    let other = runs.iter().filter(|r| r.2.step == "other").count();
    assert_eq!((sleepy, other), (4, 4));
    assert_eq!(p.total_runs(), 8);
    let c = &p.cells[0];
    assert_eq!(c.key(), "n=1,mode=a");
    let Action::Exec(e) = &c.steps[0].action else {
        panic!()
    };
    assert_eq!(e.command, ["sleep", "0.1"]);
    assert_eq!(e.payload, Payload::Declared(Bytes(1 << 20)));
    let (name, n) = &c.steps[0].params[0];
    assert_eq!((name.as_str(), n.value.as_str()), ("n", "1"));
    assert_eq!(c.steps[0].params.len(), 1);
    // Runs are unique.
    let mut keys: Vec<_> = runs.iter().map(|r| r.2.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 8);
}

#[test]
fn default_plan_parses() {
    let p = Plan::parse(DEFAULT_PLAN.as_bytes()).unwrap();
    assert_eq!(p.repetitions, 3);
    let lab = p.lab.as_ref().unwrap();
    assert_eq!(lab.sites, ["client", "server"]);
    let tcp: Vec<_> = p
        .cells
        .iter()
        .flat_map(|c| c.steps.iter().map(move |s| (c, s)))
        .filter(|(_, s)| s.name == "tcp")
        .collect();
    assert_eq!(tcp.len(), 12, "4 RTTs x 3 windows");
    // The fixed 64 KiB window beside the autotuned default and the BDP: the headline chart's
    // window/RTT curve.
    let windows: Vec<Option<u64>> = tcp
        .iter()
        .filter(|(c, _)| c.key().contains("rtt=150ms"))
        .map(|(_, s)| match &s.action {
            Action::Net(n) => n.params.window,
            _ => panic!("tcp is a net step"),
        })
        .collect();
    assert_eq!(
        windows,
        [
            Some(64 * 1024),
            None,
            Some((45_000_000u64 * 150 / 1000 / 8).div_ceil(1024) * 1024)
        ]
    );
    // The BDP window at 45 Mbit/s and 100 ms: 562500 bytes, rounded up to a KiB.
    let (c, s) = tcp
        .iter()
        .find(|(c, s)| {
            c.key().contains("rtt=100ms")
                && s.params
                    .iter()
                    .any(|(k, v)| k == "window" && v.template.as_deref() == Some("{bdp}"))
        })
        .unwrap();
    let Action::Net(n) = &s.action else { panic!() };
    assert_eq!(n.params.window, Some(562_500u64.div_ceil(1024) * 1024));
    // Issue #14: the parameter holds the resolved window, typed, beside its template; the
    // RTT is a duration, so it sorts by time.
    let w = &s.params.iter().find(|(k, _)| k == "window").unwrap().1;
    assert_eq!(w.value, (562_500u64.div_ceil(1024) * 1024).to_string());
    assert_eq!(
        (w.kind, w.label()),
        (ParamKind::Size, "550 KiB".to_string())
    );
    let rtt = &s.params.iter().find(|(k, _)| k == "rtt").unwrap().1;
    assert_eq!((rtt.kind, rtt.number), (ParamKind::Duration, Some(0.1)));
    let io = p
        .cells
        .iter()
        .flat_map(|c| &c.steps)
        .find(|s| s.name == "io")
        .unwrap();
    let record = &io.params.iter().find(|(k, _)| k == "record").unwrap().1;
    assert_eq!(
        record.kind,
        ParamKind::Size,
        "a record size, not minutes: {record:?}"
    );
    assert_eq!(
        link_rtt(c.link.as_ref().unwrap()),
        Some(Duration::from_millis(100))
    );
    let io = p.runs().iter().filter(|r| r.2.step == "io").count();
    assert_eq!(io, 8 * 3);
    default_plan_nfs(&p);
}

/// Issue 12 item 7: the default plan's NFS steps go through its embedded NFS server in the
/// lab's server site, from the client site, at every RTT and at no other parameter; reads
/// cold and remote-warm, writes once; one 64 KiB RPC in flight, recorded as a 64 KiB window
/// so the report draws its window/RTT ceiling beside TCP's.
fn default_plan_nfs(p: &Plan) {
    assert_eq!(p.services.len(), 1);
    assert_eq!(p.services[0].name, "nfs");
    assert_eq!(p.services[0].site.as_deref(), Some("server"));
    let runs = p.runs();
    for (step, phases) in [
        ("nfs-read", &[Phase::Cold, Phase::RemoteWarm][..]),
        ("nfs-write", &[Phase::None][..]),
    ] {
        let cells: Vec<&Cell> = p
            .cells
            .iter()
            .filter(|c| c.steps.iter().any(|s| s.name == step))
            .collect();
        assert_eq!(cells.len(), 4, "{step}: once per RTT");
        for c in cells {
            let s = c.steps.iter().find(|s| s.name == step).unwrap();
            assert_eq!(s.phases, phases, "{step}");
            let names: Vec<&str> = s.params.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(names, ["rtt"], "{step} depends on the RTT only");
            let Action::Io(io) = &s.action else {
                panic!("{step} is an io step")
            };
            assert_eq!(io.site.as_deref(), Some("client"));
            assert_eq!(io.service.as_ref().unwrap().name, "nfs");
            assert!(io.is_remote());
            assert_eq!((io.config.iodepth, io.config.bs_bytes), (1, 64 * 1024));
            let cond = c.conditions(s);
            assert_eq!(cond.window_bytes, Some(64 * 1024));
            assert_eq!(cond.link_rate_bps, Some(45e6));
        }
        let n = runs.iter().filter(|r| r.2.step == step).count();
        assert_eq!(n, 4 * phases.len() * 3, "{step}");
    }
    assert_eq!(p.total_runs(), 36 + 24 + 36);
}

#[test]
fn strict_errors_name_the_place() {
    assert!(
        err_of("name = \"x\"\nbogus = 1\n[[step]]\nname=\"a\"\ntype=\"exec\"\ncommand=[\"true\"]")
            .contains("bogus")
    );
    assert!(err_of("name = \"x\"").contains("no [[step]]"));
    assert!(
        err_of("name = \"x\"\n[[step]]\nname=\"a\"\ntype=\"fly\"").contains("unknown type \"fly\"")
    );
    let e =
        err_of("name = \"x\"\n[[step]]\nname=\"a\"\ntype=\"exec\"\ncommand=[\"true\"]\ndir=\".\"");
    assert!(
        e.contains("field \"dir\" does not apply to a exec step"),
        "{e}"
    );
    let e = err_of("name = \"x\"\n[[step]]\nname=\"a\"\ntype=\"exec\"\ncommand=[\"{nope}\"]");
    assert!(e.contains("unknown variable {nope}"), "{e}");
    let e = err_of(
        "name = \"x\"\n[matrix]\nw=[\"1k\",\"zz\"]\n[[step]]\nname=\"a\"\ntype=\"io\"\nworkload=\"seqread\"\nbs=\"{w}\"",
    );
    assert!(
        e.contains("cell w=zz") && e.contains("invalid size 'zz'"),
        "{e}"
    );
    let e = err_of("name = \"x\"\n[[step]]\nname=\"a\"\ntype=\"net\"\nclient=\"a\"\nserver=\"b\"");
    assert!(e.contains("need a [lab]"), "{e}");
    let e = err_of(
        "name = \"x\"\n[[step]]\nname=\"a\"\ntype=\"exec\"\ncommand=[\"x\"]\nphases=[\"remote-warm\"]",
    );
    assert!(e.contains("prime"), "{e}");
    let e = err_of(
        "name = \"x\"\n[[step]]\nname=\"a\"\ntype=\"exec\"\ncommand=[\"x\"]\npayload_regex=\"bytes\"",
    );
    assert!(e.contains("capture group"), "{e}");
    assert!(
        err_of(
            "name = \"x\"\nrepetitions = 0\n[[step]]\nname=\"a\"\ntype=\"exec\"\ncommand=[\"x\"]"
        )
        .contains("repetitions")
    );
    assert!(err_of("name = 5").contains("invalid type"));
    assert!(matches!(
        Plan::parse(&[0xff, 0xfe]),
        Err(PlanError::NotUtf8)
    ));
}

#[test]
fn examples_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            // A capture an example names is relative to the repository's root, where the
            // examples run from (tests run in the crate's directory): read from there.
            let text = std::fs::read_to_string(&p).unwrap().replace(
                "capture = \"examples/",
                &format!("capture = \"{}/", dir.display()),
            );
            Plan::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            n += 1;
        }
    }
    assert!(n >= 3, "examples/*.toml: {n}");
}

/// A seeded xorshift, so the random-input test is reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_and_truncated_bytes_never_panic() {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let seeds = [SMALL, DEFAULT_PLAN];
    for _ in 0..3000 {
        let len = (rng.next() % 300) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let _ = Plan::parse(&bytes);
    }
    for s in seeds {
        let b = s.as_bytes();
        for cut in 0..b.len() {
            let _ = Plan::parse(&b[..cut]);
        }
        // Random byte flips in a valid plan.
        for _ in 0..1000 {
            let mut v = b.to_vec();
            let i = (rng.next() as usize) % v.len();
            v[i] = rng.next() as u8;
            let _ = Plan::parse(&v);
        }
    }
}

#[test]
fn rr_step_takes_awake() {
    let p = Plan::parse(
        br#"
name = "wake"
[[step]]
name = "rr"
type = "rr"
awake = true
"#,
    )
    .unwrap();
    let Action::Net(n) = &p.cells[0].steps[0].action else {
        panic!()
    };
    assert!(n.params.awake);
    assert!(matches!(n.params.mode, Mode::Rr { .. }));
    assert!(
        err_of("name = \"x\"\n[[step]]\nname = \"s\"\ntype = \"rr\"\nawake = \"maybe\"\n")
            .contains("awake")
    );
}

/// netperf's burst: transactions in flight per connection (the replication "window").
#[test]
fn rr_step_takes_a_burst_checked_by_the_engine() {
    let p = Plan::parse(
        b"name = \"b\"\n[matrix]\nb = [1, 16]\n[[step]]\nname = \"rr\"\ntype = \"rr\"\nsize = \"4k\"\nburst = \"{b}\"\n",
    )
    .unwrap();
    let bursts: Vec<u32> = p
        .cells
        .iter()
        .map(|c| match &c.steps[0].action {
            Action::Net(n) => match n.params.mode {
                Mode::Rr { burst, .. } => burst,
                _ => panic!("not rr"),
            },
            _ => panic!("not net"),
        })
        .collect();
    assert_eq!(bursts, [1, 16]);
    let e = err_of("name = \"x\"\n[[step]]\nname = \"s\"\ntype = \"rr\"\nburst = 0\n");
    assert!(e.contains("burst"), "{e}");
    // Above the engine's limit: its own message.
    let e = err_of("name = \"x\"\n[[step]]\nname = \"s\"\ntype = \"rr\"\nburst = 100000000\n");
    assert!(e.contains("burst"), "{e}");
    let e = err_of("name = \"x\"\n[[step]]\nname = \"s\"\ntype = \"net\"\nburst = 4\n");
    assert!(e.contains("burst"), "{e}");
}

/// Issue #11: a plan can ask for a minimum measured time per io run (fio's runtime +
/// time_based: the file is gone over again until it has passed).
#[test]
fn io_step_takes_a_minimum_measured_time() {
    let p = Plan::parse(
        br#"
name = "long-enough"
[[step]]
name = "r"
type = "io"
workload = "seqread"
size = "4m"
time = "3s"
"#,
    )
    .unwrap();
    let Action::Io(io) = &p.cells[0].steps[0].action else {
        panic!()
    };
    assert_eq!(io.config.time, Some(Duration::from_secs(3)));
    assert!(io.config.time_based);
    let io = |field: &str| {
        err_of(&format!(
            "name = \"x\"\n[[step]]\nname = \"i\"\ntype = \"io\"\nworkload = \"seqread\"\n{field}\n"
        ))
    };
    assert!(io("time = \"0s\"").contains("time"));
    assert!(io("time = \"soon\"").contains("time"));
}

/// A plan with a lab and one step, for the lab rule tests.
fn lab_plan(lab: &str, extra: &str) -> String {
    format!(
        "name = \"x\"\n[lab]\n{lab}\n{extra}\n[[step]]\nname = \"t\"\ntype = \"net\"\nclient = \"a\"\nserver = \"b\"\n"
    )
}

/// Issue #10: every rule that `lab up` checks is checked when the plan is loaded, so
/// `--dry-run` fails where `lab up` would.
#[test]
fn lab_rules_are_the_labs_own() {
    let sites = "sites = [\"a\", \"b\"]";
    // Site names: the lab takes 1-12 of a-z, 0-9, _ starting with a letter.
    for bad in ["A", "site-1", "1a", "averyveryverylongname", "a.b"] {
        let e = err_of(&lab_plan(&format!("sites = [\"a\", \"{bad}\"]"), ""));
        assert!(e.contains("[lab]") && e.contains(bad), "{bad}: {e}");
    }
    // Lab names likewise.
    let e = err_of(&lab_plan(&format!("name = \"My-Lab\"\n{sites}"), ""));
    assert!(e.contains("My-Lab"), "{e}");
    // Link flags go through the lab's own parser: values and unknown flags.
    for (args, what) in [
        ("[\"--mtu\", \"10000\"]", "mtu"),
        ("[\"--loss\", \"1\"]", "loss"),
        ("[\"--speed\", \"1g\"]", "speed"),
        ("[\"--from\", \"c\"]", "'c'"),
        ("[\"--rate\"]", "rate"),
    ] {
        let e = err_of(&lab_plan(sites, &format!("link_args = {args}")));
        assert!(e.contains(what), "{args}: {e}");
    }
    // A rate the lab refuses (below 8 kbit/s) fails here, not at `lab up`.
    let e = err_of(&lab_plan(&format!("{sites}\nrate = \"1kbit\""), ""));
    assert!(e.contains("rate"), "{e}");
    // The net engine's own rules: more streams than it allows, a bad cc name.
    let net = |field: &str| {
        err_of(&format!(
            "name = \"x\"\n[[step]]\nname = \"t\"\ntype = \"net\"\n{field}\n"
        ))
    };
    assert!(net("streams = 5000").contains("parallel streams"));
    assert!(net("cc = \"no such\"").contains("congestion"));
    assert!(net("length = \"1g\"").contains("message size"));
    // The io engine's: enums by their FromStr, combinations by validate().
    let io = |field: &str| {
        err_of(&format!(
            "name = \"x\"\n[[step]]\nname = \"i\"\ntype = \"io\"\nworkload = \"seqread\"\n{field}\n"
        ))
    };
    assert!(io("engine = \"floppy\"").contains("unknown engine"));
    assert!(io("cache = \"hot\"").contains("unknown cache mode"));
    assert!(io("iodepth = 8").contains("--engine uring"));
    assert!(io("cache = \"direct\"\nbs = \"1000\"").contains("multiple of 512"));
    assert!(
        err_of("name = \"x\"\n[[step]]\nname = \"i\"\ntype = \"io\"\nworkload = \"nope\"\n")
            .contains("unknown workload")
    );
}

/// Issue #10: `--mtu` in `link_args`, even from the matrix, is a lab link flag the plan
/// understands (the runner rebuilds the lab when it changes).
#[test]
fn mtu_in_a_matrix_loads() {
    let p = Plan::parse(
        br#"
name = "jumbo"
[lab]
sites = ["a", "b"]
rate = "1gbit"
link_args = ["--mtu", "{mtu}", "--loss=0%"]
[matrix]
mtu = [1500, 9000]
[[step]]
name = "t"
type = "net"
client = "a"
server = "b"
"#,
    )
    .unwrap();
    let mtus: Vec<u32> = p
        .cells
        .iter()
        .map(|c| c.link.as_ref().unwrap().mtu())
        .collect();
    assert_eq!(mtus, [1500, 9000]);
    let (name, mtu) = &p.cells[0].steps[0].params[0];
    assert_eq!((name.as_str(), mtu.value.as_str()), ("mtu", "1500"));
}

#[test]
fn unnamed_labs_get_a_name_per_run() {
    let spec = LabSpec {
        name: None,
        sites: vec!["a".into(), "b".into()],
        shape: LabShape::default(),
    };
    let a = spec.name_for_run(4_194_304, 1_700_000_000_000_000_000);
    let b = spec.name_for_run(4_194_303, 1_700_000_000_000_000_000);
    assert_ne!(a, b);
    assert!(a.len() <= 12, "{a}");
    nsperf_lab::config::check_name("lab name", &a).unwrap();
    let named = LabSpec {
        name: Some("t3".into()),
        ..spec
    };
    assert_eq!(named.name_for_run(1, 2), "t3");
}

/// Issue #15: a star or dumbbell in `[lab]`, its access links templated per cell, checked
/// at load with the lab's own rules.
#[test]
fn lab_topologies_load_and_are_checked() {
    let star = r#"
name = "office"
[lab]
sites = ["srv"]
clients = 2
topology = "star"
rate = "1g"
access_rate = "{access}"
access_delay = "1ms"
memory = "64m"
seed = 7
[matrix]
access = ["100mbit", "1g"]
[[step]]
name = "t"
type = "net"
client = "c2"
server = "srv"
"#;
    let p = Plan::parse(star.as_bytes()).unwrap();
    let lab = p.lab.as_ref().unwrap();
    assert_eq!(lab.sites, ["srv", "c1", "c2"]);
    assert_eq!(
        lab.shape,
        LabShape {
            topology: nsperf_lab::Topology::Star {
                server: Some("srv".into())
            },
            memory_bytes: Some(64 << 20),
            seed: Some(7),
        }
    );
    let links: Vec<_> = p.cells.iter().map(|c| c.link.clone().unwrap()).collect();
    assert_eq!(links[0].access.rate_bps, Some(100e6));
    assert_eq!(links[1].access.rate_bps, Some(1e9));
    assert_eq!(links[1].access.delay_ns, Some(1_000_000));
    assert_eq!(links[1].change.rate_bps, Some(1e9));
    assert_eq!(
        describe_link(&links[0]),
        "--rate 1000000000bit --access-rate 100000000bit --access-delay 1ms"
    );
    // The step runs over the access parameter: it is a link setting.
    assert_eq!(p.total_runs(), 2 * 3);
    let cfg = up_config("x", &lab.sites, &lab.shape, &links[0]);
    nsperf_lab::lab::plan(&cfg).unwrap();

    // capture = "link": the bottleneck of the step's path.
    let captured =
        |plan: &str| match &Plan::parse(plan.as_bytes()).unwrap().cells[0].steps[0].action {
            Action::Net(n) => n.capture.clone(),
            _ => None,
        };
    let link = Some(CapturePoint::Link("srv".into()));
    assert_eq!(captured(&format!("{star}capture = \"link\"\n")), link);
    let site = Some(CapturePoint::Site("c1".into()));
    assert_eq!(captured(&format!("{star}capture = \"c1\"\n")), site);
    let dumbbell = lab_plan(
        "sites = [\"a\", \"b\", \"c\"]\ntopology = \"dumbbell\"\nleft = [\"a\"]",
        "",
    );
    let p = Plan::parse(dumbbell.as_bytes()).unwrap();
    assert_eq!(
        p.lab.unwrap().shape.topology,
        nsperf_lab::Topology::Dumbbell {
            left: vec!["a".into()]
        }
    );
    let wan = Some(CapturePoint::Link("wan".into()));
    assert_eq!(captured(&format!("{dumbbell}capture = \"link\"\n")), wan);
    let mesh = lab_plan("sites = [\"a\", \"b\"]", "");
    let pair = Some(CapturePoint::Link("a-b".into()));
    assert_eq!(captured(&format!("{mesh}capture = \"link\"\n")), pair);
    let sites = "sites = [\"a\", \"b\"]";
    for (lab, want) in [
        (
            "topology = \"ring\"",
            "[lab] topology: invalid topology 'ring'",
        ),
        (
            "server = \"a\"",
            "[lab]: server belongs to topology star, not mesh",
        ),
        (
            "topology = \"star\"\nleft = [\"a\"]",
            "left belongs to topology dumbbell",
        ),
        ("topology = \"star\"\nserver = \"zz\"", "no site named 'zz'"),
        (
            "topology = \"dumbbell\"\nleft = [\"a\", \"b\"]",
            "at least one site on each side",
        ),
        (
            "access_rate = \"1g\"",
            "access links exist in a star or dumbbell",
        ),
        ("memory = \"1k\"", "--memory must allow at least 1 MiB"),
        ("memory = 5", "[lab] memory: 5 needs a unit"),
        (
            "topology = \"star\"\nlink_args = [\"--link\", \"c9\"]",
            "no link named 'c9'",
        ),
        (
            "topology = \"star\"\naccess_queue = \"0\"",
            "[lab]: invalid queue '0'",
        ),
    ] {
        let e = err_of(&lab_plan(&format!("{sites}\n{lab}"), ""));
        assert!(e.contains(want), "{lab}: {e}");
    }
    let e = err_of(&lab_plan(
        "sites = [\"a\", \"b\", \"sw\"]\ntopology = \"star\"",
        "",
    ));
    assert!(e.contains("reserved"), "{e}");
}

/// Issue 21: `{name}` works in the site fields too (`site`, `client`, `server`,
/// `capture`), and a step that names a parameter there runs once per value of it.
#[test]
fn site_fields_are_templated_per_cell() {
    let text = r#"
name = "sites"
repetitions = 1
[lab]
sites = ["srv", "a", "b"]
[matrix]
client = ["a", "b"]
[[step]]
name = "ls"
type = "exec"
site = "{client}"
command = ["true"]
[[step]]
name = "tcp"
type = "net"
client = "{client}"
server = "srv"
capture = "{client}"
time = "1s"
"#;
    let p = Plan::parse(text.as_bytes()).unwrap();
    assert_eq!(p.cells.len(), 2);
    for (cell, want) in p.cells.iter().zip(["a", "b"]) {
        let Action::Exec(e) = &cell.steps[0].action else {
            panic!()
        };
        assert_eq!(e.site.as_deref(), Some(want));
        assert_eq!(cell.steps[0].params[0].1.value, want);
        let Action::Net(n) = &cell.steps[1].action else {
            panic!()
        };
        assert!(
            matches!(&n.target, Target::Lab { client, .. } if client == want),
            "{:?}",
            n.target
        );
        assert_eq!(n.capture, Some(CapturePoint::Site(want.to_string())));
    }
    let e = err_of(&text.replace("[\"a\", \"b\"]", "[\"a\", \"moon\"]"));
    assert!(e.contains("site: no site \"moon\" in the lab"), "{e}");
}

/// A step on lab sites depends on the lab's templated link: a matrix over the RTT gives it a
/// cell per value (it ran once, in the first cell).
#[test]
fn steps_on_sites_follow_the_labs_matrix() {
    let text = r#"
name = "many"
repetitions = 1
[lab]
sites = ["srv"]
clients = 2
topology = "star"
rate = "200mbit"
rtt = "{rtt}"
[matrix]
rtt = ["0ms", "50ms"]
[groups]
pair = ["c1", "c2"]
[[service]]
name = "nas"
site = "srv"
dir = "/tmp"
[[step]]
name = "all"
type = "io"
on = "clients"
service = "nas"
workload = "seqwrite"
size = "1m"
[[step]]
name = "group"
type = "exec"
on = "pair"
command = ["true"]
"#;
    let p = Plan::parse(text.as_bytes()).unwrap();
    assert_eq!(p.cells.len(), 2);
    for c in &p.cells {
        let names: Vec<&str> = c.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["all", "group"], "cell {:?}", c.params);
    }
}

/// Issue 21 item 1: a lab's sites are hosts a step runs `on` (the `clients` sites of `[lab]
/// clients = N` as the group `clients`, or `[groups]` of sites without `[hosts]`); only the
/// sites steps run on get an agent, and a plan whose steps run on none has no hosts.
#[test]
fn lab_sites_are_hosts_a_step_runs_on() {
    let text = r#"
name = "many"
repetitions = 1
[lab]
sites = ["srv"]
clients = 3
topology = "star"
rate = "200mbit"
[groups]
pair = ["c1", "c2"]
[[service]]
name = "nas"
site = "srv"
dir = "/tmp"
[[step]]
name = "write"
type = "io"
on = "clients"
service = "nas"
workload = "seqwrite"
size = "1m"
[[step]]
name = "tcp"
type = "net"
on = "pair"
server = "srv"
"#;
    let p = Plan::parse(text.as_bytes()).unwrap();
    let h = p.hosts.as_ref().unwrap();
    let names: Vec<&str> = h.hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["srv", "c1", "c2", "c3"]);
    assert_eq!(h.get("c3").unwrap().address, "10.77.0.4");
    assert_eq!(
        h.get("srv").unwrap().allow,
        [crate::agent::StepClass::Server]
    );
    assert_eq!(
        h.get("c3").unwrap().launch,
        crate::agent::Launch::Site { site: "c3".into() }
    );
    let write = &p.cells[0].steps[0];
    let on = write.on.as_ref().unwrap();
    assert_eq!(on.hosts, ["c1", "c2", "c3"]);
    assert!(on.in_lab && write.needs_lab(true));
    let Action::Io(io) = &write.action else {
        panic!()
    };
    assert!(io.service.is_some());
    // Through the server's port: the link's ceilings, the three clients' windows together.
    let c = p.cells[0].conditions(write);
    assert!(c.in_lab && c.link_rate_bps == Some(200e6));
    assert_eq!(c.window_bytes, Some(3 * 128 * 1024));
    let tcp = &p.cells[0].steps[1];
    let Action::Net(n) = &tcp.action else {
        panic!()
    };
    assert_eq!(n.target, Target::Host("10.77.0.1".into()));
    // A lab's sites are not hosts of a plan no step of which runs on them.
    let plain = "name = \"p\"\n[lab]\nsites = [\"a\", \"b\"]\n[[step]]\nname = \"x\"\ntype = \"exec\"\nsite = \"a\"\ncommand = [\"true\"]\n";
    assert!(Plan::parse(plain.as_bytes()).unwrap().hosts.is_none());
    // A service on this host's loopback is not reached from a lab site.
    let e = err_of(&text.replace("site = \"srv\"\ndir", "dir"));
    assert!(
        e.contains("which host c1 (not local = true) cannot reach"),
        "{e}"
    );
}

/// `{{` and `}}` are literal braces in a step value (an awk program in a command); a matrix
/// value holding `{bdp}` is still resolved.
#[test]
fn doubled_braces_stay_literal_braces() {
    let text = "name = \"b\"\n[lab]\nsites = [\"a\", \"b\"]\nrate = \"45mbit\"\nrtt = \"100ms\"\n[matrix]\nw = [\"{bdp}\"]\n[[step]]\nname = \"x\"\ntype = \"exec\"\ncommand = [\"awk\", \"{{print $1}}\", \"{w}\"]\n";
    let p = Plan::parse(text.as_bytes()).unwrap();
    let Action::Exec(e) = &p.cells[0].steps[0].action else {
        panic!()
    };
    assert_eq!(e.command, ["awk", "{print $1}", "563200"]);
}

/// Issue 20 item 16: a `bonnie` step, with its fields checked as the suite's.
#[test]
fn bonnie_steps_resolve_with_the_suites_rules() {
    let text = r#"
name = "b"
[matrix]
chunk = ["8k", "64k"]
[[step]]
name = "disk"
type = "bonnie"
dir = "/var/tmp"
size = "64m"
bs = "{chunk}"
files = 128
fsync = "none"
"#;
    let p = Plan::parse(text.as_bytes()).unwrap();
    assert_eq!(p.cells.len(), 2);
    let Action::Bonnie(b) = &p.cells[1].steps[0].action else {
        panic!("{:?}", p.cells[1].steps[0].action)
    };
    assert_eq!(p.cells[1].steps[0].kind, StepKind::Bonnie);
    assert_eq!(
        (b.config.size_bytes, b.config.chunk_bytes, b.config.files),
        (64 << 20, 64 << 10, 128)
    );
    assert_eq!(b.config.fsync, nsperf_io::FsyncMode::None);
    assert_eq!(
        b.config.cache,
        nsperf_io::CacheMode::Cold,
        "bonnie's default"
    );
    for (from, to, want) in [
        ("dir = \"/var/tmp\"", "dir = \"nfs://h/x\"", "not a URL"),
        (
            "files = 128",
            "workload = \"seqread\"",
            "does not apply to a bonnie step",
        ),
        (
            "files = 128",
            "phases = [\"cold\"]",
            "sets its own cache states",
        ),
        (
            "fsync = \"none\"",
            "cache = \"remote-warm\"",
            "remote-warm needs a server",
        ),
    ] {
        let e = err_of(&text.replace(from, to));
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn phases_on_sites_share_this_hosts_cache_and_other_machines_do_not() {
    let sites = r#"
name = "p"
[lab]
sites = ["srv"]
clients = 2
topology = "star"
[[step]]
name = "r"
type = "io"
on = "clients"
dir = "/tmp"
workload = "seqread"
phases = ["cold", "warm"]
"#;
    let p = Plan::parse(sites.as_bytes()).unwrap();
    let phases: Vec<Phase> = p.cells[0].steps[0].phases.clone();
    assert_eq!(phases, [Phase::Cold, Phase::Warm]);
    let ssh = r#"
name = "p"
[hosts.a]
ssh = "root@192.0.2.1"
[hosts.b]
local = true
[groups]
all = ["b", "a"]
[[step]]
name = "r"
type = "io"
on = "all"
dir = "/tmp"
workload = "seqread"
phases = ["cold"]
"#;
    let e = err_of(ssh);
    assert!(e.contains("host a does not"), "{e}");
    assert!(Plan::parse(ssh.replace("on = \"all\"", "on = \"b\"").as_bytes()).is_ok());
}

/// The `[lab]` fields are set on the link directly and `link_args` applied after them: the
/// link is the one `lab up` builds from the same flags in that order (a later flag wins).
#[test]
fn lab_fields_and_link_args_build_the_lab_up_link() {
    let plan = r#"
name = "links"
[lab]
sites = ["a", "b"]
rate = "{r}"
rtt = "20ms"
link_args = ["--loss=1%", "--rtt", "30ms"]
[matrix]
r = ["10mbit"]
[[step]]
name = "t"
type = "net"
client = "a"
server = "b"
"#;
    let p = Plan::parse(plan.as_bytes()).unwrap();
    let link = p.cells[0].link.clone().unwrap();
    let flags = [
        "--rate",
        "10mbit",
        "--rtt",
        "20ms",
        "--loss=1%",
        "--rtt",
        "30ms",
    ];
    assert_eq!(link, nsperf_lab::LinkSetup::parse_args(&flags).unwrap());
    assert_eq!(link.change.rate_bps, Some(10e6));
    let e = err_of(&plan.replace("{r}", "fast"));
    assert!(e.starts_with("[lab]"), "{e}");
}

/// A step whose traffic crosses only access links, or no link at all, does not repeat over
/// the lab's main link settings; one whose path cannot be told from the plan does.
#[test]
fn steps_repeat_only_over_the_links_they_cross() {
    let text = r#"
name = "routes"
[lab]
sites = ["a", "b", "c"]
topology = "dumbbell"
left = ["a", "b"]
rate = "45mbit"
rtt = "{rtt}"
access_rate = "{access}"
[matrix]
rtt = ["0ms", "50ms"]
access = ["1gbit", "100mbit"]
[[step]]
name = "local"
type = "io"
site = "a"
dir = "/var/tmp"
workload = "seqwrite"
[[step]]
name = "same-side"
type = "net"
client = "a"
server = "b"
[[step]]
name = "across"
type = "net"
client = "a"
server = "c"
[[step]]
name = "command"
type = "exec"
site = "a"
command = ["true"]
[[step]]
name = "bdp"
type = "net"
client = "a"
server = "b"
window = "{bdp}"
"#;
    let p = Plan::parse(text.as_bytes()).unwrap();
    // The cells each step runs in.
    let count = |name: &str| {
        p.cells
            .iter()
            .filter(|c| c.steps.iter().any(|s| s.name == name))
            .count()
    };
    // The local run and the same-side pair over the access links: per access rate only.
    assert_eq!(count("local"), 2);
    assert_eq!(count("same-side"), 2);
    // Across the WAN, a command that may reach any site, a window made of rate and rtt:
    // every cell.
    assert_eq!(count("across"), 4);
    assert_eq!(count("command"), 4);
    assert_eq!(count("bdp"), 4);
    let local = p.cells[0].steps.iter().find(|s| s.name == "local").unwrap();
    let names: Vec<&str> = local.params.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["access"]);
}
