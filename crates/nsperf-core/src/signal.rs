//! Ctrl-C and SIGTERM as a flag that long-running loops poll, so every engine can stop at a
//! safe point, clean up what it created (files, namespaces, child processes) and still print
//! what it measured.
//!
//! The first signal sets the flag; a second one while the flag is set restores the default
//! action and re-raises, so a stuck process can still be killed from the keyboard.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        // SAFETY: signal() and raise() are async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Installs the SIGINT and SIGTERM handlers. Safe to call more than once.
pub fn install_interrupt_handler() {
    // SAFETY: the handler only touches an atomic and calls async-signal-safe functions.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = 0; // no SA_RESTART: blocking calls return EINTR so loops see the flag
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// True once SIGINT or SIGTERM arrived (or [`request_stop`] was called).
#[inline]
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Sets the flag from code, as if a signal had arrived (for tests and internal aborts).
pub fn request_stop() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}
