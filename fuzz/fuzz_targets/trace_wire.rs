//! One frame through the checked wire views: the first byte picks the link type.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nsperf_trace::decode::decode;
use nsperf_trace::wire::link::LinkType;

const LINKS: [u32; 10] = [0, 1, 10, 12, 101, 108, 113, 228, 229, 276];

fuzz_target!(|data: &[u8]| {
    if let Some((&sel, frame)) = data.split_first() {
        let link = LinkType::from_number(LINKS[usize::from(sel) % LINKS.len()]);
        let _ = decode(link, frame);
    }
});
