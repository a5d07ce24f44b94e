//! `smb://HOST[:PORT]/SHARE/PATH[?signing=required|if_required]` targets.
//!
//! The first path component is the share; the rest names a directory inside it (the share's
//! root when absent). Without a port, 445 (SMB over TCP). `signing` is smbclient's
//! `client signing` option: `required` (the default) signs every request of an authenticated
//! session; `if_required` signs only when the server requires it, as smbclient and the Linux
//! kernel client do by default. Credentials never appear in the
//! URL (`smb://user@host` is refused): they come from a file or the environment
//! ([`crate::Credentials`]).

use std::fmt;
use std::str::FromStr;

use nsperf_core::url::{UrlParts, UrlRules};

/// The SMB-over-TCP port.
pub const SMB_PORT: u16 = 445;
/// Longest path inside a share nsperf accepts (bytes).
const PATH_MAX: usize = 1024;

/// How `smb://` URLs split.
const RULES: UrlRules = UrlRules {
    scheme: "smb",
    no_path: "no share after the host",
    user_info: "credentials do not go in the URL: use --credentials FILE or NSPERF_SMB_USER/NSPERF_SMB_PASSWORD",
};

/// When the client signs its requests (smbclient's `client signing`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Signing {
    /// Every request of an authenticated session (a guest session cannot sign).
    #[default]
    Required,
    /// Only when the server requires it.
    IfRequired,
}

impl FromStr for Signing {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Signing, &'static str> {
        match s {
            "required" => Ok(Signing::Required),
            "if_required" => Ok(Signing::IfRequired),
            _ => Err("signing is required or if_required"),
        }
    }
}

impl fmt::Display for Signing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signing::Required => "required",
            Signing::IfRequired => "if_required",
        })
    }
}

/// A parsed `smb://` URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SmbUrl {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// TCP port, when given (default 445).
    pub port: Option<u16>,
    /// The share's name.
    pub share: String,
    /// Directory inside the share, components joined with `/`, no leading or trailing
    /// slash (empty for the share's root).
    pub path: String,
    /// When requests are signed (`?signing=`).
    #[serde(default)]
    pub signing: Signing,
}

/// Why a string is not an `smb://` URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad SMB URL '{url}': {why} (expected smb://HOST[:PORT]/SHARE/PATH[?signing=required|if_required])"
)]
pub struct UrlError {
    url: String,
    why: &'static str,
}

impl SmbUrl {
    /// True when `s` looks like an SMB URL (so the CLI can route it to this parser).
    pub fn is_smb_url(s: &str) -> bool {
        RULES.matches(s)
    }

    /// `HOST:PORT` to connect to (`[v6]:PORT` for IPv6).
    pub fn addr(&self) -> String {
        let port = self.port.unwrap_or(SMB_PORT);
        if self.host.contains(':') {
            format!("[{}]:{port}", self.host)
        } else {
            format!("{}:{port}", self.host)
        }
    }

    /// The path of `name` inside the target directory, relative to the share's root.
    pub fn join(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.path)
        }
    }
}

impl FromStr for SmbUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<SmbUrl, UrlError> {
        let bad = |why| UrlError {
            url: s.to_string(),
            why,
        };
        if !SmbUrl::is_smb_url(s) {
            return Err(bad("it does not start with smb://"));
        }
        let (s_path, query) = match s.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (s, None),
        };
        let signing = match query {
            None => Signing::default(),
            Some(q) => q
                .strip_prefix("signing=")
                .ok_or("the only option is signing=required|if_required")
                .and_then(str::parse)
                .map_err(bad)?,
        };
        let UrlParts {
            host,
            port,
            components: parts,
        } = RULES.split(s_path).map_err(bad)?;
        if parts
            .iter()
            .any(|c| c.contains('\\') || c.chars().any(|ch| ch.is_control()))
        {
            return Err(bad("backslashes and control characters are not allowed"));
        }
        let Some((share, dir)) = parts.split_first() else {
            return Err(bad("no share after the host"));
        };
        let path = dir.join("/");
        if path.len() > PATH_MAX {
            return Err(bad("the path is longer than 1024 bytes"));
        }
        Ok(SmbUrl {
            host: host.to_string(),
            port,
            share: share.to_string(),
            path,
            signing,
        })
    }
}

impl fmt::Display for SmbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("smb://")?;
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        write!(f, "/{}", self.share)?;
        if !self.path.is_empty() {
            write!(f, "/{}", self.path)?;
        }
        if self.signing != Signing::default() {
            write!(f, "?signing={}", self.signing)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let u: SmbUrl = "smb://10.77.0.2/data/sub/dir/".parse().unwrap();
        assert_eq!(u.host, "10.77.0.2");
        assert_eq!(u.port, None);
        assert_eq!((u.share.as_str(), u.path.as_str()), ("data", "sub/dir"));
        assert_eq!(u.to_string(), "smb://10.77.0.2/data/sub/dir");
        assert_eq!(u.addr(), "10.77.0.2:445");
        assert_eq!(u.join("f"), "sub/dir/f");
        let u: SmbUrl = "SMB://[::1]:4455//share".parse().unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", Some(4455)));
        assert_eq!(u.path, "");
        assert_eq!(u.join("f"), "f");
        assert_eq!(u.addr(), "[::1]:4455");
        assert_eq!(u.to_string(), "smb://[::1]:4455/share");
        assert_eq!(u.signing, Signing::Required);
        let u: SmbUrl = "smb://h/s/d?signing=if_required".parse().unwrap();
        assert_eq!((u.signing, u.path.as_str()), (Signing::IfRequired, "d"));
        assert_eq!(u.to_string(), "smb://h/s/d?signing=if_required");
        let u: SmbUrl = "smb://h/s?signing=required".parse().unwrap();
        assert_eq!(u.signing, Signing::Required);
        assert_eq!(u.to_string(), "smb://h/s");
    }

    #[test]
    fn rejects() {
        for s in [
            "nfs://h/x",
            "smb://h",
            "smb://h/",
            "smb:///x",
            "smb://h:0/x",
            "smb://h:70000/x",
            "smb://h/s/../b",
            "smb://u:pw@h/x",
            "smb://[::1/x",
            "smb://h/x?user=a",
            "smb://h/x?signing=off",
            "smb://h/x?signing=required&x=1",
            "smb://h?signing=required",
            "smb://h/s/a\\b",
            "smb",
            "",
        ] {
            let e = s.parse::<SmbUrl>().unwrap_err();
            assert!(e.to_string().contains("expected smb://"), "{s}: {e}");
        }
        let e = "smb://u:pw@h/x".parse::<SmbUrl>().unwrap_err().to_string();
        assert!(e.contains("--credentials") && !e.contains('\n'), "{e}");
    }
}
