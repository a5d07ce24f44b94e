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

/// An NFSv3 status (`nfsstat3`), also used for MOUNT's `mountstat3` (same numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NfsStat(pub u32);

#[allow(missing_docs)]
impl NfsStat {
    pub const OK: NfsStat = NfsStat(0);
    pub const PERM: NfsStat = NfsStat(1);
    pub const NOENT: NfsStat = NfsStat(2);
    pub const IO: NfsStat = NfsStat(5);
    pub const ACCES: NfsStat = NfsStat(13);
    pub const EXIST: NfsStat = NfsStat(17);
    pub const NOTDIR: NfsStat = NfsStat(20);
    pub const ISDIR: NfsStat = NfsStat(21);
    pub const INVAL: NfsStat = NfsStat(22);
    pub const FBIG: NfsStat = NfsStat(27);
    pub const NOSPC: NfsStat = NfsStat(28);
    pub const ROFS: NfsStat = NfsStat(30);
    pub const NAMETOOLONG: NfsStat = NfsStat(63);
    pub const NOTEMPTY: NfsStat = NfsStat(66);
    pub const DQUOT: NfsStat = NfsStat(69);
    pub const STALE: NfsStat = NfsStat(70);
    pub const BADHANDLE: NfsStat = NfsStat(10001);
    pub const NOTSUPP: NfsStat = NfsStat(10004);
    pub const SERVERFAULT: NfsStat = NfsStat(10006);
    pub const JUKEBOX: NfsStat = NfsStat(10008);

    /// The status's name in NFS version `vers` (3 for NFSv3 and MOUNT, 4 for NFSv4.x):
    /// `NFS3ERR_NOENT`, `NFS4ERR_GRACE`; `None` when that version has no such status.
    pub fn name(self, vers: u32) -> Option<&'static str> {
        let e = STATUSES.iter().find(|e| e.code == self.0)?;
        if vers >= 4 { e.v4 } else { e.v3 }
    }

    /// What the status means, in a few words (`None` for OK and unknown numbers).
    pub fn meaning(self) -> Option<&'static str> {
        STATUSES
            .iter()
            .find(|e| e.code == self.0)
            .map(|e| e.meaning)
            .filter(|m| !m.is_empty())
    }

    /// The status shown with NFSv4's names (`NFS4ERR_NOENT (no such file or directory)`);
    /// `Display` on the status itself uses NFSv3's.
    pub fn v4(self) -> impl fmt::Display {
        Named(self, 4)
    }
    /// The status for a local I/O error (server side).
    pub fn from_io(e: &std::io::Error) -> NfsStat {
        match e.raw_os_error() {
            Some(libc::EPERM) => NfsStat::PERM,
            Some(libc::ENOENT) => NfsStat::NOENT,
            Some(libc::EACCES) => NfsStat::ACCES,
            Some(libc::EEXIST) => NfsStat::EXIST,
            Some(libc::ENOTDIR) => NfsStat::NOTDIR,
            Some(libc::EISDIR) => NfsStat::ISDIR,
            Some(libc::EINVAL) => NfsStat::INVAL,
            Some(libc::EFBIG) => NfsStat::FBIG,
            Some(libc::ENOSPC) => NfsStat::NOSPC,
            Some(libc::EROFS) => NfsStat::ROFS,
            Some(libc::ENAMETOOLONG) => NfsStat::NAMETOOLONG,
            Some(libc::ENOTEMPTY) => NfsStat::NOTEMPTY,
            Some(libc::EDQUOT) => NfsStat::DQUOT,
            Some(libc::ESTALE) => NfsStat::STALE,
            _ => NfsStat::IO,
        }
    }
}

impl fmt::Display for NfsStat {
    /// NFSv3's name and meaning (`NFS3ERR_NOENT (no such file or directory)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Named(*self, 3).fmt(f)
    }
}

/// A status shown with the names of one NFS version.
struct Named(NfsStat, u32);

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Named(st, vers) = *self;
        match (st.name(vers), st.meaning()) {
            (Some(n), Some(m)) => write!(f, "{n} ({m})"),
            (Some(n), None) => f.write_str(n),
            (None, _) if vers >= 4 => write!(f, "unknown NFSv4 status {}", st.0),
            (None, _) => write!(f, "unknown NFS status {}", st.0),
        }
    }
}

/// One status: its number, its names in NFSv3 (RFC 1813) and NFSv4.x (RFC 7530, RFC 8881),
/// and its meaning.
struct StatusEntry {
    code: u32,
    v3: Option<&'static str>,
    v4: Option<&'static str>,
    meaning: &'static str,
}

