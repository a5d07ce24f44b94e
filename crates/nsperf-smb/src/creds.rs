//! Who to log on as: smbclient's authentication file (`--credentials FILE`), the
//! environment, or a guest session — never the command line, where `ps` would show a password.
//!
//! The file has `username = NAME`, `password = SECRET` and `domain = NAME` lines, as
//! smbclient's `-A` takes (blank lines and lines starting with `#` or `;` are skipped; a
//! `DOMAIN\user` or `DOMAIN/user` name gives the domain when no `domain` line does). The
//! environment: `NSPERF_SMB_USER`, `NSPERF_SMB_PASSWORD`, `NSPERF_SMB_DOMAIN`; or, like
//! smbclient, `USER` with `PASSWD` (only when `PASSWD` is set: `USER` alone is everyone's
//! login name, not a wish to log on).

use std::fmt;
use std::path::Path;

/// Longest credentials file read (bytes): a real one is a few lines.
const FILE_MAX: u64 = 64 << 10;

/// A user name, password and domain; a guest session when the user name is empty.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// User name (empty: guest).
    pub username: String,
    /// Password.
    pub password: String,
    /// Domain or workgroup (empty: the server's own).
    pub domain: String,
}

/// Where credentials came from (for reports: never the secret itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialSource {
    /// `--credentials FILE`.
    File,
    /// `NSPERF_SMB_USER` and friends, or `USER` with `PASSWD`.
    Environment,
    /// None given: a guest session.
    Guest,
}

/// Why credentials could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("credentials {origin}: {why}")]
pub struct CredError {
    origin: String,
    why: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("domain", &self.domain)
            .field(
                "password",
                &if self.password.is_empty() { "" } else { "***" },
            )
            .finish()
    }
}

impl Credentials {
    /// A guest session.
    pub fn guest() -> Credentials {
        Credentials::default()
    }

    /// True for a guest session.
    pub fn is_guest(&self) -> bool {
        self.username.is_empty()
    }

    /// The contents of an authentication file (`origin` names it in errors).
    pub fn parse_file(text: &str, origin: &str) -> Result<Credentials, CredError> {
        let err = |why: String| CredError {
            origin: origin.to_string(),
            why,
        };
        let mut c = Credentials::default();
        let mut seen_user = false;
        for (n, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
                continue;
            }
            let Some((k, v)) = t.split_once('=') else {
                return Err(err(format!(
                    "line {} is not KEY = VALUE (username, password, domain)",
                    n + 1
                )));
            };
            let v = v.trim().to_string();
            match k.trim().to_ascii_lowercase().as_str() {
                "username" | "user" => {
                    c.username = v;
                    seen_user = true;
                }
                "password" => c.password = v,
                "domain" | "workgroup" => c.domain = v,
                other => {
                    return Err(err(format!(
                        "line {}: unknown key '{other}' (username, password, domain)",
                        n + 1
                    )));
                }
            }
        }
        if !seen_user || c.username.is_empty() {
            return Err(err("no username line".into()));
        }
        c.split_domain();
        Ok(c)
    }

    /// Reads an authentication file.
    pub fn from_file(path: &Path) -> Result<Credentials, CredError> {
        let origin = path.display().to_string();
        let err = |why: String| CredError {
            origin: origin.clone(),
            why,
        };
        let md = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
        if !md.is_file() || md.len() > FILE_MAX {
            return Err(err("not a regular file of at most 64 KiB".into()));
        }
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        Credentials::parse_file(&text, &origin)
    }

    /// Credentials from environment variables read through `get` (`None`: none given).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Option<Credentials> {
        let get = |k: &str| get(k).filter(|v| !v.is_empty());
        let mut c = if let Some(user) = get("NSPERF_SMB_USER") {
            Credentials {
                username: user,
                password: get("NSPERF_SMB_PASSWORD").unwrap_or_default(),
                domain: get("NSPERF_SMB_DOMAIN").unwrap_or_default(),
            }
        } else {
            let password = get("PASSWD")?;
            Credentials {
                username: get("USER")?,
                password,
                domain: get("NSPERF_SMB_DOMAIN").unwrap_or_default(),
            }
        };
        c.split_domain();
        Some(c)
    }

    /// Credentials from `file` if given, else the process's environment, else a guest
    /// session.
    pub fn resolve(file: Option<&Path>) -> Result<(Credentials, CredentialSource), CredError> {
        if let Some(f) = file {
            return Ok((Credentials::from_file(f)?, CredentialSource::File));
        }
        Ok(match Credentials::from_vars(|k| std::env::var(k).ok()) {
            Some(c) => (c, CredentialSource::Environment),
            None => (Credentials::guest(), CredentialSource::Guest),
        })
    }

    /// `DOMAIN\user` or `DOMAIN/user` → domain and user, unless a domain was given.
    fn split_domain(&mut self) {
        if let Some((d, u)) = self.username.split_once(['\\', '/']) {
            if self.domain.is_empty() {
                self.domain = d.to_string();
            }
            self.username = u.to_string();
        }
    }
}

impl fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CredentialSource::File => "file",
            CredentialSource::Environment => "environment",
            CredentialSource::Guest => "guest",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_format_of_smbclient() {
        let c = Credentials::parse_file(
            "# lab user\nusername = nsperf\npassword = a b=c \n\ndomain=LAB\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.username, "nsperf");
        assert_eq!(c.password, "a b=c");
        assert_eq!(c.domain, "LAB");
        let c = Credentials::parse_file("username=WG\\bob\npassword=x", "t").unwrap();
        assert_eq!((c.domain.as_str(), c.username.as_str()), ("WG", "bob"));
        assert!(!format!("{c:?}").contains('x'));
        for bad in ["password=x", "username bob", "username=a\ncolour=red", ""] {
            let e = Credentials::parse_file(bad, "f").unwrap_err().to_string();
            assert!(e.starts_with("credentials f: ") && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let c = Credentials::from_vars(env(&[
            ("NSPERF_SMB_USER", "alice"),
            ("NSPERF_SMB_PASSWORD", "pw"),
            ("USER", "root"),
        ]))
        .unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("alice", "pw"));
        let c = Credentials::from_vars(env(&[("USER", "bob"), ("PASSWD", "pw2")])).unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("bob", "pw2"));
        assert_eq!(Credentials::from_vars(env(&[("USER", "root")])), None);
        assert_eq!(Credentials::from_vars(env(&[])), None);
        assert!(Credentials::guest().is_guest());
    }

    #[test]
    fn missing_file() {
        let e = Credentials::from_file(Path::new("/no/such/creds")).unwrap_err();
        assert!(e.to_string().starts_with("credentials /no/such/creds: "));
    }
}
