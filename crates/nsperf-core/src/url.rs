//! `SCHEME://HOST[:PORT]/PATH` targets of the file protocols (`nfs://`, `smb://`): the split
//! both share. Each protocol checks what its path means (an export, a share) after it.

/// Longest path component, bytes: NFSv3 servers and SMB servers both cap a name at 255.
pub const NAME_MAX: usize = 255;

/// The parts of a file-protocol URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlParts<'a> {
    /// Host name or address (IPv6 without brackets).
    pub host: &'a str,
    /// Port, when given (1..65535).
    pub port: Option<u16>,
    /// The path's components: none empty, `.` or `..`, none longer than [`NAME_MAX`].
    pub components: Vec<&'a str>,
}

/// What a protocol's URLs must follow, and how its errors say it.
#[derive(Debug, Clone, Copy)]
pub struct UrlRules {
    /// The scheme, lower case, without `://`.
    pub scheme: &'static str,
    /// The reason given when nothing follows the host (e.g. "no share after the host").
    pub no_path: &'static str,
    /// The reason given for `user@` in the authority.
    pub user_info: &'static str,
}

impl UrlRules {
    /// True when `s` starts with `SCHEME://` in any case.
    pub fn matches(&self, s: &str) -> bool {
        let n = self.scheme.len();
        s.get(..n)
            .is_some_and(|p| p.eq_ignore_ascii_case(self.scheme))
            && s.get(n..n + 3) == Some("://")
    }

    /// Splits `s` into host, port and path components; the error is the reason, for the
    /// protocol's own error message (which names the URL and its expected form).
    pub fn split<'a>(&self, s: &'a str) -> Result<UrlParts<'a>, &'static str> {
        if !self.matches(s) {
            return Err("it does not start with the protocol's scheme://");
        }
        let rest = &s[self.scheme.len() + 3..];
        let slash = rest.find('/').ok_or(self.no_path)?;
        let (authority, path) = rest.split_at(slash);
        if path.contains('?') || path.contains('#') {
            return Err("query and fragment parts are not supported");
        }
        if authority.contains('@') {
            return Err(self.user_info);
        }
        let (host, port) = host_port(authority)?;
        let mut components = Vec::new();
        for c in path.split('/').filter(|c| !c.is_empty()) {
            if c == "." || c == ".." {
                return Err(". and .. are not allowed in the path");
            }
            if c.len() > NAME_MAX {
                return Err("a path component is longer than 255 bytes");
            }
            components.push(c);
        }
        Ok(UrlParts {
            host,
            port,
            components,
        })
    }
}

/// `HOST[:PORT]` or `[V6][:PORT]`.
fn host_port(authority: &str) -> Result<(&str, Option<u16>), &'static str> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let end = v6.find(']').ok_or("unclosed [ in the host")?;
        let after = &v6[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err("junk after ]"),
        };
        (&v6[..end], port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("no host");
    }
    let port = match port {
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or("the port is not 1..65535")?,
        ),
        None => None,
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: UrlRules = UrlRules {
        scheme: "nfs",
        no_path: "no path after the host",
        user_info: "user names are not supported",
    };

    #[test]
    fn splits_hosts_ports_and_paths() {
        let p = R.split("NFS://[::1]:2049/a//b/").unwrap();
        assert_eq!(
            (p.host, p.port, p.components),
            ("::1", Some(2049), vec!["a", "b"])
        );
        let p = R.split("nfs://h/").unwrap();
        assert_eq!((p.host, p.port, p.components.len()), ("h", None, 0));
    }

    #[test]
    fn refuses_with_a_reason() {
        for (s, why) in [
            ("nfs:/h/x", "scheme"),
            ("nfs://h", "no path"),
            ("nfs://u@h/x", "user names"),
            ("nfs://h:0/x", "port"),
            ("nfs://h:70000/x", "port"),
            ("nfs://[::1/x", "unclosed"),
            ("nfs://[::1]x/x", "junk"),
            ("nfs://:1/x", "no host"),
            ("nfs://h/a/../b", ". and .."),
            ("nfs://h/x?y", "query"),
        ] {
            let e = R.split(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    #[test]
    fn a_multibyte_character_at_the_scheme_end_is_no_panic() {
        // "nfs:/" then a two-byte character across byte 6.
        assert!(!R.matches("nfs:/é/x"));
        assert!(!R.matches("nf"));
        assert!(R.split("nfs:/é/x").is_err());
    }
}
