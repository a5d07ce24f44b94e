//! Block device counters from `/proc/diskstats`: bytes read and written per device (sectors
//! are 512 bytes there, whatever the device's own sector size).

use serde::{Deserialize, Serialize};

/// Cumulative counters of one block device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskCounters {
    /// Device name (`vda`, `sda1`, `loop0`, …).
    pub name: String,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
}

impl DiskCounters {
    /// The growth since `earlier` (saturating: a counter that went back counts 0).
    pub fn since(&self, earlier: &DiskCounters) -> DiskCounters {
        DiskCounters {
            name: self.name.clone(),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            reads: self.reads.saturating_sub(earlier.reads),
            writes: self.writes.saturating_sub(earlier.writes),
        }
    }
}

/// Parses `/proc/diskstats` text; lines that do not parse are skipped.
pub fn parse_proc_diskstats(text: &str) -> Vec<DiskCounters> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| f.get(i)?.parse::<u64>().ok();
            Some(DiskCounters {
                name: (*f.get(2)?).to_string(),
                reads: n(3)?,
                read_bytes: n(5)?.saturating_mul(512),
                writes: n(7)?,
                write_bytes: n(9)?.saturating_mul(512),
            })
        })
        .collect()
}

/// This host's block device counters now (empty when `/proc/diskstats` cannot be read).
pub fn read_disk_counters() -> Vec<DiskCounters> {
    std::fs::read_to_string("/proc/diskstats")
        .map(|t| parse_proc_diskstats(&t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diskstats_lines_parse_and_subtract() {
        let t = " 254       0 vda 1200 10 24000 300 800 5 16000 200 0 400 500\n garbage\n   7       0 loop0 1 0 8 0 0 0 0 0 0 0 0\n";
        let v = parse_proc_diskstats(t);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].name, "vda");
        assert_eq!(v[0].read_bytes, 24000 * 512);
        assert_eq!(v[0].write_bytes, 16000 * 512);
        assert_eq!((v[0].reads, v[0].writes), (1200, 800));
        let later = DiskCounters {
            read_bytes: v[0].read_bytes + 4096,
            ..v[0].clone()
        };
        assert_eq!(later.since(&v[0]).read_bytes, 4096);
        assert_eq!(v[0].since(&later).read_bytes, 0);
    }
}
