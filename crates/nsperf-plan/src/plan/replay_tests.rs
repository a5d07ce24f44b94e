//! A `replay` step's plan errors: each one line naming the step and the field, found at load
//! (the capture read then), exit code 3 (`Failure::Input`).

use super::{Action, Plan};
use nsperf_core::failure::Classify;
use nsperf_trace::testkit::sim::{PathSim, RpcLoad, simulate};

fn plan(capture: &str, step_extra: &str, service_site: &str) -> Result<Plan, String> {
    let text = format!(
        r#"name = "rp"
[lab]
sites = ["a", "b"]
rtt = "{{rtt}}"
[matrix]
rtt = ["2ms", "20ms"]
[[service]]
name = "nas"
site = "{service_site}"
dir = "/tmp"
[[step]]
name = "replay"
type = "replay"
site = "a"
service = "nas"
capture = "{capture}"
{step_extra}
"#
    );
    Plan::parse(text.as_bytes()).map_err(|e| {
        assert_eq!(e.failure() as i32, 3, "{e}");
        e.to_string()
    })
}

#[test]
fn a_replay_step_with_a_bad_capture_is_a_plan_error() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("none.pcap");
    let e = plan(missing.to_str().unwrap(), "", "b").unwrap_err();
    assert!(
        e.contains("step \"replay\"") && e.contains("capture") && e.contains("none.pcap"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    let junk = d.path().join("junk.pcap");
    std::fs::write(&junk, b"not a capture at all").unwrap();
    let e = plan(junk.to_str().unwrap(), "", "b").unwrap_err();
    assert!(e.contains("capture") && e.contains("junk.pcap"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn a_replay_step_needs_an_nfs_service_in_another_site_and_a_window_of_bytes() {
    let e = plan("/x.pcap", "", "a").unwrap_err();
    assert!(e.contains("own site"), "{e}");
    let e = plan("/x.pcap", "window = \"0\"", "b").unwrap_err();
    assert!(e.contains("window"), "{e}");
    let e = plan("/x.pcap", "phases = [\"cold\"]", "b").unwrap_err();
    assert!(e.contains("phases"), "{e}");
    let e = plan("/x.pcap", "workload = \"seqread\"", "b").unwrap_err();
    assert!(e.contains("does not apply to a replay step"), "{e}");
    let e = plan("", "", "b").unwrap_err();
    assert!(e.contains("capture"), "{e}");
}

/// A capture of 8 NFSv3 READs of 64 KiB at depth 1 over a 1 ms path, made by the trace
/// crate's simulator, written in `dir`.
fn capture(dir: &std::path::Path) -> std::path::PathBuf {
    let sim = PathSim {
        rate_bps: 1e9,
        rtt_ns: 1_000_000,
        rpc: Some(RpcLoad {
            requests: 8,
            ..RpcLoad::default()
        }),
        max_ns: 10_000_000_000,
        ..PathSim::default()
    };
    let path = dir.join("reads.pcap");
    let frames = simulate(&sim);
    std::fs::write(&path, nsperf_trace::testkit::pcap(false, true, 1, &frames)).unwrap();
    path
}

/// On a dumbbell whose WAN's RTT is the matrix, a replay within one side crosses only the
/// two sites' access links: the model is given their round trip (4 x the access delay) and
/// rate, the step runs once; a replay across the WAN is given the access links and the WAN
/// there and back, in each cell.
#[test]
fn a_replay_step_is_given_the_path_it_crosses() {
    let d = tempfile::tempdir().unwrap();
    let pcap = capture(d.path());
    let text = format!(
        r#"name = "rp"
[lab]
sites = ["primary", "ha", "dr"]
topology = "dumbbell"
left = ["primary", "ha"]
rate = "45mbit"
rtt = "{{rtt}}"
access_rate = "1gbit"
access_delay = "1500us"
[matrix]
rtt = ["10ms", "50ms"]
[[service]]
name = "near"
site = "ha"
dir = "/tmp"
[[service]]
name = "far"
site = "dr"
dir = "/tmp"
[[step]]
name = "side"
type = "replay"
site = "primary"
service = "near"
capture = "{pcap}"
[[step]]
name = "wan"
type = "replay"
site = "primary"
service = "far"
capture = "{pcap}"
"#,
        pcap = pcap.display()
    );
    let p = Plan::parse(text.as_bytes()).unwrap();
    let mut seen = Vec::new();
    for c in &p.cells {
        for s in &c.steps {
            let Action::Replay(r) = &s.action else {
                panic!("{s:?}")
            };
            let cond = c.conditions(s);
            assert_eq!(cond.rtt_s, Some(r.rtt_ms / 1e3), "{s:?}");
            assert_eq!(cond.link_rate_bps, r.rate_bps, "{s:?}");
            seen.push((c.key(), s.name.clone(), r.rtt_ms, r.rate_bps));
        }
    }
    assert_eq!(
        seen,
        [
            ("rtt=10ms".into(), "side".into(), 6.0, Some(1e9)),
            ("rtt=10ms".into(), "wan".into(), 16.0, Some(45e6)),
            ("rtt=50ms".into(), "wan".into(), 56.0, Some(45e6)),
        ],
        "(cell, step, model rtt ms, rate)"
    );
}

/// An NFSv3 capture needs a service offering NFSv3: ganesha offering only v4 is a plan
/// error naming the versions; offering both, the step replays over NFSv3.
#[test]
fn a_replay_step_needs_the_captures_nfs_version() {
    let d = tempfile::tempdir().unwrap();
    let pcap = capture(d.path());
    let text = |versions: &str| {
        format!(
            r#"name = "rp"
[lab]
sites = ["a", "b"]
[[service]]
name = "nas"
site = "b"
server = "ganesha"
dir = "/tmp"
nfs_versions = "{versions}"
[[step]]
name = "replay"
type = "replay"
site = "a"
service = "nas"
capture = "{}"
"#,
            pcap.display()
        )
    };
    let e = Plan::parse(text("4").as_bytes()).unwrap_err();
    assert_eq!(e.failure() as i32, 3, "{e}");
    let e = e.to_string();
    assert!(
        e.contains("step \"replay\"") && e.contains("offers NFSv4 only") && e.contains("NFSv3's"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    let p = Plan::parse(text("3,4").as_bytes()).unwrap();
    let Action::Replay(r) = &p.cells[0].steps[0].action else {
        panic!("{p:?}")
    };
    assert!(!r.v4);
}

/// The shipped example capture (16 READs, every one answered), or with `cut` without its
/// last 5 packets (the last reply's last segment, the ACKs and FINs), written in `dir`.
fn example(dir: &std::path::Path, cut: bool) -> std::path::PathBuf {
    let full =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/replay-read.pcap");
    let bytes = std::fs::read(&full).unwrap();
    // a little-endian microsecond pcap: 24 bytes of header, then 16 bytes before each packet
    assert_eq!(bytes[..4], [0xd4, 0xc3, 0xb2, 0xa1]);
    let mut ends = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
        ends.push(at);
    }
    assert_eq!(at, bytes.len());
    let path = dir.join(if cut { "cut.pcap" } else { "full.pcap" });
    let keep = if cut { ends[ends.len() - 6] } else { at };
    std::fs::write(&path, &bytes[..keep]).unwrap();
    path
}

/// Issue 25: what the capture lacks is found at load, as `nsperf replay` finds it, and
/// carried by the step into its runs: none in the example capture, one unanswered call once
/// its last reply is cut.
#[test]
fn a_replay_step_knows_what_its_capture_lacks() {
    use nsperf_trace::replay::report::CaptureGaps;
    let d = tempfile::tempdir().unwrap();
    let gaps = |cut: bool| {
        let p = plan(example(d.path(), cut).to_str().unwrap(), "", "b").unwrap();
        let Action::Replay(r) = &p.cells[0].steps[0].action else {
            panic!("{p:?}")
        };
        r.capture_gaps
    };
    assert_eq!(gaps(false), CaptureGaps::default());
    assert_eq!(
        gaps(true),
        CaptureGaps {
            unanswered_calls: 1,
            replies_without_call: 0,
            missing_bytes: 0,
        }
    );
}
