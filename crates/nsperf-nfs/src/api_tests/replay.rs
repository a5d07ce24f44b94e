//! The replay engine against the embedded server on loopback: every operation it maps, two
//! connections, the counts, bytes, statuses and concurrency it reports, the data landing in
//! the replay's files, and the directory removed afterwards.

use std::time::Duration;

use crate::replay::{self, Call, CallOp, ConnScript, Options, Script, Target, Trigger};
use crate::server::{Server, ServerConfig};
use crate::{NfsUrl, Stable};

const KIB: u32 = 1024;

struct Dir(std::path::PathBuf);
impl Dir {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn chain(ops: &[CallOp]) -> Vec<Call> {
    ops.iter()
        .enumerate()
        .map(|(i, &op)| {
            let trigger = match i {
                0 => Trigger::Start,
                i => Trigger::Reply {
                    index: i - 1,
                    delay_ns: 0,
                },
            };
            Call::new(op, trigger)
        })
        .collect()
}

fn script() -> Script {
    let w = |k: u64| CallOp::Write {
        file: 0,
        offset: k * 64 * 1024,
        count: 64 * KIB,
        stable: Stable::Unstable,
    };
    let r = |k: u64| CallOp::Read {
        file: 1,
        offset: k * 32 * 1024,
        count: 32 * KIB,
    };
    let meta = [
        w(0),
        w(1),
        CallOp::Commit {
            file: 0,
            offset: 0,
            count: 0,
        },
        CallOp::Getattr(Target::File(0)),
        CallOp::Getattr(Target::Dir),
        CallOp::Lookup,
        CallOp::Lookup,
        CallOp::Access(Target::File(1)),
        CallOp::Create,
        CallOp::Remove,
        CallOp::Fsstat(Target::Dir),
        CallOp::Fsinfo(Target::Dir),
        CallOp::Pathconf(Target::Dir),
        CallOp::Readdir,
        CallOp::Readdirplus,
        CallOp::AsGetattr {
            captured: 2,
            target: Target::File(0),
        },
        CallOp::Null,
    ];
    // eight READs, all sent at once but at most 3 in flight
    let reads = (0..8)
        .map(|k| {
            let trigger = if k == 0 {
                Trigger::Start
            } else {
                Trigger::Call {
                    index: k as usize - 1,
                    delay_ns: 0,
                }
            };
            Call::new(r(k), trigger)
        })
        .collect();
    Script {
        files: vec![128 << 10, 256 << 10],
        conns: vec![
            ConnScript {
                start_ns: 0,
                in_flight_max: 1,
                calls: chain(&meta),
            },
            ConnScript {
                start_ns: 2_000_000,
                in_flight_max: 3,
                calls: reads,
            },
        ],
    }
}

#[test]
fn every_mapped_operation_replays_on_two_connections() {
    let d = Dir(std::env::temp_dir().join(format!("nsperf-nfs-replay-{}", std::process::id())));
    std::fs::create_dir_all(d.path()).unwrap();
    let s = Server::bind(&ServerConfig {
        dir: d.path().to_path_buf(),
        bind: "127.0.0.1:0".parse().unwrap(),
        read_only: false,
        portmap_111: false,
    })
    .unwrap();
    let url: NfsUrl = format!("nfs://127.0.0.1:{}{}", s.local_addr().port(), s.export())
        .parse()
        .unwrap();
    let _srv = s.spawn();
    let opt = Options {
        timeout: Duration::from_secs(10),
        keep: true,
        window_bytes: None,
    };
    let sc = script();
    let r = replay::run(&url, &sc, opt).unwrap();
    assert!(r.null_rtt_ns > 0);
    assert_eq!(r.conns.len(), 2);
    let op = |p: u32| r.ops.iter().find(|o| o.proc_ == p).unwrap().clone();
    assert_eq!(op(7).requests, 2, "WRITE");
    assert_eq!(op(21).requests, 1, "COMMIT");
    assert_eq!(op(6).requests, 8, "READ");
    assert_eq!(op(1).requests, 2, "GETATTR");
    assert_eq!(op(3).requests, 2, "LOOKUP");
    let setattr = op(2);
    assert!(setattr.replayed_as_getattr);
    assert_eq!((setattr.requests, setattr.errors), (1, 0));
    for p in [0, 1, 3, 4, 6, 7, 8, 12, 16, 18, 19, 20, 21] {
        assert_eq!(op(p).errors, 0, "procedure {p}: {:?}", op(p));
        assert!(op(p).latency.max_ns > 0);
    }
    // the embedded server has no READDIRPLUS: counted as an error under its status name
    let rdp = op(17);
    assert_eq!(rdp.errors, 1);
    assert_eq!(rdp.error_statuses.get("PROC_UNAVAIL"), Some(&1), "{rdp:?}");
    assert_eq!((r.read_bytes, r.written_bytes), (256 << 10, 128 << 10));
    assert_eq!(r.conns[0].in_flight_max, 1);
    assert_eq!(r.conns[1].in_flight_max, 3);
    // the second connection started 2 ms after the first
    assert!(r.conns[1].first_sent_ns >= 2_000_000, "{:?}", r.conns[1]);
    assert!(r.duration_ns >= r.conns[0].duration_ns.max(r.conns[1].duration_ns));
    // kept: the files with the sizes set up, the written data in them, CREATE's name made,
    // REMOVE's victim gone
    let dir = d.path().join(&r.directory);
    let f0 = std::fs::read(dir.join("f0")).unwrap();
    assert_eq!(f0.len(), 128 << 10);
    assert!(f0.iter().any(|&b| b != 0), "the WRITEs' pattern landed");
    assert_eq!(std::fs::metadata(dir.join("f1")).unwrap().len(), 256 << 10);
    assert!(dir.join("c0-0").exists());
    assert!(!dir.join("r0-0").exists());
    // not kept: nothing left (and at a set window, the calls the same)
    let opt = Options {
        keep: false,
        window_bytes: Some(64 << 10),
        ..opt
    };
    let r2 = replay::run(&url, &sc, opt).unwrap();
    assert_eq!((r2.read_bytes, r2.written_bytes), (256 << 10, 128 << 10));
    assert!(!d.path().join(&r2.directory).exists());
}
