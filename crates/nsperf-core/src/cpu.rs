//! CPU use per core from `/proc/stat`, and of this process from `/proc/self/stat`.
//!
//! A [`CpuSampler`] keeps the previous reading; each [`CpuSampler::sample`] returns the share
//! of each core spent in user, system, softirq, irq, iowait and steal time since the previous
//! call. One saturated core (the NAS case: one core at 100 % while the others idle) shows in
//! `per_core`, where an average over cores would hide it.

use serde::{Deserialize, Serialize};

/// Jiffies counters of one CPU line of `/proc/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// user + nice
    pub user: u64,
    /// system
    pub system: u64,
    /// idle
    pub idle: u64,
    /// iowait
    pub iowait: u64,
    /// hardware interrupts
    pub irq: u64,
    /// software interrupts (network receive processing lands here)
    pub softirq: u64,
    /// time stolen by the hypervisor
    pub steal: u64,
}

impl CpuTimes {
    /// Every tick counted, idle included.
    pub fn total(&self) -> u64 {
        self.user + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal
    }

    /// The ticks not idle nor waiting for I/O (what [`CoreUsage::busy_pct`] counts).
    pub fn busy(&self) -> u64 {
        self.user + self.system + self.irq + self.softirq + self.steal
    }
}

/// Use of one core over a sampling interval, in percent of that core.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CoreUsage {
    /// Core number as the kernel numbers it (`cpuN`).
    pub core: u32,
    /// User and nice time, %.
    pub user_pct: f64,
    /// System time, %.
    pub sys_pct: f64,
    /// Software-interrupt time (network stack receive work), %.
    pub softirq_pct: f64,
    /// Hardware-interrupt time, %.
    pub irq_pct: f64,
    /// Idle waiting for I/O, %.
    pub iowait_pct: f64,
    /// Stolen by the hypervisor, %.
    pub steal_pct: f64,
    /// Everything but idle and iowait, %.
    pub busy_pct: f64,
}

/// Parses the `cpuN` lines of `/proc/stat` (not the aggregate `cpu` line).
pub fn parse_proc_stat(text: &str) -> Vec<(u32, CpuTimes)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let Some(name) = it.next() else { continue };
        let Some(num) = name.strip_prefix("cpu") else {
            continue;
        };
        let Ok(core) = num.parse::<u32>() else {
            continue;
        };
        let v: Vec<u64> = it.map(|x| x.parse().unwrap_or(0)).collect();
        let g = |i: usize| v.get(i).copied().unwrap_or(0);
        out.push((
            core,
            CpuTimes {
                user: g(0) + g(1),
                system: g(2),
                idle: g(3),
                iowait: g(4),
                irq: g(5),
                softirq: g(6),
                steal: g(7),
            },
        ));
    }
    out
}

/// Per-core usage between two readings of the same cores.
pub fn usage_between(prev: &[(u32, CpuTimes)], cur: &[(u32, CpuTimes)]) -> Vec<CoreUsage> {
    let mut out = Vec::with_capacity(cur.len());
    for &(core, c) in cur {
        let Some(&(_, p)) = prev.iter().find(|(k, _)| *k == core) else {
            continue;
        };
        let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
        let total = d(c.total(), p.total());
        if total <= 0.0 {
            out.push(CoreUsage {
                core,
                ..Default::default()
            });
            continue;
        }
        let pct = |x: f64| 100.0 * x / total;
        let user = pct(d(c.user, p.user));
        let sys = pct(d(c.system, p.system));
        let softirq = pct(d(c.softirq, p.softirq));
        let irq = pct(d(c.irq, p.irq));
        let steal = pct(d(c.steal, p.steal));
        out.push(CoreUsage {
            core,
            user_pct: user,
            sys_pct: sys,
            softirq_pct: softirq,
            irq_pct: irq,
            iowait_pct: pct(d(c.iowait, p.iowait)),
            steal_pct: steal,
            busy_pct: user + sys + softirq + irq + steal,
        });
    }
    out
}

/// Samples `/proc/stat` and reports per-core use since the previous sample.
#[derive(Debug, Default)]
pub struct CpuSampler {
    prev: Vec<(u32, CpuTimes)>,
    proc_prev: Option<ProcessTimes>,
}

/// CPU time used by this process, in clock ticks converted to seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessTimes {
    /// User-mode CPU seconds.
    pub user_s: f64,
    /// Kernel-mode CPU seconds.
    pub sys_s: f64,
}

/// One CPU sample: each core's use and this process's use, both since the previous sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSample {
    /// Each core's use.
    pub per_core: Vec<CoreUsage>,
    /// This process's CPU time over the interval, as % of one core (may exceed 100 with
    /// several threads).
    pub process_pct: f64,
}

impl CpuSample {
    /// The busiest core of this sample, if any.
    pub fn busiest(&self) -> Option<&CoreUsage> {
        self.per_core
            .iter()
            .max_by(|a, b| a.busy_pct.total_cmp(&b.busy_pct))
    }

    /// Mean busy % over all cores.
    pub fn mean_busy_pct(&self) -> f64 {
        if self.per_core.is_empty() {
            return 0.0;
        }
        self.per_core.iter().map(|c| c.busy_pct).sum::<f64>() / self.per_core.len() as f64
    }
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// Reads this process's user and system CPU time from `/proc/self/stat`.
pub fn process_times() -> Option<ProcessTimes> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; fields after the last ')' are fixed.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let tick = clock_ticks();
    Some(ProcessTimes {
        user_s: f.get(11)?.parse::<f64>().ok()? / tick,
        sys_s: f.get(12)?.parse::<f64>().ok()? / tick,
    })
}

