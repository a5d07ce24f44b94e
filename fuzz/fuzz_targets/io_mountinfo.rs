//! Fuzzes the /proc/self/mountinfo parser that tells which file system an io target is on.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nsperf_io::fuzz_mountinfo(data);
});
