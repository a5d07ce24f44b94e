//! Slurm hostlist expressions (`SLURM_JOB_NODELIST`): never a panic, never more than
//! `MAX_HOSTS` names, and what an expansion prints parses back to it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nsperf_plan::agent::fuzz_hostlist(data);
});
