//! Fuzzes the step-spec reader of `nsperf step` (JSON, then the engines' own checks) with
//! arbitrary bytes: it must return a spec or an error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nsperf_plan::step::fuzz_spec(data);
});
