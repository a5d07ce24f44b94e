//! Fuzzes the plan-file parser (TOML, matrix expansion, templates, step validation) with
//! arbitrary bytes: it must return a plan or an error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = nsperf_plan::Plan::parse(data);
});
