//! What the forwarder needs to know about an IP packet behind its virtio-net header: where
//! it goes, how many wire packets and bytes it stands for, and how to complete a partial
//! checksum or flip a bit. Every accessor checks lengths; none can panic.

use std::net::Ipv4Addr;

use crate::config::FRAME_OVERHEAD_BYTES;
use crate::model::WirePacket;
use crate::tun::{F_DATA_VALID, F_NEEDS_CSUM, VNET_HDR_LEN, VnetHdr};

/// IPv4 destination of a packet (header included), None for anything else.
pub fn ipv4_dst(frame: &[u8]) -> Option<Ipv4Addr> {
    let ip = frame.get(VNET_HDR_LEN..)?;
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return None;
    }
    Some(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]))
}

/// Length of the IP + transport headers repeated in every segment of a super-packet.
fn headers_len(ip: &[u8]) -> Option<usize> {
    let (l3, proto) = match ip.first()? >> 4 {
        4 => (usize::from(ip.first()? & 0x0f) * 4, *ip.get(9)?),
        6 => (40, *ip.get(6)?),
        _ => return None,
    };
    let l4 = match proto {
        6 => usize::from(ip.get(l3 + 12)? >> 4) * 4,
        17 => 8,
        _ => return None,
    };
    Some(l3 + l4)
}

/// The wire size of a packet read from the TUN device (header included): a super-packet
/// counts as its segments, each with its own headers and framing.
pub fn wire_size(frame: &[u8]) -> WirePacket {
    let ip_len = frame.len().saturating_sub(VNET_HDR_LEN) as u64;
    let single = WirePacket {
        bytes: ip_len + FRAME_OVERHEAD_BYTES,
        segments: 1,
    };
    let Some(h) = VnetHdr::parse(frame) else {
        return single;
    };
    if h.gso_type == 0 || h.gso_size == 0 {
        return single;
    }
    let ip = &frame[VNET_HDR_LEN..];
    let Some(hl) = headers_len(ip) else {
        return single;
    };
    let payload = ip.len().saturating_sub(hl) as u64;
    let segs = payload.div_ceil(u64::from(h.gso_size)).max(1);
    WirePacket {
        bytes: ip_len + (segs - 1) * hl as u64 + segs * FRAME_OVERHEAD_BYTES,
        segments: segs.min(u64::from(u32::MAX)) as u32,
    }
}

/// RFC 1071 Internet checksum of `data` (one's-complement sum, complemented).
pub fn inet_checksum(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(*last) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Completes a partial checksum (NEEDS_CSUM) in place and clears the flag, so the packet
/// can be changed and still be checked by the receiver. False if the offsets are bad.
pub fn complete_checksum(frame: &mut [u8]) -> bool {
    let Some(h) = VnetHdr::parse(frame) else {
        return false;
    };
    if h.flags & F_NEEDS_CSUM == 0 {
        return true;
    }
    if !fill_checksum(&mut frame[VNET_HDR_LEN..], &h) {
        return false;
    }
    frame[0] &= !F_NEEDS_CSUM;
    true
}

/// Completes the partial checksum a virtio-net header `h` describes in `ip` (the packet
/// from its IP header on): for a copy, such as a captured packet. False if the offsets are
/// bad; true (and nothing done) when no checksum is pending.
pub fn fill_checksum(ip: &mut [u8], h: &VnetHdr) -> bool {
    if h.flags & F_NEEDS_CSUM == 0 {
        return true;
    }
    let start = usize::from(h.csum_start);
    let field = start + usize::from(h.csum_offset);
    if field + 2 > ip.len() || start > ip.len() {
        return false;
    }
    // The field holds the pseudo-header sum; summing over it gives the full checksum.
    let c = inet_checksum(&ip[start..]);
    ip[field..field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Flips one bit chosen by `pick` (any u64) after the IP header, and clears DATA_VALID so
/// the receiver verifies the checksum as it would on a real wire.
pub fn corrupt(frame: &mut [u8], pick: u64) {
    if !complete_checksum(frame) {
        return;
    }
    let Some(ip) = frame.get(VNET_HDR_LEN..) else {
        return;
    };
    let hl = match ip.first().map(|b| b >> 4) {
        Some(4) => usize::from(ip[0] & 0x0f) * 4,
        _ => 40,
    };
    let start = VNET_HDR_LEN + hl;
    if start >= frame.len() {
        return;
    }
    let bits = ((frame.len() - start) * 8) as u64;
    let bit = (pick % bits) as usize;
    frame[start + bit / 8] ^= 1 << (bit % 8);
    frame[0] &= !F_DATA_VALID;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_frame(payload: usize, gso_size: u16) -> Vec<u8> {
        let mut f = vec![0u8; VNET_HDR_LEN + 20 + 32 + payload];
        if gso_size > 0 {
            f[1] = 1; // GSO_TCPV4
            f[4..6].copy_from_slice(&gso_size.to_le_bytes());
        }
        let ip = &mut f[VNET_HDR_LEN..];
        ip[0] = 0x45;
        ip[9] = 6;
        ip[16..20].copy_from_slice(&[10, 77, 0, 2]);
        ip[20 + 12] = 8 << 4; // data offset 32 bytes
        f
    }

    #[test]
    fn super_packet_counts_its_segments() {
        let f = tcp_frame(1448 * 10 + 100, 1448);
        let w = wire_size(&f);
        assert_eq!(w.segments, 11);
        assert_eq!(w.bytes, (20 + 32 + 14) * 11 + 1448 * 10 + 100);
        assert_eq!(ipv4_dst(&f), Some(Ipv4Addr::new(10, 77, 0, 2)));
        let single = tcp_frame(1000, 0);
        assert_eq!(wire_size(&single).segments, 1);
        assert_eq!(wire_size(&single).bytes, 20 + 32 + 1000 + 14);
    }

    #[test]
    fn short_or_odd_frames_do_not_panic() {
        for len in 0..80 {
            let mut f = tcp_frame(20, 1448);
            f.truncate(len);
            let _ = wire_size(&f);
            let _ = ipv4_dst(&f);
            let _ = complete_checksum(&mut f);
            corrupt(&mut f, 12345);
        }
        let mut f = tcp_frame(20, 0);
        f[0] = F_NEEDS_CSUM;
        f[6..8].copy_from_slice(&60000u16.to_le_bytes());
        assert!(!complete_checksum(&mut f));
    }

    #[test]
    fn checksum_matches_rfc1071_example() {
        // RFC 1071 section 3 example bytes sum to 0xddf2 before complementing.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(inet_checksum(&d), !0xddf2);
    }

    #[test]
    fn corrupt_flips_exactly_one_bit_after_the_ip_header() {
        let f0 = tcp_frame(100, 0);
        let mut f = f0.clone();
        corrupt(&mut f, 777);
        let diff: u32 = f0.iter().zip(&f).map(|(a, b)| (a ^ b).count_ones()).sum();
        assert_eq!(diff, 1);
        assert_eq!(&f[..VNET_HDR_LEN + 20], &f0[..VNET_HDR_LEN + 20]);
    }
}
