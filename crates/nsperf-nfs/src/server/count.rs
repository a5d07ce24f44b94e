//! The server's own count of what it served: the data of the READs it answered (as its
//! sockets take it) and of the WRITEs it was sent (as it arrives), the COMMITs and stable
//! WRITEs it synced, and the calls it answered, in counters shared by the connection threads
//! (read while the server runs, for the count beside the clients' sum).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Counters updated by every connection of one server.
#[derive(Debug, Default)]
pub struct ServedCounters {
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    calls: AtomicU64,
    commits: AtomicU64,
    stable_writes: AtomicU64,
}

/// What a server served so far, by its own count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Served {
    /// Data bytes of the READ replies its sockets took.
    pub read_bytes: u64,
    /// Data bytes of the WRITE calls that arrived (counted as they arrive).
    pub write_bytes: u64,
    /// RPC calls answered (every program: portmapper, MOUNT, NFS).
    pub calls: u64,
    /// COMMITs answered OK (each one synced its file).
    #[serde(default)]
    pub commits: u64,
    /// WRITEs asked `DATA_SYNC` or `FILE_SYNC` and taken (each one synced before its reply).
    #[serde(default)]
    pub stable_writes: u64,
}

impl Served {
    /// Data bytes both ways.
    pub fn bytes(&self) -> u64 {
        self.read_bytes + self.write_bytes
    }
}

impl ServedCounters {
    /// Counts one call answered.
    #[inline]
    pub(crate) fn call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts the data of a READ reply.
    #[inline]
    pub(crate) fn read(&self, bytes: usize) {
        self.read_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Counts the data of a WRITE taken.
    #[inline]
    pub(crate) fn write(&self, bytes: usize) {
        self.write_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Counts a COMMIT answered OK.
    #[inline]
    pub(crate) fn commit(&self) {
        self.commits.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a WRITE synced before its reply.
    #[inline]
    pub(crate) fn stable_write(&self) {
        self.stable_writes.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> Served {
        Served {
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
            calls: self.calls.load(Ordering::Relaxed),
            commits: self.commits.load(Ordering::Relaxed),
            stable_writes: self.stable_writes.load(Ordering::Relaxed),
        }
    }
}
