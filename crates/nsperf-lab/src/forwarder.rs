//! The forwarder: a thread reads the TUN devices of its source sites (two per thread, see
//! [`crate::emulator`]) in batches and carries each packet along its route — one direction
//! of a mesh link, or the hops of a star or dumbbell — asking each direction's
//! [`LinkModel`](crate::model::LinkModel) what happens to it. A packet whose time on a hop has not come waits in this thread's delay line and
//! continues from there when it has; the last hop writes it to the destination site's TUN
//! device. The real clock is read here and nowhere in the model.
//!
//! Speed: super-packets (TSO/USO, up to 64 KiB) travel as one unit while the models count
//! their wire segments; packets due at once are written straight from the receive buffer;
//! held buffers are recycled through size-classed free lists and the delay line is bounded
//! by the lab's memory budget (a packet beyond it is dropped before the link and counted as
//! an overrun), so the steady state allocates nothing; an idle thread busy-polls for
//! [`SPIN_NS`] before sleeping in `ppoll` with a 1 ns timer slack.
//!
//! With a per-packet impairment (loss, reorder, duplicate, corrupt) or a capture on a
//! direction a source's packets cross, that source device's segmentation offloads are turned
//! off, so the kernel hands over wire packets and each is decided (and recorded) alone;
//! corrupt also turns checksum offload off, so the receiver verifies checksums as it would
//! on a real wire.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use nsperf_core::Clock;

use crate::capture::Fate;
use crate::fabric::Fabric;
use crate::model::{Delivery, Verdict, WirePacket};
use crate::packet::{corrupt, fill_checksum, ipv4_dst, wire_size};
use crate::rng::Rng;
use crate::topology::Route;
use crate::tun::{Tun, VNET_HDR_LEN, VnetHdr, offload};

/// How long an idle forwarder spins before it sleeps.
pub const SPIN_NS: u64 = 50_000;
/// Longest sleep of an idle forwarder (it then looks for parameter changes).
pub const IDLE_WAKE_NS: u64 = 100_000_000;
/// Most packets read per wake-up before due packets are released again.
pub const BATCH: usize = 64;

const CLASSES: [usize; 3] = [
    VNET_HDR_LEN + 2048,
    VNET_HDR_LEN + 9216 + 128,
    VNET_HDR_LEN + 65535 + 128,
];

/// Where a packet is on its way.
#[derive(Debug, Clone, Copy)]
struct Trip {
    /// The site whose device it was read from (its counters take a failed write).
    src: u16,
    dst: u16,
    route: Route,
    hop: u8,
    /// When it entered the current hop.
    entered_ns: u64,
    wire: WirePacket,
    /// Its fate on the current hop.
    delivery: Delivery,
    /// A hop duplicated it: write it twice at the end.
    dup: bool,
}

enum Next {
    Done,
    Hold,
    Write,
}

struct Held {
    buf: Box<[u8]>,
    class: usize,
    len: usize,
    trip: Trip,
}

/// What a forwarder counts per source site, published to the [`Fabric`].
#[derive(Debug, Clone, Copy, Default)]
struct SiteCounts {
    unroutable: u64,
    overrun: u64,
    write_errors: u64,
}

/// The forwarding loop of a group of source sites.
pub struct Forwarder {
    /// The sites whose devices this thread reads.
    srcs: Vec<usize>,
    fabric: Arc<Fabric>,
    tuns: Arc<Vec<Tun>>,
    rng: Rng,
    rx: Box<[u8]>,
    held: Vec<Held>,
    free_slots: Vec<u32>,
    free_bufs: [Vec<Box<[u8]>>; 3],
    line: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
    generation: u64,
    /// The offloads each source device has now (parallel to `srcs`).
    offloads: Vec<u32>,
    /// Per site of the lab; only the entries of `srcs` move.
    counts: Vec<SiteCounts>,
}

/// Records a packet on a captured direction (the caller holds the direction's model lock).
fn record(fabric: &Fabric, d: usize, t_ns: u64, frame: &[u8], segments: u32, fate: Fate) {
    let Some(sink) = fabric.sink() else { return };
    let ip = frame.get(VNET_HDR_LEN..).unwrap_or(&[]);
    let hdr = VnetHdr::parse(frame).unwrap_or_default();
    sink.record(d & 1, t_ns, ip, segments, &fate, |copy| {
        fill_checksum(copy, &hdr);
    });
}

