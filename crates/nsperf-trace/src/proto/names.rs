//! The names of the operations, programs and statuses the protocol layer decodes: ONC RPC
//! procedures (NFS, MOUNT, portmap), SMB2 commands and NT statuses, as tshark names them.

use nsperf_nfs::proto::{MOUNT_PROG, NFS_PROG, PMAP_PROG};

/// The pseudo program number of SMB2 commands in the [`super::ops::OpTable`] ("SMB2"; no ONC RPC
/// program has it).
pub const SMB2_PROG: u32 = 0x534d_4232;
/// The name of an operation: an RPC procedure, or an SMB2 command.
pub fn op_name(prog: u32, vers: u32, proc_: u32) -> &'static str {
    match prog {
        SMB2_PROG => smb_command_name(proc_),
        _ => rpc_op_name(prog, vers, proc_),
    }
}

/// The short name of a program (`nfs`, `smb2`).
pub fn program_name(prog: u32) -> &'static str {
    match prog {
        SMB2_PROG => "smb2",
        _ => rpc_program_name(prog),
    }
}

/// The protocol's name of a status, in the program version's names (NFSv4's statuses are
/// `NFS4ERR_…`, NFSv3's and MOUNT's `NFS3ERR_…`).
pub fn status_name(prog: u32, vers: u32, st: u32) -> String {
    match prog {
        nsperf_nfs::proto::NFS_PROG | nsperf_nfs::proto::MOUNT_PROG => {
            let v = if prog == nsperf_nfs::proto::NFS_PROG {
                vers
            } else {
                3
            };
            match nsperf_nfs::NfsStat(st).name(v) {
                Some(n) => n.to_string(),
                None => format!("unknown NFS status {st}"),
            }
        }
        SMB2_PROG => nt_status_name(st),
        _ => format!("status {st}"),
    }
}

/// The name of an RPC procedure of the programs decoded.
fn rpc_op_name(prog: u32, vers: u32, proc_: u32) -> &'static str {
    const NFS3: [&str; 22] = [
        "NULL",
        "GETATTR",
        "SETATTR",
        "LOOKUP",
        "ACCESS",
        "READLINK",
        "READ",
        "WRITE",
        "CREATE",
        "MKDIR",
        "SYMLINK",
        "MKNOD",
        "REMOVE",
        "RMDIR",
        "RENAME",
        "LINK",
        "READDIR",
        "READDIRPLUS",
        "FSSTAT",
        "FSINFO",
        "PATHCONF",
        "COMMIT",
    ];
    const NFS4: [&str; 2] = ["NULL", "COMPOUND"];
    const MOUNT3: [&str; 6] = ["NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"];
    const PMAP2: [&str; 6] = ["NULL", "SET", "UNSET", "GETPORT", "DUMP", "CALLIT"];
    let table: &[&str] = match (prog, vers) {
        (NFS_PROG, 2 | 3) => &NFS3,
        (NFS_PROG, 4) => &NFS4,
        (MOUNT_PROG, _) => &MOUNT3,
        (PMAP_PROG, _) => &PMAP2,
        _ => &[],
    };
    table.get(proc_ as usize).copied().unwrap_or("unknown")
}

/// The short name of an RPC program.
fn rpc_program_name(prog: u32) -> &'static str {
    match prog {
        NFS_PROG => "nfs",
        MOUNT_PROG => "mount",
        PMAP_PROG => "portmap",
        100_021 => "nlm",
        100_024 => "nsm",
        100_227 => "nfs_acl",
        _ => "rpc",
    }
}

/// The name of an SMB2 command.
fn smb_command_name(cmd: u32) -> &'static str {
    const NAMES: [&str; 19] = [
        "NEGOTIATE",
        "SESSION_SETUP",
        "LOGOFF",
        "TREE_CONNECT",
        "TREE_DISCONNECT",
        "CREATE",
        "CLOSE",
        "FLUSH",
        "READ",
        "WRITE",
        "LOCK",
        "IOCTL",
        "CANCEL",
        "ECHO",
        "QUERY_DIRECTORY",
        "CHANGE_NOTIFY",
        "QUERY_INFO",
        "SET_INFO",
        "OPLOCK_BREAK",
    ];
    NAMES.get(cmd as usize).copied().unwrap_or("unknown")
}

