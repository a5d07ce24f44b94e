//! The NFSv3 (RFC 1813), MOUNT v3 and portmapper v2 (RFC 1833) pieces nsperf speaks: program
//! and procedure numbers, status codes, file handles, attributes, and the encoders and
//! checked decoders of the arguments and results both the client and the embedded server use.

use std::fmt;

use serde::Serialize;

use crate::xdr::{XdrError, XdrReader, put_bool, put_opaque, put_u32, put_u64};

/// The portmapper (rpcbind) program.
pub const PMAP_PROG: u32 = 100_000;
/// Portmapper version 2.
pub const PMAP_VERS: u32 = 2;
/// `PMAPPROC_GETPORT`.
pub const PMAP_GETPORT: u32 = 3;
/// The portmapper's well-known port.
pub const PMAP_PORT: u16 = 111;
/// The protocol number of TCP in portmapper mappings.
pub const IPPROTO_TCP: u32 = 6;

/// The MOUNT program.
pub const MOUNT_PROG: u32 = 100_005;
/// MOUNT version 3 (goes with NFSv3).
pub const MOUNT_VERS: u32 = 3;
/// `MOUNTPROC3_MNT`.
pub const MOUNT_MNT: u32 = 1;
/// `MOUNTPROC3_UMNT`.
pub const MOUNT_UMNT: u32 = 3;
/// `MOUNTPROC3_EXPORT`.
pub const MOUNT_EXPORT: u32 = 5;
/// Longest MOUNT path.
pub const MNTPATHLEN: usize = 1024;

/// The NFS program.
pub const NFS_PROG: u32 = 100_003;
/// NFS version 3.
pub const NFS_VERS: u32 = 3;
/// The usual NFS port.
pub const NFS_PORT: u16 = 2049;

/// NFSv3 procedures used here.
#[allow(missing_docs)]
pub mod proc3 {
    pub const NULL: u32 = 0;
    pub const GETATTR: u32 = 1;
    pub const SETATTR: u32 = 2;
    pub const LOOKUP: u32 = 3;
    pub const ACCESS: u32 = 4;
    pub const READ: u32 = 6;
    pub const WRITE: u32 = 7;
    pub const CREATE: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const REMOVE: u32 = 12;
    pub const RMDIR: u32 = 13;
    pub const READDIR: u32 = 16;
    pub const FSSTAT: u32 = 18;
    pub const FSINFO: u32 = 19;
    pub const PATHCONF: u32 = 20;
    pub const COMMIT: u32 = 21;
}

/// Longest NFSv3 file handle.
pub const FHSIZE3: usize = 64;
/// Longest NFSv4 file handle.
pub const FHSIZE4: usize = 128;
/// Longest file name nsperf sends or accepts.
pub const NAME_MAX: usize = 255;
/// Size of an encoded `fattr3`.
pub const FATTR3_SIZE: usize = 84;

pub use crate::status::NfsStat;

/// An NFS file handle: up to 64 opaque bytes in NFSv3, 128 in NFSv4, kept inline (copying it
/// allocates nothing).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileHandle {
    len: u8,
    bytes: [u8; FHSIZE4],
}

impl FileHandle {
    /// A handle from its bytes; `None` when longer than 128 bytes.
    pub fn new(b: &[u8]) -> Option<FileHandle> {
        if b.len() > FHSIZE4 {
            return None;
        }
        let mut bytes = [0u8; FHSIZE4];
        bytes[..b.len()].copy_from_slice(b);
        Some(FileHandle {
            len: b.len() as u8,
            bytes,
        })
    }

