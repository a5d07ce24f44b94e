//! How a replayed NFS request ended: its reply's index and status ([`Done`], [`Failed`]);
//! what the replay measured is `nsperf_core::replay::result`'s.

use nsperf_core::replay::ErrorStatus;

use crate::error::NfsError;
use crate::proto::NfsStat;
use crate::rpc::RpcError;

/// How a replayed request ended, when not OK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failed {
    /// An NFSv3 status.
    Nfs(u32),
    /// An NFSv4 status.
    Nfs4(u32),
    /// Refused below NFS (the RPC's accept status or a denial).
    Rpc(&'static str),
}

impl Failed {
    pub(super) fn of_rpc(e: &RpcError) -> Option<Failed> {
        Some(Failed::Rpc(match e {
            RpcError::ProgramUnavailable(_) => "PROG_UNAVAIL",
            RpcError::VersionMismatch { .. } => "PROG_MISMATCH",
            RpcError::ProcedureUnavailable(_) => "PROC_UNAVAIL",
            RpcError::GarbageArgs => "GARBAGE_ARGS",
            RpcError::SystemError => "SYSTEM_ERR",
            RpcError::Denied(_) => "MSG_DENIED",
            _ => return None,
        }))
    }
}

impl ErrorStatus for Failed {
    fn name(self) -> String {
        match self {
            Failed::Nfs(st) => NfsStat(st)
                .name(3)
                .map_or_else(|| format!("NFS status {st}"), str::to_string),
            Failed::Nfs4(st) => NfsStat(st)
                .name(4)
                .map_or_else(|| format!("NFS4 status {st}"), str::to_string),
            Failed::Rpc(n) => n.to_string(),
        }
    }
}

/// A reply parsed, finished once its last byte is in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    pub(crate) index: usize,
    pub(crate) failed: Option<Failed>,
    pub(crate) read: u64,
    pub(crate) written: u64,
    /// NFSv4.1: the server took the SEQUENCE (the slot's sequence moves on).
    pub(crate) seq_ok: bool,
}

impl Done {
    /// A reply to request `index` that succeeded and moved no data (so far).
    pub(crate) fn of(index: usize) -> Done {
        Done {
            index,
            failed: None,
            read: 0,
            written: 0,
            seq_ok: false,
        }
    }
}

/// A reply that did not decode, as the replay's error.
pub(super) fn xe(e: crate::xdr::XdrError) -> NfsError {
    NfsError::Rpc {
        what: "replay",
        source: RpcError::Xdr(e),
    }
}

/// A reply that decoded but does not answer the call, as the replay's error.
pub(super) fn bad(why: &'static str) -> NfsError {
    NfsError::Rpc {
        what: "replay",
        source: RpcError::Bad(why),
    }
}
