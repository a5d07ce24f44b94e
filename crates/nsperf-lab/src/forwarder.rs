//! The forwarder: one thread per source site reads that site's TUN device in batches, asks
//! the [`LinkModel`] of the packet's direction what happens to it, holds it in a delay line
//! until its delivery time and writes it to the destination site's TUN device. The real
//! clock is read here and nowhere in the model.
//!
//! Speed: super-packets (TSO/USO, up to 64 KiB) travel as one unit while the model counts
//! their wire segments; packets due at once are written straight from the receive buffer;
//! buffers are recycled through size-classed free lists, so the steady state allocates
//! nothing; an idle thread busy-polls for [`SPIN_NS`] before sleeping in `ppoll` with a
//! 1 ns timer slack, so wake-up latency stays in microseconds.
//!
//! With a per-packet impairment (loss, reorder, duplicate, corrupt) on a direction, the
//! source device's segmentation offloads are turned off, so the kernel hands over wire
//! packets and each is decided on alone; corrupt also turns checksum offload off, so the
//! receiver verifies checksums as it would on a real wire.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use nsperf_core::Clock;

use crate::emulator::{DirectionState, Shared};
use crate::model::{Delivery, LinkModel, Verdict, WirePacket};
use crate::packet::{corrupt, ipv4_dst, wire_size};
use crate::rng::Rng;
use crate::tun::{Tun, VNET_HDR_LEN, offload};

/// How long an idle forwarder spins before it sleeps.
pub const SPIN_NS: u64 = 50_000;
/// Most packets read per wake-up before due packets are released again.
pub const BATCH: usize = 64;

const CLASSES: [usize; 3] = [
    VNET_HDR_LEN + 2048,
    VNET_HDR_LEN + 9216 + 128,
    VNET_HDR_LEN + 65535 + 128,
];

struct Held {
    buf: Box<[u8]>,
    class: usize,
    len: usize,
    dst: usize,
    wire: WirePacket,
    delivery: Delivery,
}

/// The forwarding loop of one source site.
pub struct Forwarder {
    src: usize,
    shared: Arc<Shared>,
    tuns: Arc<Vec<Tun>>,
    links: Vec<LinkModel>,
    rng: Rng,
    rx: Box<[u8]>,
    held: Vec<Held>,
    free_slots: Vec<u32>,
    free_bufs: [Vec<Box<[u8]>>; 3],
    line: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
    generation: u64,
    offloads: u32,
    unroutable: u64,
    write_errors: u64,
}

impl Forwarder {
    /// A forwarder for packets leaving site `src`.
    pub fn new(src: usize, shared: Arc<Shared>, tuns: Arc<Vec<Tun>>, seed: u64) -> Self {
        let n = shared.sites.len();
        let params = shared.params.lock().map(|p| p.clone()).unwrap_or_default();
        let links = (0..n)
            .map(|d| LinkModel::new(params[src * n + d]))
            .collect();
        Forwarder {
            src,
            links,
            rng: Rng::seeded(seed),
            rx: vec![0u8; CLASSES[2]].into_boxed_slice(),
            held: Vec::with_capacity(4096),
            free_slots: Vec::with_capacity(4096),
            free_bufs: [Vec::new(), Vec::new(), Vec::new()],
            line: BinaryHeap::with_capacity(4096),
            seq: 0,
            generation: shared.generation.load(Ordering::Acquire),
            offloads: offload::ALL,
            unroutable: 0,
            write_errors: 0,
            shared,
            tuns,
        }
    }

    fn reload(&mut self) {
        let g = self.shared.generation.load(Ordering::Acquire);
        if g == self.generation {
            return;
        }
        self.generation = g;
        let n = self.links.len();
        let params = match self.shared.params.lock() {
            Ok(p) => p.clone(),
            Err(_) => return,
        };
        let mut per_packet = false;
        let mut corrupting = false;
        for (d, link) in self.links.iter_mut().enumerate() {
            let p = params[self.src * n + d];
            if d != self.src {
                per_packet |= p.needs_per_packet();
                corrupting |= p.corrupt > 0.0;
            }
            link.set_params(p);
        }
        let want = if corrupting {
            0
        } else if per_packet {
            offload::CSUM
        } else {
            offload::ALL
        };
        if want != self.offloads && self.tuns[self.src].set_offload(want).is_ok() {
            self.offloads = want;
        }
    }

    fn publish(&mut self, now: u64) {
        let n = self.links.len();
        for (d, link) in self.links.iter_mut().enumerate() {
            if d == self.src {
                continue;
            }
            let (qp, qb) = link.queue_occupancy(now);
            if let Ok(mut s) = self.shared.directions[self.src * n + d].lock() {
                *s = DirectionState {
                    counters: *link.counters(),
                    queue_packets: qp,
                    queue_bytes: qb,
                };
            }
        }
        self.shared.unroutable[self.src].store(self.unroutable, Ordering::Relaxed);
        self.shared.write_errors[self.src].store(self.write_errors, Ordering::Relaxed);
    }

