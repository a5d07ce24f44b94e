//! Facts about the host a measurement ran on: kernel, CPU, memory, interfaces and the TCP
//! sysctls that decide throughput (buffer limits, congestion control, SACK, window scaling,
//! timestamps). Read from `/proc` and `/sys` of the current network namespace; a fact that
//! cannot be read is left empty rather than guessed.

use std::fs;

use serde::{Deserialize, Serialize};

/// The TCP settings of the current network namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpSysctls {
    /// `net.ipv4.tcp_rmem`: min, default, max receive buffer in bytes.
    pub rmem_bytes: Vec<u64>,
    /// `net.ipv4.tcp_wmem`: min, default, max send buffer in bytes.
    pub wmem_bytes: Vec<u64>,
    /// `net.core.rmem_max`: the cap on SO_RCVBUF a process may ask for.
    pub rmem_max_bytes: Option<u64>,
    /// `net.core.wmem_max`: the cap on SO_SNDBUF a process may ask for.
    pub wmem_max_bytes: Option<u64>,
    /// `net.ipv4.tcp_congestion_control`.
    pub congestion_control: Option<String>,
    /// `net.ipv4.tcp_available_congestion_control`.
    pub available_congestion_control: Vec<String>,
    /// `net.ipv4.tcp_sack`.
    pub sack: Option<bool>,
    /// `net.ipv4.tcp_window_scaling`.
    pub window_scaling: Option<bool>,
    /// `net.ipv4.tcp_timestamps` (1 and 2 both mean on).
    pub timestamps: Option<bool>,
}

/// One network interface.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interface {
    /// Name, e.g. `eth0`.
    pub name: String,
    /// MTU in bytes.
    pub mtu: Option<u32>,
    /// Link speed in Mbit/s where the driver reports it.
    pub speed_mbps: Option<u64>,
}

/// Facts of one host, recorded with every result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    /// Host name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Machine architecture (`uname -m`).
    pub arch: String,
    /// CPU model name.
    pub cpu_model: Option<String>,
    /// Number of online CPUs.
    pub cpus: u32,
    /// Total memory in bytes.
    pub mem_total_bytes: Option<u64>,
    /// Available memory in bytes at the time of reading.
    pub mem_available_bytes: Option<u64>,
    /// TCP settings.
    pub tcp: TcpSysctls,
    /// Network interfaces (loopback included).
    pub interfaces: Vec<Interface>,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`): equal on two ends when they
    /// run on one host (network namespaces share it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_u64(path: &str) -> Option<u64> {
    read_trim(path)?.parse().ok()
}

fn read_bool(path: &str) -> Option<bool> {
    Some(read_u64(path)? != 0)
}

fn read_list(path: &str) -> Vec<String> {
    read_trim(path)
        .map(|s| s.split_ascii_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn uname() -> (String, String, String) {
    // SAFETY: utsname is plain old data; uname fills it and NUL-terminates each field.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return Default::default();
        }
        let s = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        (s(&u.nodename), s(&u.release), s(&u.machine))
    }
}

/// Parses a `/proc/meminfo` field in kB into bytes.
pub fn meminfo_bytes(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        let kb: u64 = rest.split_ascii_whitespace().next()?.parse().ok()?;
        Some(kb * 1024)
    })
}

impl TcpSysctls {
    /// Reads the TCP sysctls of the current network namespace.
    pub fn read() -> Self {
        let nums = |p: &str| {
            read_trim(p)
                .map(|s| {
                    s.split_ascii_whitespace()
                        .filter_map(|x| x.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        TcpSysctls {
            rmem_bytes: nums("/proc/sys/net/ipv4/tcp_rmem"),
            wmem_bytes: nums("/proc/sys/net/ipv4/tcp_wmem"),
            rmem_max_bytes: read_u64("/proc/sys/net/core/rmem_max"),
            wmem_max_bytes: read_u64("/proc/sys/net/core/wmem_max"),
            congestion_control: read_trim("/proc/sys/net/ipv4/tcp_congestion_control"),
            available_congestion_control: read_list(
                "/proc/sys/net/ipv4/tcp_available_congestion_control",
            ),
            sack: read_bool("/proc/sys/net/ipv4/tcp_sack"),
            window_scaling: read_bool("/proc/sys/net/ipv4/tcp_window_scaling"),
            timestamps: read_bool("/proc/sys/net/ipv4/tcp_timestamps"),
        }
    }
}

/// Lists the interfaces of the current network namespace with MTU and speed.
pub fn interfaces() -> Vec<Interface> {
    let Ok(dir) = fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut v: Vec<Interface> = dir
        .filter_map(|e| e.ok())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let base = format!("/sys/class/net/{name}");
            Interface {
                mtu: read_u64(&format!("{base}/mtu")).map(|m| m as u32),
                // `speed` reads -1 or fails (EINVAL) on virtual links: leave it empty.
                speed_mbps: read_trim(&format!("{base}/speed"))
                    .and_then(|s| s.parse::<i64>().ok())
                    .filter(|&s| s > 0)
                    .map(|s| s as u64),
                name,
            }
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

impl HostFacts {
    /// Reads the facts of this host (current network namespace).
    pub fn collect() -> Self {
        let (hostname, kernel, arch) = uname();
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let cpu_model = fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        HostFacts {
            hostname,
            kernel,
            arch,
            cpu_model,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
            mem_total_bytes: meminfo_bytes(&meminfo, "MemTotal"),
            mem_available_bytes: meminfo_bytes(&meminfo, "MemAvailable"),
            tcp: TcpSysctls::read(),
            interfaces: interfaces(),
            boot_id: read_trim("/proc/sys/kernel/random/boot_id").filter(|s| !s.is_empty()),
        }
    }

    /// True when both facts come from one running kernel (same boot id).
    pub fn same_host(&self, other: &HostFacts) -> bool {
        self.boot_id.is_some() && self.boot_id == other.boot_id
    }

    /// The MTU of a named interface, if known.
    pub fn mtu_of(&self, name: &str) -> Option<u32> {
        self.interfaces
            .iter()
            .find(|i| i.name == name)
            .and_then(|i| i.mtu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_parsing() {
        let t = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable: 2048 kB\n";
        assert_eq!(meminfo_bytes(t, "MemTotal"), Some(24576000 * 1024));
        assert_eq!(meminfo_bytes(t, "MemAvailable"), Some(2048 * 1024));
        assert_eq!(meminfo_bytes(t, "Mem"), None);
    }

    #[test]
    fn collects_this_host() {
        let h = HostFacts::collect();
        assert!(!h.kernel.is_empty());
        assert!(h.cpus >= 1);
        assert!(h.mem_total_bytes.unwrap_or(0) > 0);
        assert!(h.interfaces.iter().any(|i| i.name == "lo"));
        assert_eq!(h.tcp.rmem_bytes.len(), 3);
    }
}
