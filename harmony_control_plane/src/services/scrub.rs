//! Text from agents (their errors, progress lines, the reason their cluster is unreachable)
//! made fit for a page: on one line, bounded, and with anything that looks like a credential
//! replaced by `<redacted>` — a token after `Bearer` or `Basic`, the value of a `password=`,
//! `token:` (and the like) pair, the password in a URL's `user:password@`, and Harmony's own
//! tokens (`hbt_`, `hid_`, `htt_`). Agents are not meant to send any; this is the last line of
//! defence before a browser.

use harmony_agent_protocol::{BOOTSTRAP_PREFIX, IDENTITY_PREFIX};
use harmony_api::TENANT_TOKEN_PREFIX;

use crate::store::status::cut;

/// What replaces a credential.
pub const REDACTED: &str = "<redacted>";

/// Keys whose values are credentials (matched in a key lower-cased, anywhere in it).
const SECRET_KEYS: [&str; 12] = [
    "password",
    "passwd",
    "pwd",
    "token",
    "secret",
    "apikey",
    "api_key",
    "api-key",
    "authorization",
    "credential",
    "private_key",
    "access_key",
];

/// Schemes whose next word is a credential.
const SCHEMES: [&str; 2] = ["bearer", "basic"];

/// What separates the pieces a credential is looked for in (kept as they are).
fn separator(c: char) -> bool {
    c.is_whitespace() || "&,;?{}()[]<>|'\"`".contains(c)
}

/// What the words before say of the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Nothing.
    Plain,
    /// The last word was a secret key alone (`"token"` of `"token":"x"`): a value may follow
    /// its `:` or `=`.
    Key,
    /// The next word is a credential (after `Bearer`, or after a secret key's `:`).
    Secret,
}

/// `text` on one line (runs of whitespace become one space), credentials replaced by
/// [`REDACTED`], cut to at most `max` characters.
pub fn for_page(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 4));
    let mut next = Next::Plain;
    let mut last_space = true;
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String, next: &mut Next| {
        if word.is_empty() {
            return;
        }
        let (shown, after) = piece(word, *next);
        out.push_str(&shown);
        *next = after;
        word.clear();
    };
    for c in text.chars() {
        if !separator(c) {
            word.push(c);
            last_space = false;
            continue;
        }
        flush(&mut word, &mut out, &mut next);
        if c.is_whitespace() {
            if !last_space {
                out.push(' ');
            }
            last_space = true;
        } else {
            out.push(c);
            last_space = false;
        }
    }
    flush(&mut word, &mut out, &mut next);
    cut(out.trim(), max)
}

fn secret_key(key: &str) -> bool {
    let key = key.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    !key.is_empty() && SECRET_KEYS.iter().any(|k| key.contains(k))
}

/// One word as shown, and what it says of the next one.
fn piece(word: &str, next: Next) -> (String, Next) {
    let lower = word.to_ascii_lowercase();
    if SCHEMES.contains(&lower.trim_end_matches(':')) {
        // `Authorization: Bearer <token>`: the scheme stays, the token goes.
        return (word.to_string(), Next::Secret);
    }
    match next {
        Next::Secret => return (REDACTED.to_string(), Next::Plain),
        Next::Key if word.starts_with([':', '=']) => {
            let value = word.trim_start_matches([':', '=']);
            let sign = &word[..word.len() - value.len()];
            return if value.is_empty() {
                (word.to_string(), Next::Secret)
            } else {
                (format!("{sign}{REDACTED}"), Next::Plain)
            };
        }
        _ => {}
    }
    if let Some(shown) = url_password(word) {
        return (shown, Next::Plain);
    }
    // `key=value` or `key: value` (not a URL's `scheme://`).
    if let Some(at) = word.find(['=', ':'])
        && !word[at..].starts_with("://")
    {
        if secret_key(&lower[..at]) {
            let value = word[at + 1..].trim_start_matches(['=', ':']);
            return if value.is_empty() {
                (word.to_string(), Next::Secret)
            } else {
                (
                    format!("{}{REDACTED}", &word[..word.len() - value.len()]),
                    Next::Plain,
                )
            };
        }
    } else if secret_key(&lower) {
        return (word.to_string(), Next::Key);
    }
    (harmony_tokens(word), Next::Plain)
}

/// `scheme://user:password@host...` with its password replaced; `None` when `word` has none.
fn url_password(word: &str) -> Option<String> {
    let start = word.find("://")? + 3;
    let at = start + word[start..].find('@')?;
    let colon = start + word[start..at].find(':')?;
    Some(format!("{}{REDACTED}{}", &word[..=colon], &word[at..]))
}

/// `word` with Harmony's tokens (`hbt_...`, `hid_...`, `htt_...`) replaced after their prefix.
fn harmony_tokens(word: &str) -> String {
    let prefixes = [BOOTSTRAP_PREFIX, IDENTITY_PREFIX, TENANT_TOKEN_PREFIX];
    let Some(at) = prefixes.iter().filter_map(|p| word.find(p)).min() else {
        return word.to_string();
    };
    format!("{}{REDACTED}", &word[..at + 4])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn credentials_are_replaced_and_the_rest_kept_on_one_line() {
        let cases = [
            (
                "dial tcp 10.0.0.1:6443: i/o timeout",
                "dial tcp 10.0.0.1:6443: i/o timeout",
            ),
            (
                "401 from https://k8s: Authorization: Bearer eyJhbGciOi.x.y refused",
                "401 from https://k8s: Authorization: Bearer <redacted> refused",
            ),
            ("basic dXNlcjpwYXNz", "basic <redacted>"),
            (
                "connect postgres://harmony:s3cret@db:5432/x failed",
                "connect postgres://harmony:<redacted>@db:5432/x failed",
            ),
            (
                "login password=hunter2&user=a",
                "login password=<redacted>&user=a",
            ),
            ("password: hunter2 then", "password: <redacted> then"),
            (
                r#"{"token":"abc123","name":"web"}"#,
                r#"{"token":"<redacted>","name":"web"}"#,
            ),
            ("API_KEY=xyz", "API_KEY=<redacted>"),
            (
                "presented hid_AbC-12 and htt_x_y",
                "presented hid_<redacted> and htt_<redacted>",
            ),
            ("two\n\n  lines\t here", "two lines here"),
        ];
        for (text, shown) in cases {
            assert_eq!(for_page(text, 500), shown, "{text:?}");
        }
        let long = for_page(&"word ".repeat(100), 20);
        assert_eq!(long.chars().count(), 20);
        assert!(long.ends_with('…'));
    }

    proptest! {
        #[test]
        fn a_secret_value_never_survives_whatever_surrounds_it(
            before in "[a-z .:/]{0,40}",
            after in "[a-z .:/]{0,40}",
            key in prop::sample::select(vec!["password=", "token=", "Password: ", "secret:", "Bearer ", "basic ", "https://u:"]),
            secret in "[A-Z0-9]{8,24}",
        ) {
            let tail = if key.ends_with("u:") { "@host" } else { "" };
            let text = format!("{before} {key}{secret}{tail} {after}");
            let shown = for_page(&text, 1000);
            prop_assert!(!shown.contains(&secret), "{text:?} -> {shown:?}");
            prop_assert!(shown.contains(REDACTED), "{text:?} -> {shown:?}");
        }
    }
}
