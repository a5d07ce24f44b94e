//! `nsperf io run DIR --workload W`: one workload, fio-style.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use nsperf_core::table::Table;
use nsperf_core::units::Bytes;
use nsperf_io::{CacheMode, EngineKind, FsyncMode, IoReport, RunConfig, Target, Workload};

use super::{dur_ns, ops, rate};
use crate::exit::usage;
use crate::output::OutputArgs;

/// Arguments of `nsperf io run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Directory in which nsperf creates (and removes) its own `.nsperf-*` files.
    #[arg(value_name = "DIR", required_unless_present = "device")]
    pub dir: Option<PathBuf>,
    /// Overwrite this block device or existing file in place instead (needs --destructive).
    #[arg(long, value_name = "PATH", conflicts_with = "dir")]
    pub device: Option<PathBuf>,
    /// Allow --device to be overwritten.
    #[arg(long)]
    pub destructive: bool,
    /// seqwrite, rewrite, seqread, reread, randread, randwrite, randrw (mixed), bkwdread,
    /// strideread, recrewrite, charwrite, charread, seeks, meta.
    #[arg(long, short = 'w', default_value = "seqread", value_parser = parse_workload)]
    pub workload: Workload,
    /// Bytes per job (its file, or its region of the shared file / device).
    #[arg(long, short = 's', default_value = "256m", value_parser = Bytes::parse)]
    pub size: Bytes,
    /// Record (block) size of each I/O.
    #[arg(long, short = 'b', default_value = "1m", value_parser = Bytes::parse)]
    pub bs: Bytes,
    /// Number of jobs (threads), each on its own file unless --shared-file.
    #[arg(long, short = 'j', default_value_t = 1)]
    pub jobs: u32,
    /// All jobs share one file, each on its own region.
    #[arg(long)]
    pub shared_file: bool,
    /// Run for this long, repeating passes, instead of one pass over --size.
    #[arg(long, short = 't', value_parser = nsperf_core::parse_duration)]
    pub time: Option<Duration>,
    /// Page-cache state of the measured pass: warm, cold (evicted first) or direct (O_DIRECT).
    #[arg(long, default_value = "warm", value_parser = parse_cache)]
    pub cache: CacheMode,
    /// With --cache cold: also drop the whole page cache (root).
    #[arg(long)]
    pub drop_caches: bool,
    /// When writes are made durable inside the timed pass: none, end, each.
    #[arg(long, default_value = "none", value_parser = parse_fsync)]
    pub fsync: FsyncMode,
    /// Count the time of close() in the measured pass.
    #[arg(long)]
    pub include_close: bool,
    /// I/O engine: psync (pread/pwrite), uring (io_uring), mmap, null (no I/O).
    #[arg(long, short = 'e', default_value = "psync", value_parser = parse_engine)]
    pub engine: EngineKind,
    /// Ops in flight (uring only).
    #[arg(long, default_value_t = 1)]
    pub iodepth: u32,
    /// Percentage of reads in randrw.
    #[arg(long, default_value_t = 70)]
    pub rwmix: u8,
    /// Distance between strided reads (default 17 records).
    #[arg(long, value_parser = Bytes::parse)]
    pub stride: Option<Bytes>,
    /// Length of one reported interval.
    #[arg(long, short = 'i', default_value = "1s", value_parser = nsperf_core::parse_duration)]
    pub interval: Duration,
    /// Seed of the random offsets.
    #[arg(long, default_value_t = 0x6e73_7065_7266)]
    pub seed: u64,
    /// Files of the metadata test (meta).
    #[arg(long, default_value_t = 1024)]
    pub files: u32,
    /// Size of each file of the metadata test.
    #[arg(long, default_value = "0", value_parser = Bytes::parse)]
    pub file_size: Bytes,
    #[command(flatten)]
    pub output: OutputArgs,
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    Workload::parse(s).ok_or_else(|| {
        let names: Vec<_> = Workload::ALL.iter().map(|w| w.name()).collect();
        format!("unknown workload '{s}' (one of {})", names.join(", "))
    })
}

pub(super) fn parse_cache(s: &str) -> Result<CacheMode, String> {
    CacheMode::parse(s).ok_or_else(|| format!("unknown cache mode '{s}' (warm, cold, direct)"))
}

