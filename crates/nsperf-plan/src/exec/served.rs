//! A file service's own count beside its clients' sum. The embedded NFS server prints what
//! it has served so far (`StepReport::ServiceCount`, every 100 ms) on the executor's line
//! channel; over the window the clients measured (every client's, for a step on many hosts)
//! the service's count, read between its samples, is set beside what the clients say they
//! moved — and a finding names a difference beyond [`COUNTS_AGREE_PCT`]: the check that
//! would have caught 370 MiB/s reported "through" a 114 MiB/s port.

use std::time::{Duration, Instant};

use nsperf_results::{HostPart, HostRole, Measurement, Metric};

use super::window::{Window, count_at};
use crate::step::{ServiceCount, StepReport};

/// Beyond this difference between the server's count and the clients' sum, a finding.
pub(super) const COUNTS_AGREE_PCT: f64 = 5.0;

/// How long to wait after a step for the service's first sample past its window.
const LAST_SAMPLE_WAIT: Duration = Duration::from_millis(600);

/// The samples of one service's count, in time order.
#[derive(Debug, Default)]
pub(super) struct ServiceCounts {
    samples: Vec<ServiceCount>,
}

impl ServiceCounts {
    /// Takes the samples among lines the service printed (other lines are not counts).
    pub(super) fn take(&mut self, lines: impl Iterator<Item = String>) {
        for line in lines {
            if let Ok(StepReport::ServiceCount(c)) = serde_json::from_str(&line)
                && self
                    .samples
                    .last()
                    .is_none_or(|l| l.at_unix_ns < c.at_unix_ns)
            {
                self.samples.push(c);
            }
        }
    }

    /// Forgets the samples before the last one taken (a step begins after it).
    pub(super) fn restart(&mut self) {
        let n = self.samples.len();
        if n > 1 {
            self.samples.drain(..n - 1);
        }
    }

    /// True once a sample at or after `t` is in.
    pub(super) fn reaches(&self, t: u64) -> bool {
        self.samples.last().is_some_and(|s| s.at_unix_ns >= t)
    }