    fn write_out(&mut self, dst: usize, frame: &mut [u8], d: &Delivery) {
        if d.corrupt {
            corrupt(frame, self.rng.next_u64());
        }
        let copies = if d.duplicate { 2 } else { 1 };
        for _ in 0..copies {
            if self.tuns[dst].write(frame).is_err() {
                self.write_errors += 1;
            }
        }
    }

    /// Releases every held packet due at `now`; true if any was.
    fn release_due(&mut self, now: u64) -> bool {
        let mut any = false;
        while let Some(&Reverse((at, _, slot))) = self.line.peek() {
            if at > now {
                break;
            }
            self.line.pop();
            any = true;
            let h = &mut self.held[slot as usize];
            let (dst, wire, delivery, len) = (h.dst, h.wire, h.delivery, h.len);
            let mut buf = std::mem::take(&mut h.buf);
            if self.links[dst].release(wire, &delivery) {
                self.write_out(dst, &mut buf[..len], &delivery);
            }
            let class = self.held[slot as usize].class;
            self.free_bufs[class].push(buf);
            self.free_slots.push(slot);
        }
        any
    }

    fn hold(&mut self, len: usize, dst: usize, wire: WirePacket, delivery: Delivery) {
        let class = CLASSES.iter().position(|&c| len <= c).unwrap_or(2);
        let buf = if class == 2 {
            // Keep the large receive buffer itself; take a fresh one for the next read.
            let fresh = self.free_bufs[2]
                .pop()
                .unwrap_or_else(|| vec![0u8; CLASSES[2]].into_boxed_slice());
            std::mem::replace(&mut self.rx, fresh)
        } else {
            let mut b = self.free_bufs[class]
                .pop()
                .unwrap_or_else(|| vec![0u8; CLASSES[class]].into_boxed_slice());
            b[..len].copy_from_slice(&self.rx[..len]);
            b
        };
        let h = Held {
            buf,
            class,
            len,
            dst,
            wire,
            delivery,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.held[s as usize] = h;
                s
            }
            None => {
                self.held.push(h);
                (self.held.len() - 1) as u32
            }
        };
        self.seq += 1;
        self.line.push(Reverse((delivery.at_ns, self.seq, slot)));
    }

    fn on_packet(&mut self, now: u64, len: usize) {
        let frame = &self.rx[..len];
        let n = self.links.len();
        let dst = match ipv4_dst(frame) {
            Some(a) if a.octets()[..3] == [10, 77, 0] => usize::from(a.octets()[3]).wrapping_sub(1),
            _ => usize::MAX,
        };
        if dst >= n || dst == self.src {
            self.unroutable += 1;
            return;
        }
        let wire = wire_size(frame);
        match self.links[dst].offer(now, wire, &mut self.rng) {
            Verdict::Drop(_) => {}
            Verdict::Deliver(d) if d.at_ns <= now => {
                if self.links[dst].release(wire, &d) {
                    let mut rx = std::mem::take(&mut self.rx);
                    self.write_out(dst, &mut rx[..len], &d);
                    self.rx = rx;
                }
            }
            Verdict::Deliver(d) => self.hold(len, dst, wire, d),
        }
    }

    /// Runs until the shared stop flag is set.
    pub fn run(mut self) {
        // SAFETY: prctl with plain integer arguments; 1 ns slack makes ppoll wake on time.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        }
        // The link must keep its timing while the machine is busy (builds, the test's own
        // senders): the forwarder thread runs at nice -20 when allowed (root). Not real-time
        // priority: a flood keeps it busy, and it must not starve the rest of the system.
        // SAFETY: setpriority on this thread's own id.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, -20);
        }
        let clock = self.shared.clock;
        let fd = self.tuns[self.src].raw_fd();
        let mut last_busy = 0u64;
        let mut last_publish = 0u64;
        loop {
            if self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            self.reload();
            let mut now = clock.now_ns();
            let mut busy = self.release_due(now);
            for _ in 0..BATCH {
                let mut rx = std::mem::take(&mut self.rx);
                let r = self.tuns[self.src].read(&mut rx);
                self.rx = rx;
                match r {
                    Ok(len) if len > VNET_HDR_LEN => {
                        busy = true;
                        self.on_packet(now, len);
                        now = clock.now_ns();
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            if busy {
                last_busy = now;
                if now.saturating_sub(last_publish) > 1_000_000 {
                    self.publish(now);
                    last_publish = now;
                }
                continue;
            }
            let next = self.line.peek().map(|Reverse((at, _, _))| *at);
            if now.saturating_sub(last_busy) < SPIN_NS
                || next.is_some_and(|at| at.saturating_sub(now) < SPIN_NS)
            {
                std::hint::spin_loop();
                continue;
            }
            self.publish(now);
            last_publish = now;
            let wait = next
                .map(|at| at.saturating_sub(now) - SPIN_NS / 2)
                .unwrap_or(u64::MAX)
                .min(100_000_000);
            let ts = libc::timespec {
                tv_sec: (wait / 1_000_000_000) as libc::time_t,
                tv_nsec: (wait % 1_000_000_000) as libc::c_long,
            };
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, a valid timespec, no signal mask.
            unsafe {
                libc::ppoll(&mut pfd, 1, &ts, std::ptr::null());
            }
            last_busy = clock.now_ns();
        }
        self.publish(clock.now_ns());
    }
}
