//! The workload and the model on synthetic streams whose answers are computable by hand.

use super::model::{self, Bound, Conditions};
use super::*;
use crate::proto::requests::{Op, Outcome, Request, RequestConn};

const MS: i64 = 1_000_000;
const US: i64 = 1_000;
const MIB: u32 = 1 << 20;
/// Bytes of a READ call and of a READ reply's header (before its data), about NFSv3's.
const CALL: u64 = 140;
const REPLY_HEAD: u64 = 120;

fn read(i: u64, call: i64, reply_first: i64, reply_last: i64) -> Request {
    Request {
        conn: 1,
        client: 0,
        op: Op::nfs3(6),
        outcome: Outcome::Ok,
        call_first_ns: call,
        call_last_ns: call,
        reply_first_ns: reply_first,
        reply_last_ns: reply_last,
        file: 42,
        offset: i * u64::from(MIB),
        count: MIB,
        stable: None,
        call_bytes: CALL,
        reply_bytes: u64::from(MIB) + REPLY_HEAD,
    }
}

/// Captured at the client on a 1 ms path: the server's round trip 1 ms, the client's 0.
fn conn(window: Option<u64>) -> RequestConn {
    RequestConn {
        id: 1,
        a: "10.0.0.1:800".into(),
        b: "10.0.0.2:2049".into(),
        rtt_a_ns: 0,
        rtt_b_ns: MS as u64,
        window_a_bytes: window,
        window_b_bytes: window,
    }
}

/// 100 dependent 1 MiB READs: 1 ms RTT, 1 ms service, the reply passing in `pass`, the
/// next call `think` after the reply.
fn dependent_reads(pass: i64, think: i64) -> Vec<Request> {
    let mut t = 0;
    (0..100)
        .map(|i| {
            let r = read(i, t, t + 2 * MS, t + 2 * MS + pass);
            t = r.reply_last_ns + think;
            r
        })
        .collect()
}

/// 100 1 MiB READs four at a time: each round's four calls 1 µs apart, their replies all
/// in 2 ms later (1 ms RTT, 1 ms service), the next round right after the last reply.
fn rounds_of_four() -> Vec<Request> {
    let mut t = 0;
    let mut v = Vec::new();
    for round in 0..25 {
        for k in 0..4 {
            let c = t + k * US;
            v.push(read(round * 4 + k as u64, c, c + 2 * MS, c + 2 * MS));
        }
        t += 2 * MS + 3 * US;
    }
    v
}

fn one(requests: &[Request], window: Option<u64>) -> Workload {
    let mut w = workloads(requests, &[conn(window)]);
    assert_eq!(w.len(), 1);
    w.remove(0)
}

#[test]
fn dependent_chain_extracted() {
    let w = one(&dependent_reads(MS, MS / 2), None);
    assert_eq!(w.steps.len(), 100);
    assert_eq!((w.in_flight_max(), w.in_flight_mean()), (1, 1.0));
    assert_eq!(w.dependent(), 99);
    assert_eq!(w.think_mean_ns(), (MS / 2) as f64);
    assert_eq!((w.rtt_client_ns, w.rtt_server_ns), (0, MS));
    assert!(w.steps.iter().all(|s| s.service_ns == MS));
    assert_eq!(w.ops.len(), 1);
    let o = &w.ops[0];
    assert_eq!((o.op.as_str(), o.requests, o.errors), ("nfs3:READ", 100, 0));
    assert_eq!(o.data_bytes, 100 * u64::from(MIB));
    assert_eq!((o.service_mean_ms, o.service_max_ms), (1.0, 1.0));
    assert_eq!(w.data_bytes(), (100 * u64::from(MIB), 0));
    assert_eq!(w.file_count, 1);
    assert_eq!(w.files[0].extent_bytes, 100 * u64::from(MIB));
    assert_eq!(w.files[0].read_bytes, 100 * u64::from(MIB));
    // captured: 100 × (2 ms + 1 ms pass) + 99 × 0.5 ms think
    assert_eq!(w.captured_ns(), 100 * 3 * MS + 99 * MS / 2);
}

