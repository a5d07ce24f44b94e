//! The typed configuration of a run (built by the CLI, never from clap types) and its
//! validation. The config is also the `spec` of the result: every parameter, defaults
//! included.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::EngineKind;
use crate::error::IoError;
use crate::network_path::NetworkPath;
use crate::target::Target;
use crate::workload::Workload;

/// Page-cache state of the measured pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// The file was just written or read: the pass runs against the page cache.
    #[default]
    Warm,
    /// fsync + `posix_fadvise(DONTNEED)` before the pass (and drop_caches with
    /// `--drop-caches`): reads come from the device.
    Cold,
    /// O_DIRECT with aligned buffers: the page cache is bypassed.
    Direct,
    /// Only the server's cache holds the data: the file was written and read once through
    /// the server, then the client's cache (a kernel mount's pages) was evicted. The
    /// user-space `nfs` engine has no client cache, so its reads always go to the server.
    #[serde(rename = "remote-warm")]
    RemoteWarm,
}

impl std::fmt::Display for CacheMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CacheMode::Warm => "warm",
            CacheMode::Cold => "cold",
            CacheMode::Direct => "direct",
            CacheMode::RemoteWarm => "remote-warm",
        })
    }
}

/// Parses `warm`, `cold`, `direct`, `remote-warm` (any case; `o_direct`, `remote_warm` too).
impl std::str::FromStr for CacheMode {
    type Err = IoError;
    fn from_str(s: &str) -> Result<Self, IoError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "warm" => CacheMode::Warm,
            "cold" => CacheMode::Cold,
            "direct" | "o_direct" => CacheMode::Direct,
            "remote-warm" | "remote_warm" | "remotewarm" => CacheMode::RemoteWarm,
            _ => {
                return Err(IoError::Config(format!(
                    "unknown cache mode '{s}' (warm, cold, direct, remote-warm)"
                )));
            }
        })
    }
}

/// When written data is made durable, inside the timed pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncMode {
    /// Never: the pass ends when the last write returns (page cache speed).
    None,
    /// Once at the end of the pass, timed (iozone `-e`).
    End,
    /// After every write, timed as part of that write's latency.
    Each,
}

/// `none`, `end`, `each` (serde's names); pads to a width.
impl std::fmt::Display for FsyncMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            FsyncMode::None => "none",
            FsyncMode::End => "end",
            FsyncMode::Each => "each",
        })
    }
}

/// Parses `none`, `end`, `each` (any case; `no` and `always` too).
impl std::str::FromStr for FsyncMode {
    type Err = IoError;
    fn from_str(s: &str) -> Result<Self, IoError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "none" | "no" => FsyncMode::None,
            "end" => FsyncMode::End,
            "each" | "always" => FsyncMode::Each,
            _ => {
                return Err(IoError::Config(format!(
                    "unknown fsync mode '{s}' (none, end, each)"
                )));
            }
        })
    }
}

/// What the nfs engine does when it closes a file written with UNSTABLE WRITEs that the pass
/// did not commit (`--fsync none`): `--on-close`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnClose {
    /// One COMMIT per file after the measured pass, not timed in it (its time is reported
    /// apart): what libnfs's `nfs_close` does, so fio's nfs engine, and the kernel client
    /// (close-to-open).
    #[default]
    Commit,
    /// Nothing: the server may still hold the data in memory when the run ends.
    None,
}

impl std::str::FromStr for OnClose {
    type Err = IoError;
    fn from_str(s: &str) -> Result<Self, IoError> {
        match s.to_ascii_lowercase().as_str() {
            "commit" => Ok(OnClose::Commit),
            "none" => Ok(OnClose::None),
            _ => Err(IoError::Config(format!(
                "unknown --on-close '{s}' (commit, none)"
            ))),
        }
    }
}

impl std::fmt::Display for OnClose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OnClose::Commit => "commit",
            OnClose::None => "none",
        })
    }
}

