//! Fuzzes the control-protocol decoder and both session state machines with arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nsperf_net::fuzz_control_decoder(data);
});
