//! `nsperf io` safety and cache tests: Ctrl-C cleanup, cold vs warm reads (root), a loop
//! device with `--device --destructive` (root), detached afterwards.

use crate::common;
use common::scratch::*;
use common::*;

#[test]
fn sigint_leaves_no_files() {
    let d = Scratch::new(&disk_base(), "sigint");
    let mut cmd = nsperf([
        "io",
        "run",
        d.path(),
        "-w",
        "randrw",
        "-s",
        "32m",
        "-b",
        "4k",
        "--time",
        "30s",
        "--json",
    ]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = KillOnDrop(cmd.spawn().unwrap());
    let t0 = std::time::Instant::now();
    while d.leftovers().is_empty() {
        assert!(t0.elapsed().as_secs() < 20, "no file appeared");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(700));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    let mut child = child;
    let out = std::mem::replace(
        &mut child.0,
        std::process::Command::new("true").spawn().unwrap(),
    )
    .wait_with_output()
    .unwrap();
    assert!(t0.elapsed().as_secs() < 25, "did not stop on SIGINT");
    assert_eq!(out.status.code(), Some(130));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["summary"]["interrupted"], true);
    assert!(j["summary"]["ops"].as_u64().unwrap() > 0);
    assert!(d.leftovers().is_empty(), "{:?}", d.leftovers());
}

/// Cold reads start with the file out of the page cache, warm ones with all of it in. The
/// residency is measured (mincore), not inferred from a throughput that depends on the load
/// of the machine; `--drop-caches` is not used here because its global `sync()` waits for
/// every dirty page of a busy machine (and drops everyone's cache).
#[test]
fn cold_and_warm_reads_start_from_the_cache_state_asked() {
    let d = Scratch::new(&disk_base(), "cold");
    let res = |cache: &str| {
        let j = io_json(&[
            d.path(),
            "-w",
            "seqread",
            "-s",
            "16m",
            "-b",
            "1m",
            "--cache",
            cache,
        ]);
        j["summary"]["cache_resident_pct"].as_f64().unwrap()
    };
    let (warm, cold) = (res("warm"), res("cold"));
    assert!(warm > 99.0 && cold < 1.0, "warm {warm} cold {cold}");
}

/// A loop device on a file, detached on drop.
struct Loop {
    dev: String,
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.dev])
            .status();
    }
}

#[test]
fn loop_device_with_destructive() {
    if !require_root("loop device") || !require_program("losetup", "loop device") {
        return;
    }
    let d = Scratch::new(&disk_base(), "loop");
    let img = d.0.join("disk.img");
    std::fs::write(&img, vec![0u8; 32 << 20]).unwrap();
    let out = std::process::Command::new("losetup")
        .args(["-f", "--show", img.to_str().unwrap()])
        .output()
        .unwrap();
    if !out.status.success() {
        skip(&format!(
            "loop device: losetup failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        return;
    }
    let lo = Loop {
        dev: String::from_utf8_lossy(&out.stdout).trim().to_string(),
    };
    let r = run(&[
        "io", "run", "--device", &lo.dev, "-w", "seqwrite", "-s", "1m", "-b", "64k",
    ]);
    assert_eq!(r.code, Some(10), "{}", r.stderr);
    for (w, cache) in [
        ("seqwrite", "direct"),
        ("randread", "direct"),
        ("seqread", "cold"),
    ] {
        let j = io_json(&[
            "--device",
            &lo.dev,
            "--destructive",
            "-w",
            w,
            "-s",
            "8m",
            "-b",
            "64k",
            "--cache",
            cache,
        ]);
        assert_eq!(j["summary"]["bytes"], 8 << 20, "{w}");
        assert_eq!(j["spec"]["target"]["kind"], "device");
    }
    // The written pattern reached the image (it was zeros before).
    drop(lo);
    let data = std::fs::read(&img).unwrap();
    assert!(data[..1 << 20].iter().any(|&b| b != 0));
    let list = std::process::Command::new("losetup")
        .args(["-j", img.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        list.stdout.is_empty(),
        "still attached: {}",
        String::from_utf8_lossy(&list.stdout)
    );
}
