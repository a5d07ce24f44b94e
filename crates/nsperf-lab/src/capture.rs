//! Capture on an emulated link (`nsperf lab capture LAB LINK -w FILE`): every packet that
//! enters either direction of the link is recorded once, in pcapng, with its fate as the
//! packet's comment — `delay 25.013417 ms` when it left the link (timestamped when it left),
//! `dropped: queue full` / `random loss` / `link down` when the emulator dropped it. A
//! packet dropped on entry is written where it would have left the link: just ahead of the
//! first packet that entered after it, with that packet's timestamp — so every direction's
//! records keep the order the packets entered in and stay in time order (written at drop
//! time it would sit ahead of the packets still on the link, and read to `nsperf trace` as a
//! reordering per drop). Each direction is one pcapng interface (`a -> b`) of link type
//! Ethernet, nanosecond timestamps: every record is the IP packet behind a made-up Ethernet
//! header (02:6e:73:00:00:01 is the link's first site, …:02 the second). Raw IP
//! (`LINKTYPE_RAW`, 101) would need no header, but libpcap (hence tcptrace, tcpdump and
//! every tool built on it) refuses a second raw-IP interface in a pcapng file: it compares
//! the interface's link type (101) with the DLT it mapped the first one to (`DLT_RAW`, 12 or
//! 14), "an interface has a type 101 different from the type of the first interface".
//! Ethernet's link type and DLT are both 1. The section header says the capture was
//! taken in the middle of the path, and an interface statistics block per direction gives
//! the packets that entered and the drops.
//!
//! Consistency with the emulator's counters: a record is written while the forwarder holds
//! the direction's model lock, and the capture is switched on and off under the same lock
//! with a snapshot of the counters, so the records match the counters' change exactly.
//! Records go to an in-memory buffer that a writer thread empties to the file; a buffer over
//! [`MAX_PENDING`] (the disk cannot keep up) loses records, which are counted.
//!
//! The block encoders are pure and allocation-free on a reused buffer.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::model::{DirectionCounters, DropReason};

/// Most bytes waiting for the writer before records are lost.
pub const MAX_PENDING: usize = 64 << 20;
/// pcapng `LINKTYPE_ETHERNET`: each record starts with an Ethernet header.
pub const LINKTYPE_ETHERNET: u16 = 1;
/// The made-up Ethernet header in front of each recorded IP packet.
pub const ETHERNET_HEADER_BYTES: usize = 14;

/// Appends the made-up Ethernet header of a packet on interface `iface` (direction 0 goes
/// from the link's first site to its second): locally administered addresses naming the
/// sites, the EtherType of the IP version.
fn ethernet_header(out: &mut Vec<u8>, iface: u32, ip: &[u8]) {
    let site = |n: u8| [0x02, 0x6e, 0x73, 0x00, 0x00, n];
    let (from, to) = if iface == 0 { (1, 2) } else { (2, 1) };
    out.extend_from_slice(&site(to));
    out.extend_from_slice(&site(from));
    let ethertype: u16 = if ip.first().is_some_and(|b| b >> 4 == 6) {
        0x86DD
    } else {
        0x0800
    };
    out.extend_from_slice(&ethertype.to_be_bytes());
}
/// The section header's comment, which `nsperf trace` reads to know the vantage point.
pub const VANTAGE_COMMENT: &str = "vantage: link (middle of the path)";

/// What happened to a recorded packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fate {
    /// It left the link after `delay_ns` in it (queue, serialization, delay, jitter).
    Delivered {
        /// Time from entering to leaving the link.
        delay_ns: u64,
        /// The second copy of a duplicated packet.
        duplicate: bool,
        /// One bit was flipped.
        corrupted: bool,
    },
    /// Dropped on entry.
    Dropped(DropReason),
    /// Dropped while in flight because the link went down.
    DroppedInFlight,
}

impl Fate {
    fn comment(&self, out: &mut Vec<u8>) {
        let _ = match *self {
            Fate::Delivered {
                delay_ns,
                duplicate,
                corrupted,
            } => write!(
                out,
                "delay {}.{:06} ms{}{}",
                delay_ns / 1_000_000,
                delay_ns % 1_000_000,
                if duplicate { ", duplicate" } else { "" },
                if corrupted { ", corrupted" } else { "" }
            ),
            Fate::Dropped(DropReason::Queue) => write!(out, "dropped: queue full"),
            Fate::Dropped(DropReason::Loss) => write!(out, "dropped: random loss"),
            Fate::Dropped(DropReason::LinkDown) => write!(out, "dropped: link down"),
            Fate::DroppedInFlight => write!(out, "dropped: link down in flight"),
        };
    }
}