    /// The handle's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Decodes an `nfs_fh3`.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<FileHandle, XdrError> {
        let b = r.opaque(FHSIZE3)?;
        Ok(FileHandle::new(b).unwrap_or(FileHandle {
            len: 0,
            bytes: [0; FHSIZE4],
        }))
    }

    /// Decodes an `nfs_fh4` (up to 128 bytes).
    pub fn decode4(r: &mut XdrReader<'_>) -> Result<FileHandle, XdrError> {
        let b = r.opaque(FHSIZE4)?;
        Ok(FileHandle::new(b).unwrap_or(FileHandle {
            len: 0,
            bytes: [0; FHSIZE4],
        }))
    }

    /// Encodes it as an `nfs_fh3`.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        put_opaque(buf, self.as_bytes());
    }
}

impl fmt::Debug for FileHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The type of a file system object (`ftype3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileType {
    /// Regular file.
    Regular,
    /// Directory.
    Directory,
    /// Anything else (device, link, socket, fifo).
    Other,
}

/// The attributes nsperf uses from an `fattr3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// Object type.
    pub ftype: FileType,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Bytes used on disk.
    pub used: u64,
    /// File system id.
    pub fsid: u64,
    /// File id (inode number).
    pub fileid: u64,
    /// Modification time, seconds and nanoseconds.
    pub mtime: (u32, u32),
}

impl Attr {
    /// Decodes an `fattr3`.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Attr, XdrError> {
        let ftype = match r.u32()? {
            1 => FileType::Regular,
            2 => FileType::Directory,
            3..=7 => FileType::Other,
            v => return Err(XdrError::Discriminant(v)),
        };
        let mode = r.u32()?;
        r.u32()?; // nlink
        let (uid, gid) = (r.u32()?, r.u32()?);
        let (size, used) = (r.u64()?, r.u64()?);
        r.u64()?; // rdev
        let (fsid, fileid) = (r.u64()?, r.u64()?);
        r.u64()?; // atime
        let mtime = (r.u32()?, r.u32()?);
        r.u64()?; // ctime
        Ok(Attr {
            ftype,
            mode,
            uid,
            gid,
            size,
            used,
            fsid,
            fileid,
            mtime,
        })
    }

    /// Encodes an `fattr3` (server side); `nlink` 1, times from `mtime`.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        put_u32(
            buf,
            match self.ftype {
                FileType::Regular => 1,
                FileType::Directory => 2,
                FileType::Other => 7,
            },
        );
        put_u32(buf, self.mode);
        put_u32(buf, 1);
        put_u32(buf, self.uid);
        put_u32(buf, self.gid);
        put_u64(buf, self.size);
        put_u64(buf, self.used);
        put_u64(buf, 0);
        put_u64(buf, self.fsid);
        put_u64(buf, self.fileid);
        for _ in 0..3 {
            put_u32(buf, self.mtime.0);
            put_u32(buf, self.mtime.1);
        }
    }
}

/// Decodes a `post_op_attr`.
pub fn decode_post_op_attr(r: &mut XdrReader<'_>) -> Result<Option<Attr>, XdrError> {
    if r.bool()? {
        Ok(Some(Attr::decode(r)?))
    } else {
        Ok(None)
    }
}

/// Encodes a `post_op_attr`.
pub fn encode_post_op_attr(buf: &mut Vec<u8>, a: Option<&Attr>) {
    put_bool(buf, a.is_some());
    if let Some(a) = a {
        a.encode(buf);
    }
}

/// Skips a `wcc_data` (pre-op and post-op attributes).
pub fn skip_wcc_data(r: &mut XdrReader<'_>) -> Result<(), XdrError> {
    if r.bool()? {
        r.skip(24)?;
    }
    decode_post_op_attr(r).map(|_| ())
}

/// Encodes a `wcc_data` with no pre-op attributes.
pub fn encode_wcc_data(buf: &mut Vec<u8>, after: Option<&Attr>) {
    put_bool(buf, false);
    encode_post_op_attr(buf, after);
}

/// Encodes `diropargs3`.
pub fn encode_dirop(buf: &mut Vec<u8>, dir: &FileHandle, name: &[u8]) {
    dir.encode(buf);
    put_opaque(buf, name);
}

