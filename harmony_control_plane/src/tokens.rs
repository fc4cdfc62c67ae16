//! Token minting, hashing and constant-time comparison. Tokens are stored only as SHA-256.

use base64::Engine;
use harmony_agent_protocol::SecretString;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// 32 random bytes, URL-safe base64 without padding, behind a prefix naming the kind.
pub fn mint(prefix: &str) -> Result<SecretString, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    Ok(SecretString::new(format!("{prefix}{body}")))
}

/// The SHA-256 of a token: what the database holds.
pub fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Compares two hashes in constant time.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// A non-secret fingerprint (first 8 hex digits of the hash) for logs and annotations.
pub fn fingerprint(token: &str) -> String {
    hash(token)[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_are_distinct_prefixed_and_hash_consistently() {
        let a = mint("hbt_").unwrap();
        let b = mint("hbt_").unwrap();
        assert_ne!(a, b);
        assert!(a.expose().starts_with("hbt_") && a.expose().len() > 40);
        assert!(same(&hash(a.expose()), &hash(a.expose())));
        assert!(!same(&hash(a.expose()), &hash(b.expose())));
        assert!(!same(&hash(a.expose()), &[0u8; 31]));
        assert_eq!(fingerprint(a.expose()).len(), 8);
    }
}
