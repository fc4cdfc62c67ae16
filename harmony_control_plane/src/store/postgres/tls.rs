//! TLS to PostgreSQL: the URL's `sslmode` decides (`disable`: plain; `prefer`, the default:
//! TLS when the server offers it; `require`: TLS or fail), and whenever TLS is used the server
//! certificate and host name are verified (rustls with ring, from [`harmony_http::tls_config`])
//! against `--database-ca-file` or this machine's trust store. There is no "TLS without
//! verification": `verify-full` and `verify-ca` are accepted as `require`, which verifies both.

use rustls::CertificateError;
use std::error::Error as StdError;
use std::ops::Range;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Config, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::chain;

/// The stream of a connection made with [`MakeRustlsConnect`] (TLS or plain, as negotiated).
pub type TlsStream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;

/// The CA flag, as errors name it.
const CA_FLAG: &str = "--database-ca-file";
/// Where CloudNativePG keeps the CA of a cluster's server certificates.
const CNPG_CA: &str = "CloudNativePG: Secret <cluster>-ca, key ca.crt";

/// Parses `--database-url` (URL or key-value form). `sslmode=verify-full` and `verify-ca`
/// become `require` (which always verifies); errors never quote the URL, which may hold a
/// password.
pub fn parse_url(url: &str) -> Result<Config, String> {
    let mut url = url.to_string();
    if let Some(range) = sslmode_value(&url)
        && matches!(&url[range.clone()], "verify-full" | "verify-ca")
    {
        url.replace_range(range, "require");
    }
    Config::from_str(&url).map_err(|e| {
        let mut msg = chain(&e);
        if msg.contains("`sslmode`") {
            msg.push_str(
                " (use disable, prefer or require; require and prefer always verify the server \
                 certificate, so verify-full and verify-ca mean require)",
            );
        } else if ["sslrootcert", "sslcert", "sslkey", "sslcrl"]
            .iter()
            .any(|k| msg.contains(&format!("`{k}`")))
        {
            msg.push_str(&format!(
                " (give the server's CA with {CA_FLAG} instead of sslrootcert; client \
                 certificates are not supported, use a password)"
            ));
        } else {
            msg.push_str(" (expected postgres://user:password@host:port/dbname?sslmode=require)");
        }
        msg
    })
}

/// The byte range of the `sslmode` value in a `postgres://` URL's query or in a key-value
/// connection string (`host=h sslmode='require'`), if it has one.
fn sslmode_value(s: &str) -> Option<Range<usize>> {
    const KEY: &str = "sslmode=";
    if s.starts_with("postgres://") || s.starts_with("postgresql://") {
        let query = s.find('?')? + 1;
        let mut at = query;
        for part in s[query..].split('&') {
            if part.starts_with(KEY) {
                return Some(at + KEY.len()..at + part.len());
            }
            at += part.len() + 1;
        }
        return None;
    }
    // Key-value form, as tokio-postgres reads it: key, '=', a value quoted with '...' or ending
    // at whitespace, backslash escaping the next character.
    let b = s.as_bytes();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= b.len() {
            return None;
        }
        let key_start = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &s[key_start..i];
        skip_ws(&mut i);
        if i >= b.len() || b[i] != b'=' {
            return None;
        }
        i += 1;
        skip_ws(&mut i);
        let quoted = i < b.len() && b[i] == b'\'';
        if quoted {
            i += 1;
        }
        let value_start = i;
        while i < b.len()
            && !(if quoted {
                b[i] == b'\''
            } else {
                b[i].is_ascii_whitespace()
            })
        {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        let value = value_start..i.min(b.len());
        if quoted {
            i += 1;
        }
        if key == "sslmode" {
            return Some(value);
        }
    }
}

/// Reads the PEM CA bundle of `--database-ca-file`, checking it holds a usable certificate.
pub fn read_ca(path: &Path) -> Result<Vec<u8>, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("cannot read {CA_FLAG} {}: {e}", path.display()))?;
    harmony_http::ca_roots(&pem).map_err(|e| format!("{CA_FLAG} {}: {e}", path.display()))?;
    Ok(pem)
}

