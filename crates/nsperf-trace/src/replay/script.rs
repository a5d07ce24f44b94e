//! A capture's NFSv3 workloads as the [`Script`] `nsperf_nfs::replay` runs against a server:
//! one connection per captured client connection, each request's operation mapped (see
//! docs/replay.md, "The replay"), its trigger and the connection's most in flight as
//! captured, and one file per file handle hash sized to its extent.

use std::collections::{BTreeSet, HashMap};

use nsperf_nfs::Stable;
use nsperf_nfs::replay::{Call, CallOp, ConnScript, Script, Target, Trigger as Rt};

use super::{Trigger, Workload};
use crate::proto::requests::{OpKind, Protocol};

/// NFSv3 procedures whose (first) handle is a directory's.
const DIR_OPS: [u16; 10] = [3, 8, 9, 10, 11, 12, 13, 14, 16, 17];

/// The NFSv3 workload of the capture file `path`, ready to replay: its workloads (one per
/// client connection, in the order of the script's connections) and their script. The
/// error is one line: the file unreadable, no request matched to its reply, more than
/// [`DEFAULT_MAX_REQUESTS`](crate::proto::requests::DEFAULT_MAX_REQUESTS), a protocol whose
/// replay is not built, more connections than the replay runs.
pub fn nfs3_replay(path: &std::path::Path) -> Result<(Vec<Workload>, Script), String> {
    use crate::proto::requests::DEFAULT_MAX_REQUESTS;
    let cfg = crate::TraceConfig {
        idle_ns: crate::DEFAULT_IDLE_NS,
        ..crate::TraceConfig::default()
    };
    let (_, stream) =
        crate::requests_file(path, cfg, DEFAULT_MAX_REQUESTS).map_err(|e| e.to_string())?;
    if stream.dropped > 0 {
        return Err(format!(
            "more than {DEFAULT_MAX_REQUESTS} storage requests, the most replay keeps in memory"
        ));
    }
    if stream.requests.is_empty() {
        return Err("no NFS or SMB2 request matched to its reply in the capture".into());
    }
    let ws = super::workloads(&stream.requests, &stream.connections);
    let sc = script(&ws)
        .map_err(|p| format!("the replay of {p} captures is not built yet (NFSv3 only)"))?;
    if sc.conns.len() > nsperf_nfs::replay::MAX_CONNECTIONS {
        return Err(format!(
            "{} client connections, the replay runs at most {}",
            sc.conns.len(),
            nsperf_nfs::replay::MAX_CONNECTIONS
        ));
    }
    Ok((ws, sc))
}

/// The script of `workloads` (all NFSv3); the protocol of the first request that is not.
pub fn script(workloads: &[Workload]) -> Result<Script, Protocol> {
    if let Some(s) = workloads
        .iter()
        .flat_map(|w| w.steps.iter())
        .find(|s| s.op.protocol != Protocol::Nfs3)
    {
        return Err(s.op.protocol);
    }
    let steps = || workloads.iter().flat_map(|w| w.steps.iter());
    let dirs: BTreeSet<u64> = steps()
        .filter(|s| s.op.kind() == OpKind::Meta && DIR_OPS.contains(&s.op.code))
        .map(|s| s.file)
        .collect();
    // Files in order of first use; data operations always name files.
    let mut index: HashMap<u64, u32> = HashMap::new();
    let mut files: Vec<u64> = Vec::new();
    for s in steps() {
        let data = s.op.kind() != OpKind::Meta;
        if s.file == 0 || (!data && dirs.contains(&s.file)) {
            continue;
        }
        let i = *index.entry(s.file).or_insert_with(|| {
            files.push(0);
            files.len() as u32 - 1
        });
        if data {
            let end = s.offset.saturating_add(u64::from(s.count));
            files[i as usize] = files[i as usize].max(end);
        }
    }
    let t0 = workloads.iter().map(|w| w.start_ns).min().unwrap_or(0);
    let conns = workloads
        .iter()
        .map(|w| ConnScript {
            start_ns: (w.start_ns - t0).max(0) as u64,
            in_flight_max: w.in_flight_max(),
            calls: w
                .steps
                .iter()
                .map(|s| Call {
                    op: call_op(s.op.code, s, &index),
                    trigger: match s.trigger {
                        Trigger::Start => Rt::Start,
                        Trigger::Call { index, delay_ns } => Rt::Call {
                            index,
                            delay_ns: delay_ns.max(0) as u64,
                        },
                        Trigger::Reply {
                            index, delay_ns, ..
                        } => Rt::Reply {
                            index,
                            delay_ns: delay_ns.max(0) as u64,
                        },
                    },
                })
                .collect(),
        })
        .collect();
    Ok(Script { files, conns })
}

/// The call replayed for NFSv3 procedure `code`.
fn call_op(code: u16, s: &super::Step, index: &HashMap<u64, u32>) -> CallOp {
    let target = match index.get(&s.file) {
        Some(&i) => Target::File(i),
        None => Target::Dir,
    };
    let file = index.get(&s.file).copied().unwrap_or(0);
    match code {
        0 => CallOp::Null,
        1 => CallOp::Getattr(target),
        3 => CallOp::Lookup,
        4 => CallOp::Access(target),
        6 => CallOp::Read {
            file,
            offset: s.offset,
            count: s.count,
        },
        7 => CallOp::Write {
            file,
            offset: s.offset,
            count: s.count,
            stable: s.stable.unwrap_or(Stable::FileSync),
        },
        8 => CallOp::Create,
        12 => CallOp::Remove,
        16 => CallOp::Readdir,
        17 => CallOp::Readdirplus,
        18 => CallOp::Fsstat(target),
        19 => CallOp::Fsinfo(target),
        20 => CallOp::Pathconf(target),
        21 => CallOp::Commit {
            file,
            offset: s.offset,
            count: s.count,
        },
        c => CallOp::AsGetattr {
            captured: u32::from(c),
            target,
        },
    }
}
