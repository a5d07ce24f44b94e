//! The simulator's NFSv3 workload: a client keeps `in_flight` READs (or WRITEs) of `size`
//! bytes in flight, `requests` in all, thinking `think_ns` after each reply before it sends
//! the next; a server that serves one request at a time in `server_ns`. The records are
//! real ONC RPC (made by nsperf's own NFSv3 encoders), so the capture decodes.
//!
//! Roles: for READ the simulator's sender is the server (its data is the replies) and its
//! receiver the client, whose requests ride on its ACK segments; for WRITE the sender is the
//! client (its data is the WRITE calls) and the receiver the server, whose replies ride on
//! its ACKs. The receiver's records go one way in one segment each, across an uncongested
//! reverse path, and the sender acknowledges them at once.

use std::collections::VecDeque;

use nsperf_nfs::proto::{FileHandle, NFS_PROG, encode_post_op_attr, encode_wcc_data, proc3};
use nsperf_nfs::rpc::{AcceptStat, AuthSys, begin_call, begin_reply, finish_record};
use nsperf_nfs::xdr::{put_bool, put_opaque, put_u32, put_u64};

use super::{ACK, Event, ISN_R, ISN_S, PSH, RCV, SND, Seg, World};

/// Which operation the workload repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcOp {
    /// READ: the replies carry the data.
    Read,
    /// WRITE: the calls carry the data.
    Write,
}

/// An NFSv3 workload for [`super::PathSim::rpc`].
#[derive(Debug, Clone)]
pub struct RpcLoad {
    /// READ or WRITE.
    pub op: RpcOp,
    /// Requests the client keeps in flight.
    pub in_flight: u32,
    /// Data per request, bytes.
    pub size: u32,
    /// Requests in all.
    pub requests: u32,
    /// The server's time per request, ns (one request at a time; 50 µs by default: a real
    /// server never answers in no time, and a sender answering the very ACK that brought
    /// the request would look ACK-clocked).
    pub server_ns: i64,
    /// The client's think time after each reply, ns.
    pub think_ns: i64,
}

impl Default for RpcLoad {
    fn default() -> Self {
        RpcLoad {
            op: RpcOp::Read,
            in_flight: 1,
            size: 64 * 1024,
            requests: 100,
            server_ns: 50_000,
            think_ns: 0,
        }
    }
}

/// The workload as it runs.
#[derive(Debug)]
pub(super) struct RpcState {
    load: RpcLoad,
    /// The sender's stream: every byte its application wrote.
    stream: Vec<u8>,
    /// The sender's records the receiver has not had whole yet: (end offset, XID).
    ends: VecDeque<(u64, u32)>,
    /// Bytes the receiver sent (its sequence space).
    pub r_sent: u64,
    /// Bytes of the receiver the sender got.
    pub s_received: u64,
    /// Requests sent so far.
    issued: u32,
    /// When the server is free to take the next request.
    server_free: i64,
}

fn handle() -> FileHandle {
    FileHandle::new(&[7; 16]).unwrap_or_else(|| unreachable!("16 bytes is a valid handle"))
}

impl RpcState {
    pub(super) fn new(load: RpcLoad) -> RpcState {
        RpcState {
            load,
            stream: Vec::new(),
            ends: VecDeque::new(),
            r_sent: 0,
            s_received: 0,
            issued: 0,
            server_free: 0,
        }
    }

    /// The sender's bytes `seq .. seq + len` of its stream.
    pub(super) fn sender_bytes(&self, seq: u64, len: u32) -> &[u8] {
        let a = (seq as usize).min(self.stream.len());
        let b = (a + len as usize).min(self.stream.len());
        &self.stream[a..b]
    }

    /// The call record of request `xid`.
    fn call(&self, xid: u32) -> Vec<u8> {
        let mut b = Vec::new();
        let (proc_, size) = match self.load.op {
            RpcOp::Read => (proc3::READ, self.load.size),
            RpcOp::Write => (proc3::WRITE, self.load.size),
        };
        let s = begin_call(&mut b, xid, NFS_PROG, 3, proc_, &AuthSys::new("sim", 0, 0));
        handle().encode(&mut b);
        put_u64(&mut b, u64::from(xid) * u64::from(size));
        put_u32(&mut b, size);
        if self.load.op == RpcOp::Write {
            put_u32(&mut b, 0); // UNSTABLE
            put_opaque(&mut b, &vec![0x5a; size as usize]);
        }
        finish_record(&mut b, s, 0);
        b
    }

    /// The reply record of request `xid`.
    fn reply(&self, xid: u32) -> Vec<u8> {
        let mut b = Vec::new();
        let s = begin_reply(&mut b, xid, AcceptStat::Success);
        put_u32(&mut b, 0);
        match self.load.op {
            RpcOp::Read => {
                encode_post_op_attr(&mut b, None);
                put_u32(&mut b, self.load.size);
                put_bool(&mut b, false);
                put_opaque(&mut b, &vec![0xa5; self.load.size as usize]);
            }
            RpcOp::Write => {
                encode_wcc_data(&mut b, None);
                put_u32(&mut b, self.load.size);
                put_u32(&mut b, 0);
                put_u64(&mut b, 42);
            }
        }
        finish_record(&mut b, s, 0);
        b
    }

    /// When the server, given a request at `now`, has its reply ready.
    fn serve(&mut self, now: i64) -> i64 {
        let start = now.max(self.server_free);
        self.server_free = start + self.load.server_ns;
        self.server_free
    }
}