#[test]
fn concurrency_extracted() {
    let w = one(&rounds_of_four(), None);
    assert_eq!(w.in_flight_max(), 4);
    assert_eq!(w.in_flight_mean(), 2.5);
    // each round's first call waited for the last reply with nothing outstanding
    assert_eq!(w.dependent(), 24);
    assert!(matches!(w.steps[1].trigger, Trigger::Call { index: 0, delay_ns } if delay_ns == US));
    // the next round's first call: after the first reply of the round before (the one
    // that freed a slot), 3 µs later
    assert_eq!(
        w.steps[4].trigger,
        Trigger::Reply {
            index: 0,
            delay_ns: 3 * US,
            dependent: true
        }
    );
    // its think time: from the last reply (no gap)
    assert_eq!(w.steps[4].think_ns, Some(0));
}

/// The hand computation of the brief: 100 dependent 1 MiB READs, 1 ms service, at 50 ms
/// RTT and 100 Mbit/s: each costs its call's and its reply's serialisation (headers of 66
/// bytes per 1448-byte segment on the wire), 50 ms and 1 ms; think time 0.
#[test]
fn dependent_reads_at_50ms_and_100mbit_by_hand() {
    let w = one(&dependent_reads(MS, 0), None);
    let c = Conditions {
        rtt_ns: 50 * MS,
        rate_bps: Some(100e6),
        call_window: None,
        reply_window: None,
        initial_window: None,
    };
    let wire = |n: u64| (n + n.div_ceil(1448) * 66) as f64 * 8.0 / 100e6 * 1e9;
    let per = wire(CALL) + wire(u64::from(MIB) + REPLY_HEAD) + 51e6;
    let got = model::predict(&w.steps, &c) as f64;
    assert!(
        (got - 100.0 * per).abs() < 100.0,
        "{got} vs {}",
        100.0 * per
    );
    // about 13.9 s: 87.7 ms of serialisation, 50 ms RTT, 1 ms service each
    assert!((13.8e9..13.95e9).contains(&got), "{got}");
    // a 256 KiB window: the reply (1 MiB and 120 bytes) takes 4 round trips more, its
    // last 120 bytes after them
    let c = Conditions {
        reply_window: Some(256 * 1024),
        ..c
    };
    let per = wire(CALL) + 4.0 * 50e6 + wire(REPLY_HEAD) + 51e6;
    let got = model::predict(&w.steps, &c) as f64;
    assert!(
        (got - 100.0 * per).abs() < 100.0,
        "{got} vs {}",
        100.0 * per
    );
    // a window of 2 MiB holds a reply whole: no round trip more
    let c = Conditions {
        reply_window: Some(2 << 20),
        ..c
    };
    let got = model::predict(&w.steps, &c) as f64;
    let per = wire(CALL) + wire(u64::from(MIB) + REPLY_HEAD) + 51e6;
    assert!(
        (got - 100.0 * per).abs() < 100.0,
        "{got} vs {}",
        100.0 * per
    );
}

/// At the capture's own conditions the model gives the captured duration back.
#[test]
fn captured_conditions_give_the_captured_duration() {
    for reqs in [
        dependent_reads(MS, MS / 2),
        dependent_reads(0, 0),
        rounds_of_four(),
    ] {
        let w = one(&reqs, None);
        let got = model::predict(&w.steps, &Conditions::captured(&w));
        assert_eq!(got, w.captured_ns());
    }
}

