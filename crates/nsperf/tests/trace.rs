//! `nsperf trace` against real captures and their reference outputs (tcptrace `-l` beside
//! each capture, and tshark when installed).

mod common;
use common::*;

use std::collections::HashMap;
use std::path::PathBuf;

fn captures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures")
}

/// One tcptrace connection: endpoints and the two-column figures (a->b, b->a).
#[derive(Debug, Default)]
struct RefConn {
    a: String,
    b: String,
    fields: HashMap<String, (String, String)>,
}

fn parse_tcptrace(text: &str) -> Vec<RefConn> {
    let mut out: Vec<RefConn> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("TCP connection ") && l.ends_with(':') && !l.contains("info") {
            out.push(RefConn::default());
            continue;
        }
        let Some(c) = out.last_mut() else { continue };
        // tcptrace names the hosts a, b, then c, d, … per connection.
        if l.starts_with("host ") && l.as_bytes().get(6) == Some(&b':') {
            let v = l[7..].trim().to_string();
            if c.a.is_empty() {
                c.a = v;
            } else {
                c.b = v;
            }
        } else if let Some((key, rest)) = l.split_once(':') {
            let pat = format!("{key}:");
            if let Some((v1, v2)) = rest.split_once(&pat) {
                let first = |s: &str| s.split_whitespace().next().unwrap_or("").to_string();
                c.fields
                    .insert(key.trim().to_string(), (first(v1), first(v2)));
            }
        }
    }
    out
}

fn json_of(file: &str) -> serde_json::Value {
    let path = captures().join(file);
    run(&["trace", path.to_str().unwrap(), "--json"])
        .ok()
        .json()
}

fn num(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "0".into(),
        x => x.to_string(),
    }
}

/// Every figure the issue names, for every connection of every capture with a reference.
#[test]
fn agrees_with_tcptrace_reference_outputs() {
    let mut checked = 0;
    let mut files: Vec<_> = std::fs::read_dir(captures())
        .expect("../shared/captures beside the repository")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tcptrace-long.txt"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    let mut failures = Vec::new();
    for rf in files {
        let cap = rf.trim_end_matches(".tcptrace-long.txt");
        let reference = parse_tcptrace(&std::fs::read_to_string(captures().join(&rf)).unwrap());
        let j = json_of(cap);
        let conns = j["summary"]["connections"].as_array().unwrap();
        assert_eq!(conns.len(), reference.len(), "{cap}: connection count");
        for (r, c) in reference.iter().zip(conns) {
            assert_eq!(c["a"].as_str().unwrap(), r.a, "{cap}");
            assert_eq!(c["b"].as_str().unwrap(), r.b, "{cap}");
            let pairs = [
                ("total packets", "packets"),
                ("unique bytes sent", "unique_bytes"),
                ("actual data pkts", "data_packets"),
                ("actual data bytes", "data_bytes"),
                ("rexmt data pkts", "retransmitted_packets"),
                ("rexmt data bytes", "retransmitted_bytes"),
                ("mss requested", "mss"),
                ("adv wind scale", "window_scale_option"),
            ];
            for (tt, ours) in pairs {
                let Some((ra, rb)) = r.fields.get(tt) else {
                    continue;
                };
                let (oa, ob) = (num(&c["a_to_b"][ours]), num(&c["b_to_a"][ours]));
                for (side, want, got) in [("a->b", ra, &oa), ("b->a", rb, &ob)] {
                    checked += 1;
                    if want != got {
                        failures.push(format!(
                            "{cap} conn {} {side} {tt}: tcptrace {want}, nsperf {got}",
                            c["id"]
                        ));
                    }
                }
            }
            if let Some((ra, rb)) = r.fields.get("SYN/FIN pkts sent") {
                let ours = |d: &serde_json::Value| format!("{}/{}", d["syn"], d["fin"]);
                for (want, got) in [(ra, ours(&c["a_to_b"])), (rb, ours(&c["b_to_a"]))] {
                    checked += 1;
                    if *want != got {
                        failures.push(format!(
                            "{cap} conn {} SYN/FIN: tcptrace {want}, nsperf {got}",
                            c["id"]
                        ));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} figures differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked > 200, "{checked}");
}

#[test]
fn truncated_capture_gives_partial_result() {
    let j = json_of("trunc.dmp.gz");
    let cap = &j["summary"]["capture"];
    assert_eq!(cap["records"], 1, "{cap}");
}
