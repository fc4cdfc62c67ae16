//! A BMC's user and password, read from their source when a call needs them, and kept out of
//! every `Debug`, `Display`, log line and error.

use std::fmt;

use harmony_types::BmcCredentialsSource;

/// A user and password for HTTP basic authentication. `Debug` shows the user only.
#[derive(Clone)]
pub(super) struct Credentials {
    pub(super) user: String,
    pub(super) password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The longest credentials text read (a file's first line, a variable's value).
const MAX_LEN: usize = 4096;

/// Reads `USER:PASSWORD` from `source`. The error names the source and the fix, never a value.
pub(super) fn read(source: &BmcCredentialsSource) -> Result<Credentials, String> {
    let text = match source {
        BmcCredentialsSource::Env(var) => std::env::var(var).map_err(|e| match e {
            std::env::VarError::NotPresent => {
                format!("{source}: the variable is not set; export {var}=USER:PASSWORD")
            }
            std::env::VarError::NotUnicode(_) => {
                format!("{source}: the variable is not UTF-8; set it to USER:PASSWORD")
            }
        })?,
        BmcCredentialsSource::File(path) => {
            let all = std::fs::read(path).map_err(|e| {
                format!("{source}: {e}; write USER:PASSWORD on the file's first line")
            })?;
            if all.len() > MAX_LEN {
                return Err(format!(
                    "{source}: the file is larger than {MAX_LEN} bytes; it holds one USER:PASSWORD line"
                ));
            }
            let text = String::from_utf8(all)
                .map_err(|_| format!("{source}: the file is not UTF-8 text"))?;
            text.lines().next().unwrap_or_default().to_string()
        }
    };
    parse(&text).ok_or_else(|| {
        format!("{source}: not USER:PASSWORD (a non-empty user, a colon, then the password)")
    })
}

fn parse(text: &str) -> Option<Credentials> {
    if text.len() > MAX_LEN {
        return None;
    }
    let text = text.trim_end_matches(['\r', '\n']);
    let (user, password) = text.split_once(':')?;
    (!user.is_empty() && !user.chars().any(char::is_control)).then(|| Credentials {
        user: user.to_string(),
        password: password.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_file_and_never_shows_the_password() {
        let dir = std::env::temp_dir().join(format!("harmony-bmc-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("r14");
        std::fs::write(&file, "admin:pa:ss word\nignored\n").unwrap();
        let c = read(&BmcCredentialsSource::File(file.clone())).unwrap();
        assert_eq!(
            (c.user.as_str(), c.password.as_str()),
            ("admin", "pa:ss word")
        );
        assert!(!format!("{c:?}").contains("pa:ss"), "{c:?}");

        std::fs::write(&file, "no colon here\n").unwrap();
        let e = read(&BmcCredentialsSource::File(file.clone())).unwrap_err();
        assert!(
            e.contains("not USER:PASSWORD") && !e.contains("no colon"),
            "{e}"
        );
        let e = read(&BmcCredentialsSource::File(dir.join("missing"))).unwrap_err();
        assert!(e.contains("first line"), "{e}");
        let e = read(&BmcCredentialsSource::Env(
            "HARMONY_TEST_SURELY_UNSET_VARIABLE".into(),
        ))
        .unwrap_err();
        assert!(e.contains("is not set"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
