//! The operations inside NFSv4 COMPOUND calls (RFC 7530, 8881, 7862, 8276), counted per
//! operation as tshark counts them (each `nfs.opcode` of a call).
//!
//! An operation's arguments are walked only to find the next operation; nothing is kept.
//! Only the first bytes of a record and the last of it are held ([`super::rpc`]): the
//! operations after a WRITE's data are found in the record's tail when they lie there (as the
//! GETATTR after the data of Linux's WRITE), and those after an operation whose arguments are
//! not walked here (the pNFS device and layout-commit operations, COPY, WRITE_SAME, …) are not
//! counted; such calls are counted as cut.

use nsperf_nfs::xdr::{XdrError, XdrReader};

use crate::model::CompoundOp;

pub use super::names::nfs4_op_name as op_name;
use super::names::{NFS4_NAMES as NAMES, NFS4_OPS as OPS};
use super::requests::{CallInfo, Op, Protocol, file_hash};

/// Longest name, file handle, owner or other opaque item accepted, bytes.
const MAX_OPAQUE: usize = 4096;

/// Longest attribute bitmap accepted, words.
const MAX_BITMAP: u32 = 8;

/// Longest array of small items accepted.
const MAX_ARRAY: u32 = 256;

/// Why an operation's arguments could not be walked.
#[derive(Debug)]
enum Cut {
    /// The record's bytes held end (or are malformed).
    Xdr,
    /// Arguments not walked here.
    NotWalked,
}

impl From<XdrError> for Cut {
    fn from(_: XdrError) -> Cut {
        Cut::Xdr
    }
}

/// The operations of the COMPOUND calls of one connection.
#[derive(Debug)]
pub struct CompoundOps {
    counts: [u64; OPS],
    /// COMPOUND calls seen.
    pub calls: u64,
    /// COMPOUND calls whose operations were not all counted.
    pub cut: u64,
}

impl Default for CompoundOps {
    fn default() -> Self {
        CompoundOps {
            counts: [0; OPS],
            calls: 0,
            cut: 0,
        }
    }
}

impl CompoundOps {
    /// The arguments of one COMPOUND call: `x` over the record's head, just past the RPC
    /// call header; `held` what else of the record is held.
    /// `info`, when given, gets the COMPOUND's main operation ([`MainOp`]).
    pub fn call<'a>(&mut self, x: &mut XdrReader<'a>, held: Held<'a>, info: Option<&mut CallInfo>) {
        self.calls += 1;
        let mut main = info.map(|i| (MainOp::default(), i));
        if self.walk(x, held, main.as_mut().map(|(m, _)| m)).is_err() {
            self.cut += 1;
        }
        if let Some((m, info)) = main {
            m.fill(info);
        }
    }

    fn walk<'a>(
        &mut self,
        x: &mut XdrReader<'a>,
        held: Held<'a>,
        mut main: Option<&mut MainOp>,
    ) -> Result<(), Cut> {
        x.opaque(MAX_OPAQUE)?; // tag
        x.u32()?; // minor version
        let n = x.u32()?;
        for _ in 0..n {
            // Each operation takes at least its 4-byte number: bounded by the bytes held.
            let op = x.u32()?;
            let Some(c) = self.counts.get_mut(op as usize) else {
                return Err(Cut::NotWalked);
            };
            if op < 3 {
                return Err(Cut::NotWalked);
            }
            *c += 1;
            if let Some(m) = main.as_deref_mut() {
                m.op(op, x.clone());
            }
            if op == WRITE {
                write_args(x, held)?;
            } else {
                skip_args(op, x)?;
            }
        }
        Ok(())
    }

    /// The operations seen, by number.
    pub fn summary(&self) -> Vec<CompoundOp> {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(op, n)| CompoundOp {
                opcode: op as u32,
                op: NAMES[op].to_string(),
                calls: *n,
            })
            .collect()
    }
}

/// Operations that only set up or read back around a COMPOUND's main operation.
const PLUMBING: [u32; 8] = [
    9,  // GETATTR
    10, // GETFH
    22, // PUTFH
    23, // PUTPUBFH
    24, // PUTROOTFH
    31, // RESTOREFH
    32, // SAVEFH
    53, // SEQUENCE
];

