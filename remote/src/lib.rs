//! revfs-remote: a Mercurial server as revfs talks to it. A stock server (`hg serve`,
//! hgweb) with Mercurial's bundled `remotefilelog` extension in server mode gives a clone
//! its changelog and manifests without a single file revision ([`clone`]), and each file
//! revision later, on demand (`x_rfl_getfile`). This crate owns the peers ([`http`]), the
//! version-1 wire protocol's encoding ([`wire`]) and server addresses ([`url`]); what it
//! receives is parsed and verified by the store (store::bundle, store::shallow).
//! docs/research/remotefilelog-protocol.md has the Mercurial sources this rests on.

pub mod clone;
pub mod fetch;
mod health;
pub mod http;
pub mod ssh;
pub mod tls;
pub mod url;
pub mod wire;

pub use url::{RemoteUrl, Scheme, UrlError};

/// Why a server could not be used. Messages name the server by its address with the
/// password hidden, never with credentials.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// Connecting, sending or reading failed (hg: `abort: error: ...`).
    #[error("error: {reason} ({url})")]
    Transport { url: String, reason: String },
    /// The server did not answer within the request's deadline (hg: `abort: error: ...`).
    #[error("error: {reason} ({url})")]
    Silent { url: String, reason: String },
    /// An HTTP status other than success (hg's words).
    #[error("HTTP Error {status}: {reason} ({url})")]
    Http {
        url: String,
        status: u16,
        reason: String,
    },
    #[error("authorization failed ({url})")]
    Auth { url: String },
    /// The server's own abort (`application/hg-error`).
    #[error("remote error:\n{message}")]
    Server { message: String },
    /// An answer that is not what the protocol says.
    #[error("{url}: {reason}")]
    Protocol { url: String, reason: String },
    /// The server lacks what revfs needs.
    #[error("{message}")]
    Unsupported { message: String, hint: String },
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("{what}")]
    Config { what: String },
    /// A server certificate refused (hg's `SecurityError`), with hg's hint.
    #[error("{message}")]
    Security { message: String, hint: String },
}

impl RemoteError {
    /// Whether the server did not answer in time (as opposed to refusing or failing).
    pub fn is_silence(&self) -> bool {
        matches!(self, RemoteError::Silent { .. })
    }

    /// hg's hint line for this error, if it has one.
    pub fn hint(&self) -> Option<&str> {
        match self {
            RemoteError::Unsupported { hint, .. } | RemoteError::Security { hint, .. } => {
                Some(hint)
            }
            _ => None,
        }
    }
}

/// A server's capabilities (the answer to `capabilities`): space-separated names, some
/// with `=value`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caps {
    list: Vec<String>,
}

impl Caps {
    pub fn parse(answer: &[u8]) -> Caps {
        Caps {
            list: String::from_utf8_lossy(answer)
                .split_ascii_whitespace()
                .map(str::to_owned)
                .collect(),
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.list
            .iter()
            .any(|c| c == name || c.strip_prefix(name).is_some_and(|r| r.starts_with('=')))
    }

    pub fn value(&self, name: &str) -> Option<&str> {
        self.list
            .iter()
            .find_map(|c| c.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
    }
}

/// A connected server.
pub enum Peer {
    Http(http::HttpPeer),
    Ssh(ssh::SshPeer),
}

/// How to reach servers, by transport.
#[derive(Debug, Clone, Default)]
pub struct PeerOptions {
    pub http: http::HttpOptions,
    pub ssh: ssh::SshOptions,
}

impl Peer {
    /// Connects to the server at `url`: HTTP(S), ssh, or a repository on this machine
    /// (served by `hg serve --stdio` started here).
    pub fn open(url: &RemoteUrl, opts: &PeerOptions) -> Result<Peer, RemoteError> {
        match url.scheme {
            Scheme::Http | Scheme::Https => Ok(Peer::Http(http::HttpPeer::open(url, &opts.http)?)),
            Scheme::Ssh | Scheme::Local => Ok(Peer::Ssh(ssh::SshPeer::open(url, &opts.ssh)?)),
        }
    }

    pub fn url(&self) -> &RemoteUrl {
        match self {
            Peer::Http(p) => p.url(),
            Peer::Ssh(p) => p.url(),
        }
    }

    pub fn caps(&self) -> &Caps {
        match self {
            Peer::Http(p) => p.caps(),
            Peer::Ssh(p) => p.caps(),
        }
    }

    /// A whole small answer to `cmd`.
    pub fn call_bytes(
        &self,
        cmd: &str,
        args: &[(&str, &[u8])],
        limit: u64,
    ) -> Result<Vec<u8>, RemoteError> {
        match self {
            Peer::Http(p) => p.call_bytes(cmd, args, limit),
            Peer::Ssh(p) => p.call_bytes(cmd, args, limit),
        }
    }

    /// The answer to `cmd` as a stream.
    pub fn call(
        &self,
        cmd: &str,
        args: &[(&str, &[u8])],
    ) -> Result<Box<dyn std::io::Read + Send>, RemoteError> {
        match self {
            Peer::Http(p) => p.call(cmd, args),
            Peer::Ssh(p) => p.call(cmd, args),
        }
    }

    /// The server's heads (`heads`).
    pub fn heads(&self) -> Result<Vec<revfs_store::Node>, RemoteError> {
        let answer = self.call_bytes("heads", &[], 64 << 20)?;
        String::from_utf8_lossy(&answer)
            .split_ascii_whitespace()
            .map(|h| {
                revfs_store::Node::from_hex(h.as_bytes()).ok_or_else(|| RemoteError::Protocol {
                    url: self.url().to_string(),
                    reason: format!("a head that is not a node: {h:?}"),
                })
            })
            .collect()
    }
}
