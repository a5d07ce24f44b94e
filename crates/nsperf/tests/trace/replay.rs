//! `nsperf replay CAPTURE` (issue 25, its first step): a known workload of nsperf's own nfs
//! engine against its embedded NFSv3 server, captured on loopback, and what replay extracts
//! from it checked against what was done and against tshark; the model at the capture's own
//! conditions against the captured duration; and at 50 ms against the hand computation.
//! Captured with `trace_proto`'s `capture` (tcpdump in immediate mode).
//! The same checks on real NFSv4.1 (nfs-ganesha) and SMB3 (smbd) reads in a lab, captured at
//! the client with `trace_proto`'s `capture_whole`.
//! Skipped with a printed reason without root, tcpdump or tshark (or a lab, ganesha, smbd).

use crate::common;
use common::lab::{io_in_site, lab_name};
use common::scratch::{Scratch, disk_base};
use common::servers::{Smbd, embedded_nfs, serve_nfs_in_site, serve_smb, url_port};
use common::*;

use std::path::Path;

use crate::trace_proto::{
    capture, capture_whole, lab_up, tshark_smb2_requests, tshark_srt, tshark_v4_ops,
};

use nsperf_trace::testkit::pcap;
use nsperf_trace::testkit::sim::{PathSim, simulate};

const MIB: u64 = 1 << 20;
/// The file read: 8 MiB in 64 KiB READs.
const SIZE: u64 = 8 * MIB;
const BLOCK: u64 = 64 << 10;

/// The client connection of the measured pass: the one with the most 64 KiB READs (the
/// engine warms the server's cache first on a connection of its own, 1 MiB at a time).
fn measured(j: &serde_json::Value) -> serde_json::Value {
    busiest(&j["clients"], "nfs3:READ", "requests").clone()
}

/// The bytes read by all of `clients` (a report's array of connections).
pub(crate) fn read_bytes(clients: &serde_json::Value) -> u64 {
    clients
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["read_bytes"].as_u64().unwrap())
        .sum()
}

/// The connection of `clients` (a report's array of connections) with the most requests of
/// operation `op`, counted by each op entry's field `count`.
pub(crate) fn busiest<'a>(
    clients: &'a serde_json::Value,
    op: &str,
    count: &str,
) -> &'a serde_json::Value {
    let n = |c: &serde_json::Value| {
        c["ops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["op"] == op)
            .map_or(0, |o| o[count].as_u64().unwrap())
    };
    clients
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|c| n(c))
        .expect("a client")
}

