//! What the matrix says: the findings of its surface (cliffs where the file leaves the CPU
//! cache or the page cache, the record size's effect, cells measured too briefly) and the
//! surface in iozone's `-R` CSV layout.

use nsperf_core::report::{Finding, Severity};
use nsperf_core::units::Bytes;

use super::{MatrixCell, MatrixSummary, TESTS};
use crate::workload::Workload;

/// The best throughput of `test` per file size (over record sizes).
fn best_per_file(s: &MatrixSummary, test: &str) -> Vec<(u64, f64)> {
    s.file_sizes_bytes
        .iter()
        .filter_map(|&f| {
            s.cells
                .iter()
                .filter(|c| c.test == test && c.file_bytes <= f && c.file_bytes * 2 > f)
                .map(|c| c.throughput_bytes_per_s)
                .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))))
                .map(|b| (f, b))
        })
        .collect()
}

/// Cliffs in the read surface (a drop to half or less from one file size to the next) and
/// the effect of the record size.
pub fn matrix_findings(s: &MatrixSummary) -> Vec<Finding> {
    let mut out = Vec::new();
    for test in ["seqread", "reread"] {
        let best = best_per_file(s, test);
        for w in best.windows(2) {
            let ((f0, t0), (f1, t1)) = (w[0], w[1]);
            if t1 <= t0 * 0.5 {
                let beyond_ram = s.memory.cache_usable_bytes.is_some_and(|m| f1 > m);
                let past_cpu = s.cpu_cache_bytes.is_some_and(|c| f0 <= c && f1 > c);
                let ram_why = format!(
                    "the file no longer fits in {}: reads go to the device",
                    s.memory.describe()
                );
                let (id, why) = if beyond_ram {
                    ("page_cache_cliff", ram_why.as_str())
                } else if past_cpu {
                    (
                        "cpu_cache_cliff",
                        "the file no longer fits in the CPU cache",
                    )
                } else {
                    (
                        "throughput_cliff",
                        "cause not identified (not past the CPU cache nor the memory the page cache can use; other load on the machine?)",
                    )
                };
                out.push(
                    Finding::new(
                        id,
                        if beyond_ram {
                            Severity::Limit
                        } else {
                            Severity::Info
                        },
                        format!(
                            "{test} falls from {:.0} MiB/s at {} to {:.0} MiB/s at {}: {why}",
                            t0 / 1048576.0,
                            Bytes(f0),
                            t1 / 1048576.0,
                            Bytes(f1)
                        ),
                    )
                    .with("file_before_bytes", f0 as f64)
                    .with("file_after_bytes", f1 as f64)
                    .with("before_bytes_per_s", t0)
                    .with("after_bytes_per_s", t1),
                );
                break;
            }
        }
    }
    short_cells(s, &mut out);
    // Record size: the best record vs the smallest, on the largest file, for reads.
    if let Some(&fmax) = s.file_sizes_bytes.last() {
        let row: Vec<&MatrixCell> = s
            .cells
            .iter()
            .filter(|c| c.test == "seqread" && c.file_bytes * 2 > fmax)
            .collect();
        let pair = (
            row.iter().min_by_key(|c| c.record_bytes),
            row.iter().max_by(|a, b| {
                a.throughput_bytes_per_s
                    .total_cmp(&b.throughput_bytes_per_s)
            }),
        );
        if let (Some(small), Some(best)) = pair
            .0
            .zip(pair.1)
            .filter(|(s, b)| {
                b.record_bytes != s.record_bytes
                    && b.throughput_bytes_per_s > 1.5 * s.throughput_bytes_per_s
            })
            .unzip()
        {
            out.push(
                Finding::new(
                    "record_size",
                    Severity::Info,
                    format!(
                        "reads of the {} file are {:.1}× faster with {} records than with {}: small records cost a system call each",
                        Bytes(fmax),
                        best.throughput_bytes_per_s / small.throughput_bytes_per_s,
                        Bytes(best.record_bytes),
                        Bytes(small.record_bytes)
                    ),
                )
                .with("best_record_bytes", best.record_bytes as f64)
                .with("smallest_record_bytes", small.record_bytes as f64),
            );
        }
    }
    out
}

