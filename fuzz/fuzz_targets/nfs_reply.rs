//! NFSv3/MOUNT/portmapper replies as the client decodes them (`nsperf io --engine nfs`): any
//! bytes give a value or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nsperf_nfs::fuzz::reply(data));
