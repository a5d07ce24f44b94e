//! What file system a target path is on: its type, mount source and mount point (from
//! `/proc/self/mountinfo`, matched by device number and longest mount-point prefix), the
//! `statfs` magic, and whether it is a network file system — recorded with every result so a
//! figure always says what was measured (a FUSE mount whose daemon died leaves the empty
//! local directory behind, and 1.3 GiB/s "over" a 1 Gbit/s link).
//!
//! For a network file system, the link it goes through is looked up (the server address from
//! the mount, the route to it, the interface's speed), so a rate above the link can be named.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file system of a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsInfo {
    /// Type as mounted (`ext4`, `tmpfs`, `nfs4`, `fuse.sshfs`, …).
    pub fs_type: String,
    /// Mount source (`/dev/sda1`, `server:/export`, `//server/share`, …).
    pub mount_source: String,
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// Device number `major:minor` of the target.
    pub dev: String,
    /// `statfs` `f_type` magic number.
    pub statfs_magic: u64,
    /// True for a network file system, false for a local one, null when it cannot be told
    /// (a FUSE file system of unknown kind).
    pub network: Option<bool>,
    /// For a network file system: the server's address, when the mount names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<IpAddr>,
    /// The interface the server is reached through, and its speed when the driver tells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<Link>,
}

/// The interface a network file system's server is reached through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// Interface name (`lo` for a server on this host).
    pub interface: String,
    /// Link speed in Mbit/s (absent for virtual links, which report none).
    pub speed_mbps: Option<u64>,
}

/// File-system types that go over a network.
const NETWORK_TYPES: [&str; 14] = [
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "ceph",
    "glusterfs",
    "9p",
    "afs",
    "lustre",
    "gpfs",
    "beegfs",
    "davfs",
    "ncpfs",
];
/// FUSE file systems known to go over a network.
const NETWORK_FUSE: [&str; 9] = [
    "sshfs",
    "glusterfs",
    "s3fs",
    "rclone",
    "ceph",
    "cephfs",
    "gcsfuse",
    "juicefs",
    "davfs",
];

/// Whether a mount type is a network file system (`None`: a FUSE type of unknown kind).
pub fn is_network(fs_type: &str) -> Option<bool> {
    if NETWORK_TYPES.contains(&fs_type) {
        return Some(true);
    }
    match fs_type
        .strip_prefix("fuse.")
        .or(fs_type.strip_prefix("fuseblk."))
    {
        Some(sub) => NETWORK_FUSE.contains(&sub).then_some(true),
        None if fs_type == "fuse" || fs_type == "fuseblk" => None,
        None => Some(false),
    }
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// `major:minor`.
    pub dev: String,
    /// Mount point (octal escapes decoded).
    pub mount_point: PathBuf,
    /// File-system type.
    pub fs_type: String,
    /// Mount source.
    pub source: String,
    /// Per-superblock options (`addr=` for NFS and CIFS).
    pub super_options: String,
}

/// Parses mountinfo text; malformed lines are skipped. Never panics (fuzzed).
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<MountEntry> {
    let (head, tail) = line.split_once(" - ")?;
    let h: Vec<&str> = head.split(' ').collect();
    if h.len() < 6 {
        return None;
    }
    let mut t = tail.split(' ');
    let fs_type = t.next()?.to_string();
    let source = unescape(t.next()?);
    let super_options = t.next().unwrap_or("").to_string();
    Some(MountEntry {
        dev: h[2].to_string(),
        mount_point: PathBuf::from(unescape(h[4])),
        fs_type,
        source,
        super_options,
    })
}

/// Decodes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = (oct[0] - b'0') as u32 * 64
                    + (oct[1] - b'0') as u32 * 8
                    + (oct[2] - b'0') as u32;
                if let Ok(byte) = u8::try_from(v) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount of `path` (device `dev`) among `entries`: same device, longest mount point that
/// is a prefix of the path; the last one listed wins a tie (it is mounted over the others).
pub fn mount_of<'a>(entries: &'a [MountEntry], dev: &str, path: &Path) -> Option<&'a MountEntry> {
    let mut best: Option<&MountEntry> = None;
    for e in entries
        .iter()
        .filter(|e| e.dev == dev && path.starts_with(&e.mount_point))
    {
        if best.is_none_or(|b| e.mount_point.as_os_str().len() >= b.mount_point.as_os_str().len()) {
            best = Some(e);
        }
    }
    best
}

/// The file system of `path`, or `None` when it cannot be stat'ed.
pub fn of_path(path: &Path) -> Option<FsInfo> {
    let md = std::fs::metadata(path).ok()?;
    let canon = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let dev = format!("{}:{}", libc::major(md.dev()), libc::minor(md.dev()));
    let magic = statfs_magic(path).unwrap_or(0);
    let entries = std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default();
    let m = mount_of(&entries, &dev, &canon);
    let fs_type = m
        .map(|m| m.fs_type.clone())
        .unwrap_or_else(|| magic_name(magic).to_string());
    let network = is_network(&fs_type);
    let server = m.filter(|_| network == Some(true)).and_then(server_addr);
    let link = server.and_then(link_to);
    Some(FsInfo {
        mount_source: m.map(|m| m.source.clone()).unwrap_or_default(),
        mount_point: m.map(|m| m.mount_point.clone()).unwrap_or_default(),
        dev,
        statfs_magic: magic,
        network,
        server,
        link,
        fs_type,
    })
}

fn statfs_magic(path: &Path) -> Option<u64> {
    let c = crate::target::cstr(path);
    // SAFETY: statfs fills a zeroed struct; c is a valid path.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut st) != 0 {
            return None;
        }
        Some(st.f_type as u64)
    }
}

