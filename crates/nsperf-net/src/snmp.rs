//! The kernel's UDP counters of this network namespace (`/proc/net/snmp`, the `Udp:` lines),
//! read at the start and end of a UDP test so that lost datagrams can be placed: dropped by
//! the receiving host (`RcvbufErrors`: a full socket receive buffer), by the sending host
//! (`SndbufErrors`: a datagram `sendmsg` accepted but the host could not queue, e.g. a full
//! device queue), or neither — lost in the network. The counters are the namespace's, not
//! the socket's: other UDP traffic of the same host counts too, which the report says.

use serde::{Deserialize, Serialize};

/// The `Udp:` counters that place a loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpHostCounters {
    /// Datagrams dropped because a socket's receive buffer was full.
    pub rcvbuf_errors: u64,
    /// Datagrams the host could not send (no buffer or device queue room).
    pub sndbuf_errors: u64,
    /// Datagrams that could not be delivered (receive errors, buffer drops included).
    pub in_errors: u64,
}

impl UdpHostCounters {
    /// Parses the text of `/proc/net/snmp`: the `Udp:` header line names the columns of the
    /// `Udp:` value line after it. Missing columns read 0.
    pub fn parse(text: &str) -> Option<UdpHostCounters> {
        let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
        let names: Vec<&str> = lines.next()?.split_ascii_whitespace().skip(1).collect();
        let values: Vec<&str> = lines.next()?.split_ascii_whitespace().skip(1).collect();
        let get = |name: &str| {
            names
                .iter()
                .position(|&n| n == name)
                .and_then(|i| values.get(i))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Some(UdpHostCounters {
            rcvbuf_errors: get("RcvbufErrors"),
            sndbuf_errors: get("SndbufErrors"),
            in_errors: get("InErrors"),
        })
    }

    /// The counters of this thread's network namespace now.
    pub fn read() -> Option<UdpHostCounters> {
        Self::parse(&std::fs::read_to_string("/proc/net/snmp").ok()?)
    }

    /// What grew from `before` to `self` (a counter that went back reads 0).
    pub fn since(&self, before: &UdpHostCounters) -> UdpHostCounters {
        UdpHostCounters {
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(before.rcvbuf_errors),
            sndbuf_errors: self.sndbuf_errors.saturating_sub(before.sndbuf_errors),
            in_errors: self.in_errors.saturating_sub(before.in_errors),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives
Ip: 1 64 12345
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 1000 2 57 900 55 3 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn reads_the_udp_lines_by_name() {
        let c = UdpHostCounters::parse(SNMP).unwrap();
        assert_eq!(
            c,
            UdpHostCounters {
                rcvbuf_errors: 55,
                sndbuf_errors: 3,
                in_errors: 57,
            }
        );
        let later = UdpHostCounters {
            rcvbuf_errors: 60,
            ..c
        };
        assert_eq!(later.since(&c).rcvbuf_errors, 5);
        assert_eq!(c.since(&later).rcvbuf_errors, 0);
        assert!(UdpHostCounters::parse("Ip: a\nIp: 1\n").is_none());
        assert_eq!(
            UdpHostCounters::parse("Udp: RcvbufErrors\nUdp: x\n"),
            Some(UdpHostCounters::default())
        );
    }

    #[test]
    fn reads_this_host() {
        if std::path::Path::new("/proc/net/snmp").exists() {
            assert!(UdpHostCounters::read().is_some());
        }
    }
}
