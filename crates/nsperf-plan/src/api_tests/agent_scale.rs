//! Scale by simulation (issue 10): one coordinator drives N simulated agents in process —
//! real sessions, framing and clock probes over socket pairs, steps answered by the mock
//! runner — for N = 10, 100, 1000. The coordinator's control-path time (open every session
//! and measure every clock; start one step on all behind a barrier and collect every end)
//! and its heap must grow about linearly with N. Alone in its process (a child of
//! the unit-test binary: the counting allocator's heap is this test's). `cargo test --release
//! -p nsperf-plan --lib agent_scale -- --nocapture` prints the table kept in docs/performance.md.

use super::alone::{alone, test_name};

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use crate::agent::{AgentLink, AgentPolicy, Fleet, MockStepRunner, StepRunner, serve_session};
use crate::step::StepSpec;
use nsperf_core::host::HostFacts;

/// Live heap bytes of the whole process.
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same layout, as the caller promised.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

struct Figures {
    n: usize,
    connect: Duration,
    step: Duration,
    coordinator_heap: isize,
}

fn simulate(n: usize) -> Figures {
    let runner: Arc<dyn StepRunner> = Arc::new(MockStepRunner::default());
    let mut links = Vec::with_capacity(n);
    let mut sessions = Vec::with_capacity(n);
    for i in 0..n {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let reader = theirs.try_clone().unwrap();
        let runner = runner.clone();
        sessions.push(
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    serve_session(
                        reader,
                        theirs,
                        AgentPolicy::default(),
                        &*runner,
                        HostFacts::default(),
                    )
                })
                .unwrap(),
        );
        links.push(AgentLink {
            name: format!("a{i}"),
            reader: Box::new(ours.try_clone().unwrap()),
            writer: Box::new(ours),
            process: None,
            psk: None,
        });
    }
    let before = LIVE.load(Ordering::Relaxed);
    let mut fleet = Fleet::new();
    let t0 = Instant::now();
    fleet.connect(links, Duration::from_secs(120)).unwrap();
    let connect = t0.elapsed();
    let coordinator_heap = LIVE.load(Ordering::Relaxed) - before;
    let all: Vec<usize> = (0..n).collect();
    let spec = StepSpec::Exec {
        site: None,
        command: vec!["true".into()],
    };
    let t1 = Instant::now();
    let at = fleet.barrier(&all);
    let ids: Vec<_> = all
        .iter()
        .map(|&i| fleet.start(i, spec.clone(), Some(at)))
        .collect();
    let send = t1.elapsed();
    assert!(
        nsperf_core::clock::unix_time_ns() < at,
        "every start was sent before the barrier"
    );
    let out = fleet.wait(&ids, Duration::from_secs(120));
    // Control-path time of the step: sending every start, then collecting every end after
    // the barrier (the wait for the barrier itself is not work).
    let step = send + Duration::from_nanos(nsperf_core::clock::unix_time_ns().saturating_sub(at));
    assert_eq!(out.len(), n);
    assert!(out.iter().all(|o| o.end.is_some()), "every step ended");
    fleet.close(Duration::from_secs(1));
    for s in sessions {
        s.join().unwrap();
    }
    Figures {
        n,
        connect,
        step,
        coordinator_heap,
    }
}

#[test]
fn a_coordinator_drives_a_thousand_simulated_agents_linearly() {
    // Alone in a process: the heap the counting allocator sees is this test's.
    alone(
        &test_name(
            module_path!(),
            "a_coordinator_drives_a_thousand_simulated_agents_linearly",
        ),
        a_coordinator_drives_a_thousand_simulated_agents_linearly_body,
    );
}

fn a_coordinator_drives_a_thousand_simulated_agents_linearly_body() {
    let figs: Vec<Figures> = [10, 100, 1000].into_iter().map(simulate).collect();
    println!("| agents | open + clocks | one step on all | coordinator heap |");
    println!("|---:|---:|---:|---:|");
    for f in &figs {
        println!(
            "| {} | {:.1} ms ({:.0} us/agent) | {:.1} ms ({:.0} us/agent) | {:.2} MiB ({:.1} KiB/agent) |",
            f.n,
            f.connect.as_secs_f64() * 1e3,
            f.connect.as_secs_f64() * 1e6 / f.n as f64,
            f.step.as_secs_f64() * 1e3,
            f.step.as_secs_f64() * 1e6 / f.n as f64,
            f.coordinator_heap as f64 / 1048576.0,
            f.coordinator_heap as f64 / 1024.0 / f.n as f64,
        );
    }
    let (h, k) = (&figs[1], &figs[2]);
    let per = |d: Duration, n: usize| d.as_secs_f64() / n as f64;
    // Linear: the cost per agent at 1000 stays within a few times that at 100 (threads on
    // two cores add noise; quadratic growth would be 10x).
    assert!(
        per(k.connect, k.n) < 4.0 * per(h.connect, h.n),
        "open + clocks grew faster than linearly"
    );
    assert!(
        per(k.step, k.n) < 4.0 * per(h.step, h.n).max(20e-6),
        "a step grew faster than linearly"
    );
    let mem = |f: &Figures| f.coordinator_heap as f64 / f.n as f64;
    assert!(
        mem(k) < 2.0 * mem(h),
        "heap per agent grew: {} vs {}",
        mem(k),
        mem(h)
    );
}