impl World<'_> {
    fn rpc_state(&mut self) -> &mut RpcState {
        self.rpc
            .as_mut()
            .unwrap_or_else(|| unreachable!("called in RPC mode only"))
    }

    /// The first requests, once the handshake is done.
    pub(super) fn rpc_start(&mut self) {
        let ow = self.one_way();
        let (op, n) = {
            let r = self.rpc_state();
            let n = r.load.in_flight.min(r.load.requests);
            r.issued = n;
            (r.load.op, n)
        };
        for xid in 0..n {
            match op {
                // The client (receiver) sends once the handshake's last ACK is in.
                RpcOp::Read => self.at(self.now + ow, Event::RpcSend(xid)),
                RpcOp::Write => self.at(self.now, Event::RpcAppend(xid)),
            }
        }
    }

    /// The sender's application writes the record of `xid` (a READ reply or a WRITE call).
    pub(super) fn rpc_append(&mut self, xid: u32) {
        let r = self.rpc_state();
        let rec = match r.load.op {
            RpcOp::Read => r.reply(xid),
            RpcOp::Write => r.call(xid),
        };
        r.stream.extend_from_slice(&rec);
        let end = r.stream.len() as u64;
        r.ends.push_back((end, xid));
        self.s.app_limit = end;
        self.send();
    }

    /// The receiver got more of the sender's stream in order: the records now whole.
    pub(super) fn rpc_delivered(&mut self) {
        let nxt = self.r.nxt;
        let now = self.now;
        loop {
            let r = self.rpc_state();
            let Some(&(end, xid)) = r.ends.front() else {
                break;
            };
            if end > nxt {
                break;
            }
            r.ends.pop_front();
            match r.load.op {
                RpcOp::Read => {
                    // A reply is in: after thinking, the client's next READ.
                    if r.issued < r.load.requests {
                        let next = r.issued;
                        r.issued += 1;
                        let t = now + r.load.think_ns;
                        self.at(t, Event::RpcSend(next));
                    }
                }
                RpcOp::Write => {
                    // A WRITE is in: the server answers when it has written it.
                    let t = r.serve(now);
                    self.at(t, Event::RpcSend(xid));
                }
            }
        }
    }

    /// The receiver sends its record for `xid` (a READ call or a WRITE reply) in one
    /// segment that also acknowledges what it got.
    pub(super) fn rpc_send(&mut self, xid: u32) {
        let rec = {
            let r = self.rpc_state();
            match r.load.op {
                RpcOp::Read => r.call(xid),
                RpcOp::Write => r.reply(xid),
            }
        };
        let w = self.window();
        self.r.last_window = w;
        self.r.unacked_segments = 0;
        self.r.delack_gen += 1;
        let seg = Seg {
            flags: ACK | PSH,
            len: rec.len(),
            ..self.ack_seg(false, w)
        };
        self.rpc_state().r_sent += rec.len() as u64;
        let ow = self.one_way();
        let t_cap = self.now + ((1.0 - self.p.vantage) * ow as f64) as i64;
        self.capture_with(t_cap, seg, &rec);
        let tsval = self.tsval(true);
        let len = rec.len() as u32;
        self.at(
            self.now + ow,
            Event::RpcArrive(len, self.r.nxt, w, tsval, xid),
        );
    }

    /// The receiver's record reaches the sender, with its ACK.
    pub(super) fn rpc_arrive(&mut self, len: u32, ack: u64, wnd: u64, tsval: u32, xid: u32) {
        let now = self.now;
        let r = self.rpc_state();
        r.s_received += u64::from(len);
        let next = match r.load.op {
            // A READ call: the server replies when it has read.
            RpcOp::Read => Some((r.serve(now), xid)),
            // A WRITE reply: after thinking, the client's next WRITE.
            RpcOp::Write if r.issued < r.load.requests => {
                r.issued += 1;
                Some((now + r.load.think_ns, r.issued - 1))
            }
            RpcOp::Write => None,
        };
        if ack > self.s.una || wnd != self.s.rwnd {
            self.on_ack(ack, wnd, tsval, false);
        } else {
            // Data, not a duplicate ACK.
            self.s.ts_recent = tsval;
        }
        match next {
            Some((t, x)) if t <= now => self.rpc_append(x),
            Some((t, x)) => {
                self.at(t, Event::RpcAppend(x));
                self.sender_ack();
            }
            None => self.sender_ack(),
        }
    }

    /// The sender acknowledges the receiver's record at once (a pure ACK, through the
    /// bottleneck behind the sender's data, never dropped).
    fn sender_ack(&mut self) {
        self.s.ip_id = self.s.ip_id.wrapping_add(1);
        let received = self.rpc_state().s_received;
        let seg = Seg {
            src: SND,
            dst: RCV,
            seq: ISN_S.wrapping_add(1).wrapping_add(self.s.nxt as u32),
            ack: (ISN_R + 1).wrapping_add(received as u32),
            flags: ACK,
            window: 502,
            ip_id: self.s.ip_id,
            timestamps: self
                .p
                .timestamps
                .then(|| (self.tsval(false), self.s.ts_recent)),
            ..Seg::default()
        };
        let wire = f64::from(52 + 12 * u32::from(self.p.timestamps) + 14);
        let depart = self.link_free.max(self.now) + (wire * 8.0 / self.p.rate_bps * 1e9) as i64;
        self.link_free = depart;
        self.departures.push_back(depart);
        let t = if self.p.vantage <= 0.0 {
            self.now
        } else {
            depart + (self.p.vantage * self.one_way() as f64) as i64
        };
        self.capture(t, seg);
    }
}
