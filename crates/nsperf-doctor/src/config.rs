//! The typed configuration of a doctor run (built by the CLI, never from clap types).

use std::path::PathBuf;
use std::time::Duration;

use nsperf_io::{CacheMode, EngineKind, Target};
use nsperf_nfs::NfsUrl;
use nsperf_smb::SmbUrl;

use crate::error::DoctorError;

/// The file server's target, by protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerTarget {
    /// `nfs://HOST[:PORT]/EXPORT/PATH`.
    Nfs(NfsUrl),
    /// `smb://HOST[:PORT]/SHARE/PATH`, with the credentials file if one was given (else the
    /// environment, else a guest session).
    Smb {
        /// The URL.
        url: SmbUrl,
        /// smbclient-style authentication file.
        credentials: Option<PathBuf>,
    },
}

impl ServerTarget {
    /// The server's host name or address.
    pub fn host(&self) -> &str {
        match self {
            ServerTarget::Nfs(u) => &u.host,
            ServerTarget::Smb { url, .. } => &url.host,
        }
    }

    /// The target of an `io` run and its engine.
    pub fn io(&self) -> (Target, EngineKind) {
        match self {
            ServerTarget::Nfs(u) => (Target::Nfs { url: u.clone() }, EngineKind::Nfs),
            ServerTarget::Smb { url, credentials } => (
                Target::Smb {
                    url: url.clone(),
                    credentials: credentials.clone(),
                },
                EngineKind::Smb,
            ),
        }
    }
}

impl std::fmt::Display for ServerTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerTarget::Nfs(u) => write!(f, "{u}"),
            ServerTarget::Smb { url, .. } => write!(f, "{url}"),
        }
    }
}

/// Everything a doctor run needs.
#[derive(Debug, Clone, PartialEq)]
pub struct DoctorConfig {
    /// The file server's target.
    pub target: ServerTarget,
    /// The lab whose site serves the target (found by itself when omitted).
    pub lab: Option<String>,
    /// The lab site to run the client side from (default: the site doctor runs in, or the
    /// first site of the lab other than the server's).
    pub from_site: Option<String>,
    /// An nsperf server for the network test (`HOST`, `PORT`), when not in a lab.
    pub net_server: Option<(String, u16)>,
    /// Bytes of each test file.
    pub size_bytes: u64,
    /// Record size of the storage test and RPC size of the protocol test.
    pub bs_bytes: u64,
    /// RPCs in flight.
    pub iodepth: u32,
    /// Longest measured pass of each storage and protocol test.
    pub pass_time: Duration,
    /// Measured time of each network direction (after a 1 s warm-up).
    pub net_time: Duration,
    /// Cache phase of the protocol read: cold (the server's copy evicted; needs root and
    /// the server on this host) or remote-warm; `None`: cold where possible, else
    /// remote-warm.
    pub read_cache: Option<CacheMode>,
    /// How long connecting to the server (file protocol and nsperf server) may take.
    pub connect_timeout: Duration,
}

impl DoctorConfig {
    /// Defaults: 256 MiB files, 1 MiB records and RPCs, 8 RPCs in flight, passes of at most
    /// 5 s, 3 s per network direction, cold reads where possible.
    pub fn new(target: ServerTarget) -> Self {
        DoctorConfig {
            target,
            lab: None,
            from_site: None,
            net_server: None,
            size_bytes: 256 << 20,
            bs_bytes: 1 << 20,
            iodepth: 8,
            pass_time: Duration::from_secs(5),
            net_time: Duration::from_secs(3),
            read_cache: None,
            connect_timeout: nsperf_io::DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// Checks the values before anything runs.
    pub fn validate(&self) -> Result<(), DoctorError> {
        let bad = |m: &str| Err(DoctorError::Usage(m.to_string()));
        if self.bs_bytes < 4096 || self.bs_bytes > 64 << 20 {
            return bad("--bs must be 4 KiB..64 MiB");
        }
        if self.size_bytes < self.bs_bytes {
            return bad("--size must be at least --bs");
        }
        if self.iodepth == 0 || self.iodepth > 1024 {
            return bad("--iodepth must be 1..1024");
        }
        if self.pass_time < Duration::from_millis(500) || self.net_time < Duration::from_secs(1) {
            return bad("--time must be at least 500ms and --net-time at least 1s");
        }
        if !matches!(
            self.read_cache,
            None | Some(CacheMode::Cold | CacheMode::RemoteWarm)
        ) {
            return bad("--cache is cold or remote-warm");
        }
        Ok(())
    }
}
