//! Arbitrary bytes as the segments of both directions of an ONC RPC connection and of an
//! SMB2/3 connection, through the protocol layer of `nsperf trace` (stream reassembly, record
//! marking and NetBIOS framing, call/reply and request/response matching).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nsperf_trace::proto::fuzz_rpc_streams(data);
    nsperf_trace::proto::fuzz_smb_streams(data);
});