/// Four in flight at 50 ms, transfers as captured (instant): 25 rounds of 3 µs of calls,
/// 50 ms and 1 ms; with 100 Mbit/s the link carries the 100 MiB one after the other.
#[test]
fn concurrency_bounds_and_the_link_shares() {
    let w = one(&rounds_of_four(), None);
    let c = Conditions {
        rtt_ns: 50 * MS,
        rate_bps: None,
        call_window: None,
        reply_window: None,
        initial_window: None,
    };
    assert_eq!(model::predict(&w.steps, &c), 25 * (3 * US + 51 * MS));
    let c = Conditions {
        rate_bps: Some(100e6),
        ..c
    };
    // the next round's calls go as the first replies come in (four slots): the link is
    // busy from the first reply on, the 100 replies one after the other
    let wire = |n: u64| (n + n.div_ceil(1448) * 66) as f64 * 8.0 / 100e6 * 1e9;
    let want = wire(CALL) + 51e6 + 100.0 * wire(u64::from(MIB) + REPLY_HEAD);
    let got = model::predict(&w.steps, &c) as f64;
    assert!((got - want).abs() < 100.0, "{got} vs {want}");
}

/// Four 1 MiB replies in flight at 50 ms: a window of 5 MiB holds them all (the rounds as
/// without a window); one of 2 MiB holds one (each reply is 120 bytes over 1 MiB): a reply
/// every round trip from the first on.
#[test]
fn window_bounds_the_bytes_in_flight() {
    let w = one(&rounds_of_four(), None);
    let c = |win: u64| Conditions {
        rtt_ns: 50 * MS,
        rate_bps: None,
        call_window: None,
        reply_window: Some(win),
        initial_window: None,
    };
    assert_eq!(
        model::predict(&w.steps, &c(5 << 20)),
        25 * (3 * US + 51 * MS)
    );
    assert_eq!(
        model::predict(&w.steps, &c(2 << 20)),
        51 * MS + 99 * 50 * MS
    );
}

/// The table: server-bound at no RTT, latency-bound from the RTT where 100 round trips
/// outweigh 100 ms of service.
#[test]
fn table_marks_where_latency_takes_over() {
    let w = one(&dependent_reads(MS / 10, MS / 10), None);
    let t = model::table(&w, &[0.0, 0.5, 2.0, 5.0], None, None);
    let bounds: Vec<Bound> = t.iter().map(|p| p.bound).collect();
    assert_eq!(
        bounds,
        [Bound::Server, Bound::Server, Bound::Latency, Bound::Latency]
    );
    assert_eq!(model::latency_bound_from(&t), Some(2.0));
    for p in &t {
        let sum = p.latency_s + p.link_s + p.server_s + p.client_s;
        assert!((sum - p.duration_s).abs() < 1e-9, "{p:?}");
        let bytes = 100.0 * f64::from(MIB) * 8.0;
        assert!((p.throughput_bps - bytes / p.duration_s).abs() < 1e-3);
    }
    // 100 × (0.1 ms pass + 1 ms service) + 99 × 0.1 ms think at no RTT
    assert!(
        (t[0].duration_s - 0.1199).abs() < 1e-9,
        "{}",
        t[0].duration_s
    );
    assert!((t[0].server_s - 0.1).abs() < 1e-9);
}

#[test]
fn connections_apart_and_empty() {
    let mut reqs = dependent_reads(MS, 0);
    for r in reqs.iter_mut().skip(50) {
        r.conn = 2;
    }
    let w = workloads(&reqs, &[conn(None)]);
    assert_eq!(w.len(), 2);
    assert_eq!((w[0].steps.len(), w[1].steps.len()), (50, 50));
    // the second connection is unknown to the list: no round trips known
    assert_eq!(w[1].rtt_server_ns, 0);
    assert!(workloads(&[], &[]).is_empty());
    assert_eq!(model::predict(&[], &Conditions::captured(&w[0])), 0);
}

