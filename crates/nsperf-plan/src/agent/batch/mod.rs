//! Agents through the engines clusters already run: one agent per task of a Slurm
//! allocation (`srun`), one per pod of a Kubernetes Indexed Job (`kubectl`).
//!
//! Either way the agents listen on TCP with a key (`nsperf agent --listen … --psk-file …`)
//! and the coordinator connects to each: a batch system multiplexes its tasks' standard
//! input and output into one stream, so the `--stdio` transport of ssh does not fit. A Slurm
//! agent listens on port 0 and announces its address on its standard output
//! ([`Announcement`], `srun --label` tells whose line it is); a Kubernetes agent listens on a
//! fixed port and is found by DNS through the Job's headless Service.

mod hostlist;
mod kubernetes;
mod sbatch;
mod slurm;

use std::fmt;
use std::str::FromStr;

pub use hostlist::{Hostlist, HostlistError, MAX_HOSTS, fuzz_hostlist};
pub use kubernetes::{
    K8S_AGENT_PORT, K8S_PSK_PATH, K8sAgents, K8sDeployment, K8sError, Kubectl, k8s_links,
};
pub use sbatch::{SlurmScript, SlurmScriptError};
pub use slurm::{SlurmAgents, SlurmJob, SrunStep, slurm_links};

/// What `nsperf agent --listen ADDR --announce` prints on its standard output once it
/// listens: `nsperf-agent HOST PORT`, HOST being this host's name (what the other hosts of a
/// cluster resolve), PORT the port it bound (port 0 picks a free one, so agents sharing a node
/// never collide).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// This host's name.
    pub host: String,
    /// The port the agent listens on.
    pub port: u16,
}

/// The first word of an announcement.
const ANNOUNCE_TAG: &str = "nsperf-agent";

/// A line that is not an agent's announcement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an agent announcement (`nsperf-agent HOST PORT`): {line:?}")]
pub struct AnnouncementError {
    /// The line (its first 80 characters).
    pub line: String,
}

impl Announcement {
    /// This host's announcement for `port`.
    pub fn here(port: u16) -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        Announcement { host, port }
    }

    /// The address to connect to, `HOST:PORT`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl fmt::Display for Announcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{ANNOUNCE_TAG} {} {}", self.host, self.port)
    }
}

impl FromStr for Announcement {
    type Err = AnnouncementError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || AnnouncementError {
            line: s.chars().take(80).collect(),
        };
        let mut words = s.split_ascii_whitespace();
        let (Some(ANNOUNCE_TAG), Some(host), Some(port), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(err());
        };
        let host_ok = host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        match port.parse::<u16>() {
            Ok(port) if port != 0 && host_ok => Ok(Announcement {
                host: host.to_string(),
                port,
            }),
            _ => Err(err()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_print_and_parse_back() {
        let a = Announcement {
            host: "node07.cluster".into(),
            port: 40123,
        };
        assert_eq!(a.to_string(), "nsperf-agent node07.cluster 40123");
        assert_eq!(a.to_string().parse::<Announcement>(), Ok(a.clone()));
        assert_eq!(a.addr(), "node07.cluster:40123");
        assert_eq!("  nsperf-agent node07.cluster 40123 \n".parse(), Ok(a));
        for bad in [
            "",
            "nsperf-agent",
            "nsperf-agent n1",
            "nsperf-agent n1 0",
            "nsperf-agent n1 65536",
            "nsperf-agent n1 80 extra",
            "nsperf-agent n;1 80",
            "agent n1 80",
        ] {
            assert!(bad.parse::<Announcement>().is_err(), "{bad:?}");
        }
        assert!(!Announcement::here(1).host.is_empty());
    }
}
