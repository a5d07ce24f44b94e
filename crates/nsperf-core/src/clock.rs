//! The one clock every measurement reads, and a manual clock for deterministic tests.
//!
//! Protocol logic, the link model and trace analysis take time as an input (a [`Clock`] or a
//! plain nanosecond value), so their tests step virtual time; only the outer drivers read the
//! real clock, always `CLOCK_MONOTONIC` through [`std::time::Instant`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A source of monotonic time in nanoseconds since an arbitrary origin.
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's origin; never goes backwards.
    fn now_ns(&self) -> u64;

    /// Time elapsed since an earlier reading of this clock.
    fn since(&self, earlier_ns: u64) -> Duration {
        Duration::from_nanos(self.now_ns().saturating_sub(earlier_ns))
    }
}

/// The real monotonic clock, with its origin at creation.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }

    /// The instant this clock counts from.
    pub fn origin(&self) -> Instant {
        self.origin
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told to: for tests of time-dependent logic.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.now.fetch_add(by.as_nanos() as u64, Ordering::SeqCst);
    }

    /// Sets the clock; refuses to go backwards (stays where it is).
    pub fn set_ns(&self, ns: u64) {
        self.now.fetch_max(ns, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

/// Wall-clock time in nanoseconds since the Unix epoch, for time stamps in results (never for
/// measuring intervals).
pub fn unix_time_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_steps() {
        let c = ManualClock::new();
        assert_eq!(c.now_ns(), 0);
        c.advance(Duration::from_millis(5));
        assert_eq!(c.now_ns(), 5_000_000);
        c.set_ns(1);
        assert_eq!(c.now_ns(), 5_000_000, "never backwards");
        assert_eq!(c.since(1_000_000), Duration::from_millis(4));
    }

    #[test]
    fn monotonic_moves_forward() {
        let c = MonotonicClock::new();
        let a = c.now_ns();
        std::thread::sleep(Duration::from_millis(2));
        assert!(c.now_ns() >= a + 1_000_000);
    }
}
