//! The data path: READ and WRITE on one file with up to `depth` requests in flight on one
//! connection (its own session and tree), the way `--iodepth` means it.
//!
//! Unencrypted connections (the usual case, signed or not) take the direct path
//! ([`crate::direct`]): the smb2 crate sets the connection up on nsperf's socket, then nsperf
//! frames the requests and reads the replies itself, a READ's data straight into the caller's
//! buffer. Encrypted sessions and shares keep the crate's path below.
//!
//! The crate's path: each request is a future of the smb2 crate
//! (`Connection::execute_with_credits`), polled on this pipeline's single-threaded runtime
//! only while [`Pipeline::reap`] waits; the crate's receiver task routes replies to them by
//! message id. The crate's messages own their bytes, so a WRITE's data is copied from the
//! caller's buffer into a per-slot vector (reused: it comes back with the reply) and a READ's
//! data is copied from the reply frame into the caller's buffer. Credits: each request is
//! charged one credit per 64 KiB (MS-SMB2 3.1.5.2), and the crate parks a request until the
//! server has granted enough.

use nsperf_core::data_path::{Completion, DataOp};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use smb2::client::connection::Connection;
use smb2::types::status::NtStatus;
use smb2::types::{Command, CreditCharge, FileId, TreeId};

use crate::client::{Client, block_on};
use crate::creds::Credentials;
use crate::direct::Direct;
use crate::error::SmbError;
use crate::frames::{read_into, read_request, write_count, write_request};
use crate::url::SmbUrl;

/// Most requests in flight on one connection.
pub const MAX_DEPTH: usize = 4096;
/// Size of the SMB2 header that READ's DataOffset counts from.
const TICK: Duration = Duration::from_millis(200);
/// How long in-flight requests may drain after Ctrl-C before the run gives up on them.
const DRAIN_AFTER_INTERRUPT: Duration = Duration::from_secs(2);

type Reply = (u32, DataOp, Vec<u8>, smb2::Result<smb2::Frame>);
type InFlight = Pin<Box<dyn Future<Output = Reply> + Send>>;

#[derive(Debug, Clone, Copy)]
struct Slot {
    busy: bool,
    ptr: *mut u8,
    cap: usize,
}

/// A data connection to one file.
pub struct Pipeline {
    client: Client,
    fid: FileId,
    path: String,
    slots: Vec<Slot>,
    spare: Vec<Vec<u8>>,
    inflight: FuturesUnordered<InFlight>,
    /// The direct data path, when this connection is not encrypted.
    direct: Option<Direct>,
}

// SAFETY: the raw buffer pointers are only dereferenced by the thread owning the pipeline,
// inside calls whose caller guarantees the buffers outlive the requests in flight.
unsafe impl Send for Pipeline {}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("path", &self.path)
            .field("depth", &self.slots.len())
            .field("inflight", &self.inflight.len())
            .finish()
    }
}

/// Credits a request of `len` bytes is charged.
fn charge(len: usize) -> CreditCharge {
    CreditCharge(len.div_ceil(65536).clamp(1, u16::MAX as usize) as u16)
}

fn errno_of(e: &smb2::Error) -> i32 {
    SmbError::op("I/O", "", clone_kind(e)).errno()
}

/// An error of the same kind (smb2's errors are not `Clone`).
fn clone_kind(e: &smb2::Error) -> smb2::Error {
    match e {
        smb2::Error::Protocol { status, command } => smb2::Error::Protocol {
            status: *status,
            command: *command,
        },
        _ if crate::error::is_lost(e) => smb2::Error::Disconnected,
        _ => smb2::Error::invalid_data(e.to_string()),
    }
}

#[allow(clippy::too_many_arguments)]
async fn request(
    write_through: bool,
    conn: Connection,
    tid: TreeId,
    fid: FileId,
    slot: u32,
    op: DataOp,
    offset: u64,
    len: usize,
    data: Vec<u8>,
) -> Reply {
    let c = charge(len);
    match op {
        DataOp::Write => {
            let req = write_request(fid, offset, data, write_through);
            let r = conn
                .execute_with_credits(Command::Write, &req, Some(tid), c)
                .await;
            (slot, op, req.data, r)
        }
        DataOp::Read => {
            let req = read_request(fid, offset, len as u32);
            let r = conn
                .execute_with_credits(Command::Read, &req, Some(tid), c)
                .await;
            (slot, op, data, r)
        }
    }
}

