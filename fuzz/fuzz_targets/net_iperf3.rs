//! Fuzzes the iperf3 protocol decoder: both iperf3 session machines, in each waiting state,
//! with arbitrary peer bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nsperf_net::fuzz_iperf3_decoder(data);
});