/// The name of an NT status (those an SMB2 server commonly returns; others in hex).
fn nt_status_name(st: u32) -> String {
    let n = match st {
        0x0000_0103 => "STATUS_PENDING",
        0x8000_0005 => "STATUS_BUFFER_OVERFLOW",
        0x8000_0006 => "STATUS_NO_MORE_FILES",
        0xC000_0008 => "STATUS_INVALID_HANDLE",
        0xC000_000D => "STATUS_INVALID_PARAMETER",
        0xC000_000F => "STATUS_NO_SUCH_FILE",
        0xC000_0010 => "STATUS_INVALID_DEVICE_REQUEST",
        0xC000_0011 => "STATUS_END_OF_FILE",
        0xC000_0016 => "STATUS_MORE_PROCESSING_REQUIRED",
        0xC000_0022 => "STATUS_ACCESS_DENIED",
        0xC000_0034 => "STATUS_OBJECT_NAME_NOT_FOUND",
        0xC000_0035 => "STATUS_OBJECT_NAME_COLLISION",
        0xC000_003A => "STATUS_OBJECT_PATH_NOT_FOUND",
        0xC000_0043 => "STATUS_SHARING_VIOLATION",
        0xC000_0056 => "STATUS_DELETE_PENDING",
        0xC000_006D => "STATUS_LOGON_FAILURE",
        0xC000_007F => "STATUS_DISK_FULL",
        0xC000_00BA => "STATUS_FILE_IS_A_DIRECTORY",
        0xC000_00BB => "STATUS_NOT_SUPPORTED",
        0xC000_00CC => "STATUS_BAD_NETWORK_NAME",
        0xC000_0101 => "STATUS_DIRECTORY_NOT_EMPTY",
        0xC000_0103 => "STATUS_NOT_A_DIRECTORY",
        0xC000_0120 => "STATUS_CANCELLED",
        0xC000_0203 => "STATUS_USER_SESSION_DELETED",
        0xC000_035C => "STATUS_NETWORK_SESSION_EXPIRED",
        _ => return format!("0x{st:08X}"),
    };
    n.to_string()
}

/// Operation numbers counted (0..=75: NFSv4.0, 4.1, 4.2 and the extended attributes).
pub const NFS4_OPS: usize = 76;

/// NFSv4 operation names by number (0-2 are not operations).
pub const NFS4_NAMES: [&str; NFS4_OPS] = [
    "OP_0",
    "OP_1",
    "OP_2",
    "ACCESS",
    "CLOSE",
    "COMMIT",
    "CREATE",
    "DELEGPURGE",
    "DELEGRETURN",
    "GETATTR",
    "GETFH",
    "LINK",
    "LOCK",
    "LOCKT",
    "LOCKU",
    "LOOKUP",
    "LOOKUPP",
    "NVERIFY",
    "OPEN",
    "OPENATTR",
    "OPEN_CONFIRM",
    "OPEN_DOWNGRADE",
    "PUTFH",
    "PUTPUBFH",
    "PUTROOTFH",
    "READ",
    "READDIR",
    "READLINK",
    "REMOVE",
    "RENAME",
    "RENEW",
    "RESTOREFH",
    "SAVEFH",
    "SECINFO",
    "SETATTR",
    "SETCLIENTID",
    "SETCLIENTID_CONFIRM",
    "VERIFY",
    "WRITE",
    "RELEASE_LOCKOWNER",
    "BACKCHANNEL_CTL",
    "BIND_CONN_TO_SESSION",
    "EXCHANGE_ID",
    "CREATE_SESSION",
    "DESTROY_SESSION",
    "FREE_STATEID",
    "GET_DIR_DELEGATION",
    "GETDEVICEINFO",
    "GETDEVICELIST",
    "LAYOUTCOMMIT",
    "LAYOUTGET",
    "LAYOUTRETURN",
    "SECINFO_NO_NAME",
    "SEQUENCE",
    "SET_SSV",
    "TEST_STATEID",
    "WANT_DELEGATION",
    "DESTROY_CLIENTID",
    "RECLAIM_COMPLETE",
    "ALLOCATE",
    "COPY",
    "COPY_NOTIFY",
    "DEALLOCATE",
    "IO_ADVISE",
    "LAYOUTERROR",
    "LAYOUTSTATS",
    "OFFLOAD_CANCEL",
    "OFFLOAD_STATUS",
    "READ_PLUS",
    "SEEK",
    "WRITE_SAME",
    "CLONE",
    "GETXATTR",
    "SETXATTR",
    "LISTXATTRS",
    "REMOVEXATTR",
];

/// The name of NFSv4 operation `op`.
pub fn nfs4_op_name(op: u32) -> &'static str {
    NFS4_NAMES.get(op as usize).copied().unwrap_or("ILLEGAL")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_nfs::proto::{MOUNT_PROG, NFS_PROG};

    #[test]
    fn nfs_statuses_take_the_names_of_their_version() {
        assert_eq!(status_name(NFS_PROG, 3, 2), "NFS3ERR_NOENT");
        assert_eq!(status_name(NFS_PROG, 4, 2), "NFS4ERR_NOENT");
        assert_eq!(status_name(NFS_PROG, 4, 10013), "NFS4ERR_GRACE");
        assert_eq!(status_name(NFS_PROG, 4, 10008), "NFS4ERR_DELAY");
        // MOUNT speaks v3's statuses whatever its own version number.
        assert_eq!(status_name(MOUNT_PROG, 3, 13), "NFS3ERR_ACCES");
        assert_eq!(status_name(NFS_PROG, 3, 10013), "unknown NFS status 10013");
    }
}