/// Everything a run needs. Sizes in bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Where the I/O goes.
    pub target: Target,
    /// What is done.
    pub workload: Workload,
    /// Bytes per job (its file or its region of the shared file).
    pub size_bytes: u64,
    /// Record (block) size.
    pub bs_bytes: u64,
    /// Number of jobs (threads), each with its own file unless `shared_file`.
    pub jobs: u32,
    /// All jobs work on one file, each on its own region of it.
    pub shared_file: bool,
    /// Time limit of the measured part (fio `runtime`): with `time_based` the passes repeat
    /// until it is up (`--time`); without, a size-bound pass stops at it if not done first.
    #[serde(
        serialize_with = "ser_opt_secs",
        deserialize_with = "de_opt_secs",
        rename = "time_s"
    )]
    pub time: Option<Duration>,
    /// Repeat passes until `time` is up (fio `time_based`).
    pub time_based: bool,
    /// Unmeasured warm-up with the same workload before the measured part (fio `ramp_time`).
    #[serde(
        serialize_with = "ser_opt_secs",
        deserialize_with = "de_opt_secs",
        rename = "ramp_s"
    )]
    pub ramp: Option<Duration>,
    /// Rate limits per job (fio `rate`, `rate_iops`).
    pub rate: RateLimit,
    /// Checksum every block written and check every block read (fio `verify`).
    pub verify: Option<VerifyMode>,
    /// Page-cache state.
    pub cache: CacheMode,
    /// Also drop the whole page cache (root) before a cold pass.
    pub drop_caches: bool,
    /// When writes are made durable.
    pub fsync: FsyncMode,
    /// Count the time of `close()` in the pass (iozone `-c`).
    pub include_close: bool,
    /// `nfs://` with `--fsync none`: COMMIT each written file after the pass (untimed).
    #[serde(default)]
    pub on_close: OnClose,
    /// The engine asked for.
    pub engine: EngineKind,
    /// Ops in flight for queued engines.
    pub iodepth: u32,
    /// Percentage of reads in `randrw`.
    pub rwmix_read_pct: u8,
    /// Distance between strided reads, in bytes.
    pub stride_bytes: u64,
    /// Length of one reported interval.
    #[serde(
        serialize_with = "ser_secs",
        deserialize_with = "de_secs",
        rename = "interval_s"
    )]
    pub interval: Duration,
    /// Seed of every random choice.
    pub seed: u64,
    /// Number of files of the metadata test.
    pub meta_files: u32,
    /// Size of each file of the metadata test.
    pub meta_file_bytes: u64,
    /// Refuse to start when the target's file system has less room than the run needs.
    pub space_check: bool,
    /// Also remove the stale `.nsperf-*` files nsperf cannot prove dead (`--clean`).
    pub clean_stale: bool,
    /// What the caller knows about the network path to an `nfs://` server (where the
    /// server runs, the link's rate), for the findings.
    #[serde(default, skip_serializing_if = "NetworkPath::is_unknown")]
    pub network_path: NetworkPath,
    /// How long connecting to an `nfs://` or `smb://` server may take (`--connect-timeout`);
    /// not a figure of the run, so not in its JSON.
    #[serde(skip, default = "default_connect_timeout")]
    pub connect_timeout: Duration,
    /// Every write mirrored to a peer (`--replicate`), DRBD's way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicate: Option<crate::mirror::Replicate>,
}

/// The connect timeout of every protocol unless `--connect-timeout` says otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

fn default_connect_timeout() -> Duration {
    DEFAULT_CONNECT_TIMEOUT
}

/// Rate limits of one job, each direction on its own (fio's `rate=R,W` and
/// `rate_iops=R,W`; one value limits reads and writes alike). `None`: unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RateLimit {
    /// Read bytes per second.
    pub read_bytes_per_s: Option<u64>,
    /// Written bytes per second.
    pub write_bytes_per_s: Option<u64>,
    /// Read ops per second.
    pub read_iops: Option<u64>,
    /// Write ops per second.
    pub write_iops: Option<u64>,
}

impl RateLimit {
    /// True when nothing is limited.
    pub fn is_unlimited(&self) -> bool {
        *self == RateLimit::default()
    }
}

/// How blocks are checked (fio `verify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyMode {
    /// A header in each block (its offset, the run's seed) and a CRC-32 (IEEE) of the block.
    Crc32,
}