/// What to set in a `sattr3` (nsperf sets only the mode and the size).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits.
    pub mode: Option<u32>,
    /// New size.
    pub size: Option<u64>,
}

impl SetAttr {
    /// Encodes a `sattr3`.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        put_bool(buf, self.mode.is_some());
        if let Some(m) = self.mode {
            put_u32(buf, m);
        }
        put_bool(buf, false); // uid
        put_bool(buf, false); // gid
        put_bool(buf, self.size.is_some());
        if let Some(s) = self.size {
            put_u64(buf, s);
        }
        put_u32(buf, 0); // atime: don't change
        put_u32(buf, 0); // mtime: don't change
    }

    /// Decodes a `sattr3` (server side), ignoring owner and times.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<SetAttr, XdrError> {
        let mode = if r.bool()? { Some(r.u32()?) } else { None };
        if r.bool()? {
            r.u32()?;
        }
        if r.bool()? {
            r.u32()?;
        }
        let size = if r.bool()? { Some(r.u64()?) } else { None };
        for _ in 0..2 {
            match r.u32()? {
                0 | 1 => {}
                2 => r.skip(8)?,
                v => return Err(XdrError::Discriminant(v)),
            }
        }
        Ok(SetAttr { mode, size })
    }
}

/// How a WRITE asks the server to store the data (`stable_how`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stable {
    /// The server may keep the data in memory until a COMMIT.
    Unstable,
    /// Data on stable storage before the reply, metadata maybe not.
    DataSync,
    /// Data and metadata on stable storage before the reply.
    FileSync,
}

impl Stable {
    /// The wire value.
    pub fn to_wire(self) -> u32 {
        match self {
            Stable::Unstable => 0,
            Stable::DataSync => 1,
            Stable::FileSync => 2,
        }
    }

    /// From the wire value.
    pub fn from_wire(v: u32) -> Result<Stable, XdrError> {
        Ok(match v {
            0 => Stable::Unstable,
            1 => Stable::DataSync,
            2 => Stable::FileSync,
            v => return Err(XdrError::Discriminant(v)),
        })
    }
}

/// The limits a server states in FSINFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FsInfo {
    /// Largest READ.
    pub rtmax: u32,
    /// Preferred READ size.
    pub rtpref: u32,
    /// Largest WRITE.
    pub wtmax: u32,
    /// Preferred WRITE size.
    pub wtpref: u32,
    /// Largest file.
    pub maxfilesize: u64,
}

impl FsInfo {
    /// Decodes the `FSINFO3resok` after its `post_op_attr`.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<FsInfo, XdrError> {
        decode_post_op_attr(r)?;
        let (rtmax, rtpref) = (r.u32()?, r.u32()?);
        r.u32()?; // rtmult
        let (wtmax, wtpref) = (r.u32()?, r.u32()?);
        r.u32()?; // wtmult
        r.u32()?; // dtpref
        let maxfilesize = r.u64()?;
        r.u64()?; // time_delta
        r.u32()?; // properties
        Ok(FsInfo {
            rtmax,
            rtpref,
            wtmax,
            wtpref,
            maxfilesize,
        })
    }
}

/// The head of a READ result, up to its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadHead {
    /// Bytes of data that follow.
    pub count: u32,
    /// True when the read reached the end of the file.
    pub eof: bool,
}

/// Decodes a READ result up to the start of its data: `Ok(Err(status))` for a failed READ.
pub fn decode_read_head(r: &mut XdrReader<'_>) -> Result<Result<ReadHead, NfsStat>, XdrError> {
    let st = NfsStat(r.u32()?);
    decode_post_op_attr(r)?;
    if st != NfsStat::OK {
        return Ok(Err(st));
    }
    let count = r.u32()?;
    let eof = r.bool()?;
    let len = r.u32()?;
    if len != count {
        return Err(XdrError::TooLong {
            len: len as usize,
            max: count as usize,
        });
    }
    Ok(Ok(ReadHead { count, eof }))
}

