//! Findings about the target's file system: a network file system read or written faster
//! than its link can carry (the client page cache, or not the network at all), and a mount
//! that changed under the run (a FUSE daemon that died, an NFS mount that vanished).

use nsperf_core::report::{Finding, Severity};
use nsperf_core::units::{BitRate, Bytes};

use crate::config::{CacheMode, FsyncMode, RunConfig};
use crate::findings::RunFacts;
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

/// A network file system moved data faster than its link carries.
fn above_link(cfg: &RunConfig, s: &IoSummary, fs: &FsInfo, out: &mut Vec<Finding>) {
    let Some(link) = &fs.link else {
        return;
    };
    let Some(mbps) = link.speed_mbps else {
        return;
    };
    let link_bytes_per_s = mbps as f64 * 1e6 / 8.0;
    let rate = s.throughput_bytes_per_s.max(s.peak_interval_bytes_per_s);
    if rate <= link_bytes_per_s * 1.05 {
        return;
    }
    let reads = s.read_bytes > 0;
    let cause = if reads && cfg.cache == CacheMode::Warm {
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
                "{} from {} moved {}/s, more than its link {} carries ({}): {cause}",
                fs.fs_type,
                fs.mount_source,
                Bytes(rate as u64),
                link.interface,
                BitRate(mbps as f64 * 1e6)
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