pub(super) fn parse_fsync(s: &str) -> Result<FsyncMode, String> {
    FsyncMode::parse(s).ok_or_else(|| format!("unknown fsync mode '{s}' (none, end, each)"))
}

pub(super) fn parse_engine(s: &str) -> Result<EngineKind, String> {
    EngineKind::parse(s).ok_or_else(|| format!("unknown engine '{s}' (psync, uring, mmap, null)"))
}

/// Builds the engine's config from the flags ("high" args).
pub fn config(a: &RunArgs) -> anyhow::Result<RunConfig> {
    let target = match (&a.dir, &a.device) {
        (_, Some(dev)) => Target::Device {
            path: dev.clone(),
            destructive: a.destructive,
        },
        (Some(dir), None) => {
            if a.destructive {
                return Err(usage("--destructive goes with --device"));
            }
            Target::Dir { path: dir.clone() }
        }
        (None, None) => return Err(usage("give a DIR or --device PATH")),
    };
    let mut c = RunConfig::new(target, a.workload, a.size.0, a.bs.0);
    c.jobs = a.jobs;
    c.shared_file = a.shared_file;
    c.time = a.time;
    c.cache = a.cache;
    c.drop_caches = a.drop_caches;
    c.fsync = a.fsync;
    c.include_close = a.include_close;
    c.engine = a.engine;
    c.iodepth = a.iodepth;
    c.rwmix_read_pct = a.rwmix;
    if let Some(s) = a.stride {
        c.stride_bytes = s.0;
    }
    c.interval = a.interval;
    c.seed = a.seed;
    c.meta_files = a.files;
    c.meta_file_bytes = a.file_size.0;
    Ok(c)
}

/// Runs `nsperf io run`.
pub fn run(a: RunArgs) -> anyhow::Result<()> {
    if a.output.json_stream {
        return Err(usage(
            "--json-stream is not available for io (use --json, or --csv for the intervals)",
        ));
    }
    let cfg = config(&a)?;
    let rep = nsperf_io::run(&cfg).with_context(|| format!("io run {}", cfg.workload))?;
    if let Some(why) = rep.findings.iter().find(|f| f.id == "engine_fallback") {
        eprintln!("nsperf: {}", why.message);
    }
    super::print_report(
        &rep,
        a.output.format(),
        csv,
        human,
        rep.summary.interrupted,
        "the figures above cover the part that ran",
    )
}

/// The intervals as CSV.
pub fn csv(r: &IoReport) -> String {
    let mut s = String::from("start_s,length_s,job,bytes,ops,throughput_bytes_per_s,iops\n");
    for i in &r.intervals {
        s += &format!(
            "{:.3},{:.3},{},{},{},{:.0},{:.1}\n",
            i.start_s,
            i.length_s,
            i.job.map(|j| j.to_string()).unwrap_or_else(|| "all".into()),
            i.bytes,
            i.ops,
            i.throughput_bytes_per_s,
            i.iops
        );
    }
    s
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
            c.target.path().display(),
            c.meta_files,
            Bytes(c.meta_file_bytes)
        );
    } else {
        o += &header(r, &resident);
    }
    let mut t = Table::new(["interval", "throughput", "IOPS"]);
    for i in r.intervals.iter().filter(|i| i.job.is_none()) {
        t.row([
            format!("{:.2}-{:.2} s", i.start_s, i.start_s + i.length_s),
            rate(i.throughput_bytes_per_s),
            ops(i.iops),
        ]);
    }
    o += &t.render();
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
    format!(
        "nsperf io run: {} on {}, {} × {} job{}, bs {}, engine {}{}, cache {}{}, fsync {}\n\n",
        s.workload,
        c.target.path().display(),
        Bytes(c.size_bytes),
        c.jobs,
        if c.jobs == 1 { "" } else { "s" },
        Bytes(c.bs_bytes),
        s.engine,
        if c.iodepth > 1 && s.engine == "uring" {
            format!(" depth {}", c.iodepth)
        } else {
            String::new()
        },
        s.cache,
        resident,
        c.fsync.name()
    )
}
