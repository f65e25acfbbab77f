//! hg's TLS settings for one host (`sslutil._hostsettings`, Mercurial 6.3): pinned
//! certificate fingerprints (`[hostsecurity] HOST:fingerprints`, and the legacy
//! `[hostfingerprints] HOST`, SHA-1), which are then the only check; else the authorities
//! to trust (`HOST:verifycertsfile`, else `web.cacerts`, else the system's); and the
//! lowest protocol (`minimumprotocol`, `HOST:minimumprotocol`: tls1.0, tls1.1, tls1.2).
//! `ciphers` is OpenSSL's syntax, which a client without OpenSSL has no use for.

use super::{expand_path, Config, Env};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use thiserror::Error;

/// A hash of a certificate's DER bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FingerprintAlg {
    Sha1,
    Sha256,
    Sha512,
}

impl FingerprintAlg {
    pub fn name(self) -> &'static str {
        match self {
            FingerprintAlg::Sha1 => "sha1",
            FingerprintAlg::Sha256 => "sha256",
            FingerprintAlg::Sha512 => "sha512",
        }
    }
}

/// A pinned certificate: its hash, lower-case hex without colons, as hg compares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub alg: FingerprintAlg,
    pub hex: String,
}

/// The protocols hg's `minimumprotocol` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsProtocol {
    Tls1_0,
    Tls1_1,
    Tls1_2,
}

/// What a connection to one host checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSecurity {
    /// Pinned certificates: the server's must be one of them, and nothing else is checked.
    pub fingerprints: Vec<Fingerprint>,
    /// The pins came from `[hostfingerprints]` (hg's mismatch message then names it).
    pub legacy_fingerprint: bool,
    /// The authorities to trust without pins; `None`: the system's.
    pub cafile: Option<PathBuf>,
    /// The lowest protocol to accept (hg's default: tls1.1).
    pub minimum_protocol: TlsProtocol,
    /// hg's warnings (a `verifycertsfile` beside pins is ignored).
    pub warnings: Vec<String>,
}

/// A setting hg refuses, in hg's words (printed after `abort: `, with [`Self::hint`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostSecurityError {
    #[error("unsupported protocol from hostsecurity.{key}: {value}")]
    Protocol { key: String, value: String },
    #[error("invalid fingerprint for {host}: {value}")]
    Fingerprint { host: String, value: String },
    #[error("path specified by hostsecurity.{host}:verifycertsfile does not exist: {path}")]
    NoVerifyCertsFile { host: String, path: String },
    /// (Debian's hg adds the package to install.)
    #[error("could not find web.cacerts: {path} (try installing the ca-certificates package)")]
    NoCacerts { path: String },
}

impl HostSecurityError {
    /// hg's hint line, if it gives one.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            HostSecurityError::Protocol { .. } => Some("valid protocols: tls1.0 tls1.1 tls1.2"),
            HostSecurityError::Fingerprint { .. } => {
                Some("must begin with \"sha1:\", \"sha256:\", or \"sha512:\"")
            }
            _ => None,
        }
    }
}

fn protocol(
    config: &Config,
    key: &str,
    default: TlsProtocol,
) -> Result<TlsProtocol, HostSecurityError> {
    let Some(v) = config.get("hostsecurity", key) else {
        return Ok(default);
    };
    match v {
        b"tls1.0" => Ok(TlsProtocol::Tls1_0),
        b"tls1.1" => Ok(TlsProtocol::Tls1_1),
        b"tls1.2" => Ok(TlsProtocol::Tls1_2),
        other => Err(HostSecurityError::Protocol {
            key: key.to_owned(),
            value: String::from_utf8_lossy(other).into_owned(),
        }),
    }
}

fn fingerprint_hex(v: &[u8]) -> String {
    String::from_utf8_lossy(v).replace(':', "").to_lowercase()
}

