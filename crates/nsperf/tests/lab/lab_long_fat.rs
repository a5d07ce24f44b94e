//! A long fat network (issue 15): 1 Gbit/s at 200 ms RTT holds 25 MB in flight. TCP with
//! buffers of one bandwidth-delay product (forced past `rmem_max`/`wmem_max`, which a
//! child namespace cannot raise; `tcp_rmem`/`tcp_wmem` raised in the test's namespaces)
//! must reach ≥ 90 % of the configured rate, and the emulator's bounded delay lines must
//! hold it all (no overruns). Root only; skipped with a printed reason otherwise.
//!
//! `NSPERF_LFN=RATE,RTT` (e.g. `10g,100ms`) runs the same check at another point, for
//! finding the largest rate × RTT the machine sustains (docs/performance.md).

use crate::common;
use common::lab::{Lab, lab_name, timing_lock};
use common::*;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

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

fn parse(spec: &str) -> (f64, f64) {
    let (r, t) = spec.split_once(',').expect("NSPERF_LFN=RATE,RTT");
    let rate = nsperf_lab::config::parse_rate(r).unwrap().unwrap();
    let rtt = nsperf_lab::config::parse_delay("rtt", t).unwrap() as f64 / 1e9;
    (rate, rtt)
}

#[test]
fn tcp_fills_a_long_fat_network_with_bdp_buffers() {
    let what = "long fat network test";
    if !require_lab(what) {
        return;
    }
    let spec = std::env::var("NSPERF_LFN").unwrap_or_else(|_| "1g,200ms".into());
    let (rate, rtt) = parse(&spec);
    let bdp = rate * rtt / 8.0;
    // One at a time with the other tests of the lab binary (it had a binary of its own).
    let _serial = timing_lock();
    let name = lab_name("lf");
    let lab = Lab(name.clone());
    // A queue of one BDP (it absorbs slow start's last doubling, which sends at twice the
    // rate) and a window of 1.2 BDP: the window, not a loss, limits the flow, and the link
    // stays full.
    let queue = ((bdp / 1514.0) as u64).max(1000).to_string();
    let memory = format!("{}", (bdp * 2.0) as u64 + (256 << 20));
    let (rate_s, rtt_s) = spec.split_once(',').unwrap();
    run(&[
        "lab", "up", &name, "--rate", rate_s, "--rtt", rtt_s, "--queue", &queue, "--memory",
        &memory,
    ])
    .ok();
    let buf = (bdp * 2.5) as i32;
    let clamp = (bdp * 1.2) as i32;
    for site in ["a", "b"] {
        lab.within(site, move || {
            let v = format!("4096 131072 {buf}");
            std::fs::write("/proc/sys/net/ipv4/tcp_rmem", &v).unwrap();
            std::fs::write("/proc/sys/net/ipv4/tcp_wmem", &v).unwrap();
        });
    }
    let listener = lab.within("b", move || {
        let l = TcpListener::bind("10.77.0.2:5100").unwrap();
        set_int(&l, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, buf);
        set_int(&l, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, clamp);
        l
    });
    let stream = lab.within("a", move || {
        let s = TcpStream::connect("10.77.0.2:5100").unwrap();
        set_int(&s, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, buf);
        let cc = b"reno";
        // SAFETY: setsockopt with a valid byte string.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                cc.as_ptr().cast(),
                cc.len() as libc::socklen_t,
            )
        };
        s
    });
    // Slow start needs log2(window / 10 segments) round trips; then measure 4 s.
    let warmup = Duration::from_secs_f64(rtt * ((clamp as f64 / 14480.0).log2() + 4.0) + 1.0);
    let measure = Duration::from_secs(4);
    let total = warmup + measure;
    let sender = std::thread::spawn(move || {
        let mut s = stream;
        let b = vec![0u8; 256 * 1024];
        let t0 = Instant::now();
        while t0.elapsed() < total + Duration::from_secs(1) {
            if s.write_all(&b).is_err() {
                break;
            }
        }
    });
    let (mut conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut b = vec![0u8; 1 << 20];
    let t0 = Instant::now();
    let (mut bytes, mut mark) = (0u64, None);
    while t0.elapsed() < total {
        if let Ok(n) = conn.read(&mut b) {
            bytes += n as u64;
        }
        if mark.is_none() && t0.elapsed() >= warmup {
            mark = Some((Instant::now(), bytes));
        }
    }
    let (tm, bm) = mark.unwrap();
    let got = (bytes - bm) as f64 * 8.0 / tm.elapsed().as_secs_f64();
    let j = run(&["lab", "stats", &name, "--json"]).ok().json();
    drop(conn);
    sender.join().unwrap();
    let s = &j["summary"];
    let c = &s["directions"][0]["counters"];
    eprintln!(
        "{spec}: BDP {:.1} MB, {:.1} Mbit/s payload = {:.1} % of the rate; queue max {} pkts, \
         drops {} queue / {} overrun",
        bdp / 1e6,
        got / 1e6,
        100.0 * got / rate,
        c["queue_max_packets"],
        c["dropped_queue_packets"],
        s["overrun_packets"]
    );
    assert_eq!(s["overrun_packets"], 0, "the delay lines ran out of memory");
    assert!(
        got >= 0.9 * rate,
        "{spec}: {:.1} Mbit/s payload, want >= 90 % of {:.0} Mbit/s",
        got / 1e6,
        rate / 1e6
    );
}
