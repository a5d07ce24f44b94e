//! What the SMB engine parses from outside: `smb://` URLs, smbclient-style credentials files,
//! the READ reply whose data it copies into its buffers, and the direct data path's reply
//! headers, READ reply layouts and WRITE replies. Any bytes give a value or an
//! error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nsperf_smb::fuzz_parsers(data));
