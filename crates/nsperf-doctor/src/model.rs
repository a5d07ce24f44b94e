//! The result model of `nsperf doctor` (the JSON schema of `nsperf doctor --json`, documented
//! in docs/schema.md): what was asked, each layer's figures — or why a layer was not
//! measured — and the verdict per direction.

use std::path::PathBuf;

use nsperf_core::report::Report;
use nsperf_io::{CacheMode, RemoteProtocol};
use serde::{Deserialize, Serialize};

/// The `doctor` report.
pub type DoctorReport = Report<DoctorSpec, DoctorInterval, DoctorSummary>;

/// `doctor` has no time series of its own (each layer's engine has them: run it alone for
/// them); `intervals` is always empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DoctorInterval {}

/// Which way the data goes, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From the server's storage to the client.
    Read,
    /// From the client to the server's storage.
    Write,
}

impl Direction {
    /// Both, reads first.
    pub const BOTH: [Direction; 2] = [Direction::Read, Direction::Write];
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Direction::Read => "read",
            Direction::Write => "write",
        })
    }
}

/// Where the file server runs, when nsperf can run there too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerPlace {
    /// The lab.
    pub lab: String,
    /// The site the server runs in.
    pub site: String,
    /// The server program (`embedded`, `ganesha`).
    pub server: String,
    /// The site the client side (network and protocol tests) ran from, when it was not the
    /// namespace `doctor` was started in.
    pub client_site: Option<String>,
}

/// The `spec` of a doctor report: the target and every parameter, defaults included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoctorSpec {
    /// The target as given (`nfs://HOST[:PORT]/EXPORT/PATH`).
    pub target: String,
    /// Where the server runs, when it was found in a lab.
    pub place: Option<ServerPlace>,
    /// Bytes of each file written and read (storage and protocol tests).
    pub size_bytes: u64,
    /// Record size of the storage test and RPC size of the protocol test.
    pub bs_bytes: u64,
    /// RPCs in flight on the protocol test's connection.
    pub rpcs_in_flight: u32,
    /// Longest measured pass of each storage and protocol test, seconds.
    pub pass_time_s: f64,
    /// Measured time of each network direction, seconds (after a 1 s warm-up).
    pub net_time_s: f64,
    /// Cache phase of the protocol read: `cold` (the server's copy evicted, so its storage is
    /// in the path) or `remote-warm` (the server's cache holds it).
    pub read_cache: CacheMode,
}

/// A layer's figures, or why there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Layer<T> {
    /// Measured: the figures.
    Measured(T),
    /// nsperf could not measure this layer from here (the reason says why and what would).
    NotMeasured {
        /// Why.
        reason: String,
    },
    /// The measurement was started and failed.
    Failed {
        /// The error, one line.
        error: String,
    },
}

impl<T> Layer<T> {
    /// The figures, when measured.
    pub fn measured(&self) -> Option<&T> {
        match self {
            Layer::Measured(t) => Some(t),
            _ => None,
        }
    }

    /// Why there are no figures (`None` when measured).
    pub fn why_not(&self) -> Option<&str> {
        match self {
            Layer::Measured(_) => None,
            Layer::NotMeasured { reason } => Some(reason),
            Layer::Failed { error } => Some(error),
        }
    }
}

/// CPU use of the server's processes over a measured pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerCpu {
    /// All server processes together, % of one core.
    pub process_pct: f64,
    /// The busiest thread, % of one core.
    pub busiest_thread_pct: f64,
    /// Its name (`comm`) and id.
    pub busiest_thread: String,
    /// The longest time one server thread waited on a run queue for a CPU, % of the pass.
    pub cpu_wait_pct: f64,
    /// Cores of the server's host.
    pub cores: u32,
}

/// CPU use over one measured pass.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassCpu {
    /// This process (the client side), % of one core.
    pub client_process_pct: f64,
    /// The longest time one thread of this process waited on a run queue for a CPU, % of
    /// the pass (what other load on the host cost the client's data path).
    pub client_cpu_wait_pct: f64,
    /// Mean busy share of all cores of this host, %.
    pub host_mean_pct: f64,
    /// Busiest core of this host, mean busy %.
    pub host_busiest_core_pct: f64,
    /// The server's processes, when they run on this host (a lab site).
    pub server: Option<ServerCpu>,
}

/// One measured pass of the storage or protocol test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pass {
    /// Bytes per second over the measured pass.
    pub bytes_per_s: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// Measured seconds.
    pub elapsed_s: f64,
    /// Median latency per record or RPC, ns.
    pub lat_p50_ns: u64,
    /// 99th percentile, ns.
    pub lat_p99_ns: u64,
    /// CPU over the pass.
    pub cpu: PassCpu,
}

