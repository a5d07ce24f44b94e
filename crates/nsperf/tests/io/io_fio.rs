//! fio habits of `nsperf io run` (issue #14 items 4 and 5): fio's workload names and
//! meanings, --numjobs, --direct, --runtime, --ramp_time, --rate/--rate_iops, --verify,
//! read and write latency apart, fio job files, the live status line and --json-stream.

use crate::common;
use common::scratch::*;
use common::*;

#[test]
fn fio_workload_names_mean_what_fio_means() {
    let d = Scratch::new(TMPFS, "fiorw");
    for name in ["rw", "readwrite"] {
        let j = io_json(&[
            d.path(),
            "--rw",
            name,
            "-s",
            "1m",
            "-b",
            "4k",
            "--rwmixread",
            "50",
        ]);
        let s = &j["summary"];
        // Sequential mixed, not random (it was randrw before).
        assert_eq!(s["workload"], "seqrw", "{name}");
        assert_eq!(s["ops"], 256);
        for dir in ["read", "write"] {
            assert!(s[dir]["ops"].as_u64().unwrap() > 30, "{name} {dir}: {s}");
            assert!(s[dir]["latency"]["p50_ns"].as_u64().unwrap() > 0);
            assert!(s[dir]["latency"]["max_ns"].as_u64() >= s[dir]["latency"]["p99_ns"].as_u64());
        }
        assert_eq!(
            s["read"]["ops"].as_u64().unwrap() + s["write"]["ops"].as_u64().unwrap(),
            256
        );
    }
    let j = io_json(&[
        d.path(),
        "--rw",
        "randrw",
        "-s",
        "1m",
        "-b",
        "4k",
        "--rwmixwrite",
        "100",
    ]);
    assert!(j["summary"]["read"].is_null(), "{}", j["summary"]);
    assert_eq!(j["summary"]["write"]["ops"], 256);
    for trim in ["trim", "randtrim", "trimwrite"] {
        let r = run(&["io", "run", d.path(), "--rw", trim]);
        assert_eq!(r.code, Some(2), "{trim}");
        assert!(r.stderr.contains("trim"), "{}", r.stderr);
    }
    // --numjobs, --ioengine, --randseed, --direct are fio's spellings of nsperf's flags.
    let j = io_json(&[
        d.path(),
        "--rw",
        "randread",
        "--numjobs",
        "2",
        "-s",
        "256k",
        "-b",
        "4k",
        "--ioengine",
        "io_uring",
        "--iodepth",
        "4",
        "--randseed",
        "7",
    ]);
    assert_eq!(
        (j["spec"]["jobs"].as_u64(), j["spec"]["seed"].as_u64()),
        (Some(2), Some(7))
    );
    let disk = Scratch::new(&disk_base(), "fiodirect");
    let j = io_json(&[
        disk.path(),
        "--rw",
        "randread",
        "-s",
        "256k",
        "-b",
        "4k",
        "--direct=1",
    ]);
    assert_eq!(j["summary"]["cache"], "direct");
}