/// The CPU time of every process in this process's network namespace (user and system, with
/// that of their children already reaped), ns: in a lab site, what its servers used, however
/// many processes they fork (smbd's one per client, ganesha's threads). A process that leaves
/// between two readings takes its time with it unless its parent reaped it. `None` when
/// `/proc` cannot be read.
pub fn net_namespace_cpu_ns() -> Option<u64> {
    let mine = std::fs::read_link("/proc/self/ns/net").ok()?;
    let tick = clock_ticks();
    let mut ticks = 0u64;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if std::fs::read_link(format!("/proc/{pid}/ns/net"))
            .ok()
            .as_ref()
            != Some(&mine)
        {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            ticks += stat_cpu_ticks(&text).unwrap_or(0);
        }
    }
    Some((ticks as f64 / tick * 1e9) as u64)
}

/// utime + stime + cutime + cstime of a `/proc/PID/stat` line, in clock ticks.
fn stat_cpu_ticks(text: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces; fields after the last ')' are fixed, from
    // field 3 (state): utime is field 14, stime 15, cutime 16, cstime 17.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    (11..15).map(|i| f.get(i)?.parse::<u64>().ok()).sum()
}

impl CpuSampler {
    /// A sampler primed with a first reading.
    pub fn new() -> Self {
        CpuSampler {
            prev: read_proc_stat(),
            proc_prev: process_times(),
        }
    }

    /// Use since the previous call (or since creation), over `elapsed_s` seconds of wall time
    /// (used for the process share).
    pub fn sample(&mut self, elapsed_s: f64) -> CpuSample {
        let cur = read_proc_stat();
        let per_core = usage_between(&self.prev, &cur);
        self.prev = cur;
        let now = process_times();
        let process_pct = match (self.proc_prev, now) {
            (Some(p), Some(n)) if elapsed_s > 0.0 => {
                100.0 * ((n.user_s - p.user_s) + (n.sys_s - p.sys_s)) / elapsed_s
            }
            _ => 0.0,
        };
        self.proc_prev = now;
        CpuSample {
            per_core,
            process_pct,
        }
    }
}

/// Each core's counters now (`/proc/stat`); empty when it cannot be read.
pub fn read_proc_stat() -> Vec<(u32, CpuTimes)> {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_proc_stat(&t))
        .unwrap_or_default()
}

/// A PM QoS request that keeps idle CPUs in shallow idle states for as long as it is held
/// (the kernel's `/dev/cpu_dma_latency` interface, Documentation/power/pm_qos_interface.rst;
/// cyclictest holds it the same way). Without it, each packet that finds its forwarder
/// thread asleep pays the CPU's idle-exit latency: measured on the 2-core VM, ping RTT
/// across an unimpaired lab 163-174 µs without, 99-100 µs with (docs/lab.md); `net --rr 1`
/// on loopback 16 k transactions/s at a p50 of 65 µs without, 66 k/s at 14 µs with.
pub struct CpuLatencyHold {
    _file: std::fs::File,
}

impl CpuLatencyHold {
    /// Requests a 0 µs latency bound; the request lasts until the value is dropped.
    pub fn acquire() -> std::io::Result<Self> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")?;
        std::io::Write::write_all(&mut file, &0i32.to_ne_bytes())?;
        Ok(CpuLatencyHold { _file: file })
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_stat_lines_cpu_is_its_own_and_its_reaped_childrens() {
        let line = "4242 (smbd: client (x)) S 1 4242 4242 0 -1 4194560 900 0 0 0 7 3 20 10 20 0 1 0 12345 0 0";
        assert_eq!(super::stat_cpu_ticks(line), Some(7 + 3 + 20 + 10));
        assert_eq!(super::stat_cpu_ticks("4242 (x) S 1"), None);
        let mine = super::net_namespace_cpu_ns().unwrap();
        // This process's own time is in it.
        let own = super::process_times().unwrap();
        assert!(mine as f64 >= (own.user_s + own.sys_s) * 1e9 - 1e7 * 2.0);
    }

    use super::*;

    const A: &str = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0 0 0\nintr 1\n";
    const B: &str =
        "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 95 0 5 40 0 0 10 0 0 0\ncpu1 6 0 6 138 0 0 0 0 0 0\n";

    #[test]
    fn parses_core_lines_only() {
        let v = parse_proc_stat(A);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].1.user, 5);
        assert_eq!(v[1].0, 1);
    }

    #[test]
    fn one_saturated_core_shows() {
        let u = usage_between(&parse_proc_stat(A), &parse_proc_stat(B));
        assert_eq!(u.len(), 2);
        // cpu0: +90 user, +10 softirq out of 100 ticks => 100 % busy
        assert!((u[0].busy_pct - 100.0).abs() < 1e-9);
        assert!((u[0].softirq_pct - 10.0).abs() < 1e-9);
        // cpu1: +1 user, +1 sys, +98 idle => 2 %
        assert!((u[1].busy_pct - 2.0).abs() < 1e-9);
        let s = CpuSample {
            per_core: u,
            process_pct: 0.0,
        };
        assert_eq!(s.busiest().unwrap().core, 0);
        assert!((s.mean_busy_pct() - 51.0).abs() < 1e-9);
    }

    #[test]
    fn live_sampler_reads_this_machine() {
        let mut s = CpuSampler::new();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let x = s.sample(0.03);
        assert!(!x.per_core.is_empty());
        assert!(process_times().is_some());
    }
}