/// The rustls client configuration for PostgreSQL: Harmony's shared one (ring provider, the
/// CAs of `ca_pem` or the system's), announcing ALPN `postgresql` instead of `http/1.1`:
/// PostgreSQL 17+ refuses a TLS connection whose ALPN list lacks `postgresql`, and
/// `sslnegotiation=direct` requires it.
pub fn client_config(ca_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, String> {
    let mut config = harmony_http::tls_config(ca_pem).map_err(|e| format!("{CA_FLAG}: {e}"))?;
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(config)
}

/// The connector for `config`'s `sslmode`, trusting `ca_file` (or the system's CAs). Both the
/// pool and the event listener use it. With `sslmode=disable` it is never used, and a CA file
/// is refused as a contradiction.
pub fn connector(config: &Config, ca_file: Option<&Path>) -> Result<MakeRustlsConnect, String> {
    let ca = ca_file.map(read_ca).transpose()?;
    if config.get_ssl_mode() == SslMode::Disable {
        if ca_file.is_some() {
            return Err(format!(
                "{CA_FLAG} is given but --database-url sets sslmode=disable (no TLS); remove \
                 sslmode=disable to verify the server with that CA, or drop {CA_FLAG}"
            ));
        }
        // Never used for a plain connection: no need to load the system's trust store.
        let unused = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        return Ok(MakeRustlsConnect::new(unused));
    }
    Ok(MakeRustlsConnect::new(client_config(ca.as_deref())?))
}

/// A connection error with its causes and, when TLS is at fault, what to do about it.
pub fn explain(e: &(dyn StdError + 'static)) -> String {
    let mut msg = chain(e);
    if let Some(hint) = hint(e) {
        msg.push_str(" (");
        msg.push_str(&hint);
        msg.push(')');
    }
    msg
}

fn hint(e: &(dyn StdError + 'static)) -> Option<String> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        // tokio-rustls reports rustls errors inside an io::Error, whose source() skips them.
        let tls = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .or_else(|| c.downcast_ref::<rustls::Error>());
        if let Some(tls) = tls {
            return Some(tls_hint(tls));
        }
        cause = c.source();
    }
    let msg = chain(e);
    msg.contains("server does not support TLS").then(|| {
        "the URL sets sslmode=require but the server has TLS off: turn ssl on in PostgreSQL, \
         or use sslmode=prefer or disable on a trusted network"
            .to_string()
    })
}

fn tls_hint(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::NotValidForName)
        | rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. }) => {
            "the PostgreSQL server's certificate does not name the host of --database-url: \
             connect by a name the certificate lists (CloudNativePG: <cluster>-rw, \
             <cluster>-rw.<namespace>, <cluster>-rw.<namespace>.svc)"
                .to_string()
        }
        rustls::Error::InvalidCertificate(_) => format!(
            "the PostgreSQL server's certificate does not verify: give the CA that signs it with \
             {CA_FLAG} ({CNPG_CA}); without it only this machine's trusted CAs are accepted"
        ),
        other => format!(
            "TLS with the PostgreSQL server failed ({other}); check that it speaks TLS 1.2 or \
             1.3 and, for its certificate, {CA_FLAG} ({CNPG_CA})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(url: &str) -> SslMode {
        parse_url(url)
            .unwrap_or_else(|e| panic!("{url}: {e}"))
            .get_ssl_mode()
    }

    #[test]
    fn sslmode_comes_from_the_url_and_verify_modes_mean_require() {
        assert_eq!(mode("postgres://u:p@h:5432/db"), SslMode::Prefer);
        assert_eq!(
            mode("postgres://u:p@h/db?sslmode=disable"),
            SslMode::Disable
        );
        assert_eq!(
            mode("postgresql://u:p@h/db?sslmode=prefer"),
            SslMode::Prefer
        );
        assert_eq!(
            mode("postgres://u:p@h/db?application_name=x&sslmode=require&connect_timeout=3"),
            SslMode::Require
        );
        assert_eq!(
            mode("postgres://u:p@h/db?sslmode=verify-full"),
            SslMode::Require
        );
        assert_eq!(
            mode("postgres://u:p@h/db?sslmode=verify-ca"),
            SslMode::Require
        );
        assert_eq!(
            mode("host=h user=u sslmode=verify-full dbname=d"),
            SslMode::Require
        );
        assert_eq!(
            mode("host=h password='a b\\' c' sslmode = 'verify-ca'"),
            SslMode::Require
        );
        assert_eq!(mode("host=h sslmode=disable"), SslMode::Disable);
        assert_eq!(mode("host=h user=u"), SslMode::Prefer);
    }

    #[test]
    fn the_sslmode_value_is_located_exactly() {
        let s = "postgres://u:p@h/db?a=sslmode=x&sslmode=require";
        assert_eq!(&s[sslmode_value(s).unwrap()], "require");
        let s = "postgres://u:sslmode=x@h/db";
        assert_eq!(sslmode_value(s), None);
        let s = "password='sslmode=x' sslmode=prefer";
        assert_eq!(&s[sslmode_value(s).unwrap()], "prefer");
        assert_eq!(sslmode_value("host=h sslmode="), Some(15..15));
        assert_eq!(sslmode_value("host=h sslmode"), None);
    }

    #[test]
    fn bad_urls_are_explained_without_quoting_the_password() {
        let e = parse_url("postgres://u:s3cret@h/db?sslmode=allow").unwrap_err();
        assert!(
            e.contains("`sslmode`") && e.contains("disable, prefer or require"),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
        let e =
            parse_url("postgres://u:s3cret@h/db?sslmode=require&sslrootcert=/ca.crt").unwrap_err();
        assert!(e.contains("sslrootcert") && e.contains(CA_FLAG), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
    }

    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn ca_file_errors_name_the_flag_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.crt");
        let e = read_ca(&missing).unwrap_err();
        assert!(e.starts_with("cannot read --database-ca-file"), "{e}");
        assert!(e.contains("missing.crt"), "{e}");
        let not_pem = dir.path().join("key.pem");
        std::fs::write(
            &not_pem,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let e = read_ca(&not_pem).unwrap_err();
        assert!(
            e.starts_with("--database-ca-file") && e.contains("no CERTIFICATE"),
            "{e}"
        );
        let good = dir.path().join("ca.crt");
        std::fs::write(&good, ca_pem()).unwrap();
        assert!(read_ca(&good).is_ok());
    }

    #[test]
    fn a_ca_file_with_sslmode_disable_is_a_contradiction() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, ca_pem()).unwrap();
        let plain = parse_url("postgres://u:p@h/db?sslmode=disable").unwrap();
        assert!(connector(&plain, None).is_ok());
        let e = connector(&plain, Some(&ca)).err().unwrap();
        assert!(
            e.starts_with(CA_FLAG) && e.contains("sslmode=disable"),
            "{e}"
        );
        let tls = parse_url("postgres://u:p@h/db?sslmode=require").unwrap();
        assert!(connector(&tls, Some(&ca)).is_ok());
    }

    #[test]
    fn postgresql_is_the_only_alpn_protocol() {
        let pem = ca_pem();
        let config = client_config(Some(pem.as_bytes())).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"postgresql".to_vec()]);
    }

    #[test]
    fn certificate_failures_say_what_to_do() {
        let io = |e: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let unknown = io(rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer,
        ));
        let msg = explain(&unknown);
        assert!(
            msg.contains(CA_FLAG) && msg.contains("<cluster>-ca"),
            "{msg}"
        );
        let name = io(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName,
        ));
        assert!(explain(&name).contains("does not name the host"));
        let other = std::io::Error::other("connection refused");
        assert_eq!(explain(&other), "connection refused");
    }
}
