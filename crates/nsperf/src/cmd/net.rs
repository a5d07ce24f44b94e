//! `nsperf net HOST` and `nsperf net --loopback`: throughput, request/response latency and the
//! message-size sweep against an `nsperf server`, with both ends' figures.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use nsperf_core::Failure;
use nsperf_core::table::Table;
use nsperf_core::units::{BitRate, Bytes};
use nsperf_net::client::LiveInterval;
use nsperf_net::config::{ClientConfig, DEFAULT_PORT, Direction, Mode, Protocol, TestParams};
use nsperf_net::report::{NetInterval, NetReport, NetSpec};

use crate::exit::{classified, usage};
use crate::output::{Format, OutputArgs, print_json, print_json_line};

/// Arguments of `nsperf net`.
#[derive(Debug, Args)]
pub struct NetArgs {
    /// The server (name or address); omit with --loopback.
    #[arg(required_unless_present = "loopback")]
    pub host: Option<String>,
    /// Run a server in this process on 127.0.0.1 and test against it.
    #[arg(long, conflicts_with = "host")]
    pub loopback: bool,
    /// Server port.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Measured time after the warm-up (e.g. 10, 30s, 2m).
    #[arg(short = 't', long, default_value = "10s", value_parser = nsperf_core::parse_duration)]
    pub time: Duration,
    /// Send this many bytes per direction instead of running for a time (e.g. 1g).
    #[arg(short = 'n', long)]
    pub bytes: Option<Bytes>,
    /// Warm-up excluded from the summary (e.g. 2s).
    #[arg(short = 'O', long = "omit", visible_alias = "warmup", default_value = "0s", value_parser = nsperf_core::parse_duration)]
    pub omit: Duration,
    /// Reporting interval.
    #[arg(short = 'i', long, default_value = "1s", value_parser = nsperf_core::parse_duration)]
    pub interval: Duration,
    /// Write size (TCP) or datagram size (UDP); default 128 KiB for TCP, 1400 B for UDP.
    #[arg(short = 'l', long)]
    pub len: Option<Bytes>,
    /// Socket send and receive buffer on both ends (the kernel's grant is reported).
    #[arg(short = 'w', long)]
    pub window: Option<Bytes>,
    /// Congestion control (e.g. cubic, reno, bbr); an unknown name lists the available ones.
    #[arg(short = 'C', long)]
    pub congestion: Option<String>,
    /// TCP maximum segment size.
    #[arg(short = 'M', long, value_parser = clap::value_parser!(u32).range(88..=65535))]
    pub mss: Option<u32>,
    /// Disable Nagle's algorithm (TCP_NODELAY).
    #[arg(short = 'N', long)]
    pub no_delay: bool,
    /// Parallel streams, each on its own thread.
    #[arg(short = 'P', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub parallel: u32,
    /// Reverse: the server sends.
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once (-P streams each way).
    #[arg(long)]
    pub bidir: bool,
    /// UDP instead of TCP.
    #[arg(short = 'u', long, conflicts_with_all = ["rr", "sweep", "zerocopy", "congestion", "mss", "no_delay"])]
    pub udp: bool,
    /// UDP target bit rate per stream (e.g. 100mbit, 1g); 0 = as fast as possible.
    #[arg(short = 'b', long, requires = "udp")]
    pub bitrate: Option<nsperf_core::BitRate>,
    /// UDP: plain datagrams, without segmentation/receive offload (GSO/GRO).
    #[arg(long, requires = "udp")]
    pub no_offload: bool,
    /// Hold the CPUs of both ends out of deep idle states during the test (PM QoS
    /// /dev/cpu_dma_latency = 0, needs root on each end): shows how much of a round trip is
    /// CPU wake-up.
    #[arg(long)]
    pub awake: bool,
    /// Send with sendfile(2) from a memory file (no copy from user space).
    #[arg(short = 'Z', long)]
    pub zerocopy: bool,
    /// Request/response: SIZE or REQUEST/RESPONSE bytes (e.g. 1, 64/4k); transactions per
    /// second and latency percentiles.
    #[arg(long, value_name = "SIZE[/RESP]", conflicts_with_all = ["sweep", "reverse", "bidir", "zerocopy"])]
    pub rr: Option<String>,
    /// NetPIPE-style message-size sweep MIN..MAX (powers of two and ±3 bytes): round-trip
    /// time and throughput per size.
    #[arg(long, value_name = "MIN..MAX", conflicts_with_all = ["reverse", "bidir", "zerocopy", "parallel"])]
    pub sweep: Option<String>,
    /// File holding the server's pre-shared key.
    #[arg(long)]
    pub psk_file: Option<PathBuf>,
    /// Give up connecting after this long.
    #[arg(long, default_value = "5s", value_parser = nsperf_core::parse_duration)]
    pub connect_timeout: Duration,
    #[command(flatten)]
    pub output: OutputArgs,
}

