//! The SMB2 messages of the direct data path (MS-SMB2 2.2): request headers and the READ,
//! WRITE, FLUSH and CLOSE requests (and for the replay CREATE, QUERY_INFO and ECHO) written
//! into fixed buffers, and reply headers and the fixed parts of READ, WRITE and CREATE
//! replies read — every field bounds-checked, so any bytes give
//! a value or a one-line error, never a panic.

use smb2::types::FileId;

/// SMB2 header length.
pub(crate) const HEADER: usize = 64;
/// Header and the fixed part of a READ request (49 with its one-byte buffer).
pub(crate) const READ_REQUEST: usize = HEADER + 49;
/// Header and the fixed part of a WRITE request; the data follows.
pub(crate) const WRITE_REQUEST: usize = HEADER + 48;
/// Header and a FLUSH or CLOSE request.
pub(crate) const HANDLE_REQUEST: usize = HEADER + 24;
/// The fixed part of a READ reply.
pub(crate) const READ_REPLY_FIXED: usize = 16;
/// Header and the fixed part of a CREATE request; the name (UTF-16LE) follows.
pub(crate) const CREATE_REQUEST: usize = HEADER + 56;
/// Header and a QUERY_INFO request (41 with its one-byte buffer).
pub(crate) const QUERY_INFO_REQUEST: usize = HEADER + 41;
/// Header and an ECHO request.
pub(crate) const ECHO_REQUEST: usize = HEADER + 4;

/// Commands of the data path (and of the replay).
pub(crate) const CREATE: u16 = 0x05;
pub(crate) const CLOSE: u16 = 0x06;
pub(crate) const FLUSH: u16 = 0x07;
pub(crate) const READ: u16 = 0x08;
pub(crate) const WRITE: u16 = 0x09;
pub(crate) const ECHO: u16 = 0x0D;
pub(crate) const QUERY_INFO: u16 = 0x10;

/// NT status codes the data path tells apart.
pub(crate) const STATUS_SUCCESS: u32 = 0;
pub(crate) const STATUS_PENDING: u32 = 0x0000_0103;
pub(crate) const STATUS_END_OF_FILE: u32 = 0xC000_0011;

const FLAG_RESPONSE: u32 = 0x1;
const FLAG_ASYNC: u32 = 0x2;
const FLAG_SIGNED: u32 = 0x8;

/// What a request header carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    pub command: u16,
    pub charge: u16,
    pub credits_wanted: u16,
    pub message_id: u64,
    pub tree_id: u32,
    pub session_id: u64,
    pub signed: bool,
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Writes the 64-byte header of `r` into `b[..64]` (signature zeroed).
pub(crate) fn put_header(b: &mut [u8; HEADER], r: &Request) {
    b.fill(0);
    b[..4].copy_from_slice(b"\xfeSMB");
    put16(b, 4, 64);
    put16(b, 6, r.charge);
    put16(b, 12, r.command);
    put16(b, 14, r.credits_wanted);
    put32(b, 16, if r.signed { FLAG_SIGNED } else { 0 });
    put64(b, 24, r.message_id);
    put32(b, 32, 0xFEFF);
    put32(b, 36, r.tree_id);
    put64(b, 40, r.session_id);
}

fn put_fid(b: &mut [u8], at: usize, fid: FileId) {
    put64(b, at, fid.persistent);
    put64(b, at + 8, fid.volatile);
}

/// A READ request of `length` bytes at `offset` (after the header in `b`).
pub(crate) fn put_read(b: &mut [u8; READ_REQUEST], fid: FileId, offset: u64, length: u32) {
    let m = &mut b[HEADER..];
    m.fill(0);
    put16(m, 0, 49);
    // Padding: where the server should put the data (right after its fixed part).
    m[2] = 0x50;
    put32(m, 4, length);
    put64(m, 8, offset);
    put_fid(m, 16, fid);
}

/// A WRITE request of `length` bytes at `offset`; the data follows the 112 bytes.
pub(crate) fn put_write(
    b: &mut [u8; WRITE_REQUEST],
    fid: FileId,
    offset: u64,
    length: u32,
    write_through: bool,
) {
    let m = &mut b[HEADER..];
    m.fill(0);
    put16(m, 0, 49);
    put16(m, 2, WRITE_REQUEST as u16);
    put32(m, 4, length);
    put64(m, 8, offset);
    put_fid(m, 16, fid);
    // SMB2_WRITEFLAG_WRITE_THROUGH (MS-SMB2 2.2.21).
    put32(m, 44, u32::from(write_through));
}

