//! Fuzzes both ends' decoders of the agent's control protocol (framing, then JSON messages)
//! with arbitrary bytes split at several sizes: messages or errors, never a panic, never more
//! than one frame buffered.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nsperf_plan::agent::fuzz_frames(data);
});