fn parse_rr(s: &str) -> anyhow::Result<Mode> {
    let (a, b) = s.split_once('/').unwrap_or((s, s));
    let req = Bytes::parse(a.trim())?.0;
    let resp = Bytes::parse(b.trim())?.0;
    let cap = |v: u64| u32::try_from(v).map_err(|_| usage(format!("--rr size {v} is too large")));
    Ok(Mode::Rr {
        request_bytes: cap(req)?,
        response_bytes: cap(resp)?,
    })
}

fn parse_sweep(s: &str) -> anyhow::Result<Mode> {
    let (a, b) = s.split_once("..").ok_or_else(|| {
        usage(format!(
            "invalid sweep range '{s}': expected MIN..MAX (e.g. 1..4m)"
        ))
    })?;
    let lo = Bytes::parse(a.trim())?.0;
    let hi = Bytes::parse(b.trim())?.0;
    let cap = |v: u64| u32::try_from(v).map_err(|_| usage(format!("sweep size {v} is too large")));
    Ok(Mode::Sweep {
        min_bytes: cap(lo)?,
        max_bytes: cap(hi)?,
    })
}

/// Builds the typed test parameters from the flags.
fn params(a: &NetArgs) -> anyhow::Result<TestParams> {
    let protocol = if a.udp { Protocol::Udp } else { Protocol::Tcp };
    let mode = match (&a.rr, &a.sweep) {
        (Some(r), _) => parse_rr(r)?,
        (_, Some(s)) => parse_sweep(s)?,
        _ => Mode::Stream,
    };
    let default_len = if a.udp { 1400 } else { 128 * 1024 };
    let len = match a.len {
        Some(b) => u32::try_from(b.0).map_err(|_| usage("-l is too large"))?,
        None => default_len,
    };
    let p = TestParams {
        protocol,
        mode,
        streams: a.parallel,
        direction: if a.bidir {
            Direction::Both
        } else if a.reverse {
            Direction::Down
        } else {
            Direction::Up
        },
        duration_ns: a.time.as_nanos() as u64,
        bytes: a.bytes.map(|b| b.0).unwrap_or(0),
        warmup_ns: a.omit.as_nanos() as u64,
        interval_ns: a.interval.as_nanos() as u64,
        len,
        window: a.window.map(|b| b.0),
        congestion: a.congestion.clone(),
        mss: a.mss,
        no_delay: a.no_delay,
        zerocopy: a.zerocopy,
        rate_bps: a.bitrate.map(|b| b.bps()).unwrap_or(0.0),
        udp_offload: !a.no_offload,
        awake: a.awake,
    };
    p.validate().map_err(usage)?;
    if a.bytes.is_some_and(|b| b.0 == 0) {
        return Err(usage("-n must be more than 0 bytes"));
    }
    Ok(p)
}

/// The live progress line and `--json-stream` lines.
struct Live {
    format: Format,
    progress: bool,
    drawn: bool,
}

