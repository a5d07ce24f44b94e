//! `nsperf io run DIR --workload W`: one workload, fio-style.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use nsperf_core::table::Table;
use nsperf_core::units::Bytes;
use nsperf_io::{CacheMode, EngineKind, FsyncMode, IoReport, OnClose, RunConfig, Target, Workload};

use super::{dur_ns, ops, rate};
use crate::exit::usage;
use crate::output::OutputArgs;

/// Arguments of `nsperf io run`. fio's option names are accepted beside nsperf's (`--rw`,
/// `--numjobs`, `--runtime`, …; see docs/io.md for the table).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Directory in which nsperf creates (and removes) its own `.nsperf-*` files, or a
    /// directory on an NFS server, `nfs://HOST[:PORT]/EXPORT/PATH` (user-space NFSv3, no
    /// mount, no root; MOUNT found through the portmapper when no port is given), or in an
    /// SMB share, `smb://HOST[:PORT]/SHARE/PATH` (user-space SMB 2/3, no mount, no root).
    #[arg(value_name = "DIR|URL", required_unless_present_any = ["device", "job", "directory"])]
    pub dir: Option<PathBuf>,
    /// The directory, fio style (same as DIR).
    #[arg(long, value_name = "DIR", conflicts_with = "dir", hide = true)]
    pub directory: Option<PathBuf>,
    /// Overwrite this block device or existing file in place instead (needs --destructive).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["dir", "job"])]
    pub device: Option<PathBuf>,
    /// Allow --device to be overwritten.
    #[arg(long)]
    pub destructive: bool,
    /// Read the run from a fio job file ([global] and one job section); DIR overrides its
    /// directory=.
    #[arg(long, value_name = "FILE.fio", conflicts_with_all = FIO_FLAGS)]
    pub job: Option<PathBuf>,
    /// seqwrite, rewrite, seqread, reread, randread, randwrite, randrw, seqrw, bkwdread,
    /// strideread, recrewrite, charwrite, charread, seeks, meta; or fio's read, write, rw
    /// (= readwrite: sequential mixed), randrw.
    #[arg(long, short = 'w', visible_alias = "rw", alias = "readwrite", default_value = "seqread", value_parser = parse_workload)]
    pub workload: Workload,
    /// Bytes per job (its file, or its region of the shared file / device).
    #[arg(long, short = 's', default_value = "256m", value_parser = Bytes::parse)]
    pub size: Bytes,
    /// Record (block) size of each I/O.
    #[arg(long, short = 'b', alias = "blocksize", default_value = "1m", value_parser = Bytes::parse)]
    pub bs: Bytes,
    /// Number of jobs (threads), each on its own file unless --shared-file.
    #[arg(long, short = 'j', visible_alias = "numjobs", default_value_t = 1)]
    pub jobs: u32,
    /// All jobs share one file, each on its own region.
    #[arg(long)]
    pub shared_file: bool,
    /// Run for this long, repeating passes, instead of one pass over --size
    /// (= --runtime T --time_based).
    #[arg(long, short = 't', value_parser = nsperf_core::parse_duration, conflicts_with = "runtime")]
    pub time: Option<Duration>,
    /// fio runtime: stop the pass at this time if --size is not done first (with
    /// --time_based: repeat passes until it is up).
    #[arg(long, value_parser = nsperf_core::parse_duration)]
    pub runtime: Option<Duration>,
    /// With --runtime: repeat passes until the time is up.
    #[arg(long = "time_based", alias = "time-based", requires = "runtime")]
    pub time_based: bool,
    /// Unmeasured warm-up with the same workload before measuring (fio ramp_time).
    #[arg(long = "ramp_time", alias = "ramp-time", value_parser = nsperf_core::parse_duration)]
    pub ramp_time: Option<Duration>,
    /// Rate limit per job in bytes/s, R[,W] for reads and writes apart (fio rate).
    #[arg(long, value_name = "R[,W]")]
    pub rate: Option<String>,
    /// Rate limit per job in ops/s, R[,W] (fio rate_iops).
    #[arg(long = "rate_iops", alias = "rate-iops", value_name = "R[,W]")]
    pub rate_iops: Option<String>,
    /// Stamp every block written with its offset and a CRC-32 and check every block read
    /// (and read back what was written): crc32.
    #[arg(long, value_name = "crc32")]
    pub verify: Option<nsperf_io::VerifyMode>,
    /// Cache state of the measured pass: warm (the client's page cache holds the data), cold
    /// (evicted first), direct (O_DIRECT), remote-warm (only the server's cache holds it: a
    /// network mount or nfs://). Default: warm, remote-warm for nfs://.
    #[arg(long, value_parser = parse_cache)]
    pub cache: Option<CacheMode>,
    /// fio direct: --direct (or --direct=1) is --cache direct.
    #[arg(long, num_args = 0..=1, default_missing_value = "1", value_parser = parse_01, conflicts_with = "cache")]
    pub direct: Option<bool>,
    /// With --cache cold: also drop the whole page cache (root).
    #[arg(long)]
    pub drop_caches: bool,
    /// When writes are made durable inside the timed pass: none (0), end, each (1).
    #[arg(long, default_value = "none", value_parser = parse_fsync)]
    pub fsync: FsyncMode,
    /// Count the time of close() in the measured pass.
    #[arg(long)]
    pub include_close: bool,
    /// nfs:// with --fsync none: commit (default: one COMMIT per file after the measured
    /// pass, not timed in it, as libnfs and fio's nfs engine do) or none (never committed).
    #[arg(long, value_name = "commit|none")]
    pub on_close: Option<OnClose>,
    /// I/O engine: psync (pread/pwrite), uring (io_uring), mmap, null (no I/O), nfs (NFSv3
    /// RPCs, the engine of nfs:// targets), smb (SMB 2/3 requests, the engine of smb://
    /// targets). Default: psync, nfs for nfs://, smb for smb://.
    #[arg(long, short = 'e', visible_alias = "ioengine", value_parser = parse_engine)]
    pub engine: Option<EngineKind>,
    /// smb:// targets: smbclient-style authentication file (`username = …`, `password = …`,
    /// `domain = …` lines). Without it: NSPERF_SMB_USER, NSPERF_SMB_PASSWORD and
    /// NSPERF_SMB_DOMAIN, or USER with PASSWD, from the environment; else a guest session.
    #[arg(
        long,
        short = 'A',
        value_name = "FILE",
        visible_alias = "authentication-file"
    )]
    pub credentials: Option<PathBuf>,
    /// Ops in flight: io_uring ops (uring), or requests in flight on each job's connection
    /// (nfs, smb).
    #[arg(long, default_value_t = 1)]
    pub iodepth: u32,
    /// nfs:// and smb:// targets: give up connecting to the server (portmapper, MOUNT, NFS,
    /// SMB) after this long.
    #[arg(long, default_value = "5s", value_parser = nsperf_core::parse_duration)]
    pub connect_timeout: Duration,
    /// Percentage of reads in randrw and seqrw.
    #[arg(long, visible_alias = "rwmixread", default_value_t = 70)]
    pub rwmix: u8,
    /// Percentage of writes in randrw and seqrw (fio rwmixwrite).
    #[arg(long, conflicts_with = "rwmix")]
    pub rwmixwrite: Option<u8>,
    /// Distance between strided reads (default 17 records).
    #[arg(long, value_parser = Bytes::parse)]
    pub stride: Option<Bytes>,
    /// Length of one reported interval.
    #[arg(long, short = 'i', default_value = "1s", value_parser = nsperf_core::parse_duration)]
    pub interval: Duration,
    /// Seed of the random offsets.
    #[arg(long, alias = "randseed", default_value_t = 0x6e73_7065_7266)]
    pub seed: u64,
    /// Files of the metadata test (meta).
    #[arg(long, default_value_t = 1024)]
    pub files: u32,
    /// Size of each file of the metadata test.
    #[arg(long, default_value = "0", value_parser = Bytes::parse)]
    pub file_size: Bytes,
    #[command(flatten)]
    pub dir_care: super::DirCareArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
}