/// A FLUSH or CLOSE request on `fid`.
pub(crate) fn put_handle_request(b: &mut [u8; HANDLE_REQUEST], fid: FileId) {
    let m = &mut b[HEADER..];
    m.fill(0);
    put16(m, 0, 24);
    put_fid(m, 8, fid);
}

/// A CREATE request opening (FILE_OPEN) the existing file whose name takes `name_bytes`
/// bytes of UTF-16LE right after the 120 bytes, for reading and writing, shared with every
/// other opener, no oplock.
pub(crate) fn put_create(b: &mut [u8; CREATE_REQUEST], name_bytes: u16) {
    let m = &mut b[HEADER..];
    m.fill(0);
    put16(m, 0, 57);
    put32(m, 4, 2); // Impersonation
    // FILE_READ_DATA | FILE_WRITE_DATA | FILE_READ_ATTRIBUTES | SYNCHRONIZE
    put32(m, 24, 0x0010_0083);
    put32(m, 32, 7); // FILE_SHARE_READ | WRITE | DELETE
    put32(m, 36, 1); // FILE_OPEN
    put32(m, 40, 0x40); // FILE_NON_DIRECTORY_FILE
    put16(m, 44, CREATE_REQUEST as u16);
    put16(m, 46, name_bytes);
}

/// A QUERY_INFO request for `fid`'s FileStandardInformation (MS-FSCC 2.4.41).
pub(crate) fn put_query_info(b: &mut [u8; QUERY_INFO_REQUEST], fid: FileId) {
    let m = &mut b[HEADER..];
    m.fill(0);
    put16(m, 0, 41);
    m[2] = 1; // SMB2_0_INFO_FILE
    m[3] = 5; // FileStandardInformation
    put32(m, 4, 24);
    put_fid(m, 24, fid);
}

/// An ECHO request.
pub(crate) fn put_echo(b: &mut [u8; ECHO_REQUEST]) {
    let m = &mut b[HEADER..];
    m.fill(0);
    put16(m, 0, 4);
}

/// The FileId a successful CREATE reply's body (after the header) opened.
pub(crate) fn create_reply_fid(body: &[u8]) -> Result<FileId, &'static str> {
    if body.len() < 88 || get16(body, 0) != 89 {
        return Err("CREATE reply too short or with a wrong structure size");
    }
    let id = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().unwrap_or_default());
    Ok(FileId {
        persistent: id(64),
        volatile: id(72),
    })
}

fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// What a reply header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reply {
    pub status: u32,
    pub command: u16,
    pub credits: u16,
    pub message_id: u64,
    /// An interim reply (STATUS_PENDING, async): the final one follows.
    pub interim: bool,
    pub signature: [u8; 16],
}

/// Length of the message a 4-byte Direct TCP transport header announces.
pub(crate) fn frame_length(prefix: [u8; 4]) -> Result<usize, &'static str> {
    if prefix[0] != 0 {
        return Err("reply is not an SMB2 frame (bad transport header)");
    }
    let n = u32::from_be_bytes(prefix) as usize;
    if n < HEADER {
        return Err("reply shorter than an SMB2 header");
    }
    Ok(n)
}

/// Reads a reply's 64-byte header.
pub(crate) fn parse_reply(h: &[u8; HEADER]) -> Result<Reply, &'static str> {
    match &h[..4] {
        b"\xfeSMB" => {}
        b"\xfdSMB" => return Err("encrypted reply on the unencrypted data path"),
        b"\xfcSMB" => return Err("compressed reply on the data path (compression was not asked)"),
        _ => return Err("reply without the SMB2 protocol id"),
    }
    if get16(h, 4) != 64 {
        return Err("reply header with a wrong structure size");
    }
    let flags = get32(h, 16);
    if flags & FLAG_RESPONSE == 0 {
        return Err("request from the server on the data path");
    }
    if get32(h, 20) != 0 {
        return Err("compounded reply on the data path (none was asked)");
    }
    let status = get32(h, 8);
    let mut signature = [0u8; 16];
    signature.copy_from_slice(&h[48..64]);
    Ok(Reply {
        status,
        command: get16(h, 12),
        credits: get16(h, 14),
        message_id: u64::from_le_bytes(h[24..32].try_into().unwrap_or_default()),
        interim: flags & FLAG_ASYNC != 0 && status == STATUS_PENDING,
        signature,
    })
}

