//! The protocol layer above the TCP analysis: the storage protocol a connection carries,
//! decoded the way the wire views decode headers. Each direction's segments become a byte
//! stream ([`stream`]: in order, each byte once, gaps reported), the stream becomes records
//! ([`rpc`]: ONC RPC record marking across segment boundaries, only each record's head
//! kept), and the records feed an I/O-free state machine per connection ([`nfs`]: calls
//! matched to replies by XID) whose figures are per operation ([`ops`]). SMB2/3 ([`smb`])
//! takes the same streams through a NetBIOS framer to requests matched to responses by
//! message id, into the same per-operation figures. Packets and their
//! capture times are the only inputs; memory per connection is bounded (a 1 KiB head per
//! direction, at most 256 KiB held beyond a hole, at most 4096 calls pending, a histogram
//! per operation) and nothing is allocated per packet once a connection has its buffers.

pub mod inflight;
mod names;
pub mod nfs;
pub mod nfs4;
pub mod ops;
pub mod pace;
pub mod requests;
pub mod rpc;
pub mod smb;
pub mod stream;
pub mod verdict;

use crate::decode::TcpSegment;
use crate::model::{AppProtocol, Diagnosis, ProtocolLimit, ProtocolStats, SmbStats};
use crate::wire::tcp::flags;

use nfs::RpcSession;
use requests::RequestLog;
use rpc::RecordFramer;
use stream::{Chunk, Stream};

/// Ports of the RPC services decoded: NFS, the portmapper, mountd's usual port.
const RPC_PORTS: [u16; 3] = [2049, 111, 20048];
/// The SMB port (direct hosting over TCP).
const SMB_PORT: u16 = 445;
/// Data segments looked at before a connection is judged not to carry a protocol decoded.
const DETECT_SEGMENTS: u8 = 16;

/// Whether a connection carries a protocol decoded, judged on its first data segments.
#[derive(Debug, Default)]
pub enum ProtoState {
    /// Not judged yet: data segments looked at so far.
    #[default]
    Undecided,
    /// Looked at this many data segments, none of them a protocol decoded.
    Looked(u8),
    /// Not a protocol decoded.
    No,
    /// ONC RPC.
    Rpc(Box<RpcConn>),
    /// SMB2/3.
    Smb(Box<SmbConn>),
}

impl ProtoState {
    /// One segment sent by side `dir`, not a copy; `payload` is what the capture holds of
    /// its payload; `rtt` the round trips from the capture point to each side and back as
    /// the TCP layer has measured them so far; `log` gets each request matched to its reply
    /// when it is on.
    pub fn segment(
        &mut self,
        dir: usize,
        seg: &TcpSegment,
        payload: &[u8],
        (t, rtt): (i64, pace::RoundTrips),
        log: &mut RequestLog,
    ) {
        let smb_port = seg.src_port == SMB_PORT || seg.dst_port == SMB_PORT;
        if smb_port && matches!(self, ProtoState::Undecided) {
            // Known from the handshake on: the streams start at the SYNs (an SMB client
            // sends each NetBIOS header in a segment of its own, which no hunt could
            // recognise).
            *self = ProtoState::Smb(Box::default());
        }
        if seg.payload_len > 0 {
            let looked = match self {
                ProtoState::Undecided => 0,
                ProtoState::Looked(n) => *n,
                _ => DETECT_SEGMENTS,
            };
            if looked < DETECT_SEGMENTS {
                let port = RPC_PORTS.contains(&seg.src_port) || RPC_PORTS.contains(&seg.dst_port);
                *self = if smb_port || smb::looks_like_message(payload) {
                    ProtoState::Smb(Box::default())
                } else if port || rpc::looks_like_record(payload) {
                    ProtoState::Rpc(Box::default())
                } else if looked + 1 == DETECT_SEGMENTS {
                    ProtoState::No
                } else {
                    ProtoState::Looked(looked + 1)
                };
            }
        }
        match self {
            ProtoState::Rpc(c) => {
                c.session.pace.rtt = rtt;
                c.segment(dir, seg, payload, t, log);
            }
            ProtoState::Smb(c) => {
                c.session.pace.rtt = rtt;
                c.segment(dir, seg, payload, t, log);
            }
            _ => {}
        }
    }