impl Live {
    fn interval(&mut self, iv: &LiveInterval) {
        let bytes: u64 = iv.stream_bytes.iter().sum();
        let msgs: u64 = iv.stream_messages.iter().sum();
        let bps = if iv.length_s > 0.0 {
            bytes as f64 * 8.0 / iv.length_s
        } else {
            0.0
        };
        if self.format == Format::JsonStream {
            let line = serde_json::json!({
                "event": "interval",
                "role": "client",
                "start_s": iv.start_s,
                "length_s": iv.length_s,
                "bytes": bytes,
                "throughput_bps": bps,
                "messages": msgs,
                "stream_bytes": iv.stream_bytes,
                "latency": iv.latency,
            });
            let _ = print_json_line(&line);
        }
        if self.progress {
            let end = iv.start_s + iv.length_s;
            let of = if iv.total_s > 0.0 {
                format!(" / {:.0} s", iv.total_s)
            } else {
                String::new()
            };
            let mut e = std::io::stderr().lock();
            let _ = write!(
                e,
                "\r\x1b[2K[{end:6.1} s{of}] {} this interval, {} streams{}{}",
                BitRate(bps),
                iv.stream_bytes.len(),
                if msgs > 0 && iv.length_s > 0.0 {
                    format!(", {:.0} msg/s", msgs as f64 / iv.length_s)
                } else {
                    String::new()
                },
                match iv.latency {
                    Some(l) => format!(
                        ", p50 {} p99 {}",
                        latency_text(l.p50_ns),
                        latency_text(l.p99_ns)
                    ),
                    None => String::new(),
                }
            );
            let _ = e.flush();
            self.drawn = true;
        }
    }

    fn clear(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
            self.drawn = false;
        }
    }
}

/// Runs `nsperf net`.
pub fn run(a: NetArgs) -> anyhow::Result<()> {
    let p = params(&a)?;
    let psk = match &a.psk_file {
        Some(f) => Some(nsperf_net::error::read_key_file(f)?),
        None => None,
    };
    let format = a.output.format();
    let mut live = Live {
        format,
        progress: a.output.progress(),
        drawn: false,
    };
    let client_facts = nsperf_core::host::HostFacts::collect();
    let result = if a.loopback {
        nsperf_net::loopback::run(p.clone(), |iv| live.interval(iv))
    } else {
        nsperf_net::client::run(
            &ClientConfig {
                host: a.host.clone().unwrap_or_default(),
                port: a.port,
                params: p.clone(),
                psk,
                connect_timeout: a.connect_timeout,
            },
            |iv| live.interval(iv),
        )
    };
    live.clear();
    let run = result?;
    let spec = NetSpec {
        target: if a.loopback {
            "127.0.0.1".into()
        } else {
            a.host.clone().unwrap_or_default()
        },
        port: if a.loopback {
            run.server_addr.port()
        } else {
            a.port
        },
        loopback: a.loopback,
        params: p,
    };
    let report = nsperf_net::report::build(&run, spec, client_facts);
    match format {
        Format::Json => print_json(&report)?,
        Format::JsonStream => {
            print_json_line(&serde_json::json!({"event": "result", "report": report}))?
        }
        Format::Csv => print_csv(&report)?,
        Format::Human => print_human(&report),
    }
    if nsperf_core::signal::interrupted() {
        return Err(classified(
            Failure::Interrupted,
            "interrupted: partial results printed",
        ));
    }
    Ok(())
}

/// A latency for the interval columns and the progress line (`850 ns`, `12.3 µs`, `4.56 ms`).
fn latency_text(ns: u64) -> String {
    nsperf_core::units::format_duration(std::time::Duration::from_nanos(ns))
}

fn print_csv(r: &NetReport) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "start_s,length_s,stream,direction,sent_bytes,received_bytes,throughput_bps,retransmits,messages,lost,jitter_ns,sender_rtt_us,sender_cwnd,lat_p50_ns,lat_p99_ns,lat_max_ns"
    )?;
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    for i in &r.intervals {
        writeln!(
            out,
            "{:.3},{:.3},{},{},{},{},{:.0},{},{},{},{},{},{},{},{},{}",
            i.start_s,
            i.length_s,
            i.stream
                .map(|s| s.to_string())
                .unwrap_or_else(|| "all".into()),
            i.direction,
            i.sent_bytes,
            i.received_bytes,
            i.throughput_bps,
            opt(i.retransmits),
            opt(i.messages),
            opt(i.lost),
            i.jitter_ns.map(|j| format!("{j:.0}")).unwrap_or_default(),
            opt(i.sender_tcp.map(|t| t.rtt_us as u64)),
            opt(i.sender_tcp.map(|t| t.snd_cwnd as u64)),
            opt(i.latency.map(|l| l.p50_ns)),
            opt(i.latency.map(|l| l.p99_ns)),
            opt(i.latency.map(|l| l.max_ns)),
        )?;
    }
    Ok(())
}