#[test]
fn runtime_ramp_and_rate() {
    let d = Scratch::new(TMPFS, "fiotime");
    // --runtime without --time_based caps a size-bound pass; the rate makes sure the size
    // is not done first: 1000 ops/s of 64 MiB in 4 KiB records would take 16 s.
    let j = io_json(&[
        d.path(),
        "--rw",
        "randread",
        "-s",
        "64m",
        "-b",
        "4k",
        "--rate_iops",
        "1000",
        "--runtime",
        "500ms",
    ]);
    let s = &j["summary"];
    let (ops, el) = (s["ops"].as_u64().unwrap(), s["elapsed_s"].as_f64().unwrap());
    assert!((0.45..10.0).contains(&el), "{el}");
    // A rate limit is a ceiling whatever the load: never more than the schedule allows.
    assert!(
        ops > 0 && ops as f64 <= 1000.0 * el + 2.0,
        "{ops} ops in {el} s"
    );
    assert_eq!(j["spec"]["time_based"], false);
    // --rate in bytes per second, reads and writes apart.
    let j = io_json(&[
        d.path(),
        "--rw",
        "randrw",
        "-s",
        "64m",
        "-b",
        "4k",
        "--rate",
        "2m,1m",
        "--runtime",
        "500ms",
    ]);
    let s = &j["summary"];
    let el = s["elapsed_s"].as_f64().unwrap();
    assert!(
        s["read_bytes"].as_f64().unwrap() <= 2.0 * 1048576.0 * el + 8192.0,
        "{s}"
    );
    assert!(
        s["write_bytes"].as_f64().unwrap() <= 1048576.0 * el + 8192.0,
        "{s}"
    );
    assert_eq!(j["spec"]["rate"]["read_bytes_per_s"], 2 << 20);
    // --ramp_time: the warm-up runs first and is not measured.
    let j = io_json(&[
        d.path(),
        "--rw",
        "randread",
        "-s",
        "1m",
        "-b",
        "4k",
        "--runtime",
        "300ms",
        "--time_based",
        "--ramp_time",
        "300ms",
        "-i",
        "100ms",
    ]);
    let s = &j["summary"];
    let el = s["elapsed_s"].as_f64().unwrap();
    assert!((0.29..5.0).contains(&el), "{el}");
    assert_eq!(j["spec"]["ramp_s"], 0.3);
    let iv = j["intervals"].as_array().unwrap();
    let sum: u64 = iv.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, s["bytes"].as_u64().unwrap());
    let r = run(&["io", "run", d.path(), "--time_based"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
}

#[test]
fn verify_checks_every_block_on_every_engine() {
    let d = Scratch::new(TMPFS, "fioverify");
    let cases: [&[&str]; 6] = [
        &["-w", "seqwrite"],
        &["-w", "randwrite", "-e", "uring", "--iodepth", "8"],
        &["-w", "randrw", "-e", "mmap"],
        &["-w", "seqrw"],
        &["-w", "seqread", "-e", "uring", "--iodepth", "4"],
        &["-w", "randwrite", "-j", "2", "--shared-file"],
    ];
    for c in cases {
        let mut a = vec![d.path(), "-s", "1m", "-b", "4k", "--verify", "crc32"];
        a.extend_from_slice(c);
        let j = io_json(&a);
        let v = &j["summary"]["verify"];
        assert_eq!(v["failures"], 0, "{c:?}: {v}");
        // Every block of every job is checked at least once.
        let jobs = j["spec"]["jobs"].as_u64().unwrap();
        assert!(
            v["blocks_checked"].as_u64().unwrap() >= 256 * jobs,
            "{c:?}: {v}"
        );
        assert!(j["findings"].to_string().contains("verify_ok"), "{c:?}");
    }
    // Direct I/O on the disk.
    let disk = Scratch::new(&disk_base(), "fioverifyd");
    let j = io_json(&[
        disk.path(),
        "-s",
        "1m",
        "-b",
        "4k",
        "--verify",
        "crc32",
        "-w",
        "randrw",
        "--cache",
        "direct",
    ]);
    assert_eq!(j["summary"]["verify"]["failures"], 0);
    for bad in [
        &["--verify", "md5"][..],
        &["--verify", "crc32", "-e", "null"],
        &["--verify", "crc32", "-b", "16"],
    ] {
        let mut a = vec!["io", "run", d.path(), "-s", "64k"];
        a.extend_from_slice(bad);
        let r = run(&a);
        assert_eq!(r.code, Some(2), "{bad:?}: {}", r.stderr);
    }
}

#[test]
fn fio_job_file_as_input() {
    let d = Scratch::new(TMPFS, "fiojob");
    let job = d.0.join("mixed.fio");
    std::fs::write(
        &job,
        format!(
            "; from a fio user\n[global]\nioengine=psync\nbs=4k\nsize=1m\ndirectory={}\ninvalidate=0\ngroup_reporting\n\n[mixed]\nrw=randrw\nrwmixread=60\nnumjobs=2\nverify=crc32\n",
            d.path()
        ),
    )
    .unwrap();
    let r = run(&["io", "run", "--job", job.to_str().unwrap(), "--json"]).ok();
    let j = r.json();
    let spec = &j["spec"];
    assert_eq!(spec["workload"], "randrw");
    assert_eq!(
        (spec["jobs"].as_u64(), spec["rwmix_read_pct"].as_u64()),
        (Some(2), Some(60))
    );
    assert_eq!(
        (spec["bs_bytes"].as_u64(), spec["cache"].as_str()),
        (Some(4096), Some("warm"))
    );
    assert_eq!(j["summary"]["verify"]["failures"], 0);
    assert_eq!(j["summary"]["ops"], 512);
    // An option nsperf does not have: one line naming it, exit 3 (input).
    std::fs::write(&job, "[j]\nsize=1m\nioengine=libaio\n").unwrap();
    let r = run(&["io", "run", d.path(), "--job", job.to_str().unwrap()]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(r.stderr.contains("ioengine=libaio"), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    // Flags that describe the run conflict with the file that describes it.
    let r = run(&["io", "run", "--job", job.to_str().unwrap(), "-s", "1m"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let r = run(&["io", "run", "--job", "/no/such.fio"]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(d.leftovers().is_empty());
}

#[test]
fn json_stream_lines_add_up_to_the_result() {
    let d = Scratch::new(TMPFS, "fiostream");
    let r = run(&[
        "io",
        "run",
        d.path(),
        "-w",
        "randread",
        "-s",
        "1m",
        "-b",
        "4k",
        "--runtime",
        "600ms",
        "--time_based",
        "-i",
        "200ms",
        "--json-stream",
    ])
    .ok();
    let lines: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let (last, ivs) = lines.split_last().unwrap();
    assert_eq!(last["event"], "result");
    assert!(ivs.len() >= 2, "{}", r.stdout);
    assert!(ivs.iter().all(|l| l["event"] == "interval"));
    let sum: u64 = ivs.iter().map(|l| l["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, last["report"]["summary"]["bytes"].as_u64().unwrap());
    // Piped (not a terminal): no status line on stderr.
    assert!(!r.stderr.contains('\r'), "{:?}", r.stderr);
}

#[test]
fn status_line_on_a_terminal_only() {
    if !require_program("script", "status line on a terminal (util-linux script)") {
        return;
    }
    let d = Scratch::new(TMPFS, "fiotty");
    let cmd = format!(
        "{} io run {} -w randread -s 1m -b 4k --runtime 1200ms --time_based -i 300ms",
        nsperf_bin(),
        d.path()
    );
    let mut c = std::process::Command::new("script");
    c.args(["-qec", &cmd, "/dev/null"]);
    let r = run_with_limit(c, std::time::Duration::from_secs(60)).ok();
    assert!(r.stdout.contains("IOPS]"), "{:?}", r.stdout);
    assert!(r.stdout.contains("\r\x1b[2K["), "{:?}", r.stdout);
    assert!(r.stdout.contains("nsperf io run: randread"));
    // With --json on a terminal: silent.
    let mut c = std::process::Command::new("script");
    c.args(["-qec", &format!("{cmd} --json"), "/dev/null"]);
    let r = run_with_limit(c, std::time::Duration::from_secs(60)).ok();
    assert!(!r.stdout.contains("IOPS]"), "{:?}", r.stdout);
}