/// Flags that describe the run and so conflict with --job (its file describes it).
const FIO_FLAGS: [&str; 20] = [
    "workload",
    "size",
    "bs",
    "jobs",
    "shared_file",
    "time",
    "runtime",
    "time_based",
    "ramp_time",
    "rate",
    "rate_iops",
    "verify",
    "cache",
    "direct",
    "fsync",
    "engine",
    "iodepth",
    "rwmix",
    "rwmixwrite",
    "seed",
];

fn parse_workload(s: &str) -> Result<Workload, String> {
    if s.to_ascii_lowercase().contains("trim") {
        return Err(format!(
            "'{s}': fio's trim workloads are not supported (nsperf has no discard engine)"
        ));
    }
    Workload::parse(s).ok_or_else(|| {
        let names: Vec<_> = Workload::ALL.iter().map(|w| w.name()).collect();
        format!("unknown workload '{s}' (one of {})", names.join(", "))
    })
}

fn parse_01(s: &str) -> Result<bool, String> {
    match s {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(format!("'{s}': expected 0 or 1")),
    }
}

pub(super) fn parse_cache(s: &str) -> Result<CacheMode, String> {
    s.parse().map_err(|e: nsperf_io::IoError| match e {
        nsperf_io::IoError::Config(m) => m,
        e => e.to_string(),
    })
}

