//! A simulated TCP transfer, captured anywhere along its path, to test the analysis against
//! a known truth: a sender (slow start, congestion avoidance, fast retransmit with NewReno
//! recovery, retransmission timeout, persist probes), a bottleneck link (rate, drop-tail
//! queue, random loss, propagation delay) and a receiver (buffer, reading application,
//! delayed ACKs, window updates). Virtual clock, seeded RNG: the same parameters give the same
//! capture. The capture point sits `vantage` of the way from the sender (0, before the
//! bottleneck queue, as tcpdump on the sending host) to the receiver (1).
//!
//! With [`PathSim::rpc`], the transfer is an NFSv3 workload instead of a bulk one ([`rpc`]):
//! the receiver sends requests, the sender's data is the replies (READ), or the sender's
//! data is the requests and the receiver answers them (WRITE).

mod rpc;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

pub use rpc::{RpcLoad, RpcOp};

use super::{Rng, Seg, tcp_frame_with};
use crate::wire::tcp::flags::{ACK, FIN, PSH, SYN};

const SND: ([u8; 4], u16) = ([10, 77, 0, 1], 40000);
const RCV: ([u8; 4], u16) = ([10, 77, 0, 2], 5201);
const ISN_S: u32 = 0x1000_0000;
const ISN_R: u32 = 0x7000_0000;
const MIN_RTO_NS: i64 = 200_000_000;
const PERSIST_NS: i64 = 200_000_000;
const DELACK_NS: i64 = 40_000_000;

/// A transfer to simulate.
#[derive(Debug, Clone)]
pub struct PathSim {
    /// Bottleneck rate, bit/s (IP bytes + 14 of framing).
    pub rate_bps: f64,
    /// Propagation round-trip time, ns (half each way).
    pub rtt_ns: i64,
    /// Bottleneck queue, packets (drop-tail).
    pub queue_packets: usize,
    /// Random loss of data packets at the bottleneck, 0..1.
    pub loss: f64,
    /// Seed of the loss.
    pub seed: u64,
    /// Maximum segment size.
    pub mss: u32,
    /// Receiver buffer, bytes: the window is its free space.
    pub rcv_buf: u32,
    /// Receiver window scale.
    pub window_scale: u8,
    /// The receiving application reads this fast (bit/s) in `read_chunk` reads; `None`: at
    /// once.
    pub read_bps: Option<f64>,
    /// Bytes per read of a slow reader.
    pub read_chunk: u32,
    /// The sending application writes this fast (bit/s) in `app_chunk` writes; `None`: bulk.
    pub app_bps: Option<f64>,
    /// Bytes per application write when paced.
    pub app_chunk: u32,
    /// Bytes to transfer.
    pub bytes: u64,
    /// TCP timestamps on both sides.
    pub timestamps: bool,
    /// Tick of the sender's timestamp clock, ms (the receiver's ticks every 1 ms).
    pub sender_tick_ms: u32,
    /// Where the capture is: 0 at the sender, 1 at the receiver.
    pub vantage: f64,
    /// Capture the SYNs (false: the capture starts after the handshake).
    pub handshake: bool,
    /// Every frame captured twice, as on both sides of a router: the copy (TTL one lower)
    /// comes 1 µs to this many ns after the original, at random (`None`: once).
    pub duplicate_frames: Option<i64>,
    /// Stop simulating at this time, ns.
    pub max_ns: i64,
    /// Slow-start threshold at the start, segments (`None`: unlimited); Linux's HyStart
    /// leaves slow start early in much the same way.
    pub initial_ssthresh: Option<u32>,
    /// An NFSv3 request/response workload instead of a bulk transfer of `bytes`.
    pub rpc: Option<RpcLoad>,
}

