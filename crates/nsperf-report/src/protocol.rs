//! The storage protocol in a run's capture analysis: for each connection that carried NFS
//! (ONC RPC) or SMB2/3, the table of `nsperf trace` — per operation its calls, replies,
//! bytes, data and sizes, service response times (min, median, p99) and errors — the
//! verdict of what set the protocol's pace with the figures behind it, and a chart of the
//! requests in flight over time (`protocol.in_flight_series`). Every figure is the stored
//! document's, formatted, none recomputed; a document made before a field existed shows
//! what it has (no series: no chart, said so).

use std::fmt::Write;

use serde_json::Value;

use crate::charts::figure;
use crate::svg::{self, HLine, Line, Plot, esc};

/// Protocol connections shown per run (the ones that carried the most data).
const TOP: usize = 3;

/// Appends the protocol of every connection of `summary` that carried one (the busiest
/// [`TOP`]); nothing when none did.
pub(crate) fn section(summary: &Value, run: i64, out: &mut String) {
    let Some(all) = summary["connections"].as_array() else {
        return;
    };
    let mut conns: Vec<&Value> = all.iter().filter(|c| c["protocol"].is_object()).collect();
    conns.sort_by_key(|c| std::cmp::Reverse(carried(c)));
    let first_ns = summary["first_packet_unix_ns"].as_i64();
    for c in conns.into_iter().take(TOP) {
        connection(c, first_ns, run, out);
    }
}

/// Bytes a connection carried, both directions.
pub(crate) fn carried(c: &Value) -> u64 {
    ["a_to_b", "b_to_a"]
        .iter()
        .map(|d| c[d]["unique_bytes"].as_u64().unwrap_or(0))
        .sum()
}

fn connection(c: &Value, first_ns: Option<i64>, run: i64, out: &mut String) {
    let p = &c["protocol"];
    let id = c["id"].as_u64().unwrap_or(0);
    let (client, server) = match p["client"].as_str() {
        Some("b") => (&c["b"], &c["a"]),
        _ => (&c["a"], &c["b"]),
    };
    let _ = writeln!(
        out,
        "<div class=\"protocol\" data-conn=\"{id}\"><h4>connection {id}: {} → {}, {}</h4>",
        esc(client.as_str().unwrap_or("?")),
        esc(server.as_str().unwrap_or("?")),
        esc(&heading(p))
    );
    let _ = writeln!(out, "<p>{}</p>", esc(&in_flight_line(p)));
    ops_table(p, out);
    if let Some(m) = p["smb"].as_object() {
        let n = |k: &str| m.get(k).and_then(Value::as_u64).unwrap_or(0);
        let _ = writeln!(
            out,
            "<p class=\"smb\">SMB: {} headers read ({} signed: readable, the signature not checked); {} compound requests; {} interim responses; credits requested {}, granted {}{}</p>",
            n("headers"),
            n("signed"),
            n("compound_requests"),
            n("interim_responses"),
            n("credits_requested"),
            n("credits_granted"),
            if n("encrypted_messages") > 0 {
                format!(
                    "; {} encrypted messages ({}): only their sizes and times can be read",
                    n("encrypted_messages"),
                    nsperf_core::Bytes(n("encrypted_bytes"))
                )
            } else {
                String::new()
            }
        );
    }
    pace(&p["diagnosis"], out);
    if p["diagnosis"]["limit"].as_str() == Some("too_short") {
        out.push_str(
            "<p class=\"skip\">too few requests for a chart of the requests in flight</p>\n",
        );
    } else {
        chart(p, id, first_ns, run, out);
    }
    out.push_str("</div>\n");
}

/// `ONC RPC (NFSv3)`, `SMB2/3 (dialect 3.1.1)`.
fn heading(p: &Value) -> String {
    match p["protocol"].as_str() {
        Some("smb2") => match p["smb"]["dialect"].as_str() {
            Some(d) => format!("SMB2/3 (dialect {d})"),
            None => "SMB2/3".into(),
        },
        Some("onc_rpc") => {
            let v: Vec<String> = p["nfs_versions"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_u64))
                .into_iter()
                .flatten()
                .map(|v| format!("NFSv{v}"))
                .collect();
            if v.is_empty() {
                "ONC RPC".into()
            } else {
                format!("ONC RPC ({})", v.join(", "))
            }
        }
        other => other.unwrap_or("protocol").to_string(),
    }
}

