//! What the figures of a run through a network file protocol mean: the RPC size the server
//! allowed, unstable writes, the cache phase, and the ceiling of one RPC in flight.

use nsperf_core::report::{Finding, Severity};
use nsperf_core::units::Bytes;

use crate::config::{CacheMode, FsyncMode, RunConfig};
use crate::result::Commit;
use crate::result::IoSummary;

/// The findings of a run through a network file protocol.
pub fn remote_findings(
    cfg: &RunConfig,
    s: &IoSummary,
    r: &crate::result::RemoteFacts,
    clamp: Option<(u64, u64)>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let smb = r.protocol.is_smb();
    let (req, limits, engine) = if smb {
        ("request", ("MaxReadSize", "MaxWriteSize"), "smb")
    } else {
        ("RPC", ("FSINFO rtmax", "wtmax"), "nfs")
    };
    if let Some((asked, used)) = clamp {
        out.push(
            Finding::new(
                "rpc_size_clamped",
                Severity::Warning,
                format!(
                    "--bs {} exceeds what the server allows per {req} ({} {}, {} {}): records of {} were used",
                    Bytes(asked),
                    limits.0,
                    Bytes(r.rtmax_bytes as u64),
                    limits.1,
                    Bytes(r.wtmax_bytes as u64),
                    Bytes(used)
                ),
            )
            .with("bs_asked_bytes", asked as f64)
            .with("rpc_bytes", used as f64),
        );
    }
    if let (true, Commit::Close, Some(ns)) = (s.write_bytes > 0, r.commit, r.close_commit_ns) {
        out.push(
            Finding::new(
                "committed_at_close",
                Severity::Info,
                format!(
                    "writes were sent UNSTABLE and committed after the measured pass, one COMMIT per file at close ({}, not in the figures), as libnfs and so fio's nfs engine do; --fsync end times the COMMIT inside the pass, --on-close none never sends it",
                    nsperf_core::units::format_duration(std::time::Duration::from_nanos(ns))
                ),
            )
            .with("close_commit_ns", ns as f64),
        );
    } else if s.write_bytes > 0 && cfg.fsync == FsyncMode::None {
        out.push(Finding::new(
            "writes_unstable",
            Severity::Info,
            if smb {
                "writes were never flushed (--fsync none): the server may still hold them in memory; --fsync end adds a timed FLUSH, --fsync each sends WRITE_THROUGH writes"
            } else {
                "writes were sent UNSTABLE and never committed (--fsync none --on-close none): the server may still hold them in memory; --fsync end adds a timed COMMIT, --fsync each sends FILE_SYNC writes, --on-close commit (the default) one COMMIT after the pass"
            },
        ));
    }
    match cfg.cache {
        CacheMode::RemoteWarm if s.read_bytes > 0 => out.push(Finding::new(
            "remote_warm",
            Severity::Info,
            format!("remote-warm: the file was read once through the server before the pass, so only the server's cache held it (if it fit the server's memory); the {engine} engine keeps no client cache, every read crossed the network"),
        )),
        CacheMode::Cold => out.push(match cfg.network_path.server_on_this_host {
            Some(true) => Finding::new(
                "server_cache_dropped",
                Severity::Info,
                "cold: written data was committed and this host's page cache dropped before the pass — the server's cache too, as the server runs on this host",
            ),
            _ => Finding::new(
                "server_cache_unknown",
                Severity::Warning,
                format!(
                    "cold: written data was committed and this host's page cache dropped before the pass; whether that evicted the server's copy depends on where {} runs, which nsperf cannot tell (only a server on this host, such as a lab site, shares its cache): reads may have come from the server's memory",
                    r.server
                ),
            ),
        }),
        _ => {}
    }
    if cfg.iodepth == 1 && s.lat_p50_ns > 0 && s.ops >= 16 && cfg.workload.is_block() {
        let ceiling = r.rpc_bytes as f64 / (s.lat_p50_ns as f64 / 1e9) * cfg.jobs as f64;
        out.push(
            Finding::new(
                "one_rpc_in_flight",
                Severity::Info,
                format!(
                    "one {req} in flight per connection: each waits a full round trip, so throughput is at most {} per {req} / {:.2} ms median latency = {}/s; --iodepth N keeps N {req}s in flight",
                    Bytes(r.rpc_bytes),
                    s.lat_p50_ns as f64 / 1e6,
                    Bytes(ceiling as u64)
                ),
            )
            .with("ceiling_bytes_per_s", ceiling)
            .with("lat_p50_ns", s.lat_p50_ns as f64),
        );
    }
    out
}
