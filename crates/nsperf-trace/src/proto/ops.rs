//! Per-operation figures of a storage protocol (NFS procedures, SMB2 commands): counts, bytes, sizes, service response
//! times in a histogram (no sample kept past the first few), errors by status.

use crate::model::{OpError, OpSummary, SrtSummary};
use crate::tcp::rtt::RttHistogram;

use super::names::{op_name, program_name, status_name};

/// Distinct error statuses kept per operation; more are counted under the last.
const MAX_STATUSES: usize = 16;

/// An RPC procedure: program, version, procedure number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OpKey {
    /// Program number.
    pub prog: u32,
    /// Program version.
    pub vers: u32,
    /// Procedure number.
    pub proc_: u32,
}

/// The figures of one operation, as they accumulate.
#[derive(Debug, Default)]
pub struct OpStats {
    /// Calls seen.
    pub calls: u64,
    /// Replies matched to a call.
    pub replies: u64,
    /// Bytes of the call records (headers and data).
    pub call_bytes: u64,
    /// Bytes of the reply records.
    pub reply_bytes: u64,
    /// Service response times: last byte of the call to last byte of the reply.
    pub srt: RttHistogram,
    /// Data moved (READ: bytes returned; WRITE: bytes sent).
    pub data_bytes: u64,
    /// Operations that moved data.
    pub sized: u64,
    /// Smallest and largest data size.
    pub size_min: u32,
    /// Largest data size.
    pub size_max: u32,
    /// Replies with a non-zero protocol status: (status, count).
    pub errors: Vec<(u32, u64)>,
    /// Replies refused at the RPC level (denied, garbage arguments, …).
    pub rpc_errors: u64,
}

impl OpStats {
    /// One data size.
    pub fn note_size(&mut self, n: u32) {
        if self.sized == 0 || n < self.size_min {
            self.size_min = n;
        }
        self.size_max = self.size_max.max(n);
        self.sized += 1;
        self.data_bytes += u64::from(n);
    }

    /// One reply with status `st` (non-zero).
    pub fn note_error(&mut self, st: u32) {
        if let Some(e) = self.errors.iter_mut().find(|e| e.0 == st) {
            e.1 += 1;
        } else if self.errors.len() < MAX_STATUSES {
            self.errors.push((st, 1));
        } else if let Some(e) = self.errors.last_mut() {
            e.1 += 1;
        }
    }
}

/// The operations of one connection, in order of first appearance.
#[derive(Debug, Default)]
pub struct OpTable {
    ops: Vec<(OpKey, OpStats)>,
}

impl OpTable {
    /// The figures of `k`, created on first use.
    pub fn get(&mut self, k: OpKey) -> &mut OpStats {
        let i = match self.ops.iter().position(|(x, _)| *x == k) {
            Some(i) => i,
            None => {
                self.ops.push((k, OpStats::default()));
                self.ops.len() - 1
            }
        };
        &mut self.ops[i].1
    }

    /// The summary, ordered by program, version and procedure.
    pub fn summary(&self) -> Vec<OpSummary> {
        let mut v: Vec<&(OpKey, OpStats)> = self.ops.iter().collect();
        v.sort_by_key(|(k, _)| *k);
        v.into_iter()
            .map(|(k, s)| {
                let h = s.srt.summary();
                OpSummary {
                    program: program_name(k.prog).to_string(),
                    version: k.vers,
                    procedure: k.proc_,
                    op: op_name(k.prog, k.vers, k.proc_).to_string(),
                    calls: s.calls,
                    replies: s.replies,
                    call_bytes: s.call_bytes,
                    reply_bytes: s.reply_bytes,
                    data_bytes: s.data_bytes,
                    size_min: (s.sized > 0).then_some(s.size_min),
                    size_max: (s.sized > 0).then_some(s.size_max),
                    srt: SrtSummary {
                        samples: h.samples,
                        min_ns: h.min_ns,
                        median_ns: h.median_ns,
                        p99_ns: if h.samples > 0 {
                            s.srt.quantile(0.99)
                        } else {
                            0
                        },
                        max_ns: h.max_ns,
                        mean_ns: h.mean_ns,
                    },
                    errors: s
                        .errors
                        .iter()
                        .map(|&(status, count)| OpError {
                            status,
                            name: status_name(k.prog, k.vers, status),
                            count,
                        })
                        .collect(),
                    rpc_errors: s.rpc_errors,
                }
            })
            .collect()
    }
}