impl Default for PathSim {
    fn default() -> Self {
        PathSim {
            rate_bps: 45e6,
            rtt_ns: 50_000_000,
            queue_packets: 1000,
            loss: 0.0,
            seed: 1,
            mss: 1448,
            rcv_buf: 4 << 20,
            window_scale: 7,
            read_bps: None,
            read_chunk: 64 * 1024,
            app_bps: None,
            app_chunk: 128 * 1024,
            bytes: 4 << 20,
            timestamps: true,
            sender_tick_ms: 1,
            vantage: 0.0,
            handshake: true,
            duplicate_frames: None,
            max_ns: 60_000_000_000,
            initial_ssthresh: None,
            rpc: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A data segment reaches the receiver: (seq, len, fin, tsval).
    Data(u64, u32, bool, u32),
    /// An ACK reaches the sender: (ack, window bytes, tsval, fin).
    Ack(u64, u64, u32, bool),
    Rto(u64),
    Persist(u64),
    DelAck(u64),
    AppWrite,
    Read,
    /// The receiver sends its next request or reply (RPC workload): its XID.
    RpcSend(u32),
    /// A receiver's segment with a record reaches the sender: (length, ack, window bytes,
    /// tsval, XID).
    RpcArrive(u32, u64, u64, u32, u32),
    /// The sender's application writes the record of this XID (RPC workload).
    RpcAppend(u32),
}

struct Sender {
    una: u64,
    nxt: u64,
    max_sent: u64,
    cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    recover: Option<u64>,
    rwnd: u64,
    app_limit: u64,
    rto_gen: u64,
    rto_backoff: u32,
    persist_gen: u64,
    ts_recent: u32,
    fin_sent: bool,
    ip_id: u16,
}

struct Receiver {
    nxt: u64,
    buffered: u64,
    ooo: BTreeMap<u64, u64>,
    unacked_segments: u32,
    delack_gen: u64,
    last_window: u64,
    ts_recent: u32,
    fin: bool,
    ip_id: u16,
}

struct World<'a> {
    p: &'a PathSim,
    now: i64,
    q: BinaryHeap<Reverse<(i64, u64, Event)>>,
    n: u64,
    rng: Rng,
    /// Delays of the copies (apart from `rng`, so copies leave the transfer unchanged).
    copy_rng: Rng,
    link_free: i64,
    departures: std::collections::VecDeque<i64>,
    out: Vec<(i64, Vec<u8>)>,
    s: Sender,
    r: Receiver,
    done: bool,
    /// The RPC workload's state.
    rpc: Option<rpc::RpcState>,
}

/// Simulates the transfer and returns the frames seen at the capture point, in time order.
pub fn simulate(p: &PathSim) -> Vec<(i64, Vec<u8>)> {
    let mut w = World {
        p,
        now: 0,
        q: BinaryHeap::new(),
        n: 0,
        rng: Rng::new(p.seed),
        copy_rng: Rng::new(p.seed ^ 0x5eed_c0de),
        link_free: 0,
        departures: Default::default(),
        out: Vec::new(),
        s: Sender {
            una: 0,
            nxt: 0,
            max_sent: 0,
            cwnd: 10.0 * f64::from(p.mss),
            ssthresh: p
                .initial_ssthresh
                .map_or(f64::MAX, |s| f64::from(s) * f64::from(p.mss)),
            dupacks: 0,
            recover: None,
            rwnd: u64::from(p.rcv_buf),
            app_limit: 0,
            rto_gen: 0,
            rto_backoff: 0,
            persist_gen: 0,
            ts_recent: 0,
            fin_sent: false,
            ip_id: 1000,
        },
        r: Receiver {
            nxt: 0,
            buffered: 0,
            ooo: BTreeMap::new(),
            unacked_segments: 0,
            delack_gen: 0,
            last_window: u64::from(p.rcv_buf),
            ts_recent: 0,
            fin: false,
            ip_id: 30000,
        },
        done: false,
        rpc: p.rpc.clone().map(rpc::RpcState::new),
    };
    w.handshake();
    if w.rpc.is_some() {
        w.rpc_start();
    } else if p.app_bps.is_some() {
        w.at(w.now, Event::AppWrite);
    } else {
        w.s.app_limit = p.bytes;
    }
    if p.read_bps.is_some() {
        let dt = w.read_interval();
        w.at(w.now + dt, Event::Read);
    }
    w.send();
    while let Some(Reverse((t, _, e))) = w.q.pop() {
        if t > p.max_ns || w.done {
            break;
        }
        w.now = t;
        w.event(e);
    }
    w.out.sort_by_key(|f| f.0);
    w.out
}

impl World<'_> {
    fn at(&mut self, t: i64, e: Event) {
        self.n += 1;
        self.q.push(Reverse((t, self.n, e)));
    }

