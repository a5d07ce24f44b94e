//! Streaming capture readers: pcap (micro- and nanosecond, both byte orders) and pcapng
//! (several sections and interfaces), plain or gzip/zstd/xz compressed, from a file or stdin.
//!
//! Records are parsed by the `pcap-parser` crate over a bounded circular buffer, so memory
//! does not grow with the file. A file that is not a capture at all is an error with the byte
//! offset; damage later in the file (a truncated last record, a record with an absurd length,
//! garbage) ends the reading early and is reported in [`ReadStats`], keeping the packets read
//! before it.

mod decompress;
mod live;

use std::io::Read;
use std::path::Path;

use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapBlockOwned, PcapError};
use serde::Serialize;

pub use decompress::Compression;
use decompress::Damage;
pub use live::{LiveInput, PacketSocket, PcapWriter};

use crate::error::TraceError;
use crate::wire::link::LinkType;

/// Initial size of the read buffer.
const BUFFER_BYTES: usize = 256 * 1024;
/// Largest record the buffer grows to hold; a record claiming more ends the reading.
const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;
/// The vantage point a section's comment declares: the text after `vantage: ` (at most
/// 100 characters of it).
fn declared_vantage(options: &[pcap_parser::pcapng::PcapNGOption<'_>]) -> Option<String> {
    options
        .iter()
        .filter(|o| o.code == pcap_parser::pcapng::OptionCode::Comment)
        .filter_map(|o| o.as_str().ok())
        .find_map(|c| c.strip_prefix("vantage: "))
        .map(|v| v.chars().take(100).collect())
}

/// Snapshot lengths below this are not trusted as a bound (some writers put 0 or a small
/// value in the header and still write whole packets).
const MIN_SNAPLEN_CHECK: u32 = 262_144;

/// One captured packet, borrowed from the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct RawPacket<'a> {
    /// Capture time, nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    /// Link-layer type of the interface it was captured on.
    pub link: LinkType,
    /// The captured bytes (at most the snapshot length).
    pub data: &'a [u8],
    /// Length of the packet on the wire.
    pub orig_len: u32,
}

/// The container of a capture (`capture.format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CaptureFormat {
    /// Not known: the capture's first block was not read (written as an empty string).
    #[default]
    #[serde(rename = "")]
    Unread,
    /// libpcap's format.
    Pcap,
    /// pcapng.
    Pcapng,
    /// Packets read from an interface (`trace -i`), not from a file.
    Live,
}

impl std::fmt::Display for CaptureFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CaptureFormat::Unread => "",
            CaptureFormat::Pcap => "pcap",
            CaptureFormat::Pcapng => "pcapng",
            CaptureFormat::Live => "live",
        })
    }
}

/// What the reader saw, damage included.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReadStats {
    /// `pcap` or `pcapng` (`live` for `trace -i`).
    pub format: CaptureFormat,
    /// `none`, `gzip`, `zstd` or `xz`.
    pub compression: Compression,
    /// Packet records read.
    pub records: u64,
    /// Bytes of the (decompressed) capture consumed.
    pub bytes_read: u64,
    /// Packet records skipped: on an unknown interface, or with an unusable timestamp.
    pub skipped_records: u64,
    /// True when the file ended inside a record (a cut capture).
    pub truncated: bool,
    /// Why reading stopped early, with the byte offset; `None` when the file was read to its end.
    pub stopped_early: Option<String>,
    /// Where the capture was taken, as the file itself says (a pcapng section comment
    /// `vantage: …`, which `nsperf lab capture` writes: `link (middle of the path)`); `None`
    /// when the file does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_vantage: Option<String>,
    /// A live capture from an interface (`trace -i`): packets the kernel dropped because
    /// nsperf did not read them fast enough (absent for a file or a pipe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_dropped: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    link: LinkType,
    /// Timestamp units per second.
    units_per_s: u64,
    /// Seconds added to every timestamp.
    offset_s: i64,
}

/// A streaming reader of one capture.
pub struct CaptureReader {
    inner: Box<dyn PcapReaderIterator + Send>,
    /// pcap: the one link type; pcapng: the interfaces of the current section.
    interfaces: Vec<Interface>,
    legacy: bool,
    /// pcap: (snapshot length, big-endian) from the file header.
    legacy_header: Option<(u32, bool)>,
    buffer_bytes: usize,
    damage: Damage,
    stats: ReadStats,
}

impl std::fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("stats", &self.stats)
            .finish()
    }
}