impl std::str::FromStr for VerifyMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "crc32" | "1" => Ok(VerifyMode::Crc32),
            other => Err(format!(
                "verify '{other}' is not supported: nsperf checks blocks with crc32"
            )),
        }
    }
}

impl std::fmt::Display for VerifyMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VerifyMode::Crc32 => "crc32",
        })
    }
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn ser_opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

fn secs(x: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(x).map_err(|e| format!("{x} s: {e}"))
}

fn de_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    secs(f64::deserialize(d)?).map_err(serde::de::Error::custom)
}

fn de_opt_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    Option::<f64>::deserialize(d)?
        .map(secs)
        .transpose()
        .map_err(serde::de::Error::custom)
}

impl RunConfig {
    /// A config with the defaults of `nsperf io run`: 1 job, psync, warm cache, no fsync.
    pub fn new(target: Target, workload: Workload, size_bytes: u64, bs_bytes: u64) -> Self {
        RunConfig {
            target,
            workload,
            size_bytes,
            bs_bytes,
            jobs: 1,
            shared_file: false,
            time: None,
            time_based: false,
            ramp: None,
            rate: RateLimit::default(),
            verify: None,
            cache: CacheMode::Warm,
            drop_caches: false,
            fsync: FsyncMode::None,
            include_close: false,
            on_close: OnClose::Commit,
            engine: EngineKind::Psync,
            iodepth: 1,
            rwmix_read_pct: 70,
            stride_bytes: 17 * bs_bytes,
            interval: Duration::from_secs(1),
            seed: 0x6e73_7065_7266,
            meta_files: 1024,
            meta_file_bytes: 0,
            space_check: true,
            clean_stale: false,
            network_path: NetworkPath::default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            replicate: None,
        }
    }