    fn one_way(&self) -> i64 {
        self.p.rtt_ns / 2
    }

    fn tsval(&self, receiver: bool) -> u32 {
        // clocks with different origins and ticks
        if receiver {
            (self.now / 1_000_000) as u32 + 500_000
        } else {
            (self.now / (1_000_000 * i64::from(self.p.sender_tick_ms.max(1)))) as u32 + 7
        }
    }

    fn capture(&mut self, t: i64, seg: Seg) {
        self.capture_with(t, seg, &[]);
    }

    /// Captures `seg` carrying `payload` (zeros beyond it).
    fn capture_with(&mut self, t: i64, seg: Seg, payload: &[u8]) {
        self.out.push((t, tcp_frame_with(&seg, payload)));
        if let Some(max) = self.p.duplicate_frames {
            let copy = Seg { ttl: 63, ..seg };
            let delay = 1_000 + self.copy_rng.below(max.max(1) as usize) as i64;
            self.out.push((t + delay, tcp_frame_with(&copy, payload)));
        }
    }

    fn handshake(&mut self) {
        let ow = self.one_way();
        let f = self.p.vantage;
        let syn_opts = Some((
            self.p.mss as u16 + 12 * u16::from(self.p.timestamps),
            self.p.window_scale,
        ));
        let ts = |v: u32, e: u32| self.p.timestamps.then_some((v, e));
        if self.p.handshake {
            let t_syn = (f * ow as f64) as i64;
            let syn = Seg {
                src: SND,
                dst: RCV,
                seq: ISN_S,
                flags: SYN,
                window: 64240,
                syn_opts,
                ip_id: self.s.ip_id,
                timestamps: ts(7, 0),
                ..Seg::default()
            };
            self.capture(t_syn, syn);
            let t_synack = ow + ((1.0 - f) * ow as f64) as i64;
            let synack = Seg {
                src: RCV,
                dst: SND,
                seq: ISN_R,
                ack: ISN_S + 1,
                flags: SYN | ACK,
                window: (self.p.rcv_buf.min(65535)) as u16,
                syn_opts,
                ip_id: self.r.ip_id,
                timestamps: ts(500_000 + (ow / 1_000_000) as u32, 7),
                ..Seg::default()
            };
            self.capture(t_synack, synack);
        }
        self.now = 2 * ow;
        self.s.ts_recent = 500_000 + (ow / 1_000_000) as u32;
        self.r.ts_recent = 7;
        let ack = self.ack_seg(false, 0);
        let ack = Seg {
            src: SND,
            dst: RCV,
            seq: ISN_S + 1,
            ack: ISN_R + 1,
            window: 502,
            ..ack
        };
        if self.p.handshake {
            self.capture(self.now + (f * ow as f64) as i64, ack);
        }
    }

