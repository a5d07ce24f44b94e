//! Arbitrary bytes as the segments of both directions of an ONC RPC connection, through the
//! protocol layer of `nsperf trace` (stream reassembly, record marking, call/reply matching).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nsperf_trace::proto::fuzz_rpc_streams(data));
