//! What `nsperf lab stats`, `lab capture` and `lab events` print: tables per link and per
//! queue, the capture's counts beside the emulator's, the event list. Arguments and the
//! rest of `lab` are in `lab.rs`; the figures come from the `nsperf-lab` crate.

use std::path::Path;
use std::time::{Duration, Instant};

use nsperf_core::Report;
use nsperf_core::table::Table;
use nsperf_core::units::Bytes;
use nsperf_lab::capture::CaptureSummary;
use nsperf_lab::events::LinkEvent;
use nsperf_lab::lab;
use nsperf_lab::state::{LabState, SiteState};
use nsperf_lab::stats::{DirectionStats, LabStats, QueueSample};
use nsperf_lab::topology::{Link, Topology};
use serde::Serialize;

use crate::output::print_json;

#[derive(Serialize)]
struct StatsSpec {
    lab: String,
    sites: Vec<SiteState>,
    mtu: u32,
    topology: Topology,
}

#[derive(Serialize)]
struct StatsSummary {
    uptime_s: f64,
    links: Vec<Link>,
    directions: Vec<DirectionStats>,
    events: Vec<LinkEvent>,
    unroutable_packets: u64,
    write_errors: u64,
    overrun_packets: u64,
    held_bytes: u64,
    memory_limit_bytes: u64,
}

fn spec(state: LabState) -> StatsSpec {
    StatsSpec {
        lab: state.name,
        sites: state.sites,
        mtu: state.mtu,
        topology: state.topology,
    }
}

/// `lab stats NAME`.
pub fn stats(name: &str, json: bool) -> anyhow::Result<()> {
    let state = LabState::load(name)?;
    let s: LabStats = lab::stats(name)?;
    if json {
        let mut r: Report<StatsSpec, QueueSample, StatsSummary> = Report::new(
            nsperf_core::report::Command::Lab,
            spec(state),
            StatsSummary {
                uptime_s: s.uptime_s,
                links: s.links,
                directions: s.directions,
                events: s.events,
                unroutable_packets: s.unroutable_packets,
                write_errors: s.write_errors,
                overrun_packets: s.overrun_packets,
                held_bytes: s.held_bytes,
                memory_limit_bytes: s.memory_limit_bytes,
            },
        );
        r.duration_ns = (r.summary.uptime_s * 1e9) as u64;
        r.intervals = s.queue_series;
        return print_json(&r);
    }
    println!(
        "lab {name} ({}, MTU {}), up {:.1} s",
        s.topology.kind(),
        state.mtu,
        s.uptime_s
    );
    let mut t = Table::new([
        "link",
        "direction (queue)",
        "forwarded",
        "bytes",
        "drop queue",
        "drop loss",
        "drop down",
        "dup",
        "corrupt",
        "reorder",
        "queue now",
        "queue max",
    ]);
    for d in &s.directions {
        let c = &d.counters;
        t.row([
            d.link.clone(),
            format!("{} -> {}", d.from, d.to),
            c.forwarded_packets.to_string(),
            Bytes(c.forwarded_bytes).to_string(),
            c.dropped_queue_packets.to_string(),
            c.dropped_loss_packets.to_string(),
            c.dropped_link_down_packets.to_string(),
            c.duplicated_packets.to_string(),
            c.corrupted_packets.to_string(),
            c.reordered_packets.to_string(),
            format!("{} pkts", d.queue_packets),
            format!("{} pkts", c.queue_max_packets),
        ]);
    }
    print!("{}", t.render());
    for d in &s.directions {
        println!("{} -> {}: {}", d.from, d.to, d.params.describe());
    }
    println!(
        "delay lines hold {} of {}{}",
        Bytes(s.held_bytes),
        Bytes(s.memory_limit_bytes),
        if s.overrun_packets > 0 {
            format!(
                "; {} packets dropped over the budget (raise lab up --memory)",
                s.overrun_packets
            )
        } else {
            String::new()
        }
    );
    print_events(&s.events);
    Ok(())
}

fn print_events(events: &[LinkEvent]) {
    if events.is_empty() {
        return;
    }
    println!("events:");
    for e in events {
        println!("  {:>9.3} s  {:<8} {}", e.t_s, e.source.to_string(), e.text);
    }
}

/// `lab events NAME`.
pub fn events(name: &str, json: bool) -> anyhow::Result<()> {
    let ev = lab::events(name)?;
    if json {
        #[derive(Serialize)]
        struct Events {
            events: Vec<LinkEvent>,
            outages: Vec<nsperf_lab::events::Outage>,
        }
        let state = LabState::load(name)?;
        let outages = nsperf_lab::events::outages(&ev);
        let r: Report<StatsSpec, (), Events> = Report::new(
            nsperf_core::report::Command::Lab,
            spec(state),
            Events {
                events: ev,
                outages,
            },
        );
        return print_json(&r);
    }
    print_events(&ev);
    Ok(())
}

/// `lab capture NAME LINK -w FILE [-t TIME]`.
/// `lab capture --analyse`: how the live analysis prints.
#[derive(Debug, Clone, Copy)]
pub struct Analyse {
    /// Print every this long (zero: only at the end).
    pub interval: Duration,
    /// Connections shown per interval and in detail.
    pub top: usize,
}

