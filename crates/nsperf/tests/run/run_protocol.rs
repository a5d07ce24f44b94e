//! The storage protocol of a plan's io steps in its report (issue 22, item 6): an io step
//! through a lab takes a capture as a network step does (`capture = "SITE"`: tcpdump in the
//! site, whole packets; `capture = "link"`: the emulator), the run stores its analysis, and
//! the HTML report shows the protocol table and the requests-in-flight chart of each run.
//! Root, TUN and `ip` (and tcpdump for the site's capture); skipped with a printed reason
//! otherwise.

use crate::common;
use common::scratch::{Scratch, TMPFS};
use common::*;

use std::path::Path;
use std::time::Duration;

/// The cell of the `<tr>` of operation `op` of 64 KiB requests after `skip` cells of it (0:
/// the program), in a protocol table of run `run` of the report (the step's own requests: a
/// read's unmeasured layout, in requests of 1 MiB, is another connection's).
fn op_cell(html: &str, run: u64, op: &str, skip: usize) -> Option<String> {
    let section = html
        .split(&format!("<section class=\"trace\" data-run=\"{run}\">"))
        .nth(1)?;
    let section = section.split("</section>").next()?;
    let row = section
        .split("<table class=\"protocol-ops\">")
        .skip(1)
        .flat_map(|t| t.split("</table>").next().unwrap_or("").split("<tr>"))
        .find(|r| {
            r.contains(&format!("<td class=\"t\">{op}</td>")) && r.contains("<td>64 KiB</td>")
        })?;
    let cells: Vec<&str> = row
        .split("<td")
        .skip(1)
        .map(|c| {
            let c = c.split_once('>').map(|x| x.1).unwrap_or("");
            c.split("</td>").next().unwrap_or("")
        })
        .collect();
    cells.get(skip).map(|c| c.to_string())
}

/// Runs `plan` (written in `dir`) with `--keep-captures`; returns its runs (`results show
/// --runs`) and its HTML report.
fn run_plan(dir: &Scratch, plan: &str, runs: u64) -> (Vec<serde_json::Value>, String) {
    let plan_path = Path::new(dir.path()).join("plan.toml");
    std::fs::write(&plan_path, plan).unwrap();
    let db = Path::new(dir.path()).join("r.db").display().to_string();
    let report = Path::new(dir.path()).join("r.html").display().to_string();
    let r = run_with_limit(
        nsperf([
            "run",
            plan_path.to_str().unwrap(),
            "--db",
            &db,
            "--keep-captures",
            "--report",
            &report,
            "--json",
        ]),
        Duration::from_secs(180),
    )
    .ok();
    assert_eq!(r.json()["measured"], runs, "{}\n{}", r.stdout, r.stderr);
    let shown = run(&["results", "show", "1", "--db", &db, "--json", "--runs"])
        .ok()
        .json();
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        html.contains("<h2>Capture analysis</h2>"),
        "no capture section"
    );
    (shown["runs"].as_array().unwrap().clone(), html)
}

/// The run of step `step` has the protocol table of its capture in the report, with as many
/// `op` requests of 64 KiB as the run moved blocks of 64 KiB, each answered, under a heading
/// naming `protocol`, with the verdict and the requests-in-flight chart. Returns the run.
fn check_run<'a>(
    runs: &'a [serde_json::Value],
    html: &str,
    step: &str,
    op: &str,
    protocol: &str,
) -> &'a serde_json::Value {
    let run = runs.iter().find(|r| r["step"] == step).unwrap();
    assert_eq!(run["status"], "ok", "{run:#}");
    let id = run["id"].as_u64().unwrap();
    let kept = run["capture_path"].as_str().unwrap();
    assert!(html.contains(kept), "the report names {kept}");
    // The I/O the run measured, in requests of one block.
    let ios = run["payload_bytes"].as_u64().unwrap() / 65536;
    assert!(ios >= 64, "{step}: {ios} blocks of 64 KiB for a 4 MiB file");
    let calls = op_cell(html, id, op, 2)
        .unwrap_or_else(|| panic!("{step}: no {op} row in run {id}'s protocol table:\n{html}"));
    let replies = op_cell(html, id, op, 3).unwrap();
    assert_eq!(
        calls,
        ios.to_string(),
        "{step}: {op} calls against the run's I/O"
    );
    assert_eq!(replies, calls, "{step}: every {op} answered in the capture");
    let section = html
        .split(&format!("<section class=\"trace\" data-run=\"{id}\">"))
        .nth(1)
        .unwrap()
        .split("</section>")
        .next()
        .unwrap();
    assert!(section.contains(protocol), "{section}");
    assert!(section.contains("protocol's pace: <b>"), "{section}");
    assert!(
        section.contains("data-chart=\"requests-in-flight\"") && section.contains("<polyline"),
        "{step}: no requests-in-flight chart: {section}"
    );
    run
}

