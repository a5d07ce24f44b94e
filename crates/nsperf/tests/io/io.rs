//! `nsperf io`: workloads on tmpfs and on a disk directory, safety of user files, cleanup,
//! exit codes. Sizes are small so the whole file runs in seconds, and no check depends on the
//! machine being quiet: work on the disk never forces many journal commits (`--fsync each`
//! on a handful of ops only), and time bands are wide.

use crate::common;
use common::*;

use common::scratch::*;

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
            "seqrw",
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

#[test]
fn engines_uring_mmap_and_direct() {
    let d = Scratch::new(TMPFS, "eng");
    let j = io_json(&[
        d.path(),
        "-w",
        "randread",
        "-s",
        "8m",
        "-b",
        "4k",
        "-e",
        "uring",
        "--iodepth",
        "16",
    ]);
    let s = &j["summary"];
    assert_eq!(s["ops"], 2048);
    let fell_back = j["findings"].to_string().contains("engine_fallback");
    assert!(s["engine"] == "uring" || fell_back, "{s}");
    for w in ["seqwrite", "randwrite", "seqread"] {
        let j = io_json(&[d.path(), "-w", w, "-s", "4m", "-b", "64k", "-e", "mmap"]);
        assert_eq!(j["summary"]["bytes"], 4 << 20, "mmap {w}");
        assert_eq!(j["summary"]["engine"], "mmap");
    }
    let r = run(&[
        "io",
        "run",
        d.path(),
        "-e",
        "mmap",
        "--cache",
        "direct",
        "-s",
        "1m",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    // O_DIRECT on the disk: every engine that supports it.
    let disk = Scratch::new(&disk_base(), "direct");
    for e in ["psync", "uring"] {
        let j = io_json(&[
            disk.path(),
            "-w",
            "randread",
            "-s",
            "4m",
            "-b",
            "4k",
            "--cache",
            "direct",
            "-e",
            e,
            "--iodepth",
            if e == "uring" { "8" } else { "1" },
        ]);
        assert_eq!(j["summary"]["cache"], "direct");
        assert_eq!(j["summary"]["ops"], 1024);
    }
    let r = run(&[
        "io",
        "run",
        disk.path(),
        "--cache",
        "direct",
        "-s",
        "1m",
        "-b",
        "1000",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(disk.leftovers().is_empty() && d.leftovers().is_empty());
}

#[test]
fn fsync_close_time_and_intervals() {
    let d = Scratch::new(&disk_base(), "fsync");
    let j = io_json(&[
        d.path(),
        "-w",
        "seqwrite",
        "-s",
        "4m",
        "-b",
        "64k",
        "--fsync",
        "end",
    ]);
    assert!(j["summary"]["fsync_ns"].as_u64().unwrap() > 0);
    assert_eq!(j["spec"]["fsync"], "end");
    let j = io_json(&[
        d.path(),
        "-w",
        "randwrite",
        "-s",
        "32k",
        "-b",
        "4k",
        "--fsync",
        "each",
        "--include-close",
    ]);
    assert_eq!(j["summary"]["ops"], 8);
    assert!(j["summary"]["close_ns"].as_u64().unwrap() > 0);
    // Time-bound: repeated passes, one interval per 100 ms.
    let t = Scratch::new(TMPFS, "time");
    let j = io_json(&[
        t.path(),
        "-w",
        "randread",
        "-s",
        "1m",
        "-b",
        "4k",
        "--time",
        "500ms",
        "-i",
        "100ms",
    ]);
    let s = &j["summary"];
    let el = s["elapsed_s"].as_f64().unwrap();
    // The deadline is checked after every op (µs on tmpfs); the upper band is wide for a
    // loaded machine that deschedules the job.
    assert!((0.45..10.0).contains(&el), "{el}");
    assert!(s["passes"].as_f64().unwrap() > 1.0);
    let iv = j["intervals"].as_array().unwrap();
    assert!(iv.len() >= 4, "{}", iv.len());
    let sum: u64 = iv.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, s["bytes"].as_u64().unwrap());
    assert!(iv[1]["throughput_bytes_per_s"].as_f64().unwrap() > 0.0);
    assert!(!j["cpu"].as_array().unwrap().is_empty());
    assert!(
        !j["cpu"][0]["cpu"]["per_core"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn auto_matrix_small() {
    let d = Scratch::new(TMPFS, "auto");
    let r = run(&[
        "io",
        "auto",
        d.path(),
        "--min-file",
        "64k",
        "--max-file",
        "1m",
        "--records",
        "4k,64k,1m",
        "--tests",
        "read,write,randread",
        "--json",
    ])
    .ok();
    let j = r.json();
    let s = &j["summary"];
    assert_eq!(
        s["tests"],
        serde_json::json!(["seqwrite", "seqread", "randread"])
    );
    assert_eq!(s["file_sizes_bytes"].as_array().unwrap().len(), 5);
    // 5 files × 2 records (4k, 64k) + the 1m record on the 1m file = 11 cells per test.
    assert_eq!(s["cells"].as_array().unwrap().len(), 33);
    assert!(
        s["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["throughput_bytes_per_s"].as_f64().unwrap() > 0.0)
    );
    assert!(d.leftovers().is_empty());
    let r = run(&[
        "io",
        "auto",
        d.path(),
        "--max-file",
        "256k",
        "--records",
        "4k,64k",
        "--tests",
        "write,read",
        "--iozone-csv",
    ])
    .ok();
    assert!(
        r.stdout.starts_with("Writer report\r\n,4,64\r\n64,"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("\r\nReader report\r\n"));
    let r = run(&[
        "io",
        "auto",
        d.path(),
        "--max-file",
        "128k",
        "--records",
        "4k",
    ])
    .ok();
    assert!(r.stdout.contains("page-cache cliff"), "{}", r.stdout);
    assert!(r.stdout.contains("strideread (MiB/s)"), "{}", r.stdout);
    let r = run(&["io", "auto", d.path(), "--tests", "meta"]);
    assert_eq!(r.code, Some(2));
}

#[test]
fn bonnie_suite_small() {
    let d = Scratch::new(&disk_base(), "bonnie");
    let r = run(&["io", "bonnie", d.path(), "-s", "4m", "-n", "64", "--json"]).ok();
    let j = r.json();
    let rows = j["summary"]["rows"].as_array().unwrap();
    let names: Vec<_> = rows.iter().map(|r| r["test"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "per-char output",
            "block output",
            "rewrite",
            "per-char input",
            "block input",
            "random seeks",
            "metadata"
        ]
    );
    assert!(rows.iter().all(|r| r["ops_per_s"].as_f64().unwrap() > 0.0));
    assert_eq!(rows[6]["phases"].as_array().unwrap().len(), 8);
    assert!(d.leftovers().is_empty());
    let r = run(&["io", "bonnie", d.path(), "-s", "2m", "-n", "16", "-f"]).ok();
    assert!(
        r.stdout.contains("block input") && !r.stdout.contains("per-char"),
        "{}",
        r.stdout
    );
}

/// Issue 14: `--json-stream` means something for `io auto` (a line per cell as it is
/// measured) and `io bonnie` (a line per test as it ends), then the result.
#[test]
fn json_stream_of_auto_and_bonnie() {
    let lines = |out: &str| -> Vec<serde_json::Value> {
        out.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    };
    let d = Scratch::new(TMPFS, "auto-stream");
    let r = run(&[
        "io",
        "auto",
        d.path(),
        "--max-file",
        "256k",
        "--records",
        "4k,64k",
        "--tests",
        "write,read",
        "--json-stream",
    ])
    .ok();
    let ev = lines(&r.stdout);
    let (last, cells) = ev.split_last().unwrap();
    assert_eq!(last["event"], "result");
    let all = last["report"]["summary"]["cells"].as_array().unwrap();
    assert!(!all.is_empty());
    assert_eq!(cells.len(), all.len(), "one line per cell");
    for (line, cell) in cells.iter().zip(all) {
        assert_eq!(line["event"], "cell");
        assert_eq!(&line["cell"], cell);
    }
    let d = Scratch::new(&disk_base(), "bonnie-stream");
    let r = run(&[
        "io",
        "bonnie",
        d.path(),
        "-s",
        "2m",
        "-n",
        "16",
        "-f",
        "--json-stream",
    ])
    .ok();
    let ev = lines(&r.stdout);
    let (last, tests) = ev.split_last().unwrap();
    assert_eq!(last["event"], "result");
    let rows = last["report"]["summary"]["rows"].as_array().unwrap();
    assert_eq!(tests.len(), rows.len(), "one line per test");
    for (line, row) in tests.iter().zip(rows) {
        assert_eq!(line["event"], "test");
        assert_eq!(&line["row"], row);
    }
    assert!(d.leftovers().is_empty());
}
