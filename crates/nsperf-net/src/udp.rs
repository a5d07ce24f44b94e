//! UDP data path: sequence-numbered datagrams, loss, reordering, duplicates and RFC 3550
//! jitter on the receiver.

use crate::client::ClientRun;
use crate::report::UdpSummary;

/// Bytes of the header at the start of every datagram: sequence number (u64), send time in
/// ns (u64), stream id (u32), test cookie low bits (u32), all big endian.
pub const HEADER_LEN: usize = 24;

/// UDP totals over all streams of a run.
pub fn summarize(run: &ClientRun, warmup_s: f64) -> UdpSummary {
    let mut s = UdpSummary::default();
    let mut jitters = Vec::new();
    let (mut rx_after, mut t_after) = (0u64, 0f64);
    for (tx_side, rx_side) in [(&run.client, &run.server), (&run.server, &run.client)] {
        for rx in rx_side.streams.iter().filter(|r| !r.sending) {
            let Some(last) = rx.samples.iter().rev().find_map(|x| x.udp) else {
                continue;
            };
            let sent = tx_side
                .streams
                .iter()
                .find(|t| t.id == rx.id && t.sending)
                .and_then(|t| t.samples.last())
                .map(|x| x.messages)
                .unwrap_or(last.expected);
            s.sent_datagrams += sent;
            s.received_datagrams += last.datagrams;
            s.out_of_order += last.out_of_order;
            s.duplicates += last.duplicates;
            s.kernel_drops += last.kernel_drops;
            jitters.push(last.jitter_ns);
            let mut prev = 0u64;
            for (mark, sample) in rx_side.intervals.iter().zip(&rx.samples) {
                let d = sample.udp.map(|u| u.datagrams).unwrap_or(0);
                if mark.start_s + 1e-9 >= warmup_s {
                    rx_after += d.saturating_sub(prev);
                }
                prev = d;
            }
        }
        if t_after == 0.0 && rx_side.streams.iter().any(|r| !r.sending) {
            t_after = rx_side
                .intervals
                .iter()
                .filter(|m| m.start_s + 1e-9 >= warmup_s)
                .map(|m| m.length_s)
                .sum();
        }
    }
    s.lost_datagrams = s.sent_datagrams.saturating_sub(s.received_datagrams);
    s.loss_pct = if s.sent_datagrams > 0 {
        100.0 * s.lost_datagrams as f64 / s.sent_datagrams as f64
    } else {
        0.0
    };
    s.jitter_ns = nsperf_core::stats::mean(&jitters).unwrap_or(0.0);
    s.received_datagrams_per_s = if t_after > 0.0 {
        rx_after as f64 / t_after
    } else {
        0.0
    };
    s
}