/// A status both versions have, under each one's name.
const fn both(code: u32, v3: &'static str, v4: &'static str, meaning: &'static str) -> StatusEntry {
    StatusEntry {
        code,
        v3: Some(v3),
        v4: Some(v4),
        meaning,
    }
}

/// A status only NFSv4.x has.
const fn v4(code: u32, v4: &'static str, meaning: &'static str) -> StatusEntry {
    StatusEntry {
        code,
        v3: None,
        v4: Some(v4),
        meaning,
    }
}

/// A status only NFSv3 has.
const fn v3(code: u32, v3: &'static str, meaning: &'static str) -> StatusEntry {
    StatusEntry {
        code,
        v3: Some(v3),
        v4: None,
        meaning,
    }
}

/// Every status nsperf names.
const STATUSES: &[StatusEntry] = &[
    both(0, "NFS3_OK", "NFS4_OK", ""),
    both(1, "NFS3ERR_PERM", "NFS4ERR_PERM", "not owner"),
    both(
        2,
        "NFS3ERR_NOENT",
        "NFS4ERR_NOENT",
        "no such file or directory",
    ),
    both(5, "NFS3ERR_IO", "NFS4ERR_IO", "I/O error at the server"),
    both(6, "NFS3ERR_NXIO", "NFS4ERR_NXIO", "no such device"),
    both(13, "NFS3ERR_ACCES", "NFS4ERR_ACCESS", "permission denied"),
    both(17, "NFS3ERR_EXIST", "NFS4ERR_EXIST", "file exists"),
    both(18, "NFS3ERR_XDEV", "NFS4ERR_XDEV", "cross-device"),
    v3(19, "NFS3ERR_NODEV", "no such device"),
    both(20, "NFS3ERR_NOTDIR", "NFS4ERR_NOTDIR", "not a directory"),
    both(21, "NFS3ERR_ISDIR", "NFS4ERR_ISDIR", "is a directory"),
    both(22, "NFS3ERR_INVAL", "NFS4ERR_INVAL", "invalid argument"),
    both(27, "NFS3ERR_FBIG", "NFS4ERR_FBIG", "file too large"),
    both(
        28,
        "NFS3ERR_NOSPC",
        "NFS4ERR_NOSPC",
        "no space left on the server",
    ),
    both(30, "NFS3ERR_ROFS", "NFS4ERR_ROFS", "read-only file system"),
    both(31, "NFS3ERR_MLINK", "NFS4ERR_MLINK", "too many hard links"),
    both(
        63,
        "NFS3ERR_NAMETOOLONG",
        "NFS4ERR_NAMETOOLONG",
        "name too long",
    ),
    both(
        66,
        "NFS3ERR_NOTEMPTY",
        "NFS4ERR_NOTEMPTY",
        "directory not empty",
    ),
    both(69, "NFS3ERR_DQUOT", "NFS4ERR_DQUOT", "quota exceeded"),
    both(70, "NFS3ERR_STALE", "NFS4ERR_STALE", "stale file handle"),
    v3(71, "NFS3ERR_REMOTE", "too many levels of remote in path"),
    both(
        10001,
        "NFS3ERR_BADHANDLE",
        "NFS4ERR_BADHANDLE",
        "bad file handle",
    ),
    v3(10002, "NFS3ERR_NOT_SYNC", "attributes changed meanwhile"),
    both(
        10003,
        "NFS3ERR_BAD_COOKIE",
        "NFS4ERR_BAD_COOKIE",
        "stale directory cookie",
    ),
    both(10004, "NFS3ERR_NOTSUPP", "NFS4ERR_NOTSUPP", "not supported"),
    both(
        10005,
        "NFS3ERR_TOOSMALL",
        "NFS4ERR_TOOSMALL",
        "buffer too small",
    ),
    both(
        10006,
        "NFS3ERR_SERVERFAULT",
        "NFS4ERR_SERVERFAULT",
        "server fault",
    ),
    both(
        10007,
        "NFS3ERR_BADTYPE",
        "NFS4ERR_BADTYPE",
        "type not supported",
    ),
    both(
        10008,
        "NFS3ERR_JUKEBOX",
        "NFS4ERR_DELAY",
        "server busy, try later",
    ),
    v4(10009, "NFS4ERR_SAME", "attributes the same"),
    v4(10010, "NFS4ERR_DENIED", "lock unavailable"),
    v4(10011, "NFS4ERR_EXPIRED", "lock lease expired"),
    v4(10012, "NFS4ERR_LOCKED", "I/O failed on a lock"),
    v4(10013, "NFS4ERR_GRACE", "server in its grace period"),
    v4(10014, "NFS4ERR_FHEXPIRED", "file handle expired"),
    v4(10015, "NFS4ERR_SHARE_DENIED", "share reservation denied"),
    v4(10016, "NFS4ERR_WRONGSEC", "wrong security flavour"),
    v4(10017, "NFS4ERR_CLID_INUSE", "client id in use"),
    v4(10018, "NFS4ERR_RESOURCE", "server out of resources"),
    v4(10019, "NFS4ERR_MOVED", "file system moved"),
    v4(10020, "NFS4ERR_NOFILEHANDLE", "no current file handle"),
    v4(
        10021,
        "NFS4ERR_MINOR_VERS_MISMATCH",
        "minor version not supported",
    ),
    v4(10022, "NFS4ERR_STALE_CLIENTID", "stale client id"),
    v4(10023, "NFS4ERR_STALE_STATEID", "stale state id"),
    v4(10024, "NFS4ERR_OLD_STATEID", "old state id"),
    v4(10025, "NFS4ERR_BAD_STATEID", "bad state id"),
    v4(10026, "NFS4ERR_BAD_SEQID", "bad sequence id"),
    v4(10027, "NFS4ERR_NOT_SAME", "attributes not the same"),
    v4(10028, "NFS4ERR_LOCK_RANGE", "lock range not supported"),
    v4(10029, "NFS4ERR_SYMLINK", "is a symbolic link"),
    v4(10030, "NFS4ERR_RESTOREFH", "no saved file handle"),
    v4(10031, "NFS4ERR_LEASE_MOVED", "some file system moved"),
    v4(10032, "NFS4ERR_ATTRNOTSUPP", "attribute not supported"),
    v4(
        10033,
        "NFS4ERR_NO_GRACE",
        "reclaim outside the grace period",
    ),
    v4(10034, "NFS4ERR_RECLAIM_BAD", "reclaim refused"),
    v4(10035, "NFS4ERR_RECLAIM_CONFLICT", "reclaim conflicts"),
    v4(10036, "NFS4ERR_BADXDR", "malformed arguments"),
    v4(10037, "NFS4ERR_LOCKS_HELD", "locks still held"),
    v4(10038, "NFS4ERR_OPENMODE", "not opened for this"),
    v4(10039, "NFS4ERR_BADOWNER", "owner not recognised"),
    v4(10040, "NFS4ERR_BADCHAR", "bad character in a name"),
    v4(10041, "NFS4ERR_BADNAME", "bad name"),
    v4(10042, "NFS4ERR_BAD_RANGE", "bad lock range"),
    v4(10043, "NFS4ERR_LOCK_NOTSUPP", "lock type not supported"),
    v4(10044, "NFS4ERR_OP_ILLEGAL", "illegal operation"),
    v4(10045, "NFS4ERR_DEADLOCK", "deadlock"),
    v4(10046, "NFS4ERR_FILE_OPEN", "file is open"),
    v4(
        10047,
        "NFS4ERR_ADMIN_REVOKED",
        "state revoked by the administrator",
    ),
    v4(10048, "NFS4ERR_CB_PATH_DOWN", "callback path down"),
    v4(10049, "NFS4ERR_BADIOMODE", "bad layout I/O mode"),
    v4(10050, "NFS4ERR_BADLAYOUT", "bad layout"),
    v4(10051, "NFS4ERR_BAD_SESSION_DIGEST", "bad session digest"),
    v4(10052, "NFS4ERR_BADSESSION", "unknown session"),
    v4(10053, "NFS4ERR_BADSLOT", "bad session slot"),
    v4(10054, "NFS4ERR_COMPLETE_ALREADY", "already complete"),
    v4(
        10055,
        "NFS4ERR_CONN_NOT_BOUND_TO_SESSION",
        "connection not bound to the session",
    ),
    v4(
        10056,
        "NFS4ERR_DELEG_ALREADY_WANTED",
        "delegation already wanted",
    ),
    v4(10057, "NFS4ERR_BACK_CHAN_BUSY", "back channel busy"),
    v4(
        10058,
        "NFS4ERR_LAYOUTTRYLATER",
        "layout unavailable for now",
    ),
    v4(10059, "NFS4ERR_LAYOUTUNAVAILABLE", "no layout"),
    v4(10060, "NFS4ERR_NOMATCHING_LAYOUT", "no matching layout"),
    v4(10061, "NFS4ERR_RECALLCONFLICT", "recall conflict"),
    v4(10062, "NFS4ERR_UNKNOWN_LAYOUTTYPE", "unknown layout type"),
    v4(
        10063,
        "NFS4ERR_SEQ_MISORDERED",
        "session sequence misordered",
    ),
    v4(10064, "NFS4ERR_SEQUENCE_POS", "SEQUENCE not first"),
    v4(
        10065,
        "NFS4ERR_REQ_TOO_BIG",
        "request too big for the session",
    ),
    v4(
        10066,
        "NFS4ERR_REP_TOO_BIG",
        "reply too big for the session",
    ),
    v4(
        10067,
        "NFS4ERR_REP_TOO_BIG_TO_CACHE",
        "reply too big to cache",
    ),
    v4(
        10068,
        "NFS4ERR_RETRY_UNCACHED_REP",
        "retry of an uncached reply",
    ),
    v4(10069, "NFS4ERR_UNSAFE_COMPOUND", "unsafe compound"),
    v4(
        10070,
        "NFS4ERR_TOO_MANY_OPS",
        "too many operations in the compound",
    ),
    v4(
        10071,
        "NFS4ERR_OP_NOT_IN_SESSION",
        "operation outside a session",
    ),
    v4(
        10072,
        "NFS4ERR_HASH_ALG_UNSUPP",
        "hash algorithm not supported",
    ),
    v4(10074, "NFS4ERR_CLIENTID_BUSY", "client id busy"),
    v4(10075, "NFS4ERR_PNFS_IO_HOLE", "pNFS I/O hole"),
    v4(
        10076,
        "NFS4ERR_SEQ_FALSE_RETRY",
        "false retry of a sequence",
    ),
    v4(10077, "NFS4ERR_BAD_HIGH_SLOT", "bad highest slot"),
    v4(10078, "NFS4ERR_DEADSESSION", "session dead"),
    v4(
        10079,
        "NFS4ERR_ENCR_ALG_UNSUPP",
        "encryption algorithm not supported",
    ),
    v4(10080, "NFS4ERR_PNFS_NO_LAYOUT", "no pNFS layout"),
    v4(10081, "NFS4ERR_NOT_ONLY_OP", "must be the only operation"),
    v4(10082, "NFS4ERR_WRONG_CRED", "wrong credentials"),
    v4(10083, "NFS4ERR_WRONG_TYPE", "wrong file type"),
    v4(
        10084,
        "NFS4ERR_DIRDELEG_UNAVAIL",
        "directory delegation unavailable",
    ),
    v4(10085, "NFS4ERR_REJECT_DELEG", "delegation rejected"),
    v4(10086, "NFS4ERR_RETURNCONFLICT", "layout return conflict"),
    v4(10087, "NFS4ERR_DELEG_REVOKED", "delegation revoked"),
];

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

    #[test]
    fn statuses_are_named_in_the_version_asked() {
        // NFSv3's text is what it was before the table.
        assert_eq!(NfsStat::OK.to_string(), "NFS3_OK");
        assert_eq!(
            NfsStat::NOENT.to_string(),
            "NFS3ERR_NOENT (no such file or directory)"
        );
        assert_eq!(
            NfsStat::JUKEBOX.to_string(),
            "NFS3ERR_JUKEBOX (server busy, try later)"
        );
        // NFSv4 names the shared numbers its way and knows its own.
        assert_eq!(
            NfsStat::NOENT.v4().to_string(),
            "NFS4ERR_NOENT (no such file or directory)"
        );
        assert_eq!(NfsStat::ACCES.name(4), Some("NFS4ERR_ACCESS"));
        assert_eq!(NfsStat::JUKEBOX.name(4), Some("NFS4ERR_DELAY"));
        assert_eq!(
            NfsStat(10013).v4().to_string(),
            "NFS4ERR_GRACE (server in its grace period)"
        );
        assert_eq!(NfsStat(10052).name(4), Some("NFS4ERR_BADSESSION"));
        // A number one version lacks is unknown there.
        assert_eq!(NfsStat(10013).name(3), None);
        assert_eq!(NfsStat(10013).to_string(), "unknown NFS status 10013");
        assert_eq!(NfsStat(10002).name(4), None);
        // Every number is listed once, in order.
        assert!(STATUSES.windows(2).all(|w| w[0].code < w[1].code));
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