impl Pipeline {
    /// Connects to `url` as `creds` and opens the existing file `path` (relative to the
    /// share's root) with up to `depth` requests in flight.
    pub fn open(
        url: &SmbUrl,
        creds: &Credentials,
        path: &str,
        depth: usize,
        timeout: Duration,
    ) -> Result<Pipeline, SmbError> {
        let depth = depth.clamp(1, MAX_DEPTH);
        let (mut client, direct) = match Client::connect_direct(url, creds, timeout)? {
            Some((client, tcp, ids)) => (client, Some((tcp, ids))),
            None => (Client::connect(url, creds, timeout)?, None),
        };
        let fid = client.open(path, false)?;
        let direct = direct.map(|(tcp, mut ids)| {
            (ids.next_message_id, ids.credits) = client.handover_state();
            let fd = tcp.hand_over();
            Direct::new(Some(tcp), fd, ids, fid, depth, timeout)
        });
        let slot = Slot {
            busy: false,
            ptr: std::ptr::null_mut(),
            cap: 0,
        };
        Ok(Pipeline {
            client,
            fid,
            path: path.to_string(),
            slots: vec![slot; depth],
            spare: vec![Vec::new(); depth],
            inflight: FuturesUnordered::new(),
            direct,
        })
    }

    /// WRITEs ask for WRITE_THROUGH (each stable before its reply); [`Pipeline::flush`]
    /// then sends no FLUSH.
    pub fn set_write_through(&mut self, on: bool) {
        self.client.write_through = on;
        if let Some(d) = &mut self.direct {
            d.write_through = on;
        }
    }

    /// True when READ and WRITE go by the direct path (nsperf frames and reads them on its
    /// own socket) rather than through the smb2 crate (encrypted sessions and shares).
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// What the connection negotiated.
    pub fn negotiated(&self) -> &crate::client::Negotiated {
        &self.client.negotiated
    }

    /// Gives slot `slot` the buffer `ptr[..cap]`.
    ///
    /// # Safety
    /// The buffer must stay valid, and not be touched by the caller, while a request on
    /// this slot is in flight (from [`Pipeline::queue`] until the slot comes back from
    /// [`Pipeline::reap`]).
    pub unsafe fn set_buffer(&mut self, slot: u32, ptr: *mut u8, cap: usize) {
        if let Some(d) = &mut self.direct {
            d.set_buffer(slot, ptr, cap);
        }
        if let Some(s) = self.slots.get_mut(slot as usize) {
            s.ptr = ptr;
            s.cap = cap;
        }
    }

    /// Number of slots.
    pub fn depth(&self) -> usize {
        self.slots.len()
    }

    /// Requests in flight.
    pub fn inflight(&self) -> usize {
        match &self.direct {
            Some(d) => d.inflight(),
            None => self.inflight.len(),
        }
    }

    /// Starts a READ or WRITE of `len` bytes at `offset` on `slot`.
    pub fn queue(
        &mut self,
        op: DataOp,
        offset: u64,
        len: usize,
        slot: u32,
    ) -> Result<(), SmbError> {
        if let Some(d) = &mut self.direct {
            return d.queue(op, offset, len, slot, &self.path);
        }
        let s = self
            .slots
            .get(slot as usize)
            .copied()
            .filter(|s| !s.busy && !s.ptr.is_null() && len <= s.cap && len <= u32::MAX as usize)
            .ok_or_else(|| {
                SmbError::op(
                    "queue",
                    &self.path,
                    smb2::Error::invalid_data("slot busy, without a buffer, or too small"),
                )
            })?;
        let mut data = std::mem::take(&mut self.spare[slot as usize]);
        if op == DataOp::Write {
            data.clear();
            // SAFETY: set_buffer's contract: ptr[..cap] is valid and len <= cap.
            data.extend_from_slice(unsafe { std::slice::from_raw_parts(s.ptr, len) });
        }
        self.slots[slot as usize].busy = true;
        let conn = self.client.conn.clone();
        let tid = self.client.tree.tree_id;
        self.inflight.push(Box::pin(request(
            self.client.write_through,
            conn,
            tid,
            self.fid,
            slot,
            op,
            offset,
            len,
            data,
        )));
        Ok(())
    }