    /// A segment from the receiver (ACK) with its current window.
    fn ack_seg(&mut self, fin: bool, window: u64) -> Seg {
        self.r.ip_id = self.r.ip_id.wrapping_add(1);
        Seg {
            src: RCV,
            dst: SND,
            seq: (ISN_R + 1).wrapping_add(self.rpc.as_ref().map_or(0, |r| r.r_sent as u32)),
            ack: ISN_S.wrapping_add(1).wrapping_add(self.r.nxt as u32),
            flags: ACK | if fin { FIN } else { 0 },
            window: (window >> self.p.window_scale).min(65535) as u16,
            ip_id: self.r.ip_id,
            timestamps: self
                .p
                .timestamps
                .then(|| (self.tsval(true), self.r.ts_recent)),
            ..Seg::default()
        }
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Data(seq, len, fin, tsval) => self.receive(seq, len, fin, tsval),
            Event::Ack(ack, wnd, tsval, fin) => self.on_ack(ack, wnd, tsval, fin),
            Event::Rto(g) if g == self.s.rto_gen && self.s.una < self.s.max_sent => {
                let flight = (self.s.max_sent - self.s.una) as f64;
                self.s.ssthresh = (flight / 2.0).max(2.0 * f64::from(self.p.mss));
                self.s.cwnd = f64::from(self.p.mss);
                self.s.nxt = self.s.una;
                self.s.recover = None;
                self.s.dupacks = 0;
                self.s.rto_backoff = (self.s.rto_backoff + 1).min(6);
                self.send();
            }
            Event::Persist(g) if g == self.s.persist_gen && self.s.rwnd == 0 => {
                if self.s.nxt < self.s.app_limit {
                    // BSD-style persist probe: one byte at the next sequence.
                    self.transmit(self.s.nxt, 1, false);
                }
                self.s.persist_gen += 1;
                let g = self.s.persist_gen;
                self.at(self.now + PERSIST_NS, Event::Persist(g));
            }
            Event::DelAck(g) if g == self.r.delack_gen && self.r.unacked_segments > 0 => {
                self.send_ack(false);
            }
            Event::AppWrite => {
                self.s.app_limit =
                    (self.s.app_limit + u64::from(self.p.app_chunk)).min(self.p.bytes);
                if self.s.app_limit < self.p.bytes {
                    let dt =
                        f64::from(self.p.app_chunk) * 8.0 / self.p.app_bps.unwrap_or(1e9) * 1e9;
                    self.at(self.now + dt as i64, Event::AppWrite);
                }
                self.send();
            }
            Event::RpcSend(xid) => self.rpc_send(xid),
            Event::RpcArrive(len, ack, wnd, tsval, xid) => {
                self.rpc_arrive(len, ack, wnd, tsval, xid)
            }
            Event::RpcAppend(xid) => self.rpc_append(xid),
            Event::Read => {
                self.r.buffered = self.r.buffered.saturating_sub(u64::from(self.p.read_chunk));
                let w = self.window();
                let mss = u64::from(self.p.mss);
                // Window update once the window reopens by a useful amount.
                if self.r.last_window < mss && w >= (u64::from(self.p.rcv_buf) / 4).max(mss) {
                    self.send_ack(false);
                }
                let dt = self.read_interval();
                self.at(self.now + dt, Event::Read);
            }
            _ => {}
        }
    }

    fn read_interval(&self) -> i64 {
        (f64::from(self.p.read_chunk) * 8.0 / self.p.read_bps.unwrap_or(1e9) * 1e9) as i64
    }

    fn window(&self) -> u64 {
        let free = u64::from(self.p.rcv_buf).saturating_sub(self.r.buffered);
        let mss = u64::from(self.p.mss);
        // Receiver silly-window avoidance: no window below one MSS.
        let w = if free < mss.min(u64::from(self.p.rcv_buf) / 2) {
            0
        } else {
            free
        };
        w >> self.p.window_scale << self.p.window_scale
    }

    fn send_ack(&mut self, fin: bool) {
        let w = self.window();
        self.r.last_window = w;
        self.r.unacked_segments = 0;
        self.r.delack_gen += 1;
        let seg = self.ack_seg(fin, w);
        let ow = self.one_way();
        let t_cap = self.now + ((1.0 - self.p.vantage) * ow as f64) as i64;
        self.capture(t_cap, seg);
        let tsval = self.tsval(true);
        self.at(self.now + ow, Event::Ack(self.r.nxt, w, tsval, fin));
    }

    fn receive(&mut self, seq: u64, len: u32, fin: bool, tsval: u32) {
        let end = seq + u64::from(len);
        let mut immediate = false;
        if len > 0
            && seq >= self.r.nxt
            && self.r.buffered + u64::from(len) > u64::from(self.p.rcv_buf)
        {
            // No room in the buffer (a probe into a closed window): dropped, answered.
            self.send_ack(false);
            return;
        }
        if seq <= self.r.nxt {
            if end > self.r.nxt {
                self.r.buffered += end - self.r.nxt;
                self.r.nxt = end;
                self.r.ts_recent = tsval;
                while let Some((&s, &e)) = self.r.ooo.iter().next() {
                    if s > self.r.nxt {
                        break;
                    }
                    self.r.ooo.remove(&s);
                    if e > self.r.nxt {
                        self.r.buffered += e - self.r.nxt;
                        self.r.nxt = e;
                        immediate = true;
                    }
                }
            } else {
                immediate = true;
            }
        } else {
            self.r.ooo.insert(seq, end);
            immediate = true;
        }
        if self.p.read_bps.is_none() {
            self.r.buffered = 0;
        }
        if self.rpc.is_some() {
            self.rpc_delivered();
        }
        if fin && seq + u64::from(len) == self.r.nxt && self.r.nxt == self.p.bytes {
            self.r.fin = true;
            self.r.nxt += 1;
            self.send_ack(true);
            return;
        }
        self.r.unacked_segments += 1;
        if immediate || self.r.unacked_segments >= 2 {
            self.send_ack(false);
        } else {
            let g = self.r.delack_gen;
            self.at(self.now + DELACK_NS, Event::DelAck(g));
        }
    }

    fn on_ack(&mut self, ack: u64, wnd: u64, tsval: u32, fin: bool) {
        let mss = f64::from(self.p.mss);
        self.s.ts_recent = tsval;
        let old_wnd = self.s.rwnd;
        self.s.rwnd = wnd;
        if fin {
            // The receiver's FIN: the last ACK, and the transfer is over.
            let seg = Seg {
                src: SND,
                dst: RCV,
                seq: ISN_S.wrapping_add(2).wrapping_add(self.p.bytes as u32),
                ack: ISN_R + 2,
                flags: ACK,
                window: 502,
                ip_id: self.s.ip_id.wrapping_add(1),
                timestamps: self.p.timestamps.then(|| (self.tsval(false), tsval)),
                ..Seg::default()
            };
            let t = self.now + (self.p.vantage * self.one_way() as f64) as i64;
            self.capture(t, seg);
            self.done = true;
            return;
        }
        if ack > self.s.una {
            let acked = (ack - self.s.una) as f64;
            self.s.una = ack;
            self.s.nxt = self.s.nxt.max(ack);
            self.s.dupacks = 0;
            self.s.rto_backoff = 0;
            match self.s.recover {
                Some(r) if ack >= r => {
                    self.s.recover = None;
                    self.s.cwnd = self.s.ssthresh;
                }
                Some(_) => {
                    // NewReno partial ACK: retransmit the next hole.
                    self.retransmit_una();
                }
                None if self.s.cwnd < self.s.ssthresh => self.s.cwnd += acked,
                None => self.s.cwnd += mss * mss / self.s.cwnd,
            }
            self.arm_rto();
        } else if ack == self.s.una && self.s.una < self.s.max_sent && wnd == old_wnd {
            self.s.dupacks += 1;
            if self.s.dupacks == 3 && self.s.recover.is_none() {
                let flight = (self.s.max_sent - self.s.una) as f64;
                self.s.ssthresh = (flight / 2.0).max(2.0 * mss);
                self.s.cwnd = self.s.ssthresh + 3.0 * mss;
                self.s.recover = Some(self.s.max_sent);
                self.retransmit_una();
            } else if self.s.dupacks > 3 {
                self.s.cwnd += mss;
            }
        }
        self.send();
    }

    fn retransmit_una(&mut self) {
        let len = (self.p.mss as u64).min(self.s.max_sent - self.s.una) as u32;
        if len > 0 {
            self.transmit(self.s.una, len, false);
        }
    }

    fn arm_rto(&mut self) {
        self.s.rto_gen += 1;
        let rto = (2 * self.p.rtt_ns).max(MIN_RTO_NS) << self.s.rto_backoff;
        let g = self.s.rto_gen;
        self.at(self.now + rto, Event::Rto(g));
    }

    /// Sends what the windows and the application allow.
    fn send(&mut self) {
        let mss = u64::from(self.p.mss);
        loop {
            let flight = self.s.nxt.saturating_sub(self.s.una);
            let wnd = (self.s.cwnd as u64).min(self.s.rwnd);
            let avail = self.s.app_limit.saturating_sub(self.s.nxt);
            if avail == 0 {
                break;
            }
            let len = avail.min(mss);
            if flight + len > wnd {
                if self.s.rwnd == 0 && flight == 0 {
                    self.s.persist_gen += 1;
                    let g = self.s.persist_gen;
                    self.at(self.now + PERSIST_NS, Event::Persist(g));
                }
                break;
            }
            // Sender silly-window avoidance: no small segment while data is outstanding
            // (not for RPC, whose sockets are TCP_NODELAY).
            if len < mss && flight > 0 && self.s.nxt + len < self.p.bytes && self.rpc.is_none() {
                break;
            }
            let nxt = self.s.nxt;
            self.transmit(nxt, len as u32, false);
            self.s.nxt += len;
        }
        if self.s.una == self.p.bytes && !self.s.fin_sent && self.rpc.is_none() {
            self.s.fin_sent = true;
            self.transmit(self.p.bytes, 0, true);
        }
    }

    /// One data segment leaves the sender: captured, queued at the bottleneck, delivered.
    fn transmit(&mut self, seq: u64, len: u32, fin: bool) {
        self.s.ip_id = self.s.ip_id.wrapping_add(1);
        let tsval = self.tsval(false);
        let seg = Seg {
            src: SND,
            dst: RCV,
            seq: ISN_S.wrapping_add(1).wrapping_add(seq as u32),
            ack: (ISN_R + 1).wrapping_add(self.rpc.as_ref().map_or(0, |r| r.s_received as u32)),
            flags: ACK | PSH | if fin { FIN } else { 0 },
            window: 502,
            len: len as usize,
            ip_id: self.s.ip_id,
            timestamps: self.p.timestamps.then_some((tsval, self.s.ts_recent)),
            ..Seg::default()
        };
        // A persist probe is not outstanding data: no retransmission timer for it.
        let probe = self.s.rwnd == 0 && len == 1;
        let was_outstanding = self.s.una < self.s.max_sent;
        if !probe {
            self.s.max_sent = self.s.max_sent.max(seq + u64::from(len));
            if !was_outstanding || self.s.rto_gen == 0 {
                self.arm_rto();
            }
        }
        let payload = self
            .rpc
            .as_ref()
            .map_or(&[][..], |r| r.sender_bytes(seq, len));
        let payload = payload.to_vec();
        if self.p.vantage <= 0.0 {
            self.capture_with(self.now, seg, &payload);
        }
        // Drop-tail queue, then random loss on the link.
        while self.departures.front().is_some_and(|&d| d <= self.now) {
            self.departures.pop_front();
        }
        if self.departures.len() >= self.p.queue_packets {
            return;
        }
        let wire = f64::from(len + 52 + 12 * u32::from(self.p.timestamps) + 14);
        let tx = (wire * 8.0 / self.p.rate_bps * 1e9) as i64;
        let depart = self.link_free.max(self.now) + tx;
        self.link_free = depart;
        self.departures.push_back(depart);
        if !fin && self.p.loss > 0.0 && (self.rng.next_u64() % 1_000_000) as f64 / 1e6 < self.p.loss
        {
            return;
        }
        let ow = self.one_way();
        if self.p.vantage > 0.0 {
            self.capture_with(depart + (self.p.vantage * ow as f64) as i64, seg, &payload);
        }
        self.at(depart + ow, Event::Data(seq, len, fin, tsval));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_parameters_same_capture_and_the_link_rate_holds() {
        let p = PathSim {
            bytes: 1 << 20,
            ..PathSim::default()
        };
        let a = simulate(&p);
        assert_eq!(a, simulate(&p));
        let last = a.last().unwrap().0;
        // 1 MiB over 45 Mbit/s takes at least 0.19 s plus the handshake and slow start
        assert!(last > 250_000_000 && last < 2_000_000_000, "{last}");
    }
}
