//! NFSv4.1 COMPOUND calls and replies (RFC 8881, RFC 5662's XDR): the operations nsperf's
//! client sends, encoded into a reused buffer, and a checked reader of the results in order.
//!
//! A reply is read operation by operation: [`Results::next`] checks that the next result is
//! of the operation asked for and turns a failed status into an [`NfsError::Nfs4`] naming the
//! operation (a COMPOUND stops at its first failure, so the failed one is the last result).

use crate::error::NfsError;
use crate::proto::{FileHandle, NfsStat, Stable};
use crate::rpc::RpcError;
use crate::xdr::{XdrError, XdrReader, put_bool, put_fixed, put_opaque, put_u32, put_u64};

/// The COMPOUND procedure of NFS version 4.
pub(crate) const PROC_COMPOUND: u32 = 1;
/// NFS version 4 in the RPC header (every minor version).
pub(crate) const NFS_V4: u32 = 4;

/// Operation numbers (RFC 8881 section 18).
#[allow(missing_docs)]
pub mod op {
    pub const ACCESS: u32 = 3;
    pub const CLOSE: u32 = 4;
    pub const COMMIT: u32 = 5;
    pub const CREATE: u32 = 6;
    pub const GETATTR: u32 = 9;
    pub const GETFH: u32 = 10;
    pub const LOOKUP: u32 = 15;
    pub const OPEN: u32 = 18;
    pub const OPEN_CONFIRM: u32 = 20;
    pub const PUTFH: u32 = 22;
    pub const PUTROOTFH: u32 = 24;
    pub const READ: u32 = 25;
    pub const READDIR: u32 = 26;
    pub const REMOVE: u32 = 28;
    pub const SETATTR: u32 = 34;
    pub const SETCLIENTID: u32 = 35;
    pub const SETCLIENTID_CONFIRM: u32 = 36;
    pub const WRITE: u32 = 38;
    pub const EXCHANGE_ID: u32 = 42;
    pub const CREATE_SESSION: u32 = 43;
    pub const DESTROY_SESSION: u32 = 44;
    pub const SEQUENCE: u32 = 53;
    pub const DESTROY_CLIENTID: u32 = 57;
    pub const RECLAIM_COMPLETE: u32 = 58;
}

/// The name of an operation, for messages.
pub fn op_name(n: u32) -> &'static str {
    match n {
        op::CLOSE => "CLOSE",
        op::COMMIT => "COMMIT",
        op::CREATE => "CREATE",
        op::GETATTR => "GETATTR",
        op::GETFH => "GETFH",
        op::LOOKUP => "LOOKUP",
        op::OPEN => "OPEN",
        op::OPEN_CONFIRM => "OPEN_CONFIRM",
        op::SETCLIENTID => "SETCLIENTID",
        op::SETCLIENTID_CONFIRM => "SETCLIENTID_CONFIRM",
        op::PUTFH => "PUTFH",
        op::PUTROOTFH => "PUTROOTFH",
        op::READ => "READ",
        op::READDIR => "READDIR",
        op::REMOVE => "REMOVE",
        op::SETATTR => "SETATTR",
        op::WRITE => "WRITE",
        op::EXCHANGE_ID => "EXCHANGE_ID",
        op::CREATE_SESSION => "CREATE_SESSION",
        op::DESTROY_SESSION => "DESTROY_SESSION",
        op::SEQUENCE => "SEQUENCE",
        op::DESTROY_CLIENTID => "DESTROY_CLIENTID",
        op::RECLAIM_COMPLETE => "RECLAIM_COMPLETE",
        _ => "operation",
    }
}

/// NFSv4 statuses nsperf's client treats specially.
#[allow(missing_docs)]
pub mod stat {
    use crate::proto::NfsStat;
    pub const MINOR_VERS_MISMATCH: NfsStat = NfsStat(10021);
    pub const COMPLETE_ALREADY: NfsStat = NfsStat(10054);
}

/// Attribute numbers (RFC 8881 section 5.8).
pub mod attr {
    /// `type` (nfs_ftype4).
    pub const TYPE: u32 = 1;
    /// `size` (uint64).
    pub const SIZE: u32 = 4;
    /// `maxread` (uint64).
    pub const MAXREAD: u32 = 30;
    /// `maxwrite` (uint64).
    pub const MAXWRITE: u32 = 31;
}

/// OPEN's result flag: the open-owner is new and the open must be confirmed (4.0).
pub const OPEN4_RESULT_CONFIRM: u32 = 2;

