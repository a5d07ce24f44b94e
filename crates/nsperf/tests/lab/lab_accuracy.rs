//! Accuracy of the lab's link emulator, measured with real packets between two lab sites
//! (issue 4, "Done when"): one-way delay, TCP throughput with a one-BDP window, Bernoulli
//! loss, jitter without reorder, a 2 s partition, and the window-limit table of WAN
//! replication. Root only (namespaces and TUN devices); skipped with a printed reason.
//!
//! The traffic is plain sockets opened inside the sites' namespaces by threads of this test
//! (no other engine is needed); both ends read the same CLOCK_MONOTONIC, so one-way delay is
//! measured directly. Every lab is removed by a guard, also when an assertion fails.

use crate::common;
use common::lab::{Lab, timing_lock};
use common::*;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A UDP pair across `lab`: (sender in a, connected to b; receiver in b).
fn udp_pair(lab: &Lab) -> (UdpSocket, UdpSocket) {
    let rx = lab.within("b", || {
        let s = UdpSocket::bind("10.77.0.2:7000").unwrap();
        set_int(&s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 32 << 20);
        s
    });
    let tx = lab.within("a", || {
        let s = UdpSocket::bind("10.77.0.1:0").unwrap();
        s.connect("10.77.0.2:7000").unwrap();
        // Report a full device queue (ENOBUFS) instead of dropping silently, so the
        // sender can retry: only the emulator may lose packets in these tests.
        set_int(&s, libc::IPPROTO_IP, libc::IP_RECVERR, 1);
        s
    });
    (tx, rx)
}

fn set_int(s: &impl AsRawFd, level: i32, opt: i32, v: i32) {
    // SAFETY: setsockopt with a valid int.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(
        r,
        0,
        "setsockopt {opt}: {}",
        std::io::Error::last_os_error()
    );
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn ok_to_run(what: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    if !require_lab(what) {
        return None;
    }
    let guard = timing_lock();
    // Measuring threads (and the ones they start) run at nice -20, like the forwarder, so
    // other work on the machine does not end up in the figures.
    // SAFETY: setpriority on this thread's own id.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, -20);
    }
    Some(guard)
}