/// One seqread of [`SIZE`] at `depth`, captured and replayed: the counts against what was
/// done and against tshark, the model against the captured duration and the hand
/// computation at 50 ms. Returns the model's error at the capture, %.
fn read_at_depth(url: &str, port: u16, dir: &Path, depth: u32) -> Option<f64> {
    let pcap = dir.join(format!("read-depth{depth}.pcap"));
    let depth_s = depth.to_string();
    let work = || {
        run(&[
            "io",
            "run",
            url,
            "-w",
            "seqread",
            "-s",
            "8m",
            "-b",
            "64k",
            "--iodepth",
            &depth_s,
            "-q",
        ])
        .ok();
    };
    let mut dropped = 0;
    for _attempt in 0..3 {
        dropped = capture(&pcap, port, work);
        if dropped == 0 {
            break;
        }
    }
    if dropped > 0 {
        skip(&format!(
            "replay at depth {depth}: tcpdump dropped {dropped} packets three times"
        ));
        return None;
    }
    let p = pcap.to_str().unwrap();
    let j = run(&["replay", p, "--json", "--rtt", "0,50"]).ok().json();
    assert_eq!(j["command"], "replay");
    assert_eq!(j["spec"]["rtt_axis_ms"], serde_json::json!([0.0, 50.0]));
    let j = j["summary"].clone();
    assert!(j["not_built"].as_str().unwrap().contains("not built yet"));
    let c = measured(&j);
    let read = c["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == "nfs3:READ")
        .unwrap()
        .clone();
    // what was done: SIZE / BLOCK READs of BLOCK bytes, `depth` in flight at most
    assert_eq!(read["requests"], SIZE / BLOCK, "{c}");
    assert_eq!(read["errors"], 0, "{c}");
    assert_eq!(c["read_bytes"], SIZE, "{c}");
    assert_eq!(c["written_bytes"], 0, "{c}");
    assert_eq!(c["in_flight_max"], depth, "{c}");
    assert_eq!(c["file_count"], 1, "{c}");
    assert_eq!(c["files"][0]["extent_bytes"], SIZE, "{c}");
    let mean = c["in_flight_mean"].as_f64().unwrap();
    assert!(mean >= 1.0 && mean <= f64::from(depth), "{c}");
    if depth == 1 {
        // one at a time: each READ but the first waited for the previous reply
        assert_eq!(c["dependent"], SIZE / BLOCK - 1, "{c}");
    }
    // against tshark: every READ of the capture, all connections
    let all: u64 = j["clients"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["ops"].as_array().unwrap().iter())
        .filter(|o| o["op"] == "nfs3:READ")
        .map(|o| o["requests"].as_u64().unwrap())
        .sum();
    let tshark = tshark_srt(&pcap, port, 3)
        .get("READ")
        .map_or(0, |s| s.calls);
    assert_eq!(all, tshark, "READs against tshark -z rpc,srt");
    // the model at the capture's own conditions: within 20 % of the captured duration
    let err = c["model_error_pct"].as_f64().unwrap();
    assert!(err.abs() <= 20.0, "model at the capture: {err} %\n{c}");
    let captured = c["captured_duration_s"].as_f64().unwrap();
    let model = c["model_at_capture_s"].as_f64().unwrap();
    assert!(captured > 0.0 && model > 0.0, "{c}");
    // at 50 ms: 128 READs, `depth` at a time, each at least one round trip; at most that,
    // the round trips of slow start until `depth` replies fit the congestion window (10
    // segments at first, doubling), and the captured duration (the server's and client's
    // times, as captured)
    let at50 = &c["predictions"][1];
    assert_eq!(at50["rtt_ms"], 50.0);
    let rounds = (SIZE / BLOCK).div_ceil(u64::from(depth)) as f64;
    let in_flight = u64::from(depth) * (BLOCK + 200);
    let slow_start = f64::from(
        (in_flight / 14_480 + 1)
            .next_power_of_two()
            .trailing_zeros(),
    );
    let d = at50["duration_s"].as_f64().unwrap();
    assert!(
        d >= rounds * 0.050 && d <= (rounds + slow_start) * 0.050 + captured + 0.01,
        "{d} s for {rounds} rounds and {slow_start} of slow start at 50 ms\n{c}"
    );
    assert_eq!(at50["bound"], "latency", "{c}");
    // at 0 ms: the model at the capture less the captured round trips (each of the rounds
    // and of slow start's pays the capture's RTT, tens of µs on loopback, more when the
    // machine is loaded), within the model's 20 %
    let at0 = &c["predictions"][0];
    let d0 = at0["duration_s"].as_f64().unwrap();
    let rtt_c = c["captured_rtt_ms"].as_f64().unwrap() / 1e3;
    let bound = (rounds + slow_start) * rtt_c + captured * 0.2 + 1e-3;
    assert!(
        (d0 - model).abs() <= bound,
        "at 0 ms {d0} s, at the capture {model} s (its RTT {rtt_c} s): more than {bound} s apart\n{c}"
    );
    // the text report says the same, and what is not built
    let text = run(&["replay", p, "--rtt", "0,50"]).ok().stdout;
    assert!(
        text.contains("nfs3:READ") && text.contains("latency-bound from here"),
        "{text}"
    );
    assert!(text.contains("not built yet"), "{text}");
    eprintln!(
        "replay depth {depth}: captured {captured:.4} s, model {model:.4} s ({err:+.2} %), at 50 ms {d:.3} s"
    );
    Some(err)
}

/// A sequential read at depth 4 and at depth 1 through nsperf's embedded NFSv3 server.
#[test]
fn replay_extracts_a_known_nfs3_read_and_the_model_gives_its_duration_back() {
    let what = "replay of an NFSv3 capture";
    if !(require_root(what) && require_program("tcpdump", what) && require_program("tshark", what))
    {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let export = d.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let (_server, url) = embedded_nfs(&export, &[]);
    let port = url_port(&url);
    run(&[
        "io", "run", &url, "-w", "seqwrite", "-s", "8m", "-b", "64k", "-q",
    ])
    .ok();
    // the engine names its file after the workload: the read finds the one written
    for depth in [4, 1] {
        if read_at_depth(&url, port, d.path(), depth).is_none() {
            return;
        }
    }
}

/// One-line errors with their exit codes: a capture that cannot be read (3), a capture with
/// no storage request (11), a bad flag value (2).
#[test]
fn replay_errors_have_their_exit_codes() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing.pcap");
    let r = run(&["replay", missing.to_str().unwrap()]);
    assert_eq!(r.code, Some(3), "{r:?}");
    assert_eq!(r.stderr.trim().lines().count(), 1, "{r:?}");
    let plain = d.path().join("plain-tcp.pcap");
    let frames = simulate(&PathSim {
        bytes: 256 << 10,
        ..PathSim::default()
    });
    std::fs::write(&plain, pcap(false, true, 1, &frames)).unwrap();
    let r = run(&["replay", plain.to_str().unwrap()]);
    assert_eq!(r.code, Some(11), "{r:?}");
    assert!(r.stderr.contains("no NFS or SMB2 request"), "{r:?}");
    assert_eq!(r.stderr.trim().lines().count(), 1, "{r:?}");
    for bad in [
        &["--rtt", "-1"][..],
        &["--rtt", "soon"],
        &["--rate", "fast"],
        &["--window", "0"],
    ] {
        let mut a = vec!["replay", plain.to_str().unwrap()];
        a.extend_from_slice(bad);
        let r = run(&a);
        assert_eq!(r.code, Some(2), "{bad:?}: {r:?}");
    }
}

/// The shipped example capture (16 READs, every one answered) has no gaps; cut before its
/// last reply's end, the report counts the unanswered call, leaves it out of the workload and
/// says so in a warning (JSON and text). No root needed.
#[test]
fn replay_says_what_the_capture_lacks() {
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
    let d = tempfile::tempdir().unwrap();
    let cut = d.path().join("cut.pcap");
    // without the last 5 packets: the last reply's last segment, the ACKs and FINs
    std::fs::write(&cut, &bytes[..ends[ends.len() - 6]]).unwrap();
    let gaps = |p: &std::path::Path| {
        let j = run(&["replay", p.to_str().unwrap(), "--json"]).ok().json();
        let s = &j["summary"];
        let g = &s["capture_gaps"];
        (
            s["requests"].as_u64().unwrap(),
            g["unanswered_calls"].as_u64().unwrap(),
            g["replies_without_call"].as_u64().unwrap(),
        )
    };
    assert_eq!(gaps(&full), (16, 0, 0));
    assert_eq!(gaps(&cut), (15, 1, 0));
    let text = |p: &std::path::Path| run(&["replay", p.to_str().unwrap()]).ok().stdout;
    assert!(!text(&full).contains("warning"), "{}", text(&full));
    let t = text(&cut);
    assert!(
        t.contains(
            "warning: the capture lacks part of the exchanges: 1 call(s) without their reply"
        ),
        "{t}"
    );
}

/// `op`'s requests over every client of a replay document.
fn all_requests(j: &serde_json::Value, op: &str) -> u64 {
    j["clients"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["ops"].as_array().unwrap().iter())
        .filter(|o| o["op"] == op)
        .map(|o| o["requests"].as_u64().unwrap())
        .sum()
}

/// A lab seqread of [`LAB_SIZE`] in 64 KiB blocks, 4 in flight, as `replay` finds it in
/// `pcap`: `op`'s requests, the bytes read, 4 in flight at most, one file of the size, the
/// model at the capture within 20 %. Returns the replay document's summary.
fn check_lab_read(pcap: &Path, op: &str, what: &str) -> serde_json::Value {
    let j = run(&["replay", pcap.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let j = j["summary"].clone();
    let c = busiest(&j["clients"], op, "requests");
    let read = c["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == op)
        .unwrap_or_else(|| panic!("{what}: no {op} in {c}"))
        .clone();
    assert_eq!(read["requests"], LAB_SIZE / BLOCK, "{what}: {c}");
    assert_eq!(read["errors"], 0, "{what}: {c}");
    assert_eq!(c["read_bytes"], LAB_SIZE, "{what}: {c}");
    assert_eq!(c["in_flight_max"], 4, "{what}: {c}");
    assert_eq!(c["file_count"], 1, "{what}: {c}");
    assert_eq!(c["files"][0]["extent_bytes"], LAB_SIZE, "{what}: {c}");
    let err = c["model_error_pct"].as_f64().unwrap();
    let captured = c["captured_duration_s"].as_f64().unwrap();
    let model = c["model_at_capture_s"].as_f64().unwrap();
    eprintln!(
        "{what}: {} {op}, {} bytes, in flight max {} mean {:.2}, captured {captured:.4} s, model {model:.4} s ({err:+.2} %)",
        read["requests"],
        c["read_bytes"],
        c["in_flight_max"],
        c["in_flight_mean"].as_f64().unwrap()
    );
    assert!(
        err.abs() <= 20.0,
        "{what}: model at the capture {err} %\n{c}"
    );
    j
}

/// Workload `w` of nsperf's engine from site a of `lab` on `url`: 4 MiB in 64 KiB blocks, 4
/// in flight, `extra` flags added.
fn lab_io(lab: &str, url: &str, w: &str, extra: &[&str]) {
    let mut a = vec!["-w", w, "-s", "4m", "-b", "64k", "--iodepth", "4", "-q"];
    a.extend_from_slice(extra);
    io_in_site(lab, "a", url, &a).ok();
}

/// The file read in the labs: 4 MiB in 64 KiB READs.
const LAB_SIZE: u64 = 4 * MIB;

/// nsperf's nfs engine reading 4 MiB through NFSv4.1 (`?version=4.1`) from nfs-ganesha in a
/// lab (2 ms), 64 KiB, 4 in flight, captured at the client (the file written before the
/// capture): replay finds the READs (COMPOUND main operation READ), the bytes, the depth,
/// the one file (from PUTFH), the model at the capture within 20 %; its READs equal the
/// READ operations tshark decodes.
#[test]
fn replay_of_an_nfs41_read_through_ganesha() {
    let what = "replay of an NFSv4.1 capture via nfs-ganesha";
    if !require_lab(what)
        || !require_program("tcpdump", what)
        || !require_program("tshark", what)
        || !require_program("ganesha.nfsd", what)
    {
        return;
    }
    let lab = lab_name("rpf");
    let _g = lab_up(&lab, &["--rtt", "2ms"]);
    let d = tempfile::tempdir().unwrap();
    let export = std::fs::canonicalize(d.path()).unwrap().join("export");
    std::fs::create_dir(&export).unwrap();
    let url = format!(
        "{}?version=4.1",
        serve_nfs_in_site(&lab, "b", &export, Some("ganesha"))
    );
    let io = |w: &str| lab_io(&lab, &url, w, &[]);
    io("seqwrite");
    let pcap = d.path().join("v41.pcap");
    if !capture_whole(&format!("nsp-{lab}-a"), &pcap, what, || io("seqread")) {
        return;
    }
    let j = check_lab_read(&pcap, "nfs4:READ", "NFSv4.1 seqread");
    let theirs = tshark_v4_ops(&pcap, 2049).get("25").copied().unwrap_or(0);
    let ours = all_requests(&j, "nfs4:READ");
    eprintln!("NFSv4.1 READs: replay {ours}, tshark {theirs}");
    assert_eq!(ours, theirs, "READs against tshark's nfs.opcode 25");
}

/// nsperf's smb engine reading 4 MiB through SMB3 from smbd in a lab, 64 KiB, 4 in flight,
/// captured at the client (the file written before the capture): replay finds the READs,
/// the bytes, the depth, the one file (its FileId from CREATE's response), the model at the
/// capture within 20 %; its READs equal the READ requests tshark dissects.
#[test]
fn replay_of_an_smb3_read_through_smbd() {
    let what = "replay of an SMB3 capture via smbd";
    if !require_lab(what)
        || !require_program("smbd", what)
        || !require_program("tcpdump", what)
        || !require_program("tshark", what)
    {
        return;
    }
    let lab = lab_name("rps");
    let _g = lab_up(&lab, &["--rtt", "2ms"]);
    let dir = Scratch::new(&disk_base(), "smb-replay");
    let Smbd { url, creds, .. } = serve_smb(&lab, &dir);
    let io = |w: &str| lab_io(&lab, &url, w, &["--credentials", &creds]);
    io("seqwrite");
    let d = tempfile::tempdir().unwrap();
    let pcap = d.path().join("smb3.pcap");
    if !capture_whole(&format!("nsp-{lab}-a"), &pcap, what, || io("seqread")) {
        return;
    }
    let j = check_lab_read(&pcap, "smb2:READ", "SMB3 seqread");
    let theirs = tshark_smb2_requests(&pcap).get(&8).copied().unwrap_or(0);
    let ours = all_requests(&j, "smb2:READ");
    eprintln!("SMB3 READs: replay {ours}, tshark {theirs}");
    assert_eq!(ours, theirs, "READs against tshark's smb2.cmd 8 requests");
}

/// The shipped example capture (16 READs on one connection, raw IP) followed, 1 s later, by
/// a copy of itself from a second client port (the port and the TCP checksum rewritten): a
/// capture of two clients. Returns its path and the two client connections' ids.
fn two_clients(dir: &Path) -> (std::path::PathBuf, u32, u32) {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/replay-read.pcap");
    let j = run(&["replay", full.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let clients = j["summary"]["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 1, "{j}");
    let client = clients[0]["client"].as_str().unwrap();
    let port: u16 = client.rsplit(':').next().unwrap().parse().unwrap();
    let other = port.wrapping_add(1);
    let bytes = std::fs::read(&full).unwrap();
    // a little-endian microsecond pcap of raw IPv4 (link type 101)
    assert_eq!(bytes[..4], [0xd4, 0xc3, 0xb2, 0xa1]);
    assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()), 101);
    let mut out = bytes.clone();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let mut rec = bytes[at..at + 16].to_vec();
        let caplen = u32::from_le_bytes(rec[8..12].try_into().unwrap()) as usize;
        let sec = u32::from_le_bytes(rec[..4].try_into().unwrap()) + 1;
        rec[..4].copy_from_slice(&sec.to_le_bytes());
        let mut pkt = bytes[at + 16..at + 16 + caplen].to_vec();
        assert_eq!((pkt[0] >> 4, pkt[9]), (4, 6), "IPv4 and TCP");
        let tcp = usize::from(pkt[0] & 0x0f) * 4;
        for p in [tcp, tcp + 2] {
            if u16::from_be_bytes([pkt[p], pkt[p + 1]]) == port {
                pkt[p..p + 2].copy_from_slice(&other.to_be_bytes());
                // RFC 1624: HC' = ~(~HC + ~m + m')
                let c = tcp + 16;
                let hc = u16::from_be_bytes([pkt[c], pkt[c + 1]]);
                let mut sum = u32::from(!hc) + u32::from(!port) + u32::from(other);
                while sum > 0xffff {
                    sum = (sum & 0xffff) + (sum >> 16);
                }
                pkt[c..c + 2].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            }
        }
        out.extend_from_slice(&rec);
        out.extend_from_slice(&pkt);
        at += 16 + caplen;
    }
    assert_eq!(at, bytes.len());
    let path = dir.join("two.pcap");
    std::fs::write(&path, &out).unwrap();
    let j = run(&["replay", path.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let ids: Vec<u32> = j["summary"]["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["connection"].as_u64().unwrap() as u32)
        .collect();
    let [a, b] = ids[..] else {
        panic!("two client connections: {j}")
    };
    (path, a, b)
}

/// `--conn ID`: a capture of two clients (16 READs each) replayed for one of them: its
/// connection alone in the report, its 16 requests and bytes, the id in the spec; an id that
/// is no client connection of the capture is a one-line usage error (exit 2). No root.
#[test]
fn replay_conn_takes_one_client_of_a_capture() {
    let d = tempfile::tempdir().unwrap();
    let (pcap, a, b) = two_clients(d.path());
    let p = pcap.to_str().unwrap();
    let all = run(&["replay", p, "--json"]).ok().json();
    assert_eq!(all["summary"]["requests"], 32, "{all}");
    assert_eq!(read_bytes(&all["summary"]["clients"]), 2 * 16 * 16384);
    for id in [a, b] {
        let j = run(&["replay", p, "--conn", &id.to_string(), "--json"])
            .ok()
            .json();
        let s = &j["summary"];
        let clients = s["clients"].as_array().unwrap();
        assert_eq!(clients.len(), 1, "{j}");
        assert_eq!(clients[0]["connection"], id, "{j}");
        assert_eq!(s["requests"], 16, "{j}");
        assert_eq!(all_requests(s, "nfs3:READ"), 16, "{j}");
        assert_eq!(read_bytes(&s["clients"]), 16 * 16384, "{j}");
        assert_eq!(j["spec"]["connections"], serde_json::json!([id]), "{j}");
        assert_eq!(s["capture_gaps"]["unanswered_calls"], 0, "{j}");
    }
    let both = run(&["replay", p, "--conn", &format!("{a},{b}"), "--json"])
        .ok()
        .json();
    assert_eq!(both["summary"]["requests"], 32, "{both}");
    let text = run(&["replay", p, "--conn", &b.to_string()]).ok().stdout;
    assert!(
        text.contains("16 storage requests on 1 client connection(s)"),
        "{text}"
    );
    for bad in ["99", &format!("{a},99")] {
        let r = run(&["replay", p, "--conn", bad]);
        assert_eq!(r.code, Some(2), "{r:?}");
        let e = r.stderr.trim();
        assert!(
            e.contains("--conn 99") && e.contains("no client connection 99"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}