/// Carries a packet along its route from `trip.hop`, entering that hop at
/// `trip.entered_ns` when `arriving`, else leaving it (its delivery time has come).
fn cross(
    fabric: &Fabric,
    rng: &mut Rng,
    now: u64,
    frame: &mut [u8],
    trip: &mut Trip,
    arriving: bool,
) -> Next {
    let mut arriving = arriving;
    let segs = trip.wire.segments;
    loop {
        let d = usize::from(trip.route.hops()[usize::from(trip.hop)]);
        let mut m = fabric.model(d);
        if arriving {
            match m.offer(trip.entered_ns, trip.wire, rng) {
                Verdict::Drop(reason) => {
                    if fabric.captured(d) {
                        record(
                            fabric,
                            d,
                            trip.entered_ns,
                            frame,
                            segs,
                            Fate::Dropped(reason),
                        );
                    }
                    return Next::Done;
                }
                Verdict::Deliver(dl) => {
                    trip.delivery = dl;
                    if dl.at_ns > now {
                        return Next::Hold;
                    }
                }
            }
        }
        let dl = trip.delivery;
        if !m.release(trip.wire, &dl) {
            if fabric.captured(d) {
                record(fabric, d, dl.at_ns, frame, segs, Fate::DroppedInFlight);
            }
            return Next::Done;
        }
        if dl.corrupt {
            corrupt(frame, rng.next_u64());
        }
        if fabric.captured(d) {
            let delay_ns = dl.at_ns.saturating_sub(trip.entered_ns);
            for duplicate in [false, true]
                .into_iter()
                .take(1 + usize::from(dl.duplicate))
            {
                let fate = Fate::Delivered {
                    delay_ns,
                    duplicate,
                    corrupted: dl.corrupt,
                };
                record(fabric, d, dl.at_ns, frame, segs, fate);
            }
        }
        drop(m);
        trip.dup |= dl.duplicate;
        trip.hop += 1;
        if usize::from(trip.hop) == trip.route.hops().len() {
            return Next::Write;
        }
        trip.entered_ns = dl.at_ns;
        arriving = true;
    }
}

impl Forwarder {
    /// A forwarder for packets leaving the sites `srcs`.
    pub fn new(srcs: Vec<usize>, fabric: Arc<Fabric>, tuns: Arc<Vec<Tun>>, seed: u64) -> Self {
        let cap = 4096;
        Forwarder {
            offloads: vec![offload::ALL; srcs.len()],
            counts: vec![SiteCounts::default(); tuns.len()],
            srcs,
            rng: Rng::seeded(seed),
            rx: vec![0u8; CLASSES[2]].into_boxed_slice(),
            held: Vec::with_capacity(cap),
            free_slots: Vec::with_capacity(cap),
            free_bufs: [Vec::new(), Vec::new(), Vec::new()],
            line: BinaryHeap::with_capacity(cap),
            seq: 0,
            generation: fabric.generation.load(Ordering::Acquire),
            fabric,
            tuns,
        }
    }

    /// The offloads source site `src`'s device may have under the parameters now.
    fn wanted_offloads(&self, src: usize) -> u32 {
        let mut per_packet = false;
        let mut corrupting = false;
        let layout = &self.fabric.layout;
        for dst in (0..layout.sites.len()).filter(|&d| d != src) {
            for &d in layout.route(src, dst).hops() {
                let d = usize::from(d);
                let p = self.fabric.params(d);
                per_packet |= p.needs_per_packet() || self.fabric.captured(d);
                corrupting |= p.corrupt > 0.0;
            }
        }
        if corrupting {
            0
        } else if per_packet {
            offload::CSUM
        } else {
            offload::ALL
        }
    }

    /// Looks at the parameters again after a change: the offloads of the source devices.
    fn reload(&mut self) {
        let g = self.fabric.generation.load(Ordering::Acquire);
        if g == self.generation {
            return;
        }
        self.generation = g;
        for i in 0..self.srcs.len() {
            let src = self.srcs[i];
            let want = self.wanted_offloads(src);
            if want != self.offloads[i] && self.tuns[src].set_offload(want).is_ok() {
                self.offloads[i] = want;
            }
            self.fabric.applied[src].store(g, Ordering::Release);
        }
    }

    fn publish(&self) {
        for &src in &self.srcs {
            let c = &self.counts[src];
            self.fabric.unroutable[src].store(c.unroutable, Ordering::Relaxed);
            self.fabric.overrun[src].store(c.overrun, Ordering::Relaxed);
            self.fabric.write_errors[src].store(c.write_errors, Ordering::Relaxed);
        }
    }

    fn write_out(&mut self, trip: &Trip, frame: &[u8]) {
        for _ in 0..1 + usize::from(trip.dup) {
            if self.tuns[usize::from(trip.dst)].write(frame).is_err() {
                self.counts[usize::from(trip.src)].write_errors += 1;
            }
        }
    }

