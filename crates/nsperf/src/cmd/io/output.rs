//! What `nsperf io run` prints: the intervals as CSV and the report for people (its header
//! lines, the interval table, totals, latency, target, CPU and findings).

use nsperf_core::table::Table;
use nsperf_core::units::Bytes;
use nsperf_io::{EngineKind, IoReport};

use super::{dur_ns, ops, rate};

/// The intervals as CSV.
pub fn csv(r: &IoReport) -> String {
    let mut w = nsperf_core::csv::CsvWriter::new();
    w.record([
        "start_s",
        "length_s",
        "job",
        "bytes",
        "ops",
        "throughput_bytes_per_s",
        "iops",
    ]);
    for i in &r.intervals {
        w.record([
            format!("{:.3}", i.start_s),
            format!("{:.3}", i.length_s),
            i.job.map(|j| j.to_string()).unwrap_or_else(|| "all".into()),
            i.bytes.to_string(),
            i.ops.to_string(),
            format!("{:.0}", i.throughput_bytes_per_s),
            format!("{:.1}", i.iops),
        ]);
    }
    w.into_string()
}

/// The report for people.
pub fn human(r: &IoReport) -> String {
    let c = &r.spec;
    let s = &r.summary;
    let mut o = String::new();
    let resident = s
        .cache_resident_pct
        .map(|p| format!(" ({p:.0} % resident)"))
        .unwrap_or_default();
    if c.workload == nsperf_io::Workload::Meta {
        o += &format!(
            "nsperf io run: meta on {}, {} files of {}, create/stat/read/delete in sequential then random order\n\n",
            c.target,
            c.meta_files,
            Bytes(c.meta_file_bytes)
        );
    } else {
        o += &header(r, &resident);
    }
    o += &interval_table(r);
    o += "\n";
    o += &format!(
        "total     {} in {:.3} s = {}, {} ops/s ({} ops){}\n",
        Bytes(s.bytes),
        s.elapsed_s,
        rate(s.throughput_bytes_per_s),
        ops(s.iops),
        s.ops,
        if s.fsync_ns > 0 || s.close_ns > 0 {
            format!(
                "; fsync {}, close {}",
                dur_ns(s.fsync_ns as f64),
                dur_ns(s.close_ns as f64)
            )
        } else {
            String::new()
        }
    );
    if let Some(ns) = s.remote.as_ref().and_then(|r| r.close_commit_ns) {
        o += &format!(
            "commit    at close {} (one COMMIT per file after the pass, not in the figures)\n",
            dur_ns(ns as f64)
        );
    }
    if let Some(m) = &s.replication {
        o += &replication_line(m);
        if let Some(n) = &m.native {
            o += &mirror_comparison(s, n);
        }
    }
    if !s.phases.is_empty() {
        let mut t = Table::new(["phase", "ops", "ops/s"]);
        for p in &s.phases {
            t.row([p.name.clone(), p.ops.to_string(), ops(p.ops_per_s)]);
        }
        o += "\n";
        o += &t.render();
        o += "\n";
    }
    o += &format!(
        "latency   min {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}\n",
        dur_ns(s.lat_min_ns as f64),
        dur_ns(s.lat_p50_ns as f64),
        dur_ns(s.lat_p90_ns as f64),
        dur_ns(s.lat_p99_ns as f64),
        dur_ns(s.lat_p999_ns as f64),
        dur_ns(s.lat_max_ns as f64)
    );
    // Mixed workloads: each direction on its own, as fio reports them.
    if let (Some(rd), Some(wr)) = (&s.read, &s.write) {
        for (name, d) in [("read", rd), ("write", wr)] {
            o += &format!(
                "{name:<9} {} = {}, {} ops/s; latency p50 {}  p99 {}  max {}\n",
                Bytes(d.bytes),
                rate(d.throughput_bytes_per_s),
                ops(d.iops),
                dur_ns(d.latency.p50_ns as f64),
                dur_ns(d.latency.p99_ns as f64),
                dur_ns(d.latency.max_ns as f64)
            );
        }
    }
    if let Some(fs) = &s.target_fs {
        o += &format!(
            "target    {} {} on {} ({})\n",
            fs.fs_type,
            fs.mount_source,
            fs.mount_point.display(),
            match (fs.network, &fs.link, &c.network_path.ceiling) {
                // A lab's devices report a speed the emulated link does not carry.
                (Some(true), l, Some(ceiling)) => format!(
                    "network file system{}, {ceiling}",
                    l.as_ref()
                        .map(|l| format!(", via {}", l.interface))
                        .unwrap_or_default()
                ),
                (Some(true), Some(l), None) => format!(
                    "network file system, via {}{}",
                    l.interface,
                    l.speed_mbps
                        .map(|m| format!(" at {m} Mbit/s"))
                        .unwrap_or_default()
                ),
                (Some(true), None, None) => "network file system".into(),
                (Some(false), ..) => "local".into(),
                (None, ..) => "cannot tell whether local or network".into(),
            }
        );
    }
    o += &format!(
        "cpu       {}; nsperf {:.0} % of one core\n",
        per_core(&r.cpu),
        s.cpu_process_pct
    );
    for f in &r.findings {
        o += &format!(
            "{:<9} {}\n",
            format!("{:?}", f.severity).to_lowercase(),
            f.message
        );
    }
    o
}

