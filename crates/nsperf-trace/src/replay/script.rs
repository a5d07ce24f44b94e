//! A capture's NFSv3 or NFSv4 workloads as the [`Script`] `nsperf_nfs::replay` runs against a
//! server, and its SMB2 workloads as the [`SmbScript`] `nsperf_smb::replay` runs: one
//! connection per captured client connection, each request's operation mapped (see
//! docs/replay.md, "The replay"), its trigger and the connection's most in flight as
//! captured, and one file per file handle (or FileId) hash sized to its extent.

use std::collections::{BTreeSet, HashMap};

use nsperf_nfs::Stable;
use nsperf_nfs::replay::{Call, CallOp, ConnScript, Script, Target, Trigger as Rt};
use nsperf_smb::replay::{
    Call as SmbCall, CallOp as SmbOp, ConnScript as SmbConn, Script as SmbScript,
};

use super::{Trigger, Workload};
use crate::proto::requests::{OpKind, Protocol};

/// NFSv3 procedures whose (first) handle is a directory's.
const DIR_OPS: [u16; 10] = [3, 8, 9, 10, 11, 12, 13, 14, 16, 17];
/// NFSv4 operations whose current file handle is a directory's: CREATE, LINK, LOOKUP,
/// LOOKUPP, OPEN, OPENATTR, READDIR, REMOVE, RENAME, SECINFO.
const DIR_OPS4: [u16; 10] = [6, 11, 15, 16, 18, 19, 26, 28, 29, 33];

/// Why a capture's workloads make no script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReplayable {
    /// A script of one protocol asked of another's workloads (an SMB2 capture's NFS
    /// script).
    Protocol(Protocol),
    /// NFSv3 and NFSv4 requests in one capture.
    Mixed,
}

impl std::fmt::Display for NotReplayable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReplayable::Protocol(Protocol::Smb2) => f.write_str(
                "an SMB2 capture replays against an SMB server (--against smb://HOST/SHARE/PATH, or --lab --server samba); in a plan's replay step it is not built yet",
            ),
            NotReplayable::Protocol(p) => write!(
                f,
                "a {p} capture replays against an NFS server (--against nfs://HOST/DIR)"
            ),
            NotReplayable::Mixed => f.write_str(
                "the capture holds requests of more than one protocol (NFSv3, NFSv4, SMB2); the replay takes one (cut the capture by connection)",
            ),
        }
    }
}

/// A capture's workloads, their script, their protocol and what the capture lacks
/// ([`nfs_replay`]).
pub type NfsReplay = (Vec<Workload>, Script, Protocol, super::report::CaptureGaps);

/// The NFS workload of the capture file `path`, ready to replay: its workloads (one per
/// client connection, in the order of the script's connections), their script, and their
/// protocol (NFSv3 or NFSv4: a v4 script is replayed over an NFSv4 URL), and what the capture
/// lacks of its exchanges (requests without both ends are not in the script). The error is one
/// line: the file unreadable, no request matched to its reply, more than
/// [`DEFAULT_MAX_REQUESTS`](crate::proto::requests::DEFAULT_MAX_REQUESTS), a protocol whose
/// replay is not built or a mix, more connections than the replay runs.
pub fn nfs_replay(path: &std::path::Path) -> Result<NfsReplay, String> {
    use crate::proto::requests::DEFAULT_MAX_REQUESTS;
    let cfg = crate::TraceConfig {
        idle_ns: crate::DEFAULT_IDLE_NS,
        ..crate::TraceConfig::default()
    };
    let (trace, stream) =
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
    let proto = protocol(&ws).map_err(|e| e.to_string())?;
    let sc = script(&ws).map_err(|e| e.to_string())?;
    if sc.conns.len() > nsperf_nfs::replay::MAX_CONNECTIONS {
        return Err(format!(
            "{} client connections, the replay runs at most {}",
            sc.conns.len(),
            nsperf_nfs::replay::MAX_CONNECTIONS
        ));
    }
    Ok((ws, sc, proto, super::report::CaptureGaps::of(&trace)))
}

/// The protocol of `workloads`' requests (NFSv3 when there are none): all of one (NFSv3,
/// NFSv4 or SMB2), else why not.
pub fn protocol(workloads: &[Workload]) -> Result<Protocol, NotReplayable> {
    let mut steps = workloads.iter().flat_map(|w| w.steps.iter());
    let first = steps.next().map_or(Protocol::Nfs3, |s| s.op.protocol);
    match steps.find(|s| s.op.protocol != first) {
        Some(_) => Err(NotReplayable::Mixed),
        None => Ok(first),
    }
}

