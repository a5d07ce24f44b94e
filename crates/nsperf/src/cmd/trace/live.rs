//! `nsperf trace -i IFACE` and `nsperf trace -` (a pipe): the analysis runs while the capture
//! does, printing per-connection figures and verdicts every `--interval`, and at the end
//! (Ctrl-C, SIGTERM, `-t`, or the end of the input) the same report as the analysis of a file
//! of the same packets. Also `nsperf lab capture … --analyse` (a capture file the lab's
//! emulator is still writing, followed).

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use nsperf_core::table::Table;
use nsperf_core::units::BitRate;
use nsperf_trace::reader::{
    CaptureFormat, Compression, LiveInput, PacketSocket, PcapWriter, ReadStats,
};
use nsperf_trace::{
    Analyzer, CaptureReader, ConnectionSpool, LiveInterval, TraceConfig, TraceSpec,
};

use super::args::TraceArgs;
use super::output::{build_report, report};
use crate::output::{Format, print_json_line};

type Shared = Arc<Mutex<Analyzer<ConnectionSpool>>>;

fn lock(an: &Shared) -> MutexGuard<'_, Analyzer<ConnectionSpool>> {
    // A panic in the reading thread poisons the lock; the figures are still whole.
    an.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where the packets come from.
pub enum Source<'a> {
    /// An interface, and the pcap file to write what it saw into.
    Interface(&'a str, Option<&'a Path>),
    /// Standard input (a pipe from `tcpdump -w -`).
    Stdin,
    /// A capture file another process is writing (read on at its end until the stop).
    Follow(&'a Path),
}

/// How a live analysis prints while it runs.
#[derive(Debug, Clone, Copy)]
pub struct LiveOptions {
    /// Print every this long (zero: never).
    pub interval: Duration,
    /// Stop after this long.
    pub time: Option<Duration>,
    /// Connections shown per interval.
    pub rows: usize,
    /// The output format.
    pub format: Format,
}

/// Runs `nsperf trace -i IFACE` or `nsperf trace -`.
pub fn run(args: &TraceArgs, cfg: TraceConfig, spec: TraceSpec) -> anyhow::Result<()> {
    let source = match &args.interface {
        Some(i) => Source::Interface(i, args.write.as_deref()),
        None => Source::Stdin,
    };
    let opts = LiveOptions {
        interval: args.interval,
        time: args.time,
        rows: args.top,
        format: args.output.format(),
    };
    let t0 = Instant::now();
    let what = spec.file.clone();
    let (summary, intervals) =
        analyse(source, cfg, &opts, None).with_context(|| format!("trace {what}"))?;
    if opts.format == Format::JsonStream {
        return print_json_line(&build_report(spec, summary, intervals, t0)?);
    }
    report(opts.format, spec, summary, intervals, t0)
}

