//! `nfs://HOST[:PORT]/EXPORT/PATH[?version=3|4|4.0|4.1]` targets.
//!
//! The path names a directory on the server. NFSv3: the longest export the server lists that
//! is a prefix of it is mounted, and the rest is looked up from there; without a port, MOUNT
//! and NFS are found through the portmapper (port 111); with one, both are expected on it
//! (the embedded server serves MOUNT, NFS and the portmapper on one port). NFSv4: the path is
//! looked up from the server's root (its pseudo file system), on port 2049 without one.
//! `version=4` (libnfs's URL option) is 4.1 when the server speaks it, else 4.0; `4.0` and
//! `4.1` ask for one. Without `version`, v3 is used when the server's portmapper offers it,
//! else v4.

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
    /// The NFS version asked for (`?version=`); `None` chooses by what the server offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<NfsVersion>,
}

/// An NFS version the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum NfsVersion {
    /// NFSv3 (RFC 1813) with MOUNT.
    #[serde(rename = "3")]
    V3,
    /// NFSv4, the newest minor version both speak (4.1, else 4.0).
    #[serde(rename = "4")]
    V4,
    /// NFSv4.0 (RFC 7530).
    #[serde(rename = "4.0")]
    V4_0,
    /// NFSv4.1 (RFC 8881) with sessions.
    #[serde(rename = "4.1")]
    V4_1,
}

impl FromStr for NfsVersion {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "3" => Ok(NfsVersion::V3),
            "4" => Ok(NfsVersion::V4),
            "4.0" => Ok(NfsVersion::V4_0),
            "4.1" => Ok(NfsVersion::V4_1),
            _ => Err("version must be 3, 4, 4.0 or 4.1"),
        }
    }
}

impl fmt::Display for NfsVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NfsVersion::V3 => "3",
            NfsVersion::V4 => "4",
            NfsVersion::V4_0 => "4.0",
            NfsVersion::V4_1 => "4.1",
        })
    }
}

/// Why a string is not an `nfs://` URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad NFS URL '{url}': {why} (expected nfs://HOST[:PORT]/EXPORT/PATH[?version=3|4|4.0|4.1])"
)]
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
        let (s_path, query) = match s.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (s, None),
        };
        let version = match query {
            None => None,
            Some(q) => {
                let v = q
                    .strip_prefix("version=")
                    .ok_or_else(|| bad("the only option is version=3|4|4.0|4.1"))?;
                Some(v.parse::<NfsVersion>().map_err(bad)?)
            }
        };
        let parts = RULES.split(s_path).map_err(bad)?;
        let path = format!("/{}", parts.components.join("/"));
        if path.len() > crate::proto::MNTPATHLEN {
            return Err(bad("the path is longer than 1024 bytes"));
        }
        Ok(NfsUrl {
            host: parts.host.to_string(),
            port: parts.port,
            path,
            version,
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
        f.write_str(&self.path)?;
        if let Some(v) = self.version {
            write!(f, "?version={v}")?;
        }
        Ok(())
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
        assert_eq!(u.version, None);
        let u: NfsUrl = "nfs://h/srv/x?version=4".parse().unwrap();
        assert_eq!(
            (u.path.as_str(), u.version),
            ("/srv/x", Some(NfsVersion::V4))
        );
        assert_eq!(u.to_string(), "nfs://h/srv/x?version=4");
        for (v, want) in [("4.0", NfsVersion::V4_0), ("4.1", NfsVersion::V4_1)] {
            let u: NfsUrl = format!("nfs://h/x?version={v}").parse().unwrap();
            assert_eq!(u.version, Some(want));
            assert_eq!(u.to_string(), format!("nfs://h/x?version={v}"));
        }
        let u: NfsUrl = "nfs://h/srv?version=3".parse().unwrap();
        assert_eq!(u.version, Some(NfsVersion::V3));
        assert_eq!(u.to_string().parse::<NfsUrl>().unwrap(), u);
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
            "nfs://h/x?version=2",
            "nfs://h/x?version=4.2",
            "nfs://h/x?version=4&uid=0",
            "nfs://h?version=4",
            // A two-byte character across byte 6 once panicked the scheme check.
            "nfs:/\u{e9}/x",
        ] {
            let e = s.parse::<NfsUrl>().unwrap_err();
            assert!(e.to_string().contains("expected nfs://"), "{s}: {e}");
        }
    }
}