/// The script of `workloads` (all NFSv3, or all NFSv4: calls counted under the captured
/// operation's number); why not for another protocol or a mix.
pub fn script(workloads: &[Workload]) -> Result<Script, NotReplayable> {
    let proto = protocol(workloads)?;
    if proto == Protocol::Smb2 {
        return Err(NotReplayable::Protocol(proto));
    }
    let v4 = proto == Protocol::Nfs4;
    let dir_ops: &[u16] = if v4 { &DIR_OPS4 } else { &DIR_OPS };
    let steps = || workloads.iter().flat_map(|w| w.steps.iter());
    let dirs: BTreeSet<u64> = steps()
        .filter(|s| s.op.kind() == OpKind::Meta && dir_ops.contains(&s.op.code))
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
                    op: if v4 {
                        call_op4(s.op.code, s, &index)
                    } else {
                        call_op(s.op.code, s, &index)
                    },
                    captured: u32::from(s.op.code),
                    trigger: replayed(s.trigger),
                })
                .collect(),
        })
        .collect();
    Ok(Script { files, conns })
}

/// The replay's trigger of a captured one (a negative delay as none).
fn replayed(t: Trigger) -> Rt {
    match t {
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
    }
}

/// The script of `workloads` when all are SMB2 (requests counted under the captured
/// command); why not for another protocol or a mix. Files: one per FileId hash any request
/// named (CREATE's from its response), in order of first use, sized to the extent READs
/// and WRITEs reached.
pub fn smb_script(workloads: &[Workload]) -> Result<SmbScript, NotReplayable> {
    let proto = protocol(workloads)?;
    if proto != Protocol::Smb2 {
        return Err(NotReplayable::Protocol(proto));
    }
    let mut index: HashMap<u64, u32> = HashMap::new();
    let mut files: Vec<u64> = Vec::new();
    for s in workloads.iter().flat_map(|w| w.steps.iter()) {
        if s.file == 0 {
            continue;
        }
        let i = *index.entry(s.file).or_insert_with(|| {
            files.push(0);
            files.len() as u32 - 1
        });
        if matches!(s.op.kind(), OpKind::Read | OpKind::Write) {
            let end = s.offset.saturating_add(u64::from(s.count));
            files[i as usize] = files[i as usize].max(end);
        }
    }
    let t0 = workloads.iter().map(|w| w.start_ns).min().unwrap_or(0);
    let conns = workloads
        .iter()
        .map(|w| SmbConn {
            start_ns: (w.start_ns - t0).max(0) as u64,
            in_flight_max: w.in_flight_max(),
            calls: w
                .steps
                .iter()
                .map(|s| SmbCall {
                    op: smb_op(s, index.get(&s.file).copied()),
                    trigger: replayed(s.trigger),
                    captured: s.op.code,
                })
                .collect(),
        })
        .collect();
    Ok(SmbScript { files, conns })
}

/// The request replayed for SMB2 command `s.op.code` on file `file` (docs/replay.md): READ,
/// WRITE, FLUSH, QUERY_INFO, CREATE and CLOSE as themselves, anything else (and a command
/// that names no file) as an ECHO.
fn smb_op(s: &super::Step, file: Option<u32>) -> SmbOp {
    match (s.op.code, file) {
        (5, file) => SmbOp::Create { file },
        (6, Some(file)) => SmbOp::Close { file },
        (7, Some(file)) => SmbOp::Flush { file },
        (8, Some(file)) => SmbOp::Read {
            file,
            offset: s.offset,
            count: s.count,
        },
        (9, Some(file)) => SmbOp::Write {
            file,
            offset: s.offset,
            count: s.count,
        },
        (16, Some(file)) => SmbOp::QueryInfo { file },
        _ => SmbOp::Echo,
    }
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

/// The call replayed for NFSv4 operation `code` (a COMPOUND's main operation): the data
/// operations and ACCESS, GETATTR, LOOKUP, READDIR, REMOVE, CREATE as their NFSv3 like
/// (made as COMPOUNDs by the replay's NFSv4 dialect); OPEN as a LOOKUP of a replay file's
/// name (the replay holds its files open from set-up); anything else as a GETATTR.
fn call_op4(code: u16, s: &super::Step, index: &HashMap<u64, u32>) -> CallOp {
    let target = match index.get(&s.file) {
        Some(&i) => Target::File(i),
        None => Target::Dir,
    };
    let file = index.get(&s.file).copied().unwrap_or(0);
    match code {
        3 => CallOp::Access(target),
        5 => CallOp::Commit {
            file,
            offset: s.offset,
            count: s.count,
        },
        6 => CallOp::Create,
        9 => CallOp::Getattr(target),
        15 | 18 => CallOp::Lookup,
        25 => CallOp::Read {
            file,
            offset: s.offset,
            count: s.count,
        },
        26 => CallOp::Readdir,
        28 => CallOp::Remove,
        38 => CallOp::Write {
            file,
            offset: s.offset,
            count: s.count,
            stable: s.stable.unwrap_or(Stable::FileSync),
        },
        c => CallOp::AsGetattr {
            captured: u32::from(c),
            target,
        },
    }
}
