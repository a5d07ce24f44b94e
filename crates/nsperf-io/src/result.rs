//! The result of an I/O run: the `intervals` and `summary` parts of the shared
//! [`nsperf_core::Report`] envelope (the `spec` is the [`crate::RunConfig`]).

use nsperf_core::stats::LatencySummary;
use nsperf_smb::Dialect;
use serde::{Deserialize, Serialize};

use crate::config::{CacheMode, RunConfig};
use crate::engine::EngineKind;
use crate::fsinfo::FsInfo;
use crate::memory::MemoryFacts;
use crate::verify::Mismatch;
use crate::workload::Workload;

/// The report of `nsperf io run`.
pub type IoReport = nsperf_core::Report<RunConfig, IoInterval, IoSummary>;

/// Throughput over one interval, for all jobs together (`job` absent) or one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoInterval {
    /// The job, when the entry is per job; absent for the aggregate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u32>,
    /// Interval start, seconds since the measured pass started.
    pub start_s: f64,
    /// Interval length in seconds.
    pub length_s: f64,
    /// Bytes moved in the interval.
    pub bytes: u64,
    /// Ops completed in the interval.
    pub ops: u64,
    /// Bytes per second over the interval.
    pub throughput_bytes_per_s: f64,
    /// Ops per second over the interval.
    pub iops: f64,
}

/// The headline figure of an io run, in the natural unit of its workload: bytes per second
/// for the workloads that move data, files per second for the metadata test, seeks per second
/// for the seek test (whose bytes are incidental). Everything that stores, tabulates, compares
/// or exports an io run's headline takes it from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headline {
    /// `throughput_bytes_per_s`.
    Throughput,
    /// `files_per_s`: file operations (create, stat, read, delete) per second.
    Files,
    /// `seeks_per_s`: seek-and-read (one in ten rewritten) operations per second.
    Seeks,
}

impl Headline {
    /// The headline of a workload.
    pub fn of(w: Workload) -> Headline {
        match w {
            Workload::Meta => Headline::Files,
            Workload::Seeks => Headline::Seeks,
            _ => Headline::Throughput,
        }
    }

    /// Its value over the measured time.
    pub fn value(self, s: &IoSummary) -> f64 {
        match self {
            Headline::Throughput => s.throughput_bytes_per_s,
            Headline::Files | Headline::Seeks => s.iops,
        }
    }

    /// Its value over one interval.
    pub fn interval_value(self, i: &IoInterval) -> f64 {
        match self {
            Headline::Throughput => i.throughput_bytes_per_s,
            Headline::Files | Headline::Seeks => i.iops,
        }
    }
}

/// One phase of a multi-phase workload (the metadata test: create, stat, read, delete).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// `create_seq`, `stat_random`, …
    pub name: String,
    /// Operations done.
    pub ops: u64,
    /// Seconds taken.
    pub elapsed_s: f64,
    /// Operations per second.
    pub ops_per_s: f64,
}

/// One direction (reads or writes) of a run on its own, as fio reports them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionSummary {
    /// Bytes moved.
    pub bytes: u64,
    /// Ops completed.
    pub ops: u64,
    /// Bytes per second over the measured time.
    pub throughput_bytes_per_s: f64,
    /// Ops per second over the measured time.
    pub iops: f64,
    /// Per-op latency of this direction.
    pub latency: LatencySummary,
}

/// What `--verify` found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VerifySummary {
    /// Blocks checked (reads in the pass, and the read-back after a writing pass).
    pub blocks_checked: u64,
    /// Blocks that did not match.
    pub failures: u64,
    /// Offset of the first block that did not match.
    pub first_failure_offset: Option<u64>,
    /// Why it did not match.
    pub first_failure: Option<Mismatch>,
}

/// The engine that did a run's I/O (`summary.engine`): one of the engines, or buffered stdio,
/// which the bonnie-style per-character and metadata workloads use. Written as its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineUsed {
    /// One of the engines of `--engine`.
    Engine(EngineKind),
    /// Buffered stdio (`putc`/`getc`, and the metadata calls of the suite).
    Stdio,
}

impl Default for EngineUsed {
    fn default() -> Self {
        EngineUsed::Engine(EngineKind::Psync)
    }
}

impl From<EngineKind> for EngineUsed {
    fn from(k: EngineKind) -> Self {
        EngineUsed::Engine(k)
    }
}

impl std::fmt::Display for EngineUsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineUsed::Engine(k) => k.fmt(f),
            EngineUsed::Stdio => f.write_str("stdio"),
        }
    }
}

impl std::str::FromStr for EngineUsed {
    type Err = crate::IoError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stdio" => Ok(EngineUsed::Stdio),
            k => k.parse().map(EngineUsed::Engine),
        }
    }
}