/// `nfs_ftype4` of a regular file and a directory.
pub const NF4REG: u32 = 1;
/// See [`NF4REG`].
pub const NF4DIR: u32 = 2;

/// A session's id.
pub type SessionId = [u8; 16];

/// A stateid: which open (or lock, or delegation) an I/O belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Stateid {
    /// Its sequence number (0 in a READ or WRITE: "the current one", RFC 8881 8.2.2).
    pub seqid: u32,
    /// The server's opaque part.
    pub other: [u8; 12],
}

impl Stateid {
    fn encode(&self, b: &mut Vec<u8>) {
        put_u32(b, self.seqid);
        put_fixed(b, &self.other);
    }

    fn decode(r: &mut XdrReader<'_>) -> Result<Stateid, XdrError> {
        let seqid = r.u32()?;
        let mut other = [0u8; 12];
        other.copy_from_slice(r.fixed(12)?);
        Ok(Stateid { seqid, other })
    }

    /// The same open with seqid 0, as READ and WRITE name it in NFSv4.1.
    pub fn current(self) -> Stateid {
        Stateid { seqid: 0, ..self }
    }
}

/// A COMPOUND being encoded: the tag, the minor version and the operations, their count
/// written by [`Compound::finish`].
pub(crate) struct Compound<'a> {
    b: &'a mut Vec<u8>,
    count_at: usize,
    n: u32,
}

impl<'a> Compound<'a> {
    /// Starts the COMPOUND arguments at the end of `b`.
    pub fn begin(b: &'a mut Vec<u8>, minor: u32) -> Self {
        put_opaque(b, b"");
        put_u32(b, minor);
        let count_at = b.len();
        put_u32(b, 0);
        Compound { b, count_at, n: 0 }
    }

    fn op(&mut self, n: u32) -> &mut Vec<u8> {
        self.n += 1;
        put_u32(self.b, n);
        self.b
    }

    /// Writes the operation count.
    pub fn finish(self) {
        self.b[self.count_at..self.count_at + 4].copy_from_slice(&self.n.to_be_bytes());
    }

    pub fn sequence(&mut self, sid: &SessionId, seq: u32, slot: u32, highest: u32) {
        let b = self.op(op::SEQUENCE);
        put_fixed(b, sid);
        put_u32(b, seq);
        put_u32(b, slot);
        put_u32(b, highest);
        put_bool(b, false);
    }

    pub fn putfh(&mut self, fh: &FileHandle) {
        let b = self.op(op::PUTFH);
        put_opaque(b, fh.as_bytes());
    }

    pub fn putrootfh(&mut self) {
        self.op(op::PUTROOTFH);
    }

    pub fn lookup(&mut self, name: &str) {
        let b = self.op(op::LOOKUP);
        put_opaque(b, name.as_bytes());
    }

    pub fn getfh(&mut self) {
        self.op(op::GETFH);
    }

    /// GETATTR of the attributes numbered in `attrs` (below 64).
    pub fn getattr(&mut self, attrs: &[u32]) {
        let b = self.op(op::GETATTR);
        put_bitmap(b, attrs);
    }

    /// OPEN creating `name` in the current directory GUARDED (an existing file is an error)
    /// with mode 0644, for reading and writing, denying nothing. `seqid` is the open-owner's
    /// (4.0; ignored in 4.1).
    pub fn open_create(&mut self, seqid: u32, clientid: u64, owner: &[u8], name: &str) {
        let b = self.op(op::OPEN);
        put_u32(b, seqid);
        put_u32(b, 3); // OPEN4_SHARE_ACCESS_BOTH
        put_u32(b, 0); // OPEN4_SHARE_DENY_NONE
        put_u64(b, clientid);
        put_opaque(b, owner);
        put_u32(b, 1); // OPEN4_CREATE
        put_u32(b, 1); // GUARDED4
        put_mode(b, 0o644);
        put_u32(b, 0); // CLAIM_NULL
        put_opaque(b, name.as_bytes());
    }

    pub fn close(&mut self, seqid: u32, st: &Stateid) {
        let b = self.op(op::CLOSE);
        put_u32(b, seqid);
        st.encode(b);
    }

    pub fn open_confirm(&mut self, st: &Stateid, seqid: u32) {
        let b = self.op(op::OPEN_CONFIRM);
        st.encode(b);
        put_u32(b, seqid);
    }

