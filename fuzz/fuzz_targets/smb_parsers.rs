//! What the SMB engine parses from outside: `smb://` URLs, smbclient-style credentials files,
//! and the READ reply whose data it copies into its buffers. Any bytes give a value or an
//! error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nsperf_smb::fuzz_parsers(data));