/// The script of a mixed NFSv3 stream: the files with their extents, each operation
/// mapped, the triggers and the most in flight as extracted, and a second connection
/// starting as late as it did.
#[test]
fn a_workload_becomes_the_replay_script() {
    use nsperf_nfs::Stable;
    use nsperf_nfs::replay::{CallOp, Target, Trigger as Rt};
    let req = |code: u16, file: u64, offset: u64, count: u32, t: i64| Request {
        op: Op::nfs3(code),
        file,
        offset,
        count,
        stable: (code == 7).then_some(Stable::Unstable),
        call_bytes: CALL,
        reply_bytes: REPLY_HEAD,
        ..read(0, t, t + MS, t + MS)
    };
    let dir = 9;
    let mut rs = vec![
        req(3, dir, 0, 0, 0),                       // LOOKUP in a directory
        req(7, 42, 0, MIB, 2 * MS),                 // WRITE 1 MiB to file 42
        req(7, 42, u64::from(MIB), 8, 2 * MS + 10), // pipelined behind it
        req(21, 42, 0, 0, 4 * MS),                  // COMMIT
        req(1, 42, 0, 0, 6 * MS),                   // GETATTR of the file
        req(1, dir, 0, 0, 8 * MS),                  // GETATTR of the directory
        req(2, 42, 0, 0, 10 * MS),                  // SETATTR: replayed as GETATTR
        req(16, dir, 0, 0, 12 * MS),                // READDIR
    ];
    let mut other = req(6, 77, 4096, 4096, 5 * MS); // READ of another file, elsewhere
    other.conn = 2;
    rs.push(other);
    let mut c2 = conn(None);
    c2.id = 2;
    let ws = workloads(&rs, &[conn(None), c2]);
    let s = script::script(&ws).unwrap();
    assert_eq!(s.files, [u64::from(MIB) + 8, 8192]);
    assert_eq!(s.conns.len(), 2);
    let c = &s.conns[0];
    assert_eq!((c.start_ns, c.in_flight_max), (0, 2));
    let ops: Vec<CallOp> = c.calls.iter().map(|x| x.op).collect();
    assert_eq!(
        ops,
        [
            CallOp::Lookup,
            CallOp::Write {
                file: 0,
                offset: 0,
                count: MIB,
                stable: Stable::Unstable
            },
            CallOp::Write {
                file: 0,
                offset: u64::from(MIB),
                count: 8,
                stable: Stable::Unstable
            },
            CallOp::Commit {
                file: 0,
                offset: 0,
                count: 0
            },
            CallOp::Getattr(Target::File(0)),
            CallOp::Getattr(Target::Dir),
            CallOp::AsGetattr {
                captured: 2,
                target: Target::File(0)
            },
            CallOp::Readdir,
        ]
    );
    assert_eq!(c.calls[0].trigger, Rt::Start);
    assert_eq!(
        c.calls[2].trigger,
        Rt::Call {
            index: 1,
            delay_ns: 10
        }
    );
    // the COMMIT waited for the WRITEs' replies: the first of them freed it
    assert!(matches!(c.calls[3].trigger, Rt::Reply { index: 1, .. }));
    assert_eq!(s.conns[1].start_ns, 5 * MS as u64);
    assert_eq!(
        s.conns[1].calls[0].op,
        CallOp::Read {
            file: 1,
            offset: 4096,
            count: 4096
        }
    );
    // the captured procedure each call is counted under
    let counted: Vec<u32> = c.calls.iter().map(|x| x.captured).collect();
    assert_eq!(counted, [3, 7, 7, 21, 1, 1, 2, 16]);
    // SMB: no NFS script (its own: smb_script); NFSv3 and NFSv4 together: not in one replay
    let mut smb = rs[0];
    smb.op = "smb2:READ".parse().unwrap();
    assert_eq!(
        script::script(&workloads(&[smb], &[conn(None)])).unwrap_err(),
        script::NotReplayable::Protocol(crate::proto::requests::Protocol::Smb2)
    );
    let mut v4 = rs[1];
    v4.op = "nfs4:READ".parse().unwrap();
    assert_eq!(
        script::script(&workloads(&[rs[0], v4], &[conn(None)])).unwrap_err(),
        script::NotReplayable::Mixed
    );
}