/// A COMPOUND's main operation, as a request of the replay sees it: the first operation that
/// is not [`PLUMBING`] (else GETATTR when there is one, else the first); its file the
/// current file handle then (the last PUTFH's); READ's, WRITE's and COMMIT's offset and
/// count (READ's as asked).
#[derive(Debug, Default, Clone, Copy)]
pub struct MainOp {
    first: Option<u32>,
    getattr: bool,
    main: Option<u32>,
    current_fh: u64,
    file: u64,
    offset: u64,
    count: u32,
    stable: Option<nsperf_nfs::Stable>,
}

impl MainOp {
    /// Operation `op`, its arguments at `x`.
    fn op(&mut self, op: u32, mut x: XdrReader<'_>) {
        self.first.get_or_insert(op);
        if op == 22 {
            self.current_fh = x.opaque(MAX_OPAQUE).map_or(0, file_hash);
        }
        if op == 9 && self.main.is_none() {
            self.getattr = true;
            self.file = self.current_fh;
        }
        if self.main.is_some() || PLUMBING.contains(&op) {
            return;
        }
        self.main = Some(op);
        self.file = self.current_fh;
        let (offset, count) = match op {
            // READ, READ_PLUS: stateid, offset, count
            25 | 68 => (x.skip(16).and_then(|_| x.u64()), x.u32()),
            // WRITE: stateid, offset, stable, data length
            WRITE => {
                let offset = x.skip(16).and_then(|_| x.u64());
                self.stable = x
                    .u32()
                    .ok()
                    .and_then(|v| nsperf_nfs::Stable::from_wire(v).ok());
                (offset, x.u32())
            }
            // COMMIT: offset, count
            5 => (x.u64(), x.u32()),
            _ => return,
        };
        self.offset = offset.unwrap_or(0);
        self.count = count.unwrap_or(0);
    }

    /// The main operation into a request's call information.
    fn fill(&self, info: &mut CallInfo) {
        let op = self
            .main
            .or(self.getattr.then_some(9))
            .or(self.first)
            .unwrap_or(0);
        info.op = Some(Op {
            protocol: Protocol::Nfs4,
            code: op as u16,
        });
        info.file = self.file;
        info.offset = self.offset;
        info.count = self.count;
        info.stable = self.stable;
    }
}

/// What a record holds beyond its head: its length and its last bytes.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    /// Length of the record.
    pub len: u64,
    /// Its last bytes, contiguous to its end.
    pub tail: &'a [u8],
}

const WRITE: u32 = 38;

/// WRITE4args: stateid, offset, stable, data; the walk goes on past the data in the head or
/// in the record's tail.
fn write_args<'a>(x: &mut XdrReader<'a>, held: Held<'a>) -> Result<(), Cut> {
    stateid(x)?;
    words(x, 3)?;
    let n = x.u32()? as u64;
    let padded = (n + 3) & !3;
    if x.remaining() as u64 >= padded {
        x.skip(padded as usize)?;
        return Ok(());
    }
    let next = x.position() as u64 + padded;
    let tail_start = held.len.saturating_sub(held.tail.len() as u64);
    if next < tail_start || next > held.len {
        return Err(Cut::Xdr);
    }
    *x = XdrReader::new(&held.tail[(next - tail_start) as usize..]);
    Ok(())
}

fn stateid(x: &mut XdrReader<'_>) -> Result<(), Cut> {
    x.skip(16)?;
    Ok(())
}

fn opaque(x: &mut XdrReader<'_>) -> Result<(), Cut> {
    x.opaque(MAX_OPAQUE)?;
    Ok(())
}

fn bitmap(x: &mut XdrReader<'_>) -> Result<(), Cut> {
    let n = x.u32()?;
    if n > MAX_BITMAP {
        return Err(Cut::Xdr);
    }
    x.skip(4 * n as usize)?;
    Ok(())
}

fn fattr(x: &mut XdrReader<'_>) -> Result<(), Cut> {
    bitmap(x)?;
    opaque(x)
}

/// `n` × 4-byte words.
fn words(x: &mut XdrReader<'_>, n: usize) -> Result<(), Cut> {
    x.skip(4 * n)?;
    Ok(())
}