/// Names of common `statfs` magics, for when mountinfo cannot be read.
fn magic_name(m: u64) -> &'static str {
    match m {
        0xEF53 => "ext4",
        0x0102_1994 => "tmpfs",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x6969 => "nfs",
        0xFF53_4D42 => "cifs",
        0xFE53_4D42 => "smb3",
        0x6573_5546 => "fuse",
        0x794C_7630 => "overlay",
        _ => "unknown",
    }
}

/// The server address of a network mount: `addr=` of the superblock options (NFS, CIFS),
/// else an IP literal in the source (`10.0.0.1:/export`, `//10.0.0.1/share`, `u@10.0.0.1:`).
pub fn server_addr(m: &MountEntry) -> Option<IpAddr> {
    if let Some(a) = m
        .super_options
        .split(',')
        .find_map(|o| o.strip_prefix("addr="))
        .and_then(|a| a.parse().ok())
    {
        return Some(a);
    }
    let s = m.source.trim_start_matches("//");
    let s = s.rsplit_once('@').map_or(s, |(_, h)| h);
    let host = if let Some(rest) = s.strip_prefix('[') {
        rest.split_once(']').map(|(h, _)| h)?
    } else {
        s.split([':', '/']).next()?
    };
    host.parse().ok()
}

/// The interface the kernel routes `addr` through (a UDP socket connected to it sends
/// nothing), with its speed.
pub fn link_to(addr: IpAddr) -> Option<Link> {
    let bind: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let s = UdpSocket::bind(bind).ok()?;
    s.connect(SocketAddr::new(addr, 9)).ok()?;
    let local = s.local_addr().ok()?.ip();
    let name = if local.is_loopback() {
        "lo".to_string()
    } else {
        interface_of(local)?
    };
    let speed = nsperf_core::host::interfaces()
        .into_iter()
        .find(|i| i.name == name)
        .and_then(|i| i.speed_mbps);
    Some(Link {
        interface: name,
        speed_mbps: speed,
    })
}

/// The interface holding a local address (getifaddrs).
fn interface_of(local: IpAddr) -> Option<String> {
    let mut found = None;
    // SAFETY: getifaddrs allocates a list freed below; every pointer is checked for null.
    unsafe {
        let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut head) != 0 {
            return None;
        }
        let mut p = head;
        while !p.is_null() {
            let ifa = &*p;
            p = ifa.ifa_next;
            if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
                continue;
            }
            let ip = match (*ifa.ifa_addr).sa_family as i32 {
                libc::AF_INET => {
                    let a = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes())
                }
                libc::AF_INET6 => {
                    let a = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    IpAddr::from(a.sin6_addr.s6_addr)
                }
                _ => continue,
            };
            if ip == local {
                found = Some(
                    std::ffi::CStr::from_ptr(ifa.ifa_name)
                        .to_string_lossy()
                        .into_owned(),
                );
                break;
            }
        }
        libc::freeifaddrs(head);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:25 / /dev/shm rw,nosuid shared:5 - tmpfs tmpfs rw,size=5120k
41 22 0:40 / /mnt/nas rw,relatime shared:9 - nfs4 10.1.2.3:/export rw,vers=4.2,addr=10.1.2.3,clientaddr=10.1.2.9
42 22 0:41 / /mnt/my\\040share rw - cifs //192.168.1.5/share rw,addr=192.168.1.5
43 22 0:42 / /mnt/ssh rw - fuse.sshfs user@172.16.0.4:/home rw,user_id=0
44 22 0:43 / /mnt/f rw - fuse myfs rw
garbage line
";

    #[test]
    fn parses_mountinfo_and_finds_the_mount() {
        let e = parse_mountinfo(FIXTURE);
        assert_eq!(e.len(), 6);
        assert_eq!(e[3].mount_point, Path::new("/mnt/my share"));
        let m = mount_of(&e, "0:40", Path::new("/mnt/nas/dir")).unwrap();
        assert_eq!(
            (m.fs_type.as_str(), m.source.as_str()),
            ("nfs4", "10.1.2.3:/export")
        );
        assert_eq!(server_addr(m), Some("10.1.2.3".parse().unwrap()));
        assert_eq!(server_addr(&e[3]), Some("192.168.1.5".parse().unwrap()));
        assert_eq!(server_addr(&e[4]), Some("172.16.0.4".parse().unwrap()));
        assert_eq!(
            mount_of(&e, "8:1", Path::new("/home/x")).unwrap().fs_type,
            "ext4"
        );
        assert!(mount_of(&e, "9:9", Path::new("/")).is_none());
        assert_eq!(is_network("nfs4"), Some(true));
        assert_eq!(is_network("fuse.sshfs"), Some(true));
        assert_eq!(is_network("fuse"), None);
        assert_eq!(is_network("ext4"), Some(false));
    }

    #[test]
    fn local_targets() {
        let f = of_path(Path::new("/proc")).unwrap();
        assert_eq!(f.fs_type, "proc");
        assert_eq!(f.network, Some(false));
        if let Some(f) = of_path(Path::new("/dev/shm")) {
            assert_eq!(f.fs_type, "tmpfs");
        }
        assert_eq!(
            link_to("127.0.0.1".parse().unwrap()).unwrap().interface,
            "lo"
        );
    }

    #[test]
    fn hostile_mountinfo_never_panics() {
        for s in [
            "",
            " - ",
            "a b c d e f - ",
            "1 2 3 4 \\ 6 - x \\04",
            "\\777 - \\\\",
        ] {
            let _ = parse_mountinfo(s);
        }
        crate::fuzz_mountinfo(b"1 2 3:4 / /\\0 rw - t s o\n\xff\xfe - -");
    }
}
