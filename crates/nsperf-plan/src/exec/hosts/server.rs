//! A network step's server on `[hosts]`: its own count as a part of the run, set beside
//! the clients' sum.

use nsperf_results::{HostPart, HostRole, Measurement, Metric};

use super::parts::{host_figures, outcome_error};
use crate::agent::{Fleet, StepOutcome};
use crate::step::StepReport;

/// The server's own count as a part of the run.
pub(super) fn server_part(fleet: &Fleet, i: usize, o: StepOutcome) -> HostPart {
    let a = &fleet.agents()[i];
    let mut part = HostPart {
        host: a.name.clone(),
        role: HostRole::Server,
        metric: "received_bytes".into(),
        clock_offset_ns: a.clock.offset_ns,
        clock_error_ns: a.clock.error_ns,
        ..HostPart::default()
    };
    if let Some(e) = &o.end {
        part.metrics.extend(host_figures(e));
    }
    let served = o.reports.iter().rev().find_map(|r| match r {
        StepReport::Served(t) => Some(t.clone()),
        _ => None,
    });
    match served {
        Some(t) => {
            part.value = t.received_bytes as f64;
            part.payload_bytes = Some(t.received_bytes);
            for (k, v) in [
                ("received_bytes", t.received_bytes as f64),
                ("sent_bytes", t.sent_bytes as f64),
                ("tests_completed", t.tests_completed as f64),
                ("tests_failed", t.tests_failed as f64),
                ("streams", t.streams as f64),
                ("cpu_s", t.cpu_ns as f64 / 1e9),
                ("serving_s", t.serving_ns as f64 / 1e9),
            ] {
                part.metrics.insert(k.into(), v);
            }
            part.report_json = serde_json::to_string(&t).ok();
        }
        None => part.error = Some(outcome_error(&a.name, &o)),
    }
    part
}

/// Records the server's count beside the clients' sum: what the clients sent (upload) or
/// received (download) against what the server received or sent.
pub(super) fn compare_with_server(m: &mut Measurement, server: &HostPart) {
    if server.error.is_some() {
        return;
    }
    let sum = |k: &str| -> f64 {
        m.hosts
            .iter()
            .filter(|h| h.error.is_none())
            .filter_map(|h| h.metrics.get(k))
            .sum()
    };
    let clients_sent = sum("sent_bytes");
    let server_received = server.metrics.get("received_bytes").copied().unwrap_or(0.0);
    m.metrics.insert("clients.sent_bytes".into(), clients_sent);
    m.metrics
        .insert("server.received_bytes".into(), server_received);
    for k in ["sent_bytes", "tests_completed", "cpu_s"] {
        if let Some(v) = server.metrics.get(k) {
            m.metrics.insert(Metric::new(format!("server.{k}")), *v);
        }
    }
    if clients_sent > 0.0 {
        let pct = (server_received - clients_sent) / clients_sent * 100.0;
        m.metrics.insert(Metric::SERVER_VS_CLIENTS_PCT, pct);
        if let Some(f) =
            crate::exec::served::counts_differ(pct, server_received, clients_sent, None)
        {
            m.findings.push(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::hosts::fixtures::part;
    use crate::exec::hosts::merge::merge;
    use crate::exec::hosts::parts::Parts;

    #[test]
    fn the_servers_count_is_set_beside_the_clients_sum() {
        let b = 0u64;
        let p = Parts {
            barrier_ns: b,
            parts: vec![(part("c1", 1.0, 0, 1000.0), vec![], vec![])],
        };
        let mut m = merge(p, HostRole::Client);
        let mut s = HostPart {
            host: "srv".into(),
            role: HostRole::Server,
            ..HostPart::default()
        };
        s.metrics.insert("received_bytes".into(), 999.0);
        compare_with_server(&mut m, &s);
        assert_eq!(m.metrics["server.received_bytes"], 999.0);
        assert_eq!(m.metrics["clients.sent_bytes"], 1000.0);
        assert!((m.metrics["server_vs_clients_pct"] + 0.1).abs() < 1e-9);
    }
}