pub fn capture(
    name: &str,
    link: &str,
    file: &Path,
    time_ns: Option<u64>,
    json: bool,
    analyse: Option<Analyse>,
) -> anyhow::Result<()> {
    let cap = lab::capture(name, link, file)?;
    eprintln!(
        "capturing link {link} of lab {name} into {}{}{}",
        file.display(),
        if analyse.is_some() {
            ", analysed live"
        } else {
            ""
        },
        match time_ns {
            Some(t) => format!(" for {:.1} s", t as f64 / 1e9),
            None => " (Ctrl-C stops)".into(),
        }
    );
    let limit = time_ns.map(Duration::from_nanos);
    if let Some(a) = analyse {
        return capture_analysed(file, cap, limit, json, a);
    }
    let t0 = Instant::now();
    while !nsperf_core::signal::interrupted() && limit.is_none_or(|l| t0.elapsed() < l) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = cap.stop()?;
    if json {
        return print_json(&capture_report(name, link, s));
    }
    print_capture(&s);
    Ok(())
}

#[derive(Serialize)]
struct CaptureSpec<'a> {
    lab: &'a str,
    link: &'a str,
}

fn capture_report<'a>(
    name: &'a str,
    link: &'a str,
    s: CaptureSummary,
) -> Report<CaptureSpec<'a>, (), CaptureSummary> {
    let mut r: Report<CaptureSpec, (), CaptureSummary> = Report::new(
        nsperf_core::report::Command::Lab,
        CaptureSpec { lab: name, link },
        s,
    );
    r.duration_ns = (r.summary.duration_s * 1e9) as u64;
    r
}

/// `lab capture --analyse`: the file the emulator writes is followed by the live analysis;
/// at the stop the capture ends first, then the analysis reads the file to its end, so its
/// result is `nsperf trace FILE`'s. JSON: the trace report with the emulator's summary in
/// `link_capture` (as a plan's kept capture).
fn capture_analysed(
    file: &Path,
    cap: lab::LinkCapture,
    limit: Option<Duration>,
    json: bool,
    a: Analyse,
) -> anyhow::Result<()> {
    use super::trace::live::{LiveOptions, Source, analyse};
    let format = if json {
        crate::output::Format::Json
    } else {
        crate::output::Format::Human
    };
    let opts = LiveOptions {
        interval: a.interval,
        time: limit,
        rows: a.top,
        format,
    };
    let cfg = nsperf_trace::TraceConfig {
        series_connections: a.top,
        idle_ns: nsperf_trace::DEFAULT_IDLE_NS,
        ..nsperf_trace::TraceConfig::default()
    };
    let spec = nsperf_trace::TraceSpec {
        file: file.display().to_string(),
        top: a.top,
        idle_timeout_s: nsperf_trace::DEFAULT_IDLE_NS as f64 / 1e9,
        ..nsperf_trace::TraceSpec::default()
    };
    let t0 = Instant::now();
    let mut cap = Some(cap);
    let mut stopped = None;
    let mut stop = || -> anyhow::Result<()> {
        if let Some(c) = cap.take() {
            stopped = Some(c.stop()?);
        }
        Ok(())
    };
    let (summary, intervals) = analyse(Source::Follow(file), cfg, &opts, Some(&mut stop))?;
    let s = stopped.ok_or_else(|| anyhow::anyhow!("the capture did not stop"))?;
    let report = super::trace::build_report(spec, summary, intervals, t0)?;
    if json {
        let mut doc = serde_json::to_value(&report)?;
        doc["link_capture"] = serde_json::to_value(&s)?;
        return print_json(&doc);
    }
    print_capture(&s);
    println!();
    super::trace::print_report(format, &report)
}

fn print_capture(s: &CaptureSummary) {
    println!(
        "link {}: {:.1} s captured into {} ({})",
        s.link,
        s.duration_s,
        s.file.display(),
        Bytes(s.file_bytes)
    );
    let mut t = Table::new([
        "direction",
        "records",
        "left the link",
        "dropped: queue",
        "loss",
        "link down",
        "emulator: entered",
        "left",
        "dropped",
    ]);
    for d in &s.directions {
        let (r, c) = (&d.recorded, &d.counters);
        t.row([
            d.direction.clone(),
            r.records.to_string(),
            r.delivered.to_string(),
            r.dropped_queue.to_string(),
            r.dropped_loss.to_string(),
            r.dropped_link_down.to_string(),
            c.offered_packets.to_string(),
            c.forwarded_packets.to_string(),
            (c.dropped_queue_packets + c.dropped_loss_packets + c.dropped_link_down_packets)
                .to_string(),
        ]);
    }
    print!("{}", t.render());
    println!(
        "dropped by the emulator on this link: {}",
        s.dropped_packets()
    );
    let supers: u64 = s.directions.iter().map(|d| d.recorded.super_packets).sum();
    if supers > 0 {
        println!(
            "note: {supers} records are offloaded super-packets read before the capture \
             turned segmentation offloads off (each stands for several wire packets)"
        );
    }
    if s.lost_records > 0 {
        println!(
            "warning: {} records lost (the file could not be written fast enough)",
            s.lost_records
        );
    }
}