    /// SETCLIENTID (4.0) with no callback address: the server gives no delegations.
    pub fn setclientid(&mut self, verifier: u64, id: &[u8]) {
        let b = self.op(op::SETCLIENTID);
        put_u64(b, verifier);
        put_opaque(b, id);
        put_u32(b, 0x4000_0000); // callback program
        put_opaque(b, b"tcp");
        put_opaque(b, b"0.0.0.0.0.0");
        put_u32(b, 0); // callback ident
    }

    pub fn setclientid_confirm(&mut self, clientid: u64, confirm: u64) {
        let b = self.op(op::SETCLIENTID_CONFIRM);
        put_u64(b, clientid);
        put_u64(b, confirm);
    }

    /// CREATE of a directory `name` with mode 0755.
    pub fn mkdir(&mut self, name: &str) {
        let b = self.op(op::CREATE);
        put_u32(b, NF4DIR);
        put_opaque(b, name.as_bytes());
        put_mode(b, 0o755);
    }

    pub fn remove(&mut self, name: &str) {
        let b = self.op(op::REMOVE);
        put_opaque(b, name.as_bytes());
    }

    /// READDIR from `cookie`, names only.
    pub fn readdir(&mut self, cookie: u64, verf: [u8; 8]) {
        let b = self.op(op::READDIR);
        put_u64(b, cookie);
        put_fixed(b, &verf);
        put_u32(b, 32 << 10);
        put_u32(b, 64 << 10);
        put_bitmap(b, &[]);
    }

    /// SETATTR of the size.
    pub fn set_size(&mut self, st: &Stateid, size: u64) {
        let b = self.op(op::SETATTR);
        st.encode(b);
        put_bitmap(b, &[attr::SIZE]);
        put_u32(b, 8);
        put_u64(b, size);
    }

    pub fn read(&mut self, st: &Stateid, offset: u64, count: u32) {
        let b = self.op(op::READ);
        st.encode(b);
        put_u64(b, offset);
        put_u32(b, count);
    }

    /// WRITE's arguments up to the data's length; the data (and its padding) follow.
    pub fn write_head(&mut self, st: &Stateid, offset: u64, stable: Stable, len: u32) {
        let b = self.op(op::WRITE);
        st.encode(b);
        put_u64(b, offset);
        put_u32(b, stable.to_wire());
        put_u32(b, len);
    }

    /// WRITE with its data inline (the control path; the data path sends the data from the
    /// caller's buffer after [`Compound::write_head`]).
    pub fn write(&mut self, st: &Stateid, offset: u64, stable: Stable, data: &[u8]) {
        self.write_head(st, offset, stable, data.len() as u32);
        self.b.extend_from_slice(data);
        self.b
            .resize(self.b.len() + crate::xdr::pad4(data.len()) - data.len(), 0);
    }

    pub fn commit(&mut self) {
        self.commit_range(0, 0);
    }

    /// COMMIT of `count` bytes from `offset` (0: to the end).
    pub fn commit_range(&mut self, offset: u64, count: u32) {
        let b = self.op(op::COMMIT);
        put_u64(b, offset);
        put_u32(b, count);
    }

    /// ACCESS asking for the rights in `mask`.
    pub fn access(&mut self, mask: u32) {
        let b = self.op(op::ACCESS);
        put_u32(b, mask);
    }

    pub fn exchange_id(&mut self, verifier: u64, owner: &[u8]) {
        let b = self.op(op::EXCHANGE_ID);
        put_u64(b, verifier);
        put_opaque(b, owner);
        put_u32(b, 0x0001_0000); // EXCHGID4_FLAG_USE_NON_PNFS
        put_u32(b, 0); // SP4_NONE
        put_u32(b, 0); // no implementation id
    }

    /// CREATE_SESSION with `slots` fore-channel slots for requests of up to `max_io` bytes of
    /// data, and no back channel.
    pub fn create_session(&mut self, clientid: u64, seq: u32, slots: u32, max_io: u32) {
        let b = self.op(op::CREATE_SESSION);
        put_u64(b, clientid);
        put_u32(b, seq);
        put_u32(b, 0); // no persistence, no back channel on this connection
        let size = max_io.saturating_add(8192);
        put_channel(b, size, size, slots);
        put_channel(b, 4096, 4096, 1);
        put_u32(b, 0x4000_0000); // callback program (unused: no back channel)
        put_u32(b, 1);
        put_u32(b, 0); // AUTH_NONE
    }