    /// Waits for at least `min` requests to finish (fewer if fewer are in flight), appending
    /// every finished one to `out`. An error status of one request is its `Completion`; a lost
    /// connection fails the call.
    pub fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), SmbError> {
        if let Some(d) = &mut self.direct {
            return d.reap(min, out, &self.path);
        }
        let min = min.min(self.inflight.len());
        let mut got = 0usize;
        let mut interrupted_at = None;
        let Pipeline {
            client,
            slots,
            spare,
            inflight,
            path,
            ..
        } = self;
        let rt = &client.rt;
        rt.block_on(async {
            loop {
                let next = if got < min {
                    match tokio::time::timeout(TICK, inflight.next()).await {
                        Ok(r) => r,
                        Err(_) => {
                            if nsperf_core::signal::interrupted() {
                                let t = *interrupted_at.get_or_insert_with(std::time::Instant::now);
                                if t.elapsed() > DRAIN_AFTER_INTERRUPT {
                                    return Err(SmbError::Interrupted);
                                }
                            }
                            continue;
                        }
                    }
                } else {
                    match futures_util::FutureExt::now_or_never(inflight.next()) {
                        Some(r) => r,
                        None => return Ok(()),
                    }
                };
                let Some((slot, op, data, r)) = next else {
                    return Ok(());
                };
                let s = &mut slots[slot as usize];
                s.busy = false;
                let result = match r {
                    Err(e) if crate::error::is_lost(&e) => {
                        return Err(SmbError::Lost {
                            what: if op == DataOp::Read { "READ" } else { "WRITE" },
                            source: e,
                        });
                    }
                    Err(e) => -errno_of(&e),
                    Ok(f) if f.header.status == NtStatus::END_OF_FILE => 0,
                    Ok(f) if f.header.status != NtStatus::SUCCESS => {
                        -errno_of(&smb2::Error::Protocol {
                            status: f.header.status,
                            command: f.header.command,
                        })
                    }
                    Ok(f) => match op {
                        DataOp::Write => write_count(&f).map(|n| n as i32).unwrap_or(-libc::EPROTO),
                        DataOp::Read => {
                            // SAFETY: set_buffer's contract: the slot's buffer is valid and
                            // untouched by the caller until this completion is handed out.
                            let buf = unsafe { std::slice::from_raw_parts_mut(s.ptr, s.cap) };
                            read_into(&f, buf)
                                .map(|n| n as i32)
                                .unwrap_or(-libc::EPROTO)
                        }
                    },
                };
                spare[slot as usize] = data;
                out.push(Completion { slot, result });
                got += 1;
            }
        })
        .map_err(|e| match e {
            SmbError::Lost { .. } | SmbError::Interrupted => e,
            other => SmbError::op("I/O", path, smb2::Error::invalid_data(other.to_string())),
        })
    }

    /// Waits for every request in flight, then FLUSH (the server writes the file's data to
    /// stable storage); completions are appended to `out`.
    pub fn flush(&mut self, out: &mut Vec<Completion>) -> Result<(), SmbError> {
        if let Some(d) = &mut self.direct {
            return d.flush(out, &self.path);
        }
        self.reap(self.inflight.len(), out)?;
        if self.client.write_through {
            return Ok(());
        }
        let path = self.path.clone();
        self.client.flush(self.fid, &path)
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // Requests still in flight are dropped with their futures (late replies are
        // discarded by the crate's receiver task); the handle is closed if the server is
        // still there.
        self.inflight.clear();
        let path = std::mem::take(&mut self.path);
        if let Some(d) = &mut self.direct {
            let _ = d.close(Duration::from_secs(2), &path);
            return;
        }
        let _ = block_on(&self.client.rt, async {
            tokio::time::timeout(
                Duration::from_secs(2),
                self.client
                    .tree
                    .close_handle(&mut self.client.conn, self.fid),
            )
            .await
        });
        let _ = path;
    }
}
