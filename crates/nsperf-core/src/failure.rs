//! The classes of failure that map to nsperf's documented exit codes.
//!
//! Every engine's error type says which class it belongs to (by implementing
//! [`Classify`]), and the binary turns the class into the process exit code. The table is
//! documented in `docs/exit-codes.md`; keep both in step.

/// What kind of failure ended a command. The discriminant is the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failure {
    /// Any failure not listed below (exit 1).
    Runtime = 1,
    /// A bad flag or value given by the user: usage error (exit 2, as clap uses).
    Usage = 2,
    /// An input file (capture, plan, key file) is missing, unreadable or malformed (exit 3).
    Input = 3,
    /// The operation needs root or a capability the process lacks (exit 4).
    Permission = 4,
    /// The peer could not be reached: unknown host, refused, unreachable, timed out (exit 5).
    Connect = 5,
    /// Authentication failed: wrong or missing pre-shared key (exit 6).
    Auth = 6,
    /// The peer speaks another protocol version, or not nsperf at all (exit 7).
    Protocol = 7,
    /// The server refused the test: at capacity or over its limits (exit 8).
    Refused = 8,
    /// The kernel or file system does not support what was asked (exit 9).
    Unsupported = 9,
    /// The target is unsafe to touch without `--destructive`, or not ours (exit 10).
    Unsafe = 10,
    /// Interrupted by a signal (exit 130, as shells report SIGINT).
    Interrupted = 130,
}

impl Failure {
    /// The process exit code of this class.
    pub fn exit_code(self) -> u8 {
        self as u8
    }
}

/// Implemented by every engine error: which [`Failure`] class it belongs to.
pub trait Classify {
    /// The failure class, hence the exit code, of this error.
    fn failure(&self) -> Failure;
}