/// A counted array of items of `each` words.
fn array(x: &mut XdrReader<'_>, each: usize) -> Result<(), Cut> {
    let n = x.u32()?;
    if n > MAX_ARRAY {
        return Err(Cut::Xdr);
    }
    words(x, n as usize * each)
}

/// callback_sec_parms4<> (BACKCHANNEL_CTL, CREATE_SESSION).
fn callback_sec_parms(x: &mut XdrReader<'_>) -> Result<(), Cut> {
    let n = x.u32()?;
    if n > MAX_ARRAY {
        return Err(Cut::Xdr);
    }
    for _ in 0..n {
        match x.u32()? {
            0 => {}
            1 => {
                // authsys_parms: stamp, machine name, uid, gid, gids
                x.u32()?;
                opaque(x)?;
                words(x, 2)?;
                array(x, 1)?;
            }
            6 => {
                // gss_cb_handles4: service, two handles
                x.u32()?;
                opaque(x)?;
                opaque(x)?;
            }
            _ => return Err(Cut::Xdr),
        }
    }
    Ok(())
}

/// channel_attrs4: six words and rdma_ird<1>.
fn channel_attrs(x: &mut XdrReader<'_>) -> Result<(), Cut> {
    words(x, 6)?;
    array(x, 1)
}

/// OPEN4args after the owner: openflag4 and open_claim4.
fn open_tail(x: &mut XdrReader<'_>) -> Result<(), Cut> {
    if x.u32()? == 1 {
        // OPEN4_CREATE: createhow4
        match x.u32()? {
            0 | 1 => fattr(x)?,
            2 => words(x, 2)?,
            3 => {
                words(x, 2)?;
                fattr(x)?;
            }
            _ => return Err(Cut::Xdr),
        }
    }
    match x.u32()? {
        0 | 3 => opaque(x),
        1 => words(x, 1),
        2 => {
            stateid(x)?;
            opaque(x)
        }
        4 | 6 => Ok(()),
        5 => stateid(x),
        _ => Err(Cut::Xdr),
    }
}

/// EXCHANGE_ID4args.
fn exchange_id(x: &mut XdrReader<'_>) -> Result<(), Cut> {
    words(x, 2)?; // verifier
    opaque(x)?; // owner id
    x.u32()?; // flags
    match x.u32()? {
        0 => {}
        1 => {
            bitmap(x)?;
            bitmap(x)?;
        }
        2 => {
            bitmap(x)?;
            bitmap(x)?;
            for _ in 0..2 {
                let n = x.u32()?;
                if n > MAX_ARRAY {
                    return Err(Cut::Xdr);
                }
                for _ in 0..n {
                    opaque(x)?;
                }
            }
            words(x, 2)?;
        }
        _ => return Err(Cut::Xdr),
    }
    let n = x.u32()?; // client_impl_id<1>
    if n > 1 {
        return Err(Cut::Xdr);
    }
    for _ in 0..n {
        opaque(x)?;
        opaque(x)?;
        words(x, 3)?;
    }
    Ok(())
}

