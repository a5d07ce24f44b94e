//! Whole captures (pcap, pcapng, compressed or not) through the reader and the TCP analyser.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cfg = nsperf_trace::TraceConfig {
        bin_ns: 1_000_000,
        ..Default::default()
    };
    let _ = nsperf_trace::analyze_bytes(data, cfg);
});