/// A WRITE result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteResult {
    /// Bytes the server took.
    pub count: u32,
    /// How they were stored.
    pub committed: Stable,
    /// The server's write verifier (changes when it restarts and loses unstable data).
    pub verf: u64,
}

/// Decodes a WRITE result: `Ok(Err(status))` for a failed WRITE.
pub fn decode_write(r: &mut XdrReader<'_>) -> Result<Result<WriteResult, NfsStat>, XdrError> {
    let st = NfsStat(r.u32()?);
    skip_wcc_data(r)?;
    if st != NfsStat::OK {
        return Ok(Err(st));
    }
    let count = r.u32()?;
    let committed = Stable::from_wire(r.u32()?)?;
    let verf = r.u64()?;
    Ok(Ok(WriteResult {
        count,
        committed,
        verf,
    }))
}

/// Most entries one READDIR reply may carry: a hostile server cannot make the client
/// allocate without limit (a reply is at most 4 MiB; each entry takes at least 24 bytes).
pub const READDIR_MAX_ENTRIES: usize = 1 << 18;

/// One page of a directory (a READDIR result).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirPage {
    /// The cookie verifier to send with the next call.
    pub verifier: u64,
    /// The entries: file id, name, and the cookie that continues after it.
    pub entries: Vec<DirEntry>,
    /// True when the directory has no entries after these.
    pub eof: bool,
}

/// One entry of a [`DirPage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// File id (inode number).
    pub fileid: u64,
    /// Its name (bytes that are not UTF-8 replaced).
    pub name: String,
    /// The cookie a READDIR continuing after this entry sends.
    pub cookie: u64,
}

