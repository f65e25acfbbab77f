//! An hg server over HTTP(S), as `hg serve` and hgweb answer it (`httppeer`): every
//! command a GET of `<url>?cmd=<name>` with its arguments in `X-HgArg-<n>` headers
//! ([`crate::wire`]), the answer's body read as a stream. The server's own error text
//! (`application/hg-error`) and HTTP failures become [`RemoteError`]s in hg's words; the
//! credentials go in an `Authorization` header and appear in no message.
//!
//! TLS: hg's checks (crate::tls): the pins or authorities of `[hostsecurity]` and
//! `web.cacerts` for the server's host, else the system's authorities.

use crate::url::{RemoteUrl, Scheme};
use crate::wire;
use crate::RemoteError;
use revfs_hg::config::HostSecurity;
use std::io::Read;
use std::time::Duration;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{ConnectProxyConnector, Connector, TcpConnector};

/// How to reach a server over HTTP.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Bound on connecting (and on the TLS handshake).
    pub connect_timeout: Duration,
    /// Bound on a whole request (sending, waiting and reading the answer), or none: a clone's
    /// bundle may take minutes, a daemon's fetch must not.
    pub request_timeout: Option<Duration>,
    /// hg's TLS settings for the server's host (`revfs_hg::config::host_security`);
    /// `None`: the system's authorities.
    pub tls: Option<HostSecurity>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(30),
            request_timeout: None,
            tls: None,
        }
    }
}

/// A connection pool to one server, and what it said it can do.
pub struct HttpPeer {
    agent: ureq::Agent,
    url: RemoteUrl,
    base: String,
    auth: Option<String>,
    caps: crate::Caps,
}

/// RFC 4648 base64 of `data`, for HTTP basic authentication.
fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `Authorization` header of HTTP basic authentication (RFC 7617).
pub fn basic_auth(user: &str, password: &str) -> String {
    format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
}