/// An SMB2 stream as the SMB replay's script: one file per FileId hash in order of first
/// use, sized to its READs' and WRITEs' extent; READ, WRITE, FLUSH, QUERY_INFO, CREATE and
/// CLOSE as themselves (a refused CREATE, with no FileId, opens no file of the replay),
/// NEGOTIATE, IOCTL and a command naming no file as an ECHO; each counted under the
/// captured command; the triggers and most in flight as captured; an NFS capture gives no
/// SMB script.
#[test]
fn an_smb2_workload_becomes_the_replay_script() {
    use nsperf_smb::replay::{CallOp, Trigger as Rt};
    let req = |cmd: &str, file: u64, offset: u64, count: u32, t: i64| Request {
        op: format!("smb2:{cmd}").parse().unwrap(),
        file,
        offset,
        count,
        stable: None,
        call_bytes: CALL,
        reply_bytes: REPLY_HEAD,
        ..read(0, t, t + MS, t + MS)
    };
    let rs = vec![
        req("NEGOTIATE", 0, 0, 0, 0),
        req("CREATE", 5, 0, 0, 2 * MS),           // opens file 5
        req("WRITE", 5, 0, MIB, 4 * MS),          // 1 MiB
        req("READ", 5, 65536, 4096, 4 * MS + 10), // pipelined behind it
        req("FLUSH", 5, 0, 0, 6 * MS),
        req("QUERY_INFO", 5, 0, 0, 8 * MS),
        req("IOCTL", 5, 0, 0, 10 * MS),
        req("CLOSE", 5, 0, 0, 12 * MS),
        req("CREATE", 0, 0, 0, 14 * MS), // refused: no FileId
        req("READ", 6, 8192, 100, 16 * MS),
        req("FLUSH", 0, 0, 0, 18 * MS),
    ];
    let ws = workloads(&rs, &[conn(None)]);
    assert_eq!(
        script::protocol(&ws),
        Ok(crate::proto::requests::Protocol::Smb2)
    );
    let s = script::smb_script(&ws).unwrap();
    assert_eq!(s.files, [u64::from(MIB), 8292]);
    assert_eq!(s.conns.len(), 1);
    let c = &s.conns[0];
    assert_eq!((c.start_ns, c.in_flight_max), (0, 2));
    let ops: Vec<CallOp> = c.calls.iter().map(|x| x.op).collect();
    assert_eq!(
        ops,
        [
            CallOp::Echo,
            CallOp::Create { file: Some(0) },
            CallOp::Write {
                file: 0,
                offset: 0,
                count: MIB
            },
            CallOp::Read {
                file: 0,
                offset: 65536,
                count: 4096
            },
            CallOp::Flush { file: 0 },
            CallOp::QueryInfo { file: 0 },
            CallOp::Echo,
            CallOp::Close { file: 0 },
            CallOp::Create { file: None },
            CallOp::Read {
                file: 1,
                offset: 8192,
                count: 100
            },
            CallOp::Echo,
        ]
    );
    let counted: Vec<u16> = c.calls.iter().map(|x| x.captured).collect();
    assert_eq!(counted, [0, 5, 9, 8, 7, 16, 11, 6, 5, 8, 7]);
    assert_eq!(c.calls[0].trigger, Rt::Start);
    assert_eq!(
        c.calls[3].trigger,
        Rt::Call {
            index: 2,
            delay_ns: 10
        }
    );
    assert!(matches!(c.calls[4].trigger, Rt::Reply { index: 2, .. }));
    // an NFS capture: no SMB script; SMB2 and NFS together: not in one replay
    let nfs = read(0, 0, MS, MS);
    assert_eq!(
        script::smb_script(&workloads(&[nfs], &[conn(None)])).unwrap_err(),
        script::NotReplayable::Protocol(crate::proto::requests::Protocol::Nfs3)
    );
    assert_eq!(
        script::smb_script(&workloads(&[rs[2], nfs], &[conn(None)])).unwrap_err(),
        script::NotReplayable::Mixed
    );
}