    /// Checks the combination before any file is touched.
    pub fn validate(&self) -> Result<(), IoError> {
        let bad = |m: String| Err(IoError::Config(m));
        if self.bs_bytes == 0 {
            return bad("--bs must be at least 1 byte".into());
        }
        if self.bs_bytes > 1 << 30 {
            return bad("--bs must be at most 1 GiB".into());
        }
        if self.workload.is_block() && self.size_bytes < self.bs_bytes {
            return bad(format!(
                "--size ({}) is smaller than --bs ({})",
                self.size_bytes, self.bs_bytes
            ));
        }
        if self.size_bytes == 0 && self.workload != Workload::Meta {
            return bad("--size must be at least 1 byte".into());
        }
        if self.jobs == 0 || self.jobs > 1024 {
            return bad("--jobs must be 1..1024".into());
        }
        if self.iodepth == 0 || self.iodepth > 4096 {
            return bad("--iodepth must be 1..4096".into());
        }
        let proto = match &self.target {
            Target::Nfs { .. } => Some(EngineKind::Nfs),
            Target::Smb { .. } => Some(EngineKind::Smb),
            _ => None,
        };
        let wants = matches!(self.engine, EngineKind::Nfs | EngineKind::Smb).then_some(self.engine);
        if proto != wants {
            return bad(match (proto, wants) {
                (Some(p), _) => format!(
                    "an {p}:// target is done by --engine {p}, not {}",
                    self.engine
                ),
                (None, Some(EngineKind::Smb)) => {
                    "--engine smb needs an smb://HOST[:PORT]/SHARE/PATH target".into()
                }
                _ => "--engine nfs needs an nfs://HOST[:PORT]/EXPORT/PATH target".into(),
            });
        }
        if let Some(p) = proto {
            match self.cache {
                CacheMode::Warm => {
                    return bad(format!(
                        "--cache warm means the client's page cache holds the data; the {p} engine has none (it reads from the server every time): use --cache remote-warm (the server's cache holds it) or cold"
                    ));
                }
                CacheMode::Direct => {
                    return bad(format!(
                        "--cache direct does not apply to the {p} engine: it has no client cache to bypass (use remote-warm or cold)"
                    ));
                }
                CacheMode::Cold if !self.drop_caches => {
                    return bad(format!(
                        "--cache cold on an {p}:// target needs the server's cache evicted: add --drop-caches (root) when the server runs on this machine (a lab site), or use remote-warm"
                    ));
                }
                CacheMode::Cold if self.network_path.server_on_this_host == Some(false) => {
                    return bad(format!(
                        "--cache cold on an {p}:// target evicts the server's copy by dropping this host's page cache, but the server runs on another host: use remote-warm"
                    ));
                }
                _ => {}
            }
        }
        if let Some(r) = &self.replicate {
            if !matches!(self.target, Target::Dir { .. }) {
                return bad("--replicate mirrors the files of a directory target".into());
            }
            if !self.workload.is_block() {
                return bad(format!(
                    "--replicate mirrors the record workloads (seqwrite, randwrite, …), not {}",
                    self.workload
                ));
            }
            if !matches!(
                self.engine,
                EngineKind::Psync | EngineKind::Mmap | EngineKind::Null
            ) {
                return bad(format!(
                    "--replicate writes locally with psync, mmap or null (the mirror keeps --iodepth writes in flight to the peer itself), not --engine {}",
                    self.engine
                ));
            }
            if r.max_in_flight_bytes == 0 {
                return bad("--replicate-in-flight must be at least 1 byte".into());
            }
            if self.bs_bytes > u64::from(crate::mirror::wire::BLOCK_MAX) {
                return bad(format!(
                    "--replicate takes blocks of at most {} MiB",
                    crate::mirror::wire::BLOCK_MAX >> 20
                ));
            }
        }
        if self.iodepth > 1 && !self.engine.caps().queued && self.replicate.is_none() {
            return bad(format!(
                "--iodepth {} needs a queued engine (--engine uring); {} does one op at a time",
                self.iodepth, self.engine
            ));
        }
        if self.interval < Duration::from_millis(10) {
            return bad("--interval must be at least 10ms".into());
        }
        if self.cache == CacheMode::Direct {
            if !self.engine.caps().direct {
                return bad(format!(
                    "--cache direct is not possible with --engine {}",
                    self.engine
                ));
            }
            if self.bs_bytes % 512 != 0 {
                return bad("--cache direct needs --bs a multiple of 512 bytes".into());
            }
            if !self.workload.is_block() {
                return bad(format!(
                    "--cache direct applies to record I/O, not to {}",
                    self.workload
                ));
            }
        }
        if matches!(self.target, Target::Device { .. }) && self.cache == CacheMode::RemoteWarm {
            return bad("--cache remote-warm needs a file on a network file system or an nfs:// or smb:// target, not a device".into());
        }
        if self.drop_caches && self.cache != CacheMode::Cold {
            return bad("--drop-caches goes with --cache cold".into());
        }
        if self.rwmix_read_pct > 100 {
            return bad("--rwmix must be 0..100".into());
        }
        if matches!(self.target, Target::Device { .. })
            && (self.shared_file || self.jobs > 1)
            && !self.workload.is_block()
        {
            return bad("a device target takes record workloads only".into());
        }
        if matches!(self.target, Target::Device { .. }) && !self.workload.is_block() {
            return bad(format!("{} needs a directory target", self.workload));
        }
        self.validate_fio_habits()
    }

    /// The fio-style options: time limit, ramp, rate limits, verify.
    fn validate_fio_habits(&self) -> Result<(), IoError> {
        let bad = |m: String| Err(IoError::Config(m));
        if self.time_based && self.time.is_none() {
            return bad("--time_based needs --runtime".into());
        }
        if self.time.is_some_and(|t| t.is_zero()) {
            return bad("--runtime must be more than 0".into());
        }
        if (self.ramp.is_some() || !self.rate.is_unlimited()) && !self.workload.is_block() {
            return bad(format!(
                "--ramp_time and --rate apply to record workloads, not to {}",
                self.workload
            ));
        }
        let r = &self.rate;
        if [
            r.read_bytes_per_s,
            r.write_bytes_per_s,
            r.read_iops,
            r.write_iops,
        ]
        .contains(&Some(0))
        {
            return bad("a rate limit must be more than 0".into());
        }
        if let Some(v) = self.verify {
            if !self.workload.is_block() {
                return bad(format!(
                    "--verify applies to record workloads, not to {}",
                    self.workload
                ));
            }
            if self.bs_bytes < crate::verify::HEADER_BYTES as u64 {
                return bad(format!(
                    "--verify {v} needs --bs of at least {} bytes (the block header)",
                    crate::verify::HEADER_BYTES
                ));
            }
            if !self.engine.caps().does_io {
                return bad(format!(
                    "--verify needs an engine that does I/O ({} does none)",
                    self.engine
                ));
            }
            if matches!(self.target, Target::Device { .. }) && self.workload.reads() {
                return bad(
                    "--verify on a device takes a write-only workload (nsperf does not lay out a device, so there is nothing to check reads against)".into(),
                );
            }
        }
        Ok(())
    }

