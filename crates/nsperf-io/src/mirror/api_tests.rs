//! The mirror through `nsperf_io::run`, with a peer in this process on loopback: every
//! protocol, synchronous and queued, sequential and random writes, flushes; the copies
//! compared after the run, and the peer's files checked byte for byte where the run keeps
//! nothing (its local files are removed).

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;

use super::{Protocol, Replicate, peer};
use crate::{FsyncMode, IoReport, RunConfig, Target, Workload};

/// A peer serving `conns` connections into `dir`, on a free loopback port.
fn peer_at(dir: &Path, conns: u64) -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let dir = dir.to_path_buf();
    let t = std::thread::spawn(move || {
        peer::serve(l, &dir, Some(conns), true, Arc::new(|_: &str| {})).unwrap();
    });
    (addr, t)
}

fn mirrored(
    w: Workload,
    p: Protocol,
    depth: u32,
    jobs: u32,
    fsync: FsyncMode,
) -> (IoReport, Vec<u64>) {
    let local = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let (addr, peer) = peer_at(remote.path(), u64::from(jobs));
    let mut c = RunConfig::new(
        Target::Dir {
            path: local.path().to_path_buf(),
        },
        w,
        2 << 20,
        64 << 10,
    );
    c.jobs = jobs;
    c.iodepth = depth;
    c.fsync = fsync;
    c.space_check = false;
    c.replicate = Some(Replicate {
        peer: addr,
        protocol: p,
        max_in_flight_bytes: 256 << 10,
        check: true,
        congestion: None,
        compare: false,
    });
    let rep = crate::run(&c).unwrap();
    peer.join().unwrap();
    let sizes = std::fs::read_dir(remote.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    (rep, sizes)
}

#[test]
fn every_protocol_mirrors_every_write_and_the_copies_are_equal() {
    for p in [Protocol::A, Protocol::B, Protocol::C] {
        for depth in [1, 4] {
            for w in [Workload::SeqWrite, Workload::RandWrite] {
                let (rep, sizes) = mirrored(w, p, depth, 2, FsyncMode::End);
                let f = rep.summary.replication.clone().unwrap();
                let what = format!("{w} protocol {p} depth {depth}");
                assert_eq!(f.protocol, Some(p), "{what}");
                assert_eq!(f.writes, rep.summary.ops, "{what}: every write sent");
                assert_eq!(f.writes, 64, "{what}: 2 jobs x 32 blocks");
                assert_eq!(f.bytes, rep.summary.write_bytes, "{what}");
                assert_eq!(f.copies_equal, Some(true), "{what}");
                assert_eq!(f.flushes, 2, "{what}: one flush per job");
                assert_eq!(sizes, [2 << 20, 2 << 20], "{what}: one copy per job");
                if p == Protocol::C {
                    assert!(f.peer_write_mean_ns > 0.0, "{what}");
                } else {
                    assert_eq!(f.peer_write_mean_ns, 0.0, "{what}");
                }
            }
        }
    }
}

/// A few bytes in flight allowed: the writes wait for room (and still all arrive).
#[test]
fn the_bytes_in_flight_are_bounded() {
    let local = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let (addr, peer) = peer_at(remote.path(), 1);
    let mut c = RunConfig::new(
        Target::Dir {
            path: local.path().to_path_buf(),
        },
        Workload::SeqWrite,
        4 << 20,
        4 << 10,
    );
    c.space_check = false;
    c.fsync = FsyncMode::Each;
    c.replicate = Some(Replicate {
        peer: addr,
        protocol: Protocol::A,
        max_in_flight_bytes: 8 << 10,
        check: true,
        congestion: None,
        compare: false,
    });
    let rep = crate::run(&c).unwrap();
    peer.join().unwrap();
    let f = rep.summary.replication.unwrap();
    assert_eq!((f.writes, f.flushes), (1024, 1024));
    assert_eq!(f.copies_equal, Some(true));
}

#[test]
fn a_peer_that_is_not_there_or_refuses_is_an_error() {
    let local = tempfile::tempdir().unwrap();
    let mut c = RunConfig::new(
        Target::Dir {
            path: local.path().to_path_buf(),
        },
        Workload::SeqWrite,
        1 << 20,
        64 << 10,
    );
    c.space_check = false;
    // A port nothing listens on.
    let free = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    c.replicate = Some(Replicate {
        peer: free.to_string(),
        protocol: Protocol::C,
        max_in_flight_bytes: 1 << 20,
        check: false,
        congestion: None,
        compare: false,
    });
    let e = crate::run(&c).unwrap_err().to_string();
    assert!(e.contains("refused") || e.contains("Connection"), "{e}");
    // A peer whose directory does not exist refuses the hello.
    let gone = local.path().join("no-such-dir");
    let (addr, peer) = peer_at(&gone, 1);
    c.replicate.as_mut().unwrap().peer = addr;
    let e = crate::run(&c).unwrap_err().to_string();
    peer.join().unwrap();
    assert!(e.contains("No such file"), "{e}");
}

#[test]
fn replicate_needs_a_directory_and_a_synchronous_engine() {
    let mut c = RunConfig::new(
        Target::Dir {
            path: "/tmp".into(),
        },
        Workload::SeqWrite,
        1 << 20,
        64 << 10,
    );
    c.replicate = Some(Replicate {
        peer: "127.0.0.1:1".into(),
        protocol: Protocol::A,
        max_in_flight_bytes: 1 << 20,
        check: false,
        congestion: None,
        compare: false,
    });
    c.engine = crate::EngineKind::Uring;
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .contains("psync, mmap or null")
    );
    c.engine = crate::EngineKind::Psync;
    c.iodepth = 8;
    c.validate().unwrap();
    assert_eq!(c.depth(crate::EngineKind::Psync), 8);
    c.replicate.as_mut().unwrap().max_in_flight_bytes = 0;
    assert!(c.validate().is_err());
}