pub(super) fn parse_fsync(s: &str) -> Result<FsyncMode, String> {
    match s {
        "0" => Ok(FsyncMode::None),
        "1" => Ok(FsyncMode::Each),
        _ => {
            FsyncMode::parse(s).ok_or_else(|| format!("unknown fsync mode '{s}' (none, end, each)"))
        }
    }
}

pub(super) fn parse_engine(s: &str) -> Result<EngineKind, String> {
    EngineKind::parse(s)
        .ok_or_else(|| format!("unknown engine '{s}' (psync, uring, mmap, null, nfs, smb)"))
}

/// `R[,W]` for fio's rate options: one value for both directions, or each apart (empty:
/// unlimited).
fn parse_pair(
    flag: &str,
    s: &str,
    one: fn(&str) -> Option<u64>,
) -> anyhow::Result<(Option<u64>, Option<u64>)> {
    let val = |v: &str| -> anyhow::Result<Option<u64>> {
        if v.trim().is_empty() {
            return Ok(None);
        }
        one(v.trim())
            .map(Some)
            .ok_or_else(|| usage(format!("{flag} {s}: '{v}' is not a rate")))
    };
    match s.split_once(',') {
        None => {
            let v = val(s)?;
            Ok((v, v))
        }
        Some((r, w)) if !w.contains(',') => Ok((val(r)?, val(w)?)),
        Some(_) => Err(usage(format!(
            "{flag} {s}: at most R,W (trim rates are not supported)"
        ))),
    }
}

/// Builds the engine's config from the flags ("high" args).
pub fn config(a: &RunArgs) -> anyhow::Result<RunConfig> {
    let dir = a.dir.clone().or_else(|| a.directory.clone());
    if let Some(job) = &a.job {
        let text = std::fs::read_to_string(job).map_err(|e| {
            crate::exit::classified(
                nsperf_core::Failure::Input,
                format!("job file {}: {e}", job.display()),
            )
        })?;
        let mut c =
            nsperf_io::jobfile::JobFile::parse(&text).and_then(|j| j.to_config(dir.as_deref()))?;
        c.interval = a.interval;
        c.space_check = !a.dir_care.no_space_check;
        c.clean_stale = a.dir_care.clean;
        return Ok(c);
    }
    let target = match (&dir, &a.device) {
        (_, Some(dev)) => Target::Device {
            path: dev.clone(),
            destructive: a.destructive,
        },
        (Some(dir), None) => {
            if a.destructive {
                return Err(usage("--destructive goes with --device"));
            }
            match dir.to_str() {
                Some(u) if nsperf_nfs::NfsUrl::is_nfs_url(u) => Target::Nfs {
                    url: u
                        .parse()
                        .map_err(|e: nsperf_nfs::url::UrlError| usage(e.to_string()))?,
                },
                Some(u) if nsperf_smb::SmbUrl::is_smb_url(u) => {
                    // Read now: a bad file is a one-line error before anything connects.
                    nsperf_smb::Credentials::resolve(a.credentials.as_deref())
                        .map_err(nsperf_smb::SmbError::from)?;
                    Target::Smb {
                        url: u
                            .parse()
                            .map_err(|e: nsperf_smb::url::UrlError| usage(e.to_string()))?,
                        credentials: a.credentials.clone(),
                    }
                }
                _ => Target::Dir { path: dir.clone() },
            }
        }
        (None, None) => return Err(usage("give a DIR or --device PATH")),
    };
    if a.credentials.is_some() && !matches!(target, Target::Smb { .. }) {
        return Err(usage("--credentials goes with an smb:// target"));
    }
    let proto = match target {
        Target::Nfs { .. } => Some(EngineKind::Nfs),
        Target::Smb { .. } => Some(EngineKind::Smb),
        _ => None,
    };
    let nfs = proto.is_some();
    let mut c = RunConfig::new(target, a.workload, a.size.0, a.bs.0);
    if a.connect_timeout.is_zero() {
        return Err(usage("--connect-timeout must be more than 0"));
    }
    c.connect_timeout = a.connect_timeout;
    c.jobs = a.jobs;
    c.shared_file = a.shared_file;
    if a.time.is_some_and(|t| t.is_zero()) {
        return Err(usage("-t/--time must be more than 0"));
    }
    (c.time, c.time_based) = match (a.time, a.runtime) {
        (Some(t), _) => (Some(t), true),
        (None, r) => (r, a.time_based),
    };
    c.ramp = a.ramp_time;
    if let Some(r) = &a.rate {
        (c.rate.read_bytes_per_s, c.rate.write_bytes_per_s) =
            parse_pair("--rate", r, |v| Bytes::parse(v).ok().map(|b| b.0))?;
    }
    if let Some(r) = &a.rate_iops {
        (c.rate.read_iops, c.rate.write_iops) = parse_pair("--rate_iops", r, |v| v.parse().ok())?;
    }
    c.verify = a.verify;
    c.cache = match a.direct {
        Some(true) => CacheMode::Direct,
        _ => a.cache.unwrap_or(if nfs {
            CacheMode::RemoteWarm
        } else {
            CacheMode::Warm
        }),
    };
    c.drop_caches = a.drop_caches;
    c.fsync = a.fsync;
    c.include_close = a.include_close;
    match (a.on_close, matches!(c.target, Target::Nfs { .. })) {
        (Some(_), false) => return Err(usage("--on-close is for nfs:// targets")),
        (o, _) => c.on_close = o.unwrap_or_default(),
    }
    c.engine = a.engine.or(proto).unwrap_or(EngineKind::Psync);
    c.iodepth = a.iodepth;
    c.rwmix_read_pct = match a.rwmixwrite {
        Some(w) if w <= 100 => 100 - w,
        Some(_) => return Err(usage("--rwmixwrite must be 0..100")),
        None => a.rwmix,
    };
    if let Some(s) = a.stride {
        c.stride_bytes = s.0;
    }
    c.interval = a.interval;
    c.seed = a.seed;
    c.meta_files = a.files;
    c.meta_file_bytes = a.file_size.0;
    c.space_check = !a.dir_care.no_space_check;
    c.clean_stale = a.dir_care.clean;
    c.network_path = super::lab_path(&c.target);
    Ok(c)
}