    /// Ops in flight per job: `iodepth` on a queued engine, else 1.
    pub fn depth(&self, engine: EngineKind) -> usize {
        if engine.caps().queued || self.replicate.is_some() {
            self.iodepth as usize
        } else {
            1
        }
    }

    /// Blocks (records) per job.
    pub fn blocks(&self) -> u64 {
        (self.size_bytes / self.bs_bytes).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsync_names_match_display_and_from_str() {
        for (m, name) in [
            (FsyncMode::None, "none"),
            (FsyncMode::End, "end"),
            (FsyncMode::Each, "each"),
        ] {
            assert_eq!(m.to_string(), name);
            assert_eq!(name.parse::<FsyncMode>().ok(), Some(m));
            assert_eq!(format!("{m:>5}|{m:<5}|"), format!("{name:>5}|{name:<5}|"));
        }
        assert_eq!("ALWAYS".parse::<FsyncMode>().ok(), Some(FsyncMode::Each));
        assert_eq!(
            "sometimes".parse::<FsyncMode>().unwrap_err().to_string(),
            "unknown fsync mode 'sometimes' (none, end, each)"
        );
    }

    fn cfg() -> RunConfig {
        RunConfig::new(
            Target::Dir {
                path: "/tmp".into(),
            },
            Workload::SeqRead,
            1 << 20,
            4096,
        )
    }

    #[test]
    fn validation() {
        assert!(cfg().validate().is_ok());
        let mut c = cfg();
        c.iodepth = 8;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("--engine uring")
        );
        c.engine = EngineKind::Uring;
        assert!(c.validate().is_ok());
        let mut c = cfg();
        c.cache = CacheMode::Direct;
        c.engine = EngineKind::Mmap;
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.bs_bytes = 2 << 20;
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.drop_caches = true;
        assert!(c.validate().is_err());
        assert_eq!("COLD".parse::<CacheMode>().ok(), Some(CacheMode::Cold));
        assert_eq!("end".parse::<FsyncMode>().ok(), Some(FsyncMode::End));
    }

    #[test]
    fn fio_habits_validated() {
        let mut c = cfg();
        c.time_based = true;
        assert!(c.validate().unwrap_err().to_string().contains("--runtime"));
        c.time = Some(Duration::from_secs(1));
        assert!(c.validate().is_ok());
        let mut c = cfg();
        c.rate.read_iops = Some(0);
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.verify = Some(VerifyMode::Crc32);
        assert!(c.validate().is_ok());
        c.engine = EngineKind::Null;
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.verify = Some(VerifyMode::Crc32);
        c.bs_bytes = 16;
        c.size_bytes = 16;
        assert!(c.validate().is_err());
        assert_eq!("CRC32".parse::<VerifyMode>(), Ok(VerifyMode::Crc32));
        assert!("md5".parse::<VerifyMode>().unwrap_err().contains("md5"));
    }

    #[test]
    fn spec_serializes_with_units() {
        let j = serde_json::to_value(cfg()).unwrap();
        assert_eq!(j["interval_s"], 1.0);
        assert_eq!(j["workload"], "seqread");
        assert_eq!(j["target"]["kind"], "dir");
        assert!(j["time_s"].is_null());
        let mut c = cfg();
        c.time = Some(Duration::from_millis(1500));
        let back: RunConfig = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert_eq!("direct".parse::<CacheMode>().unwrap(), CacheMode::Direct);
        assert!("lukewarm".parse::<CacheMode>().is_err());
        assert_eq!("each".parse::<FsyncMode>().unwrap(), FsyncMode::Each);
    }
}
