//! The report of a whole capture (a file's, or a live one's at its end) and its three forms:
//! the human tables, `--json` and `--csv`.

use std::io::Write;
use std::time::Instant;

use nsperf_core::report::Report;
use nsperf_core::table::Table;
use nsperf_core::units::{BitRate, Bytes};
use nsperf_trace::model::{AppProtocol, DirectionStats, ProtocolStats, SmbStats, TcpConnection};
use nsperf_trace::{ConnectionSpool, ConnectionStore, TraceInterval, TraceSpec, TraceSummary};

use crate::output::{Format, print_json};

/// The `--json` document of `nsperf trace`.
pub type TraceReport = Report<TraceSpec, TraceInterval, TraceSummary<ConnectionSpool>>;

/// Rows of the conversations table rendered at once (column widths per block).
const TABLE_BLOCK: usize = 1000;

/// Prints the analysis of a whole capture (a file's, or a live one's at its end).
pub(crate) fn report(
    format: Format,
    spec: TraceSpec,
    summary: TraceSummary<ConnectionSpool>,
    intervals: Vec<TraceInterval>,
    t0: Instant,
) -> anyhow::Result<()> {
    print_report(format, &build_report(spec, summary, intervals, t0)?)
}

/// The report of a whole capture, findings included.
pub(crate) fn build_report(
    spec: TraceSpec,
    summary: TraceSummary<ConnectionSpool>,
    intervals: Vec<TraceInterval>,
    t0: Instant,
) -> anyhow::Result<TraceReport> {
    let findings = nsperf_trace::findings::findings(&summary, spec.top)?;
    let mut report = TraceReport::new(nsperf_core::report::Command::Trace, spec, summary);
    report.duration_ns = t0.elapsed().as_nanos() as u64;
    report.intervals = intervals;
    report.findings = findings;
    Ok(report)
}

