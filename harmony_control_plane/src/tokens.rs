//! Token minting, hashing, identity derivation and constant-time comparison. Tokens are stored
//! only as SHA-256.

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

/// 32 random bytes (a bootstrap token's salt).
pub fn random32() -> Result<[u8; 32], getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes)
}

/// The identity a bootstrap token is exchanged for: `hid_` and the URL-safe base64 of
/// SHA-256(token bytes || salt). Derived rather than random so that presenting the same token
/// again (its `welcome` was lost) yields the same identity, while the store keeps only hashes
/// and the salt: without the token itself nobody can compute it.
pub fn derive_identity(bootstrap_token: &str, salt: &[u8; 32]) -> SecretString {
    let mut h = Sha256::new();
    h.update(bootstrap_token.as_bytes());
    h.update(salt);
    let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.finalize());
    SecretString::new(format!("{}{body}", harmony_agent_protocol::IDENTITY_PREFIX))
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

    #[test]
    fn an_identity_is_re_derivable_from_its_token_and_salt_only() {
        let token = mint("hbt_").unwrap();
        let salt = random32().unwrap();
        let first = derive_identity(token.expose(), &salt);
        assert!(first.expose().starts_with("hid_") && first.expose().len() > 40);
        // The same token and salt: the same identity (a lost welcome is repaired).
        assert_eq!(derive_identity(token.expose(), &salt), first);
        // Another salt or another token: another identity.
        assert_ne!(derive_identity(token.expose(), &random32().unwrap()), first);
        assert_ne!(
            derive_identity(mint("hbt_").unwrap().expose(), &salt),
            first
        );
        // Neither the token nor the salt appears in it.
        assert!(!first.expose().contains(&token.expose()[4..]));
    }
}