/// (a) The storage at the server: local I/O on the served directory, run where the server
/// runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageFigures {
    /// The directory (the served one, or the target's directory inside it).
    pub dir: PathBuf,
    /// Its file system type and source (`ext4 /dev/loop3`).
    pub fs: String,
    /// Sequential read with the file's pages evicted first (cold).
    pub read: Pass,
    /// Sequential write, fsync at the end inside the timed pass.
    pub write: Pass,
}

/// One direction of the network test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetDirection {
    /// Receiver payload bit rate after the warm-up.
    pub throughput_bps: f64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Mean smoothed RTT the sender saw under load, µs.
    pub rtt_loaded_us: Option<f64>,
    /// Mean receive window the receiver advertised, bytes.
    pub peer_window_bytes: Option<u64>,
    /// Share of busy time the sender was limited by the receive window, %.
    pub rwnd_limited_pct: Option<f64>,
    /// Sender's MSS, bytes.
    pub mss_bytes: Option<u32>,
}

impl NetDirection {
    /// Payload bytes per second.
    pub fn bytes_per_s(&self) -> f64 {
        self.throughput_bps / 8.0
    }
}

/// (b) The network to the server: `nsperf net` against an nsperf server at (or next to) it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkFigures {
    /// The nsperf server used (`ADDRESS:PORT`).
    pub server: String,
    /// True when doctor started that server itself (in the file server's lab site).
    pub started_by_doctor: bool,
    /// TCP, one stream, server to client (what reads cross).
    pub to_client: NetDirection,
    /// TCP, one stream, client to server (what writes cross).
    pub to_server: NetDirection,
    /// Round trip of 1-byte request/response transactions (median), ns: the idle RTT.
    pub rtt_idle_ns: u64,
    /// MTU of the lab's links, when the server is in a lab.
    pub lab_mtu_bytes: Option<u32>,
}

impl NetworkFigures {
    /// The direction a file-protocol direction crosses.
    pub fn toward(&self, d: Direction) -> &NetDirection {
        match d {
            Direction::Read => &self.to_client,
            Direction::Write => &self.to_server,
        }
    }
}

/// (c) The file protocol end to end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProtocolFigures {
    /// `nfs3`, `nfs4.0`, `nfs4.1`, or `smb` and the dialect (`smb3.1.1`).
    pub protocol: RemoteProtocol,
    /// Where the server answered (`ADDRESS:PORT`).
    pub server: String,
    /// Data bytes per READ/WRITE RPC (after the server's FSINFO limits).
    pub rpc_bytes: u64,
    /// RPCs in flight on the connection.
    pub rpcs_in_flight: u32,
    /// TCP connections.
    pub connections: u32,
    /// Median round trip of NULL RPCs (no work at the server), ns.
    pub null_rtt_ns: u64,
    /// This host's TCP congestion control (the client's end of the connection).
    pub congestion_control: Option<String>,
    /// Cache phase of the read (`cold`, `remote-warm`).
    pub read_cache: CacheMode,
    /// Sequential read.
    pub read: Pass,
    /// Sequential write, UNSTABLE with a timed COMMIT at the end.
    pub write: Pass,
}

impl ProtocolFigures {
    /// The pass of a direction.
    pub fn pass(&self, d: Direction) -> &Pass {
        match d {
            Direction::Read => &self.read,
            Direction::Write => &self.write,
        }
    }

    /// True when the read's data came from the server's storage (cold), not its cache.
    pub fn read_from_storage(&self) -> bool {
        self.read_cache == CacheMode::Cold
    }
}

impl StorageFigures {
    /// The pass of a direction.
    pub fn pass(&self, d: Direction) -> &Pass {
        match d {
            Direction::Read => &self.read,
            Direction::Write => &self.write,
        }
    }
}

/// Every layer's figures: the input of [`crate::verdict::diagnose`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// (a) storage at the server.
    pub storage: Layer<StorageFigures>,
    /// (b) network to the server.
    pub network: Layer<NetworkFigures>,
    /// (c) the file protocol end to end.
    pub protocol: Layer<ProtocolFigures>,
}

/// The `summary` of a doctor report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoctorSummary {
    /// Each layer's figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// What limits reads and writes, with the ceiling arithmetic.
    pub diagnosis: Diagnosis,
}

/// A layer whose capacity bounds the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CeilingKind {
    /// The storage at the server (local I/O on the served directory).
    Storage,
    /// The network's TCP throughput in that direction.
    Network,
    /// RPCs in flight × RPC size per round trip.
    RpcWindow,
}

impl std::fmt::Display for CeilingKind {
    /// The JSON name (`storage`, `network`, `rpc_window`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CeilingKind::Storage => "storage",
            CeilingKind::Network => "network",
            CeilingKind::RpcWindow => "rpc_window",
        })
    }
}

