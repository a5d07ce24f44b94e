//! The report's capture analysis: for every run that took a packet capture, the file kept
//! for Wireshark (`nsperf run --keep-captures`) and what `nsperf trace` made of it — its
//! findings and, for the connections that carried the most data, the limit it diagnosed with
//! the figures behind it, then the storage protocol they carried (`protocol.rs`). The store keeps the analysis as
//! the JSON document `nsperf trace --json` prints; this reads it defensively (an older or
//! damaged document shows what it has and says what is missing).

use std::fmt::Write;

use serde_json::Value;

use crate::ExperimentData;
use crate::protocol::carried;
use crate::svg::esc;

/// Connections shown per run (the ones that carried the most data).
const TOP: usize = 3;

/// Appends the "Capture analysis" section (nothing when no run has a capture).
pub(crate) fn section(d: &ExperimentData, out: &mut String) {
    if d.traces.is_empty() && d.runs.iter().all(|r| r.capture_path.is_none()) {
        return;
    }
    out.push_str("<h2>Capture analysis</h2>\n");
    for r in &d.runs {
        let t = d.traces.get(&r.id);
        if t.is_none() && r.capture_path.is_none() {
            continue;
        }
        let params: Vec<String> = r
            .params
            .iter()
            .map(|(k, v)| format!("{k}={}", v.label()))
            .collect();
        let _ = writeln!(
            out,
            "<section class=\"trace\" data-run=\"{}\"><h3>run {}: {} [{}] {} #{}</h3>",
            r.id,
            r.id,
            esc(&r.step),
            esc(&params.join(", ")),
            r.phase,
            r.repetition
        );
        if let Some(p) = &r.capture_path {
            let _ = writeln!(
                out,
                "<p class=\"pcap\">capture kept: <code>{p}</code> (open it in Wireshark: <code>wireshark {p}</code>)</p>",
                p = esc(p)
            );
        }
        match t {
            Some(t) => run_analysis(t, r.id, out),
            None => out.push_str("<p class=\"skip\">the capture was not analysed</p>\n"),
        }
        out.push_str("</section>\n");
    }
}

fn run_analysis(t: &Value, run: i64, out: &mut String) {
    let summary = &t["summary"];
    let _ = writeln!(
        out,
        "<p>{} packets, {} TCP connections{}</p>",
        summary["packets"].as_u64().unwrap_or(0),
        summary["connection_count"]
            .as_u64()
            .or_else(|| summary["connections"].as_array().map(|c| c.len() as u64))
            .unwrap_or(0),
        match summary["duplicated_frames"].as_u64() {
            Some(n) if n > 0 => format!("; {n} frames captured twice (left out of the analysis)"),
            _ => String::new(),
        }
    );
    match t["findings"].as_array() {
        Some(f) if !f.is_empty() => {
            out.push_str("<ul class=\"findings\">\n");
            for x in f {
                let _ = writeln!(
                    out,
                    "<li><b>{}</b> {}</li>",
                    esc(x["severity"].as_str().unwrap_or("")),
                    esc(x["message"].as_str().unwrap_or(""))
                );
            }
            out.push_str("</ul>\n");
        }
        _ => out.push_str("<p>no findings</p>\n"),
    }
    connections(summary, out);
    crate::protocol::section(summary, run, out);
}

fn connections(summary: &Value, out: &mut String) {
    let Some(all) = summary["connections"].as_array() else {
        out.push_str("<p class=\"skip\">the stored analysis has no connection table</p>\n");
        return;
    };
    let mut top: Vec<&Value> = all.iter().collect();
    top.sort_by_key(|c| std::cmp::Reverse(carried(c)));
    top.truncate(TOP);
    if top.is_empty() {
        return;
    }
    out.push_str("<table><tr><th>conn</th><th class=\"t\">endpoints</th><th class=\"t\">limit</th><th class=\"t\">vantage</th><th>goodput</th><th>path RTT</th><th>retransmitted</th><th class=\"t\">diagnosis</th></tr>\n");
    for c in top {
        let dg = &c["diagnosis"];
        let dir = dg["direction"].as_str().unwrap_or("a_to_b");
        let (from, to) = match dir {
            "b_to_a" => (&c["b"], &c["a"]),
            _ => (&c["a"], &c["b"]),
        };
        let goodput = dg["goodput_bps"]
            .as_f64()
            .map(|b| nsperf_core::BitRate(b).to_string())
            .unwrap_or_default();
        let rtt = dg["path_rtt"]["min_ns"]
            .as_f64()
            .map(|ns| format!("{:.2} ms", ns / 1e6))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"t\">{} → {}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{goodput}</td><td>{rtt}</td><td>{}</td><td class=\"t\">{}</td></tr>",
            c["id"].as_u64().unwrap_or(0),
            esc(from.as_str().unwrap_or("?")),
            esc(to.as_str().unwrap_or("?")),
            esc(dg["limit"].as_str().unwrap_or("not diagnosed")),
            esc(dg["vantage"].as_str().unwrap_or("")),
            c[dir]["retransmitted_packets"].as_u64().unwrap_or(0),
            esc(dg["message"].as_str().unwrap_or(""))
        );
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analysis_shows_findings_and_the_busiest_connections_first() {
        let conn = |id: u64, bytes: u64, limit: &str| {
            serde_json::json!({
                "id": id, "a": "10.0.0.1:1", "b": "10.0.0.2:5301",
                "a_to_b": {"unique_bytes": bytes, "retransmitted_packets": 3},
                "b_to_a": {"unique_bytes": 0},
                "diagnosis": {"direction": "a_to_b", "limit": limit, "vantage": "sender",
                    "goodput_bps": 4.5e7, "path_rtt": {"min_ns": 50.2e6},
                    "message": format!("{limit} <because>")}
            })
        };
        let t = serde_json::json!({
            "summary": {"packets": 10, "connections": [
                conn(1, 10, "application"), conn(2, 5000, "receiver_window"),
                conn(3, 20, "loss"), conn(4, 30, "congestion")]},
            "findings": [{"id": "receiver_window_limited", "severity": "limit",
                "message": "connection 2: receiver-window-limited"}]
        });
        let mut out = String::new();
        run_analysis(&t, 1, &mut out);
        assert!(out.contains("<b>limit</b> connection 2: receiver-window-limited"));
        let first = out.find("receiver_window</td>").unwrap();
        let second = out.find("congestion</td>").unwrap();
        assert!(first < second, "{out}");
        assert!(
            !out.contains("application</td>"),
            "only the {TOP} busiest: {out}"
        );
        assert!(out.contains("50.20 ms") && out.contains("&lt;because&gt;"));
        // a document without connections says so instead of failing
        let mut out = String::new();
        run_analysis(&serde_json::json!({"summary": {}}), 1, &mut out);
        assert!(out.contains("no findings") && out.contains("no connection table"));
    }
}