    /// The figures, when the connection carried a protocol decoded, with what set its
    /// pace judged beside the connection's TCP diagnosis `tcp`.
    pub fn summary(&self, tcp: &Diagnosis) -> Option<ProtocolStats> {
        match self {
            ProtoState::Rpc(c) => {
                let mut s = c.summary();
                s.diagnosis = Some(verdict::diagnose(&c.session.pace, &s.ops, tcp));
                Some(s)
            }
            ProtoState::Smb(c) => {
                let mut s = c.summary();
                let mut d = verdict::diagnose(&c.session.pace, &s.ops, tcp);
                let encrypted = c.session.readable.encrypted;
                if d.limit == ProtocolLimit::TooShort && encrypted > 0 {
                    d.message.push_str(&format!(
                        "; {encrypted} SMB3 messages were encrypted: their requests cannot be read, nor their pace judged"
                    ));
                }
                s.diagnosis = Some(d);
                Some(s)
            }
            _ => None,
        }
    }
}

/// ONC RPC on one connection: two streams, two framers, one session.
#[derive(Debug, Default)]
pub struct RpcConn {
    streams: [Stream; 2],
    framers: [RecordFramer; 2],
    session: RpcSession,
}

impl RpcConn {
    /// One segment sent by side `dir`; `log` gets the requests matched.
    pub fn segment(
        &mut self,
        dir: usize,
        seg: &TcpSegment,
        payload: &[u8],
        t: i64,
        log: &mut RequestLog,
    ) {
        let RpcConn {
            streams,
            framers,
            session,
        } = self;
        reassemble(streams, dir, seg, payload, &mut |d, c| {
            framers[d].feed(c, t, &mut |r| session.record(d, &r, log))
        });
        for (d, f) in framers.iter().enumerate() {
            session.pace.open(d, f.open_since());
        }
    }

    /// The figures so far.
    pub fn summary(&self) -> ProtocolStats {
        let s = &self.session;
        let client = if s.calls_by_side[1] > s.calls_by_side[0] {
            "b"
        } else {
            "a"
        };
        let mut out = ProtocolStats {
            protocol: AppProtocol::OncRpc,
            nfs_versions: (0..32).filter(|v| s.nfs_versions & (1 << v) != 0).collect(),
            client: client.into(),
            ops: s.ops.summary(),
            unanswered_calls: s.unanswered_calls + s.waiting() as u64,
            unmatched_replies: s.unmatched_replies,
            malformed_records: s.malformed,
            missing_bytes: self.streams.iter().map(|x| x.missing_bytes).sum(),
            resyncs: self.framers.iter().map(|x| x.resyncs).sum(),
            compound_ops: s.compound.summary(),
            compound_calls_cut: s.compound.cut,
            ..ProtocolStats::default()
        };
        s.in_flight().fill(&mut out);
        out
    }
}