/// Runs `nsperf io run`.
pub fn run(a: RunArgs) -> anyhow::Result<()> {
    let cfg = config(&a)?;
    let listener = a.metrics.bind()?;
    let format = a.output.format();
    let mut live = super::live::Live::new(format, a.output.progress());
    let metrics = listener.is_some().then(crate::metrics::IoMetrics::default);
    let _endpoint = match (listener, &metrics) {
        (Some(l), Some(m)) => Some(l.serve(m.clone())?),
        _ => None,
    };
    let observe = live.wanted() || metrics.is_some();
    let mut cb = |p: &nsperf_io::Progress| {
        if let Some(m) = &metrics {
            m.sample(p);
        }
        live.sample(p);
    };
    let rep = nsperf_io::run_observed(
        &cfg,
        observe.then_some(nsperf_io::Observer {
            sample: &mut cb,
            latency: metrics.is_some(),
            ready: None,
        }),
    );
    live.clear();
    let rep = rep.with_context(|| format!("io run {}", cfg.workload))?;
    for f in rep.findings.iter().filter(|f| {
        matches!(
            f.id.as_str(),
            "engine_fallback"
                | "stale_files"
                | "stale_files_removed"
                | "stale_files_unknown"
                | "mount_changed"
        )
    }) {
        eprintln!("nsperf: {}", f.message);
    }
    super::print_report(
        &rep,
        format,
        csv,
        human,
        rep.summary.interrupted,
        "the figures above cover the part that ran",
    )?;
    if let Some(v) = rep.summary.verify.as_ref().filter(|v| v.failures > 0) {
        return Err(crate::exit::classified(
            nsperf_core::Failure::Runtime,
            format!(
                "verify: {} of {} blocks failed (the first at offset {})",
                v.failures,
                v.blocks_checked,
                v.first_failure_offset.unwrap_or(0)
            ),
        ));
    }
    Ok(())
}

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
    if let Some(ns) = s.remote.as_ref().and_then(|r| r.close_commit_ns) {
        o += &format!(
            "commit    at close {} (one COMMIT per file after the pass, not in the figures)\n",
            dur_ns(ns as f64)
        );
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
        c.fsync.name(),
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
