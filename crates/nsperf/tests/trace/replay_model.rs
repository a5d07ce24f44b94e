//! The replay model's and the replay's accuracy at another RTT (issue 25, "Done when"): a
//! workload captured at the client in a lab at 1 ms, predicted at 50 ms by `nsperf replay
//! CAPTURE --rtt 50`, then run for real at 50 ms in the same lab and captured again, and the
//! 1 ms capture replayed from the client's site of the lab at 50 ms against the same server
//! (`--against`, three times): each part's predicted duration against its duration in the
//! real run (first call to last reply of its connections, as the client saw them) within
//! 20 %, the median replayed duration of the same connections within 10 %. Two workloads: a mix made by nsperf's engines against its
//! embedded NFSv3 server (a sequential read with 4 READs in flight, the metadata test's
//! burst of CREATE/LOOKUP/READ/REMOVE, a series of small files written with a COMMIT each),
//! and libnfs's nfs-cp copying a file, one READ at a time.
//!
//! Both sites run Reno, the standard loss-based TCP the model assumes (slow start from 10
//! segments, no pacing); this machine's default, BBR, paces what an application leaves the
//! connection idle for (see docs/replay.md). Skipped with a printed reason without a lab,
//! tcpdump, Reno in the namespaces, or nfs-cp.

use crate::common;
use common::lab::{Lab, io_in_site, lab_name, timing_lock};
use common::servers::serve_nfs_in_site;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::trace_proto::{capture_whole, lab_up};

/// The RTT the workload is captured at, and the one it is predicted at and run for real.
const CAPTURED_RTT: &str = "1ms";
const REAL_RTT: &str = "50ms";
const REAL_RTT_MS: f64 = 50.0;
/// The model's tolerance against the real run (issue 25).
const TOLERANCE_PCT: f64 = 20.0;
/// The replay's tolerance against the real run (issue 25).
const REPLAY_TOLERANCE_PCT: f64 = 10.0;
/// Replays of the 1 ms capture at 50 ms; their median is the replay's duration.
const REPLAYS: usize = 3;

/// A workload captured at the client at [`CAPTURED_RTT`] and again, run for real, at
/// [`REAL_RTT`]. The replay's check (`--against`) can take `captured` and compare with `real`
/// as the model's does here.
pub(crate) struct TwoRuns {
    /// The capture at [`CAPTURED_RTT`].
    pub(crate) captured: PathBuf,
    /// The captures of the real runs at [`REAL_RTT`] (their median is the real duration).
    pub(crate) real: Vec<PathBuf>,
}

/// Sets both sites of `lab` to Reno; false (after a printed skip) when the kernel refuses.
fn reno(lab: &Lab, what: &str) -> bool {
    for site in ["a", "b"] {
        let ok = Command::new("ip")
            .args(["netns", "exec", &lab.ns(site), "sysctl", "-qw"])
            .arg("net.ipv4.tcp_congestion_control=reno")
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            skip(&format!("{what}: cannot set Reno in the lab's namespaces"));
            return false;
        }
    }
    true
}

/// Runs `work` from site a of `lab` once at [`CAPTURED_RTT`] and `real_runs` times at
/// [`REAL_RTT`], each captured whole at site a's link (tcpdump on wan0, up to three tries)
/// into `dir/NAME-1ms.pcap` and `dir/NAME-50ms-I.pcap`. None after a printed skip.
pub(crate) fn capture_then_run_for_real(
    lab: &Lab,
    dir: &Path,
    name: &str,
    what: &str,
    real_runs: usize,
    mut work: impl FnMut(),
) -> Option<TwoRuns> {
    let ns = lab.ns("a");
    let captured = dir.join(format!("{name}-1ms.pcap"));
    lab.set(&["--rtt", CAPTURED_RTT]);
    if !capture_whole(&ns, &captured, what, &mut work) {
        return None;
    }
    lab.set(&["--rtt", REAL_RTT]);
    let mut real = Vec::new();
    for i in 0..real_runs {
        let pcap = dir.join(format!("{name}-50ms-{i}.pcap"));
        if !capture_whole(&ns, &pcap, what, &mut work) {
            return None;
        }
        real.push(pcap);
    }
    Some(TwoRuns { captured, real })
}