/// One segment of a connection through its two streams: `up` gets each direction's
/// in-order chunks (the peer's too, when this segment acknowledges bytes never captured).
fn reassemble(
    streams: &mut [Stream; 2],
    dir: usize,
    seg: &TcpSegment,
    payload: &[u8],
    up: &mut dyn FnMut(usize, Chunk<'_>),
) {
    if seg.flags & flags::SYN != 0 {
        streams[dir].syn(seg.seq);
    }
    if seg.flags & flags::ACK != 0 && seg.flags & flags::RST == 0 {
        // The peer got bytes up to here: those never captured are lost.
        streams[1 - dir].acknowledged(seg.ack, &mut |c| up(1 - dir, c));
    }
    streams[dir].segment(seg.seq, payload, seg.payload_len, &mut |c| up(dir, c));
    if seg.flags & flags::FIN != 0 {
        streams[dir].fin(seg.seq.wrapping_add(seg.payload_len));
    }
}

/// SMB2/3 on one connection: two streams, two NetBIOS framers, one session.
#[derive(Debug, Default)]
pub struct SmbConn {
    streams: [Stream; 2],
    framers: [smb::Framer; 2],
    session: smb::SmbSession,
}

impl SmbConn {
    /// One segment sent by side `dir`; `log` gets the requests matched.
    pub fn segment(
        &mut self,
        dir: usize,
        seg: &TcpSegment,
        payload: &[u8],
        t: i64,
        log: &mut RequestLog,
    ) {
        let SmbConn {
            streams,
            framers,
            session,
        } = self;
        reassemble(streams, dir, seg, payload, &mut |d, c| {
            framers[d].feed(c, t, &mut |m| session.message(d, &m, log))
        });
        for (d, f) in framers.iter().enumerate() {
            session.pace.open(d, f.open_since());
        }
    }

    /// The figures so far (the verdict is [`ProtoState::summary`]'s).
    pub fn summary(&self) -> ProtocolStats {
        let s = &self.session;
        let r = &s.readable;
        let mut out = ProtocolStats {
            protocol: AppProtocol::Smb2,
            client: if s.calls_by_side[1] > s.calls_by_side[0] {
                "b"
            } else {
                "a"
            }
            .into(),
            ops: s.ops.summary(),
            unanswered_calls: s.unanswered_calls + s.waiting() as u64,
            unmatched_replies: s.unmatched_replies,
            malformed_records: s.malformed,
            missing_bytes: self.streams.iter().map(|x| x.missing_bytes).sum(),
            resyncs: self.framers.iter().map(|x| x.resyncs).sum(),
            smb: Some(SmbStats {
                dialect: r.dialect.map(smb::dialect_name),
                headers: r.headers,
                signed: r.signed,
                encrypted_messages: r.encrypted,
                encrypted_bytes: r.encrypted_bytes,
                compressed_messages: r.compressed,
                smb1_messages: r.smb1,
                compound_requests: r.compound_requests,
                chain_commands_cut: r.chain_cut,
                interim_responses: r.interim,
                credits_requested: r.credits_requested,
                credits_granted: r.credits_granted,
            }),
            ..ProtocolStats::default()
        };
        s.in_flight.fill(&mut out);
        out
    }
}

/// Arbitrary bytes as the segments of both directions of a connection to `port`, each
/// handed to `seg`.
fn fuzz_segments(data: &[u8], port: u16, mut feed: impl FnMut(usize, &TcpSegment, &[u8], i64)) {
    let mut seq = [1000u32, 5000u32];
    let mut rest = data;
    let mut t = 0;
    // Each segment: a control byte (direction, flags, a jump in sequence), a length byte.
    while let [ctl, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (payload, more) = tail.split_at(n);
        let dir = usize::from(ctl & 1);
        if ctl & 0x40 != 0 {
            seq[dir] = seq[dir].wrapping_add(u32::from(ctl >> 2 & 7) * 100);
        }
        let seg = TcpSegment {
            src: std::net::IpAddr::from([10, 0, 0, 1 + dir as u8]),
            dst: std::net::IpAddr::from([10, 0, 0, 2 - dir as u8]),
            src_port: port,
            dst_port: port,
            seq: seq[dir],
            ack: seq[1 - dir],
            flags: flags::ACK | if ctl & 0x80 != 0 { flags::FIN } else { 0 },
            window: 1000,
            payload_len: n as u32 + u32::from(ctl & 2),
            options: Default::default(),
            ip_id: None,
            payload_at: 0,
            payload_captured: n as u32,
        };
        feed(dir, &seg, payload, t);
        seq[dir] = seq[dir].wrapping_add(seg.payload_len);
        t += 1000;
        rest = more;
    }
}

/// The body of the `trace_proto` fuzz target (and of a seeded test): arbitrary bytes as the
/// segments of both directions of an RPC connection. Whatever the bytes, nothing panics and
/// the held bytes stay within their bound.
#[doc(hidden)]
pub fn fuzz_rpc_streams(data: &[u8]) {
    let mut c = RpcConn::default();
    let mut log = RequestLog::new(64);
    fuzz_segments(data, 2049, |d, seg, p, t| c.segment(d, seg, p, t, &mut log));
    assert!(log.requests.len() <= 64);
    let s = c.summary();
    assert!(s.in_flight_max as usize <= nfs::MAX_PENDING);
    assert!(
        c.streams
            .iter()
            .all(|x| x.held_bytes() <= stream::MAX_HELD_BYTES)
    );
}

/// The same for an SMB2/3 connection (the second body of the `trace_proto` fuzz target).
#[doc(hidden)]
pub fn fuzz_smb_streams(data: &[u8]) {
    let mut c = SmbConn::default();
    let mut log = RequestLog::new(64);
    fuzz_segments(data, 445, |d, seg, p, t| c.segment(d, seg, p, t, &mut log));
    assert!(log.requests.len() <= 64);
    let s = c.summary();
    assert!(s.in_flight_max as usize <= smb::MAX_PENDING);
    assert!(
        c.streams
            .iter()
            .all(|x| x.held_bytes() <= stream::MAX_HELD_BYTES)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_nfs::proto::{FileHandle, NFS_PROG, NfsStat, encode_post_op_attr, proc3};
    use nsperf_nfs::rpc::{AcceptStat, AuthSys, begin_call, begin_reply, finish_record};
    use nsperf_nfs::xdr::{put_bool, put_u32, put_u64};

    fn call(xid: u32, proc_: u32, args: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
        let mut b = Vec::new();
        let s = begin_call(&mut b, xid, NFS_PROG, 3, proc_, &AuthSys::new("h", 0, 0));
        args(&mut b);
        finish_record(&mut b, s, 0);
        b
    }

    fn reply(xid: u32, body: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
        let mut b = Vec::new();
        let s = begin_reply(&mut b, xid, AcceptStat::Success);
        body(&mut b);
        finish_record(&mut b, s, 0);
        b
    }

    /// A segment of the test connection (10.0.0.1:800 to 10.0.0.2:2049) with `len` bytes.
    fn segment(seq: u32, ack: u32, flags: u8, len: usize) -> TcpSegment {
        TcpSegment {
            src: std::net::IpAddr::from([10, 0, 0, 1]),
            dst: std::net::IpAddr::from([10, 0, 0, 2]),
            src_port: 800,
            dst_port: 2049,
            seq,
            ack,
            flags,
            window: 100,
            payload_len: len as u32,
            options: Default::default(),
            ip_id: None,
            payload_at: 0,
            payload_captured: len as u32,
        }
    }

    /// Byte fixtures made with nsperf's own NFSv3 encoders: two READs in flight, a LOOKUP
    /// that fails, records cut across segments at every size; the figures per operation.
    #[test]
    fn calls_matched_to_replies_across_segments() {
        let fh = FileHandle::new(&[1, 2, 3, 4]).unwrap();
        let read = |xid| {
            call(xid, proc3::READ, |b| {
                fh.encode(b);
                put_u64(b, 0);
                put_u32(b, 65536);
            })
        };
        let read_reply = |xid| {
            reply(xid, |b| {
                put_u32(b, 0);
                encode_post_op_attr(b, None);
                put_u32(b, 65536);
                put_bool(b, false);
                put_u32(b, 65536);
                b.extend(std::iter::repeat_n(0xab, 65536));
            })
        };
        let lookup = call(3, proc3::LOOKUP, |b| {
            nsperf_nfs::proto::encode_dirop(b, &fh, b"missing")
        });
        let noent = reply(3, |b| {
            put_u32(b, NfsStat::NOENT.0);
            encode_post_op_attr(b, None);
        });
        // (direction, bytes, time ms)
        let script: Vec<(usize, Vec<u8>, i64)> = vec![
            (0, [read(1), read(2)].concat(), 0),
            (1, read_reply(1), 10),
            (1, read_reply(2), 30),
            (0, lookup, 40),
            (1, noent, 41),
        ];
        for mss in [1, 7, 100, 1448, 65536, 200_000] {
            let mut c = RpcConn::default();
            let mut log = RequestLog::new(100);
            let mut seq = [100u32, 900u32];
            let segments =
                [0usize, 1]
                    .iter()
                    .map(|&d| (d, None, 0))
                    .chain(script.iter().flat_map(|(dir, bytes, ms)| {
                        bytes.chunks(mss).map(move |p| (*dir, Some(p), *ms))
                    }));
            for (dir, piece, ms) in segments {
                let dir = &dir;
                // the handshake first: the streams start at the SYNs
                let (piece, syn) = match piece {
                    Some(p) => (p, 0),
                    None => (&[][..], flags::SYN),
                };
                {
                    let seg = segment(
                        seq[*dir].wrapping_sub(u32::from(syn != 0)),
                        seq[1 - dir],
                        flags::ACK | syn,
                        piece.len(),
                    );
                    c.segment(*dir, &seg, piece, ms * 1_000_000, &mut log);
                    seq[*dir] = seq[*dir].wrapping_add(piece.len() as u32);
                }
            }
            let s = c.summary();
            assert_eq!(s.client, "a");
            assert_eq!(s.nfs_versions, [3]);
            assert_eq!((s.unanswered_calls, s.unmatched_replies), (0, 0), "{mss}");
            assert_eq!(s.in_flight_max, 2);
            // two in flight for 10 ms, one for 20 ms, one for 1 ms, of 41 ms
            assert!(
                (s.in_flight_mean - 41.0 / 41.0).abs() < 1e-9,
                "{}",
                s.in_flight_mean
            );
            assert!((s.busy_s - 0.031).abs() < 1e-9, "{}", s.busy_s);
            let r = s.ops.iter().find(|o| o.op == "READ").unwrap();
            assert_eq!((r.calls, r.replies, r.data_bytes), (2, 2, 131072), "{mss}");
            assert_eq!((r.size_min, r.size_max), (Some(65536), Some(65536)));
            assert_eq!((r.srt.min_ns, r.srt.max_ns), (10_000_000, 30_000_000));
            assert!(r.reply_bytes > 131072);
            let l = s.ops.iter().find(|o| o.op == "LOOKUP").unwrap();
            assert_eq!((l.calls, l.replies), (1, 1));
            assert_eq!(l.errors.len(), 1);
            assert_eq!(
                (l.errors[0].count, l.errors[0].name.as_str()),
                (1, "NFS3ERR_NOENT")
            );
            assert_eq!(l.srt.min_ns, 1_000_000);
            // the request stream: each request with its times, file, offset, count, status
            let got: Vec<_> = log
                .requests
                .iter()
                .map(|r| {
                    let ms = |t: i64| t / 1_000_000;
                    (
                        r.op.to_string(),
                        ms(r.call_last_ns),
                        ms(r.reply_last_ns),
                        r.count,
                        r.outcome,
                    )
                })
                .collect();
            assert_eq!(
                got,
                [
                    ("READ".to_string(), 0, 10, 65536, requests::Outcome::Ok),
                    ("READ".to_string(), 0, 30, 65536, requests::Outcome::Ok),
                    ("LOOKUP".to_string(), 40, 41, 0, requests::Outcome::Error(2)),
                ],
                "{mss}"
            );
            let fh_hash = requests::file_hash(fh.as_bytes());
            assert!(
                log.requests
                    .iter()
                    .all(|r| r.file == fh_hash && r.client == 0)
            );
            assert!(log.requests[0].reply_bytes > 65536 && log.requests[0].call_bytes < 200);
        }
        // off: nothing kept, the figures the same
        let mut c = RpcConn::default();
        let mut off = RequestLog::default();
        let mut seq = [100u32, 900u32];
        for (dir, bytes, ms) in &script {
            let seg = segment(seq[*dir], seq[1 - dir], flags::ACK, bytes.len());
            c.segment(*dir, &seg, bytes, ms * 1_000_000, &mut off);
            seq[*dir] = seq[*dir].wrapping_add(bytes.len() as u32);
        }
        assert_eq!(off.requests.capacity(), 0);
        assert_eq!(c.summary().ops.iter().map(|o| o.calls).sum::<u64>(), 3);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = crate::testkit::Rng::new(22);
        for n in 0..300 {
            fuzz_rpc_streams(&rng.bytes(n * 7));
        }
        // and real records cut and shuffled
        let mut b = call(9, proc3::GETATTR, |b| put_u32(b, 0));
        b.extend(reply(9, |b| put_u32(b, 0)));
        for cut in 0..b.len() {
            let mut d = vec![0u8, cut as u8];
            d.extend_from_slice(&b[..cut.min(255)]);
            d.extend_from_slice(&[1, 40]);
            d.extend_from_slice(&b[cut.min(b.len())..]);
            fuzz_rpc_streams(&d);
        }
    }
}