    /// Carries on every held packet due at `now`; true if any was.
    fn release_due(&mut self, now: u64) -> bool {
        let mut any = false;
        while let Some(&Reverse((at, _, slot))) = self.line.peek() {
            if at > now {
                break;
            }
            self.line.pop();
            any = true;
            let h = &mut self.held[slot as usize];
            let (len, class, mut trip) = (h.len, h.class, h.trip);
            let mut buf = std::mem::take(&mut h.buf);
            match cross(
                &self.fabric,
                &mut self.rng,
                now,
                &mut buf[..len],
                &mut trip,
                false,
            ) {
                Next::Hold => {
                    // Next hop: the same buffer waits again.
                    let h = &mut self.held[slot as usize];
                    h.buf = buf;
                    h.trip = trip;
                    self.seq += 1;
                    self.line
                        .push(Reverse((trip.delivery.at_ns, self.seq, slot)));
                    continue;
                }
                Next::Write => self.write_out(&trip, &buf[..len]),
                Next::Done => {}
            }
            self.fabric
                .held_bytes
                .fetch_sub(CLASSES[class] as u64, Ordering::Relaxed);
            self.free_bufs[class].push(buf);
            self.free_slots.push(slot);
        }
        any
    }

    /// Moves the packet in the receive buffer into the delay line.
    fn hold(&mut self, len: usize, trip: Trip) {
        let class = CLASSES.iter().position(|&c| len <= c).unwrap_or(2);
        self.fabric
            .held_bytes
            .fetch_add(CLASSES[class] as u64, Ordering::Relaxed);
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
            trip,
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
        self.line
            .push(Reverse((trip.delivery.at_ns, self.seq, slot)));
    }

    fn on_packet(&mut self, src: usize, now: u64, len: usize) {
        let frame = &self.rx[..len];
        let n = self.fabric.layout.sites.len();
        let dst = match ipv4_dst(frame) {
            Some(a) if a.octets()[..3] == [10, 77, 0] => usize::from(a.octets()[3]).wrapping_sub(1),
            _ => usize::MAX,
        };
        if dst >= n || dst == src {
            self.counts[src].unroutable += 1;
            return;
        }
        // The delay lines are bounded: with the budget held, a packet is dropped before it
        // enters the link (the sender sees loss, as at a full router).
        if self.fabric.held_bytes.load(Ordering::Relaxed) + CLASSES[2] as u64
            > self.fabric.memory_limit
        {
            self.counts[src].overrun += 1;
            return;
        }
        let mut trip = Trip {
            src: src as u16,
            dst: dst as u16,
            route: self.fabric.layout.route(src, dst),
            hop: 0,
            entered_ns: now,
            wire: wire_size(frame),
            delivery: Delivery {
                at_ns: now,
                duplicate: false,
                corrupt: false,
                reordered: false,
            },
            dup: false,
        };
        let mut rx = std::mem::take(&mut self.rx);
        let next = cross(
            &self.fabric,
            &mut self.rng,
            now,
            &mut rx[..len],
            &mut trip,
            true,
        );
        self.rx = rx;
        match next {
            Next::Done => {}
            Next::Write => {
                let rx = std::mem::take(&mut self.rx);
                self.write_out(&trip, &rx[..len]);
                self.rx = rx;
            }
            Next::Hold => self.hold(len, trip),
        }
    }

    /// Reads up to [`BATCH`] packets from each source device; true if any came.
    fn read_batches(&mut self, now: &mut u64) -> bool {
        let clock = self.fabric.clock;
        let mut any = false;
        for i in 0..self.srcs.len() {
            let src = self.srcs[i];
            for _ in 0..BATCH {
                let mut rx = std::mem::take(&mut self.rx);
                let r = self.tuns[src].read(&mut rx);
                self.rx = rx;
                match r {
                    Ok(len) if len > VNET_HDR_LEN => {
                        any = true;
                        // A packet entered the link no earlier than it was read: the clock
                        // read before the read (before a release or a preemption) would
                        // let it leave early by as long as this thread waited.
                        *now = clock.now_ns();
                        self.on_packet(src, *now, len);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        any
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
        let clock = self.fabric.clock;
        let mut pfds: Vec<libc::pollfd> = self
            .srcs
            .iter()
            .map(|&s| libc::pollfd {
                fd: self.tuns[s].raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut last_busy = 0u64;
        let mut last_publish = 0u64;
        loop {
            if self.fabric.stop.load(Ordering::Relaxed) {
                break;
            }
            self.reload();
            let mut now = clock.now_ns();
            let mut busy = self.release_due(now);
            busy |= self.read_batches(&mut now);
            if busy {
                self.fabric.activity.fetch_add(1, Ordering::Relaxed);
                last_busy = now;
                if now.saturating_sub(last_publish) > 1_000_000 {
                    self.publish();
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
            self.publish();
            last_publish = now;
            let wait = next
                .map(|at| at.saturating_sub(now) - SPIN_NS / 2)
                .unwrap_or(u64::MAX)
                .min(IDLE_WAKE_NS);
            let ts = libc::timespec {
                tv_sec: (wait / 1_000_000_000) as libc::time_t,
                tv_nsec: (wait % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: valid pollfds, a valid timespec, no signal mask.
            unsafe {
                libc::ppoll(
                    pfds.as_mut_ptr(),
                    pfds.len() as libc::nfds_t,
                    &ts,
                    std::ptr::null(),
                );
            }
            last_busy = clock.now_ns();
        }
        self.publish();
    }
}
