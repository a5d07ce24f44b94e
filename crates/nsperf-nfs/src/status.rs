//! NFS statuses: the numbers of NFSv3 (RFC 1813, also MOUNT's) and NFSv4.x (RFC 7530,
//! RFC 8881), each named in the version spoken.

use std::fmt;

/// An NFS status: NFSv3's `nfsstat3` (also MOUNT's `mountstat3`, same numbers) or NFSv4's
/// `nfsstat4`; shown with NFSv3's names, [`NfsStat::v4`] with NFSv4's.
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