impl Serialize for EngineUsed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for EngineUsed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Totals and statistics of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoSummary {
    /// The workload run.
    pub workload: Workload,
    /// The engine that did the I/O (differs from `spec.engine` after a fallback).
    pub engine: EngineUsed,
    /// Page-cache state of the measured pass.
    pub cache: CacheMode,
    /// Fraction of the files' pages in the page cache just before the measured pass, in %
    /// (absent when it cannot be told, e.g. for a device).
    pub cache_resident_pct: Option<f64>,
    /// Bytes moved in the measured pass (reads + writes).
    pub bytes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Operations completed (records, characters, seeks or file operations).
    pub ops: u64,
    /// Measured time in seconds, fsync and close included when asked for.
    pub elapsed_s: f64,
    /// Bytes per second over the measured time: the headline of the workloads that move
    /// data (see [`Headline`]).
    pub throughput_bytes_per_s: f64,
    /// Operations per second over the measured time.
    pub iops: f64,
    /// Highest interval throughput.
    pub peak_interval_bytes_per_s: f64,
    /// Number of latency samples.
    pub lat_count: u64,
    /// Smallest op latency.
    pub lat_min_ns: u64,
    /// Mean op latency.
    pub lat_mean_ns: f64,
    /// Median op latency.
    pub lat_p50_ns: u64,
    /// 90th percentile op latency.
    pub lat_p90_ns: u64,
    /// 99th percentile op latency.
    pub lat_p99_ns: u64,
    /// 99.9th percentile op latency.
    pub lat_p999_ns: u64,
    /// Largest op latency.
    pub lat_max_ns: u64,
    /// Time spent in the final fsync (`--fsync end`), inside `elapsed_s`.
    pub fsync_ns: u64,
    /// Time spent closing the files (`--include-close`), inside `elapsed_s`.
    pub close_ns: u64,
    /// Full passes over the file(s) (more than one with `--time`).
    pub passes: f64,
    /// Busiest core's mean busy share over the run, %.
    pub cpu_busiest_core_pct: f64,
    /// This process's CPU over the run, % of one core.
    pub cpu_process_pct: f64,
    /// True when the run was cut short by Ctrl-C (the figures cover what was done).
    pub interrupted: bool,
    /// What the protocol engine used, when the target was `nfs://` (absent for local
    /// targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteFacts>,
    /// Phases of multi-phase workloads (the metadata test), else empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
    /// Reads alone (absent when nothing was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<DirectionSummary>,
    /// Writes alone (absent when nothing was written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<DirectionSummary>,
    /// `--verify` results (absent without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifySummary>,
    /// The file system of the target when the run started (absent for a device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_fs: Option<FsInfo>,
    /// Memory the page cache could use.
    #[serde(default)]
    pub memory: MemoryFacts,
    /// What the mirror did (`--replicate`; absent without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<crate::mirror::ReplicationFacts>,
}

/// What was measured when the target is a network file protocol (`summary.remote`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteFacts {
    /// `nfs3`, `nfs4.0`, `nfs4.1`, or `smb` and the dialect (`smb3.1.1`).
    pub protocol: RemoteProtocol,
    /// Where the service answered (`ADDRESS:PORT`).
    pub server: String,
    /// The export mounted (NFS) or the share connected to (SMB).
    pub export: String,
    /// Largest READ the server allows (NFS FSINFO rtmax, SMB MaxReadSize).
    pub rtmax_bytes: u32,
    /// Largest WRITE the server allows (NFS FSINFO wtmax, SMB MaxWriteSize).
    pub wtmax_bytes: u32,
    /// Preferred READ size (NFS FSINFO rtpref; 0 for SMB, which has none).
    pub rtpref_bytes: u32,
    /// Data bytes per READ/WRITE request in the measured pass (`--bs`, clamped).
    pub rpc_bytes: u64,
    /// Requests in flight per connection (`--iodepth`).
    pub rpcs_in_flight: u32,
    /// TCP connections (`--jobs`).
    pub connections: u32,
    /// How writes were sent: NFS `unstable` (COMMIT at the end with `--fsync end`) or
    /// `file_sync` (`--fsync each`); SMB `buffered` (FLUSH at the end with `--fsync end`) or
    /// `write_through` (`--fsync each`).
    pub write_stable: WriteStable,
    /// When the data written was made durable on the server: `end` (a timed COMMIT/FLUSH,
    /// `--fsync end`), `close` (NFS: one COMMIT per file after the measured pass, not in its
    /// figures, as libnfs and so fio's nfs engine do; `--on-close commit`, the default), or
    /// `none` (never asked: `--on-close none`, writes already stable with `--fsync each`, or
    /// nothing written).
    #[serde(default)]
    pub commit: Commit,
    /// With `commit` `close`: how long those COMMITs took (outside `elapsed_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_commit_ns: Option<u64>,
    /// SMB: whether messages were signed (every authenticated session is; a guest session
    /// is not). Absent for NFS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<bool>,
}

/// The network file protocol of a run (`summary.remote.protocol`): the NFS version in use, or
/// SMB and the dialect NEGOTIATE settled. Written `nfs3`, `nfs4.0`, `nfs4.1`, `smb3.1.1`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum RemoteProtocol {
    /// NFSv3.
    #[default]
    Nfs3,
    /// NFSv4.0.
    Nfs4_0,
    /// NFSv4.1.
    Nfs4_1,
    /// SMB 2/3 in this dialect.
    Smb(Dialect),
}

