//! Link-layer types of captures, and the walk from a captured frame to its IP header.

use super::ethernet::{self, EthernetFrame, VlanTag};
use super::sll::{NullFamily, NullHeader, Sll2Header, SllHeader};
use super::{Result, WireError};

/// Most VLAN tags unwrapped before a frame is given up (QinQ uses two).
const MAX_VLAN_TAGS: usize = 4;

/// The link-layer header types nsperf reads (pcap `LINKTYPE_*` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    /// 0: BSD loopback, address family in the capturing host's byte order.
    Null,
    /// 1: Ethernet II, with any 802.1Q/802.1ad tags.
    Ethernet,
    /// 10: FDDI with LLC/SNAP.
    Fddi,
    /// 101 (and the historical 12 and 14): raw IPv4 or IPv6.
    RawIp,
    /// 108: OpenBSD loopback, address family big-endian.
    Loop,
    /// 113: Linux cooked capture v1.
    LinuxSll,
    /// 276: Linux cooked capture v2.
    LinuxSll2,
    /// 228: raw IPv4.
    Ipv4,
    /// 229: raw IPv6.
    Ipv6,
    /// Any other: its packets are counted as not IP.
    Other(u32),
}

impl LinkType {
    /// From a pcap/pcapng link-type number.
    pub fn from_number(n: u32) -> LinkType {
        match n {
            0 => LinkType::Null,
            1 => LinkType::Ethernet,
            10 => LinkType::Fddi,
            12 | 14 | 101 => LinkType::RawIp,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            x => LinkType::Other(x),
        }
    }
}

/// The network layer found in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network<'a> {
    /// An IPv4 packet starts here.
    Ipv4(&'a [u8]),
    /// An IPv6 packet starts here.
    Ipv6(&'a [u8]),
    /// Something else (ARP, LLDP, …): counted, not analysed.
    Other,
}

fn by_ethertype(ethertype: u16, payload: &[u8]) -> Network<'_> {
    match ethertype {
        ethernet::ETHERTYPE_IPV4 => Network::Ipv4(payload),
        ethernet::ETHERTYPE_IPV6 => Network::Ipv6(payload),
        _ => Network::Other,
    }
}

fn by_version(payload: &[u8]) -> Network<'_> {
    match payload.first().map(|b| b >> 4) {
        Some(4) => Network::Ipv4(payload),
        Some(6) => Network::Ipv6(payload),
        _ => Network::Other,
    }
}

/// Strips the link-layer header of `frame` and says which network layer follows.
pub fn network_layer(link: LinkType, frame: &[u8]) -> Result<Network<'_>> {
    match link {
        LinkType::Ethernet => {
            let eth = EthernetFrame::new_checked(frame)?;
            let mut ethertype = eth.ethertype();
            let mut payload = eth.into_payload();
            for _ in 0..MAX_VLAN_TAGS {
                if !ethernet::is_vlan(ethertype) {
                    return Ok(by_ethertype(ethertype, payload));
                }
                let tag = VlanTag::new_checked(payload)?;
                ethertype = tag.ethertype();
                payload = tag.into_payload();
            }
            Err(WireError::Malformed)
        }
        LinkType::Fddi => {
            let h = super::fddi::FddiFrame::new_checked(frame)?;
            Ok(by_ethertype(h.ethertype(), h.into_payload()))
        }
        LinkType::LinuxSll => {
            let h = SllHeader::new_checked(frame)?;
            Ok(by_ethertype(h.protocol(), h.into_payload()))
        }
        LinkType::LinuxSll2 => {
            let h = Sll2Header::new_checked(frame)?;
            Ok(by_ethertype(h.protocol(), h.into_payload()))
        }
        LinkType::Null | LinkType::Loop => {
            let h = NullHeader::new_checked(frame)?;
            Ok(match h.family() {
                NullFamily::Ipv4 => Network::Ipv4(h.into_payload()),
                NullFamily::Ipv6 => Network::Ipv6(h.into_payload()),
                NullFamily::Other(_) => Network::Other,
            })
        }
        LinkType::RawIp => Ok(by_version(frame)),
        LinkType::Ipv4 => Ok(Network::Ipv4(frame)),
        LinkType::Ipv6 => Ok(Network::Ipv6(frame)),
        LinkType::Other(_) => Ok(Network::Other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethernet_with_two_vlan_tags() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[
            0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x14, 0x08, 0x00, 0x45,
        ]);
        assert_eq!(
            network_layer(LinkType::Ethernet, &f).unwrap(),
            Network::Ipv4(&[0x45])
        );
        // a tag cut short
        assert!(network_layer(LinkType::Ethernet, &f[..16]).is_err());
        // endless tags
        let mut f = vec![0u8; 12];
        for _ in 0..6 {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
        }
        assert_eq!(
            network_layer(LinkType::Ethernet, &f).unwrap_err(),
            WireError::Malformed
        );
    }

    #[test]
    fn raw_and_others() {
        assert_eq!(
            network_layer(LinkType::RawIp, &[0x60, 0]).unwrap(),
            Network::Ipv6(&[0x60, 0])
        );
        assert_eq!(network_layer(LinkType::RawIp, &[]).unwrap(), Network::Other);
        assert_eq!(
            network_layer(LinkType::Other(147), &[1, 2]).unwrap(),
            Network::Other
        );
        assert_eq!(LinkType::from_number(113), LinkType::LinuxSll);
        assert_eq!(LinkType::from_number(12), LinkType::RawIp);
    }
}
