//! `nfs://HOST[:PORT]/EXPORT/PATH` targets.
//!
//! The path names a directory on the server: the longest export the server lists that is a
//! prefix of it is mounted, and the rest is looked up from there. Without a port, MOUNT and
//! NFS are found through the portmapper (port 111); with one, both are expected on it (the
//! embedded server serves MOUNT, NFS and the portmapper on one port).

use std::fmt;
use std::str::FromStr;

use nsperf_core::url::UrlRules;

/// How `nfs://` URLs split.
const RULES: UrlRules = UrlRules {
    scheme: "nfs",
    no_path: "no path after the host",
    user_info: "user names are not supported",
};

/// A parsed `nfs://` URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct NfsUrl {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port of MOUNT and NFS, when given.
    pub port: Option<u16>,
    /// Absolute path on the server (export, then a directory inside it), without a trailing
    /// slash except for `/` itself.
    pub path: String,
}

/// Why a string is not an `nfs://` URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad NFS URL '{url}': {why} (expected nfs://HOST[:PORT]/EXPORT/PATH)")]
pub struct UrlError {
    url: String,
    why: &'static str,
}

impl NfsUrl {
    /// True when `s` looks like an NFS URL (so the CLI can route it to this parser).
    pub fn is_nfs_url(s: &str) -> bool {
        RULES.matches(s)
    }

    /// The path's components.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.path.split('/').filter(|c| !c.is_empty())
    }
}

impl FromStr for NfsUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<NfsUrl, UrlError> {
        let bad = |why| UrlError {
            url: s.to_string(),
            why,
        };
        if !NfsUrl::is_nfs_url(s) {
            return Err(bad("it does not start with nfs://"));
        }
        let parts = RULES.split(s).map_err(bad)?;
        let path = format!("/{}", parts.components.join("/"));
        if path.len() > crate::proto::MNTPATHLEN {
            return Err(bad("the path is longer than 1024 bytes"));
        }
        Ok(NfsUrl {
            host: parts.host.to_string(),
            port: parts.port,
            path,
        })
    }
}

impl fmt::Display for NfsUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("nfs://")?;
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        f.write_str(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let u: NfsUrl = "nfs://10.77.0.2/srv/nfs/sub/".parse().unwrap();
        assert_eq!(u.host, "10.77.0.2");
        assert_eq!(u.port, None);
        assert_eq!(u.path, "/srv/nfs/sub");
        assert_eq!(u.to_string(), "nfs://10.77.0.2/srv/nfs/sub");
        let u: NfsUrl = "NFS://[::1]:2049//x".parse().unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", Some(2049)));
        assert_eq!(u.to_string(), "nfs://[::1]:2049/x");
        let u: NfsUrl = "nfs://h:20490/".parse().unwrap();
        assert_eq!(u.path, "/");
        assert_eq!(u.components().count(), 0);
    }

    #[test]
    fn rejects() {
        for s in [
            "http://h/x",
            "nfs://h",
            "nfs:///x",
            "nfs://h:0/x",
            "nfs://h:70000/x",
            "nfs://h/a/../b",
            "nfs://u@h/x",
            "nfs://[::1/x",
            "nfs://h/x?uid=0",
            // A two-byte character across byte 6 once panicked the scheme check.
            "nfs:/\u{e9}/x",
        ] {
            let e = s.parse::<NfsUrl>().unwrap_err();
            assert!(e.to_string().contains("expected nfs://"), "{s}: {e}");
        }
    }
}