/// An NFSv4 stream (COMPOUNDs' main operations) as a script: OPEN in the directory a LOOKUP
/// of a replay file, WRITE (its `stable_how` kept), COMMIT and READ on the PUTFH's file,
/// CLOSE and the session's operations a GETATTR, ACCESS, LOOKUP, READDIR, REMOVE, CREATE
/// as their like; every call counted under the captured operation's number; the file's
/// extent from its WRITEs and READ; the triggers and the most in flight as for NFSv3.
#[test]
fn an_nfs4_workload_becomes_the_replay_script() {
    use nsperf_nfs::Stable;
    use nsperf_nfs::replay::{CallOp, Target, Trigger as Rt};
    let req = |op: &str, file: u64, offset: u64, count: u32, t: i64| Request {
        op: op.parse().unwrap(),
        file,
        offset,
        count,
        stable: (op == "nfs4:WRITE").then_some(Stable::Unstable),
        call_bytes: CALL,
        reply_bytes: REPLY_HEAD,
        ..read(0, t, t + MS, t + MS)
    };
    let (dir, f) = (9, 42);
    let rs = vec![
        req("nfs4:EXCHANGE_ID", 0, 0, 0, 0),
        req("nfs4:OPEN", dir, 0, 0, 2 * MS),
        req("nfs4:WRITE", f, 0, 65536, 4 * MS),
        req("nfs4:WRITE", f, 65536, 65536, 4 * MS + 10), // pipelined behind it
        req("nfs4:COMMIT", f, 0, 0, 6 * MS),
        req("nfs4:READ", f, 131_072, 4096, 8 * MS),
        req("nfs4:CLOSE", f, 0, 0, 10 * MS),
        req("nfs4:GETATTR", f, 0, 0, 12 * MS),
        req("nfs4:ACCESS", dir, 0, 0, 14 * MS),
        req("nfs4:LOOKUP", dir, 0, 0, 16 * MS),
        req("nfs4:READDIR", dir, 0, 0, 18 * MS),
        req("nfs4:REMOVE", dir, 0, 0, 20 * MS),
        req("nfs4:CREATE", dir, 0, 0, 22 * MS),
    ];
    let ws = workloads(&rs, &[conn(None)]);
    let s = script::script(&ws).unwrap();
    assert_eq!(s.files, [131_072 + 4096]);
    let c = &s.conns[0];
    assert_eq!((c.start_ns, c.in_flight_max), (0, 2));
    let ops: Vec<CallOp> = c.calls.iter().map(|x| x.op).collect();
    let file = Target::File(0);
    assert_eq!(
        ops,
        [
            CallOp::AsGetattr {
                captured: 42,
                target: Target::Dir
            },
            CallOp::Lookup,
            CallOp::Write {
                file: 0,
                offset: 0,
                count: 65536,
                stable: Stable::Unstable
            },
            CallOp::Write {
                file: 0,
                offset: 65536,
                count: 65536,
                stable: Stable::Unstable
            },
            CallOp::Commit {
                file: 0,
                offset: 0,
                count: 0
            },
            CallOp::Read {
                file: 0,
                offset: 131_072,
                count: 4096
            },
            CallOp::AsGetattr {
                captured: 4,
                target: file
            },
            CallOp::Getattr(file),
            CallOp::Access(Target::Dir),
            CallOp::Lookup,
            CallOp::Readdir,
            CallOp::Remove,
            CallOp::Create,
        ]
    );
    let counted: Vec<u32> = c.calls.iter().map(|x| x.captured).collect();
    assert_eq!(counted, [42, 18, 38, 38, 5, 25, 4, 9, 3, 15, 26, 28, 6]);
    assert_eq!(c.calls[0].trigger, Rt::Start);
    assert_eq!(
        c.calls[3].trigger,
        Rt::Call {
            index: 2,
            delay_ns: 10
        }
    );
    assert!(matches!(c.calls[4].trigger, Rt::Reply { index: 2, .. }));
}