fn in_flight_line(p: &Value) -> String {
    let f = |k: &str| p[k].as_f64().unwrap_or(0.0);
    let n = |k: &str| p[k].as_u64().unwrap_or(0);
    let mut s = format!(
        "requests in flight: max {}, mean {:.2} ({:.2} while any, {:.3} s of {:.3} s); {} unanswered, {} replies without their call",
        n("in_flight_max"),
        f("in_flight_mean"),
        f("in_flight_busy_mean"),
        f("busy_s"),
        f("span_s"),
        n("unanswered_calls"),
        n("unmatched_replies")
    );
    if n("missing_bytes") > 0 {
        let _ = write!(
            s,
            "; {} not captured ({} resyncs)",
            nsperf_core::Bytes(n("missing_bytes")),
            n("resyncs")
        );
    }
    s
}

/// A duration in ns as ms, as `nsperf trace` prints it.
fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn bytes(v: &Value) -> String {
    match v.as_u64() {
        Some(n) if n > 0 => nsperf_core::Bytes(n).to_string(),
        _ => "-".into(),
    }
}

fn ops_table(p: &Value, out: &mut String) {
    let Some(ops) = p["ops"].as_array() else {
        out.push_str("<p class=\"skip\">the stored analysis has no operation table</p>\n");
        return;
    };
    out.push_str("<table class=\"protocol-ops\"><tr><th class=\"t\">program</th><th class=\"t\">op</th><th>calls</th><th>replies</th><th>call bytes</th><th>reply bytes</th><th>data</th><th>size</th><th>SRT min</th><th>median</th><th>p99</th><th class=\"t\">errors</th></tr>\n");
    for o in ops {
        let srt = &o["srt"];
        let timed = |k: &str| match (srt["samples"].as_u64(), srt[k].as_u64()) {
            (Some(n), Some(ns)) if n > 0 => ms(ns),
            _ => "-".into(),
        };
        let size = match (o["size_min"].as_u64(), o["size_max"].as_u64()) {
            (Some(a), Some(b)) if a == b => nsperf_core::Bytes(a).to_string(),
            (Some(a), Some(b)) => format!("{}..{}", nsperf_core::Bytes(a), nsperf_core::Bytes(b)),
            _ => "-".into(),
        };
        let errors: Vec<String> = o["errors"]
            .as_array()
            .map(|e| e.iter())
            .into_iter()
            .flatten()
            .map(|e| {
                format!(
                    "{} {}",
                    e["count"].as_u64().unwrap_or(0),
                    e["name"].as_str().unwrap_or("?")
                )
            })
            .chain(
                o["rpc_errors"]
                    .as_u64()
                    .filter(|n| *n > 0)
                    .map(|n| format!("{n} rpc")),
            )
            .collect();
        let program = match p["protocol"].as_str() {
            Some("onc_rpc") => format!(
                "{} v{}",
                o["program"].as_str().unwrap_or("?"),
                o["version"].as_u64().unwrap_or(0)
            ),
            _ => o["program"].as_str().unwrap_or("?").to_string(),
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{size}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"t\">{}</td></tr>",
            esc(&program),
            esc(o["op"].as_str().unwrap_or("?")),
            o["calls"].as_u64().unwrap_or(0),
            o["replies"].as_u64().unwrap_or(0),
            bytes(&o["call_bytes"]),
            bytes(&o["reply_bytes"]),
            bytes(&o["data_bytes"]),
            timed("min_ns"),
            timed("median_ns"),
            timed("p99_ns"),
            if errors.is_empty() {
                "-".into()
            } else {
                esc(&errors.join(", "))
            }
        );
    }
    out.push_str("</table>\n");
}

