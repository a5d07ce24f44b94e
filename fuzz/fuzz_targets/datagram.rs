//! Fuzzes the data plane's parsers: data hellos, UDP datagram headers, sequence bookkeeping.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nsperf_net::fuzz_datagram(data);
});
