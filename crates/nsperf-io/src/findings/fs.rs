//! Findings about the target's file system: a network file system read or written faster
//! than its link can carry (the client page cache, or not the network at all), and a mount
//! that changed under the run (a FUSE daemon that died, an NFS mount that vanished).

use nsperf_core::report::{Finding, Severity};
use nsperf_core::units::{BitRate, Bytes};

use super::facts::RunFacts;
use crate::config::{CacheMode, FsyncMode, RunConfig};
use crate::fsinfo::FsInfo;
use crate::result::IoSummary;

/// Adds the file-system findings of one run.
pub fn fs_findings(cfg: &RunConfig, s: &IoSummary, facts: &RunFacts, out: &mut Vec<Finding>) {
    let Some(fs) = &s.target_fs else {
        return;
    };
    if let Some(after) = &facts.fs_after {
        if mount_changed(fs, after) {
            out.push(Finding::new(
                "mount_changed",
                Severity::Warning,
                format!(
                    "the file system under {} changed during the run ({} {} became {} {}): the mount vanished or was replaced, so the figures may not measure {}",
                    cfg.target,
                    fs.fs_type,
                    fs.mount_source,
                    after.fs_type,
                    after.mount_source,
                    fs.fs_type
                ),
            ));
        }
    }
    match fs.network {
        None => out.push(Finding::new(
            "fs_kind_unknown",
            Severity::Info,
            format!(
                "{} is a {} file system from {}: nsperf cannot tell whether it goes over a network",
                cfg.target, fs.fs_type, fs.mount_source
            ),
        )),
        Some(true) => above_link(cfg, s, fs, out),
        Some(false) => {}
    }
}

/// Same mount before and after: same device, type and source.
fn mount_changed(a: &FsInfo, b: &FsInfo) -> bool {
    a.dev != b.dev || a.fs_type != b.fs_type || a.mount_source != b.mount_source
}

