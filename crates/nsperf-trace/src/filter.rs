//! `--filter`: keep packets by host and/or port, in a tiny subset of the pcap-filter syntax:
//! `host ADDR`, `port N`, or both joined by `and`.

use std::net::IpAddr;

use crate::error::TraceError;

/// A packet filter; the default keeps everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    host: Option<IpAddr>,
    port: Option<u16>,
}

impl Filter {
    /// Parses `host ADDR`, `port N`, `host ADDR and port N` (either order).
    pub fn parse(s: &str) -> Result<Filter, TraceError> {
        let bad = || TraceError::Filter(s.to_string());
        let words: Vec<&str> = s.split_whitespace().collect();
        let mut f = Filter::default();
        let mut i = 0;
        while i < words.len() {
            if i > 0 {
                if words[i] != "and" {
                    return Err(bad());
                }
                i += 1;
            }
            let (k, v) = (
                words.get(i).ok_or_else(bad)?,
                words.get(i + 1).ok_or_else(bad)?,
            );
            match *k {
                "host" if f.host.is_none() => f.host = Some(v.parse().map_err(|_| bad())?),
                "port" if f.port.is_none() => f.port = Some(v.parse().map_err(|_| bad())?),
                _ => return Err(bad()),
            }
            i += 2;
        }
        if f.is_empty() {
            return Err(bad());
        }
        Ok(f)
    }

    /// True when the filter keeps everything.
    pub fn is_empty(&self) -> bool {
        self.host.is_none() && self.port.is_none()
    }

    /// True when a packet between these endpoints is kept.
    #[inline]
    pub fn matches(&self, src: IpAddr, sport: u16, dst: IpAddr, dport: u16) -> bool {
        self.host.is_none_or(|h| h == src || h == dst)
            && self.port.is_none_or(|p| p == sport || p == dport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_match() {
        let f = Filter::parse("host 10.0.0.1 and port 80").unwrap();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(f.matches(b, 80, a, 5000));
        assert!(!f.matches(b, 81, a, 5000));
        assert!(Filter::parse("port 5201").unwrap().matches(a, 5201, b, 1));
        for bad in [
            "",
            "host",
            "port x",
            "host 1.2.3.4 or port 1",
            "net 10/8",
            "port 1 and port 2",
        ] {
            assert!(Filter::parse(bad).is_err(), "{bad}");
        }
    }
}
