//! The typed configuration of a run (built by the CLI, never from clap types) and its
//! validation. The config is also the `spec` of the result: every parameter, defaults
//! included.

use std::time::Duration;

use serde::Serialize;

use crate::engine::EngineKind;
use crate::error::IoError;
use crate::target::Target;
use crate::workload::Workload;

/// Page-cache state of the measured pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// The file was just written or read: the pass runs against the page cache.
    Warm,
    /// fsync + `posix_fadvise(DONTNEED)` before the pass (and drop_caches with
    /// `--drop-caches`): reads come from the device.
    Cold,
    /// O_DIRECT with aligned buffers: the page cache is bypassed.
    Direct,
}

impl CacheMode {
    /// Parses `warm`, `cold`, `direct`.
    pub fn parse(s: &str) -> Option<CacheMode> {
        Some(match s.to_ascii_lowercase().as_str() {
            "warm" => CacheMode::Warm,
            "cold" => CacheMode::Cold,
            "direct" | "o_direct" => CacheMode::Direct,
            _ => return None,
        })
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            CacheMode::Warm => "warm",
            CacheMode::Cold => "cold",
            CacheMode::Direct => "direct",
        }
    }
}

/// When written data is made durable, inside the timed pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncMode {
    /// Never: the pass ends when the last write returns (page cache speed).
    None,
    /// Once at the end of the pass, timed (iozone `-e`).
    End,
    /// After every write, timed as part of that write's latency.
    Each,
}

impl FsyncMode {
    /// Parses `none`, `end`, `each`.
    pub fn parse(s: &str) -> Option<FsyncMode> {
        Some(match s.to_ascii_lowercase().as_str() {
            "none" | "no" => FsyncMode::None,
            "end" => FsyncMode::End,
            "each" | "always" => FsyncMode::Each,
            _ => return None,
        })
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            FsyncMode::None => "none",
            FsyncMode::End => "end",
            FsyncMode::Each => "each",
        }
    }
}

/// Everything a run needs. Sizes in bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// Run for this long (repeating passes) instead of one size-bound pass.
    #[serde(serialize_with = "ser_opt_secs", rename = "time_s")]
    pub time: Option<Duration>,
    /// Page-cache state.
    pub cache: CacheMode,
    /// Also drop the whole page cache (root) before a cold pass.
    pub drop_caches: bool,
    /// When writes are made durable.
    pub fsync: FsyncMode,
    /// Count the time of `close()` in the pass (iozone `-c`).
    pub include_close: bool,
    /// The engine asked for.
    pub engine: EngineKind,
    /// Ops in flight for queued engines.
    pub iodepth: u32,
    /// Percentage of reads in `randrw`.
    pub rwmix_read_pct: u8,
    /// Distance between strided reads, in bytes.
    pub stride_bytes: u64,
    /// Length of one reported interval.
    #[serde(serialize_with = "ser_secs", rename = "interval_s")]
    pub interval: Duration,
    /// Seed of every random choice.
    pub seed: u64,
    /// Number of files of the metadata test.
    pub meta_files: u32,
    /// Size of each file of the metadata test.
    pub meta_file_bytes: u64,
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
            cache: CacheMode::Warm,
            drop_caches: false,
            fsync: FsyncMode::None,
            include_close: false,
            engine: EngineKind::Psync,
            iodepth: 1,
            rwmix_read_pct: 70,
            stride_bytes: 17 * bs_bytes,
            interval: Duration::from_secs(1),
            seed: 0x6e73_7065_7266,
            meta_files: 1024,
            meta_file_bytes: 0,
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
        if self.iodepth > 1 && !self.engine.caps().queued {
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
        Ok(())
    }

    /// Blocks (records) per job.
    pub fn blocks(&self) -> u64 {
        (self.size_bytes / self.bs_bytes).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(CacheMode::parse("COLD"), Some(CacheMode::Cold));
        assert_eq!(FsyncMode::parse("end"), Some(FsyncMode::End));
    }

    #[test]
    fn spec_serializes_with_units() {
        let j = serde_json::to_value(cfg()).unwrap();
        assert_eq!(j["interval_s"], 1.0);
        assert_eq!(j["workload"], "seqread");
        assert_eq!(j["target"]["kind"], "dir");
        assert!(j["time_s"].is_null());
    }
}
