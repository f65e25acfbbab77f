//! TLS to an HTTPS server, with the checks hg's `sslutil` makes (Mercurial 6.3), on rustls:
//!
//! * **Pinned certificates** (`[hostsecurity] HOST:fingerprints`, the legacy
//!   `[hostfingerprints]`): the hash of the server's certificate must be one of them, and
//!   nothing else about it is checked (no authority, no name, no dates), as in hg. Its
//!   handshake signature is still checked against it, so only the holder of its key passes.
//! * **Authorities** otherwise: `HOST:verifycertsfile`, else `web.cacerts`, else the system's
//!   bundle (`/etc/ssl/certs/ca-certificates.crt`), else the Mozilla roots built in. The
//!   certificate must chain to one of them and name the host.
//!
//! A refusal carries hg's words and hint ([`TlsRefused`], found by [`refusal`] in a failed
//! request's error): a pin that does not match says which fingerprint the server has, and
//! a certificate no authority vouches for says how to pin it. TLS 1.2 and 1.3 only: rustls
//! has nothing older, and every `minimumprotocol` hg accepts is at or below 1.2.
//!
//! ureq makes the TCP connection; [`TlsConnector`] wraps it (ureq's unversioned transport
//! API, pinned by Cargo.lock).

use revfs_hg::config::{FingerprintAlg, HostSecurity};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};
use std::fmt;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport,
    TransportAdapter,
};

/// Where roots come from when the configuration names no file.
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Why a server's certificate was refused, in hg's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsRefused {
    pub message: String,
    pub hint: String,
}

impl fmt::Display for TlsRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TlsRefused {}

/// The [`TlsRefused`] behind a failed request's error, if that is why it failed.
pub fn refusal(e: &ureq::Error) -> Option<&TlsRefused> {
    let ureq::Error::Io(io) = e else {
        return None;
    };
    match io.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::InvalidCertificate(rustls::CertificateError::Other(o)) => {
            o.0.downcast_ref::<TlsRefused>()
        }
        _ => None,
    }
}

fn refuse(message: String, hint: String) -> rustls::Error {
    rustls::Error::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(
        Arc::new(TlsRefused { message, hint }),
    )))
}

/// A certificate's hash, lower-case hex.
fn fingerprint(alg: FingerprintAlg, der: &[u8]) -> String {
    let alg = match alg {
        FingerprintAlg::Sha1 => &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        FingerprintAlg::Sha256 => &ring::digest::SHA256,
        FingerprintAlg::Sha512 => &ring::digest::SHA512,
    };
    hex::encode(ring::digest::digest(alg, der))
}

/// hg's way of showing a fingerprint: hex bytes joined by colons.
fn colons(hex: &str) -> String {
    hex.as_bytes()
        .chunks(2)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(":")
}

/// What a certificate must pass.
enum Check {
    Pinned { security: HostSecurity },
    Authorities { webpki: Arc<dyn ServerCertVerifier> },
}

/// The verifier of one host's certificates.
struct Verifier {
    host: String,
    check: Check,
    provider: Arc<CryptoProvider>,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("host", &self.host)
            .finish()
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let host = &self.host;
        let nice = || {
            format!(
                "sha256:{}",
                colons(&fingerprint(FingerprintAlg::Sha256, end_entity))
            )
        };
        match &self.check {
            Check::Pinned { security } => {
                if security
                    .fingerprints
                    .iter()
                    .any(|p| fingerprint(p.alg, end_entity) == p.hex)
                {
                    return Ok(ServerCertVerified::assertion());
                }
                // hg names the algorithm of the last pin it tried (sslutil.validatesocket).
                let (section, shown) = if security.legacy_fingerprint {
                    (
                        "hostfingerprint",
                        colons(&fingerprint(FingerprintAlg::Sha1, end_entity)),
                    )
                } else {
                    let alg = security
                        .fingerprints
                        .last()
                        .map_or(FingerprintAlg::Sha256, |p| p.alg);
                    let hex = fingerprint(alg, end_entity);
                    ("hostsecurity", format!("{}:{}", alg.name(), colons(&hex)))
                };
                Err(refuse(
                    format!("certificate for {host} has unexpected fingerprint {shown}"),
                    format!("check {section} configuration"),
                ))
            }
            Check::Authorities { webpki } => webpki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
                .map_err(|e| {
                    refuse(
                        format!("{host} certificate error: {e}"),
                        format!(
                            "set hostsecurity.{host}:fingerprints={} config setting to trust \
                             this server",
                            nice()
                        ),
                    )
                }),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The authorities of a PEM file.
fn roots_of(file: &Path) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::pem::PemObject;
    let pem = std::fs::read(file)
        .map_err(|e| format!("could not read certificates {}: {e}", file.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem).flatten() {
        // A certificate rustls cannot take as an authority is skipped, as OpenSSL does.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(format!("no certificates in {}", file.display()));
    }
    Ok(roots)
}

/// The TLS of connections to `host` under `security` (`None`: the system's authorities).
pub fn connector(host: &str, security: Option<&HostSecurity>) -> Result<TlsConnector, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let check = match security {
        Some(s) if !s.fingerprints.is_empty() => Check::Pinned {
            security: s.clone(),
        },
        _ => {
            let file = security
                .and_then(|s| s.cafile.clone())
                .or_else(|| Some(SYSTEM_ROOTS.into()).filter(|p: &std::path::PathBuf| p.exists()));
            let roots = match file {
                Some(f) => roots_of(&f)?,
                None => rustls::RootCertStore {
                    roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
                },
            };
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            )
            .build()
            .map_err(|e| format!("TLS: {e}"))?;
            Check::Authorities { webpki }
        }
    };
    let verifier = Verifier {
        host: host.to_owned(),
        check,
        provider: provider.clone(),
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(TlsConnector {
        config: Arc::new(config),
    })
}

/// Wraps ureq's connections to an `https://` address in TLS with one host's checks.
pub struct TlsConnector {
    config: Arc<ClientConfig>,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsConnector")
    }
}

impl<In: Transport> Connector<In> for TlsConnector {
    type Out = Either<In, TlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Ok(None);
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let host = details
            .uri
            .host()
            .ok_or(ureq::Error::Tls("no host to check a certificate against"))?;
        let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']'))
            .map_err(|_| ureq::Error::Tls("not a host name a certificate can name"))?
            .to_owned();
        let mut conn = ClientConnection::new(self.config.clone(), name)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        conn.complete_io(&mut sock)?;
        Ok(Some(Either::B(TlsTransport {
            buffers: LazyBuffers::new(
                details.config.input_buffer_size(),
                details.config.output_buffer_size(),
            ),
            stream: StreamOwned { conn, sock },
        })))
    }
}

/// One TLS connection.
pub struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsTransport")
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let n = self.stream.read(input)?;
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_hex_and_shown_with_colons() {
        assert_eq!(
            fingerprint(FingerprintAlg::Sha1, b"abc"),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            fingerprint(FingerprintAlg::Sha256, b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(fingerprint(FingerprintAlg::Sha512, b"abc").len(), 128);
        assert_eq!(colons("a9993e"), "a9:99:3e");
    }
}