/// Sends `count` probes (sequence number and send time) paced at `pps`, and returns
/// (sequence, send ns, receive ns) of every probe received within `linger` after the last.
fn probes(
    tx: UdpSocket,
    rx: UdpSocket,
    count: u64,
    pps: u64,
    linger: Duration,
) -> Vec<(u64, u64, u64)> {
    rx.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let sender = std::thread::spawn(move || {
        let start = Instant::now();
        let mut buf = [0u8; 64];
        for seq in 0..count {
            let due = Duration::from_nanos(seq * 1_000_000_000 / pps);
            while start.elapsed() < due {
                if due.saturating_sub(start.elapsed()) > Duration::from_micros(200) {
                    std::thread::sleep(Duration::from_micros(100));
                } else {
                    std::hint::spin_loop();
                }
            }
            buf[..8].copy_from_slice(&seq.to_le_bytes());
            buf[8..16].copy_from_slice(&mono_ns().to_le_bytes());
            while let Err(e) = tx.send(&buf) {
                if e.raw_os_error() != Some(libc::ENOBUFS) {
                    break;
                }
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    });
    let mut got = Vec::with_capacity(count as usize);
    let mut buf = [0u8; 128];
    let mut done_at: Option<Instant> = None;
    loop {
        if sender.is_finished() && done_at.is_none() {
            done_at = Some(Instant::now());
        }
        if done_at.is_some_and(|t| t.elapsed() > linger) {
            break;
        }
        if let Ok(n) = rx.recv(&mut buf)
            && n >= 16
        {
            let now = mono_ns();
            let seq = u64::from_le_bytes(buf[..8].try_into().unwrap());
            let sent = u64::from_le_bytes(buf[8..16].try_into().unwrap());
            got.push((seq, sent, now));
        }
    }
    sender.join().unwrap();
    got
}

/// How late this machine wakes a sleeping thread now (median overshoot of 40 sleeps of
/// 500 µs, at the test's priority): the load's share of any timing figure measured here.
/// A quiet machine gives tens of µs; a machine busy with builds, a millisecond or more.
fn wakeup_lateness_ns() -> f64 {
    let mut late: Vec<f64> = (0..40)
        .map(|_| {
            let t = Instant::now();
            std::thread::sleep(Duration::from_micros(500));
            t.elapsed().as_nanos() as f64 - 500_000.0
        })
        .collect();
    late.sort_by(f64::total_cmp);
    late[late.len() / 2].max(0.0)
}

#[test]
fn delay_is_accurate_at_0_10_50_150_ms() {
    let Some(_serial) = ok_to_run("lab delay accuracy") else {
        return;
    };
    let lab = Lab::up("d", &[]);
    for ms in [0u64, 10, 50, 150] {
        lab.set(&["--delay", &format!("{ms}ms")]);
        // The emulator and the probes wake from sleeps; on a loaded machine each wake-up
        // comes late, so the band widens by the lateness measured now, and a figure outside
        // it is measured again (up to 3 times) before it counts as wrong. A delay that is
        // really off (a wrong unit, a lost timer) stays outside on every try.
        let mut tries = Vec::new();
        let mut passed = false;
        for _ in 0..3 {
            let (tx, rx) = udp_pair(&lab);
            let got = probes(tx, rx, 200, 400, Duration::from_millis(ms + 200));
            assert!(
                got.len() >= 195,
                "{ms} ms: only {} probes came back",
                got.len()
            );
            let mut d: Vec<f64> = got.iter().map(|&(_, s, r)| (r - s) as f64).collect();
            d.sort_by(f64::total_cmp);
            let median = d[d.len() / 2];
            let set = ms as f64 * 1e6;
            // Load makes packets late, never early: no probe may cross in less than the
            // delay, whatever the machine is doing (the emulator once stamped a packet with
            // the time before it read it, and sent it up to 9 ms early under load).
            assert!(
                d[0] >= set,
                "delay {ms} ms: a probe crossed in {:.3} ms, before its delay",
                d[0] / 1e6
            );
            let late = wakeup_lateness_ns();
            let tol = (0.02 * set).max(200_000.0) + 2.0 * late;
            eprintln!(
                "delay {ms} ms: median one-way {:.3} ms (wake-up lateness {:.3} ms, band ±{:.3} ms)",
                median / 1e6,
                late / 1e6,
                tol / 1e6
            );
            passed = (median - set).abs() <= tol;
            tries.push(format!(
                "{:.3} ms (allowed ±{:.3} ms)",
                median / 1e6,
                tol / 1e6
            ));
            if passed {
                break;
            }
        }
        assert!(
            passed,
            "{ms} ms: median one-way delay on 3 tries: {}",
            tries.join(", ")
        );
    }
}

#[test]
fn bernoulli_loss_of_1_percent_within_binomial_interval() {
    let Some(_serial) = ok_to_run("lab loss accuracy") else {
        return;
    };
    // A fixed seed: the check is of the loss model's rate, not a 1-in-100 coin of the CI run.
    let lab = Lab::up("l", &["--loss", "1%", "--seed", "20261126"]);
    let (tx, rx) = udp_pair(&lab);
    // 10 000 packets/s for 10 s. The count is taken where the link starts: the packets the
    // emulator read from site a (on a loaded machine the sending kernel may drop a few
    // before, in the TUN device's ring); the loss is what the receiver did not get of them.
    let got = probes(tx, rx, 102_000, 10_000, Duration::from_millis(300));
    let j = run(&["lab", "stats", &lab.0, "--json"]).ok().json();
    let c = &j["summary"]["directions"][0]["counters"];
    let n = c["offered_packets"].as_u64().unwrap();
    assert!(n >= 100_000, "only {n} packets reached the link");
    let lost = (n - got.len() as u64) as f64;
    // 99 % interval of Binomial(n, 0.01), normal approximation: np ± 2.576 sqrt(np(1-p)).
    let (mean, sd) = (n as f64 * 0.01, (n as f64 * 0.01 * 0.99).sqrt());
    eprintln!(
        "loss: {lost} of {n} (expected {mean:.0} ± {:.0}); the model dropped {}",
        2.576 * sd,
        c["dropped_loss_packets"]
    );
    assert!(
        (lost - mean).abs() <= 2.576 * sd,
        "lost {lost} of {n}: outside the 99 % interval {mean:.0} ± {:.0}",
        2.576 * sd
    );
}

#[test]
fn jitter_without_reorder_keeps_order() {
    let Some(_serial) = ok_to_run("lab jitter test") else {
        return;
    };
    let lab = Lab::up(
        "j",
        &[
            "--delay",
            "10ms",
            "--jitter",
            "4ms",
            "--jitter-dist",
            "normal",
        ],
    );
    let (tx, rx) = udp_pair(&lab);
    let got = probes(tx, rx, 4_000, 2_000, Duration::from_millis(300));
    assert!(got.len() >= 3_990, "only {} arrived", got.len());
    let reordered = got.windows(2).filter(|w| w[1].0 < w[0].0).count();
    assert_eq!(reordered, 0, "jitter reordered {reordered} packets");
    let d: Vec<u64> = got.iter().map(|&(_, s, r)| r - s).collect();
    let (min, max) = (d.iter().min().unwrap(), d.iter().max().unwrap());
    eprintln!(
        "jitter: one-way delay {:.2}..{:.2} ms",
        *min as f64 / 1e6,
        *max as f64 / 1e6
    );
    assert!(max - min > 4_000_000, "no visible jitter: {min}..{max} ns");
}

#[test]
fn partition_of_2_s_forwards_nothing_then_resumes() {
    let Some(_serial) = ok_to_run("lab partition test") else {
        return;
    };
    let sched = std::env::temp_dir().join(format!("nsperf-test-{}.sched", std::process::id()));
    std::fs::write(&sched, "# split brain\n1s down\n3s up\n").unwrap();
    let lab = Lab::up("p", &["--schedule", sched.to_str().unwrap()]);
    let _ = std::fs::remove_file(&sched);
    let (tx, rx) = udp_pair(&lab);
    let got = probes(tx, rx, 4_000, 1_000, Duration::from_millis(100));
    let gap = got.windows(2).map(|w| w[1].2 - w[0].2).max().unwrap();
    let after = got.last().unwrap().0;
    // The schedule's timers and the probes wake from sleeps: the band widens by the
    // wake-up lateness measured now (a loaded machine), never below ±50 ms.
    let tol = 50e6 + 4.0 * wakeup_lateness_ns();
    eprintln!(
        "partition: longest gap {:.1} ms (band ±{:.1} ms)",
        gap as f64 / 1e6,
        tol / 1e6
    );
    assert!(
        (gap as f64 - 2e9).abs() <= tol,
        "longest gap {:.1} ms, expected 2000 ± {:.1} ms",
        gap as f64 / 1e6,
        tol / 1e6
    );
    assert!(
        after >= 3_990,
        "traffic did not resume (last probe {after})"
    );
    let j = run(&["lab", "stats", &lab.0, "--json"]).ok().json();
    let ev = j["summary"]["events"].as_array().unwrap();
    let down = ev
        .iter()
        .find(|e| e["text"] == "1s down")
        .expect("down logged");
    let up = ev.iter().find(|e| e["text"] == "3s up").expect("up logged");
    let span = up["t_s"].as_f64().unwrap() - down["t_s"].as_f64().unwrap();
    assert!((span - 2.0).abs() < 0.02, "logged partition {span} s");
}

/// Payload throughput (bit/s) of one TCP transfer a → b, counted from `warmup` for
/// `measure`. `window` 65535 is the classic 64 KiB window: the receiving site turns TCP
/// window scaling off (a per-namespace sysctl), as on a host without RFC 7323 scaling.
/// Any other window is the receiver's window clamp (TCP_WINDOW_CLAMP) on a large buffer.
fn tcp_throughput(lab: &Lab, port: u16, window: i32, warmup: Duration, measure: Duration) -> f64 {
    let scaling = if window <= 65_535 { "0" } else { "1" };
    let listener = lab.within("b", move || {
        std::fs::write("/proc/sys/net/ipv4/tcp_window_scaling", scaling).unwrap();
        let l = TcpListener::bind(("10.77.0.2", port)).unwrap();
        set_int(&l, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20);
        set_int(&l, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, window);
        l
    });
    let total = warmup + measure;
    let sender = {
        let s = lab.within("a", move || {
            let s = TcpStream::connect(("10.77.0.2", port)).unwrap();
            set_int(&s, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 8 << 20);
            // Reno: slow start runs until the window clamp (CUBIC's HyStart may leave it
            // early on a loaded machine, and then takes seconds to reach one BDP at 150 ms).
            let cc = b"reno";
            // SAFETY: setsockopt with a valid byte string.
            let r = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_CONGESTION,
                    cc.as_ptr().cast(),
                    cc.len() as libc::socklen_t,
                )
            };
            assert_eq!(r, 0, "TCP_CONGESTION reno");
            s
        });
        std::thread::spawn(move || {
            let mut s = s;
            let buf = vec![0u8; 64 * 1024];
            let t0 = Instant::now();
            while t0.elapsed() < total + Duration::from_millis(200) {
                if s.write_all(&buf).is_err() {
                    break;
                }
            }
        })
    };
    let (mut conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let t0 = Instant::now();
    let mut bytes = 0u64;
    let mut at_warmup: Option<(Instant, u64)> = None;
    while t0.elapsed() < total {
        if let Ok(n) = conn.read(&mut buf) {
            bytes += n as u64;
        }
        if at_warmup.is_none() && t0.elapsed() >= warmup {
            at_warmup = Some((Instant::now(), bytes));
        }
    }
    let (tw, bw) = at_warmup.unwrap();
    let rate = (bytes - bw) as f64 * 8.0 / tw.elapsed().as_secs_f64();
    drop(conn);
    sender.join().unwrap();
    rate
}

/// The window-limit table of WAN replication at one RTT: 45 Mbit/s, a 64 KiB window vs a
/// window of one bandwidth-delay product.
fn window_table_row(rtt_ms: u64, tag: &str) {
    let rate = 45e6;
    let rtt = rtt_ms as f64 / 1e3;
    let lab = Lab::up(tag, &["--rate", "45mbit", "--rtt", &format!("{rtt_ms}ms")]);
    let warmup = Duration::from_millis(800 + 12 * rtt_ms);
    let measure = Duration::from_millis(2000);
    let small = 65_535;
    let bdp = ((rate * rtt / 8.0) as i32).max(small);
    let limit = if rtt > 0.0 {
        small as f64 * 8.0 / rtt
    } else {
        f64::INFINITY
    };
    let need = if rtt_ms == 50 { 0.93 } else { 0.85 };
    // Each case gets a second attempt: a stalled receiver thread on a loaded machine only
    // ever lowers a run's throughput, and the 64 KiB runs cannot exceed window / RTT.
    let mut port = 5000;
    let mut run_case = |window: i32, ok: &dyn Fn(f64) -> bool| -> (f64, bool) {
        let mut best = 0.0f64;
        for _ in 0..2 {
            port += 1;
            let t = tcp_throughput(&lab, port, window, warmup, measure);
            eprintln!(
                "RTT {rtt_ms:>3} ms, window {window} B: {:.2} Mbit/s (window/RTT {:.2})",
                t / 1e6,
                limit.min(1e12) / 1e6
            );
            if ok(t) {
                return (t, true);
            }
            best = best.max(t);
        }
        (best, false)
    };
    let (t_small, ok_small) = run_case(small, &|t| {
        if limit < rate {
            (t - limit).abs() <= 0.15 * limit
        } else {
            t >= 0.85 * rate
        }
    });
    let (t_bdp, ok_bdp) = run_case(bdp, &|t| t >= need * rate);
    assert!(
        ok_small,
        "RTT {rtt_ms} ms, 64 KiB window: {:.2} Mbit/s, expected {} ",
        t_small / 1e6,
        if limit < rate {
            format!("{:.2} Mbit/s ± 15 %", limit / 1e6)
        } else {
            ">= 85 % of 45 Mbit/s".into()
        }
    );
    assert!(
        ok_bdp,
        "RTT {rtt_ms} ms, BDP window: {:.2} Mbit/s, expected >= {:.0} % of 45 Mbit/s",
        t_bdp / 1e6,
        need * 100.0
    );
}

#[test]
fn window_limit_table_rtt_0() {
    if let Some(_serial) = ok_to_run("lab window-limit table") {
        window_table_row(0, "wra");
    }
}

/// Also the "≥ 93 % of 45 Mbit/s with a one-BDP window" check of the issue.
#[test]
fn window_limit_table_rtt_50() {
    if let Some(_serial) = ok_to_run("lab window-limit table") {
        window_table_row(50, "wrb");
    }
}

#[test]
fn window_limit_table_rtt_100() {
    if let Some(_serial) = ok_to_run("lab window-limit table") {
        window_table_row(100, "wrc");
    }
}

#[test]
fn window_limit_table_rtt_150() {
    if let Some(_serial) = ok_to_run("lab window-limit table") {
        window_table_row(150, "wrd");
    }
}

#[test]
fn jumbo_mtu_9000_carries_9000_byte_packets() {
    if !require_program("ping", "lab MTU test") {
        return;
    }
    let Some(_serial) = ok_to_run("lab MTU test") else {
        return;
    };
    let lab = Lab::up("m", &["--mtu", "9000"]);
    let r = run(&[
        "lab",
        "exec",
        &lab.0,
        "a",
        "--",
        "ping",
        "-c",
        "2",
        "-i",
        "0.2",
        "-W",
        "2",
        "-M",
        "do",
        "-s",
        "8972",
        "10.77.0.2",
    ]);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("8980 bytes from 10.77.0.2"),
        "{}",
        r.stdout
    );
}