const SIZES: &str = "size = \"4m\"\nbs = \"64k\"\niodepth = 4";

/// An NFS write and read of 4 MiB in 64 KiB blocks, 4 in flight, through the embedded
/// server in a lab site: one captured by tcpdump in the client's site (when installed), one
/// on the emulated link. The report's protocol table counts the WRITEs and READs the runs
/// moved (bytes / block size), names the verdict, and draws each run's chart.
#[test]
fn an_io_steps_capture_shows_its_protocol_in_the_report() {
    let what = "io step capture in the report";
    if !require_lab(what) {
        return;
    }
    let tcpdump = require_program("tcpdump", "the site capture of an io step");
    let dir = Scratch::new(TMPFS, "run-protocol");
    let export = Path::new(dir.path()).join("export");
    std::fs::create_dir(&export).unwrap();
    let write_capture = if tcpdump { "cli" } else { "link" };
    let plan = format!(
        r#"name = "proto"
repetitions = 1
[lab]
sites = ["cli", "nas"]
rate = "200mbit"
rtt = "4ms"
[[service]]
name = "nfs"
site = "nas"
dir = "{export}"
[[step]]
name = "write"
type = "io"
service = "nfs"
site = "cli"
workload = "seqwrite"
{SIZES}
capture = "{write_capture}"
[[step]]
name = "read"
type = "io"
service = "nfs"
site = "cli"
workload = "seqread"
{SIZES}
capture = "link"
"#,
        export = export.display()
    );
    let (runs, html) = run_plan(&dir, &plan, 2);
    let w = check_run(&runs, &html, "write", "WRITE", "ONC RPC (NFSv3)");
    check_run(&runs, &html, "read", "READ", "ONC RPC (NFSv3)");
    // The kept site capture holds whole packets: its WRITEs' data is in the file.
    if tcpdump {
        let size = std::fs::metadata(w["capture_path"].as_str().unwrap())
            .unwrap()
            .len();
        assert!(
            size > 4 << 20,
            "a capture of {size} bytes cannot hold 4 MiB written"
        );
    }
}

/// The same through Samba in a lab site (SMB 3.1.1, signed): an SMB write of 4 MiB in 64 KiB
/// blocks captured by tcpdump in the client's site, its SMB2 WRITEs counted in the report.
#[test]
fn an_smb_io_steps_capture_shows_its_protocol_in_the_report() {
    let what = "SMB io step capture in the report";
    if !require_lab(what) || !require_program("smbd", what) || !require_program("tcpdump", what) {
        return;
    }
    let dir = Scratch::new(TMPFS, "run-protocol-smb");
    let export = Path::new(dir.path()).join("share");
    std::fs::create_dir(&export).unwrap();
    let plan = format!(
        r#"name = "proto-smb"
repetitions = 1
[lab]
sites = ["cli", "nas"]
rate = "200mbit"
rtt = "4ms"
[[service]]
name = "smb"
kind = "smb"
site = "nas"
dir = "{export}"
[[step]]
name = "write"
type = "io"
service = "smb"
site = "cli"
workload = "seqwrite"
{SIZES}
capture = "cli"
"#,
        export = export.display()
    );
    let (runs, html) = run_plan(&dir, &plan, 1);
    check_run(&runs, &html, "write", "WRITE", "SMB2/3");
    assert!(html.contains("<p class=\"smb\">SMB: "), "the SMB line");
}