fn describe(r: &NetReport) -> String {
    let p = &r.spec.params;
    let what = match p.mode {
        Mode::Stream => format!(
            "{} {}, {} stream{} of {} {}",
            match p.protocol {
                Protocol::Tcp => "TCP",
                Protocol::Udp => "UDP",
            },
            match p.direction {
                Direction::Up => "client → server",
                Direction::Down => "server → client (-R)",
                Direction::Both => "both ways (--bidir)",
            },
            p.streams,
            if p.streams == 1 { "" } else { "s" },
            Bytes(p.len as u64),
            if p.protocol == Protocol::Udp {
                "datagrams"
            } else {
                "writes"
            },
        ),
        Mode::Rr {
            request_bytes,
            response_bytes,
        } => format!(
            "TCP request/response {}/{}, {} stream{}",
            Bytes(request_bytes as u64),
            Bytes(response_bytes as u64),
            p.streams,
            if p.streams == 1 { "" } else { "s" }
        ),
        Mode::Sweep {
            min_bytes,
            max_bytes,
        } => format!(
            "TCP message-size sweep {}..{}",
            Bytes(min_bytes as u64),
            Bytes(max_bytes as u64)
        ),
    };
    format!(
        "nsperf net {}:{}{}: {what}, {} s{}",
        r.spec.target,
        r.spec.port,
        if r.spec.loopback { " (loopback)" } else { "" },
        p.duration_ns as f64 / 1e9,
        if p.warmup_ns > 0 {
            format!(" after {} s warm-up", p.warmup_ns as f64 / 1e9)
        } else {
            String::new()
        }
    )
}

fn print_human(r: &NetReport) {
    println!("{}", describe(r));
    println!();
    let s = &r.summary;
    let p = &r.spec.params;
    if let Mode::Sweep { .. } = p.mode {
        let mut t = Table::new(["message bytes", "round trips", "RTT p50", "throughput"]);
        for pt in &s.sweep {
            t.row([
                pt.size_bytes.to_string(),
                pt.round_trips.to_string(),
                format!("{:.1} µs", pt.rtt_p50_ns as f64 / 1e3),
                BitRate(pt.throughput_bps).to_string(),
            ]);
        }
        print!("{}", t.render());
    } else {
        let aggs: Vec<&NetInterval> = r.intervals.iter().filter(|i| i.stream.is_none()).collect();
        let udp = p.protocol == Protocol::Udp;
        let msgs = aggs.iter().any(|i| i.messages.is_some());
        let mut head = vec!["interval s", "dir", "received", "throughput"];
        head.push(if udp { "lost" } else { "retr" });
        if msgs {
            head.push(if udp { "datagrams" } else { "transactions" });
        }
        let lat = aggs.iter().any(|i| i.latency.is_some());
        if lat {
            head.extend(["p50", "p99", "max"]);
        }
        let mut t = Table::new(head);
        for i in aggs {
            let mut row = vec![
                format!("{:.2}-{:.2}", i.start_s, i.start_s + i.length_s),
                i.direction.clone(),
                Bytes(i.received_bytes).to_string(),
                BitRate(i.throughput_bps).to_string(),
                if udp { i.lost } else { i.retransmits }
                    .map(|r| r.to_string())
                    .unwrap_or_default(),
            ];
            if msgs {
                row.push(i.messages.map(|m| m.to_string()).unwrap_or_default());
            }
            if lat {
                match i.latency {
                    Some(l) => row.extend([
                        latency_text(l.p50_ns),
                        latency_text(l.p99_ns),
                        latency_text(l.max_ns),
                    ]),
                    None => row.extend([String::new(), String::new(), String::new()]),
                }
            }
            t.row(row);
        }
        print!("{}", t.render());
    }
    println!();
    let mut t = Table::new(["summary", ""]);
    let sweep = matches!(p.mode, Mode::Sweep { .. });
    if !sweep {
        throughput_rows(&mut t, r);
    }
    t.row([
        "busiest core, mean".to_string(),
        format!(
            "client {:.0} % / server {:.0} %",
            s.client_busiest_core_pct, s.server_busiest_core_pct
        ),
    ]);
    if p.awake {
        let yes = |b: bool| if b { "held" } else { "not held (needs root)" };
        t.row([
            "CPUs out of deep idle (--awake)".to_string(),
            format!(
                "client {} / server {}",
                yes(s.client_cpu_awake),
                yes(s.server_cpu_awake)
            ),
        ]);
    }
    print!("{}", t.render());
    if !r.findings.is_empty() {
        println!();
        println!("findings:");
        for f in &r.findings {
            println!("  - {}", f.message);
        }
    }
}