impl CaptureReader {
    /// Opens a capture file; `-` reads standard input.
    pub fn open(path: &Path) -> Result<CaptureReader, TraceError> {
        let display = path.display().to_string();
        if display == "-" {
            return Self::from_reader(std::io::stdin());
        }
        let f = std::fs::File::open(path).map_err(|source| TraceError::Open {
            path: display,
            source,
        })?;
        Self::from_reader(f)
    }

    /// Reads a capture from any byte stream, detecting compression and format.
    pub fn from_reader<R: Read + Send + 'static>(r: R) -> Result<CaptureReader, TraceError> {
        let damage = Damage::default();
        let (compression, stream) =
            decompress::wrap(r, damage.clone()).map_err(|e| TraceError::NotACapture {
                offset: 0,
                reason: e.to_string(),
            })?;
        let inner = pcap_parser::create_reader(BUFFER_BYTES, stream).map_err(|e| {
            let damaged = damage.lock().ok().and_then(|d| d.clone());
            TraceError::NotACapture {
                offset: 0,
                reason: match e {
                    _ if damaged.is_some() => damaged.map(|d| d.1).unwrap_or_default(),
                    PcapError::Eof | PcapError::Incomplete(_) => "file too short".to_string(),
                    PcapError::HeaderNotRecognized => {
                        "unknown magic number (neither pcap nor pcapng)".to_string()
                    }
                    PcapError::ReadError => format!("read error ({compression} stream)"),
                    other => short_error(&other).to_string(),
                },
            }
        })?;
        Ok(CaptureReader {
            inner,
            interfaces: Vec::new(),
            legacy: false,
            legacy_header: None,
            buffer_bytes: BUFFER_BYTES,
            damage,
            stats: ReadStats {
                compression,
                ..ReadStats::default()
            },
        })
    }

    /// What was read so far.
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// Calls `f` for every packet until the end of the capture or the first damage. Damage
    /// is recorded in [`CaptureReader::stats`]; an error is returned only when not even the
    /// capture's header could be read.
    pub fn for_each_packet(&mut self, mut f: impl FnMut(&RawPacket<'_>)) -> Result<(), TraceError> {
        self.for_each_packet_while(|p| {
            f(p);
            true
        })
    }

    /// As [`CaptureReader::for_each_packet`], and stops cleanly after a packet for which `f`
    /// returns false (a live analysis told to stop: the capture is not reported cut).
    pub fn for_each_packet_while(
        &mut self,
        mut f: impl FnMut(&RawPacket<'_>) -> bool,
    ) -> Result<(), TraceError> {
        let mut go = true;
        loop {
            if !go {
                return Ok(());
            }
            let offset = self.inner.consumed() as u64;
            match self.inner.next() {
                Ok((len, block)) => {
                    match block {
                        PcapBlockOwned::LegacyHeader(h) => {
                            self.legacy = true;
                            self.legacy_header = Some((h.snaplen, h.is_bigendian()));
                            self.stats.format = CaptureFormat::Pcap;
                            let units = if h.is_nanosecond_precision() {
                                1_000_000_000
                            } else {
                                1_000_000
                            };
                            self.interfaces = vec![Interface {
                                link: LinkType::from_number(h.network.0 as u32),
                                units_per_s: units,
                                offset_s: 0,
                            }];
                        }
                        PcapBlockOwned::Legacy(b) => {
                            self.stats.records += 1;
                            let i = self.interfaces[0];
                            // The fraction must be below one second.
                            if u64::from(b.ts_usec) >= i.units_per_s {
                                self.stats.skipped_records += 1;
                            } else {
                                let frac = u64::from(b.ts_usec) * (1_000_000_000 / i.units_per_s);
                                let data = &b.data[..(b.caplen as usize).min(b.data.len())];
                                go = f(&RawPacket {
                                    ts_ns: i64::from(b.ts_sec) * 1_000_000_000 + frac as i64,
                                    link: i.link,
                                    data,
                                    orig_len: b.origlen,
                                });
                            }
                        }
                        PcapBlockOwned::NG(Block::SectionHeader(shb)) => {
                            self.stats.format = CaptureFormat::Pcapng;
                            self.interfaces.clear();
                            if let Some(v) = declared_vantage(&shb.options) {
                                self.stats.declared_vantage = Some(v);
                            }
                        }
                        PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                            self.interfaces.push(Interface {
                                link: LinkType::from_number(idb.linktype.0 as u32),
                                units_per_s: idb.ts_resolution().unwrap_or(0),
                                offset_s: idb.ts_offset(),
                            });
                        }
                        PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                            self.stats.records += 1;
                            match self.interfaces.get(epb.if_id as usize) {
                                Some(i) if i.units_per_s > 0 => {
                                    let raw =
                                        (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                                    let ns =
                                        u128::from(raw) * 1_000_000_000 / u128::from(i.units_per_s);
                                    let ts_ns = i64::try_from(ns)
                                        .unwrap_or(i64::MAX)
                                        .saturating_add(i.offset_s.saturating_mul(1_000_000_000));
                                    let data =
                                        &epb.data[..(epb.caplen as usize).min(epb.data.len())];
                                    go = f(&RawPacket {
                                        ts_ns,
                                        link: i.link,
                                        data,
                                        orig_len: epb.origlen,
                                    });
                                }
                                _ => self.stats.skipped_records += 1,
                            }
                        }
                        PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                            self.stats.records += 1;
                            // No timestamp: usable only for counting; skipped.
                            let _ = spb;
                            self.stats.skipped_records += 1;
                        }
                        PcapBlockOwned::NG(_) => {}
                    }
                    self.inner.consume(len);
                    self.stats.bytes_read = self.inner.consumed() as u64;
                }
                Err(PcapError::Eof) => {
                    self.note_damage(offset);
                    return Ok(());
                }
                Err(PcapError::Incomplete(_)) => {
                    if let Some(why) = self.impossible_record() {
                        self.stop(offset, &why);
                        return Ok(());
                    }
                    if let Err(e) = self.inner.refill() {
                        let msg = format!("read error: {}", short_error(&e));
                        self.stop(offset, &msg);
                        return Ok(());
                    }
                }
                Err(PcapError::UnexpectedEof) => {
                    self.stats.truncated = true;
                    if let Some(why) = self.impossible_record() {
                        self.stop(offset, &why);
                    } else if !self.note_damage(offset) {
                        self.stop(offset, "the file ends inside a record (cut capture)");
                    }
                    return Ok(());
                }
                Err(PcapError::BufferTooSmall) => {
                    if let Some(why) = self.impossible_record() {
                        self.stop(offset, &why);
                        return Ok(());
                    }
                    if self.buffer_bytes >= MAX_RECORD_BYTES || !self.grow() {
                        self.stop(
                            offset,
                            &format!("a record claims more than {} MiB", MAX_RECORD_BYTES >> 20),
                        );
                        return Ok(());
                    }
                }
                Err(PcapError::ReadError) => {
                    if !self.note_damage(offset) {
                        self.stop(offset, "read error");
                    }
                    return Ok(());
                }
                Err(e) => {
                    let why = if self.legacy {
                        "a damaged record header".to_string()
                    } else {
                        format!("a damaged pcapng block ({})", short_error(&e))
                    };
                    self.stop(offset, &why);
                    return Ok(());
                }
            }
        }
    }

    /// A pcap record header at the read position whose length cannot be: larger than the
    /// snapshot length the file declares, or than any record this reader accepts.
    fn impossible_record(&self) -> Option<String> {
        let (snaplen, big) = self.legacy_header?;
        let h = self.inner.data().get(8..12)?;
        let b = [h[0], h[1], h[2], h[3]];
        let caplen = if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        };
        if snaplen > 0 && caplen > snaplen.max(MIN_SNAPLEN_CHECK) {
            Some(format!(
                "record length {caplen} exceeds the snapshot length {snaplen}"
            ))
        } else if caplen as usize > MAX_RECORD_BYTES {
            Some(format!(
                "record length {caplen} exceeds the {} MiB limit",
                MAX_RECORD_BYTES >> 20
            ))
        } else {
            None
        }
    }

    /// Reports damage of the compressed stream, if any; true when there was.
    fn note_damage(&mut self, offset: u64) -> bool {
        let damaged = self.damage.lock().ok().and_then(|d| d.clone());
        match damaged {
            Some((at, why)) => {
                self.stats.truncated = true;
                self.stop(
                    offset,
                    &format!(
                        "{why} after {at} bytes of capture; the {} packets before it were read",
                        self.stats.records
                    ),
                );
                true
            }
            None => false,
        }
    }

    fn grow(&mut self) -> bool {
        let new = (self.buffer_bytes * 4).min(MAX_RECORD_BYTES);
        if self.inner.grow(new) {
            self.buffer_bytes = new;
            // Read what the larger buffer can now hold.
            self.inner.refill().is_ok()
        } else {
            false
        }
    }

    fn stop(&mut self, offset: u64, why: &str) {
        self.stats.bytes_read = offset;
        self.stats.stopped_early = Some(format!("stopped at byte offset {offset}: {why}"));
    }
}