/// Slow start by hand: 100 dependent 1 MiB READs at 50 ms, transfers instant, no receive
/// window, a fresh connection's 10-segment congestion window. The first reply (1 MiB and
/// 120 bytes) takes 7 rounds (14 480 × (2⁷ − 1) bytes cover it): 6 round trips more; the
/// window has grown past a reply by the next, which takes none. With 1 s of think time
/// before each call (4 timeouts of 250 ms idle) the window is halved four times: each reply
/// after the first takes 4 round trips more (66 448 × (2⁴ − 1) < 1 MiB ≤ 66 448 × (2⁵ − 1)).
#[test]
fn slow_start_by_hand() {
    let c = Conditions {
        rtt_ns: 50 * MS,
        rate_bps: None,
        call_window: None,
        reply_window: None,
        initial_window: Some(model::INITIAL_WINDOW),
    };
    assert_eq!(model::INITIAL_WINDOW, 14_480);
    let w = one(&dependent_reads(0, 0), None);
    assert_eq!(model::predict(&w.steps, &c), 100 * 51 * MS + 6 * 50 * MS);
    let w = one(&dependent_reads(0, 1000 * MS), None);
    assert_eq!(
        model::predict(&w.steps, &c),
        100 * 51 * MS + 99 * 1000 * MS + (6 + 99 * 4) * 50 * MS
    );
    // a receive window of 256 KiB bounds the grown window: 4 round trips more each, as
    // without slow start; the first reply 7 (5 rounds of slow start, 14 480 × 31 bytes,
    // then the rest, 599 816, in 3 windows of 256 KiB)
    let c = Conditions {
        reply_window: Some(256 << 10),
        ..c
    };
    let w = one(&dependent_reads(0, 0), None);
    let first = 7;
    assert_eq!(
        model::predict(&w.steps, &c),
        100 * 51 * MS + (first + 99 * 4) * 50 * MS
    );
    // at no RTT the rounds cost nothing
    let c = Conditions { rtt_ns: 0, ..c };
    assert_eq!(model::predict(&w.steps, &c), 100 * MS);
}

/// The table's slow start: the row at the capture's RTT gives the captured duration back
/// (the captured times hold the capture's slow start), a row below it models none, and at
/// 50 ms four 1 MiB replies at a time cost the 25 rounds of 51 ms and at most the 9 round
/// trips slow start needs to carry 4 MiB and 480 bytes from 10 segments (14 480 × (2⁹ − 1)
/// bytes), and at least the 6 a single reply needs.
#[test]
fn table_takes_the_captures_own_slow_start_out() {
    let w = one(&rounds_of_four(), None);
    let cap_ms = w.captured_rtt_ns() as f64 / 1e6;
    assert_eq!(cap_ms, 1.0);
    let t = model::table(&w, &[0.5, cap_ms, 50.0], None, None);
    let none = |rtt_ns: i64| {
        let c = Conditions {
            rtt_ns,
            rate_bps: None,
            call_window: None,
            reply_window: None,
            initial_window: None,
        };
        model::predict(&w.steps, &c) as f64 / 1e9
    };
    assert!((t[0].duration_s - none(MS / 2)).abs() < 1e-9, "{:?}", t[0]);
    assert!(
        (t[1].duration_s - w.captured_ns() as f64 / 1e9).abs() < 1e-9,
        "{:?}",
        t[1]
    );
    let plain = none(50 * MS);
    assert!((plain - 25.0 * 0.051003).abs() < 1e-6, "{plain}");
    let d = t[2].duration_s;
    assert!(
        d >= plain + 6.0 * 0.050 - 0.001 * 9.0 && d <= plain + 9.0 * 0.050,
        "{d} against {plain}"
    );
}
