//! Fuzzes the fio job-file parser of `nsperf io run --job` (sections, options, sizes, times,
//! rates, the mapping to a run): it must return a run or an error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nsperf_io::fuzz_job_file(data);
});