/// Where a READ reply's data is, from its fixed part: (bytes between the fixed part and the
/// data, data length), checked against the `rest` bytes of the message after the header
/// and the `asked` length.
pub(crate) fn read_reply_layout(
    fixed: &[u8; READ_REPLY_FIXED],
    rest: usize,
    asked: usize,
) -> Result<(usize, usize), &'static str> {
    if get16(fixed, 0) != 17 {
        return Err("READ reply with a wrong structure size");
    }
    let len = get32(fixed, 4) as usize;
    if len == 0 {
        return Ok((0, 0));
    }
    let pad = (fixed[2] as usize)
        .checked_sub(HEADER + READ_REPLY_FIXED)
        .ok_or("READ reply data offset inside its fixed part")?;
    if READ_REPLY_FIXED + pad + len > rest {
        return Err("READ reply data beyond the message");
    }
    if len > asked {
        return Err("READ reply longer than asked");
    }
    Ok((pad, len))
}

/// Bytes a WRITE reply's body says were written.
pub(crate) fn write_reply_count(body: &[u8]) -> Result<usize, &'static str> {
    if body.len() < 16 || get16(body, 0) != 17 {
        return Err("WRITE reply too short or with a wrong structure size");
    }
    Ok(get32(body, 4) as usize)
}