fn throughput_rows(t: &mut Table, r: &NetReport) {
    let s = &r.summary;
    let p = &r.spec.params;
    t.row([
        "throughput (receiver, after warm-up)".to_string(),
        BitRate(s.throughput_bps).to_string(),
    ]);
    t.row([
        "mean incl. warm-up".to_string(),
        BitRate(s.mean_bps).to_string(),
    ]);
    t.row([
        "peak interval".to_string(),
        BitRate(s.peak_interval_bps).to_string(),
    ]);
    t.row([
        "sent / received".to_string(),
        format!("{} / {}", Bytes(s.sent_bytes), Bytes(s.received_bytes)),
    ]);
    if p.protocol == Protocol::Tcp {
        t.row(["retransmits".to_string(), s.retransmits.to_string()]);
    }
    for (name, d) in [("up", &s.up), ("down", &s.down)] {
        if let Some(d) = d {
            if s.up.is_some() && s.down.is_some() {
                t.row([
                    format!("{name} throughput"),
                    BitRate(d.throughput_bps).to_string(),
                ]);
            }
            t.row([
                format!("{name} buffers (kernel's grant)"),
                format!(
                    "sender snd {} / receiver rcv {}",
                    Bytes(d.sender_sndbuf_bytes),
                    Bytes(d.receiver_rcvbuf_bytes)
                ),
            ]);
            if let Some(rtt) = d.rtt_mean_us {
                t.row([
                    format!("{name} RTT (sender, mean)"),
                    if rtt >= 1000.0 {
                        format!("{:.1} ms", rtt / 1e3)
                    } else {
                        format!("{rtt:.1} µs")
                    },
                ]);
            }
        }
    }
    if let Some(tps) = s.transactions_per_s {
        t.row(["transactions".to_string(), format!("{tps:.0} /s")]);
        let us = |v: Option<u64>| {
            v.map(|x| format!("{:.1}", x as f64 / 1e3))
                .unwrap_or_default()
        };
        t.row([
            "latency p50 / p90 / p99 / p99.9".to_string(),
            format!(
                "{} / {} / {} / {} µs",
                us(s.lat_p50_ns),
                us(s.lat_p90_ns),
                us(s.lat_p99_ns),
                us(s.lat_p999_ns)
            ),
        ]);
    }
    if let Some(u) = &s.udp {
        t.row([
            "datagrams sent / received".to_string(),
            format!("{} / {}", u.sent_datagrams, u.received_datagrams),
        ]);
        t.row([
            "received datagrams/s".to_string(),
            format!("{:.0}", u.received_datagrams_per_s),
        ]);
        t.row([
            "lost".to_string(),
            format!("{} ({:.3} %)", u.lost_datagrams, u.loss_pct),
        ]);
        t.row([
            "out of order / duplicates".to_string(),
            format!("{} / {}", u.out_of_order, u.duplicates),
        ]);
        t.row([
            "jitter (RFC 3550)".to_string(),
            format!("{:.1} µs", u.jitter_ns / 1e3),
        ]);
    }
}
