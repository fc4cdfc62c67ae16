//! TLS server configuration from PEM files.

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

use crate::error::CpError;

/// Builds a rustls server config (ring provider, HTTP/1.1 ALPN) from a certificate chain and key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, CpError> {
    let bad = |path: &Path, reason: String| CpError::Tls {
        path: path.display().to_string(),
        reason,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, format!("cannot read certificates: {e}")))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(cert, format!("malformed PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(bad(
            cert,
            "no CERTIFICATE block; give the server certificate chain in PEM".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        bad(
            key,
            format!("no usable private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}"),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            bad(
                cert,
                format!("certificate and key do not form a usable pair: {e}"),
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