/// Time-weighted busy share of each core over the run: `cpu0 97 %, cpu1 12 %`.
pub fn per_core(cpu: &[nsperf_core::report::CpuInterval]) -> String {
    let mut acc: std::collections::BTreeMap<u32, (f64, f64)> = Default::default();
    for c in cpu {
        for core in &c.cpu.per_core {
            let e = acc.entry(core.core).or_default();
            e.0 += core.busy_pct * c.length_s;
            e.1 += c.length_s;
        }
    }
    if acc.is_empty() {
        return "per core: not sampled".into();
    }
    acc.iter()
        .map(|(k, (b, t))| format!("cpu{k} {:.0} %", if *t > 0.0 { b / t } else { 0.0 }))
        .collect::<Vec<_>>()
        .join(", ")
}

/// First line of the human report of a record workload.
fn header(r: &IoReport, resident: &str) -> String {
    let c = &r.spec;
    let s = &r.summary;
    let mut extra = String::new();
    if let Some(t) = c.time {
        extra += &format!(
            ", {} {:.3} s",
            if c.time_based { "time" } else { "runtime cap" },
            t.as_secs_f64()
        );
    }
    if let Some(r) = c.ramp {
        extra += &format!(", ramp {:.3} s", r.as_secs_f64());
    }
    if !c.rate.is_unlimited() {
        let lim = |b: Option<u64>, i: Option<u64>| match (b, i) {
            (Some(b), Some(i)) => format!("{}/s and {i} ops/s", Bytes(b)),
            (Some(b), None) => format!("{}/s", Bytes(b)),
            (None, Some(i)) => format!("{i} ops/s"),
            (None, None) => "unlimited".into(),
        };
        extra += &format!(
            ", rate per job: read {} write {}",
            lim(c.rate.read_bytes_per_s, c.rate.read_iops),
            lim(c.rate.write_bytes_per_s, c.rate.write_iops)
        );
    }
    if let Some(v) = c.verify {
        extra += &format!(", verify {v}");
    }
    format!(
        "nsperf io run: {} on {}, {} × {} job{}, bs {}, engine {}{}, cache {}{}, fsync {}{extra}\n{}\n",
        s.workload,
        c.target,
        Bytes(c.size_bytes),
        c.jobs,
        if c.jobs == 1 { "" } else { "s" },
        Bytes(c.bs_bytes),
        s.engine,
        if c.iodepth > 1
            && matches!(
                s.engine,
                nsperf_io::EngineUsed::Engine(
                    EngineKind::Uring | EngineKind::Nfs | EngineKind::Smb
                )
            )
        {
            format!(" depth {}", c.iodepth)
        } else {
            String::new()
        },
        s.cache,
        resident,
        c.fsync,
        s.remote.as_ref().map(remote_line).unwrap_or_default()
    )
}

/// The second header line of a run through a network file protocol.
fn remote_line(r: &nsperf_io::RemoteFacts) -> String {
    let smb = r.signed.is_some();
    format!(
        "{} at {}, {} {}: {} connection{}, {} of {}, {} in flight each, writes {} (server allows READ {}, WRITE {}){}\n",
        r.protocol,
        r.server,
        if smb { "share" } else { "export" },
        r.export,
        r.connections,
        if r.connections == 1 { "" } else { "s" },
        if smb { "requests" } else { "RPCs" },
        Bytes(r.rpc_bytes),
        r.rpcs_in_flight,
        match r.commit {
            nsperf_io::Commit::None => r.write_stable.to_string(),
            nsperf_io::Commit::End => format!("{}, committed at the end (timed)", r.write_stable),
            nsperf_io::Commit::Close => format!(
                "{}, committed at close (after the pass, untimed)",
                r.write_stable
            ),
        },
        Bytes(r.rtmax_bytes as u64),
        Bytes(r.wtmax_bytes as u64),
        match r.signed {
            Some(true) => ", signed",
            Some(false) => ", unsigned",
            None => "",
        }
    )
}

