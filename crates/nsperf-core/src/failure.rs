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
    /// The server is up but what was asked for is not there: an NFS export or path, an SMB
    /// share (exit 11).
    NotFound = 11,
    /// The server went away after the run had started: connection reset or closed, or no
    /// answer within the timeout (exit 12).
    PeerLost = 12,
    /// Interrupted by a signal (exit 130, as shells report SIGINT).
    Interrupted = 130,
}

impl Failure {
    /// Every class, in exit-code order.
    pub const ALL: [Failure; 13] = [
        Failure::Runtime,
        Failure::Usage,
        Failure::Input,
        Failure::Permission,
        Failure::Connect,
        Failure::Auth,
        Failure::Protocol,
        Failure::Refused,
        Failure::Unsupported,
        Failure::Unsafe,
        Failure::NotFound,
        Failure::PeerLost,
        Failure::Interrupted,
    ];

    /// The position of a class in [`Failure::ALL`]. The match is exhaustive, so a new class
    /// does not compile until it is placed here (and in `ALL`, which a test checks).
    #[cfg(test)]
    const fn position(self) -> usize {
        match self {
            Failure::Runtime => 0,
            Failure::Usage => 1,
            Failure::Input => 2,
            Failure::Permission => 3,
            Failure::Connect => 4,
            Failure::Auth => 5,
            Failure::Protocol => 6,
            Failure::Refused => 7,
            Failure::Unsupported => 8,
            Failure::Unsafe => 9,
            Failure::NotFound => 10,
            Failure::PeerLost => 11,
            Failure::Interrupted => 12,
        }
    }

    /// The process exit code of this class.
    pub fn exit_code(self) -> u8 {
        self as u8
    }

    /// The class of an nsperf process's exit code (`None` for 0 and for codes nsperf does
    /// not use), so that a parent reads a child's status through this enum, not a number.
    pub fn from_exit_code(code: i32) -> Option<Failure> {
        Failure::ALL
            .into_iter()
            .find(|f| i32::from(f.exit_code()) == code)
    }
}

/// Implemented by every engine error: which [`Failure`] class it belongs to.
pub trait Classify {
    /// The failure class, hence the exit code, of this error.
    fn failure(&self) -> Failure;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_round_trip() {
        for (i, f) in Failure::ALL.into_iter().enumerate() {
            assert_eq!(f.position(), i, "{f:?} out of place in Failure::ALL");
            assert_eq!(Failure::from_exit_code(i32::from(f.exit_code())), Some(f));
        }
        assert_eq!(Failure::from_exit_code(0), None);
        assert_eq!(Failure::from_exit_code(101), None);
    }
}
