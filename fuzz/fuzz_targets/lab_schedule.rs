//! Fault schedule files (`nsperf lab up/set --schedule FILE`): any bytes give a schedule or
//! a one-line error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = nsperf_lab::Schedule::parse("fuzz", data) {
        assert!(!e.to_string().contains('\n'));
    }
});
