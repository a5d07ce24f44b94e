//! A lab's shared port beside the hosts that went through it at once: its TCP payload rate
//! (what its rate carries of data once every packet's headers and framing are paid), how
//! much of it the hosts' aggregate used, each host's share of it, and a finding when the
//! aggregate claims more than the port can carry — a figure that cannot be right.

use nsperf_core::Finding;
use nsperf_core::report::Severity;
use nsperf_results::{HostRole, Measurement, Metric};

/// Bytes of IPv4 and TCP headers in every full segment (TCP timestamps on: Linux's
/// default), besides the MSS.
const TCP_IP_HEADERS: u32 = 20 + 32;

/// How far above the port's payload rate an aggregate may be read before it is called
/// impossible: the hosts' intervals place each request's bytes evenly over the time it was
/// moving (the io engine's interval accounting), so an aggregate of a saturated port sits at
/// its rate within a few tenths of a percent either way (8 clients at a 200 Mbit/s port:
/// 99.9 % to 100.1 % over 4–5 s).
const RESOLUTION: f64 = 0.01;

/// The TCP payload a link of `rate_bps` (counting each IP packet plus its framing, as the
/// lab's links do) carries with `mtu`-byte packets, bit/s: full segments of `mtu - 52`
/// payload bytes in `mtu + 14` bytes on the link. 191.3 Mbit/s of a 200 Mbit/s port at MTU
/// 1500. A protocol on top (NFS's RPC headers) carries less still.
pub fn tcp_payload_bps(rate_bps: f64, mtu: u32) -> f64 {
    let frame = f64::from(mtu) + nsperf_lab::config::FRAME_OVERHEAD_BYTES as f64;
    rate_bps * f64::from(mtu.saturating_sub(TCP_IP_HEADERS)) / frame
}

/// The shared port's figures for a step run on many lab sites at once whose traffic goes
/// one way (an io workload that reads or writes, a network test up or down), in a lab
/// whose port has a rate (`link`, the cell's).
pub(crate) fn shared_port(
    m: &mut Measurement,
    step: &crate::plan::ResolvedStep,
    link: Option<&crate::plan::LinkSettings>,
) {
    let one_way = match &step.action {
        crate::plan::Action::Io(io) => io.config.workload.reads() != io.config.workload.writes(),
        crate::plan::Action::Net(n) => n.params.direction != nsperf_net::Direction::Both,
        crate::plan::Action::Exec(_)
        | crate::plan::Action::Bonnie(_)
        | crate::plan::Action::Replay(_) => false,
    };
    let on_sites = step.on.as_ref().is_some_and(|o| o.in_lab);
    if let (true, true, Some(l)) = (one_way, on_sites, link)
        && let Some(rate) = crate::plan::link_rate_bps(l)
    {
        port_figures(m, rate, l.mtu());
    }
}

/// Sets the shared port's figures on a step's aggregate over many hosts (their traffic one
/// way through a port of `rate_bps` at `mtu`): `port.rate_bps`, `port.payload_ceiling` (in
/// the headline's unit), `port.payload_pct` (the aggregate's share of it), each host's
/// `port_share_pct`, and a finding — how busy the port was, or that the aggregate is above
/// what it can carry. Only for a data rate headline (bit/s or bytes/s).
pub(crate) fn port_figures(m: &mut Measurement, rate_bps: f64, mtu: u32) {
    let Some(bits) = m.metric.bits_per_unit() else {
        return;
    };
    let per_bit = 1.0 / bits;
    let clients: Vec<usize> = (0..m.hosts.len())
        .filter(|&i| m.hosts[i].role != HostRole::Server && m.hosts[i].error.is_none())
        .collect();
    if clients.is_empty() || rate_bps <= 0.0 {
        return;
    }
    let ceiling = tcp_payload_bps(rate_bps, mtu) * per_bit;
    let pct = m.value / ceiling * 100.0;
    m.metrics.insert(Metric::PORT_RATE_BPS, rate_bps);
    m.metrics.insert(Metric::PORT_PAYLOAD_CEILING, ceiling);
    m.metrics.insert(Metric::PORT_PAYLOAD_PCT, pct);
    for &i in &clients {
        let h = &mut m.hosts[i];
        let rate = h
            .metrics
            .get(&Metric::WINDOW_RATE)
            .copied()
            .unwrap_or(h.value);
        h.metrics
            .insert("port_share_pct".into(), rate / ceiling * 100.0);
    }
    let fmt = |v: f64| m.metric.format(v);
    let port = nsperf_core::BitRate(rate_bps);
    let n = clients.len();
    let f = if m.value > ceiling * (1.0 + RESOLUTION) {
        Finding::new(
            "above_port_rate",
            Severity::Warning,
            format!(
                "the {n} hosts' aggregate, {}, is above the {} of TCP payload the shared {port} port carries at MTU {mtu} ({pct:.1} %): no figure through this port can be right above it — the hosts' windows or clocks do not agree",
                fmt(m.value),
                fmt(ceiling),
            ),
        )
    } else {
        Finding::new(
            "port_utilisation",
            Severity::Info,
            format!(
                "the {n} hosts together used {pct:.1} % of the shared {port} port's TCP payload rate ({} of {} at MTU {mtu})",
                fmt(m.value),
                fmt(ceiling),
            ),
        )
    };
    m.findings.push(
        f.with("payload_pct", pct)
            .with("payload_ceiling", ceiling)
            .with("rate_bps", rate_bps),
    );
    if pct >= PORT_FULL_PCT {
        port_set_the_pace(m, pct);
    }
    peak_above_port(m, ceiling);
}

