//! `nsperf io`: workloads on tmpfs and on a disk directory, safety of user files, cleanup,
//! exit codes. Sizes are small so the whole file runs in seconds.

mod common;
use common::*;

use std::path::{Path, PathBuf};

/// A scratch directory removed on drop, under `base` (tmpfs or disk).
struct Scratch(PathBuf);

impl Scratch {
    fn new(base: &str, name: &str) -> Scratch {
        let p = Path::new(base).join(format!("nsperf-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
    fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".nsperf-"))
            .collect()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const TMPFS: &str = "/dev/shm";

fn disk_base() -> String {
    // The target directory of cargo is on the disk the tests run from.
    let t = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    std::fs::create_dir_all(&t).unwrap();
    t.to_string_lossy().into_owned()
}

fn io_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["io", "run"];
    a.extend_from_slice(args);
    a.push("--json");
    run(&a).ok().json()
}

#[test]
fn workloads_on_tmpfs_and_disk() {
    for (base, tag) in [(TMPFS.to_string(), "tmpfs"), (disk_base(), "disk")] {
        let d = Scratch::new(&base, &format!("wl-{tag}"));
        for w in [
            "seqwrite",
            "rewrite",
            "seqread",
            "reread",
            "randread",
            "randwrite",
            "randrw",
            "bkwdread",
            "strideread",
            "recrewrite",
            "seeks",
        ] {
            let j = io_json(&[d.path(), "-w", w, "-s", "4m", "-b", "64k"]);
            let s = &j["summary"];
            assert_eq!(s["workload"], w);
            assert_eq!(s["bytes"], 4 << 20, "{w} on {tag}: {s}");
            assert_eq!(s["ops"], 64, "{w}");
            assert!(s["throughput_bytes_per_s"].as_f64().unwrap() > 0.0);
            assert!(s["lat_p50_ns"].as_u64().unwrap() > 0);
            assert!(s["lat_max_ns"].as_u64() >= s["lat_p99_ns"].as_u64());
            assert!(!j["intervals"].as_array().unwrap().is_empty());
            assert_eq!(j["command"], "io");
            assert_eq!(j["spec"]["bs_bytes"], 65536);
            assert!(d.leftovers().is_empty(), "{w}: {:?}", d.leftovers());
        }
        let j = io_json(&[
            d.path(),
            "-w",
            "randrw",
            "-s",
            "4m",
            "-b",
            "4k",
            "--rwmix",
            "70",
        ]);
        let (r, w) = (
            j["summary"]["read_bytes"].as_f64().unwrap(),
            j["summary"]["write_bytes"].as_f64().unwrap(),
        );
        assert!((0.6..0.8).contains(&(r / (r + w))), "{r} {w}");
    }
}

#[test]
fn null_engine_counts_exactly() {
    let d = Scratch::new(TMPFS, "null");
    let j = io_json(&[
        d.path(),
        "-w",
        "randread",
        "-s",
        "1m",
        "-b",
        "4k",
        "-e",
        "null",
    ]);
    assert_eq!(j["summary"]["ops"], 256);
    assert_eq!(j["summary"]["engine"], "null");
    assert!(j["findings"].to_string().contains("null_engine"));
    let j = io_json(&[
        d.path(),
        "-w",
        "seqwrite",
        "-s",
        "1m",
        "-b",
        "4k",
        "-e",
        "null",
        "-j",
        "3",
    ]);
    assert_eq!(j["summary"]["ops"], 768);
    // Per-job intervals exist beside the aggregate.
    assert!(
        j["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["job"] == 2)
    );
}

#[test]
fn pre_existing_file_is_untouched() {
    let d = Scratch::new(&disk_base(), "keep");
    let keep = d.0.join("precious.dat");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&keep, &data).unwrap();
    let before = std::fs::metadata(&keep).unwrap().modified().unwrap();
    for w in ["seqwrite", "randwrite", "meta"] {
        io_json(&[d.path(), "-w", w, "-s", "2m", "-b", "4k", "--files", "50"]);
    }
    assert_eq!(std::fs::read(&keep).unwrap(), data, "user file changed");
    assert_eq!(
        std::fs::metadata(&keep).unwrap().modified().unwrap(),
        before
    );
    assert!(d.leftovers().is_empty());
}

#[test]
fn device_needs_destructive() {
    let d = Scratch::new(TMPFS, "dev");
    let f = d.0.join("disk.img");
    std::fs::write(&f, vec![1u8; 1 << 20]).unwrap();
    let r = run(&[
        "io",
        "run",
        "--device",
        f.to_str().unwrap(),
        "-w",
        "seqwrite",
        "-s",
        "64k",
        "-b",
        "4k",
    ]);
    assert_eq!(r.code, Some(10), "{}", r.stderr);
    assert!(r.stderr.contains("--destructive"), "{}", r.stderr);
    assert_eq!(std::fs::read(&f).unwrap(), vec![1u8; 1 << 20]);
    // With consent, a regular file is overwritten in place, never extended or removed.
    let j = io_json(&[
        "--device",
        f.to_str().unwrap(),
        "--destructive",
        "-w",
        "randwrite",
        "-s",
        "1m",
        "-b",
        "4k",
    ]);
    assert_eq!(j["summary"]["ops"], 256);
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 1 << 20);
    let r = run(&[
        "io",
        "run",
        "--device",
        f.to_str().unwrap(),
        "--destructive",
        "-s",
        "2m",
        "-b",
        "4k",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
}

#[test]
fn usage_errors() {
    let r = run(&["io", "run", "/dev/shm", "-w", "sideways"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("unknown workload"), "{}", r.stderr);
    let r = run(&["io", "run", "/dev/shm", "--iodepth", "8"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("--engine uring"), "{}", r.stderr);
    let r = run(&["io", "run", "/no/such/dir", "-s", "64k", "-b", "4k"]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
}

#[test]
fn human_and_csv_output() {
    let d = Scratch::new(TMPFS, "out");
    let r = run(&[
        "io",
        "run",
        d.path(),
        "-w",
        "seqread",
        "-s",
        "2m",
        "-b",
        "64k",
    ])
    .ok();
    assert!(r.stdout.contains("nsperf io run: seqread"), "{}", r.stdout);
    assert!(r.stdout.contains("latency"));
    let r = run(&["io", "run", d.path(), "-s", "2m", "-b", "64k", "--csv"]).ok();
    assert!(r.stdout.starts_with("start_s,length_s,job,bytes,ops,"));
    assert!(
        r.stdout
            .lines()
            .nth(1)
            .unwrap()
            .contains(",all,2097152,32,"),
        "{}",
        r.stdout
    );
}