impl HttpPeer {
    /// Connects to `url` and reads its capabilities.
    pub fn open(url: &RemoteUrl, opts: &HttpOptions) -> Result<HttpPeer, RemoteError> {
        debug_assert!(matches!(url.scheme, Scheme::Http | Scheme::Https));
        let tls = crate::tls::connector(&url.host, opts.tls.as_ref())
            .map_err(|what| RemoteError::Config { what })?;
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(opts.connect_timeout))
            .timeout_global(opts.request_timeout)
            .user_agent("mercurial/proto-1.0 (revfs)")
            .build();
        let auth = url
            .user
            .as_ref()
            .map(|u| basic_auth(u, url.password().unwrap_or("")));
        // ureq's TCP connection (through a CONNECT proxy if one is set), then TLS here.
        let connector =
            ().chain(ConnectProxyConnector::default())
                .chain(TcpConnector::default())
                .chain(tls);
        let mut peer = HttpPeer {
            agent: ureq::Agent::with_parts(config, connector, DefaultResolver::default()),
            url: url.clone(),
            base: url.without_auth(),
            auth,
            caps: crate::Caps::default(),
        };
        peer.caps = crate::Caps::parse(&peer.call_bytes("capabilities", &[], 1 << 20)?);
        Ok(peer)
    }

    pub fn caps(&self) -> &crate::Caps {
        &self.caps
    }

    pub fn url(&self) -> &RemoteUrl {
        &self.url
    }

    fn io_error(&self, e: std::io::Error) -> RemoteError {
        let (url, reason) = (self.url.to_string(), e.to_string());
        if e.kind() == std::io::ErrorKind::TimedOut {
            RemoteError::Silent { url, reason }
        } else {
            RemoteError::Transport { url, reason }
        }
    }

    /// Runs wire command `cmd` with `args`; the answer's body as a stream.
    pub fn call(
        &self,
        cmd: &str,
        args: &[(&str, &[u8])],
    ) -> Result<Box<dyn Read + Send>, RemoteError> {
        let target = format!("{}?cmd={cmd}", self.base);
        let mut req = self
            .agent
            .get(&target)
            .header("Accept", "application/mercurial-0.1")
            .header("X-HgProto-1", "0.1 0.2 comp=zstd,zlib,none");
        if let Some(a) = &self.auth {
            req = req.header("Authorization", a);
        }
        if !args.is_empty() {
            let limit = self
                .caps
                .value("httpheader")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(1024);
            for (name, value) in wire::arg_headers(&wire::urlencode(args), limit) {
                req = req.header(name, value);
            }
        }
        let resp = req.call().map_err(|e| match crate::tls::refusal(&e) {
            Some(r) => RemoteError::Security {
                message: r.message.clone(),
                hint: r.hint.clone(),
            },
            None => match e {
                ureq::Error::Io(io) => self.io_error(io),
                ureq::Error::Timeout(_) => RemoteError::Silent {
                    url: self.url.to_string(),
                    reason: e.to_string(),
                },
                other => RemoteError::Transport {
                    url: self.url.to_string(),
                    reason: other.to_string(),
                },
            },
        })?;
        let status = resp.status();
        let ctype = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let mut body = resp.into_body().into_reader();
        if status.as_u16() == 401 {
            return Err(RemoteError::Auth {
                url: self.url.to_string(),
            });
        }
        if !status.is_success() {
            return Err(RemoteError::Http {
                url: self.url.to_string(),
                status: status.as_u16(),
                reason: status.canonical_reason().unwrap_or("").to_owned(),
            });
        }
        if ctype.starts_with("application/hg-error") {
            let mut text = Vec::new();
            let _ = (&mut body).take(64 << 10).read_to_end(&mut text);
            return Err(RemoteError::Server {
                message: String::from_utf8_lossy(&text).trim_end().to_owned(),
            });
        }
        if ctype.starts_with("application/mercurial-0.2") {
            // One byte of length, the engine's name, then the stream.
            let mut len = [0u8; 1];
            body.read_exact(&mut len).map_err(|e| self.io_error(e))?;
            let mut name = vec![0u8; len[0] as usize];
            body.read_exact(&mut name).map_err(|e| self.io_error(e))?;
            return match name.as_slice() {
                b"zstd" => Ok(Box::new(
                    zstd::stream::read::Decoder::new(body).map_err(|e| self.io_error(e))?,
                )),
                b"zlib" => Ok(Box::new(flate2::read::ZlibDecoder::new(body))),
                b"none" => Ok(Box::new(body)),
                other => Err(RemoteError::Protocol {
                    url: self.url.to_string(),
                    reason: format!(
                        "unknown compression engine {}",
                        String::from_utf8_lossy(other)
                    ),
                }),
            };
        }
        if ctype.starts_with("application/mercurial-0.1") && cmd == "getbundle" {
            // The version-1 media type compresses only streamed answers, with zlib.
            return Ok(Box::new(flate2::read::ZlibDecoder::new(body)));
        }
        if !ctype.starts_with("application/mercurial-") {
            return Err(RemoteError::Protocol {
                url: self.url.to_string(),
                reason: format!("'{ctype}' is not a Mercurial answer (is this a repository?)"),
            });
        }
        Ok(Box::new(body))
    }

    /// A whole (small) answer: at most `limit` bytes.
    pub fn call_bytes(
        &self,
        cmd: &str,
        args: &[(&str, &[u8])],
        limit: u64,
    ) -> Result<Vec<u8>, RemoteError> {
        let mut out = Vec::new();
        self.call(cmd, args)?
            .take(limit + 1)
            .read_to_end(&mut out)
            .map_err(|e| self.io_error(e))?;
        if out.len() as u64 > limit {
            return Err(RemoteError::Protocol {
                url: self.url.to_string(),
                reason: format!("the answer to {cmd} is over {limit} bytes"),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_is_rfc_4648() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(super::base64(b"joe:s@cret"), "am9lOnNAY3JldA==");
    }
}