/// Beyond this share above the port's payload rate, an aggregate interval is finer than what
/// the hosts' intervals can tell.
const PEAK_RESOLUTION: f64 = 0.03;

/// A note when the aggregate's peak interval is above what the port can carry: the hosts'
/// intervals place each request's bytes evenly between their job's completions, and a
/// server that answers in bursts (nfs-ganesha's writes at 50 ms: 129 MB/s in one second
/// through a port of 119.55) bunches completions, so one interval gets more than crossed in
/// it. Said beside the figure rather than left to contradict the port.
fn peak_above_port(m: &mut Measurement, ceiling: f64) {
    let Some(&peak) = m.metrics.get(&Metric::PEAK_INTERVAL) else {
        return;
    };
    if peak <= ceiling * (1.0 + PEAK_RESOLUTION) {
        return;
    }
    let fmt = |v: f64| m.metric.format(v);
    let f = Finding::new(
        "peak_above_port",
        Severity::Info,
        format!(
            "the aggregate's peak interval, {}, is {:.1} % above the {} the port can carry: the hosts' intervals spread each request's bytes between their completions, and completions that came in bursts put more in one interval than crossed in it — the sustained mean ({}) is the figure to read",
            fmt(peak),
            (peak / ceiling - 1.0) * 100.0,
            fmt(ceiling),
            m.metrics
                .get(&Metric::SUSTAINED_MEAN)
                .map(|&v| fmt(v))
                .unwrap_or_else(|| "not known".into()),
        ),
    )
    .with("peak_interval", peak)
    .with("payload_ceiling", ceiling);
    m.findings.push(f);
}

/// At or beyond this share of its payload rate, the port set the pace.
const PORT_FULL_PCT: f64 = 95.0;