/// The settings for connections to `host` (as the URL names it, without port).
pub fn host_security(
    config: &Config,
    env: &Env,
    host: &str,
) -> Result<HostSecurity, HostSecurityError> {
    let minimum = protocol(config, "minimumprotocol", TlsProtocol::Tls1_1)?;
    let minimum_protocol = protocol(config, &format!("{host}:minimumprotocol"), minimum)?;
    let mut fingerprints = Vec::new();
    for item in config
        .get_list("hostsecurity", &format!("{host}:fingerprints"))
        .unwrap_or_default()
    {
        let (alg, rest) = match item
            .iter()
            .position(|&b| b == b':')
            .map(|i| item.split_at(i))
        {
            Some((b"sha1", r)) => (FingerprintAlg::Sha1, &r[1..]),
            Some((b"sha256", r)) => (FingerprintAlg::Sha256, &r[1..]),
            Some((b"sha512", r)) => (FingerprintAlg::Sha512, &r[1..]),
            _ => {
                return Err(HostSecurityError::Fingerprint {
                    host: host.to_owned(),
                    value: String::from_utf8_lossy(&item).into_owned(),
                })
            }
        };
        fingerprints.push(Fingerprint {
            alg,
            hex: fingerprint_hex(rest),
        });
    }
    let mut legacy_fingerprint = false;
    for item in config
        .get_list("hostfingerprints", host)
        .unwrap_or_default()
    {
        fingerprints.push(Fingerprint {
            alg: FingerprintAlg::Sha1,
            hex: fingerprint_hex(&item),
        });
        legacy_fingerprint = true;
    }
    let path = |v: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(&expand_path(v, env)));
    let verifycertsfile = config.get("hostsecurity", &format!("{host}:verifycertsfile"));
    let mut warnings = Vec::new();
    let mut cafile = None;
    if !fingerprints.is_empty() {
        if verifycertsfile.is_some() {
            warnings.push(format!(
                "(hostsecurity.{host}:verifycertsfile ignored when host fingerprints defined; \
                 using host fingerprints for verification)"
            ));
        }
    } else if let Some(v) = verifycertsfile {
        let p = path(v);
        if !p.exists() {
            return Err(HostSecurityError::NoVerifyCertsFile {
                host: host.to_owned(),
                path: p.display().to_string(),
            });
        }
        cafile = Some(p);
    } else if let Some(v) = config.get("web", "cacerts") {
        let p = path(v);
        if !p.exists() {
            return Err(HostSecurityError::NoCacerts {
                path: p.display().to_string(),
            });
        }
        cafile = Some(p);
    }
    Ok(HostSecurity {
        fingerprints,
        legacy_fingerprint,
        cafile,
        minimum_protocol,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str, host: &str) -> Result<HostSecurity, HostSecurityError> {
        let dir = tempfile::tempdir().unwrap();
        let rc = dir.path().join("hgrc");
        std::fs::write(&rc, text.replace("$DIR", &dir.path().display().to_string())).unwrap();
        std::fs::write(dir.path().join("ca.pem"), "").unwrap();
        let env = Env::from_vars([
            ("HGRCPATH", rc.as_os_str()),
            ("HOME", dir.path().as_os_str()),
        ]);
        let config = Config::load_env(&env, None).unwrap();
        host_security(&config, &env, host).map(|mut s| {
            // The temporary directory's name, out of the comparison.
            s.cafile = s.cafile.map(|p| p.file_name().unwrap().into());
            s
        })
    }

    #[test]
    fn pins_win_over_authorities_and_the_host_setting_over_the_global_one() {
        let s = settings(
            "[hostsecurity]\nminimumprotocol = tls1.2\nh:fingerprints = sha256:AB:cd, \
             sha1:0011\nh:verifycertsfile = $DIR/ca.pem\n[hostfingerprints]\nh = 22:33\n",
            "h",
        )
        .unwrap();
        let fp = |alg, hex: &str| Fingerprint {
            alg,
            hex: hex.to_owned(),
        };
        assert_eq!(
            s.fingerprints,
            [
                fp(FingerprintAlg::Sha256, "abcd"),
                fp(FingerprintAlg::Sha1, "0011"),
                fp(FingerprintAlg::Sha1, "2233")
            ]
        );
        assert!(s.legacy_fingerprint);
        assert_eq!(s.cafile, None);
        assert_eq!(s.minimum_protocol, TlsProtocol::Tls1_2);
        assert_eq!(s.warnings.len(), 1);
        // Another host: the global settings.
        let s = settings(
            "[hostsecurity]\nh:fingerprints = sha256:ab\n[web]\ncacerts = $DIR/ca.pem\n",
            "other",
        )
        .unwrap();
        assert!(s.fingerprints.is_empty());
        assert_eq!(s.cafile, Some("ca.pem".into()));
        assert_eq!(s.minimum_protocol, TlsProtocol::Tls1_1);
        let s = settings(
            "[hostsecurity]\nh:verifycertsfile = $DIR/ca.pem\nh:minimumprotocol = tls1.0\n\
             [web]\ncacerts = /nonexistent\n",
            "h",
        )
        .unwrap();
        assert_eq!(s.cafile, Some("ca.pem".into()));
        assert_eq!(s.minimum_protocol, TlsProtocol::Tls1_0);
    }

    #[test]
    fn bad_settings_are_hgs_aborts() {
        let err = |text| settings(text, "h").unwrap_err();
        let e = err("[hostsecurity]\nh:minimumprotocol = ssl3\n");
        assert_eq!(
            e.to_string(),
            "unsupported protocol from hostsecurity.h:minimumprotocol: ssl3"
        );
        assert_eq!(e.hint(), Some("valid protocols: tls1.0 tls1.1 tls1.2"));
        let e = err("[hostsecurity]\nh:fingerprints = md5:00\n");
        assert_eq!(e.to_string(), "invalid fingerprint for h: md5:00");
        let e = err("[hostsecurity]\nh:verifycertsfile = /nonexistent/ca\n");
        assert_eq!(
            e.to_string(),
            "path specified by hostsecurity.h:verifycertsfile does not exist: /nonexistent/ca"
        );
        let e = err("[web]\ncacerts = /nonexistent/ca\n");
        assert_eq!(
            e.to_string(),
            "could not find web.cacerts: /nonexistent/ca (try installing the ca-certificates \
             package)"
        );
    }
}
