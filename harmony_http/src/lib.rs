//! One TLS client setup for every Harmony HTTP client.
//!
//! `ControlPlaneClient`, the discovery agent, the agent's external-provider calls and
//! `RegionAgentRolloutScore` all build their [`reqwest::Client`] here, so they trust the same
//! roots the same way: rustls with the *ring* provider (never a process-wide default provider,
//! which a library must not install), verifying against either a PEM CA bundle or this machine's
//! trust store.
//!
//! ```
//! use std::time::Duration;
//!
//! let client = harmony_http::ClientSettings::new()
//!     .connect_timeout(Duration::from_secs(5))
//!     .read_timeout(Some(Duration::from_secs(30)))
//!     .build()
//!     .expect("the system trust store is enough to build a client");
//! # drop(client);
//!
//! // A bundle with no certificate is refused, naming the setting at fault.
//! let err = harmony_http::ClientSettings::new()
//!     .ca_pem(Some(b"not a certificate"))
//!     .build()
//!     .unwrap_err();
//! assert!(err.to_string().starts_with("ca bundle: no CERTIFICATE block"));
//! ```

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The reqwest this crate builds clients of; use it so the versions always match.
pub use reqwest;

/// Default wait for a TCP connection and TLS handshake.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default wait between two reads of an answer.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A client could not be configured. The message names the setting and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ConfigError {
    /// The setting at fault (`ca bundle`, `tls`, `http client`).
    pub field: &'static str,
    /// What is wrong and how to fix it.
    pub problem: String,
}

fn bad(field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        field,
        problem: problem.into(),
    }
}

/// The CA certificates of a PEM bundle: every `CERTIFICATE` block, at least one.
pub fn ca_roots(pem: &[u8]) -> Result<RootCertStore, ConfigError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            bad(
                "ca bundle",
                format!("malformed PEM: {e}; give the CA certificate(s) as PEM"),
            )
        })?;
    if certs.is_empty() {
        return Err(bad(
            "ca bundle",
            "no CERTIFICATE block in the CA bundle; give the PEM file holding \
             \"-----BEGIN CERTIFICATE-----\" blocks (not a key or a DER file)",
        ));
    }
    let mut roots = RootCertStore::empty();
    for (i, cert) in certs.into_iter().enumerate() {
        roots.add(cert).map_err(|e| {
            bad(
                "ca bundle",
                format!("certificate #{} is not a usable CA certificate: {e}", i + 1),
            )
        })?;
    }
    Ok(roots)
}

/// This machine's trusted CAs (loaded once per process: reading the store can cost a
/// ~300 KB file parse). Unreadable entries are skipped; an empty store is allowed so plain
/// `http://` clients still work, and an `https://` call then fails with an unknown-issuer error.
pub fn system_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let mut roots = RootCertStore::empty();
            let loaded = rustls_native_certs::load_native_certs();
            let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
            if added == 0 {
                log::warn!(
                    "no CA certificate could be loaded from this machine's trust store ({} error(s)); https:// calls will fail unless a CA bundle is given (install ca-certificates or set SSL_CERT_FILE)",
                    loaded.errors.len()
                );
            }
            Arc::new(roots)
        })
        .clone()
}

/// A rustls client configuration using the *ring* provider, trusting the CAs of `ca_pem`
/// or, when `None`, [`system_roots`]. Speaks HTTP/1.1 (announced through ALPN).
pub fn tls_config(ca_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, ConfigError> {
    let roots = match ca_pem {
        Some(pem) => Arc::new(ca_roots(pem)?),
        None => system_roots(),
    };
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| {
        bad(
            "tls",
            format!("the ring provider refused the defaults: {e}"),
        )
    })?
    .with_root_certificates(roots)
    .with_no_client_auth();
    // reqwest is built without HTTP/2, so announce only what it speaks.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// A rustls client configuration like [`tls_config`]'s that accepts any server certificate
/// (signatures are still checked against the certificate's key, so the handshake is sound, but
/// nothing proves who the server is). For devices whose certificates cannot be verified (BMCs
/// with self-signed certificates), when the operator asks for it explicitly.
pub fn insecure_tls_config() -> Result<rustls::ClientConfig, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| {
            bad(
                "tls",
                format!("the ring provider refused the defaults: {e}"),
            )
        })?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Accepts any server certificate; checks handshake signatures with the provider's algorithms.
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// How to build a [`reqwest::Client`]: trust, timeouts and whether plain HTTP is allowed.
#[derive(Debug, Clone)]
pub struct ClientSettings<'a> {
    ca_pem: Option<&'a [u8]>,
    accept_any_certificate: bool,
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
    https_only: bool,
    user_agent: Option<String>,
}

impl Default for ClientSettings<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> ClientSettings<'a> {
    /// System roots, [`DEFAULT_CONNECT_TIMEOUT`], [`DEFAULT_READ_TIMEOUT`], http and https.
    pub fn new() -> Self {
        Self {
            ca_pem: None,
            accept_any_certificate: false,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            read_timeout: Some(DEFAULT_READ_TIMEOUT),
            https_only: false,
            user_agent: None,
        }
    }

    /// Trusts only the CAs of this PEM bundle; `None` keeps the system roots.
    pub fn ca_pem(mut self, pem: Option<&'a [u8]>) -> Self {
        self.ca_pem = pem;
        self
    }

    /// Accepts any server certificate ([`insecure_tls_config`]): only for an operator's
    /// explicit, logged choice (`--bmc-insecure`). Overrides [`ClientSettings::ca_pem`].
    pub fn accept_any_certificate(mut self, accept: bool) -> Self {
        self.accept_any_certificate = accept;
        self
    }

    /// The wait for the TCP connection (and TLS handshake).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The longest silence between two reads of an answer; `None` for callers that wait for
    /// long-polled answers and bound each call with `RequestBuilder::timeout` instead.
    pub fn read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// Refuses plain `http://` URLs (for clients that send credentials).
    pub fn https_only(mut self, only: bool) -> Self {
        self.https_only = only;
        self
    }

    /// The `User-Agent` header (default: reqwest's none).
    pub fn user_agent(mut self, agent: impl Into<String>) -> Self {
        self.user_agent = Some(agent.into());
        self
    }

    /// A builder with these settings applied, for callers that need more options.
    pub fn builder(&self) -> Result<reqwest::ClientBuilder, ConfigError> {
        let tls = if self.accept_any_certificate {
            insecure_tls_config()?
        } else {
            tls_config(self.ca_pem)?
        };
        let mut builder = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(self.connect_timeout)
            .https_only(self.https_only);
        if let Some(t) = self.read_timeout {
            builder = builder.read_timeout(t);
        }
        if let Some(agent) = &self.user_agent {
            builder = builder.user_agent(agent.clone());
        }
        Ok(builder)
    }

    /// The client.
    pub fn build(&self) -> Result<reqwest::Client, ConfigError> {
        self.builder()?
            .build()
            .map_err(|e| bad("http client", describe(&e)))
    }
}

/// An error with its whole source chain (`error sending request: connect: refused`), the
/// way reqwest's own `Display` does not show it.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests;