/// Cells measured for less than [`crate::findings::MIN_MEANINGFUL_S`]: flagged as a group.
fn short_cells(s: &MatrixSummary, out: &mut Vec<Finding>) {
    let min = crate::findings::MIN_MEANINGFUL_S;
    let short: Vec<&MatrixCell> = s.cells.iter().filter(|c| c.elapsed_s < min).collect();
    let Some(shortest) = short.iter().map(|c| c.elapsed_s).min_by(f64::total_cmp) else {
        return;
    };
    out.push(
        Finding::new(
            "short_cells",
            Severity::Warning,
            format!(
                "{} of {} cells were measured for less than {min:.0} s (the shortest {:.3} s): one scheduler stall or writeback burst moves such a cell; compare cells only where the surface is smooth, or use larger files",
                short.len(),
                s.cells.len(),
                shortest
            ),
        )
        .with("short_cells", short.len() as f64)
        .with("shortest_s", shortest)
        .with("min_meaningful_s", min),
    );
}

/// The matrix in iozone's `-R` spreadsheet layout, as CSV: one block per test, titled with
/// iozone's report name, record sizes (KiB) across, file sizes (KiB) down, kB/s in the cells.
pub fn iozone_csv(s: &MatrixSummary) -> String {
    let mut w = nsperf_core::csv::CsvWriter::new();
    for test in &s.tests {
        let Some(title) = test
            .parse::<Workload>()
            .ok()
            .and_then(|w| TESTS.iter().find(|t| t.0 == w))
            .map(|t| t.1)
        else {
            continue;
        };
        w.record([title]);
        let mut head = vec![String::new()];
        head.extend(s.record_sizes_bytes.iter().map(|r| (r / 1024).to_string()));
        w.record(&head);
        for &f in &s.file_sizes_bytes {
            let mut row = vec![(f / 1024).to_string()];
            for &r in &s.record_sizes_bytes {
                row.push(
                    s.cells
                        .iter()
                        .find(|c| {
                            &c.test == test
                                && c.record_bytes == r
                                && c.file_bytes <= f
                                && c.file_bytes * 2 > f
                        })
                        .map(|c| format!("{:.0}", c.throughput_bytes_per_s / 1024.0))
                        .unwrap_or_default(),
                );
            }
            w.record(&row);
        }
        w.blank_line();
    }
    w.into_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{CacheLimit, MemoryFacts};

    fn cell(test: &str, f: u64, r: u64, t: f64) -> MatrixCell {
        MatrixCell {
            test: test.into(),
            file_bytes: f,
            record_bytes: r,
            throughput_bytes_per_s: t,
            elapsed_s: 1.0,
            lat_p50_ns: 1,
            lat_p99_ns: 1,
            beyond_free_ram: false,
            fits_cpu_cache: false,
        }
    }

    #[test]
    fn cliff_found_and_named() {
        let s = MatrixSummary {
            tests: vec!["seqread".into()],
            file_sizes_bytes: vec![1 << 20, 2 << 20, 4 << 20],
            record_sizes_bytes: vec![4096],
            mem_available_bytes: Some(3 << 20),
            memory: MemoryFacts::from_parts(Some(3 << 20), None),
            cpu_cache_bytes: Some(512 << 10),
            cells: vec![
                cell("seqread", 1 << 20, 4096, 1000.0),
                cell("seqread", 2 << 20, 4096, 900.0),
                cell("seqread", 4 << 20, 4096, 100.0),
            ],
            ..Default::default()
        };
        let f = matrix_findings(&s);
        assert_eq!(f[0].id, "page_cache_cliff");
        assert!(
            f[0].message.contains("free RAM (3 MiB)"),
            "{}",
            f[0].message
        );
        assert_eq!(f[0].evidence["file_after_bytes"], (4 << 20) as f64);
        let csv = iozone_csv(&s);
        assert!(
            csv.starts_with("Reader report\r\n,4\r\n1024,1\r\n"),
            "{csv}"
        );
        // Issue #11: a 192 MiB cgroup puts the cliff at 192 MiB whatever the free RAM; the
        // finding names it instead of "cause not identified".
        let mut s = s;
        s.file_sizes_bytes = vec![128 << 20, 256 << 20];
        s.cells = vec![
            cell("seqread", 128 << 20, 4096, 1000.0),
            cell("seqread", 256 << 20, 4096, 100.0),
        ];
        s.cells[0].elapsed_s = 0.02;
        s.mem_available_bytes = Some(20 << 30);
        s.memory =
            MemoryFacts::from_parts(Some(20 << 30), Some(("/test".into(), 192 << 20, 4 << 20)));
        assert_eq!(s.memory.cache_limited_by, Some(CacheLimit::Cgroup));
        let f = matrix_findings(&s);
        assert_eq!(f[0].id, "page_cache_cliff", "{f:?}");
        assert!(
            f[0].message.contains("memory.max 192 MiB"),
            "{}",
            f[0].message
        );
        // Cells of 0.02 s are flagged.
        assert!(f.iter().any(|x| x.id == "short_cells"), "{f:?}");
    }
}