fn pad4(out: &mut Vec<u8>) {
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

fn option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    pad4(out);
}

/// Starts a block of `kind` at the end of `out`; returns where it starts.
fn begin(out: &mut Vec<u8>, kind: u32) -> usize {
    let at = out.len();
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    at
}

/// Ends the block started at `at`: end-of-options, trailing length, length filled in.
fn end(out: &mut Vec<u8>, at: usize, with_options: bool) {
    if with_options {
        out.extend_from_slice(&[0, 0, 0, 0]);
    }
    let len = (out.len() - at + 4) as u32;
    out.extend_from_slice(&len.to_le_bytes());
    out[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
}

/// A section header block (little-endian) naming the application and the vantage point.
pub fn section_header(out: &mut Vec<u8>, comment: &str) {
    let at = begin(out, 0x0A0D_0D0A);
    out.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&u64::MAX.to_le_bytes()); // section length unknown
    option(out, 1, comment.as_bytes());
    option(out, 4, b"nsperf lab capture");
    end(out, at, true);
}

/// An interface description block: Ethernet, no snapshot limit, nanosecond timestamps.
pub fn interface(out: &mut Vec<u8>, name: &str) {
    let at = begin(out, 1);
    out.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // snaplen 0: no limit
    option(out, 2, name.as_bytes());
    option(out, 9, &[9]); // if_tsresol: 10^-9 s
    end(out, at, true);
}

/// An enhanced packet block of `ip` (the packet from its IP header on, behind the made-up
/// Ethernet header) on interface `iface` at `ts_unix_ns`, with `fate` as its comment. `fix`
/// may complete a checksum in the copied IP bytes.
pub fn packet(
    out: &mut Vec<u8>,
    iface: u32,
    ts_unix_ns: u64,
    ip: &[u8],
    fate: &Fate,
    fix: impl FnOnce(&mut [u8]),
) {
    let at = begin(out, 6);
    out.extend_from_slice(&iface.to_le_bytes());
    out.extend_from_slice(&((ts_unix_ns >> 32) as u32).to_le_bytes());
    out.extend_from_slice(&(ts_unix_ns as u32).to_le_bytes());
    let frame = (ETHERNET_HEADER_BYTES + ip.len()) as u32;
    out.extend_from_slice(&frame.to_le_bytes());
    out.extend_from_slice(&frame.to_le_bytes());
    ethernet_header(out, iface, ip);
    let data = out.len();
    out.extend_from_slice(ip);
    fix(&mut out[data..]);
    pad4(out);
    // opt_comment, its length filled in once written.
    let opt = out.len();
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    fate.comment(out);
    let clen = (out.len() - opt - 4) as u16;
    out[opt + 2..opt + 4].copy_from_slice(&clen.to_le_bytes());
    pad4(out);
    end(out, at, true);
}

/// An interface statistics block: packets that entered the direction and the emulator's
/// drops, with the drops by reason as comment.
pub fn statistics(
    out: &mut Vec<u8>,
    iface: u32,
    ts_unix_ns: u64,
    (start_ns, end_ns): (u64, u64),
    c: &DirectionCounters,
) {
    let at = begin(out, 5);
    out.extend_from_slice(&iface.to_le_bytes());
    out.extend_from_slice(&((ts_unix_ns >> 32) as u32).to_le_bytes());
    out.extend_from_slice(&(ts_unix_ns as u32).to_le_bytes());
    let ts = |v: u64| {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&((v >> 32) as u32).to_le_bytes());
        b[4..].copy_from_slice(&(v as u32).to_le_bytes());
        b
    };
    let drops = c.dropped_queue_packets + c.dropped_loss_packets + c.dropped_link_down_packets;
    let comment = format!(
        "entered {}, left {}, dropped by the emulator {} (queue {}, loss {}, link down {})",
        c.offered_packets,
        c.forwarded_packets,
        drops,
        c.dropped_queue_packets,
        c.dropped_loss_packets,
        c.dropped_link_down_packets
    );
    option(out, 1, comment.as_bytes());
    option(out, 2, &ts(start_ns));
    option(out, 3, &ts(end_ns));
    option(out, 4, &c.offered_packets.to_le_bytes());
    option(out, 5, &drops.to_le_bytes());
    end(out, at, true);
}