/// Every parser of the direct path on `data` (part of the smb fuzz target).
pub fn fuzz_wire(data: &[u8]) {
    if let Some(p) = data.get(..4) {
        let _ = frame_length(p.try_into().unwrap_or_default());
    }
    if let Some(h) = data.get(..HEADER) {
        let mut a = [0u8; HEADER];
        a.copy_from_slice(h);
        let _ = parse_reply(&a);
    }
    if let Some(f) = data.get(..READ_REPLY_FIXED) {
        let mut a = [0u8; READ_REPLY_FIXED];
        a.copy_from_slice(f);
        let _ = read_reply_layout(&a, data.len(), 4096);
    }
    let _ = write_reply_count(data);
    let _ = create_reply_fid(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb2::msg::header::Header;
    use smb2::pack::{ReadCursor, Unpack};

    #[test]
    fn request_headers_read_back_with_the_crate() {
        let mut b = [0u8; READ_REQUEST];
        let r = Request {
            command: READ,
            charge: 16,
            credits_wanted: 32,
            message_id: 77,
            tree_id: 5,
            session_id: 0x1234,
            signed: true,
        };
        let mut h = [0u8; HEADER];
        put_header(&mut h, &r);
        b[..HEADER].copy_from_slice(&h);
        let fid = FileId {
            persistent: 1,
            volatile: 2,
        };
        put_read(&mut b, fid, 4096, 1 << 20);
        let hd = Header::unpack(&mut ReadCursor::new(&b)).unwrap();
        assert_eq!(hd.message_id.0, 77);
        assert_eq!(hd.credit_charge.0, 16);
        assert_eq!(hd.tree_id.map(|t| t.0), Some(5));
        assert_eq!(hd.session_id.0, 0x1234);
        let req = smb2::msg::read::ReadRequest::unpack(&mut ReadCursor::new(&b[HEADER..])).unwrap();
        assert_eq!((req.offset, req.length, req.file_id), (4096, 1 << 20, fid));
        let mut w = [0u8; WRITE_REQUEST];
        put_write(&mut w, fid, 8192, 10, true);
        assert_eq!(get16(&w[HEADER..], 2) as usize, WRITE_REQUEST);
        assert_eq!(get32(&w[HEADER..], 44), 1);
    }

    /// The replay's CREATE, QUERY_INFO and ECHO read back with the smb2 crate; a CREATE
    /// reply's FileId read, a short or wrong one refused.
    #[test]
    fn replay_requests_read_back_with_the_crate() {
        let fid = FileId {
            persistent: 7,
            volatile: 9,
        };
        let name: Vec<u8> = "d\\f0".encode_utf16().flat_map(u16::to_le_bytes).collect();
        let mut c = [0u8; CREATE_REQUEST];
        put_create(&mut c, name.len() as u16);
        let mut m = c[HEADER..].to_vec();
        m.extend_from_slice(&name);
        let req = smb2::msg::create::CreateRequest::unpack(&mut ReadCursor::new(&m)).unwrap();
        assert_eq!(req.name, "d\\f0");
        assert_eq!(req.desired_access.0, 0x0010_0083);
        assert_eq!(req.share_access.0, 7);
        assert_eq!(req.create_options, 0x40);
        let mut q = [0u8; QUERY_INFO_REQUEST];
        put_query_info(&mut q, fid);
        let req =
            smb2::msg::query_info::QueryInfoRequest::unpack(&mut ReadCursor::new(&q[HEADER..]))
                .unwrap();
        assert_eq!((req.file_info_class, req.file_id), (5, fid));
        let mut e = [0u8; ECHO_REQUEST];
        put_echo(&mut e);
        assert_eq!(get16(&e[HEADER..], 0), 4);
        let mut body = vec![0u8; 88];
        body[0] = 89;
        body[64..72].copy_from_slice(&7u64.to_le_bytes());
        body[72..80].copy_from_slice(&9u64.to_le_bytes());
        assert_eq!(create_reply_fid(&body), Ok(fid));
        assert!(create_reply_fid(&body[..80]).is_err());
        body[0] = 88;
        assert!(create_reply_fid(&body).is_err());
    }

    fn reply_header(status: u32, flags: u32) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[..4].copy_from_slice(b"\xfeSMB");
        put16(&mut h, 4, 64);
        put32(&mut h, 8, status);
        put16(&mut h, 12, READ);
        put16(&mut h, 14, 9);
        put32(&mut h, 16, flags);
        put64(&mut h, 24, 300);
        h
    }

    #[test]
    fn replies_are_checked() {
        let r = parse_reply(&reply_header(0, FLAG_RESPONSE | FLAG_SIGNED)).unwrap();
        assert_eq!((r.message_id, r.credits, r.interim), (300, 9, false));
        let p = parse_reply(&reply_header(STATUS_PENDING, FLAG_RESPONSE | FLAG_ASYNC)).unwrap();
        assert!(p.interim);
        assert!(parse_reply(&reply_header(0, 0)).is_err());
        let mut enc = reply_header(0, FLAG_RESPONSE);
        enc[0] = 0xfd;
        assert!(parse_reply(&enc).unwrap_err().contains("encrypted"));
        let mut comp = reply_header(0, FLAG_RESPONSE);
        put32(&mut comp, 20, 128);
        assert!(parse_reply(&comp).is_err());
        assert_eq!(frame_length([0, 0, 0, 64]), Ok(64));
        assert!(frame_length([0, 0, 0, 63]).is_err());
        assert!(frame_length([0x85, 0, 0, 0]).is_err());

        let fixed = |off: u8, len: u32| {
            let mut f = [0u8; READ_REPLY_FIXED];
            put16(&mut f, 0, 17);
            f[2] = off;
            put32(&mut f, 4, len);
            f
        };
        assert_eq!(read_reply_layout(&fixed(0x50, 100), 116, 100), Ok((0, 100)));
        assert_eq!(read_reply_layout(&fixed(0x58, 100), 124, 100), Ok((8, 100)));
        assert!(read_reply_layout(&fixed(0x50, 100), 115, 100).is_err());
        assert!(read_reply_layout(&fixed(0x50, 101), 200, 100).is_err());
        assert!(read_reply_layout(&fixed(0x40, 1), 200, 100).is_err());
        assert_eq!(read_reply_layout(&fixed(0, 0), 16, 100), Ok((0, 0)));
        let mut w = [0u8; 16];
        put16(&mut w, 0, 17);
        put32(&mut w, 4, 5);
        assert_eq!(write_reply_count(&w), Ok(5));
        assert!(write_reply_count(&w[..15]).is_err());
        for n in 0..200 {
            fuzz_wire(&vec![0xff; n]);
            fuzz_wire(&vec![0; n]);
        }
    }
}
