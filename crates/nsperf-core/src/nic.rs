//! NIC counters from `/proc/net/dev`: bytes, packets, errors and drops per interface, so
//! that wire bytes (headers included) can be set beside payload bytes.

use serde::{Deserialize, Serialize};

/// Counters of one interface at one moment (or their difference over an interval).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicCounters {
    /// Interface name.
    pub name: String,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Receive drops.
    pub rx_dropped: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Transmit errors.
    pub tx_errors: u64,
    /// Transmit drops.
    pub tx_dropped: u64,
}

impl NicCounters {
    /// Counter growth from `earlier` to `self` (wrap-safe: a reset gives zero).
    pub fn since(&self, earlier: &NicCounters) -> NicCounters {
        NicCounters {
            name: self.name.clone(),
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            rx_errors: self.rx_errors.saturating_sub(earlier.rx_errors),
            rx_dropped: self.rx_dropped.saturating_sub(earlier.rx_dropped),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            tx_errors: self.tx_errors.saturating_sub(earlier.tx_errors),
            tx_dropped: self.tx_dropped.saturating_sub(earlier.tx_dropped),
        }
    }
}

/// Parses the text of `/proc/net/dev`.
pub fn parse_proc_net_dev(text: &str) -> Vec<NicCounters> {
    let mut out = Vec::new();
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let v: Vec<u64> = rest
            .split_ascii_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        if v.len() < 12 {
            continue;
        }
        out.push(NicCounters {
            name: name.trim().to_string(),
            rx_bytes: v[0],
            rx_packets: v[1],
            rx_errors: v[2],
            rx_dropped: v[3],
            tx_bytes: v[8],
            tx_packets: v[9],
            tx_errors: v[10],
            tx_dropped: v[11],
        });
    }
    out
}

/// Reads `/proc/net/dev` of the current network namespace.
pub fn read_nic_counters() -> Vec<NicCounters> {
    std::fs::read_to_string("/proc/net/dev")
        .map(|t| parse_proc_net_dev(&t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 5000      50    1    2    0     0          0         0     7000      70    0    3    0     0       0          0
";

    #[test]
    fn parses_and_diffs() {
        let v = parse_proc_net_dev(DEV);
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].name, "eth0");
        assert_eq!(v[1].rx_dropped, 2);
        assert_eq!(v[1].tx_bytes, 7000);
        let mut later = v[1].clone();
        later.tx_bytes = 9000;
        assert_eq!(later.since(&v[1]).tx_bytes, 2000);
        assert_eq!(v[1].since(&later).tx_bytes, 0);
    }
}