/// A network file system moved data faster than its path carries: the ceiling the caller
/// knows (a lab link's configured rate, a measured TCP throughput) first, else the speed of
/// the interface the server is reached through.
fn above_link(cfg: &RunConfig, s: &IoSummary, fs: &FsInfo, out: &mut Vec<Finding>) {
    let (ceiling_bps, what) = match (&cfg.network_path.ceiling, &fs.link) {
        (Some(c), _) => (c.rate_bps(), c.to_string()),
        (None, Some(link)) => match link.speed_mbps {
            Some(mbps) => (
                mbps as f64 * 1e6,
                format!(
                    "its link {} ({})",
                    link.interface,
                    BitRate(mbps as f64 * 1e6)
                ),
            ),
            None => return,
        },
        (None, None) => return,
    };
    let link_bytes_per_s = ceiling_bps / 8.0;
    let rate = s.throughput_bytes_per_s.max(s.peak_interval_bytes_per_s);
    if link_bytes_per_s <= 0.0 || rate <= link_bytes_per_s * 1.05 {
        return;
    }
    let reads = s.read_bytes > 0;
    let user_space = matches!(cfg.target, crate::target::Target::Nfs { .. });
    let cause = if user_space {
        "nsperf's nfs client keeps no cache, so the data did not cross that path at that rate: the path is not the one assumed (the server is reached another way, or the link is not limited as configured), or the data was compressed"
    } else if reads && cfg.cache == CacheMode::Warm {
        "the client's page cache served the reads (use --cache direct, or --cache cold after the data left the client's cache)"
    } else if s.write_bytes > 0 && cfg.fsync == FsyncMode::None && cfg.cache != CacheMode::Direct {
        "the writes ended in the client's page cache (add --fsync end to include sending them to the server)"
    } else {
        "the data did not cross the link: the client's cache, compression, or a mount that vanished (a local directory measured instead)"
    };
    out.push(
        Finding::new(
            "rate_above_link",
            Severity::Warning,
            format!(
                "{} from {} moved {}/s, more than {what} carries: {cause}",
                fs.fs_type,
                fs.mount_source,
                Bytes(rate as u64),
            ),
        )
        .with("throughput_bytes_per_s", rate)
        .with("link_bytes_per_s", link_bytes_per_s),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsinfo::Link;
    use crate::target::Target;
    use crate::workload::Workload;

    fn nfs(speed: Option<u64>) -> FsInfo {
        FsInfo {
            fs_type: "nfs4".into(),
            mount_source: "10.0.0.1:/export".into(),
            mount_point: "/mnt/nas".into(),
            dev: "0:50".into(),
            statfs_magic: 0x6969,
            network: Some(true),
            server: Some("10.0.0.1".parse().unwrap()),
            link: Some(Link {
                interface: "eth0".into(),
                speed_mbps: speed,
            }),
        }
    }

    fn run(s: &IoSummary, after: Option<FsInfo>) -> Vec<Finding> {
        let cfg = RunConfig::new(
            Target::Dir {
                path: "/mnt/nas".into(),
            },
            Workload::SeqRead,
            1 << 30,
            1 << 20,
        );
        let facts = RunFacts {
            fs_after: after,
            ..Default::default()
        };
        let mut out = Vec::new();
        fs_findings(&cfg, s, &facts, &mut out);
        out
    }

    #[test]
    fn nfs_read_faster_than_its_link_names_the_client_cache() {
        // 1.3 GiB/s over a 1 Gbit/s link (issue #12).
        let s = IoSummary {
            read_bytes: 1 << 30,
            throughput_bytes_per_s: 1.3 * 1073741824.0,
            target_fs: Some(nfs(Some(1000))),
            ..Default::default()
        };
        let f = run(&s, Some(nfs(Some(1000))));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "rate_above_link");
        assert!(
            f[0].message.contains("client's page cache"),
            "{}",
            f[0].message
        );
        // Within the link: nothing; link speed unknown: nothing.
        let mut s2 = s.clone();
        s2.throughput_bytes_per_s = 100e6;
        assert!(run(&s2, None).is_empty());
        s2.throughput_bytes_per_s = 1e10;
        s2.target_fs = Some(nfs(None));
        assert!(run(&s2, None).is_empty());
    }

    /// Issue #12: the ceiling a plan knows (the lab link's configured rate) wins over the
    /// interface's speed, which a virtual link does not report.
    #[test]
    fn a_known_ceiling_is_compared_and_named() {
        let s = IoSummary {
            read_bytes: 1 << 30,
            throughput_bytes_per_s: 10e6,
            target_fs: Some(nfs(None)),
            ..Default::default()
        };
        let mut cfg = RunConfig::new(
            Target::Nfs {
                url: "nfs://10.77.0.2/srv".parse().unwrap(),
            },
            Workload::SeqRead,
            1 << 30,
            1 << 20,
        );
        cfg.network_path.ceiling =
            Some(crate::network_path::PathCeiling::LabLink { rate_bps: 45e6 });
        let mut out = Vec::new();
        fs_findings(&cfg, &s, &RunFacts::default(), &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(
            out[0].message.contains("lab link's configured rate 45")
                && out[0].message.contains("keeps no cache"),
            "{}",
            out[0].message
        );
        // 5.4 MB/s is under 45 Mbit/s: nothing.
        let mut s2 = s.clone();
        s2.throughput_bytes_per_s = 5.4e6;
        let mut out = Vec::new();
        fs_findings(&cfg, &s2, &RunFacts::default(), &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_mount_that_vanished_is_named() {
        let s = IoSummary {
            read_bytes: 1,
            target_fs: Some(nfs(None)),
            ..Default::default()
        };
        let mut after = nfs(None);
        after.fs_type = "ext4".into();
        after.mount_source = "/dev/sda1".into();
        after.dev = "8:1".into();
        let f = run(&s, Some(after));
        assert_eq!(f[0].id, "mount_changed");
        assert!(f[0].message.contains("became ext4"), "{}", f[0].message);
    }
}