/// The verdict of what set the protocol's pace: its sentence, then the figures it rests on.
fn pace(d: &Value, out: &mut String) {
    let Some(message) = d["message"].as_str() else {
        out.push_str("<p class=\"skip\">the stored analysis has no protocol verdict</p>\n");
        return;
    };
    let _ = writeln!(
        out,
        "<p class=\"pace\">protocol's pace: <b>{}</b> {}</p>",
        esc(d["limit"].as_str().unwrap_or("")),
        esc(message)
    );
    let f = |k: &str| d[k].as_f64();
    let mut items: Vec<String> = Vec::new();
    if let (Some(n), Some(op)) = (d["requests"].as_u64(), d["op"].as_str()) {
        items.push(format!("{n} requests judged (mostly {op})"));
    }
    if let Some(x) = f("in_flight") {
        let least = if d["in_flight_at_least"].as_bool() == Some(true) {
            "at least "
        } else {
            ""
        };
        items.push(format!(
            "{least}{x:.2} in flight on average (the client's side, Little's law)"
        ));
    }
    if let Some(b) = f("size_mean_bytes").filter(|b| *b > 0.0) {
        items.push(format!(
            "{} per request",
            nsperf_core::Bytes(b.round() as u64)
        ));
    }
    if let Some(ns) = d["path_rtt_ns"].as_u64().filter(|n| *n > 0) {
        items.push(format!("path RTT {}", ms(ns)));
    }
    if let Some(r) = f("measured_per_s") {
        // Data bit/s only where data was judged (scope `data`; 0 for scope `all`).
        let bps = f("measured_bps")
            .filter(|b| *b > 0.0)
            .map(|b| format!(", {}", nsperf_core::BitRate(b)))
            .unwrap_or_default();
        items.push(format!("measured {r:.1} requests/s{bps}"));
    }
    if let Some(r) = f("ceiling_per_s") {
        let bps = f("ceiling_bps")
            .map(|b| format!(", {}", nsperf_core::BitRate(b)))
            .unwrap_or_default();
        items.push(format!("ceiling {r:.1} requests/s{bps}"));
    }
    if let (Some(t), Some(r), Some(s), Some(c)) = (
        f("transfer_pct"),
        f("rtt_pct"),
        f("server_pct"),
        f("client_pct"),
    ) {
        items.push(format!(
            "time per request: transfer {t:.1} %, RTT {r:.1} %, server {s:.1} %, client {c:.1} %"
        ));
    }
    if !items.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"pace-figures\">{}</p>",
            esc(&items.join("; "))
        );
    }
}

/// The chart of the requests in flight over time, from the stored series.
fn chart(p: &Value, conn: u64, first_ns: Option<i64>, run: i64, out: &mut String) {
    let s = &p["in_flight_series"];
    let (Some(mean), Some(bin_s)) = (s["mean"].as_array(), s["bin_s"].as_f64()) else {
        out.push_str("<p class=\"skip\">no series of the requests in flight in the stored analysis (made before it existed)</p>\n");
        return;
    };
    // Time since the capture's first packet (since the first call when it is not known).
    let at = match (s["first_unix_ns"].as_i64(), first_ns) {
        (Some(a), Some(b)) => (a - b) as f64 / 1e9,
        _ => 0.0,
    };
    let x = |i: usize| at + (i as f64 + 0.5) * bin_s;
    let points = |v: &[Value]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .filter_map(|(i, y)| Some((x(i), y.as_f64()?)))
            .collect()
    };
    let max = s["max"].as_array().map(|m| points(m)).unwrap_or_default();
    // The most at once over the exchange bounds every bin: as a reference line it keeps the
    // axis over all of them (a robust range would cut a sparse series' every bin).
    let most = p["in_flight_max"]
        .as_f64()
        .or_else(|| max.iter().map(|q| q.1).max_by(f64::total_cmp));
    let mut lines = vec![Line {
        name: "mean in flight per bin".into(),
        points: points(mean),
        dense: true,
        ..Default::default()
    }];
    if !max.is_empty() {
        lines.push(Line {
            name: "most at once per bin".into(),
            points: max,
            color: 1,
            dense: true,
            ..Default::default()
        });
    }
    let plot = Plot {
        title: format!("run {run}, connection {conn}: requests in flight over time"),
        x_label: "time since the capture's first packet, s".into(),
        y_label: "requests in flight".into(),
        y_unit: "requests".into(),
        lines,
        hlines: p["in_flight_mean"]
            .as_f64()
            .map(|m| HLine {
                y: m,
                label: format!("overall mean {m:.2}"),
                color: "#2ca02c".into(),
            })
            .into_iter()
            .chain(most.map(|m| HLine {
                y: m,
                label: format!("overall most at once {m:.0}"),
                color: "#777".into(),
            }))
            .collect(),
        ..Default::default()
    };
    figure(
        out,
        "requests-in-flight",
        &svg::plot(&plot),
        &format!(
            "requests in flight at the capture point (call seen, reply not yet) in bins of {}: the time-weighted mean and the most at once in each",
            bin_width(bin_s)
        ),
    );
}

