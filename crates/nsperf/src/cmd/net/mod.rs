//! `nsperf net HOST` and `nsperf net --loopback`: throughput, request/response latency and the
//! message-size sweep against an `nsperf server`, with both ends' figures.

mod args;
mod human;
mod rows;

use std::io::Write;

use nsperf_core::Failure;
use nsperf_core::units::BitRate;
use nsperf_net::{ClientConfig, LiveInterval, NetReport, NetSpec, Peer, ServerKind, StopReason};

use crate::exit::{classified, usage};
use crate::output::{Format, print_json, print_json_line};
pub use args::{JsonCompat, NetArgs};
use rows::{LiveRows, Rates};

/// What is shown while the test runs: the human rows as each interval ends, the
/// `--json-stream` lines, and for a sweep (which has no rows) the progress line on a
/// terminal.
struct Live {
    format: Format,
    /// The human first line, printed when the first interval ends (so a test that never
    /// starts prints only its error) or before the results.
    header: Option<String>,
    rows: Option<LiveRows>,
    progress: bool,
    drawn: bool,
    /// The figures of `--metrics-listen`.
    metrics: Option<crate::metrics::NetMetrics>,
}

impl Live {
    fn interval(&mut self, iv: &LiveInterval) {
        if let Some(m) = &self.metrics {
            m.interval(iv);
        }
        self.print_header();
        if self.format == Format::JsonStream {
            let bytes: u64 = iv.stream_bytes.iter().sum();
            let line = serde_json::json!({
                "event": "interval",
                "role": "client",
                "start_s": iv.start_s,
                "length_s": iv.length_s,
                "bytes": bytes,
                "throughput_bps": bps(bytes, iv.length_s),
                "messages": iv.stream_messages.iter().sum::<u64>(),
                "stream_bytes": iv.stream_bytes,
                "latency": iv.latency,
            });
            let _ = print_json_line(&line);
        }
        if let Some(rows) = &mut self.rows {
            rows.print(iv);
        } else if self.progress {
            self.progress_line(iv);
        }
    }

    fn progress_line(&mut self, iv: &LiveInterval) {
        let bytes: u64 = iv.stream_bytes.iter().sum();
        let end = iv.start_s + iv.length_s;
        let of = if iv.total_s > 0.0 {
            format!(" / {:.0} s", iv.total_s)
        } else {
            String::new()
        };
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\r\x1b[2K[{end:6.1} s{of}] {} this interval, {} streams",
            BitRate(bps(bytes, iv.length_s)),
            iv.stream_bytes.len(),
        );
        let _ = e.flush();
        self.drawn = true;
    }

    fn print_header(&mut self) {
        if let Some(h) = self.header.take() {
            let mut o = std::io::stdout().lock();
            let _ = writeln!(o, "{h}\n");
            let _ = o.flush();
        }
    }

    fn clear(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
            self.drawn = false;
        }
    }
}

fn bps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    }
}

/// Runs `nsperf net`.
pub fn run(a: NetArgs) -> anyhow::Result<()> {
    if let Some(f) = &a.logfile {
        crate::output::log_to_file(f)?;
    }
    let p = args::params(&a)?;
    let local = args::local_end(&a)?;
    let psk = match &a.psk_file {
        Some(f) => Some(nsperf_net::read_key_file(f)?),
        None => None,
    };
    let listener = a.metrics.bind()?;
    let format = a.output.format();
    let rates = Rates(a.format);
    let human = format == Format::Human && a.json_compat.is_none();
    let rate_defaulted = a.udp && a.bitrate.is_none();
    let target = match &a.host {
        Some(h) if !a.loopback => h.clone(),
        _ if local.version == Some(nsperf_net::IpVersion::V6)
            || local.bind.is_some_and(|b| b.is_ipv6()) =>
        {
            "::1".into()
        }
        _ => "127.0.0.1".into(),
    };
    let mut live = Live {
        format,
        header: human.then(|| {
            let port = (!a.loopback).then_some(a.port);
            human::describe(&target, port, &p, rate_defaulted)
        }),
        rows: if human {
            LiveRows::new(&p, rates, a.timestamps.clone())
        } else {
            None
        },
        progress: a.output.progress(),
        drawn: false,
        metrics: None,
    };
    let _endpoint = match listener {
        Some(l) => {
            let m = crate::metrics::NetMetrics::default();
            live.metrics = Some(m.clone());
            Some(l.serve(m)?)
        }
        None => None,
    };
    let client_facts = nsperf_core::host::HostFacts::collect();
    let result = if a.loopback {
        nsperf_net::run_loopback(p.clone(), local, |iv| live.interval(iv))
    } else {
        nsperf_net::run_client(
            &ClientConfig {
                host: target.clone(),
                port: a.port,
                params: p.clone(),
                psk,
                connect_timeout: a.connect_timeout,
                server_kind: if a.iperf3 {
                    ServerKind::Iperf3
                } else {
                    ServerKind::Detect
                },
                local,
            },
            |iv| live.interval(iv),
        )
    };
    live.clear();
    let run = result?;
    live.print_header();
    let spec = NetSpec {
        target,
        port: if a.loopback {
            run.server_addr.port()
        } else {
            a.port
        },
        loopback: a.loopback,
        peer: Peer::Nsperf,
        local,
        params: p,
    };
    let report = nsperf_net::build_report(&run, spec, client_facts);
    if a.json_compat == Some(JsonCompat::Iperf3) {
        let doc = nsperf_net::iperf3_document(&report)
            .ok_or_else(|| usage("--json-compat iperf3 needs a throughput test"))?;
        print_json(&doc)?;
        return finish(&run, &report);
    }
    match format {
        Format::Json => print_json(&report)?,
        Format::JsonStream => {
            print_json_line(&serde_json::json!({"event": "result", "report": report}))?
        }
        Format::Csv => human::print_csv(&report)?,
        Format::Human => human::print_human(&report, rates),
    }
    finish(&run, &report)
}

/// The exit status after the report is out: Ctrl-C, or a byte count not sent in full.
fn finish(run: &nsperf_net::ClientRun, report: &NetReport) -> anyhow::Result<()> {
    if nsperf_core::signal::interrupted() {
        return Err(classified(
            Failure::Interrupted,
            "interrupted: partial results printed",
        ));
    }
    // A byte count not sent in full fails the command, unless the user's own -t ended it.
    if run.stopped_by != StopReason::Time
        && let Some(f) = report.findings.iter().find(|f| f.id == "incomplete")
    {
        return Err(classified(Failure::Runtime, f.message.clone()));
    }
    Ok(())
}

/// A latency for the interval columns and the progress line (`850 ns`, `12.3 µs`, `4.56 ms`).
fn latency_text(ns: u64) -> String {
    nsperf_core::units::format_duration(std::time::Duration::from_nanos(ns))
}
