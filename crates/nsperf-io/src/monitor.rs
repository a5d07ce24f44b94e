//! CPU use per core sampled on the interval grid by one background thread, so the jobs'
//! loops never read /proc.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nsperf_core::cpu::CpuSampler;
use nsperf_core::report::CpuInterval;

/// A running CPU sampler; [`CpuMonitor::stop`] returns the samples.
#[derive(Debug)]
pub struct CpuMonitor {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<Vec<CpuInterval>>>,
}

impl CpuMonitor {
    /// Starts sampling every `interval` from `start` (which may be later than now: the end
    /// of a ramp; nothing before it is counted).
    pub fn start(start: Instant, interval: Duration) -> Self {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || {
            let (lock, cv) = &*s2;
            let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*stopped && Instant::now() < start {
                let wait = start.saturating_duration_since(Instant::now());
                stopped = cv
                    .wait_timeout(stopped, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            let mut sampler = CpuSampler::new();
            let mut out = Vec::new();
            let mut last = start;
            let mut next = start + interval;
            loop {
                let now = Instant::now();
                if !*stopped && now < next {
                    stopped = cv
                        .wait_timeout(stopped, next - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    if !*stopped && Instant::now() < next {
                        continue;
                    }
                }
                let now = Instant::now();
                let len = now.duration_since(last).as_secs_f64();
                if len > 0.0005 {
                    out.push(CpuInterval {
                        role: "local".into(),
                        start_s: last.saturating_duration_since(start).as_secs_f64(),
                        length_s: len,
                        cpu: sampler.sample(len),
                    });
                }
                last = now;
                next += interval;
                if *stopped {
                    break;
                }
            }
            out
        });
        CpuMonitor {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the thread (taking a last partial sample) and returns every sample.
    pub fn stop(mut self) -> Vec<CpuInterval> {
        self.signal();
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }

    fn signal(&self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }
}

impl Drop for CpuMonitor {
    fn drop(&mut self) {
        self.signal();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_on_the_grid_and_a_last_partial_one() {
        let start = Instant::now();
        let m = CpuMonitor::start(start, Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(70));
        let s = m.stop();
        assert!(s.len() >= 3, "{}", s.len());
        assert!(s.iter().all(|c| !c.cpu.per_core.is_empty()));
        assert!((s[1].start_s - 0.02).abs() < 0.015);
    }
}
