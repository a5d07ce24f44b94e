//! TUN devices with a virtio-net header (`IFF_VNET_HDR`), so that the kernel hands the
//! forwarder whole TSO/USO super-packets (up to 64 KiB) with checksums left to offload, and
//! accepts them back the same way: one read and one write per super-packet.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::{LabError, Result};

const TUNSETIFF: libc::Ioctl = 0x4004_54ca as libc::Ioctl;
const TUNSETOFFLOAD: libc::Ioctl = 0x4004_54d0 as libc::Ioctl;
const TUNSETVNETHDRSZ: libc::Ioctl = 0x4004_54d8 as libc::Ioctl;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;

/// Offload flags of `TUNSETOFFLOAD`.
pub mod offload {
    /// Checksums may be left partial (`NEEDS_CSUM`).
    pub const CSUM: u32 = 0x01;
    /// TCP segmentation offload, IPv4.
    pub const TSO4: u32 = 0x02;
    /// TCP segmentation offload, IPv6.
    pub const TSO6: u32 = 0x04;
    /// TSO with ECN.
    pub const TSO_ECN: u32 = 0x08;
    /// UDP segmentation offload, IPv4.
    pub const USO4: u32 = 0x20;
    /// UDP segmentation offload, IPv6.
    pub const USO6: u32 = 0x40;
    /// Everything: super-packets in both TCP and UDP.
    pub const ALL: u32 = CSUM | TSO4 | TSO6 | TSO_ECN | USO4 | USO6;
}

/// Size of the virtio-net header in front of every packet.
pub const VNET_HDR_LEN: usize = 10;

/// The virtio-net header fields the forwarder reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*` flags.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*` type; 0 for a single packet.
    pub gso_type: u8,
    /// Segment payload size of a super-packet.
    pub gso_size: u16,
    /// Where the checksum computation starts (NEEDS_CSUM).
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

/// Flag: the checksum is partial and must be completed.
pub const F_NEEDS_CSUM: u8 = 1;
/// Flag: the checksum was already verified.
pub const F_DATA_VALID: u8 = 2;

impl VnetHdr {
    /// Reads the header from the first [`VNET_HDR_LEN`] bytes (None if shorter).
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        let h = b.get(..VNET_HDR_LEN)?;
        let u = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
        Some(VnetHdr {
            flags: h[0],
            gso_type: h[1],
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }
}

/// An open TUN device queue.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
}

impl Tun {
    /// Creates TUN device `name` in the calling thread's network namespace, non-blocking,
    /// with a virtio-net header and every offload the kernel accepts.
    pub fn create(name: &str) -> Result<Tun> {
        let path = c"/dev/net/tun";
        // SAFETY: plain open of a device node.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(if e.kind() == io::ErrorKind::NotFound {
                LabError::Unsupported(
                    "/dev/net/tun is missing: the kernel has no TUN support".into(),
                )
            } else {
                LabError::io("opening /dev/net/tun", e)
            });
        }
        // SAFETY: fd was just opened and is owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        #[repr(C)]
        struct IfReq {
            name: [u8; 16],
            flags: libc::c_short,
            _pad: [u8; 22],
        }
        let mut req = IfReq {
            name: [0; 16],
            flags: IFF_TUN | IFF_NO_PI | IFF_VNET_HDR,
            _pad: [0; 22],
        };
        let n = name.len().min(15);
        req.name[..n].copy_from_slice(&name.as_bytes()[..n]);
        // SAFETY: TUNSETIFF reads and writes an ifreq we own.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
            return Err(LabError::io(
                format!("creating TUN device {name}"),
                io::Error::last_os_error(),
            ));
        }
        let hdr: libc::c_int = VNET_HDR_LEN as libc::c_int;
        // SAFETY: TUNSETVNETHDRSZ reads an int we own.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETVNETHDRSZ, &hdr) } < 0 {
            return Err(LabError::io(
                "setting the virtio-net header size",
                io::Error::last_os_error(),
            ));
        }
        let tun = Tun { fd };
        tun.set_offload(offload::ALL)?;
        Ok(tun)
    }

    /// Sets the offloads the reader accepts; falls back without USO on older kernels.
    pub fn set_offload(&self, flags: u32) -> Result<()> {
        let set = |f: u32| {
            // SAFETY: TUNSETOFFLOAD takes the flags by value.
            unsafe { libc::ioctl(self.fd.as_raw_fd(), TUNSETOFFLOAD, f as libc::c_ulong) }
        };
        if set(flags) == 0 || set(flags & !(offload::USO4 | offload::USO6)) == 0 {
            Ok(())
        } else {
            Err(LabError::io(
                "setting TUN offloads",
                io::Error::last_os_error(),
            ))
        }
    }

    /// One packet (header included) into `buf`; `WouldBlock` when none is waiting.
    #[inline]
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for writes of buf.len() bytes.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Writes one packet (header included).
    #[inline]
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for reads of buf.len() bytes.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// The raw descriptor, for poll.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
