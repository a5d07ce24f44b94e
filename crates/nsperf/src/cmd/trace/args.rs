//! The flags of `nsperf trace`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::output::OutputArgs;

/// Arguments of `nsperf trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Capture file (pcap or pcapng, plain or gzip/zstd/xz); `-` reads standard input live
    /// (`tcpdump -w - | nsperf trace -`).
    #[arg(required_unless_present = "interface", conflicts_with = "interface")]
    pub file: Option<PathBuf>,
    /// Capture live from this network interface (needs root; no libpcap): figures every
    /// `--interval`, the full analysis at the end (Ctrl-C, SIGTERM or `-t`).
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    pub interface: Option<String>,
    /// Live (`-i`, `-`): print per-connection figures and verdicts this often (0: only the
    /// final analysis).
    #[arg(long, value_parser = nsperf_core::parse_duration, default_value = "1s")]
    pub interval: Duration,
    /// Live (`-i`, `-`): stop after this long (default: Ctrl-C, SIGTERM or end of input).
    #[arg(short = 't', long = "time", value_parser = nsperf_core::parse_duration)]
    pub time: Option<Duration>,
    /// With `-i`: also write the packets analysed into this pcap file.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// A connection without a packet for this long (capture time) is summarised and
    /// released (`aged_out`); 0 keeps every connection until it closes.
    #[arg(long, value_parser = nsperf_core::parse_duration, default_value = "5m")]
    pub idle_timeout: Duration,
    /// Keep only packets of `host ADDR`, `port N`, or `host ADDR and port N`.
    #[arg(long)]
    pub filter: Option<String>,
    /// Throughput series bin width (e.g. 100ms, 1s): fills `intervals` and `--csv`.
    #[arg(long, value_parser = nsperf_core::parse_duration)]
    pub bin: Option<Duration>,
    /// Connections shown in detail (largest first).
    #[arg(long, default_value_t = 3)]
    pub top: usize,
    #[command(flatten)]
    pub output: OutputArgs,
}
