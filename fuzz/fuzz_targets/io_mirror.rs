//! Fuzzes the mirror's decoders (`nsperf io run --replicate` and `nsperf io peer` read each
//! other's hello, frames and acks): an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nsperf_io::mirror::wire::fuzz_decode(data);
});