    /// Takes samples from `next` until one at or after `t` is in, for at most
    /// [`LAST_SAMPLE_WAIT`].
    pub(super) fn take_until(&mut self, t: u64, mut next: impl FnMut() -> Option<String>) {
        let t0 = Instant::now();
        while !self.reaches(t) && t0.elapsed() < LAST_SAMPLE_WAIT {
            match next() {
                Some(line) => self.take(std::iter::once(line)),
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// What the service served within `w` (read and written data, calls), read between its
    /// samples, with the least and the most data it can have served there (the samples
    /// inside `w`, the samples around it); `None` when the samples do not cover `w`.
    pub(super) fn within(&self, w: Window) -> Option<Served> {
        // A server that keeps no count of its own has only its host's counters.
        if self.samples.iter().any(|c| c.uncounted) {
            return None;
        }
        let of = |f: fn(&ServiceCount) -> u64| -> Option<f64> {
            let s: Vec<(u64, u64)> = self.samples.iter().map(|c| (c.at_unix_ns, f(c))).collect();
            // Never below zero: the READ count leaves out what the sockets hold
            // unacknowledged, WRITE replies' headers too (a few hundred bytes).
            Some((count_at(&s, w.end_ns)? - count_at(&s, w.start_ns)?).max(0.0))
        };
        let s = &self.samples;
        let data = |c: &ServiceCount| (c.read_bytes + c.write_bytes) as f64;
        // The samples at or before the start and at or after the end enclose the window; the
        // first at or after the start and the last at or before the end lie within it.
        let enclosing_start = s
            .partition_point(|c| c.at_unix_ns <= w.start_ns)
            .checked_sub(1)?;
        let enclosing_end = s.get(s.partition_point(|c| c.at_unix_ns < w.end_ns))?;
        let inner_start = s.partition_point(|c| c.at_unix_ns < w.start_ns);
        let inner_end = s
            .partition_point(|c| c.at_unix_ns <= w.end_ns)
            .checked_sub(1);
        let bytes_min = match inner_end {
            Some(j) if j > inner_start => (data(&s[j]) - data(&s[inner_start])).max(0.0),
            _ => 0.0,
        };
        Some(Served {
            read_bytes: of(|c| c.read_bytes)?,
            write_bytes: of(|c| c.write_bytes)?,
            calls: of(|c| c.calls)?,
            bytes_min,
            bytes_max: data(enclosing_end) - data(&s[enclosing_start]),
        })
    }
}

impl ServiceCounts {
    /// The server host's use over `w`, read between the samples: the service's CPU time,
    /// its interfaces' bytes, each core's busy share (of any server, counting or not); `None` when the samples do not cover
    /// `w` or carry no host counters (an older nsperf's).
    pub(super) fn host_within(&self, w: Window) -> Option<HostUse> {
        let over = |f: &dyn Fn(&ServiceCount) -> Option<u64>| -> Option<f64> {
            let s: Vec<(u64, u64)> = self
                .samples
                .iter()
                .filter_map(|c| Some((c.at_unix_ns, f(c)?)))
                .collect();
            Some(count_at(&s, w.end_ns)? - count_at(&s, w.start_ns)?)
        };
        if self
            .samples
            .iter()
            .all(|c| c.cpu_ns == 0 && c.cores.is_empty())
        {
            return None;
        }
        let cores = self
            .samples
            .iter()
            .map(|c| c.cores.len())
            .min()
            .unwrap_or(0);
        let cores_busy_pct = (0..cores)
            .filter_map(|i| {
                let busy = over(&|c| c.cores.get(i).map(|t| t.busy))?;
                let total = over(&|c| c.cores.get(i).map(|t| t.total))?;
                (total > 0.0).then(|| (busy / total * 100.0).clamp(0.0, 100.0))
            })
            .collect();
        Some(HostUse {
            seconds: w.seconds(),
            cpu_s: over(&|c| Some(c.cpu_ns))? / 1e9,
            nic_rx_bytes: over(&|c| Some(c.nic_rx_bytes))?,
            nic_tx_bytes: over(&|c| Some(c.nic_tx_bytes))?,
            cores_busy_pct,
        })
    }
}

/// The server host's use over a window.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct HostUse {
    /// The window's length.
    pub(super) seconds: f64,
    /// The service process's CPU time.
    pub(super) cpu_s: f64,
    /// Bytes its interfaces received (loopback left out).
    pub(super) nic_rx_bytes: f64,
    /// Bytes they sent.
    pub(super) nic_tx_bytes: f64,
    /// Each core's busy share, %.
    pub(super) cores_busy_pct: Vec<f64>,
}

/// Beyond this mean busy share of every core of the server's host, a finding: the machine
/// may set the pace, not the port or the protocol.
const HOST_BUSY_PCT: f64 = 85.0;

/// Sets the server host's use over the clients' window beside them: `server.cpu_s`,
/// `server.cpu_pct` (of one core), `server.nic_rx_bytes`/`nic_tx_bytes` and their rates,
/// each core's busy share (on the server's part, `core{N}_busy_pct`; on the run, the mean
/// and the busiest), and a `server_host_busy` finding when every core was nearly busy.
pub(super) fn host_use(m: &mut Measurement, h: &HostUse) {
    let s = h.seconds.max(1e-9);
    let mean = (!h.cores_busy_pct.is_empty())
        .then(|| h.cores_busy_pct.iter().sum::<f64>() / h.cores_busy_pct.len() as f64);
    let max = h.cores_busy_pct.iter().copied().reduce(f64::max);
    let mut figures = vec![
        ("cpu_s", h.cpu_s),
        ("cpu_pct", h.cpu_s / s * 100.0),
        ("nic_rx_bytes", h.nic_rx_bytes),
        ("nic_tx_bytes", h.nic_tx_bytes),
        ("nic_rx_bytes_per_s", h.nic_rx_bytes / s),
        ("nic_tx_bytes_per_s", h.nic_tx_bytes / s),
    ];
    figures.extend(mean.map(|v| ("cores_mean_busy_pct", v)));
    figures.extend(max.map(|v| ("cores_max_busy_pct", v)));
    let part = m
        .hosts
        .iter_mut()
        .rev()
        .find(|p| p.role == HostRole::Server);
    if let Some(part) = part {
        for &(k, v) in &figures {
            part.metrics.insert(k.into(), v);
        }
        for (i, v) in h.cores_busy_pct.iter().enumerate() {
            part.metrics
                .insert(Metric::new(format!("core{i}_busy_pct")), *v);
        }
    }
    for (k, v) in figures {
        m.metrics.insert(Metric::new(format!("server.{k}")), v);
    }
    if let (Some(mean), Some(max)) = (mean, max)
        && mean >= HOST_BUSY_PCT
    {
        m.findings.push(
            nsperf_core::Finding::new(
                "server_host_busy",
                nsperf_core::report::Severity::Warning,
                format!(
                    "the server's host had its {} cores {mean:.0} % busy on average over the {s:.2} s window (the busiest {max:.0} %; the service itself used {:.0} % of one core): the machine may set the pace, not the port nor the protocol — in a lab on one machine the clients' sites share these cores",
                    h.cores_busy_pct.len(),
                    h.cpu_s / s * 100.0,
                ),
            )
            .with("cores_mean_busy_pct", mean)
            .with("cores_max_busy_pct", max)
            .with("server_cpu_pct", h.cpu_s / s * 100.0),
        );
    }
}

/// What a service served over a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Served {
    pub(super) read_bytes: f64,
    pub(super) write_bytes: f64,
    pub(super) calls: f64,
    /// The least data it can have served within the window: between its samples inside it.
    pub(super) bytes_min: f64,
    /// The most: between its samples around it.
    pub(super) bytes_max: f64,
}

/// The window the clients of `m` measured in, on the coordinator's clock: the window
/// common to every host's pass (a step on many hosts), or the one engine's pass.
pub(super) fn clients_window(m: &Measurement) -> Option<Window> {
    if !m.hosts.is_empty() {
        return Window::of(m);
    }
    let start_ns = m.started_unix_ns?;
    let end_s = m
        .series
        .iter()
        .map(|p| p.start_s + p.length_s)
        .fold(0.0, f64::max);
    let end_ns = start_ns + (end_s * 1e9) as u64;
    (end_ns > start_ns).then_some(Window { start_ns, end_ns })
}

/// Sets the service's count over the clients' window `w` beside the clients' sum: a part
/// of role `server` (named `service`), `server.*` and `clients.bytes` metrics,
/// `server_vs_clients_pct`, and a finding when they differ by more than
/// [`COUNTS_AGREE_PCT`]. Only for a step whose headline is data per second.
pub(super) fn beside_clients(m: &mut Measurement, service: &str, w: Window, served: Served) {
    if m.metric != Metric::THROUGHPUT_BYTES_PER_S {
        return;
    }
    let seconds = w.seconds();
    let clients = if m.hosts.is_empty() {
        m.payload_bytes.unwrap_or(0) as f64
    } else {
        m.value * seconds
    };
    let bytes = served.read_bytes + served.write_bytes;
    let mut part = HostPart {
        host: service.to_string(),
        role: HostRole::Server,
        metric: m.metric.clone(),
        value: bytes / seconds,
        payload_bytes: Some(bytes.round() as u64),
        started_unix_ns: w.start_ns,
        ..HostPart::default()
    };
    for (k, v) in [
        ("bytes", bytes),
        ("read_bytes", served.read_bytes),
        ("write_bytes", served.write_bytes),
        ("calls", served.calls),
        ("bytes_min", served.bytes_min),
        ("bytes_max", served.bytes_max),
        ("window_s", seconds),
    ] {
        part.metrics.insert(k.into(), v);
        m.metrics.insert(Metric::new(format!("server.{k}")), v);
    }
    m.metrics.insert("clients.bytes".into(), clients);
    m.hosts.push(part);
    if clients <= 0.0 {
        return;
    }
    let agree = COUNTS_AGREE_PCT / 100.0;
    let spread = (served.bytes_max - served.bytes_min) / clients;
    let pct = (bytes - clients) / clients * 100.0;
    if spread <= 0.5 {
        // Read between samples, the count is an estimate within the spread; beyond half the
        // clients' sum it says nothing (a window of a few samples).
        m.metrics.insert(Metric::SERVER_VS_CLIENTS_PCT, pct);
    }
    let certain =
        clients < served.bytes_min * (1.0 - agree) || clients > served.bytes_max * (1.0 + agree);
    if certain || spread <= 2.0 * agree {
        m.findings
            .extend(counts_differ(pct, bytes, clients, Some(seconds)));
    } else {
        // Within what the server can have served, but its samples are too far apart for
        // this window to check the clients within the tolerance.
        m.findings.push(coarse(served, clients, seconds));
    }
}

/// The finding when the server's samples are too far apart for the clients' window to
/// check their sum within [`COUNTS_AGREE_PCT`] (the clients' sum is within what the server
/// can have served there).
fn coarse(served: Served, clients: f64, seconds: f64) -> nsperf_core::Finding {
    let b = |x: f64| nsperf_core::Bytes(x.max(0.0).round() as u64).to_string();
    nsperf_core::Finding::new(
        "server_count_coarse",
        nsperf_core::report::Severity::Info,
        format!(
            "the server's count is sampled every {} ms, too seldom for this {seconds:.3} s window: it served between {} and {} there, which holds the clients' {} but cannot check it within {COUNTS_AGREE_PCT} % (a longer step can)",
            crate::step::SERVICE_COUNT_EVERY.as_millis(),
            b(served.bytes_min),
            b(served.bytes_max),
            b(clients),
        ),
    )
    .with("server_bytes_min", served.bytes_min)
    .with("server_bytes_max", served.bytes_max)
    .with("clients_bytes", clients)
}

/// The finding when the server's own count and the clients' sum differ by more than
/// [`COUNTS_AGREE_PCT`] (`seconds`: the window both are counted over; `None`: each side's
/// whole test).
pub(super) fn counts_differ(
    pct: f64,
    server: f64,
    clients: f64,
    seconds: Option<f64>,
) -> Option<nsperf_core::Finding> {
    if pct.abs() <= COUNTS_AGREE_PCT {
        return None;
    }
    let b = |x: f64| nsperf_core::Bytes(x.max(0.0).round() as u64).to_string();
    let over = match seconds {
        Some(s) => format!("over the same {s:.2} s"),
        None => "over their whole tests".to_string(),
    };
    Some(
        nsperf_core::Finding::new(
            "server_count_differs",
            nsperf_core::report::Severity::Warning,
            format!(
                "the server counted {} where its clients say they moved {} {over} ({pct:+.1} %, more than {COUNTS_AGREE_PCT} %): one side's figures are wrong — clients measured over windows that do not coincide, or traffic the clients did not count",
                b(server),
                b(clients),
            ),
        )
        .with("server_vs_clients_pct", pct)
        .with("server_bytes", server)
        .with("clients_bytes", clients),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(at: u64, read: u64, write: u64) -> String {
        serde_json::to_string(&StepReport::ServiceCount(ServiceCount {
            at_unix_ns: at,
            read_bytes: read,
            write_bytes: write,
            calls: at / 10,
            ..ServiceCount::default()
        }))
        .unwrap()
    }

    #[test]
    fn the_hosts_use_over_a_window_and_a_finding_when_its_cores_are_busy() {
        use crate::step::CoreTicks;
        let sample = |at: u64, cpu_ns: u64, rx: u64, busy: [u64; 2], total: u64| {
            serde_json::to_string(&StepReport::ServiceCount(ServiceCount {
                at_unix_ns: at,
                cpu_ns,
                nic_rx_bytes: rx,
                nic_tx_bytes: rx / 10,
                cores: busy.iter().map(|&b| CoreTicks { busy: b, total }).collect(),
                ..ServiceCount::default()
            }))
            .unwrap()
        };
        let mut c = ServiceCounts::default();
        // 1 s apart: the service took 0.6 s of CPU, 100 MB arrived, core 0 95 % busy, core 1 90 %.
        c.take(
            [
                sample(0, 0, 0, [0, 0], 0),
                sample(1_000_000_000, 600_000_000, 100_000_000, [95, 90], 100),
            ]
            .into_iter(),
        );
        let w = Window {
            start_ns: 0,
            end_ns: 1_000_000_000,
        };
        let h = c.host_within(w).unwrap();
        assert_eq!(h.cores_busy_pct, vec![95.0, 90.0]);
        let mut m = Measurement {
            hosts: vec![HostPart {
                host: "nas".into(),
                role: HostRole::Server,
                ..HostPart::default()
            }],
            ..Measurement::default()
        };
        host_use(&mut m, &h);
        assert_eq!(m.metrics["server.cpu_pct"], 60.0);
        assert_eq!(m.metrics["server.nic_rx_bytes_per_s"], 1e8);
        assert_eq!(m.metrics["server.nic_tx_bytes"], 1e7);
        assert_eq!(m.metrics["server.cores_mean_busy_pct"], 92.5);
        assert_eq!(m.hosts[0].metrics["core1_busy_pct"], 90.0);
        assert_eq!(m.findings[0].id, "server_host_busy");
        // Half as busy: no finding. No host counters (an older service): nothing.
        let mut c2 = ServiceCounts::default();
        c2.take(
            [
                sample(0, 0, 0, [0, 0], 0),
                sample(1_000_000_000, 1, 1, [50, 40], 100),
            ]
            .into_iter(),
        );
        let mut m2 = Measurement::default();
        host_use(&mut m2, &c2.host_within(w).unwrap());
        assert!(m2.findings.is_empty() && m2.metrics["server.cores_max_busy_pct"] == 50.0);
        let mut c3 = ServiceCounts::default();
        c3.take([line(0, 0, 0), line(1_000_000_000, 5, 5)].into_iter());
        assert_eq!(c3.host_within(w), None);
    }

    #[test]
    fn a_server_without_a_count_has_its_hosts_use_and_no_count() {
        let sample = |at: u64, cpu_ns: u64, rx: u64| {
            serde_json::to_string(&StepReport::ServiceCount(ServiceCount {
                at_unix_ns: at,
                uncounted: true,
                cpu_ns,
                nic_rx_bytes: rx,
                ..ServiceCount::default()
            }))
            .unwrap()
        };
        let mut c = ServiceCounts::default();
        c.take(
            [
                sample(0, 0, 0),
                sample(2_000_000_000, 500_000_000, 50_000_000),
            ]
            .into_iter(),
        );
        let w = Window {
            start_ns: 0,
            end_ns: 2_000_000_000,
        };
        assert_eq!(c.within(w), None, "no count to set beside the clients");
        let h = c.host_within(w).unwrap();
        assert_eq!(h.cpu_s, 0.5);
        assert_eq!(h.nic_rx_bytes, 5e7);
        // The flag crosses the pipe; a counting server's lines leave it out.
        assert!(sample(0, 0, 0).contains("\"uncounted\":true"));
        assert!(!line(0, 0, 0).contains("uncounted"));
    }

    #[test]
    fn the_count_over_a_window_is_read_between_samples() {
        let mut c = ServiceCounts::default();
        c.take(
            [
                line(100, 0, 0),
                "not a count".to_string(),
                line(200, 0, 1000),
                line(300, 500, 2000),
                line(250, 0, 0), // out of order: ignored
            ]
            .into_iter(),
        );
        assert!(c.reaches(300) && !c.reaches(301));
        let s = c
            .within(Window {
                start_ns: 150,
                end_ns: 250,
            })
            .unwrap();
        assert_eq!(s.write_bytes, 1000.0);
        assert_eq!(s.read_bytes, 250.0);
        // Within 150..250 lies the sample at 200 only: nothing certain; around it 100 and 300.
        assert_eq!((s.bytes_min, s.bytes_max), (0.0, 2500.0));
        let s = c
            .within(Window {
                start_ns: 100,
                end_ns: 290,
            })
            .unwrap();
        assert_eq!((s.bytes_min, s.bytes_max), (1000.0, 2500.0));
        assert_eq!(
            c.within(Window {
                start_ns: 150,
                end_ns: 350
            }),
            None,
            "past the last sample"
        );
        c.restart();
        assert_eq!(c.samples.len(), 1);
    }

    #[test]
    fn the_servers_count_beside_the_clients_and_a_finding_past_five_percent() {
        let w = Window {
            start_ns: 1_000_000_000,
            end_ns: 3_000_000_000,
        };
        let mut m = Measurement {
            metric: Metric::THROUGHPUT_BYTES_PER_S,
            value: 1000.0,
            hosts: vec![HostPart {
                host: "c1".into(),
                ..HostPart::default()
            }],
            ..Measurement::default()
        };
        let served = Served {
            read_bytes: 0.0,
            write_bytes: 2040.0,
            calls: 40.0,
            bytes_min: 2000.0,
            bytes_max: 2080.0,
        };
        beside_clients(&mut m, "nas", w, served);
        assert_eq!(m.metrics["clients.bytes"], 2000.0);
        assert_eq!(m.metrics["server.bytes"], 2040.0);
        assert!((m.metrics["server_vs_clients_pct"] - 2.0).abs() < 1e-9);
        assert!(m.findings.is_empty());
        let s = m.hosts.last().unwrap();
        assert_eq!((s.role.as_str(), s.host.as_str()), ("server", "nas"));
        assert_eq!(s.value, 1020.0);
        // The clients' sum well above what the server served: the 370-through-114 case.
        let mut m = Measurement {
            metric: Metric::THROUGHPUT_BYTES_PER_S,
            value: 3700.0,
            hosts: m.hosts.clone(),
            ..Measurement::default()
        };
        let served = Served {
            read_bytes: 2280.0,
            write_bytes: 0.0,
            calls: 10.0,
            bytes_min: 2200.0,
            bytes_max: 2360.0,
        };
        beside_clients(&mut m, "nas", w, served);
        let f = &m.findings[0];
        assert_eq!(f.id, "server_count_differs");
        assert!(f.message.contains("-69.2 %"), "{}", f.message);
    }

    #[test]
    fn a_window_shorter_than_the_samples_cannot_check_the_clients() {
        // Two clients wrote 4 MiB in 3 ms between two of the server's samples 100 ms apart
        // (a short step in CI): read between the samples, the server "served" 110 KB there.
        let w = Window {
            start_ns: 1_000_000_000,
            end_ns: 1_003_000_000,
        };
        let mut m = Measurement {
            metric: Metric::THROUGHPUT_BYTES_PER_S,
            value: 4_194_304.0 / 0.003,
            hosts: vec![HostPart {
                host: "c1".into(),
                ..HostPart::default()
            }],
            ..Measurement::default()
        };
        let served = Served {
            read_bytes: 0.0,
            write_bytes: 110_000.0,
            calls: 2.0,
            bytes_min: 0.0,
            bytes_max: 4_194_304.0,
        };
        beside_clients(&mut m, "nas", w, served);
        assert!(!m.metrics.contains_key(&Metric::SERVER_VS_CLIENTS_PCT));
        let ids: Vec<&str> = m.findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["server_count_coarse"], "{:?}", m.findings);
        assert_eq!(m.metrics["server.bytes_max"], 4_194_304.0);
        // More than the server can have served even around the window: wrong either way.
        let mut m2 = Measurement {
            value: 2.0 * 4_194_304.0 / 0.003,
            ..m.clone()
        };
        m2.findings.clear();
        m2.hosts.truncate(1);
        beside_clients(&mut m2, "nas", w, served);
        let ids: Vec<&str> = m2.findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["server_count_differs"]);
        // A window of a dozen samples: the estimate is kept, but 8 % off within a 30 %
        // spread is no evidence of a wrong side.
        let mut m3 = Measurement {
            value: 1000.0 / 0.003,
            ..m.clone()
        };
        m3.findings.clear();
        m3.hosts.truncate(1);
        let served = Served {
            read_bytes: 0.0,
            write_bytes: 1080.0,
            calls: 2.0,
            bytes_min: 850.0,
            bytes_max: 1150.0,
        };
        beside_clients(&mut m3, "nas", w, served);
        assert!((m3.metrics["server_vs_clients_pct"] - 8.0).abs() < 1e-6);
        let ids: Vec<&str> = m3.findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["server_count_coarse"]);
    }

    #[test]
    fn the_clients_window_of_one_engine_is_its_pass() {
        let m = Measurement {
            started_unix_ns: Some(5_000_000_000),
            series: vec![nsperf_results::SeriesPoint {
                start_s: 0.0,
                length_s: 1.5,
                value: 1.0,
            }],
            ..Measurement::default()
        };
        assert_eq!(
            clients_window(&m),
            Some(Window {
                start_ns: 5_000_000_000,
                end_ns: 6_500_000_000
            })
        );
    }
}
