//! TCP option lists.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let o = nsperf_trace::wire::tcp::TcpOptions::parse(data);
    let _ = o.sack_blocks();
});