    pub fn reclaim_complete(&mut self) {
        let b = self.op(op::RECLAIM_COMPLETE);
        put_bool(b, false);
    }

    pub fn destroy_session(&mut self, sid: &SessionId) {
        let b = self.op(op::DESTROY_SESSION);
        put_fixed(b, sid);
    }

    pub fn destroy_clientid(&mut self, clientid: u64) {
        let b = self.op(op::DESTROY_CLIENTID);
        put_u64(b, clientid);
    }
}

fn put_channel(b: &mut Vec<u8>, req: u32, resp: u32, slots: u32) {
    put_u32(b, 0); // header padding
    put_u32(b, req);
    put_u32(b, resp);
    put_u32(b, 4096); // largest cached reply
    put_u32(b, 16); // operations per COMPOUND
    put_u32(b, slots);
    put_u32(b, 0); // no RDMA
}

/// A bitmap4 of attribute numbers below 64.
fn put_bitmap(b: &mut Vec<u8>, attrs: &[u32]) {
    let mut w = [0u32; 2];
    for &a in attrs {
        w[(a / 32) as usize] |= 1 << (a % 32);
    }
    let n: usize = if w[1] != 0 {
        2
    } else if w[0] != 0 {
        1
    } else {
        0
    };
    put_u32(b, n as u32);
    for x in &w[..n] {
        put_u32(b, *x);
    }
}

/// A fattr4 holding only `mode` (attribute 33).
fn put_mode(b: &mut Vec<u8>, mode: u32) {
    put_u32(b, 2);
    put_u32(b, 0);
    put_u32(b, 1 << 1);
    put_u32(b, 4);
    put_u32(b, mode);
}

/// Attributes of an object as nsperf asks for them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attr4 {
    /// `nfs_ftype4`.
    pub ftype: u32,
    /// Size in bytes.
    pub size: u64,
    /// Largest READ the server takes.
    pub maxread: u64,
    /// Largest WRITE the server takes.
    pub maxwrite: u64,
}

/// Decodes a fattr4 of the attributes [`Attr4`] holds; any other attribute in it is an
/// error (a server returns only what was asked).
pub(crate) fn decode_attrs(r: &mut XdrReader<'_>) -> Result<Attr4, XdrError> {
    let words = r.u32()?;
    if words > 8 {
        return Err(XdrError::TooLong {
            len: words as usize,
            max: 8,
        });
    }
    let mut w = [0u32; 2];
    for i in 0..words as usize {
        let x = r.u32()?;
        match w.get_mut(i) {
            Some(slot) => *slot = x,
            None if x != 0 => return Err(XdrError::Discriminant(x)),
            None => {}
        }
    }
    let vals = r.opaque(4096)?;
    let mut v = XdrReader::new(vals);
    let mut a = Attr4::default();
    for bit in 0..64u32 {
        if w[(bit / 32) as usize] & (1 << (bit % 32)) == 0 {
            continue;
        }
        match bit {
            attr::TYPE => a.ftype = v.u32()?,
            attr::SIZE => a.size = v.u64()?,
            attr::MAXREAD => a.maxread = v.u64()?,
            attr::MAXWRITE => a.maxwrite = v.u64()?,
            _ => return Err(XdrError::Discriminant(bit)),
        }
    }
    Ok(a)
}

/// The results of a COMPOUND reply, read in order.
pub(crate) struct Results<'a, 'b> {
    r: &'b mut XdrReader<'a>,
    left: u32,
    what: &'static str,
}

fn xe(what: &'static str) -> impl Fn(XdrError) -> NfsError {
    move |e| NfsError::Rpc {
        what,
        source: RpcError::Xdr(e),
    }
}

fn mismatch(what: &'static str) -> NfsError {
    NfsError::Rpc {
        what,
        source: RpcError::Bad("the reply's operations do not match the call"),
    }
}

impl<'a, 'b> Results<'a, 'b> {
    /// Reads the COMPOUND reply's status, tag and result count.
    pub fn begin(r: &'b mut XdrReader<'a>, what: &'static str) -> Result<Self, NfsError> {
        let x = xe(what);
        let _status = r.u32().map_err(&x)?;
        r.opaque(1024).map_err(&x)?;
        let left = r.u32().map_err(&x)?;
        Ok(Results { r, left, what })
    }