/// `nsperf replay PCAP --rtt 50 --json`: its clients.
fn clients(pcap: &Path) -> Vec<serde_json::Value> {
    let rtt = REAL_RTT_MS.to_string();
    let j = run(&["replay", pcap.to_str().unwrap(), "--rtt", &rtt, "--json"])
        .ok()
        .json();
    j["summary"]["clients"].as_array().unwrap().clone()
}

/// A client's requests of `op` (`nfs3:READ`).
fn requests(c: &serde_json::Value, op: &str) -> u64 {
    c["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == op)
        .map_or(0, |o| o["requests"].as_u64().unwrap())
}

/// `nsperf replay PCAP --against URL --json` from site a of `lab` (at [`REAL_RTT`] by now),
/// [`REPLAYS`] times: each replay's `against` object.
fn replays(lab: &Lab, pcap: &Path, url: &str) -> Vec<serde_json::Value> {
    let rtt = REAL_RTT_MS.to_string();
    let p = pcap.to_str().unwrap();
    let args = [
        nsperf_bin(),
        "replay",
        p,
        "--json",
        "--rtt",
        &rtt,
        "--against",
        url,
    ];
    (0..REPLAYS)
        .map(|_| {
            let j = lab.exec("a", &args).ok().json();
            let a = j["summary"]["against"].clone();
            eprintln!(
                "  replay at {REAL_RTT} (path RTT {:.3} ms): all connections {:.3} s (captured at {CAPTURED_RTT} {:.3} s)",
                a["path_rtt_ms"].as_f64().unwrap(),
                a["replayed_duration_s"].as_f64().unwrap(),
                a["captured_duration_s"].as_f64().unwrap(),
            );
            a
        })
        .collect()
}

/// One part of a workload: the connections `is` picks (in order, the same number in every
/// capture), the model's duration at 50 ms from the 1 ms capture, the median of the 1 ms
/// capture's replays at 50 ms (each the sum of the part's connections' replayed durations),
/// the real runs' median, s.
struct Part {
    name: &'static str,
    model_s: f64,
    replay_s: f64,
    real_s: f64,
}

impl Part {
    fn of(
        name: &'static str,
        at1: &[serde_json::Value],
        replayed: &[serde_json::Value],
        at50: &[Vec<serde_json::Value>],
        is: impl Fn(&serde_json::Value) -> bool,
    ) -> Part {
        let mine: Vec<_> = at1.iter().filter(|c| is(c)).collect();
        assert!(!mine.is_empty(), "{name}: no connection in {at1:?}");
        let model_s = mine
            .iter()
            .map(|c| {
                let p = &c["predictions"][0];
                assert_eq!(p["rtt_ms"], REAL_RTT_MS);
                p["duration_s"].as_f64().unwrap()
            })
            .sum();
        let mut reals: Vec<f64> = at50
            .iter()
            .map(|run| {
                let real: Vec<_> = run.iter().filter(|c| is(c)).collect();
                assert_eq!(mine.len(), real.len(), "{name}: connections at 1 and 50 ms");
                real.iter()
                    .map(|c| c["captured_duration_s"].as_f64().unwrap())
                    .sum()
            })
            .collect();
        let real_s = median(&mut reals);
        if reals.len() > 1 {
            eprintln!("{name}: real runs {reals:.3?} s");
        }
        let mut replays: Vec<f64> = replayed
            .iter()
            .map(|a| {
                let conns = a["clients"].as_array().unwrap();
                mine.iter()
                    .map(|c| {
                        let r = conns
                            .iter()
                            .find(|r| r["connection"] == c["connection"])
                            .unwrap_or_else(|| panic!("{name}: {} replayed", c["connection"]));
                        r["replayed_duration_s"].as_f64().unwrap()
                    })
                    .sum()
            })
            .collect();
        let replay_s = median(&mut replays);
        eprintln!("{name}: replays {replays:.3?} s");
        Part {
            name,
            model_s,
            replay_s,
            real_s,
        }
    }

    fn error_pct(&self) -> f64 {
        (self.model_s - self.real_s) / self.real_s * 100.0
    }

    fn replay_error_pct(&self) -> f64 {
        (self.replay_s - self.real_s) / self.real_s * 100.0
    }
}

/// Prints each part and their total (the figures of docs/replay.md's table) and asserts
/// each model within [`TOLERANCE_PCT`] of the real run, each replay within
/// [`REPLAY_TOLERANCE_PCT`].
fn check(what: &str, parts: &[Part]) {
    let total = Part {
        name: "total",
        model_s: parts.iter().map(|p| p.model_s).sum(),
        replay_s: parts.iter().map(|p| p.replay_s).sum(),
        real_s: parts.iter().map(|p| p.real_s).sum(),
    };
    for p in parts.iter().chain([&total]) {
        eprintln!(
            "{what}: {:<36} captured at {CAPTURED_RTT}, at {REAL_RTT}: model {:.3} s ({:+.1} %), replay {:.3} s ({:+.1} %), real {:.3} s",
            p.name,
            p.model_s,
            p.error_pct(),
            p.replay_s,
            p.replay_error_pct(),
            p.real_s,
        );
    }
    for p in parts.iter().chain([&total]) {
        assert!(
            p.replay_error_pct().abs() <= REPLAY_TOLERANCE_PCT,
            "{what}: {}: replay {:.3} s against the real {:.3} s at {REAL_RTT} ({:+.1} %)",
            p.name,
            p.replay_s,
            p.real_s,
            p.replay_error_pct()
        );
        assert!(
            p.error_pct().abs() <= TOLERANCE_PCT,
            "{what}: {}: model {:.3} s against the real {:.3} s at {REAL_RTT} ({:+.1} %)",
            p.name,
            p.model_s,
            p.real_s,
            p.error_pct()
        );
    }
}

/// A lab at 1 ms with Reno in both sites and nsperf's embedded NFSv3 server in site b
/// exporting a fresh directory: the lab, the directory, the server's URL.
fn lab_with_server(tag: &str, what: &str) -> Option<(Lab, tempfile::TempDir, PathBuf, String)> {
    let lab = lab_up(&lab_name(tag), &["--rtt", CAPTURED_RTT]);
    if !reno(&lab, what) {
        return None;
    }
    let d = tempfile::tempdir().unwrap();
    let export = std::fs::canonicalize(d.path()).unwrap().join("export");
    std::fs::create_dir(&export).unwrap();
    let url = serve_nfs_in_site(lab.name(), "b", &export, None);
    Some((lab, d, export, url))
}

/// nsperf's engines from site a: a 4 MiB sequential read in 64 KiB READs, 4 in flight;
/// the metadata test on 10 files (CREATE, LOOKUP, LOOKUP+READ, REMOVE of each, in order
/// then at random: one request at a time); three small files of 64 KiB each written in
/// 16 KiB WRITEs and committed (`--fsync end`: one COMMIT each).
fn engines_mix(lab: &str, url: &str) {
    let io = |extra: &[&str]| {
        let mut a = extra.to_vec();
        a.push("-q");
        io_in_site(lab, "a", url, &a).ok();
    };
    io(&["-w", "seqread", "-s", "4m", "-b", "64k", "--iodepth", "4"]);
    io(&["-w", "meta", "--files", "10"]);
    for _ in 0..3 {
        io(&["-w", "seqwrite", "-s", "64k", "-b", "16k", "--fsync", "end"]);
    }
}

/// The mix of nsperf's engines captured at 1 ms, predicted at 50 ms by the model, run for
/// real at 50 ms: the read, the metadata burst, the small files' writes and their total
/// within 20 %; the capture replayed at 50 ms (`--against`, the median of three) within 10 %. The engines' set-up connections (the read's file laid out and read once
/// before its pass, each run's control connection, idle while another works) are printed,
/// not checked: see docs/replay.md.
#[test]
fn model_at_50ms_of_a_mix_of_nsperf_engines_captured_at_1ms() {
    let what = "the replay model at 50 ms of nsperf's engines captured at 1 ms";
    if !require_lab(what) || !require_program("tcpdump", what) {
        return;
    }
    let _serial = timing_lock();
    let Some((lab, d, _export, url)) = lab_with_server("rmm", what) else {
        return;
    };
    let Some(runs) = capture_then_run_for_real(&lab, d.path(), "mix", what, 1, || {
        engines_mix(lab.name(), &url)
    }) else {
        return;
    };
    let at1 = clients(&runs.captured);
    let at50: Vec<_> = runs.real.iter().map(|p| clients(p)).collect();
    let rp = replays(&lab, &runs.captured, &url);
    let parts = [
        Part::of(
            "sequential read, 64 READs, 4 in flight",
            &at1,
            &rp,
            &at50,
            |c| requests(c, "nfs3:READ") == 64,
        ),
        Part::of(
            "metadata burst (LOOKUP, CREATE, …)",
            &at1,
            &rp,
            &at50,
            |c| requests(c, "nfs3:LOOKUP") >= 40,
        ),
        Part::of(
            "small files: 3 × (4 WRITEs, COMMIT)",
            &at1,
            &rp,
            &at50,
            |c| {
                requests(c, "nfs3:WRITE") == 4
                    && requests(c, "nfs3:COMMIT") == 1
                    && c["written_bytes"] == 64 << 10
            },
        ),
    ];
    for ((c1, c50), r) in at1
        .iter()
        .zip(&at50[0])
        .zip(rp[0]["clients"].as_array().unwrap())
    {
        eprintln!(
            "  connection {} ops {}: model {:.3} s, replay {:.3} s (start {:.3} s), real {:.3} s",
            c1["connection"],
            c1["ops"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| format!("{}×{}", o["op"], o["requests"]))
                .collect::<Vec<_>>()
                .join(" "),
            c1["predictions"][0]["duration_s"].as_f64().unwrap(),
            r["replayed_duration_s"].as_f64().unwrap(),
            r["start_s"].as_f64().unwrap(),
            c50["captured_duration_s"].as_f64().unwrap()
        );
    }
    check("nsperf engines", &parts);
}

/// libnfs's nfs-cp copying an 8 MiB file from the embedded server (1 MiB READs, one at a
/// time) captured at 1 ms, predicted at 50 ms, copied for real at 50 ms three times: the
/// median within 20 %; the capture replayed at 50 ms (the median of three) within 10 %. One copy alone is not enough on a loaded machine: nfs-cp starved of
/// the CPU reads its socket late, its receive window fills and the server waits (with three
/// busy loops on the 2 cores, one copy's connection took 2.3 s instead of about 1.1 s, `nsperf
/// trace` finding the server limited by the receiver's window 59 % of the time).
#[test]
fn model_at_50ms_of_nfs_cp_captured_at_1ms() {
    let what = "the replay model at 50 ms of nfs-cp captured at 1 ms";
    if !require_lab(what) || !require_program("tcpdump", what) || !require_program("nfs-cp", what) {
        return;
    }
    let _serial = timing_lock();
    let Some((lab, d, export, url)) = lab_with_server("rmc", what) else {
        return;
    };
    let data: Vec<u8> = (0..8u32 << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
    std::fs::write(export.join("cp.bin"), &data).unwrap();
    let src = format!("{url}/cp.bin");
    let mut n = 0;
    let copy = || {
        n += 1;
        let out = d.path().join(format!("copy-{n}"));
        let r = Command::new("ip")
            .args(["netns", "exec", &lab.ns("a"), "nfs-cp", &src])
            .arg(&out)
            .output()
            .unwrap();
        assert!(r.status.success(), "nfs-cp: {r:?}");
        assert_eq!(std::fs::metadata(&out).unwrap().len(), 8 << 20);
    };
    let Some(runs) = capture_then_run_for_real(&lab, d.path(), "nfs-cp", what, 3, copy) else {
        return;
    };
    let at1 = clients(&runs.captured);
    let at50: Vec<_> = runs.real.iter().map(|p| clients(p)).collect();
    let rp = replays(&lab, &runs.captured, &url);
    let parts = [Part::of(
        "nfs-cp, 8 MiB in 1 MiB READs, 1 in flight",
        &at1,
        &rp,
        &at50,
        |c| c["read_bytes"] == 8 << 20 && c["in_flight_max"] == 1,
    )];
    check("nfs-cp", &parts);
}