impl RemoteProtocol {
    /// Every protocol, NFS then SMB's dialects.
    pub fn all() -> impl Iterator<Item = RemoteProtocol> {
        [
            RemoteProtocol::Nfs3,
            RemoteProtocol::Nfs4_0,
            RemoteProtocol::Nfs4_1,
        ]
        .into_iter()
        .chain(Dialect::ALL.map(RemoteProtocol::Smb))
    }

    /// True for SMB.
    pub fn is_smb(self) -> bool {
        matches!(self, RemoteProtocol::Smb(_))
    }
}

impl std::fmt::Display for RemoteProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteProtocol::Nfs3 => f.write_str("nfs3"),
            RemoteProtocol::Nfs4_0 => f.write_str("nfs4.0"),
            RemoteProtocol::Nfs4_1 => f.write_str("nfs4.1"),
            RemoteProtocol::Smb(d) => write!(f, "smb{d}"),
        }
    }
}

impl std::str::FromStr for RemoteProtocol {
    type Err = crate::IoError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RemoteProtocol::all()
            .find(|p| p.to_string() == s)
            .ok_or_else(|| {
                crate::IoError::Config(format!(
                    "unknown remote protocol '{s}' (nfs3, nfs4.0, nfs4.1, smb2.0.2, smb2.1, \
                     smb3.0, smb3.0.2, smb3.1.1)"
                ))
            })
    }
}

impl Serialize for RemoteProtocol {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RemoteProtocol {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How writes were sent (`summary.remote.write_stable`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteStable {
    /// NFS `UNSTABLE` writes: the server may hold them in memory until a COMMIT.
    #[default]
    Unstable,
    /// NFS `FILE_SYNC` writes (`--fsync each`).
    FileSync,
    /// SMB writes without write-through: the server may buffer them until a FLUSH.
    Buffered,
    /// SMB writes with `SMB2_WRITEFLAG_WRITE_THROUGH` (`--fsync each`).
    WriteThrough,
}

impl std::fmt::Display for WriteStable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WriteStable::Unstable => "unstable",
            WriteStable::FileSync => "file_sync",
            WriteStable::Buffered => "buffered",
            WriteStable::WriteThrough => "write_through",
        })
    }
}

/// When written data was made durable (`summary.remote.commit`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Commit {
    /// Never asked (or nothing to ask: stable writes, no writes).
    #[default]
    None,
    /// A timed COMMIT/FLUSH at the end of the pass (`--fsync end`).
    End,
    /// A COMMIT per file after the pass, untimed (`--on-close commit`).
    Close,
}

impl std::fmt::Display for Commit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Commit::None => "none",
            Commit::End => "end",
            Commit::Close => "close",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_protocol_is_written_as_before_and_unknown_is_refused() {
        let names: Vec<String> = RemoteProtocol::all().map(|p| p.to_string()).collect();
        assert_eq!(
            names,
            [
                "nfs3", "nfs4.0", "nfs4.1", "smb2.0.2", "smb2.1", "smb3.0", "smb3.0.2", "smb3.1.1"
            ]
        );
        for p in RemoteProtocol::all() {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{p}\""));
            assert_eq!(serde_json::from_str::<RemoteProtocol>(&json).unwrap(), p);
        }
        for bad in ["nfs4", "smb", "smb3.1", "NFS3", ""] {
            let e = bad.parse::<RemoteProtocol>().unwrap_err().to_string();
            assert!(
                e.contains(&format!("unknown remote protocol '{bad}'")),
                "{e}"
            );
            let e = serde_json::from_str::<RemoteProtocol>(&format!("\"{bad}\"")).unwrap_err();
            assert!(e.to_string().contains("unknown remote protocol"), "{e}");
        }
    }

    #[test]
    fn write_stable_is_written_as_before_and_unknown_is_refused() {
        for (w, text) in [
            (WriteStable::Unstable, "unstable"),
            (WriteStable::FileSync, "file_sync"),
            (WriteStable::Buffered, "buffered"),
            (WriteStable::WriteThrough, "write_through"),
        ] {
            assert_eq!(serde_json::to_string(&w).unwrap(), format!("\"{text}\""));
            assert_eq!(w.to_string(), text);
        }
        let facts = RemoteFacts {
            protocol: RemoteProtocol::Smb(Dialect::Smb3_1_1),
            write_stable: WriteStable::WriteThrough,
            ..RemoteFacts::default()
        };
        let mut json = serde_json::to_value(&facts).unwrap();
        assert_eq!(json["protocol"], "smb3.1.1");
        assert_eq!(json["write_stable"], "write_through");
        assert_eq!(
            serde_json::from_value::<RemoteFacts>(json.clone()).unwrap(),
            facts
        );
        json["write_stable"] = "sync".into();
        let e = serde_json::from_value::<RemoteFacts>(json).unwrap_err();
        assert!(e.to_string().contains("unknown variant `sync`"), "{e}");
    }
}