/// One ceiling with its arithmetic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// Which layer.
    pub kind: CeilingKind,
    /// Its capacity, bytes per second.
    pub bytes_per_s: f64,
    /// The protocol's throughput as % of it.
    pub share_pct: f64,
    /// How it was obtained, in words and figures.
    pub basis: String,
}

/// What limits a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The storage at the server.
    Storage,
    /// The network.
    Network,
    /// Too few RPCs in flight for the round-trip time.
    RpcWindow,
    /// The server's CPU (a saturated thread or all its cores).
    ServerCpu,
    /// This client's CPU.
    ClientCpu,
    /// Every core of this host, shared by client, server and the lab's link.
    HostCpu,
    /// Below every measured ceiling, all layers measured, no CPU saturated: the protocol or
    /// the server beyond what nsperf measures.
    Protocol,
    /// Below every measured ceiling while a layer was not measured: it may be that one.
    Undetermined,
    /// The protocol itself was not measured: nothing to judge.
    NotMeasured,
}

impl Limit {
    /// The words of the verdict (`network-bound`).
    pub fn words(self) -> &'static str {
        match self {
            Limit::Storage => "storage-bound",
            Limit::Network => "network-bound",
            Limit::RpcWindow => "protocol-bound (RPCs in flight)",
            Limit::ServerCpu => "server CPU-bound",
            Limit::ClientCpu => "client CPU-bound",
            Limit::HostCpu => "host CPU-bound",
            Limit::Protocol => "protocol/server-bound",
            Limit::Undetermined => "undetermined",
            Limit::NotMeasured => "not measured",
        }
    }
}

impl From<CeilingKind> for Limit {
    fn from(k: CeilingKind) -> Limit {
        match k {
            CeilingKind::Storage => Limit::Storage,
            CeilingKind::Network => Limit::Network,
            CeilingKind::RpcWindow => Limit::RpcWindow,
        }
    }
}

/// The verdict of one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionVerdict {
    /// Reads or writes.
    pub direction: Direction,
    /// What limits it.
    pub limit: Limit,
    /// The protocol's throughput, bytes per second (absent when not measured).
    pub protocol_bytes_per_s: Option<f64>,
    /// The measured ceilings, lowest first.
    pub ceilings: Vec<Ceiling>,
    /// Layers that were not measured for this direction, with why.
    pub not_measured: Vec<String>,
    /// Figures that disagree with each other (a protocol rate above a layer's measured
    /// capacity).
    pub inconsistent: Vec<String>,
    /// The verdict in one line, figures and arithmetic included.
    pub message: String,
}

/// The verdict of a doctor run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// Reads.
    pub read: DirectionVerdict,
    /// Writes.
    pub write: DirectionVerdict,
}

impl Diagnosis {
    /// The verdict of a direction.
    pub fn of(&self, d: Direction) -> &DirectionVerdict {
        match d {
            Direction::Read => &self.read,
            Direction::Write => &self.write,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> ProtocolFigures {
        let pass = Pass {
            bytes_per_s: 1e8,
            bytes: 1 << 30,
            elapsed_s: 10.0,
            lat_p50_ns: 0,
            lat_p99_ns: 0,
            cpu: PassCpu::default(),
        };
        ProtocolFigures {
            protocol: RemoteProtocol::Nfs4_1,
            server: "10.77.0.2:2049".into(),
            rpc_bytes: 1 << 20,
            rpcs_in_flight: 8,
            connections: 1,
            null_rtt_ns: 1000,
            congestion_control: None,
            read_cache: CacheMode::RemoteWarm,
            read: pass.clone(),
            write: pass,
        }
    }

    #[test]
    fn protocol_and_read_cache_are_written_as_before_and_unknown_is_refused() {
        let f = figures();
        let mut json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["protocol"], "nfs4.1");
        assert_eq!(json["read_cache"], "remote-warm");
        assert_eq!(
            serde_json::from_value::<ProtocolFigures>(json.clone()).unwrap(),
            f
        );
        assert!(!f.read_from_storage());
        let cold = ProtocolFigures {
            read_cache: CacheMode::Cold,
            ..figures()
        };
        assert_eq!(serde_json::to_value(&cold).unwrap()["read_cache"], "cold");
        assert!(cold.read_from_storage());
        json["read_cache"] = "lukewarm".into();
        let e = serde_json::from_value::<ProtocolFigures>(json.clone()).unwrap_err();
        assert!(e.to_string().contains("unknown variant `lukewarm`"), "{e}");
        json["read_cache"] = "cold".into();
        json["protocol"] = "nfs5".into();
        let e = serde_json::from_value::<ProtocolFigures>(json).unwrap_err();
        assert!(
            e.to_string().contains("unknown remote protocol 'nfs5'"),
            "{e}"
        );
    }
}