/// Busy cores beside a full port are not the limit: the warnings that the machines may set
/// the pace (`hosts_cpu_busy`, `server_host_busy`) become notes that say the port did, so no
/// finding contradicts the port's figure beside it (8 client sites through a 10 Gbit/s lab
/// port: 99.8 % of its payload rate, with the clients' busiest core 94 % busy).
fn port_set_the_pace(m: &mut Measurement, pct: f64) {
    for f in m
        .findings
        .iter_mut()
        .filter(|f| matches!(f.id.as_str(), "hosts_cpu_busy" | "server_host_busy"))
    {
        f.severity = Severity::Info;
        f.message = format!(
            "{} — yet the shared port carried {pct:.1} % of its payload rate: the port set the pace, with the cores busy beside it",
            f.message
        );
        f.evidence.insert("port_payload_pct".into(), pct);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsperf_results::HostPart;

    #[test]
    fn a_200_mbit_port_carries_191_mbit_of_tcp_payload() {
        let p = tcp_payload_bps(200e6, 1500);
        assert!((p - 200e6 * 1448.0 / 1514.0).abs() < 1e-3);
        assert!((p / 1e6 - 191.28).abs() < 0.01, "{p}");
        assert!((tcp_payload_bps(1e9, 9000) / 1e9 - 8948.0 / 9014.0).abs() < 1e-12);
    }

    fn with_hosts(metric: &str, value: f64, rates: &[f64]) -> Measurement {
        Measurement {
            metric: metric.into(),
            value,
            hosts: rates
                .iter()
                .enumerate()
                .map(|(i, &r)| {
                    let mut h = HostPart {
                        host: format!("c{}", i + 1),
                        role: HostRole::Client,
                        value: r * 2.0,
                        ..HostPart::default()
                    };
                    h.metrics.insert(Metric::WINDOW_RATE, r);
                    h
                })
                .chain(std::iter::once(HostPart {
                    host: "srv".into(),
                    role: HostRole::Server,
                    ..HostPart::default()
                }))
                .collect(),
            ..Measurement::default()
        }
    }

    #[test]
    fn the_ports_share_and_a_finding_above_its_payload_rate() {
        // 194 Mbit/s through a 200 Mbit/s port: above its 191.3 of payload.
        let mut m = with_hosts("throughput_bps", 194e6, &[100e6, 94e6]);
        port_figures(&mut m, 200e6, 1500);
        let f = &m.findings[0];
        assert_eq!(f.id, "above_port_rate");
        assert!(f.message.contains("101.4 %"), "{}", f.message);
        assert!((m.hosts[0].metrics["port_share_pct"] - 52.28).abs() < 0.01);
        assert!(!m.hosts[2].metrics.contains_key("port_share_pct"), "server");
        // 22.8 MiB/s of NFS writes through it: 99.9 % of the port's payload rate.
        let mut m = with_hosts(
            "throughput_bytes_per_s",
            22.8 * 1048576.0,
            &[11.4e6, 11.4e6],
        );
        port_figures(&mut m, 200e6, 1500);
        let f = &m.findings[0];
        assert_eq!(f.id, "port_utilisation", "{}", f.message);
        assert!((m.metrics["port.payload_pct"] - 99.99).abs() < 0.1);
        assert_eq!(
            m.metrics["port.payload_ceiling"],
            tcp_payload_bps(200e6, 1500) / 8.0
        );
        // 0.5 % above: within what the hosts' intervals can tell of a saturated port.
        let c = tcp_payload_bps(200e6, 1500) / 8.0;
        let mut m = with_hosts("throughput_bytes_per_s", c * 1.005, &[c / 2.0, c * 0.505]);
        port_figures(&mut m, 200e6, 1500);
        assert_eq!(m.findings[0].id, "port_utilisation");
        assert!(m.findings[0].message.contains("100.5 %"));
        // Busy cores beside a full port: a note that the port set the pace; beside a port
        // half used, the warning stays.
        let busy =
            || nsperf_core::Finding::new("hosts_cpu_busy", Severity::Warning, "the hosts' cores");
        let mut m = with_hosts("throughput_bytes_per_s", c * 0.99, &[c / 2.0, c * 0.49]);
        m.findings.push(busy());
        port_figures(&mut m, 200e6, 1500);
        let f = m
            .findings
            .iter()
            .find(|f| f.id == "hosts_cpu_busy")
            .unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert!(f.message.contains("99.0 %") && f.message.contains("the port set the pace"));
        let mut m = with_hosts("throughput_bytes_per_s", c * 0.5, &[c / 4.0, c / 4.0]);
        m.findings.push(busy());
        port_figures(&mut m, 200e6, 1500);
        let f = m
            .findings
            .iter()
            .find(|f| f.id == "hosts_cpu_busy")
            .unwrap();
        assert_eq!(f.severity, Severity::Warning);
        // A peak interval 8 % above the port: said; 2 % above: within what intervals tell.
        let mut m = with_hosts("throughput_bytes_per_s", c * 0.95, &[c / 2.0, c * 0.45]);
        m.metrics.insert(Metric::PEAK_INTERVAL, c * 1.08);
        m.metrics.insert(Metric::SUSTAINED_MEAN, c * 0.98);
        port_figures(&mut m, 200e6, 1500);
        let f = m
            .findings
            .iter()
            .find(|f| f.id == "peak_above_port")
            .unwrap();
        assert!(f.message.contains("8.0 % above"), "{}", f.message);
        let mut m = with_hosts("throughput_bytes_per_s", c * 0.95, &[c / 2.0, c * 0.45]);
        m.metrics.insert(Metric::PEAK_INTERVAL, c * 1.02);
        port_figures(&mut m, 200e6, 1500);
        assert!(!m.findings.iter().any(|f| f.id == "peak_above_port"));
        // Not a data rate: nothing.
        let mut m = with_hosts("elapsed_s", 3.0, &[1.0]);
        port_figures(&mut m, 200e6, 1500);
        assert!(m.findings.is_empty() && m.metrics.is_empty());
    }
}