/// Decodes a READDIR result (`READDIR3res`): `Ok(Err(status))` for a failed READDIR.
pub fn decode_readdir(r: &mut XdrReader<'_>) -> Result<Result<DirPage, NfsStat>, XdrError> {
    let st = NfsStat(r.u32()?);
    decode_post_op_attr(r)?;
    if st != NfsStat::OK {
        return Ok(Err(st));
    }
    let verifier = r.u64()?;
    let mut entries = Vec::new();
    while r.bool()? {
        if entries.len() >= READDIR_MAX_ENTRIES {
            return Err(XdrError::TooLong {
                len: entries.len() + 1,
                max: READDIR_MAX_ENTRIES,
            });
        }
        let fileid = r.u64()?;
        let name = String::from_utf8_lossy(r.opaque(NAME_MAX)?).into_owned();
        let cookie = r.u64()?;
        entries.push(DirEntry {
            fileid,
            name,
            cookie,
        });
    }
    let eof = r.bool()?;
    Ok(Ok(DirPage {
        verifier,
        entries,
        eof,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr() -> Attr {
        Attr {
            ftype: FileType::Regular,
            mode: 0o600,
            uid: 1,
            gid: 2,
            size: 4096,
            used: 8192,
            fsid: 3,
            fileid: 77,
            mtime: (5, 6),
        }
    }

    #[test]
    fn attr_round_trip_and_size() {
        let mut b = Vec::new();
        attr().encode(&mut b);
        assert_eq!(b.len(), FATTR3_SIZE);
        assert_eq!(Attr::decode(&mut XdrReader::new(&b)).unwrap(), attr());
        b[3] = 9;
        assert!(Attr::decode(&mut XdrReader::new(&b)).is_err());
    }

    #[test]
    fn read_and_write_results() {
        let mut b = Vec::new();
        put_u32(&mut b, 0);
        encode_post_op_attr(&mut b, Some(&attr()));
        put_u32(&mut b, 3);
        put_bool(&mut b, true);
        put_opaque(&mut b, b"abc");
        let mut r = XdrReader::new(&b);
        let h = decode_read_head(&mut r).unwrap().unwrap();
        assert_eq!((h.count, h.eof), (3, true));
        assert_eq!(r.remaining(), 4);

        let mut b = Vec::new();
        put_u32(&mut b, NfsStat::ACCES.0);
        encode_wcc_data(&mut b, None);
        let st = decode_write(&mut XdrReader::new(&b)).unwrap().unwrap_err();
        assert_eq!(st, NfsStat::ACCES);
        assert!(st.to_string().contains("permission denied"));
        assert_eq!(NfsStat(4242).to_string(), "unknown NFS status 4242");
        assert_eq!(NfsStat(4242).v4().to_string(), "unknown NFSv4 status 4242");
    }

    /// A READDIR reply as a server sends it (RFC 1813 READDIR3resok, written out by hand):
    /// no directory attributes, verifier 0x0102030405060708, entries "." (cookie 1) and
    /// ".nsperf-7@0a1b2c3d4e5f-seqwrite-1" (cookie 2), end of directory.
    const READDIR_REPLY: [u8; 112] = [
        0, 0, 0, 0, // NFS3_OK
        0, 0, 0, 0, // dir_attributes: none
        1, 2, 3, 4, 5, 6, 7, 8, // cookieverf
        0, 0, 0, 1, // value follows
        0, 0, 0, 0, 0, 0, 0, 42, // fileid
        0, 0, 0, 1, b'.', 0, 0, 0, // name "."
        0, 0, 0, 0, 0, 0, 0, 1, // cookie
        0, 0, 0, 1, // value follows
        0, 0, 0, 0, 0, 0, 0, 43, // fileid
        0, 0, 0, 33, // name, 33 bytes + 3 of padding
        b'.', b'n', b's', b'p', b'e', b'r', b'f', b'-', b'7', b'@', b'0', b'a', b'1', b'b', b'2',
        b'c', b'3', b'd', b'4', b'e', b'5', b'f', b'-', b's', b'e', b'q', b'w', b'r', b'i', b't',
        b'e', b'-', b'1', 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 2, // cookie
        0, 0, 0, 0, // no more entries
        0, 0, 0, 1, // eof
    ];

    #[test]
    fn readdir_reply_fixture() {
        let mut r = XdrReader::new(&READDIR_REPLY);
        let p = decode_readdir(&mut r).unwrap().unwrap();
        assert_eq!(r.remaining(), 0);
        assert_eq!(p.verifier, 0x0102_0304_0506_0708);
        assert!(p.eof);
        let names: Vec<(u64, &str, u64)> = p
            .entries
            .iter()
            .map(|e| (e.fileid, e.name.as_str(), e.cookie))
            .collect();
        assert_eq!(
            names,
            [(42, ".", 1), (43, ".nsperf-7@0a1b2c3d4e5f-seqwrite-1", 2)]
        );
        // A failed READDIR: its status; a cut reply: an error, never a panic.
        let mut b = Vec::new();
        put_u32(&mut b, NfsStat::NOTDIR.0);
        encode_post_op_attr(&mut b, None);
        assert_eq!(
            decode_readdir(&mut XdrReader::new(&b)).unwrap(),
            Err(NfsStat::NOTDIR)
        );
        for cut in 0..READDIR_REPLY.len() {
            assert!(decode_readdir(&mut XdrReader::new(&READDIR_REPLY[..cut])).is_err());
        }
    }

    #[test]
    fn sattr_round_trip() {
        let s = SetAttr {
            mode: Some(0o644),
            size: Some(10),
        };
        let mut b = Vec::new();
        s.encode(&mut b);
        assert_eq!(SetAttr::decode(&mut XdrReader::new(&b)).unwrap(), s);
        assert!(FileHandle::new(&[0; 129]).is_none());
        // NFSv3's handles stay within 64 bytes on the wire, NFSv4's within 128.
        let mut b = Vec::new();
        put_opaque(&mut b, &[1; 65]);
        assert!(FileHandle::decode(&mut XdrReader::new(&b)).is_err());
        assert_eq!(
            FileHandle::decode4(&mut XdrReader::new(&b))
                .unwrap()
                .as_bytes(),
            &[1; 65]
        );
    }
}
