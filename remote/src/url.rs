//! A server's address as hg's `urlutil.url` reads it: `http://`, `https://`, `ssh://` with
//! an optional `user[:password]@`, a port and a path; anything else is a local path. The
//! password is kept apart and never shown: [`RemoteUrl`]'s `Display` is hg's
//! `hidepassword` form, used in every message and log line.

use std::fmt;

/// How the server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
    Ssh,
    /// A repository on this machine, served by `hg serve --stdio` started here.
    Local,
}

/// A parsed server address.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteUrl {
    pub scheme: Scheme,
    pub user: Option<String>,
    password: Option<String>,
    /// Host name (for `Local`: empty).
    pub host: String,
    pub port: Option<u16>,
    /// The path after the host (`/repo`, possibly empty), or the local path.
    pub path: String,
}

/// Why an address was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid URL {url}: {reason}")]
pub struct UrlError {
    /// The address as given, its password hidden.
    pub url: String,
    pub reason: String,
}

/// `urllib.parse.unquote` of a URL's user or password.
fn percent_decode(s: &str) -> String {
    String::from_utf8_lossy(&revfs_store::bundle::bundle2::unquote(s.as_bytes())).into_owned()
}

/// `s` with any `:password@` replaced by `:***@`, for messages about an address that did
/// not parse.
fn hide(s: &str) -> String {
    if let Some(scheme_end) = s.find("://") {
        let rest = &s[scheme_end + 3..];
        let auth_end = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest[..auth_end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                return format!(
                    "{}{}:***{}",
                    &s[..scheme_end + 3],
                    &rest[..colon],
                    &rest[at..]
                );
            }
        }
    }
    s.to_owned()
}

impl RemoteUrl {
    /// Parses `s` as hg does for `hg clone SOURCE`.
    pub fn parse(s: &str) -> Result<RemoteUrl, UrlError> {
        let err = |reason: &str| UrlError {
            url: hide(s),
            reason: reason.to_owned(),
        };
        let (scheme, rest) = if let Some(r) = s.strip_prefix("http://") {
            (Scheme::Http, r)
        } else if let Some(r) = s.strip_prefix("https://") {
            (Scheme::Https, r)
        } else if let Some(r) = s.strip_prefix("ssh://") {
            (Scheme::Ssh, r)
        } else if let Some(r) = s.strip_prefix("file://") {
            return Ok(RemoteUrl::local(r));
        } else if s.contains("://") {
            return Err(err("unknown scheme"));
        } else {
            return Ok(RemoteUrl::local(s));
        };
        if s.contains('#') {
            return Err(err("a branch (#name) is not supported"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(u) => match u.find(':') {
                Some(i) => (
                    Some(percent_decode(&u[..i])),
                    Some(percent_decode(&u[i + 1..])),
                ),
                None => (Some(percent_decode(u)), None),
            },
        };
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            // [v6]:port
            let end = h.find(']').ok_or_else(|| err("unclosed [ in the host"))?;
            let port = h[end + 1..].strip_prefix(':');
            (format!("[{}]", &h[..end]), port)
        } else {
            match hostport.rfind(':') {
                Some(i) => (hostport[..i].to_owned(), Some(&hostport[i + 1..])),
                None => (hostport.to_owned(), None),
            }
        };
        if host.is_empty() {
            return Err(err("no host"));
        }
        let port = match port.filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => Some(p.parse::<u16>().map_err(|_| err("bad port"))?),
        };
        Ok(RemoteUrl {
            scheme,
            user,
            password,
            host,
            port,
            path: path.to_owned(),
        })
    }

    fn local(path: &str) -> RemoteUrl {
        RemoteUrl {
            scheme: Scheme::Local,
            user: None,
            password: None,
            host: String::new(),
            port: None,
            path: path.to_owned(),
        }
    }

    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// Sets the password (from hg's `[auth]` section).
    pub fn set_password(&mut self, password: Option<String>) {
        self.password = password;
    }

    /// The address without its credentials, for an HTTP request: `scheme://host:port/path`.
    pub fn without_auth(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::Ssh => "ssh",
            Scheme::Local => return self.path.clone(),
        };
        match self.port {
            Some(p) => format!("{scheme}://{}:{p}{}", self.host, self.path),
            None => format!("{scheme}://{}{}", self.host, self.path),
        }
    }

    /// The address to record as the repository's `paths.default`: hg's clone keeps the user
    /// and drops the password.
    pub fn for_config(&self) -> String {
        match (&self.user, self.scheme) {
            (_, Scheme::Local) | (None, _) => self.without_auth(),
            (Some(u), _) => {
                let plain = self.without_auth();
                let i = plain.find("://").map_or(0, |i| i + 3);
                format!("{}{}@{}", &plain[..i], u, &plain[i..])
            }
        }
    }

    /// The last part of the path, as hg names a clone's directory (`hg clone URL`).
    pub fn default_dest(&self) -> String {
        let trimmed = self.path.trim_end_matches('/');
        let base = trimmed.rsplit('/').next().unwrap_or("");
        if base.is_empty() {
            self.host.trim_matches(|c| c == '[' || c == ']').to_owned()
        } else {
            base.to_owned()
        }
    }
}

impl fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plain = self.for_config();
        if self.password.is_some() && self.user.is_some() {
            let at = plain.find('@').unwrap_or(0);
            write!(f, "{}:***{}", &plain[..at], &plain[at..])
        } else {
            f.write_str(&plain)
        }
    }
}

impl fmt::Debug for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RemoteUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_as_hgs_and_never_show_the_password() {
        let u = RemoteUrl::parse("https://joe:s%40cret@example.com:8443/repos/big/").unwrap();
        assert_eq!(u.scheme, Scheme::Https);
        assert_eq!(u.user.as_deref(), Some("joe"));
        assert_eq!(u.password(), Some("s@cret"));
        assert_eq!((u.host.as_str(), u.port), ("example.com", Some(8443)));
        assert_eq!(u.without_auth(), "https://example.com:8443/repos/big/");
        assert_eq!(u.for_config(), "https://joe@example.com:8443/repos/big/");
        assert_eq!(u.to_string(), "https://joe:***@example.com:8443/repos/big/");
        assert!(!format!("{u:?}").contains("cret"));
        assert_eq!(u.default_dest(), "big");
        let u = RemoteUrl::parse("http://127.0.0.1:8000/").unwrap();
        assert_eq!(u.default_dest(), "127.0.0.1");
        let u = RemoteUrl::parse("ssh://hg@[::1]:2222/r").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("[::1]", Some(2222)));
        let u = RemoteUrl::parse("../some/repo").unwrap();
        assert_eq!((u.scheme, u.default_dest()), (Scheme::Local, "repo".into()));
        let e = RemoteUrl::parse("http://joe:pw@host:x/").unwrap_err();
        assert!(!e.to_string().contains("pw"), "{e}");
        assert!(RemoteUrl::parse("gopher://x/").is_err());
    }
}