    /// Reads the next result's operation number and status: an error when it is not `op`
    /// or failed (naming the operation and `path`).
    pub fn next(&mut self, op: u32, path: &str) -> Result<&mut XdrReader<'a>, NfsError> {
        match self.status_of(op)? {
            NfsStat::OK => Ok(&mut *self.r),
            stat => Err(NfsError::nfs4(op_name(op), path, stat)),
        }
    }

    /// Like [`Results::next`], but a failed status is returned, not an error.
    pub fn status_of(&mut self, op: u32) -> Result<NfsStat, NfsError> {
        if self.left == 0 {
            return Err(mismatch(self.what));
        }
        self.left -= 1;
        let x = xe(self.what);
        if self.r.u32().map_err(&x)? != op {
            return Err(mismatch(self.what));
        }
        Ok(NfsStat(self.r.u32().map_err(&x)?))
    }

    /// The reader after a result whose status `st` was read by [`Results::status_of`]: an
    /// error naming `op` and `path` when it failed.
    pub fn reader_if(
        &mut self,
        st: NfsStat,
        op: u32,
        path: &str,
    ) -> Result<&mut XdrReader<'a>, NfsError> {
        if st == NfsStat::OK {
            Ok(&mut *self.r)
        } else {
            Err(NfsError::nfs4(op_name(op), path, st))
        }
    }

    /// Maps a decoding error of this reply.
    pub fn xdr(&self) -> impl Fn(XdrError) -> NfsError + use<> {
        xe(self.what)
    }

    /// The SEQUENCE result's fields after its status (checked to be for `slot`).
    pub fn sequence_rest(&mut self, slot: u32) -> Result<(), NfsError> {
        let x = xe(self.what);
        self.r.skip(16 + 4).map_err(&x)?;
        if self.r.u32().map_err(&x)? != slot {
            return Err(mismatch(self.what));
        }
        self.r.skip(12).map_err(&x)?;
        Ok(())
    }
}

/// OPEN's result after its status: the open's stateid and the result flags (a delegation,
/// if granted, is read past and not used).
pub(crate) fn decode_open(r: &mut XdrReader<'_>) -> Result<(Stateid, u32), XdrError> {
    let st = Stateid::decode(r)?;
    r.skip(4 + 8 + 8)?; // change_info4
    let rflags = r.u32()?;
    skip_bitmap(r)?; // attrset
    match r.u32()? {
        0 => {}
        1 => {
            Stateid::decode(r)?;
            r.bool()?;
            skip_ace(r)?;
        }
        2 => {
            Stateid::decode(r)?;
            r.bool()?;
            match r.u32()? {
                1 | 2 => r.skip(8)?,
                d => return Err(XdrError::Discriminant(d)),
            }
            skip_ace(r)?;
        }
        3 => {
            let why = r.u32()?;
            if why == 1 || why == 2 {
                r.bool()?;
            }
        }
        d => return Err(XdrError::Discriminant(d)),
    }
    Ok((st, rflags))
}

fn skip_ace(r: &mut XdrReader<'_>) -> Result<(), XdrError> {
    r.skip(12)?;
    r.opaque(1024)?;
    Ok(())
}

fn skip_bitmap(r: &mut XdrReader<'_>) -> Result<(), XdrError> {
    let n = r.u32()?;
    if n > 8 {
        return Err(XdrError::TooLong {
            len: n as usize,
            max: 8,
        });
    }
    r.skip(4 * n as usize)
}

/// A stateid result (CLOSE's, OPEN_CONFIRM's).
pub(crate) fn decode_stateid(r: &mut XdrReader<'_>) -> Result<Stateid, XdrError> {
    Stateid::decode(r)
}

/// CREATE's result after its status: change_info4 and the attributes set.
pub(crate) fn skip_create(r: &mut XdrReader<'_>) -> Result<(), XdrError> {
    r.skip(4 + 8 + 8)?;
    skip_bitmap(r)
}

/// REMOVE's result after its status.
pub(crate) fn skip_change_info(r: &mut XdrReader<'_>) -> Result<(), XdrError> {
    r.skip(4 + 8 + 8)
}

/// SETATTR's result after its status.
pub(crate) fn skip_setattr(r: &mut XdrReader<'_>) -> Result<(), XdrError> {
    skip_bitmap(r)
}

/// Most names a directory listing may hold.
const MAX_NAMES: usize = 10_000_000;