fn bin_width(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_trace::model::{
        AppProtocol, InFlightSeries, OpError, OpSummary, ProtocolDiagnosis, ProtocolLimit,
        ProtocolStats, SrtSummary,
    };

    /// An NFSv3 exchange as the trace library writes it: 64 WRITEs of 64 KiB with 4 in
    /// flight, a GETATTR with an error, its verdict and its series.
    fn stats() -> ProtocolStats {
        let op = |proc_: u32, name: &str, n: u64, data: u64, median_ns: u64| OpSummary {
            program: "nfs".into(),
            version: 3,
            procedure: proc_,
            op: name.into(),
            calls: n,
            replies: n,
            call_bytes: n * (data / n.max(1) + 136),
            reply_bytes: n * 132,
            data_bytes: data,
            size_min: (data > 0).then_some(65536),
            size_max: (data > 0).then_some(65536),
            srt: SrtSummary {
                samples: n,
                min_ns: median_ns / 2,
                median_ns,
                p99_ns: median_ns * 3,
                max_ns: median_ns * 4,
                mean_ns: median_ns,
            },
            errors: Vec::new(),
            rpc_errors: 0,
        };
        let mut getattr = op(1, "GETATTR", 3, 0, 41_000);
        getattr.errors.push(OpError {
            status: 2,
            name: "NFS3ERR_NOENT".into(),
            count: 1,
        });
        let mean: Vec<f64> = (0..120).map(|i| f64::from(i % 5)).collect();
        ProtocolStats {
            protocol: AppProtocol::OncRpc,
            nfs_versions: vec![3],
            client: "a".into(),
            ops: vec![getattr, op(7, "WRITE", 64, 64 * 65536, 1_234_567)],
            in_flight_max: 4,
            in_flight_mean: 2.0,
            in_flight_busy_mean: 2.5,
            busy_s: 0.0096,
            span_s: 0.012,
            in_flight_series: Some(InFlightSeries {
                first_unix_ns: 1_700_000_000_250_000_000,
                bin_s: 1e-4,
                max: mean.iter().map(|m| *m as u32).collect(),
                mean,
            }),
            diagnosis: Some(ProtocolDiagnosis {
                limit: ProtocolLimit::RequestsInFlight,
                op: "WRITE".into(),
                requests: 64,
                in_flight: 3.9,
                size_mean_bytes: 65536.0,
                path_rtt_ns: 10_400_000,
                measured_per_s: 350.0,
                measured_bps: 183.5e6,
                ceiling_per_s: Some(375.0),
                ceiling_bps: Some(196.6e6),
                transfer_pct: 10.0,
                rtt_pct: 80.0,
                server_pct: 8.0,
                client_pct: 2.0,
                message: "4 WRITEs of 64 KiB in flight, path RTT 10.4 ms -> 196.6 Mbit/s ceiling; measured 183.5 Mbit/s: protocol-bound <not TCP>".into(),
                ..ProtocolDiagnosis::default()
            }),
            ..ProtocolStats::default()
        }
    }

    fn document(p: &ProtocolStats) -> Value {
        serde_json::json!({"summary": {
        "packets": 400,
        "first_packet_unix_ns": 1_700_000_000_000_000_000i64,
        "connections": [
            {"id": 1, "a": "10.77.0.1:700", "b": "10.77.0.2:2049",
             "a_to_b": {"unique_bytes": 4_200_000}, "b_to_a": {"unique_bytes": 9000},
             "protocol": serde_json::to_value(p).unwrap()},
            {"id": 2, "a": "10.77.0.1:22", "b": "10.77.0.2:5201",
             "a_to_b": {"unique_bytes": 9_000_000}, "b_to_a": {"unique_bytes": 0}}
        ]}})
    }

    /// Issue 22 item 6: the protocol table and the requests-in-flight chart of a stored
    /// trace document, every figure the document's.
    #[test]
    fn protocol_table_verdict_and_chart_are_the_documents_figures() {
        let doc = document(&stats());
        let mut out = String::new();
        section(&doc["summary"], 7, &mut out);
        let p = &doc["summary"]["connections"][0]["protocol"];
        assert_eq!(out.matches("<div class=\"protocol\"").count(), 1, "{out}");
        assert!(out.contains("connection 1: 10.77.0.1:700 → 10.77.0.2:2049, ONC RPC (NFSv3)"));
        for o in p["ops"].as_array().unwrap() {
            let name = o["op"].as_str().unwrap();
            let row = out
                .lines()
                .find(|l| l.contains(&format!("<td class=\"t\">{name}</td>")))
                .unwrap_or_else(|| panic!("no row for {name}: {out}"));
            let srt = &o["srt"];
            let cells = format!(
                "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                o["calls"],
                o["replies"],
                nsperf_core::Bytes(o["call_bytes"].as_u64().unwrap()),
                nsperf_core::Bytes(o["reply_bytes"].as_u64().unwrap()),
                bytes(&o["data_bytes"]),
            );
            assert!(row.contains(&cells), "{cells} in {row}");
            let times = format!(
                "<td>{}</td><td>{}</td><td>{}</td>",
                ms(srt["min_ns"].as_u64().unwrap()),
                ms(srt["median_ns"].as_u64().unwrap()),
                ms(srt["p99_ns"].as_u64().unwrap())
            );
            assert!(row.contains(&times), "{times} in {row}");
        }
        let write = out.lines().find(|l| l.contains(">WRITE<")).unwrap();
        assert!(write.contains("<td>64</td><td>64</td>") && write.contains("<td>64 KiB</td>"));
        assert!(write.contains("<td>1.235 ms</td>"), "{write}");
        assert!(out.contains("1 NFS3ERR_NOENT"));
        // The verdict, its sentence escaped, and the figures it rests on.
        assert!(out.contains(&format!(
            "protocol's pace: <b>requests_in_flight</b> {}",
            esc(p["diagnosis"]["message"].as_str().unwrap())
        )));
        assert!(out.contains("path RTT 10.400 ms") && out.contains("ceiling 375.0 requests/s"));
        let d = &p["diagnosis"];
        assert!(out.contains(&format!(
            "measured {:.1} requests/s, {}",
            d["measured_per_s"].as_f64().unwrap(),
            nsperf_core::BitRate(d["measured_bps"].as_f64().unwrap())
        )));
        assert!(out.contains("requests in flight: max 4, mean 2.00 (2.50 while any"));
        // The chart: one point per stored bin, placed from the capture's first packet.
        assert_eq!(out.matches("data-chart=\"requests-in-flight\"").count(), 1);
        let polyline = out.split("<polyline points=\"").nth(1).unwrap();
        let n = polyline.split('"').next().unwrap().split(' ').count();
        assert_eq!(n, p["in_flight_series"]["mean"].as_array().unwrap().len());
        assert!(out.contains("overall mean 2.00") && out.contains("bins of 100 µs"));
        assert!(out.contains("time since the capture's first packet, s"));
        assert!(
            !out.contains("<circle cx"),
            "a dense series draws no dot per bin"
        );

        assert!(out.contains("overall most at once 4"));
        assert!(!out.contains("off the axis"), "no bin is cut by the axis");
        // A sparse series (one request in flight now and then) keeps every bin on the axis.
        let mut sparse = stats();
        let series = sparse.in_flight_series.as_mut().unwrap();
        series.mean = (0..200)
            .map(|i| if i % 50 == 0 { 0.9 } else { 0.0 })
            .collect();
        series.max = series.mean.iter().map(|m| m.ceil() as u32).collect();
        sparse.in_flight_max = 1;
        sparse.in_flight_mean = 0.02;
        let mut out = String::new();
        section(&document(&sparse)["summary"], 7, &mut out);
        assert!(!out.contains("off the axis"), "{out}");
        // Too few requests to judge: the table and verdict, no chart.
        sparse.diagnosis.as_mut().unwrap().limit = ProtocolLimit::TooShort;
        let mut out = String::new();
        section(&document(&sparse)["summary"], 7, &mut out);
        assert!(out.contains("too few requests for a chart") && !out.contains("<svg"));
        // An older document (no series, no verdict) shows what it has and says what is not.
        let mut old = stats();
        old.in_flight_series = None;
        old.diagnosis = None;
        let mut out = String::new();
        section(&document(&old)["summary"], 7, &mut out);
        assert!(out.contains("<table class=\"protocol-ops\">"));
        assert!(out.contains("no series of the requests in flight"));
        assert!(out.contains("no protocol verdict"));
        // A capture of no storage protocol adds nothing.
        let mut out = String::new();
        section(
            &serde_json::json!({"connections": [{"id": 1}]}),
            7,
            &mut out,
        );
        assert!(out.is_empty(), "{out}");
    }
}
