//! Calls as the embedded NFS server (`nsperf lab serve … nfs`) decodes and answers them,
//! against an empty read-only export: any bytes give a reply or a dropped call, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nsperf_nfs::fuzz::call(data));