/// One READDIR reply: the names, the cookie to go on from, the verifier, and whether the
/// listing is complete.
pub(crate) fn decode_readdir(
    r: &mut XdrReader<'_>,
    names: &mut Vec<String>,
) -> Result<(u64, [u8; 8], bool), XdrError> {
    let mut verf = [0u8; 8];
    verf.copy_from_slice(r.fixed(8)?);
    let mut cookie = 0;
    while r.bool()? {
        cookie = r.u64()?;
        let name = r.opaque(crate::proto::NAME_MAX)?;
        skip_bitmap(r)?;
        r.opaque(4096)?;
        names.push(String::from_utf8_lossy(name).into_owned());
        if names.len() > MAX_NAMES {
            return Err(XdrError::TooLong {
                len: names.len(),
                max: MAX_NAMES,
            });
        }
    }
    let eof = r.bool()?;
    Ok((cookie, verf, eof))
}

/// WRITE's result after its status: bytes written, how stable, the server's verifier.
pub(crate) fn decode_write(r: &mut XdrReader<'_>) -> Result<(u32, Stable, u64), XdrError> {
    let count = r.u32()?;
    let committed = Stable::from_wire(r.u32()?)?;
    let verf = r.u64()?;
    Ok((count, committed, verf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compound_counts_its_operations() {
        let mut b = Vec::new();
        let mut c = Compound::begin(&mut b, 1);
        c.sequence(&[7; 16], 3, 0, 0);
        c.putrootfh();
        c.lookup("srv");
        c.getfh();
        c.finish();
        let mut r = XdrReader::new(&b);
        assert_eq!(r.opaque(16).unwrap(), b"");
        assert_eq!(r.u32().unwrap(), 1);
        assert_eq!(r.u32().unwrap(), 4);
        assert_eq!(r.u32().unwrap(), op::SEQUENCE);
    }

    #[test]
    fn results_name_the_failed_operation() {
        let mut b = Vec::new();
        put_u32(&mut b, 2); // NFS4ERR_NOENT
        put_opaque(&mut b, b"");
        put_u32(&mut b, 2);
        put_u32(&mut b, op::PUTROOTFH);
        put_u32(&mut b, 0);
        put_u32(&mut b, op::LOOKUP);
        put_u32(&mut b, 2);
        let mut r = XdrReader::new(&b);
        let mut res = Results::begin(&mut r, "mount").unwrap();
        res.next(op::PUTROOTFH, "/").unwrap();
        let e = res.next(op::LOOKUP, "/srv/x").unwrap_err();
        assert!(e.to_string().contains("LOOKUP /srv/x"), "{e}");
        assert!(res.next(op::GETFH, "/").is_err());
    }

    #[test]
    fn attributes_in_bit_order() {
        let mut b = Vec::new();
        put_u32(&mut b, 1);
        put_u32(
            &mut b,
            (1 << attr::TYPE) | (1 << attr::SIZE) | (1 << attr::MAXREAD),
        );
        let mut v = Vec::new();
        put_u32(&mut v, NF4DIR);
        put_u64(&mut v, 4096);
        put_u64(&mut v, 1 << 20);
        put_opaque(&mut b, &v);
        let a = decode_attrs(&mut XdrReader::new(&b)).unwrap();
        assert_eq!(
            (a.ftype, a.size, a.maxread, a.maxwrite),
            (NF4DIR, 4096, 1 << 20, 0)
        );
        // An attribute not asked for (mode, bit 33) is refused.
        let mut b = Vec::new();
        put_u32(&mut b, 2);
        put_u32(&mut b, 0);
        put_u32(&mut b, 2);
        put_opaque(&mut b, &[0, 0, 1, 0xa4]);
        assert!(decode_attrs(&mut XdrReader::new(&b)).is_err());
    }

    #[test]
    fn decoders_survive_every_truncation() {
        let mut b = Vec::new();
        Stateid::default().encode(&mut b);
        b.extend_from_slice(&[0; 24]);
        put_u32(&mut b, 1);
        put_u32(&mut b, 0);
        put_u32(&mut b, 2); // a write delegation
        Stateid::default().encode(&mut b);
        put_bool(&mut b, false);
        put_u32(&mut b, 1);
        put_u64(&mut b, 1 << 30);
        b.extend_from_slice(&[0; 12]);
        put_opaque(&mut b, b"OWNER@");
        assert!(decode_open(&mut XdrReader::new(&b)).is_ok());
        for n in 0..b.len() {
            let _ = decode_open(&mut XdrReader::new(&b[..n]));
            let _ = decode_attrs(&mut XdrReader::new(&b[..n]));
            let _ = decode_readdir(&mut XdrReader::new(&b[..n]), &mut Vec::new());
        }
    }
}