/// Analyses `source` live until the end of its input, a signal or `opts.time`. At the stop,
/// `before_stop` runs first (`lab capture --analyse` ends its capture there, completing the
/// file), then the input is told to stop: a followed file is read to its end.
pub fn analyse(
    source: Source<'_>,
    cfg: TraceConfig,
    opts: &LiveOptions,
    mut before_stop: Option<&mut dyn FnMut() -> anyhow::Result<()>>,
) -> anyhow::Result<(
    nsperf_trace::TraceSummary<ConnectionSpool>,
    Vec<nsperf_trace::TraceInterval>,
)> {
    let an: Shared = Arc::new(Mutex::new(Analyzer::new(cfg, ConnectionSpool::new())));
    let stop = Arc::new(AtomicBool::new(false));
    let reading = start(source, an.clone(), stop.clone())?;
    let t0 = Instant::now();
    let mut printed = 0u32;
    let mut last = t0;
    loop {
        if reading.is_finished() {
            break;
        }
        if nsperf_core::signal::interrupted() || opts.time.is_some_and(|t| t0.elapsed() >= t) {
            break;
        }
        let now = Instant::now();
        if !opts.interval.is_zero() && now >= t0 + opts.interval * (printed + 1) {
            let iv = lock(&an).interval(opts.rows);
            print_interval(&iv, last - t0, now - t0, opts)?;
            printed += 1;
            last = now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(f) = before_stop.as_mut() {
        f()?;
    }
    stop.store(true, Ordering::Relaxed);
    let stats = reading
        .join()
        .map_err(|_| anyhow::anyhow!("the capture thread panicked"))??;
    let now = Instant::now();
    if !opts.interval.is_zero() && now > last {
        let iv = lock(&an).interval(opts.rows);
        if iv.packets > 0 {
            print_interval(&iv, last - t0, now - t0, opts)?;
        }
    }
    let an = Arc::try_unwrap(an)
        .map_err(|_| anyhow::anyhow!("the analysis is still shared"))?
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    Ok(an.finish(stats))
}

/// Starts the thread that reads packets into the analysis until the input ends or `stop`.
fn start(
    source: Source<'_>,
    an: Shared,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<JoinHandle<anyhow::Result<ReadStats>>> {
    let input = match source {
        Source::Interface(iface, write) => {
            let sock = PacketSocket::open(iface)?;
            let writer = match write {
                Some(p) => {
                    let f = File::create(p)
                        .with_context(|| format!("cannot create {}", p.display()))?;
                    let w = BufWriter::with_capacity(1 << 20, f);
                    Some(PcapWriter::new(w, sock.link_number(), sock.snaplen())?)
                }
                None => None,
            };
            return Ok(std::thread::spawn(move || {
                read_socket(sock, writer, &an, &stop)
            }));
        }
        Source::Stdin => LiveInput::stdin(stop.clone())?,
        Source::Follow(p) => {
            let f = File::open(p).with_context(|| format!("cannot read {}", p.display()))?;
            LiveInput::new(f, true, stop.clone())
        }
    };
    Ok(std::thread::spawn(move || {
        let mut reader = CaptureReader::from_reader(input)?;
        reader.for_each_packet_while(|p| {
            lock(&an).packet(p);
            !stop.load(Ordering::Relaxed)
        })?;
        Ok(reader.stats().clone())
    }))
}

/// Reads packets from an interface until `stop`, writing them to `writer` first.
fn read_socket(
    mut sock: PacketSocket,
    mut writer: Option<PcapWriter<BufWriter<File>>>,
    an: &Shared,
    stop: &AtomicBool,
) -> anyhow::Result<ReadStats> {
    let mut stats = ReadStats {
        format: CaptureFormat::Live,
        compression: Compression::None,
        ..ReadStats::default()
    };
    while !stop.load(Ordering::Relaxed) {
        let Some(p) = sock.recv()? else { continue };
        stats.records += 1;
        stats.bytes_read += p.data.len() as u64 + 16;
        if let Some(w) = writer.as_mut() {
            w.packet(&p).context("writing the capture file")?;
        }
        lock(an).packet(&p);
    }
    if let Some(w) = writer.as_mut() {
        w.flush().context("writing the capture file")?;
    }
    stats.kernel_dropped = Some(sock.kernel_dropped());
    Ok(stats)
}

/// One interval: a JSON line (`--json-stream`), or its table; nothing with `--json`/`--csv`.
fn print_interval(
    iv: &LiveInterval,
    from: Duration,
    to: Duration,
    opts: &LiveOptions,
) -> anyhow::Result<()> {
    let len_s = (to - from).as_secs_f64().max(1e-9);
    let bps = |b: u64| b as f64 * 8.0 / len_s;
    match opts.format {
        Format::JsonStream => {
            #[derive(serde::Serialize)]
            struct Line<'a> {
                event: &'static str,
                start_s: f64,
                end_s: f64,
                throughput_bps: f64,
                goodput_bps: f64,
                #[serde(flatten)]
                interval: &'a LiveInterval,
            }
            print_json_line(&Line {
                event: "interval",
                start_s: from.as_secs_f64(),
                end_s: to.as_secs_f64(),
                throughput_bps: bps(iv.wire_bytes),
                goodput_bps: bps(iv.unique_bytes),
                interval: iv,
            })
        }
        Format::Human => {
            let mut t = Table::new([
                "time s", "id", "a", "b", "pkts", "wire", "goodput", "rexmit", "path RTT", "limit",
            ]);
            t.row([
                format!("{:.1}-{:.1}", from.as_secs_f64(), to.as_secs_f64()),
                "all".into(),
                format!(
                    "{} live, {} active, {} new",
                    iv.live_connections, iv.active_connections, iv.new_connections
                ),
                format!(
                    "{} closed, {} aged out",
                    iv.closed_connections, iv.aged_out_connections
                ),
                iv.packets.to_string(),
                BitRate(bps(iv.wire_bytes)).to_string(),
                BitRate(bps(iv.unique_bytes)).to_string(),
                iv.retransmitted_packets.to_string(),
                "-".into(),
                "-".into(),
            ]);
            for c in &iv.connections {
                t.row([
                    String::new(),
                    c.id.to_string(),
                    c.a.clone(),
                    c.b.clone(),
                    c.packets.to_string(),
                    BitRate(bps(c.wire_bytes)).to_string(),
                    BitRate(bps(c.unique_bytes)).to_string(),
                    c.retransmitted_packets.to_string(),
                    if c.path_rtt_ns > 0 {
                        format!("{:.2} ms", c.path_rtt_ns as f64 / 1e6)
                    } else {
                        "-".into()
                    },
                    match c.protocol_limit {
                        Some(p) => format!("{} (protocol: {p})", c.limit),
                        None => c.limit.to_string(),
                    },
                ]);
            }
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", t.render())?;
            out.flush()?;
            Ok(())
        }
        Format::Json | Format::Csv => Ok(()),
    }
}