/// The parser's complaint in plain words.
fn short_error<I>(e: &PcapError<I>) -> &'static str {
    use pcap_parser::nom::error::ErrorKind;
    match e {
        PcapError::NomError(_, k) | PcapError::OwnedNomError(_, k) => match k {
            ErrorKind::Verify => "its two length fields disagree or are impossible",
            ErrorKind::Tag => "an unknown block type or byte-order magic",
            ErrorKind::Eof | ErrorKind::Complete => "it ends before its length",
            _ => "its fields cannot be parsed",
        },
        PcapError::Eof => "the file ends",
        PcapError::UnexpectedEof | PcapError::Incomplete(_) => "the file ends inside a record",
        PcapError::BufferTooSmall => "a record larger than the read buffer",
        PcapError::ReadError => "the file could not be read",
        PcapError::HeaderNotRecognized => "unknown magic number (neither pcap nor pcapng)",
    }
}

/// Reads a whole capture from bytes, for tests and fuzzing: every packet's length and the
/// final statistics. Never panics.
pub fn read_all_bytes(bytes: &[u8]) -> Result<(Vec<usize>, ReadStats), TraceError> {
    let mut r = CaptureReader::from_reader(std::io::Cursor::new(bytes.to_vec()))?;
    let mut lens = Vec::new();
    r.for_each_packet(|p| lens.push(p.data.len()))?;
    Ok((lens, r.stats().clone()))
}

