//! The embedded server closes its side of every connection a client closed: a plan's
//! service serves hundreds of short connections (portmapper, MOUNT, a session and the data
//! connections of every run), and each one it kept would hold a descriptor in CLOSE-WAIT for
//! its whole life. Alone in its process (a child of the
//! unit-test binary), so the process's descriptors are its own.

use super::alone::{alone, test_name};

use std::time::{Duration, Instant};

use crate::server::{Server, ServerConfig};
use crate::{NfsUrl, Session};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

#[test]
fn closed_connections_are_closed_by_the_server_too() {
    // Alone in a process: the process's descriptors are this test's.
    alone(
        &test_name(
            module_path!(),
            "closed_connections_are_closed_by_the_server_too",
        ),
        closed_connections_are_closed_by_the_server_too_body,
    );
}

fn closed_connections_are_closed_by_the_server_too_body() {
    let d = std::env::temp_dir().join(format!("nsperf-nfs-conns-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    struct Dir(std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _dir = Dir(d.clone());
    let s = Server::bind(&ServerConfig {
        dir: d,
        bind: "127.0.0.1:0".parse().unwrap(),
        read_only: false,
        portmap_111: false,
    })
    .unwrap();
    let url: NfsUrl = format!("nfs://127.0.0.1:{}{}", s.local_addr().port(), s.export())
        .parse()
        .unwrap();
    let _srv = s.spawn();
    let before = open_fds();
    // Each session: a MOUNT connection, an NFS connection, and one more for UMNT on drop.
    for _ in 0..20 {
        let s = Session::open(&url, Duration::from_secs(10)).unwrap();
        drop(s);
    }
    // The server's threads see the clients' FINs and end; give them a moment.
    let t0 = Instant::now();
    let mut now = open_fds();
    while now > before + 2 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
        now = open_fds();
    }
    assert!(
        now <= before + 2,
        "{before} descriptors before 20 sessions, {now} after: the server kept the closed ones"
    );
}
