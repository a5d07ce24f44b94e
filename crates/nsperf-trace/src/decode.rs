//! From a captured frame to the figures the analysis needs: addresses, ports, TCP header
//! fields and options, and payload lengths as on the wire. Built on the checked views in
//! [`crate::wire`]; never panics, never allocates.

use std::net::IpAddr;

use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::Ipv6Packet;
use crate::wire::link::{LinkType, Network, network_layer};
use crate::wire::tcp::{TcpOptions, TcpPacket};
use crate::wire::udp::UdpPacket;

/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// What a frame turned out to be.
#[derive(Debug, Clone, Copy)]
pub enum Decoded {
    /// A TCP segment.
    Tcp(TcpSegment),
    /// A UDP datagram.
    Udp(UdpDatagram),
    /// IP but neither TCP nor UDP, or a non-first fragment.
    OtherIp,
    /// Not IP (ARP, …).
    NotIp,
    /// Headers cut by the snapshot length or malformed: counted, not analysed.
    Unusable,
}

/// The fields of one TCP segment the analysis uses.
#[derive(Debug, Clone, Copy)]
pub struct TcpSegment {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flag bits.
    pub flags: u8,
    /// Raw window field.
    pub window: u16,
    /// Payload length on the wire (from the IP length, not the capture).
    pub payload_len: u32,
    /// Options carried.
    pub options: TcpOptions,
    /// IPv4 identification field (None for IPv6, which has none outside fragments).
    pub ip_id: Option<u16>,
    /// Where the payload starts in the captured frame, bytes.
    pub payload_at: u32,
    /// Payload bytes captured (fewer than `payload_len` when the snapshot length cut them).
    pub payload_captured: u32,
}

impl TcpSegment {
    /// The payload bytes captured, out of the frame this segment was decoded from.
    pub fn payload<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        let at = self.payload_at as usize;
        frame
            .get(at..at.saturating_add(self.payload_captured as usize))
            .unwrap_or(&[])
    }
}

/// The fields of one UDP datagram the analysis uses.
#[derive(Debug, Clone, Copy)]
pub struct UdpDatagram {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length on the wire.
    pub payload_len: u32,
}

/// Decodes one captured frame.
pub fn decode(link: LinkType, frame: &[u8]) -> Decoded {
    let Ok(net) = network_layer(link, frame) else {
        return Decoded::Unusable;
    };
    // (src, dst, protocol, transport length on the wire, transport bytes captured, IP ID)
    let (src, dst, proto, l4_len, l4, ip_id) = match net {
        Network::Other => return Decoded::NotIp,
        Network::Ipv4(b) => {
            let Ok(ip) = Ipv4Packet::new_checked(b) else {
                return Decoded::Unusable;
            };
            if ip.frag_offset() != 0 {
                return Decoded::OtherIp;
            }
            let t = (
                IpAddr::V4(ip.src_addr()),
                IpAddr::V4(ip.dst_addr()),
                ip.protocol(),
                ip.payload_len(),
                ip.ident(),
            );
            (t.0, t.1, t.2, t.3, ip.into_payload(), Some(t.4))
        }
        Network::Ipv6(b) => {
            let Ok(ip) = Ipv6Packet::new_checked(b) else {
                return Decoded::Unusable;
            };
            let Some(up) = ip.upper_layer() else {
                return Decoded::Unusable;
            };
            if up.later_fragment {
                return Decoded::OtherIp;
            }
            let wire_end = ip.total_len();
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let bytes = ip.into_bytes();
            let captured_end = wire_end.min(bytes.len());
            let l4 = bytes.get(up.offset..captured_end).unwrap_or(&[]);
            (
                IpAddr::V6(src),
                IpAddr::V6(dst),
                up.protocol,
                wire_end.saturating_sub(up.offset),
                l4,
                None,
            )
        }
    };
    match proto {
        PROTO_TCP => {
            let Ok(t) = TcpPacket::new_checked(l4) else {
                return Decoded::Unusable;
            };
            let payload_len = l4_len.saturating_sub(t.header_len());
            // The transport bytes are a slice of the frame: their distance from its start.
            let l4_at = (l4.as_ptr() as usize).saturating_sub(frame.as_ptr() as usize);
            let captured = l4.len().saturating_sub(t.header_len()).min(payload_len);
            Decoded::Tcp(TcpSegment {
                src,
                dst,
                src_port: t.src_port(),
                dst_port: t.dst_port(),
                seq: t.seq(),
                ack: t.ack(),
                flags: t.flags(),
                window: t.window(),
                payload_len: payload_len as u32,
                options: t.options(),
                ip_id,
                payload_at: (l4_at + t.header_len()) as u32,
                payload_captured: captured as u32,
            })
        }
        PROTO_UDP => {
            let Ok(u) = UdpPacket::new_checked(l4) else {
                return Decoded::Unusable;
            };
            Decoded::Udp(UdpDatagram {
                src,
                dst,
                src_port: u.src_port(),
                dst_port: u.dst_port(),
                payload_len: l4_len.saturating_sub(8) as u32,
            })
        }
        _ => Decoded::OtherIp,
    }
}
