//! The flags of `nsperf io run` ("low" args: what the user typed, validated by clap's value
//! parsers) and the engine's [`RunConfig`] built from them ("high" args).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use nsperf_core::units::Bytes;
use nsperf_io::mirror::{Protocol, Replicate};
use nsperf_io::{CacheMode, EngineKind, FsyncMode, OnClose, RunConfig, Target, Workload};

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
    pub replicate: ReplicateArgs,
    #[command(flatten)]
    pub dir_care: super::DirCareArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
}

/// Every write mirrored to a peer, DRBD's way (docs/io.md, "Replication").
#[derive(Debug, Clone, Args)]
pub struct ReplicateArgs {
    /// Mirror every write to `nsperf io peer` at HOST:PORT (directory targets; the local
    /// engine psync, mmap or null; --iodepth writes in flight to the peer).
    #[arg(long, value_name = "HOST:PORT")]
    pub replicate: Option<String>,
    /// When a mirrored write completes: A (written locally and sent), B (received by the
    /// peer), C (written by the peer).
    #[arg(long, default_value = "C", requires = "replicate")]
    pub replicate_protocol: Protocol,
    /// Bytes sent to the peer and not yet acknowledged, at most (DRBD's max-buffers).
    #[arg(long, default_value = "8m", value_parser = Bytes::parse, requires = "replicate")]
    pub replicate_in_flight: Bytes,
    /// After the run, compare each file with the peer's copy (CRC-32 of both, untimed).
    #[arg(long, requires = "replicate")]
    pub replicate_check: bool,
    /// TCP congestion control of the mirror's connections (`cubic`, `bbr`, `reno`; default:
    /// the system's).
    #[arg(long, value_name = "NAME", requires = "replicate")]
    pub replicate_congestion: Option<String>,
    /// Run the same workload without the mirror first and print both side by side, with
    /// the ratios.
    #[arg(long, requires = "replicate")]
    pub replicate_compare: bool,
}

impl ReplicateArgs {
    /// The run's mirror, if asked.
    pub fn to_config(&self) -> Option<Replicate> {
        self.replicate.as_ref().map(|peer| Replicate {
            peer: peer.clone(),
            protocol: self.replicate_protocol,
            max_in_flight_bytes: self.replicate_in_flight.0,
            check: self.replicate_check,
            congestion: self.replicate_congestion.clone(),
            compare: self.replicate_compare,
        })
    }
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
    s.parse()
        .map_err(|e: nsperf_core::UnknownWorkload| e.to_string())
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
        _ => s.parse::<FsyncMode>().map_err(|e| e.to_string()),
    }
}

pub(super) fn parse_engine(s: &str) -> Result<EngineKind, String> {
    s.parse::<EngineKind>().map_err(|e| e.to_string())
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
        c.replicate = a.replicate.to_config();
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
    c.replicate = a.replicate.to_config();
    Ok(c)
}