/// What a capture recorded, per direction of the link.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordCounts {
    /// Records written (each one wire packet unless `super_packets` says otherwise).
    pub records: u64,
    /// Records of packets that left the link (duplicate copies included).
    pub delivered: u64,
    /// Records of packets dropped at a full queue.
    pub dropped_queue: u64,
    /// Records of packets dropped by the loss model.
    pub dropped_loss: u64,
    /// Records of packets dropped because the link was down (on entry or in flight).
    pub dropped_link_down: u64,
    /// Records that are offloaded super-packets of several wire packets (read before the
    /// capture turned segmentation offloads off).
    pub super_packets: u64,
}

/// The capture's pending records and tallies, behind one lock.
#[derive(Debug)]
pub struct Pending {
    /// Encoded blocks not yet written.
    pub buf: Vec<u8>,
    /// Tallies per direction (0 and 1 of the link).
    pub counts: [RecordCounts; 2],
    /// Records lost because the writer fell behind.
    pub lost: u64,
    /// Per direction, drop records waiting for the first packet that entered the link after
    /// them to leave it.
    pub held: [HeldDrops; 2],
    /// Per direction, the timestamp of the last record written (Unix ns).
    pub last_ts: [u64; 2],
}

/// Encoded drop records of one direction held back, in the order their packets entered.
#[derive(Debug, Default)]
pub struct HeldDrops {
    /// The encoded blocks (timestamps patched when written).
    bytes: Vec<u8>,
    /// (entry time in emulator ns, drop time in Unix ns, offset, length) of each held
    /// block, oldest first.
    entries: VecDeque<(u64, u64, usize, usize)>,
}

/// Byte offset of the timestamp (high word) in an enhanced packet block.
const EPB_TS_OFFSET: usize = 12;

impl Pending {
    /// Writes the drop records of direction `side` whose packets entered before
    /// `entered_before_ns`, timestamped `ts_unix_ns` — or, with `None` (the capture
    /// stops), all of them at their drop time; never earlier than the direction's last record.
    fn release(&mut self, side: usize, entered_before_ns: Option<u64>, ts_unix_ns: u64) {
        let held = &mut self.held[side];
        while let Some(&(entered, dropped_unix, at, len)) = held.entries.front() {
            if entered_before_ns.is_some_and(|limit| entered >= limit) {
                break;
            }
            held.entries.pop_front();
            let ts = match entered_before_ns {
                Some(_) => ts_unix_ns,
                None => dropped_unix,
            }
            .max(self.last_ts[side]);
            let start = self.buf.len();
            self.buf.extend_from_slice(&held.bytes[at..at + len]);
            let field = &mut self.buf[start + EPB_TS_OFFSET..start + EPB_TS_OFFSET + 8];
            field[..4].copy_from_slice(&((ts >> 32) as u32).to_le_bytes());
            field[4..].copy_from_slice(&(ts as u32).to_le_bytes());
            self.last_ts[side] = ts;
        }
        if held.entries.is_empty() {
            held.bytes.clear();
        }
    }

    /// Moves the block just encoded at `block` of `buf` to direction `side`'s held drops.
    fn hold(&mut self, side: usize, entered: (u64, u64), block: std::ops::Range<usize>) {
        let held = &mut self.held[side];
        let at = held.bytes.len();
        held.bytes.extend_from_slice(&self.buf[block.clone()]);
        held.entries
            .push_back((entered.0, entered.1, at, block.len()));
        self.buf.truncate(block.start);
    }

    fn held_bytes(&self) -> usize {
        self.held[0].bytes.len() + self.held[1].bytes.len()
    }
}

/// A running capture of one link.
#[derive(Debug)]
pub struct Sink {
    /// The link's index.
    pub link: usize,
    /// The file written.
    pub path: PathBuf,
    /// Unix time at `mono0_ns`, to turn the emulator's clock into timestamps.
    pub unix0_ns: u64,
    /// The emulator's clock when the capture started.
    pub mono0_ns: u64,
    /// Records waiting for the writer.
    pub pending: Mutex<Pending>,
}

