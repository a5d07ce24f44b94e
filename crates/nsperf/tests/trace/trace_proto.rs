//! The protocol layer of `nsperf trace` against tshark: captures made here of NFS and SMB
//! traffic (NFSv3 through nsperf's embedded server and nfs-ganesha, NFSv4 through ganesha,
//! SMB3 through smbd; nsperf's engines, libnfs's nfs-cp and Samba's smbclient), decoded by
//! nsperf and by tshark's `-z rpc,srt` / `-z smb2,srt`, its per-operation counts and its
//! per-response times (medians); a test per capture kind, and the protocol's verdict in a lab
//! at 100 ms RTT for NFS and SMB; each skipped with a printed reason where root, tcpdump,
//! tshark or a server or client is missing.

use crate::common;
use common::lab::{Lab, io_in_site, lab_name};
use common::scratch::{Scratch, disk_base};
use common::servers::{Smbd, embedded_nfs, serve_nfs_in_site, serve_smb, url_port};
use common::*;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `nsperf lab nfsd DIR` on loopback, killed on drop; returns its URL and port.
fn embedded(dir: &Path) -> (KillOnDrop, String, u16) {
    let (srv, url) = embedded_nfs(dir, &[]);
    let port = url_port(&url);
    (srv, url, port)
}

/// Captures TCP port `port` on lo (whole frames, a large buffer, immediate mode: a packet is
/// handed over at once, not in the kernel's buffer block that SIGINT would lose) while
/// `work` runs; returns tcpdump's report of packets dropped by the kernel.
pub(crate) fn capture(pcap: &Path, port: u16, work: impl FnOnce()) -> u64 {
    let mut dump = Command::new("tcpdump")
        .args([
            "-i",
            "lo",
            "-s",
            "0",
            "-B",
            "65536",
            "-U",
            "--immediate-mode",
            "-w",
        ])
        .arg(pcap)
        .args(["tcp", "port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(dump.stderr.take().unwrap());
    let mut line = String::new();
    let _ = err.read_line(&mut line);
    let dump = KillOnDrop(dump);
    work();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: SIGINT to our own child; tcpdump then flushes, reports and exits.
    unsafe { libc::kill(dump.0.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    drop(dump);
    rest.lines()
        .find(|l| l.contains("dropped by kernel"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// One procedure as tshark's `-z rpc,srt` reports it: calls timed, min, max, mean (s).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Srt {
    pub(crate) calls: u64,
    min: f64,
    max: f64,
    avg: f64,
}

/// tshark's `-z rpc,srt,100003,VERS` table, by procedure name.
pub(crate) fn tshark_srt(pcap: &Path, port: u16, vers: u32) -> BTreeMap<String, Srt> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args([
            // Segments a loopback capture under load records out of order (and a few
            // twice) are reassembled as nsperf does; without it tshark loses the record.
            "-o",
            "tcp.reassemble_out_of_order:TRUE",
            "-d",
            &format!("tcp.port=={port},rpc"),
            "-q",
            "-z",
            &format!("rpc,srt,100003,{vers}"),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 7 && f[0].parse::<u32>().is_ok() {
            m.insert(
                f[1].to_string(),
                Srt {
                    calls: f[2].parse().unwrap(),
                    min: f[3].parse().unwrap(),
                    max: f[4].parse().unwrap(),
                    avg: f[5].parse().unwrap(),
                },
            );
        }
    }
    m
}

/// NFSv3 calls per procedure number, as tshark dissects them.
fn tshark_calls(pcap: &Path, port: u16) -> BTreeMap<u32, u64> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args([
            // Segments a loopback capture under load records out of order (and a few
            // twice) are reassembled as nsperf does; without it tshark loses the record.
            "-o",
            "tcp.reassemble_out_of_order:TRUE",
            "-d",
            &format!("tcp.port=={port},rpc"),
            "-Y",
            "nfs",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-e",
            "rpc.msgtyp",
            "-e",
            "nfs.procedure_v3",
        ])
        .output()
        .unwrap();
    let mut m = BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split('\t').collect();
        let (Some(kinds), Some(procs)) = (f.first(), f.get(1)) else {
            continue;
        };
        for (k, p) in kinds.split(',').zip(procs.split(',')) {
            if k == "0" {
                *m.entry(p.parse().unwrap()).or_insert(0) += 1;
            }
        }
    }
    m
}

/// nsperf's figures of every NFS procedure of version `vers`, summed over the connections:
/// (procedure, calls, Srt).
fn nsperf_ops(pcap: &Path, vers: u32) -> BTreeMap<String, (u32, u64, Srt)> {
    let j = run(&["trace", pcap.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let mut m: BTreeMap<String, (u32, u64, Srt, f64)> = BTreeMap::new();
    for c in j["summary"]["connections"].as_array().unwrap() {
        let Some(ops) = c["protocol"]["ops"].as_array() else {
            continue;
        };
        for o in ops {
            if o["program"] != "nfs" || o["version"] != vers {
                continue;
            }
            let s = &o["srt"];
            let n = s["samples"].as_u64().unwrap();
            let e = m.entry(o["op"].as_str().unwrap().to_string()).or_insert((
                o["procedure"].as_u64().unwrap() as u32,
                0,
                Srt {
                    min: f64::MAX,
                    ..Srt::default()
                },
                0.0,
            ));
            e.1 += o["calls"].as_u64().unwrap();
            if n > 0 {
                e.2.calls += n;
                e.2.min = e.2.min.min(s["min_ns"].as_f64().unwrap() / 1e9);
                e.2.max = e.2.max.max(s["max_ns"].as_f64().unwrap() / 1e9);
                e.3 += s["mean_ns"].as_f64().unwrap() * n as f64 / 1e9;
            }
        }
    }
    m.into_iter()
        .map(|(k, (p, calls, mut srt, sum))| {
            srt.avg = if srt.calls > 0 {
                sum / srt.calls as f64
            } else {
                0.0
            };
            (k, (p, calls, srt))
        })
        .collect()
}

/// Per-procedure calls equal tshark's, and the replies timed, min, max and mean service
/// response times equal tshark's `-z rpc,srt` within its printed resolution (1 µs; the
/// capture's timestamps are µs too).
fn check_against_tshark(pcap: &Path, port: u16) {
    let ours = nsperf_ops(pcap, 3);
    let srt = tshark_srt(pcap, port, 3);
    let calls = tshark_calls(pcap, port);
    assert!(!srt.is_empty(), "tshark found no NFSv3 calls");
    for (name, t) in &srt {
        let (_, _, n) = ours
            .get(name)
            .unwrap_or_else(|| panic!("{name}: tshark {t:?}, nsperf none"));
        eprintln!(
            "{name}: calls timed tshark {} nsperf {}; min {:.6}/{:.6} max {:.6}/{:.6} mean {:.6}/{:.6} s",
            t.calls, n.calls, t.min, n.min, t.max, n.max, t.avg, n.avg
        );
        assert_eq!(n.calls, t.calls, "{name}");
        assert!((n.min - t.min).abs() < 1.5e-6, "{name} min {n:?} {t:?}");
        assert!((n.max - t.max).abs() < 1.5e-6, "{name} max {n:?} {t:?}");
        assert!((n.avg - t.avg).abs() < 1.5e-6, "{name} mean {n:?} {t:?}");
    }
    for (name, (proc_, c, _)) in &ours {
        assert_eq!(
            Some(c),
            calls.get(proc_),
            "{name}: calls nsperf {c}, tshark {:?}",
            calls.get(proc_)
        );
    }
    assert_eq!(ours.len(), calls.len(), "{ours:?} {calls:?}");
    check_medians(pcap, Medians::Rpc { port, vers: 3 });
}

/// Whose response times [`check_medians`] compares.
#[derive(Debug, Clone, Copy)]
enum Medians {
    /// NFS version `vers` on TCP port `port`.
    Rpc { port: u16, vers: u32 },
    /// SMB2 (port 445).
    Smb2,
}

/// A connection by its two ports, smaller first.
fn port_pair(x: u16, y: u16) -> (u16, u16) {
    (x.min(y), x.max(y))
}

/// The lower median (rank ⌈n/2⌉, as nsperf's), seconds.
fn lower_median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len().div_ceil(2) - 1]
}

/// Per connection and operation, the median service response time: tshark's per-response
/// times (`rpc.time`, or `smb2.time` of final responses) against nsperf's `srt.median_ns`.
/// Equal within tshark's printed resolution (1 µs; 1.5 µs allowed) up to 32 responses,
/// which nsperf keeps exactly; past them within its histogram's precision (4.4 %).
fn check_medians(pcap: &Path, kind: Medians) {
    let (decode, filter, fields): (Option<String>, String, [&str; 3]) = match kind {
        Medians::Rpc { port, vers } => (
            Some(format!("tcp.port=={port},rpc")),
            format!("rpc.msgtyp == 1 && rpc.program == 100003 && rpc.programversion == {vers}"),
            ["rpc.procedure", "rpc.time", "rpc.msgtyp"],
        ),
        Medians::Smb2 => (
            None,
            "smb2.flags.response == 1".into(),
            ["smb2.cmd", "smb2.time", "smb2.nt_status"],
        ),
    };
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-o", "tcp.reassemble_out_of_order:TRUE"])
        .args(decode.iter().flat_map(|d| ["-d", d.as_str()]))
        .args(["-Y", &filter, "-T", "fields", "-E", "occurrence=a"])
        .args(["-e", "tcp.srcport", "-e", "tcp.dstport"])
        .args(fields.iter().flat_map(|f| ["-e", f]))
        .output()
        .unwrap();
    let mut theirs: BTreeMap<((u16, u16), u32), Vec<f64>> = BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split('\t').collect();
        let [sp, dp, ops, times, status] = f[..] else {
            panic!("tshark fields: {l:?}");
        };
        let ports = port_pair(sp.parse().unwrap(), dp.parse().unwrap());
        let ops: Vec<&str> = ops.split(',').collect();
        let times: Vec<&str> = times.split(',').collect();
        assert_eq!(ops.len(), times.len(), "tshark fields: {l:?}");
        let status = status.split(',').chain(std::iter::repeat(""));
        for ((op, t), st) in ops.iter().zip(times).zip(status) {
            // An SMB2 interim response (STATUS_PENDING) ends nothing: the final one is timed.
            if matches!(kind, Medians::Smb2) && matches!(st, "0x00000103" | "259") {
                continue;
            }
            theirs
                .entry((ports, op.parse().unwrap()))
                .or_default()
                .push(t.parse().unwrap());
        }
    }
    assert!(!theirs.is_empty(), "tshark timed no response");
    let j = run(&["trace", pcap.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let port = |e: &serde_json::Value| -> u16 {
        e.as_str()
            .unwrap()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut ours: BTreeMap<((u16, u16), u32), (u64, f64)> = BTreeMap::new();
    for c in j["summary"]["connections"].as_array().unwrap() {
        let ports = port_pair(port(&c["a"]), port(&c["b"]));
        for o in c["protocol"]["ops"].as_array().into_iter().flatten() {
            let wanted = match kind {
                Medians::Rpc { vers, .. } => o["program"] == "nfs" && o["version"] == vers,
                Medians::Smb2 => o["program"] == "smb2",
            };
            let n = o["srt"]["samples"].as_u64().unwrap();
            if wanted && n > 0 {
                let m = o["srt"]["median_ns"].as_f64().unwrap() / 1e9;
                ours.insert((ports, o["procedure"].as_u64().unwrap() as u32), (n, m));
            }
        }
    }
    for (key, v) in &theirs {
        let (n, m) = ours
            .get(key)
            .unwrap_or_else(|| panic!("{key:?}: tshark timed {}, nsperf none", v.len()));
        let t = lower_median(v.clone());
        eprintln!(
            "median SRT {key:?}: {} responses, tshark {t:.6} s, nsperf {m:.6} s",
            v.len()
        );
        assert_eq!(*n, v.len() as u64, "{key:?}");
        let tolerance = if v.len() <= 32 {
            1.5e-6
        } else {
            0.044 * t + 1.5e-6
        };
        assert!(
            (m - t).abs() <= tolerance,
            "{key:?}: median tshark {t}, nsperf {m}"
        );
    }
    assert_eq!(ours.len(), theirs.len(), "{ours:?}");
}

fn tools(what: &str) -> bool {
    require_root(what) && require_program("tcpdump", what) && require_program("tshark", what)
}

/// NFSv3 through nsperf's embedded server, nsperf's own nfs engine: writes, reads (4 in
/// flight, 64 KiB) and the metadata workload (LOOKUP, CREATE, REMOVE, …, errors included).
#[test]
fn nfs3_embedded_server_nsperf_engine_agrees_with_tshark() {
    let what = "NFSv3 decoding against tshark -z rpc,srt";
    if !tools(what) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let export = d.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let (_server, url, port) = embedded(&export);
    let pcap = d.path().join("nfs3.pcap");
    let mut dropped = 0;
    for _attempt in 0..3 {
        dropped = capture(&pcap, port, || nfs_engine_workload(None, &url));
        if dropped == 0 {
            break;
        }
    }
    if dropped > 0 {
        skip(&format!(
            "{what}: tcpdump's kernel buffer dropped {dropped} packets three times"
        ));
        return;
    }
    check_against_tshark(&pcap, port);
    let j = run(&["trace", pcap.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let reads = |p: &serde_json::Value| {
        p["ops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["op"] == "READ")
            .map_or(0, |o| o["data_bytes"].as_u64().unwrap())
    };
    // the measured pass's connection: the most READ data (the warm-up before it reads 1 MiB
    // at a time on a connection of its own, as many bytes: the last of the most is the
    // pass; the metadata workload's READs of 4 KiB files are as many calls, far fewer bytes)
    let p = j["summary"]["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.get("protocol"))
        .max_by_key(|p| reads(p))
        .expect("a connection with READs")
        .clone();
    assert_eq!(p["protocol"], "onc_rpc");
    assert_eq!(p["nfs_versions"], serde_json::json!([3]));
    assert_eq!(p["missing_bytes"], 0);
    let max = p["in_flight_max"].as_u64().unwrap();
    assert!((1..=4).contains(&max), "{p}");
    let read = p["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == "READ")
        .unwrap();
    assert_eq!(read["size_max"], 65536, "{read}");
    assert!(read["data_bytes"].as_u64().unwrap() >= 2 << 20, "{read}");
    let r = run(&["trace", pcap.to_str().unwrap(), "--top", "20"]).ok();
    assert!(r.stdout.contains("ONC RPC (NFSv3)"), "{}", r.stdout);
}

/// NFSv3 through nsperf's embedded server from a third-party client: libnfs's nfs-cp writing
/// a 2 MiB file and reading it back (MOUNT and NFS on the server's one port, no portmapper).
#[test]
fn nfs3_embedded_server_nfs_cp_agrees_with_tshark() {
    let what = "NFSv3 from nfs-cp decoded against tshark -z rpc,srt";
    if !tools(what) || !require_program("nfs-cp", what) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let export = d.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let (_server, _url, port) = embedded(&export);
    let src = d.path().join("src.bin");
    let back = d.path().join("back.bin");
    let data: Vec<u8> = (0..2u32 << 20).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let url = format!(
        "nfs://127.0.0.1{}/cp.bin?nfsport={port}&mountport={port}&version=3",
        export.display()
    );
    let pcap = d.path().join("nfs-cp.pcap");
    let mut dropped = 0;
    for _attempt in 0..3 {
        dropped = capture(&pcap, port, || {
            for (from, to) in [
                (src.to_str().unwrap(), url.as_str()),
                (&url, back.to_str().unwrap()),
            ] {
                let out = Command::new("nfs-cp").args([from, to]).output().unwrap();
                assert!(out.status.success(), "nfs-cp {from} {to}: {out:?}");
            }
        });
        if dropped == 0 {
            break;
        }
    }
    if dropped > 0 {
        skip(&format!(
            "{what}: tcpdump's kernel buffer dropped {dropped} packets three times"
        ));
        return;
    }
    assert_eq!(std::fs::read(&back).unwrap(), data);
    check_against_tshark(&pcap, port);
    let ops = nsperf_ops(&pcap, 3);
    let (_, writes, _) = ops.get("WRITE").expect("WRITE calls");
    let (_, reads, _) = ops.get("READ").expect("READ calls");
    assert!(*writes > 0 && *reads > 0, "{ops:?}");
}

/// A lab taken down when dropped.
/// `nsperf lab up LAB --sites a,b` with `flags`, segmentation offloads off on both sites'
/// `wan0` (real-sized segments in the capture, as on a wire); taken down when dropped.
pub(crate) fn lab_up(lab: &str, flags: &[&str]) -> Lab {
    let mut a = vec!["--sites", "a,b"];
    a.extend_from_slice(flags);
    let g = Lab::up_named(lab.to_string(), &a);
    g.offloads_off(&["a", "b"]);
    g
}

/// nsperf's nfs engine against `url` with 64 KiB RPCs, 4 in flight: a 2 MiB write
/// committed at the end, a 2 MiB read, and the metadata workload (LOOKUP, CREATE, REMOVE,
/// …, errors included); from site a of `lab` when given, else here.
fn nfs_engine_workload(lab: Option<&str>, url: &str) {
    for (w, extra) in [
        ("seqwrite", &["-s", "2m", "--fsync", "end"][..]),
        ("seqread", &["-s", "2m"][..]),
        ("meta", &["--files", "16", "--file-size", "4k"][..]),
    ] {
        let mut a = vec!["-w", w, "-b", "64k", "--iodepth", "4", "-q"];
        a.extend_from_slice(extra);
        match lab {
            Some(lab) => io_in_site(lab, "a", url, &a),
            None => run(&[&["io", "run", url][..], &a].concat()),
        }
        .ok();
    }
}

/// tcpdump on `wan0` of a lab site (whole frames) writing `pcap`, stopped by SIGINT.
struct SiteCapture(KillOnDrop, std::path::PathBuf);

impl SiteCapture {
    fn start(ns: &str, pcap: &Path) -> SiteCapture {
        let td = Command::new("ip")
            .args([
                "netns", "exec", ns, "tcpdump", "-i", "wan0", "-s", "0", "-B", "65536", "-U",
            ])
            .arg("-w")
            .arg(pcap)
            .arg("tcp")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(800));
        SiteCapture(KillOnDrop(td), pcap.to_path_buf())
    }

    /// Once the file has stopped growing for 1.5 s (on a loaded machine tcpdump lags the
    /// traffic, and the kernel hands it a block of packets once full or after its 1 s
    /// timeout: SIGINT loses what it has not read; at most 20 s), SIGINT, and waits for
    /// tcpdump to exit; returns its report of packets dropped by the kernel.
    fn stop(self) -> u64 {
        let size = || std::fs::metadata(&self.1).map_or(0, |m| m.len());
        let (mut last, mut still) = (size(), 0);
        for _ in 0..200 {
            std::thread::sleep(Duration::from_millis(100));
            let now = size();
            still = if now == last { still + 1 } else { 0 };
            last = now;
            if still >= 15 {
                break;
            }
        }
        // SAFETY: SIGINT to our own child (ip netns exec execs tcpdump: same pid).
        unsafe { libc::kill(self.0.0.id() as i32, libc::SIGINT) };
        let mut c = self.0;
        let mut err = String::new();
        if let Some(mut e) = c.0.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let _ = c.0.wait();
        err.lines()
            .find(|l| l.contains("dropped by kernel"))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

/// Captures on `wan0` of lab namespace `ns` into `pcap` while `work` runs, up to three
/// times until the capture is whole: no packet dropped by tcpdump's kernel buffer and no
/// byte of a decoded stream missing in nsperf's analysis (tshark needs that too: after a
/// hole inside a multi-MiB SMB2 message tshark 4.0 dissects nothing more of that
/// direction). False, after a printed skip, when all three missed some.
pub(crate) fn capture_whole(ns: &str, pcap: &Path, what: &str, mut work: impl FnMut()) -> bool {
    let mut why = String::new();
    for _attempt in 0..3 {
        let cap = SiteCapture::start(ns, pcap);
        work();
        let dropped = cap.stop();
        let j = run(&["trace", pcap.to_str().unwrap(), "--json"])
            .ok()
            .json();
        let missing: u64 = j["summary"]["connections"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["protocol"]["missing_bytes"].as_u64())
            .sum();
        if dropped == 0 && missing == 0 {
            return true;
        }
        why = format!("{dropped} packets dropped by the kernel, {missing} bytes missing");
        eprintln!("capture not whole ({why}): again");
    }
    skip(&format!(
        "{what}: the capture was not whole three times ({why})"
    ));
    false
}

/// The connection of `pcap` that carried the most READs: its JSON.
fn busiest_read_connection(pcap: &Path) -> serde_json::Value {
    let j = run(&["trace", pcap.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let reads = |c: &serde_json::Value| {
        c["protocol"]["ops"].as_array().map_or(0, |ops| {
            ops.iter()
                .filter(|o| o["op"] == "READ")
                .map(|o| o["calls"].as_u64().unwrap())
                .sum::<u64>()
        })
    };
    j["summary"]["connections"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|c| reads(c))
        .expect("a connection")
        .clone()
}

/// Issue 22's done-when for the verdict: across a lab at 100 ms RTT, nsperf's nfs engine
/// reading 64 KiB with one RPC in flight from the embedded server gets a protocol-bound
/// verdict whose ceiling is within 10 % of the measured rate (and TCP's application-limited
/// verdict says why); with 16 in flight on a 45 Mbit/s link the verdict is the link (TCP's
/// congestion window, or loss where the link's queue overflows; the network setting the
/// pace). Captured at the client.
#[test]
fn lab_one_read_in_flight_is_protocol_bound_and_sixteen_on_a_t3_are_the_link() {
    let what = "protocol verdict lab test";
    if !require_lab(what) || !require_program("tcpdump", what) {
        return;
    }
    let lab = lab_name("tpv");
    let _g = lab_up(&lab, &["--rtt", "100ms"]);
    let d = tempfile::tempdir().unwrap();
    let export = d.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let url = serve_nfs_in_site(&lab, "b", &export, None);
    let ns = format!("nsp-{lab}-a");
    let bin = nsperf_bin();
    let read = |size: &str, depth: &str, pcap: &Path| {
        let cap = SiteCapture::start(&ns, pcap);
        run(&[
            "lab",
            "exec",
            &lab,
            "a",
            "--",
            bin,
            "io",
            "run",
            &url,
            "-w",
            "seqread",
            "-s",
            size,
            "-b",
            "64k",
            "--iodepth",
            depth,
            "-q",
        ])
        .ok();
        cap.stop();
        busiest_read_connection(pcap)
    };

    assert_one_in_flight_protocol_bound(&read("2m", "1", &d.path().join("one.pcap")));
    run(&["lab", "set", &lab, "--rate", "45mbit"]).ok();
    let sixteen = d.path().join("sixteen.pcap");
    assert_sixteen_on_a_t3_are_the_link(&read("16m", "16", &sixteen), &sixteen);
}

/// The connection `c` of 64 KiB READs one at a time across a 100 ms lab path: a
/// protocol-bound verdict (READ, 64 KiB, 1 ± 0.1 in flight, the path RTT within 10 % of
/// 100 ms, the measured rate 90-100 % of the ceiling) and TCP's application-limited verdict
/// saying so.
fn assert_one_in_flight_protocol_bound(c: &serde_json::Value) {
    let p = &c["protocol"]["diagnosis"];
    eprintln!(
        "1 in flight: {}\nTCP: {}",
        p["message"], c["diagnosis"]["message"]
    );
    assert_eq!(p["limit"], "requests_in_flight", "{p}");
    assert_eq!(p["op"], "READ");
    assert_eq!(p["size_mean_bytes"], 65536.0);
    let (measured, ceiling) = (
        p["measured_bps"].as_f64().unwrap(),
        p["ceiling_bps"].as_f64().unwrap(),
    );
    assert!(
        measured <= ceiling * 1.001 && measured >= 0.9 * ceiling,
        "measured {measured}, ceiling {ceiling}"
    );
    assert!((p["in_flight"].as_f64().unwrap() - 1.0).abs() < 0.1, "{p}");
    let rtt = p["path_rtt_ns"].as_f64().unwrap();
    assert!((rtt / 100e6 - 1.0).abs() < 0.1, "{rtt}");
    assert_eq!(c["diagnosis"]["limit"], "application", "{}", c["diagnosis"]);
    assert!(
        c["diagnosis"]["message"]
            .as_str()
            .unwrap()
            .contains("(protocol-bound)"),
        "{}",
        c["diagnosis"]["message"]
    );
}

/// The connection `c` of `pcap` with 16 READs of 64 KiB in flight through a 45 Mbit/s
/// link at 100 ms: the link (TCP's congestion window, or loss where its queue overflows),
/// the protocol's verdict the transfer, 30-45 Mbit/s measured, the requests in flight
/// allowing more than 1.3 times that.
fn assert_sixteen_on_a_t3_are_the_link(c: &serde_json::Value, pcap: &Path) {
    let p = &c["protocol"]["diagnosis"];
    eprintln!(
        "16 in flight: {}\nTCP: {}",
        p["message"], c["diagnosis"]["message"]
    );
    let tcp = c["diagnosis"]["limit"].as_str().unwrap();
    assert!(matches!(tcp, "congestion" | "loss"), "{}", c["diagnosis"]);
    assert_eq!(p["limit"], "transfer", "{p}");
    let (measured, ceiling) = (
        p["measured_bps"].as_f64().unwrap(),
        p["ceiling_bps"].as_f64().unwrap(),
    );
    assert!(measured > 30e6 && measured < 45e6, "{measured}");
    assert!(ceiling > 1.3 * measured, "{p}");
    let r = run(&["trace", pcap.to_str().unwrap()]).ok();
    assert!(
        r.stdout
            .contains("protocol's pace: the network set the pace"),
        "{}",
        r.stdout
    );
}

/// NFSv4 operations in the calls, as tshark dissects them (each `nfs.opcode` of a call).
pub(crate) fn tshark_v4_ops(pcap: &Path, port: u16) -> BTreeMap<String, u64> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args([
            // Segments a loopback capture under load records out of order (and a few
            // twice) are reassembled as nsperf does; without it tshark loses the record.
            "-o",
            "tcp.reassemble_out_of_order:TRUE",
            "-d",
            &format!("tcp.port=={port},rpc"),
            "-Y",
            "rpc.msgtyp == 0 && nfs",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-e",
            "nfs.opcode",
        ])
        .output()
        .unwrap();
    let mut m = BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        for op in l.split(',').filter(|x| !x.trim().is_empty()) {
            *m.entry(op.trim().to_string()).or_insert(0) += 1;
        }
    }
    m
}

/// NFSv4.0 through nfs-ganesha in a lab, from a third-party client: libnfs's nfs-cp reading
/// a 2 MiB file (`?version=4`), captured at the client. The COMPOUND calls' counts and
/// response times equal `tshark -z rpc,srt,100003,4`, and the operations inside them equal
/// tshark's per-operation counts (`nfs.opcode` in calls).
#[test]
fn nfs4_ganesha_nfs_cp_compound_ops_agree_with_tshark() {
    let what = "NFSv4 COMPOUND operations from nfs-cp via nfs-ganesha against tshark";
    if !require_lab(what)
        || !require_program("tcpdump", what)
        || !require_program("tshark", what)
        || !require_program("nfs-cp", what)
        || !require_program("ganesha.nfsd", what)
    {
        return;
    }
    let lab = lab_name("vfr");
    let _g = Lab(lab.clone());
    run(&["lab", "up", &lab, "--sites", "a,b", "--rtt", "2ms"]).ok();
    let d = tempfile::tempdir().unwrap();
    let export = std::fs::canonicalize(d.path()).unwrap().join("export");
    std::fs::create_dir(&export).unwrap();
    let data: Vec<u8> = (0..2u32 << 20).map(|i| (i * 13 % 251) as u8).collect();
    std::fs::write(export.join("f.bin"), &data).unwrap();
    let base = serve_nfs_in_site(&lab, "b", &export, Some("ganesha"));
    let pcap = d.path().join("v4.pcap");
    let back = d.path().join("back.bin");
    let cap = SiteCapture::start(&format!("nsp-{lab}-a"), &pcap);
    let url = format!("{base}/f.bin?version=4");
    let out = Command::new("ip")
        .args(["netns", "exec", &format!("nsp-{lab}-a"), "nfs-cp", &url])
        .arg(&back)
        .output()
        .unwrap();
    cap.stop();
    assert!(out.status.success(), "nfs-cp {url}: {out:?}");
    assert_eq!(std::fs::read(&back).unwrap(), data);

    let ours = nsperf_ops(&pcap, 4);
    let srt = tshark_srt(&pcap, 2049, 4);
    check_medians(
        &pcap,
        Medians::Rpc {
            port: 2049,
            vers: 4,
        },
    );
    let t = srt.get("COMPOUND").expect("tshark timed COMPOUND calls");
    let (_, calls, n) = ours.get("COMPOUND").expect("nsperf decoded COMPOUND calls");
    eprintln!(
        "COMPOUND: calls {calls}, timed tshark {} nsperf {}; min {:.6}/{:.6} max {:.6}/{:.6} mean {:.6}/{:.6} s",
        t.calls, n.calls, t.min, n.min, t.max, n.max, t.avg, n.avg
    );
    assert_eq!(n.calls, t.calls);
    assert!((n.min - t.min).abs() < 1.5e-6, "min {n:?} {t:?}");
    assert!((n.max - t.max).abs() < 1.5e-6, "max {n:?} {t:?}");
    assert!((n.avg - t.avg).abs() < 1.5e-6, "mean {n:?} {t:?}");

    let j = run(&["trace", pcap.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let mut mine: BTreeMap<String, u64> = BTreeMap::new();
    let mut cut = 0;
    for c in j["summary"]["connections"].as_array().unwrap() {
        cut += c["protocol"]["compound_calls_cut"].as_u64().unwrap_or(0);
        for o in c["protocol"]["compound_ops"]
            .as_array()
            .into_iter()
            .flatten()
        {
            *mine.entry(o["opcode"].to_string()).or_insert(0) += o["calls"].as_u64().unwrap();
        }
    }
    let theirs = tshark_v4_ops(&pcap, 2049);
    eprintln!("operations (opcode: calls): tshark {theirs:?}, nsperf {mine:?}");
    assert_eq!(cut, 0);
    assert_eq!(mine, theirs);
    for op in ["22", "25"] {
        assert!(
            mine.get(op).is_some_and(|n| *n > 0),
            "PUTFH and READ: {mine:?}"
        );
    }
    let r = run(&["trace", pcap.to_str().unwrap()]).ok();
    assert!(
        r.stdout.contains("NFSv4 operations in COMPOUND calls: ") && r.stdout.contains("READ "),
        "{}",
        r.stdout
    );
}

/// tshark's `-z smb2,srt` table, by command number.
fn tshark_smb2_srt(pcap: &Path) -> BTreeMap<u32, Srt> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args([
            "-o",
            "tcp.reassemble_out_of_order:TRUE",
            "-q",
            "-z",
            "smb2,srt",
        ])
        .output()
        .unwrap();
    let mut m = BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        // Index, a name of one or two words, calls, min, max, avg, sum.
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 7 && f[0].parse::<u32>().is_ok() {
            let n = f.len();
            m.insert(
                f[0].parse().unwrap(),
                Srt {
                    calls: f[n - 5].parse().unwrap(),
                    min: f[n - 4].parse().unwrap(),
                    max: f[n - 3].parse().unwrap(),
                    avg: f[n - 2].parse().unwrap(),
                },
            );
        }
    }
    m
}

/// SMB2 requests per command number, as tshark dissects them (each command of a compound
/// chain counts).
pub(crate) fn tshark_smb2_requests(pcap: &Path) -> BTreeMap<u32, u64> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args([
            "-o",
            "tcp.reassemble_out_of_order:TRUE",
            "-Y",
            "smb2",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-e",
            "smb2.cmd",
            "-e",
            "smb2.flags.response",
        ])
        .output()
        .unwrap();
    let mut m = BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split('\t').collect();
        let (Some(cmds), Some(resp)) = (f.first(), f.get(1)) else {
            continue;
        };
        for (c, r) in cmds.split(',').zip(resp.split(',')) {
            if matches!(r, "0" | "False") {
                *m.entry(c.parse().unwrap()).or_insert(0) += 1;
            }
        }
    }
    m
}

/// nsperf's figures of every SMB2 command, summed over the connections: command number →
/// (requests, Srt), and the SMB block of each connection.
fn nsperf_smb2(pcap: &Path) -> (BTreeMap<u32, (u64, Srt)>, Vec<serde_json::Value>) {
    let j = run(&["trace", pcap.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let mut m: BTreeMap<u32, (u64, Srt, f64)> = BTreeMap::new();
    let mut smb = Vec::new();
    for c in j["summary"]["connections"].as_array().unwrap() {
        let p = &c["protocol"];
        if p["protocol"] != "smb2" {
            continue;
        }
        smb.push(p["smb"].clone());
        for o in p["ops"].as_array().unwrap() {
            assert_eq!(o["program"], "smb2");
            let s = &o["srt"];
            let n = s["samples"].as_u64().unwrap();
            let e = m.entry(o["procedure"].as_u64().unwrap() as u32).or_insert((
                0,
                Srt {
                    min: f64::MAX,
                    ..Srt::default()
                },
                0.0,
            ));
            e.0 += o["calls"].as_u64().unwrap();
            if n > 0 {
                e.1.calls += n;
                e.1.min = e.1.min.min(s["min_ns"].as_f64().unwrap() / 1e9);
                e.1.max = e.1.max.max(s["max_ns"].as_f64().unwrap() / 1e9);
                e.2 += s["mean_ns"].as_f64().unwrap() * n as f64 / 1e9;
            }
        }
    }
    let m = m
        .into_iter()
        .map(|(k, (calls, mut srt, sum))| {
            srt.avg = if srt.calls > 0 {
                sum / srt.calls as f64
            } else {
                0.0
            };
            (k, (calls, srt))
        })
        .collect();
    (m, smb)
}

/// Per-command requests equal tshark's, and per command the responses timed, min, max and
/// mean service response times equal `tshark -z smb2,srt` within its printed resolution
/// (1 µs); returns nsperf's figures per command and the SMB block of each connection.
fn check_smb2_against_tshark(pcap: &Path) -> (BTreeMap<u32, (u64, Srt)>, Vec<serde_json::Value>) {
    let (ours, smb) = nsperf_smb2(pcap);
    let srt = tshark_smb2_srt(pcap);
    let requests = tshark_smb2_requests(pcap);
    assert!(!srt.is_empty(), "tshark found no SMB2 responses");
    assert!(!smb.is_empty(), "nsperf found no SMB2 connection");
    for (cmd, t) in &srt {
        let (_, n) = ours
            .get(cmd)
            .unwrap_or_else(|| panic!("command {cmd}: tshark {t:?}, nsperf none"));
        eprintln!(
            "SMB2 command {cmd}: timed tshark {} nsperf {}; min {:.6}/{:.6} max {:.6}/{:.6} mean {:.6}/{:.6} s",
            t.calls, n.calls, t.min, n.min, t.max, n.max, t.avg, n.avg
        );
        assert_eq!(n.calls, t.calls, "command {cmd}");
        assert!((n.min - t.min).abs() < 1.5e-6, "{cmd} min {n:?} {t:?}");
        assert!((n.max - t.max).abs() < 1.5e-6, "{cmd} max {n:?} {t:?}");
        assert!((n.avg - t.avg).abs() < 1.5e-6, "{cmd} mean {n:?} {t:?}");
    }
    let ours_requests: BTreeMap<u32, u64> = ours.iter().map(|(k, v)| (*k, v.0)).collect();
    assert_eq!(ours_requests, requests);
    check_medians(pcap, Medians::Smb2);
    (ours, smb)
}

/// SMB3 through Samba's smbd in a lab, nsperf's own smb engine (signed, dialect 3.1.1;
/// writes with 4 in flight, some answered STATUS_PENDING first, and the metadata workload's
/// compound CREATE+READ+CLOSE and CREATE+WRITE chains), the
/// capture taken at the client: per-command requests equal tshark's, and per command the
/// responses timed, min, max and mean service response times equal `tshark -z smb2,srt`
/// within its printed resolution (1 µs).
#[test]
fn smb3_smbd_nsperf_engine_agrees_with_tshark() {
    let what = "SMB2/3 decoding against tshark -z smb2,srt";
    if !require_lab(what)
        || !require_program("smbd", what)
        || !require_program("tcpdump", what)
        || !require_program("tshark", what)
    {
        return;
    }
    let lab = lab_name("tsm");
    let _g = lab_up(&lab, &[]);
    let dir = Scratch::new(&disk_base(), "smb-trace");
    let Smbd { url, creds, .. } = serve_smb(&lab, &dir);
    let d = tempfile::tempdir().unwrap();
    let pcap = d.path().join("smb.pcap");
    // No seqread: tshark 4.0 does not dissect the 1 MiB WRITE requests that lay its file out
    // (it sees their responses), so its counts would not be the reference (docs/accuracy.md).
    let whole = capture_whole(&format!("nsp-{lab}-a"), &pcap, what, || {
        for w in [
            &["-w", "seqwrite", "-s", "8m", "-b", "64k", "--fsync", "end"][..],
            &["-w", "meta", "--files", "32", "--file-size", "4k"],
        ] {
            let mut a = w.to_vec();
            a.extend_from_slice(&["--iodepth", "4", "--credentials", &creds]);
            io_in_site(&lab, "a", &url, &a).ok();
        }
    });
    if !whole {
        return;
    }
    let (ours, smb) = check_smb2_against_tshark(&pcap);
    // WRITE (9): the 8 MiB of seqwrite in 64 KiB; READ (8): the metadata workload's.
    assert!(ours[&9].1.calls >= 128, "WRITE: {:?}", ours[&9]);
    assert!(ours[&8].1.calls >= 32, "READ: {:?}", ours[&8]);
    for s in &smb {
        assert_eq!(s["dialect"], "3.1.1", "{s}");
        assert_eq!(s["encrypted_messages"], 0, "{s}");
        assert!(s["signed"].as_u64().unwrap() > 0, "{s}");
    }
    assert!(
        smb.iter()
            .any(|s| s["compound_requests"].as_u64().unwrap() > 0),
        "the metadata workload's compound requests: {smb:?}"
    );
}

/// NFSv3 through nfs-ganesha in a lab, nsperf's own nfs engine (64 KiB, 4 in flight: a
/// write committed at the end, a read, the metadata workload), captured at the client:
/// per-procedure calls equal tshark's NFSv3 calls, and replies timed, min, max and mean
/// service response times equal `tshark -z rpc,srt,100003,3` within 1 µs.
#[test]
fn nfs3_ganesha_nsperf_engine_agrees_with_tshark() {
    let what = "NFSv3 via nfs-ganesha decoded against tshark -z rpc,srt";
    if !require_lab(what)
        || !require_program("tcpdump", what)
        || !require_program("tshark", what)
        || !require_program("ganesha.nfsd", what)
    {
        return;
    }
    let lab = lab_name("gthr");
    let _g = lab_up(&lab, &["--rtt", "2ms"]);
    let d = tempfile::tempdir().unwrap();
    let export = std::fs::canonicalize(d.path()).unwrap().join("export");
    std::fs::create_dir(&export).unwrap();
    let url = serve_nfs_in_site(&lab, "b", &export, Some("ganesha"));
    let pcap = d.path().join("ganesha3.pcap");
    if !capture_whole(&format!("nsp-{lab}-a"), &pcap, what, || {
        nfs_engine_workload(Some(&lab), &url)
    }) {
        return;
    }
    check_against_tshark(&pcap, 2049);
    let c = busiest_read_connection(&pcap);
    let p = &c["protocol"];
    assert_eq!(p["nfs_versions"], serde_json::json!([3]), "{p}");
    assert_eq!(p["missing_bytes"], 0, "{p}");
    let ops = nsperf_ops(&pcap, 3);
    for op in ["WRITE", "READ", "COMMIT", "CREATE", "REMOVE"] {
        assert!(ops.get(op).is_some_and(|o| o.1 > 0), "{op}: {ops:?}");
    }
    assert!(ops["READ"].1 >= 32 && ops["WRITE"].1 >= 32, "{ops:?}");
}

/// SMB3 through Samba's smbd in a lab from a third-party client: Samba's smbclient putting
/// a 10 MB file, getting it back, its allinfo, a directory made, filled, listed and
/// removed, a rename, a delete and a file that does not exist (an error; smbclient stops
/// at its first error, so it comes last), captured at the client: per-command requests and
/// response times equal tshark's as for nsperf's engine.
#[test]
fn smb3_smbd_smbclient_agrees_with_tshark() {
    let what = "SMB2/3 from smbclient decoded against tshark -z smb2,srt";
    if !require_lab(what)
        || !require_program("smbd", what)
        || !require_program("smbclient", what)
        || !require_program("tcpdump", what)
        || !require_program("tshark", what)
    {
        return;
    }
    let lab = lab_name("scl");
    let _g = lab_up(&lab, &["--rtt", "2ms"]);
    let dir = Scratch::new(&disk_base(), "smbclient-trace");
    let Smbd { share, creds, .. } = serve_smb(&lab, &dir);
    let d = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..10_000_000u32).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(d.path().join("src.bin"), &data).unwrap();
    let pcap = d.path().join("smbclient.pcap");
    let mut text = String::new();
    let whole = capture_whole(&format!("nsp-{lab}-a"), &pcap, what, || {
        let out = Command::new("ip")
            .args(["netns", "exec", &format!("nsp-{lab}-a"), "smbclient"])
            .arg(format!("//10.77.0.2/{share}"))
            .args(["-A", &creds, "-c"])
            .arg(
                "put src.bin f.bin; get f.bin back.bin; allinfo f.bin; mkdir d; \
                 put src.bin d/g.bin; ls d/*; rename f.bin h.bin; del h.bin; deltree d; \
                 get missing.bin x.bin",
            )
            .current_dir(d.path())
            .output()
            .unwrap();
        text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });
    assert!(
        text.contains("NT_STATUS_OBJECT_NAME_NOT_FOUND opening remote file \\missing.bin"),
        "smbclient did not reach its last command: {text}"
    );
    assert_eq!(std::fs::read(d.path().join("back.bin")).unwrap(), data);
    if !whole {
        return;
    }
    let (ours, smb) = check_smb2_against_tshark(&pcap);
    // WRITE (9) and READ (8): 10 MB each time, in up to 8 MiB (its multi-credit maximum);
    // SET_INFO (17) renames and deletes; QUERY_DIRECTORY (14) lists.
    assert!(ours[&9].0 >= 4, "WRITE: {:?}", ours[&9]);
    assert!(ours[&8].0 >= 2, "READ: {:?}", ours[&8]);
    for cmd in [5, 6, 14, 16, 17] {
        assert!(ours.get(&cmd).is_some_and(|o| o.0 > 0), "{cmd}: {ours:?}");
    }
    for s in &smb {
        assert_eq!(s["dialect"], "3.1.1", "{s}");
        assert_eq!(s["encrypted_messages"], 0, "{s}");
    }
    let j = run(&["trace", pcap.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let create = j["summary"]["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["protocol"]["ops"].as_array())
        .flatten()
        .find(|o| o["op"] == "CREATE")
        .expect("CREATE")
        .clone();
    assert!(
        create["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "STATUS_OBJECT_NAME_NOT_FOUND"),
        "{create}"
    );
    let w = j["summary"]["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["protocol"]["ops"].as_array())
        .flatten()
        .find(|o| o["op"] == "WRITE")
        .expect("WRITE")
        .clone();
    assert_eq!(w["data_bytes"], 20_000_000, "{w}");
}

/// The same verdicts for SMB2 (issue 22 item 2): nsperf's smb engine reading 64 KiB with
/// one request in flight from smbd across a lab at 100 ms RTT is protocol-bound, ceiling
/// within 10 % of the measured rate, TCP's application-limited verdict saying so; with 16 in
/// flight through a 45 Mbit/s link the verdict is the link. Captured at the client.
#[test]
fn lab_one_smb_read_in_flight_is_protocol_bound_and_sixteen_on_a_t3_are_the_link() {
    let what = "SMB2 protocol verdict lab test";
    if !require_lab(what) || !require_program("tcpdump", what) || !require_program("smbd", what) {
        return;
    }
    let lab = lab_name("spv");
    let _g = lab_up(&lab, &["--rtt", "100ms"]);
    let dir = Scratch::new(&disk_base(), "smb-verdict");
    let Smbd { url, creds, .. } = serve_smb(&lab, &dir);
    let d = tempfile::tempdir().unwrap();
    let ns = format!("nsp-{lab}-a");
    let bin = nsperf_bin();
    let read = |size: &str, depth: &str, pcap: &Path| {
        let cap = SiteCapture::start(&ns, pcap);
        run(&[
            "lab",
            "exec",
            &lab,
            "a",
            "--",
            bin,
            "io",
            "run",
            &url,
            "-w",
            "seqread",
            "-s",
            size,
            "-b",
            "64k",
            "--iodepth",
            depth,
            "-q",
            "--credentials",
            &creds,
        ])
        .ok();
        cap.stop();
        busiest_read_connection(pcap)
    };
    let c = read("2m", "1", &d.path().join("one.pcap"));
    assert_eq!(c["protocol"]["protocol"], "smb2", "{}", c["protocol"]);
    assert_one_in_flight_protocol_bound(&c);
    run(&["lab", "set", &lab, "--rate", "45mbit"]).ok();
    let sixteen = d.path().join("sixteen.pcap");
    assert_sixteen_on_a_t3_are_the_link(&read("16m", "16", &sixteen), &sixteen);
}

/// Encrypted SMB3 from a third-party client: smbclient with `--client-protection=encrypt`
/// putting and getting a 3 MB file through smbd in a lab, captured at the client. What can
/// be read (NEGOTIATE, SESSION_SETUP before the keys) equals tshark; every message behind an
/// SMB3 transform header is counted as tshark sees them (its `transform.msg_size` fields:
/// the same number, nsperf's bytes their sum plus each 52-byte transform header), and no
/// command behind them is claimed.
#[test]
fn smb3_encrypted_smbclient_counted_as_tshark_sees_it() {
    let what = "encrypted SMB3 from smbclient against tshark";
    if !require_lab(what)
        || !require_program("smbd", what)
        || !require_program("smbclient", what)
        || !require_program("tcpdump", what)
        || !require_program("tshark", what)
    {
        return;
    }
    let lab = lab_name("sen");
    let _g = lab_up(&lab, &["--rtt", "2ms"]);
    let dir = Scratch::new(&disk_base(), "smb-encrypted-trace");
    let Smbd { share, creds, .. } = serve_smb(&lab, &dir);
    let d = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 17 % 251) as u8).collect();
    std::fs::write(d.path().join("src.bin"), &data).unwrap();
    let pcap = d.path().join("encrypted.pcap");
    let whole = capture_whole(&format!("nsp-{lab}-a"), &pcap, what, || {
        let out = Command::new("ip")
            .args(["netns", "exec", &format!("nsp-{lab}-a"), "smbclient"])
            .arg(format!("//10.77.0.2/{share}"))
            .args(["-A", &creds, "--client-protection=encrypt", "-c"])
            .arg("put src.bin f.bin; get f.bin back.bin; del f.bin")
            .current_dir(d.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "smbclient: {out:?}");
    });
    assert_eq!(std::fs::read(d.path().join("back.bin")).unwrap(), data);
    if !whole {
        return;
    }
    let (ours, smb) = check_smb2_against_tshark(&pcap);
    assert!(
        ours.keys().all(|c| *c <= 1),
        "only NEGOTIATE and SESSION_SETUP are readable: {ours:?}"
    );
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args(["-o", "tcp.reassemble_out_of_order:TRUE"])
        .args(["-Y", "smb2.header.transform.msg_size", "-T", "fields"])
        .args(["-E", "occurrence=a", "-e", "smb2.header.transform.msg_size"])
        .output()
        .unwrap();
    let sizes: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split([',', '\n'])
        .filter(|x| !x.trim().is_empty())
        .map(|x| x.trim().parse().unwrap())
        .collect();
    let (n, bytes) = smb.iter().fold((0, 0), |(n, b), s| {
        (
            n + s["encrypted_messages"].as_u64().unwrap(),
            b + s["encrypted_bytes"].as_u64().unwrap(),
        )
    });
    eprintln!(
        "encrypted: tshark {} messages, {} B behind their transform headers; nsperf {n} messages, {bytes} B",
        sizes.len(),
        sizes.iter().sum::<u64>()
    );
    // 3 MB each way in 8 MiB at most: at least a WRITE and a READ, each with its response
    assert!(sizes.len() >= 4, "{sizes:?}");
    assert_eq!(n, sizes.len() as u64);
    assert_eq!(bytes, sizes.iter().sum::<u64>() + 52 * n);
    assert!(bytes > 6_000_000, "{bytes}");
    let r = run(&["trace", pcap.to_str().unwrap()]).ok();
    assert!(
        r.stdout.contains(&format!("SMB3 encrypted: {n} messages")),
        "{}",
        r.stdout
    );
    // and the protocol's verdict says why it cannot judge the pace
    let why = format!("{n} SMB3 messages were encrypted: their requests cannot be read");
    assert!(r.stdout.contains(&why), "{}", r.stdout);
}