/// Prints a report in the format asked.
pub(crate) fn print_report(format: Format, report: &TraceReport) -> anyhow::Result<()> {
    match format {
        Format::Json | Format::JsonStream => print_json(report),
        Format::Csv => print_csv(report),
        Format::Human => print_human(report),
    }
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

fn print_human(r: &TraceReport) -> anyhow::Result<()> {
    let s = &r.summary;
    let mut o = String::new();
    use std::fmt::Write as _;
    let c = &s.capture;
    let source = match c.kernel_dropped {
        Some(d) => format!("live capture, {d} packets dropped by the kernel"),
        None => format!(
            "{}{} ({} compression)",
            c.format,
            if c.truncated { " cut short" } else { "" },
            c.compression
        ),
    };
    let _ = writeln!(
        o,
        "{}: {source}, {} packets over {:.3} s: {} TCP, {} UDP, {} other IP, {} not IP, {} unusable",
        r.spec.file,
        s.packets,
        secs(s.capture_duration_ns),
        s.tcp_packets,
        s.udp_packets,
        s.other_ip_packets,
        s.non_ip_packets,
        s.unusable_packets
    );
    if let Some(v) = &c.declared_vantage {
        let _ = writeln!(o, "vantage (as the capture declares it): {v}");
    }
    if let Some(w) = &c.stopped_early {
        let _ = writeln!(o, "warning: {w}");
    }
    if s.connections_aged_out > 0 {
        let _ = writeln!(
            o,
            "{} connections aged out: no packet for {} s (--idle-timeout), summarised and released",
            s.connections_aged_out, r.spec.idle_timeout_s
        );
    }
    if s.duplicated_frames > 0 {
        let _ = writeln!(
            o,
            "warning: {} TCP frames were captured twice (same IP ID and sequence, up to 200 ms apart); the copies are left out of the analysis",
            s.duplicated_frames
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "TCP conversations ({}):", s.connection_count);
    let mut out = std::io::stdout().lock();
    out.write_all(o.as_bytes())?;
    o.clear();
    let header = [
        "id",
        "a",
        "b",
        "pkts a>b",
        "bytes a>b",
        "pkts b>a",
        "bytes b>a",
        "rel start s",
        "duration s",
        "goodput",
        "rexmit",
        "limit",
    ];
    let mut t = Table::new(header);
    let mut write_err = None;
    s.connections.each(&mut |cn| {
        let (fwd, rev) = (&cn.a_to_b, &cn.b_to_a);
        t.row([
            cn.id.to_string(),
            cn.a.clone(),
            cn.b.clone(),
            fwd.packets.to_string(),
            fwd.wire_bytes.to_string(),
            rev.packets.to_string(),
            rev.wire_bytes.to_string(),
            format!("{:.6}", secs(cn.first_unix_ns - s.first_packet_unix_ns)),
            format!("{:.6}", cn.duration_s),
            BitRate(fwd.goodput_bps.max(rev.goodput_bps)).to_string(),
            (fwd.retransmitted_packets + rev.retransmitted_packets).to_string(),
            cn.diagnosis.limit.to_string(),
        ]);
        if t.len() >= TABLE_BLOCK {
            if let Err(e) = out.write_all(t.render().as_bytes()) {
                write_err.get_or_insert(e);
            }
            t = Table::new(header);
        }
    })?;
    if let Some(e) = write_err {
        return Err(e.into());
    }
    if !t.is_empty() {
        o.push_str(&t.render());
    }
    if !s.udp_flows.is_empty() {
        let _ = writeln!(o, "\nUDP flows ({}):", s.udp_flows.len());
        let mut t = Table::new([
            "id",
            "a",
            "b",
            "pkts a>b",
            "bytes a>b",
            "pkts b>a",
            "bytes b>a",
            "duration s",
            "rate",
        ]);
        for u in &s.udp_flows {
            t.row([
                u.id.to_string(),
                u.a.clone(),
                u.b.clone(),
                u.a_to_b_packets.to_string(),
                u.a_to_b_bytes.to_string(),
                u.b_to_a_packets.to_string(),
                u.b_to_a_bytes.to_string(),
                format!("{:.6}", u.duration_s),
                BitRate(u.rate_bps).to_string(),
            ]);
        }
        o.push_str(&t.render());
    }
    for cn in nsperf_trace::findings::largest(s, r.spec.top)? {
        o.push_str(&detail(&cn));
    }
    out.write_all(o.as_bytes())?;
    Ok(())
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

fn rtt_cell(r: &nsperf_trace::model::RttSummary, ns: u64) -> String {
    if r.samples == 0 { "-".into() } else { ms(ns) }
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// How one row of the detail table is computed from a direction's figures.
type RowFn = Box<dyn Fn(&DirectionStats) -> String>;

/// The per-direction rows of a connection's table: a name and how to print its value.
fn direction_rows(window_scale_known: bool) -> Vec<(String, RowFn)> {
    let scale_note = if window_scale_known {
        ""
    } else {
        " (raw, scale unknown)"
    };
    vec![
        ("packets".into(), Box::new(|d| d.packets.to_string())),
        ("wire bytes".into(), Box::new(|d| d.wire_bytes.to_string())),
        (
            "data packets".into(),
            Box::new(|d| d.data_packets.to_string()),
        ),
        ("data bytes".into(), Box::new(|d| d.data_bytes.to_string())),
        (
            "unique bytes".into(),
            Box::new(|d| d.unique_bytes.to_string()),
        ),
        (
            "retransmitted packets".into(),
            Box::new(|d| d.retransmitted_packets.to_string()),
        ),
        (
            "retransmitted bytes".into(),
            Box::new(|d| d.retransmitted_bytes.to_string()),
        ),
        (
            "  fast / timeout / spurious".into(),
            Box::new(|d| {
                format!(
                    "{} / {} / {}",
                    d.fast_retransmissions, d.timeout_retransmissions, d.spurious_retransmissions
                )
            }),
        ),
        (
            "out-of-order packets".into(),
            Box::new(|d| d.out_of_order_packets.to_string()),
        ),
        (
            "duplicate ACKs".into(),
            Box::new(|d| d.duplicate_acks.to_string()),
        ),
        (
            "SACK / D-SACK packets".into(),
            Box::new(|d| format!("{} / {}", d.sack_packets, d.dsack_packets)),
        ),
        (
            "zero windows / probes".into(),
            Box::new(|d| format!("{} / {}", d.zero_window_adverts, d.zero_window_probes)),
        ),
        (
            "frames captured twice".into(),
            Box::new(|d| d.duplicated_frames.to_string()),
        ),
        (
            "window-full events".into(),
            Box::new(|d| d.window_full_events.to_string()),
        ),
        (
            "SYN / FIN / RST".into(),
            Box::new(|d| format!("{} / {} / {}", d.syn, d.fin, d.rst)),
        ),
        ("MSS".into(), Box::new(|d| opt(d.mss))),
        (
            "window scale".into(),
            Box::new(|d| match d.window_scale {
                Some(s) => s.to_string(),
                None => "unknown".into(),
            }),
        ),
        (
            "SACK permitted / timestamps".into(),
            Box::new(|d| format!("{} / {}", yn(d.sack_permitted), yn(d.timestamps))),
        ),
        (
            format!("window min{scale_note}"),
            Box::new(|d| Bytes(d.window_min_bytes).to_string()),
        ),
        (
            format!("window max{scale_note}"),
            Box::new(|d| Bytes(d.window_max_bytes).to_string()),
        ),
        (
            "in flight max".into(),
            Box::new(|d| Bytes(d.in_flight_max_bytes).to_string()),
        ),
        (
            "RTT samples".into(),
            Box::new(|d| d.rtt.samples.to_string()),
        ),
        (
            "RTT min".into(),
            Box::new(|d| rtt_cell(&d.rtt, d.rtt.min_ns)),
        ),
        (
            "RTT median".into(),
            Box::new(|d| rtt_cell(&d.rtt, d.rtt.median_ns)),
        ),
        (
            "RTT p95".into(),
            Box::new(|d| rtt_cell(&d.rtt, d.rtt.p95_ns)),
        ),
        (
            "RTT max".into(),
            Box::new(|d| rtt_cell(&d.rtt, d.rtt.max_ns)),
        ),
        (
            "RTT from timestamps: samples".into(),
            Box::new(|d| d.rtt_timestamps.samples.to_string()),
        ),
        (
            "RTT from timestamps: median".into(),
            Box::new(|d| rtt_cell(&d.rtt_timestamps, d.rtt_timestamps.median_ns)),
        ),
        (
            "goodput".into(),
            Box::new(|d| BitRate(d.goodput_bps).to_string()),
        ),
        (
            "wire rate".into(),
            Box::new(|d| BitRate(d.wire_bps).to_string()),
        ),
    ]
}

/// The rows of `c` in two right-aligned value columns under their direction headers.
fn direction_table(c: &TcpConnection) -> String {
    let cells: Vec<(String, String, String)> = direction_rows(c.window_scale_known)
        .iter()
        .map(|(name, f)| (name.clone(), f(&c.a_to_b), f(&c.b_to_a)))
        .collect();
    let wn = cells.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let wa = cells
        .iter()
        .map(|r| r.1.chars().count())
        .max()
        .unwrap_or(0)
        .max(3);
    let wb = cells
        .iter()
        .map(|r| r.2.chars().count())
        .max()
        .unwrap_or(0)
        .max(3);
    let mut table = format!("{:wn$}  {:>wa$}  {:>wb$}\n", "", "a>b", "b>a");
    for (n, a, b) in &cells {
        table.push_str(&format!("{n:wn$}  {a:>wa$}  {b:>wb$}\n"));
    }
    table
}

/// One connection's text: its header, the direction table, the limits, the path RTT, the
/// ceilings and the diagnosis.
fn detail(c: &TcpConnection) -> String {
    let d = &c.diagnosis;
    let mut s = format!(
        "\nConnection {}: {} <-> {}, {:.3} s, handshake {}, {}\n",
        c.id,
        c.a,
        c.b,
        c.duration_s,
        if c.handshake_seen {
            "seen"
        } else {
            "not captured"
        },
        if c.reset {
            "reset"
        } else if c.closed {
            "closed"
        } else {
            "open at end of capture"
        }
    );
    s.push_str(&direction_table(c));
    s.push_str(&format!(
        "limited by ({}): receiver window {:.0} %, loss {:.0} %, congestion window {:.0} %, application {:.0} %, window unknown {:.0} %\n",
        d.direction,
        d.receiver_window_pct,
        d.loss_pct,
        d.congestion_pct,
        d.application_pct,
        d.window_unknown_pct
    ));
    let p = &d.path_rtt;
    if p.min_ns > 0 {
        s.push_str(&format!(
            "path RTT {} (median {}) = {} behind the capture point ({} samples, {:?}) + {} beyond it ({} samples); capture point: {}\n",
            ms(p.min_ns),
            ms(p.median_ns),
            ms(p.upstream_min_ns),
            p.upstream_samples,
            p.upstream_source,
            ms(p.downstream_min_ns),
            p.downstream_samples,
            match d.vantage {
                nsperf_trace::model::Vantage::Unknown => "unknown".to_string(),
                v => format!("near the {v}"),
            }
        ));
    }
    let window = match (d.window_ceiling_bps, d.window_ceiling_at_least_bps) {
        (Some(c), _) => BitRate(c).to_string(),
        (None, Some(c)) => format!(
            "at least {} (window scale at least {})",
            BitRate(c),
            d.window_scale_at_least.unwrap_or(0)
        ),
        _ => "-".into(),
    };
    s.push_str(&format!(
        "ceiling (a bound, not a measurement): window/RTT {window}; Reno loss model (Mathis): {}; measured goodput {}\n",
        opt(d.mathis_model_bps.map(BitRate)),
        BitRate(d.goodput_bps)
    ));
    s.push_str(&format!("diagnosis: {}\n", d.message));
    if let Some(p) = &c.protocol {
        s.push_str(&protocol_table(p));
    }
    s
}

/// The name of the protocol in the table's heading: `ONC RPC (NFSv3)`, `SMB2/3 (3.1.1)`.
fn protocol_heading(p: &ProtocolStats) -> String {
    match p.protocol {
        AppProtocol::OncRpc => {
            let versions: Vec<String> = p.nfs_versions.iter().map(|v| format!("NFSv{v}")).collect();
            if versions.is_empty() {
                "ONC RPC".into()
            } else {
                format!("ONC RPC ({})", versions.join(", "))
            }
        }
        AppProtocol::Smb2 => match p.smb.as_ref().and_then(|m| m.dialect.as_ref()) {
            Some(d) => format!("SMB2/3 (dialect {d})"),
            None => "SMB2/3".into(),
        },
    }
}

/// What could and could not be read of an SMB connection.
fn smb_line(m: &SmbStats) -> String {
    let mut s = format!(
        "SMB: {} headers read ({} signed: readable, the signature not checked); {} compound requests; {} interim responses (STATUS_PENDING); credits requested {}, granted {}\n",
        m.headers,
        m.signed,
        m.compound_requests,
        m.interim_responses,
        m.credits_requested,
        m.credits_granted
    );
    if m.encrypted_messages > 0 {
        s.push_str(&format!(
            "SMB3 encrypted: {} messages, {}: only their sizes and times can be read; their commands, statuses and response times are in no figure above\n",
            m.encrypted_messages,
            Bytes(m.encrypted_bytes)
        ));
    }
    if m.compressed_messages + m.smb1_messages + m.chain_commands_cut > 0 {
        s.push_str(&format!(
            "not read: {} compressed messages, {} SMB1 messages, {} compound chains cut\n",
            m.compressed_messages, m.smb1_messages, m.chain_commands_cut
        ));
    }
    s
}

/// The storage protocol of a connection: requests in flight, then one row per operation
/// (service response times as tshark's `-z rpc,srt` and `-z smb2,srt` time them).
fn protocol_table(p: &ProtocolStats) -> String {
    let mut s = format!(
        "\n{}, client {}: requests in flight max {}, mean {:.2} ({:.2} while any, {:.3} s of {:.3} s); {} unanswered, {} replies without their call{}\n",
        protocol_heading(p),
        p.client,
        p.in_flight_max,
        p.in_flight_mean,
        p.in_flight_busy_mean,
        p.busy_s,
        p.span_s,
        p.unanswered_calls,
        p.unmatched_replies,
        if p.missing_bytes > 0 {
            format!(
                "; {} not captured ({} resyncs)",
                Bytes(p.missing_bytes),
                p.resyncs
            )
        } else {
            String::new()
        }
    );
    let mut t = Table::new([
        "program", "op", "calls", "replies", "srt min", "median", "p99", "max", "mean", "data",
        "size", "errors",
    ]);
    for o in &p.ops {
        let r = &o.srt;
        let timed = |ns: u64| if r.samples > 0 { ms(ns) } else { "-".into() };
        let errors: Vec<String> = o
            .errors
            .iter()
            .map(|e| format!("{} {}", e.count, e.name))
            .chain((o.rpc_errors > 0).then(|| format!("{} rpc", o.rpc_errors)))
            .collect();
        t.row([
            match p.protocol {
                AppProtocol::OncRpc => format!("{} v{}", o.program, o.version),
                AppProtocol::Smb2 => o.program.clone(),
            },
            o.op.clone(),
            o.calls.to_string(),
            o.replies.to_string(),
            timed(r.min_ns),
            timed(r.median_ns),
            timed(r.p99_ns),
            timed(r.max_ns),
            timed(r.mean_ns),
            if o.data_bytes > 0 {
                Bytes(o.data_bytes).to_string()
            } else {
                "-".into()
            },
            match (o.size_min, o.size_max) {
                (Some(a), Some(b)) if a == b => Bytes(u64::from(a)).to_string(),
                (Some(a), Some(b)) => format!("{}..{}", Bytes(u64::from(a)), Bytes(u64::from(b))),
                _ => "-".into(),
            },
            if errors.is_empty() {
                "-".into()
            } else {
                errors.join(", ")
            },
        ]);
    }
    s.push_str(&t.render());
    if !p.compound_ops.is_empty() {
        let ops: Vec<String> = p
            .compound_ops
            .iter()
            .map(|o| format!("{} {}", o.op, o.calls))
            .collect();
        s.push_str(&format!(
            "NFSv4 operations in COMPOUND calls: {}{}\n",
            ops.join(", "),
            if p.compound_calls_cut > 0 {
                format!(" ({} calls not read to their end)", p.compound_calls_cut)
            } else {
                String::new()
            }
        ));
    }
    if let Some(m) = &p.smb {
        s.push_str(&smb_line(m));
    }
    if let Some(d) = &p.diagnosis {
        s.push_str(&format!("protocol's pace: {}\n", d.message));
    }
    s
}

fn yn(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn print_csv(r: &TraceReport) -> anyhow::Result<()> {
    let mut w = nsperf_core::csv::CsvWriter::new();
    w.record([
        "start_s",
        "length_s",
        "stream",
        "throughput_bps",
        "goodput_bps",
        "retransmissions",
    ]);
    for i in &r.intervals {
        w.record([
            format!("{:.6}", i.start_s),
            format!("{:.6}", i.length_s),
            i.stream
                .map(|s| s.to_string())
                .unwrap_or_else(|| "all".into()),
            format!("{:.0}", i.throughput_bps),
            format!("{:.0}", i.goodput_bps),
            i.retransmissions.to_string(),
        ]);
    }
    std::io::stdout()
        .lock()
        .write_all(w.into_string().as_bytes())?;
    Ok(())
}