impl Sink {
    /// A capture of `link` into `path`, starting with the section header and one interface
    /// per direction.
    pub fn new(link: usize, path: PathBuf, names: [&str; 2], unix0_ns: u64, mono0_ns: u64) -> Sink {
        let mut buf = Vec::with_capacity(4 << 20);
        section_header(&mut buf, VANTAGE_COMMENT);
        interface(&mut buf, names[0]);
        interface(&mut buf, names[1]);
        Sink {
            link,
            path,
            unix0_ns,
            mono0_ns,
            pending: Mutex::new(Pending {
                buf,
                counts: Default::default(),
                lost: 0,
                held: Default::default(),
                last_ts: [0; 2],
            }),
        }
    }

    /// The Unix time of emulator clock reading `t_ns`.
    pub fn unix_ns(&self, t_ns: u64) -> u64 {
        (self.unix0_ns + t_ns).saturating_sub(self.mono0_ns)
    }

    /// Records one packet on direction `side` (0 or 1 of the link) at emulator time `t_ns`.
    pub fn record(
        &self,
        side: usize,
        t_ns: u64,
        ip: &[u8],
        segments: u32,
        fate: &Fate,
        fix: impl FnOnce(&mut [u8]),
    ) {
        let Ok(mut p) = self.pending.lock() else {
            return;
        };
        if p.buf.len() + p.held_bytes() > MAX_PENDING {
            p.lost += 1;
            return;
        }
        let side = side & 1;
        let ts = self.unix_ns(t_ns);
        match *fate {
            Fate::Delivered { delay_ns, .. } => {
                // Drops of packets that entered before this one go just ahead of it.
                p.release(side, Some(t_ns.saturating_sub(delay_ns)), ts);
                packet(&mut p.buf, side as u32, ts, ip, fate, fix);
                p.last_ts[side] = p.last_ts[side].max(ts);
            }
            Fate::Dropped(_) => {
                let start = p.buf.len();
                packet(&mut p.buf, side as u32, ts, ip, fate, fix);
                let end = p.buf.len();
                p.hold(side, (t_ns, ts), start..end);
            }
            Fate::DroppedInFlight => {
                // The link went down: everything held goes first, then this, at its time.
                p.release(side, None, ts);
                packet(&mut p.buf, side as u32, ts, ip, fate, fix);
                p.last_ts[side] = p.last_ts[side].max(ts);
            }
        }
        let c = &mut p.counts[side];
        c.records += 1;
        c.super_packets += u64::from(segments > 1);
        match fate {
            Fate::Delivered { .. } => c.delivered += 1,
            Fate::Dropped(DropReason::Queue) => c.dropped_queue += 1,
            Fate::Dropped(DropReason::Loss) => c.dropped_loss += 1,
            Fate::Dropped(DropReason::LinkDown) | Fate::DroppedInFlight => c.dropped_link_down += 1,
        }
    }

    /// Writes every held drop record (the capture has stopped: no packet can come before
    /// them any more).
    pub fn release_held(&self) {
        if let Ok(mut p) = self.pending.lock() {
            // at their drop times, but after everything written in either direction
            let last = p.last_ts[0].max(p.last_ts[1]);
            for side in 0..2 {
                p.last_ts[side] = last;
                p.release(side, None, 0);
            }
        }
    }

    /// Takes the pending bytes (for the writer), leaving `spare` (emptied) in their place.
    pub fn take(&self, spare: Vec<u8>) -> Vec<u8> {
        let mut spare = spare;
        spare.clear();
        match self.pending.lock() {
            Ok(mut p) => std::mem::replace(&mut p.buf, spare),
            Err(_) => Vec::new(),
        }
    }
}

/// What `lab capture` reports when it stops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureSummary {
    /// The link captured.
    pub link: String,
    /// The file written.
    pub file: PathBuf,
    /// Seconds the capture ran.
    pub duration_s: f64,
    /// Per direction: its name (`a -> b`), the records written and the emulator's counters
    /// over the capture (their change from start to stop).
    pub directions: Vec<CaptureDirection>,
    /// Records lost because the file could not be written fast enough (0 when complete).
    pub lost_records: u64,
    /// Bytes written.
    pub file_bytes: u64,
}

/// One direction of a captured link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureDirection {
    /// `from -> to`.
    pub direction: String,
    /// What the file holds.
    pub recorded: RecordCounts,
    /// The emulator's counters over the capture.
    pub counters: DirectionCounters,
}