/// The mirror's line: protocol, peer, what it carried, the peer's times, the copies' check.
fn replication_line(m: &nsperf_io::mirror::ReplicationFacts) -> String {
    let mut o = format!(
        "mirror    protocol {} to {} ({}): {} writes, {}, at most {} in flight ({} writes waited for room)",
        m.protocol
            .map_or_else(|| "?".to_string(), |p| p.to_string()),
        m.peer,
        m.congestion,
        m.writes,
        Bytes(m.bytes),
        Bytes(m.max_in_flight_bytes),
        m.waited_for_room
    );
    if m.peer_write_mean_ns > 0.0 {
        o += &format!("; peer write {} mean", dur_ns(m.peer_write_mean_ns));
    }
    if m.flushes > 0 {
        o += &format!(
            "; {} flushes, peer fsync {} mean",
            m.flushes,
            dur_ns(m.peer_flush_mean_ns)
        );
    }
    o += match m.copies_equal {
        Some(true) => "; copies equal (CRC-32)\n",
        Some(false) => "; COPIES DIFFER (CRC-32)\n",
        None => "\n",
    };
    o
}

/// The native run beside the mirrored one (`--replicate-compare`), bonnie-style: one row per
/// figure, the ratio mirrored / native.
fn mirror_comparison(s: &nsperf_io::IoSummary, n: &nsperf_io::mirror::NativeFigures) -> String {
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}", a / b)
        } else {
            "-".into()
        }
    };
    let mut t = Table::new(["", "native", "mirrored", "mirrored/native"]);
    t.row([
        "throughput".to_string(),
        rate(n.throughput_bytes_per_s),
        rate(s.throughput_bytes_per_s),
        ratio(s.throughput_bytes_per_s, n.throughput_bytes_per_s),
    ]);
    t.row([
        "IOPS".to_string(),
        ops(n.iops),
        ops(s.iops),
        ratio(s.iops, n.iops),
    ]);
    for (name, a, b) in [
        ("latency mean", n.lat_mean_ns, s.lat_mean_ns),
        ("latency p50", n.lat_p50_ns as f64, s.lat_p50_ns as f64),
        ("latency p99", n.lat_p99_ns as f64, s.lat_p99_ns as f64),
        ("latency max", n.lat_max_ns as f64, s.lat_max_ns as f64),
    ] {
        t.row([name.to_string(), dur_ns(a), dur_ns(b), ratio(b, a)]);
    }
    format!("\n{}\n", t.render())
}

/// The interval table; with a mirror, its figures over the same intervals beside each row:
/// the acks' rate (the mirror on the link), their wait, and the peer's write time (C).
fn interval_table(r: &IoReport) -> String {
    let mirror = r
        .summary
        .replication
        .as_ref()
        .map_or(&[][..], |m| &m.intervals[..]);
    let mut head = vec!["interval", "throughput", "IOPS"];
    if !mirror.is_empty() {
        head.extend(["mirror acked", "ack wait", "peer write"]);
    }
    let mut t = Table::new(head);
    for (n, i) in r.intervals.iter().filter(|i| i.job.is_none()).enumerate() {
        let mut row = vec![
            format!("{:.2}-{:.2} s", i.start_s, i.start_s + i.length_s),
            rate(i.throughput_bytes_per_s),
            ops(i.iops),
        ];
        if !mirror.is_empty() {
            match mirror.get(n).filter(|m| m.acked_writes > 0) {
                Some(m) => row.extend([
                    rate(m.link_bytes_per_s),
                    dur_ns(m.ack_wait_mean_ns),
                    if m.peer_write_mean_ns > 0.0 {
                        dur_ns(m.peer_write_mean_ns)
                    } else {
                        "-".into()
                    },
                ]),
                None => row.extend(["-".into(), "-".into(), "-".into()]),
            }
        }
        t.row(row);
    }
    t.render()
}