#[cfg(test)]
mod plain_words {
    use super::*;
    use pcap_parser::nom::error::ErrorKind;

    /// Issue 11: every reader complaint is in words, never the parser's Debug output
    /// ("unparsable record (Verify)").
    #[test]
    fn every_parser_error_is_named_in_words() {
        let all: [PcapError<&[u8]>; 10] = [
            PcapError::Eof,
            PcapError::BufferTooSmall,
            PcapError::UnexpectedEof,
            PcapError::ReadError,
            PcapError::Incomplete(3),
            PcapError::HeaderNotRecognized,
            PcapError::NomError(&[1, 2], ErrorKind::Verify),
            PcapError::NomError(&[1, 2], ErrorKind::Tag),
            PcapError::OwnedNomError(vec![1], ErrorKind::Eof),
            PcapError::NomError(&[1, 2], ErrorKind::MapRes),
        ];
        for e in &all {
            let words = short_error(e);
            let debug = format!("{e:?}");
            assert!(!words.is_empty() && words != debug, "{debug}");
            assert!(
                words
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || " ()-".contains(c)),
                "{debug}: {words}"
            );
        }
    }
}

#[cfg(test)]
mod vantage_comment {
    use super::*;

    /// A little-endian section header block with `comment` as its only option.
    fn section(comment: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&(comment.len() as u16).to_le_bytes());
        body.extend_from_slice(comment);
        body.resize(body.len().next_multiple_of(4), 0);
        body.extend_from_slice(&[0; 4]);
        let len = (body.len() + 12) as u32;
        let mut v = 0x0A0D_0D0Au32.to_le_bytes().to_vec();
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(&body);
        v.extend_from_slice(&len.to_le_bytes());
        v
    }

    /// Issue 15: a capture of `nsperf lab capture` says it was taken on the link.
    #[test]
    fn the_section_comment_declares_the_vantage_point() {
        let (_, s) = read_all_bytes(&section(b"vantage: link (middle of the path)")).unwrap();
        assert_eq!(s.format, CaptureFormat::Pcapng);
        assert_eq!(
            s.declared_vantage.as_deref(),
            Some("link (middle of the path)")
        );
        let (_, s) = read_all_bytes(&section(b"taken on the NAS")).unwrap();
        assert_eq!(s.declared_vantage, None);
    }
}

#[cfg(test)]
mod written_names {
    use super::*;

    #[test]
    fn format_and_compression_are_written_as_before() {
        let text = |s: &ReadStats| {
            let v = serde_json::to_value(s).unwrap();
            (v["format"].clone(), v["compression"].clone())
        };
        for (format, name) in [
            (CaptureFormat::Unread, ""),
            (CaptureFormat::Pcap, "pcap"),
            (CaptureFormat::Pcapng, "pcapng"),
            (CaptureFormat::Live, "live"),
        ] {
            let s = ReadStats {
                format,
                ..ReadStats::default()
            };
            assert_eq!(text(&s).0, name);
            assert_eq!(format.to_string(), name);
        }
        for (compression, name) in [
            (Compression::None, "none"),
            (Compression::Gzip, "gzip"),
            (Compression::Zstd, "zstd"),
            (Compression::Xz, "xz"),
        ] {
            let s = ReadStats {
                compression,
                ..ReadStats::default()
            };
            assert_eq!(text(&s).1, name);
            assert_eq!(compression.to_string(), name);
        }
    }
}
