//! Hosts' parts for the unit tests of merging.

use std::collections::BTreeMap;

use nsperf_results::{HostPart, Metric, SeriesPoint};

pub(super) fn pts(vals: &[f64]) -> Vec<SeriesPoint> {
    vals.iter()
        .enumerate()
        .map(|(i, &v)| SeriesPoint {
            start_s: i as f64,
            length_s: 1.0,
            value: v,
        })
        .collect()
}

pub(super) fn part(host: &str, value: f64, started: u64, sent: f64) -> HostPart {
    let mut metrics = BTreeMap::new();
    metrics.insert(Metric::new("sent_bytes"), sent);
    HostPart {
        host: host.into(),
        metric: Metric::THROUGHPUT_BPS,
        value,
        payload_bytes: Some(sent as u64),
        started_unix_ns: started,
        clock_error_ns: 50_000,
        metrics,
        ..HostPart::default()
    }
}
