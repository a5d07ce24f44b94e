//! A `replay` step's plan errors: each one line naming the step and the field, found at load
//! (the capture read then), exit code 3 (`Failure::Input`).

use super::Plan;
use nsperf_core::failure::Classify;

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