/// Skips the arguments of operation `op`.
fn skip_args(op: u32, x: &mut XdrReader<'_>) -> Result<(), Cut> {
    match op {
        // no arguments: GETFH, LOOKUPP, PUTPUBFH, PUTROOTFH, READLINK, RESTOREFH, SAVEFH
        10 | 16 | 23 | 24 | 27 | 31 | 32 => Ok(()),
        // one word: ACCESS, OPENATTR, SECINFO_NO_NAME, RECLAIM_COMPLETE
        3 | 19 | 52 | 58 => words(x, 1),
        // a hyper: DELEGPURGE, RENEW, DESTROY_CLIENTID
        7 | 30 | 57 => words(x, 2),
        // a stateid: DELEGRETURN, FREE_STATEID, OFFLOAD_CANCEL, OFFLOAD_STATUS
        8 | 45 | 66 | 67 => stateid(x),
        // a name or a file handle: LINK, LOOKUP, PUTFH, REMOVE, SECINFO, GETXATTR,
        // REMOVEXATTR
        11 | 15 | 22 | 28 | 33 | 72 | 75 => opaque(x),
        // a bitmap: GETATTR
        9 => bitmap(x),
        // attributes: NVERIFY, VERIFY
        17 | 37 => fattr(x),
        4 => {
            words(x, 1)?;
            stateid(x)
        }
        5 => words(x, 3),
        6 => {
            match x.u32()? {
                5 => opaque(x)?,
                3 | 4 => words(x, 2)?,
                _ => {}
            }
            opaque(x)?;
            fattr(x)
        }
        12 => {
            // LOCK: type, reclaim, offset, length, locker4
            words(x, 6)?;
            if x.bool()? {
                words(x, 1)?;
                stateid(x)?;
                words(x, 3)?;
                opaque(x)
            } else {
                stateid(x)?;
                words(x, 1)
            }
        }
        13 => {
            words(x, 7)?;
            opaque(x)
        }
        14 => {
            words(x, 2)?;
            stateid(x)?;
            words(x, 4)
        }
        18 => {
            // OPEN: seqid, access, deny, owner (clientid, opaque)
            words(x, 5)?;
            opaque(x)?;
            open_tail(x)
        }
        20 => {
            stateid(x)?;
            words(x, 1)
        }
        21 => {
            stateid(x)?;
            words(x, 3)
        }
        // READ, READ_PLUS: stateid, offset, count; SEEK: stateid, offset, what
        25 | 68 | 69 => {
            stateid(x)?;
            words(x, 3)
        }
        26 => {
            words(x, 6)?;
            bitmap(x)
        }
        29 => {
            opaque(x)?;
            opaque(x)
        }
        34 => {
            stateid(x)?;
            fattr(x)
        }
        35 => {
            // SETCLIENTID: verifier, id, cb_program, netid, addr, callback_ident
            words(x, 2)?;
            opaque(x)?;
            words(x, 1)?;
            opaque(x)?;
            opaque(x)?;
            words(x, 1)
        }
        36 => words(x, 4),
        39 => {
            words(x, 2)?;
            opaque(x)
        }
        40 => {
            words(x, 1)?;
            callback_sec_parms(x)
        }
        41 => words(x, 6),
        42 => exchange_id(x),
        43 => {
            words(x, 4)?;
            channel_attrs(x)?;
            channel_attrs(x)?;
            words(x, 1)?;
            callback_sec_parms(x)
        }
        44 => words(x, 4),
        50 => {
            words(x, 9)?;
            stateid(x)?;
            words(x, 1)
        }
        53 => words(x, 8),
        55 => array(x, 4),
        // ALLOCATE, DEALLOCATE: stateid, offset, length
        59 | 62 => {
            stateid(x)?;
            words(x, 4)
        }
        63 => {
            stateid(x)?;
            words(x, 4)?;
            bitmap(x)
        }
        71 => {
            stateid(x)?;
            stateid(x)?;
            words(x, 6)
        }
        73 => {
            words(x, 1)?;
            opaque(x)?;
            opaque(x)
        }
        74 => words(x, 3),
        _ => Err(Cut::NotWalked),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_nfs::xdr::{put_opaque, put_u32, put_u64};

    fn compound(ops: impl FnOnce(&mut Vec<u8>), n: u32) -> Vec<u8> {
        let mut b = Vec::new();
        put_opaque(&mut b, b"tag");
        put_u32(&mut b, 1);
        put_u32(&mut b, n);
        ops(&mut b);
        b
    }

    /// The whole record held.
    fn whole(b: &[u8]) -> Held<'_> {
        Held {
            len: b.len() as u64,
            tail: &b[b.len().saturating_sub(256)..],
        }
    }

    /// SEQUENCE PUTFH OPEN GETFH GETATTR; SEQUENCE PUTFH WRITE GETATTR with the data in the
    /// head, beyond it (the GETATTR found in the tail) and beyond both (cut); an operation not
    /// walked (cut): counted as tshark counts them, the cut calls said.
    #[test]
    fn operations_counted_and_cut_calls_said() {
        let mut t = CompoundOps::default();
        let seq = |b: &mut Vec<u8>| {
            put_u32(b, 53);
            b.extend_from_slice(&[7; 16]);
            for v in [1, 0, 0, 0] {
                put_u32(b, v);
            }
        };
        let putfh = |b: &mut Vec<u8>| {
            put_u32(b, 22);
            put_opaque(b, &[1; 28]);
        };
        let getattr = |b: &mut Vec<u8>| {
            put_u32(b, 9);
            put_u32(b, 2);
            put_u32(b, 0x10);
            put_u32(b, 0x20);
        };
        let b = compound(
            |b| {
                seq(b);
                putfh(b);
                // OPEN: seqid, access, deny, clientid, owner; CREATE GUARDED with attrs;
                // CLAIM_NULL name
                put_u32(b, 18);
                for v in [0, 2, 0] {
                    put_u32(b, v);
                }
                put_u64(b, 9);
                put_opaque(b, b"owner");
                put_u32(b, 1);
                put_u32(b, 1);
                put_u32(b, 1);
                put_u32(b, 0x10);
                put_opaque(b, &[0; 8]);
                put_u32(b, 0);
                put_opaque(b, b"file.bin");
                put_u32(b, 10);
                getattr(b);
            },
            5,
        );
        t.call(&mut XdrReader::new(&b), whole(&b), None);
        let write = |data: usize| {
            compound(
                |b| {
                    seq(b);
                    putfh(b);
                    put_u32(b, 38);
                    b.extend_from_slice(&[0; 16]);
                    put_u64(b, 0);
                    put_u32(b, 0);
                    put_opaque(b, &vec![0xab; data]);
                    getattr(b);
                },
                4,
            )
        };
        let w = write(100);
        let mut info = CallInfo::default();
        t.call(&mut XdrReader::new(&w), whole(&w), Some(&mut info));
        assert_eq!(t.cut, 0);
        // the main operation: WRITE, on the PUTFH's file, 100 bytes at offset 0
        assert_eq!(info.op.map(|o| o.to_string()).as_deref(), Some("WRITE"));
        assert_eq!(
            (info.file, info.offset, info.count),
            (file_hash(&[1; 28]), 0, 100)
        );
        // SEQUENCE PUTFH GETATTR: GETATTR; SEQUENCE alone: SEQUENCE
        let g = compound(
            |b| {
                seq(b);
                putfh(b);
                getattr(b);
            },
            3,
        );
        let mut info = CallInfo::default();
        CompoundOps::default().call(&mut XdrReader::new(&g), whole(&g), Some(&mut info));
        assert_eq!(info.op.map(|o| o.to_string()).as_deref(), Some("GETATTR"));
        assert_eq!(info.file, file_hash(&[1; 28]));
        let q = compound(seq, 1);
        CompoundOps::default().call(&mut XdrReader::new(&q), whole(&q), Some(&mut info));
        assert_eq!(info.op.map(|o| o.to_string()).as_deref(), Some("SEQUENCE"));
        // the data beyond the head: the GETATTR after it is in the tail
        let w = write(4001);
        t.call(&mut XdrReader::new(&w[..1024]), whole(&w), None);
        assert_eq!(t.cut, 0);
        // nor in the tail: cut
        let tail = &w[w.len() - 8..];
        let held = Held {
            len: w.len() as u64,
            tail,
        };
        t.call(&mut XdrReader::new(&w[..1024]), held, None);
        assert_eq!(t.cut, 1);
        // GETDEVICEINFO is not walked: the call is cut after it
        let b = compound(
            |b| {
                seq(b);
                put_u32(b, 47);
                b.extend_from_slice(&[0; 24]);
                getattr(b);
            },
            3,
        );
        t.call(&mut XdrReader::new(&b), whole(&b), None);
        let got: Vec<(String, u64)> = t.summary().into_iter().map(|o| (o.op, o.calls)).collect();
        let want = [
            ("GETATTR", 3),
            ("GETFH", 1),
            ("OPEN", 1),
            ("PUTFH", 4),
            ("WRITE", 3),
            ("GETDEVICEINFO", 1),
            ("SEQUENCE", 5),
        ];
        assert_eq!(
            got,
            want.map(|(o, n)| (o.to_string(), n)).to_vec(),
            "{got:?}"
        );
        assert_eq!((t.calls, t.cut), (5, 2));
        assert_eq!(op_name(10044), "ILLEGAL");
        // a bogus count costs nothing: the walk ends where the bytes do
        let b = compound(|_| {}, u32::MAX);
        t.call(&mut XdrReader::new(&b), whole(&b), None);
        assert_eq!((t.calls, t.cut), (6, 3));
    }
}
