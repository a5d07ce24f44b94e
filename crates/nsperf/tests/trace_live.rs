//! Root only: capture real transfers with tcpdump across an emulated WAN link (`nsperf lab`)
//! and check the diagnosis: a small receive window is called receiver-window-limited, a lossy
//! link congestion/loss-limited.

mod common;
use common::*;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A lab that is taken down when dropped, with a capture running in site a.
struct LiveLab {
    name: String,
    tcpdump: Option<std::process::Child>,
    dir: PathBuf,
}

impl LiveLab {
    fn up(tag: &str, link: &[&str]) -> LiveLab {
        let name = format!("tr{tag}{}", std::process::id() % 100_000);
        let mut args = vec!["lab", "up", &name];
        args.extend_from_slice(link);
        run(&args).ok();
        let dir = std::env::temp_dir().join(format!("nsperf-trace-live-{name}"));
        let _ = std::fs::create_dir_all(&dir);
        let lab = LiveLab {
            name,
            tcpdump: None,
            dir,
        };
        for site in ["a", "b"] {
            let _ = Command::new("ip")
                .args(["netns", "exec", &lab.ns(site), "ethtool", "-K", "wan0"])
                .args(["gso", "off", "tso", "off", "gro", "off"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        lab
    }

    fn ns(&self, site: &str) -> String {
        format!("nsp-{}-{site}", self.name)
    }

    fn pcap(&self) -> PathBuf {
        self.dir.join("capture.pcap")
    }

    /// Captures in site a while an iperf3 client there sends to a server in site b.
    fn capture_transfer(&mut self, iperf_args: &[&str]) -> PathBuf {
        let server = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns("b"),
                "iperf3",
                "-s",
                "-1",
                "-B",
                "10.77.0.2",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 server");
        let _server = KillOnDrop(server);
        let td = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns("a"),
                "tcpdump",
                "-i",
                "wan0",
                "-s",
                "128",
                "-U",
                "-n",
            ])
            .arg("-w")
            .arg(self.pcap())
            .arg("tcp")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tcpdump");
        let pid = td.id();
        self.tcpdump = Some(td);
        std::thread::sleep(Duration::from_millis(1500));
        let st = Command::new("ip")
            .args(["netns", "exec", &self.ns("a"), "iperf3", "-c", "10.77.0.2"])
            .args(iperf_args)
            .stdout(Stdio::null())
            .status()
            .expect("iperf3 client");
        assert!(st.success(), "iperf3 client failed");
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: signalling our own child process by its pid.
        unsafe {
            libc::kill(pid as i32, libc::SIGINT);
        }
        let _ = self.tcpdump.take().unwrap().wait();
        self.pcap()
    }
}

impl Drop for LiveLab {
    fn drop(&mut self) {
        if let Some(mut t) = self.tcpdump.take() {
            let _ = t.kill();
            let _ = t.wait();
        }
        let _ = run(&["lab", "down", &self.name]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn requirements(what: &str) -> bool {
    require_root(what)
        && require_program("tcpdump", what)
        && require_program("iperf3", what)
        && require_program("ethtool", what)
}

/// The diagnosis of the connection that carried most bytes.
fn bulk_diagnosis(pcap: &std::path::Path) -> serde_json::Value {
    let j = run(&["trace", pcap.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let conns = j["summary"]["connections"].as_array().unwrap().clone();
    let bulk = conns
        .into_iter()
        .max_by_key(|c| c["a_to_b"]["unique_bytes"].as_u64().unwrap())
        .expect("a connection");
    assert!(
        bulk["a_to_b"]["unique_bytes"].as_u64().unwrap() > 100_000,
        "{bulk}"
    );
    bulk
}

#[test]
fn small_receive_window_is_called_receiver_window_limited() {
    if !requirements("live window-limited capture") {
        return;
    }
    let mut lab = LiveLab::up("w", &["--rate", "100mbit", "--rtt", "40ms"]);
    // 8 KiB socket buffers: window ≈ 8 KiB over a 40 ms RTT, far below the link rate.
    let pcap = lab.capture_transfer(&["-t", "3", "-w", "8K"]);
    let c = bulk_diagnosis(&pcap);
    let d = &c["diagnosis"];
    eprintln!("diagnosis: {}", d["message"]);
    assert_eq!(d["limit"], "receiver_window", "{c:#}");
    assert!(d["receiver_window_pct"].as_f64().unwrap() > 50.0, "{d:#}");
    assert!(c["window_scale_known"].as_bool().unwrap());
    let rtt = c["a_to_b"]["rtt"]["median_ns"].as_u64().unwrap();
    assert!(
        (35_000_000..80_000_000).contains(&rtt),
        "RTT {rtt} ns for a 40 ms link"
    );
}

#[test]
fn lossy_link_is_called_congestion_or_loss_limited() {
    if !requirements("live lossy capture") {
        return;
    }
    let mut lab = LiveLab::up("l", &["--rate", "50mbit", "--rtt", "20ms", "--loss", "2%"]);
    let pcap = lab.capture_transfer(&["-t", "4"]);
    let c = bulk_diagnosis(&pcap);
    let d = &c["diagnosis"];
    eprintln!("diagnosis: {}", d["message"]);
    let limit = d["limit"].as_str().unwrap();
    assert!(limit == "loss" || limit == "congestion", "{c:#}");
    assert!(
        c["a_to_b"]["retransmitted_packets"].as_u64().unwrap() > 0,
        "{c:#}"
    );
    assert!(d["mathis_ceiling_bps"].as_f64().is_some(), "{d:#}");
    assert!(d["receiver_window_pct"].as_f64().unwrap() < 20.0, "{d:#}");
}