impl CaptureSummary {
    /// Packets the emulator dropped on the link during the capture, all directions.
    pub fn dropped_packets(&self) -> u64 {
        self.directions
            .iter()
            .map(|d| {
                d.counters.dropped_queue_packets
                    + d.counters.dropped_loss_packets
                    + d.counters.dropped_link_down_packets
            })
            .sum()
    }
}

/// The change of counters from `a` to `b` (the maxima are `b`'s).
pub fn counters_delta(a: &DirectionCounters, b: &DirectionCounters) -> DirectionCounters {
    DirectionCounters {
        offered_packets: b.offered_packets - a.offered_packets,
        forwarded_packets: b.forwarded_packets - a.forwarded_packets,
        forwarded_bytes: b.forwarded_bytes - a.forwarded_bytes,
        dropped_queue_packets: b.dropped_queue_packets - a.dropped_queue_packets,
        dropped_loss_packets: b.dropped_loss_packets - a.dropped_loss_packets,
        dropped_link_down_packets: b.dropped_link_down_packets - a.dropped_link_down_packets,
        duplicated_packets: b.duplicated_packets - a.duplicated_packets,
        corrupted_packets: b.corrupted_packets - a.corrupted_packets,
        reordered_packets: b.reordered_packets - a.reordered_packets,
        queue_max_packets: b.queue_max_packets,
        queue_max_bytes: b.queue_max_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_parser::traits::PcapReaderIterator;
    use pcap_parser::{Block, PcapBlockOwned, PcapError, PcapNGReader};

    fn ipv4_udp(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[9] = 17;
        p
    }

    #[test]
    fn file_reads_back_with_comments_and_statistics() {
        let sink = Sink::new(0, "x".into(), ["a -> b", "b -> a"], 1_000_000_000, 500);
        let fates = [
            Fate::Delivered {
                delay_ns: 25_013_417,
                duplicate: false,
                corrupted: false,
            },
            Fate::Dropped(DropReason::Queue),
            Fate::DroppedInFlight,
        ];
        for (i, f) in fates.iter().enumerate() {
            sink.record(i % 2, 1_500 + i as u64, &ipv4_udp(61 + i), 1, f, |b| {
                b[1] = 7
            });
        }
        sink.release_held();
        let mut file = sink.take(Vec::new());
        let c = DirectionCounters {
            offered_packets: 2,
            dropped_queue_packets: 1,
            ..Default::default()
        };
        statistics(
            &mut file,
            0,
            1_000_002_000,
            (1_000_000_000, 1_000_002_000),
            &c,
        );
        let p = sink.pending.lock().unwrap();
        assert_eq!(p.counts[0].records, 2);
        assert_eq!(p.counts[0].dropped_link_down, 1);
        assert_eq!(p.counts[1].dropped_queue, 1);
        drop(p);
        let mut r = PcapNGReader::new(65536, &file[..]).unwrap();
        let (mut comments, mut packets, mut ifaces, mut stats) = (Vec::new(), 0, 0, 0);
        loop {
            match r.next() {
                Ok((off, block)) => {
                    match block {
                        PcapBlockOwned::NG(Block::SectionHeader(s)) => {
                            let c = s
                                .options
                                .iter()
                                .find(|o| o.code == pcap_parser::OptionCode::Comment);
                            assert_eq!(c.unwrap().as_bytes().unwrap(), VANTAGE_COMMENT.as_bytes());
                        }
                        PcapBlockOwned::NG(Block::InterfaceDescription(i)) => {
                            assert_eq!(i.linktype.0, 1);
                            ifaces += 1;
                        }
                        PcapBlockOwned::NG(Block::EnhancedPacket(e)) => {
                            packets += 1;
                            let ip = &e.data[ETHERNET_HEADER_BYTES..];
                            assert_eq!(ip[1], 7, "fix applied to the copy");
                            assert_eq!(&e.data[12..14], &[0x08, 0x00], "IPv4 EtherType");
                            let from = if e.if_id == 0 { 1 } else { 2 };
                            assert_eq!(e.data[11], from, "source MAC names the site");
                            // the queue drop (62 bytes, nothing entered after it) is
                            // written when the capture stops, after the in-flight drop
                            let (len, at) = [(61, 1000), (63, 1002), (62, 1002)][packets - 1];
                            assert_eq!(e.caplen as usize, ETHERNET_HEADER_BYTES + len);
                            let ts = (u64::from(e.ts_high) << 32) | u64::from(e.ts_low);
                            assert_eq!(ts, 1_000_000_000 + at);
                            for o in &e.options {
                                if o.code == pcap_parser::OptionCode::Comment {
                                    comments.push(
                                        String::from_utf8_lossy(o.as_bytes().unwrap()).to_string(),
                                    );
                                }
                            }
                        }
                        PcapBlockOwned::NG(Block::InterfaceStatistics(_)) => stats += 1,
                        _ => {}
                    }
                    r.consume(off);
                }
                Err(PcapError::Eof) => break,
                Err(PcapError::Incomplete(_)) => r.refill().unwrap(),
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!((ifaces, packets, stats), (2, 3, 1));
        assert_eq!(
            comments,
            [
                "delay 25.013417 ms",
                "dropped: link down in flight",
                "dropped: queue full"
            ]
        );
    }

    /// Timestamps and comments of the packet records in a capture file's bytes.
    fn records(file: &[u8]) -> Vec<(u64, String)> {
        let mut r = PcapNGReader::new(65536, file).unwrap();
        let mut out = Vec::new();
        loop {
            match r.next() {
                Ok((off, block)) => {
                    if let PcapBlockOwned::NG(Block::EnhancedPacket(e)) = block {
                        let ts = (u64::from(e.ts_high) << 32) | u64::from(e.ts_low);
                        let c = e
                            .options
                            .iter()
                            .find(|o| o.code == pcap_parser::OptionCode::Comment)
                            .map(|o| String::from_utf8_lossy(o.as_bytes().unwrap()).to_string());
                        out.push((ts, c.unwrap_or_default()));
                    }
                    r.consume(off);
                }
                Err(PcapError::Eof) => break,
                Err(PcapError::Incomplete(_)) => r.refill().unwrap(),
                Err(e) => panic!("{e:?}"),
            }
        }
        out
    }

    /// A drop is written where its packet would have left the link, not ahead of the
    /// packets still on it (issue #15: a lossy link capture read as reordering).
    #[test]
    fn drop_records_keep_each_direction_in_time_order() {
        let sink = Sink::new(0, "x".into(), ["a -> b", "b -> a"], 0, 0);
        let delivered = |delay_ns| Fate::Delivered {
            delay_ns,
            duplicate: false,
            corrupted: false,
        };
        let p = ipv4_udp(60);
        sink.record(0, 100, &p, 1, &delivered(50), |_| {}); // entered at 50
        sink.record(0, 110, &p, 1, &Fate::Dropped(DropReason::Loss), |_| {}); // entered at 110
        sink.record(1, 120, &p, 1, &delivered(5), |_| {}); // the other direction
        sink.record(0, 150, &p, 1, &delivered(50), |_| {}); // entered at 100, before the drop
        // the writer takes what is due; the drop is not yet
        let first = sink.take(Vec::new());
        sink.record(0, 170, &p, 1, &delivered(50), |_| {}); // entered at 120, after the drop
        sink.record(0, 175, &p, 1, &Fate::Dropped(DropReason::Queue), |_| {});
        sink.release_held();
        let mut file = first;
        file.extend_from_slice(&sink.take(Vec::new()));
        let got = records(&file);
        let ts: Vec<u64> = got.iter().map(|r| r.0).collect();
        // the drop goes just ahead of the first packet that entered after it, at its time;
        // the last one (nothing entered after it) at its drop time
        assert_eq!(ts, [100, 120, 150, 170, 170, 175]);
        assert_eq!(got[3].1, "dropped: random loss");
        assert_eq!(got[5].1, "dropped: queue full");
        let p = sink.pending.lock().unwrap();
        assert_eq!((p.counts[0].records, p.counts[0].dropped_loss), (5, 1));
        assert!(
            p.held
                .iter()
                .all(|h| h.entries.is_empty() && h.bytes.is_empty())
        );
    }

    #[test]
    fn a_full_buffer_loses_records_and_counts_them() {
        let sink = Sink::new(0, "x".into(), ["a", "b"], 0, 0);
        sink.pending.lock().unwrap().buf.resize(MAX_PENDING + 1, 0);
        sink.record(0, 1, &ipv4_udp(60), 1, &Fate::DroppedInFlight, |_| {});
        assert_eq!(sink.pending.lock().unwrap().lost, 1);
        assert_eq!(sink.pending.lock().unwrap().counts[0].records, 0);
    }
}
