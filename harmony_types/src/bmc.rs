//! Where a host's BMC (baseboard management controller) answers, and where its credentials are
//! kept: the two values an operator gives per host for hands-free bare metal (`--bmc`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

use crate::InvalidValue;

const ADDRESS_FORMS: &str = "redfish://HOST[:PORT][/redfish/v1/Systems/ID] (HTTPS), redfish+https://... or redfish+http://... (plain HTTP, labs only); no user or password in the URL (give them with credentials=env:VAR or credentials=file:PATH)";

/// The longest BMC address accepted.
pub const MAX_BMC_ADDRESS_LEN: usize = 2048;

/// A Redfish BMC address, as Metal3's `BareMetalHost.spec.bmc.address` writes it:
/// `redfish://10.0.0.5/redfish/v1/Systems/1`. `redfish://` and `redfish+https://` speak HTTPS,
/// `redfish+http://` plain HTTP. The system path is optional: without it, the BMC's only
/// ComputerSystem is used. Never holds credentials.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BmcAddress {
    text: String,
    tls: bool,
    host: String,
    port: Option<u16>,
    system: Option<String>,
}

impl BmcAddress {
    /// Parses a BMC address; the error names what is wrong. A URL carrying a user or password
    /// is refused and never echoed with them.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        let bad = |input: &str, reason: &str| {
            InvalidValue::new("BMC address", input, reason.to_string(), ADDRESS_FORMS)
        };
        if s.len() > MAX_BMC_ADDRESS_LEN {
            let shown: String = s.chars().take(64).collect();
            return Err(bad(
                &shown,
                &format!("it is longer than {MAX_BMC_ADDRESS_LEN} characters"),
            ));
        }
        let (scheme, _) = s
            .split_once("://")
            .ok_or_else(|| bad(s, "it has no scheme"))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "redfish" | "redfish+https" => true,
            "redfish+http" => false,
            "ipmi" | "idrac" | "ilo5" | "redfish-virtualmedia" | "idrac-virtualmedia" => {
                return Err(bad(
                    s,
                    &format!(
                        "{scheme}:// is not supported (Harmony speaks Redfish only: see ADR 0029)"
                    ),
                ));
            }
            _ => return Err(bad(s, &format!("unknown scheme {scheme:?}"))),
        };
        // Parse with a scheme the URL crate knows, so host and port rules are the standard's.
        let rest = &s[scheme.len()..];
        let standard = format!("{}{rest}", if tls { "https" } else { "http" });
        let u = url::Url::parse(&standard).map_err(|e| bad(&redacted(s), &e.to_string()))?;
        if !u.username().is_empty() || u.password().is_some() {
            return Err(bad(
                &redacted(s),
                "it carries a user or password; credentials never go in the address",
            ));
        }
        let host = u.host_str().unwrap_or_default().to_string();
        if host.is_empty() {
            return Err(bad(s, "it has no host"));
        }
        if u.query().is_some() || u.fragment().is_some() {
            return Err(bad(s, "it has a query or fragment"));
        }
        let path = u.path().trim_end_matches('/');
        let system = if path.is_empty() {
            None
        } else {
            let id = path
                .strip_prefix("/redfish/v1/Systems/")
                .filter(|id| !id.is_empty() && !id.contains('/') && id != &"..")
                .ok_or_else(|| {
                    bad(
                        s,
                        "its path is not a ComputerSystem (/redfish/v1/Systems/ID) or empty",
                    )
                })?;
            Some(format!("/redfish/v1/Systems/{id}"))
        };
        Ok(Self {
            text: s.to_string(),
            tls,
            host,
            port: u.port(),
            system,
        })
    }

    /// Whether the BMC is spoken to over HTTPS.
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// The BMC's host name or address.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The explicit port, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The ComputerSystem's path (`/redfish/v1/Systems/1`), when the address names one.
    pub fn system_path(&self) -> Option<&str> {
        self.system.as_deref()
    }

    /// The HTTP(S) root the BMC answers on: `https://10.0.0.5:8000`.
    pub fn http_root(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        let host = if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(p) => format!("{scheme}://{host}:{p}"),
            None => format!("{scheme}://{host}"),
        }
    }

    /// The address as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// `s` with anything between `://` and `@` replaced, for messages.
fn redacted(s: &str) -> String {
    match (s.find("://"), s.rfind('@')) {
        (Some(start), Some(at)) if at > start => {
            format!("{}<redacted>{}", &s[..start + 3], &s[at..])
        }
        _ => s.to_string(),
    }
}

impl fmt::Display for BmcAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for BmcAddress {
    type Err = InvalidValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for BmcAddress {
    type Error = InvalidValue;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<BmcAddress> for String {
    fn from(v: BmcAddress) -> Self {
        v.text
    }
}

const SOURCE_FORMS: &str = "env:VARIABLE (the variable holds USER:PASSWORD) or file:PATH (the file's first line is USER:PASSWORD)";

/// Where a BMC's user and password are read from when they are needed: never the values
/// themselves, so inventories, plans and reports can hold and show it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum BmcCredentialsSource {
    /// An environment variable holding `USER:PASSWORD`.
    Env(String),
    /// A file whose first line is `USER:PASSWORD`.
    File(PathBuf),
}

impl BmcCredentialsSource {
    /// Parses `env:VARIABLE` or `file:PATH`.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        let bad = |reason: &str| InvalidValue::new("BMC credentials", s, reason, SOURCE_FORMS);
        if s.len() > 4096 {
            return Err(bad("it is longer than 4096 characters"));
        }
        if let Some(var) = s.strip_prefix("env:") {
            let ok = !var.is_empty()
                && var.len() <= 255
                && !var.starts_with(|c: char| c.is_ascii_digit())
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(bad(
                    "the variable name must be letters, digits and _, not starting with a digit",
                ));
            }
            return Ok(Self::Env(var.to_string()));
        }
        if let Some(path) = s.strip_prefix("file:") {
            if path.is_empty() || path.contains('\0') {
                return Err(bad("the path is empty"));
            }
            return Ok(Self::File(PathBuf::from(path)));
        }
        Err(bad(
            "it names no source (the user and password themselves never go on the command line)",
        ))
    }
}

impl fmt::Display for BmcCredentialsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env(v) => write!(f, "env:{v}"),
            Self::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

impl std::str::FromStr for BmcCredentialsSource {
    type Err = InvalidValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for BmcCredentialsSource {
    type Error = InvalidValue;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<BmcCredentialsSource> for String {
    fn from(v: BmcCredentialsSource) -> Self {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn metal3_forms_parse() {
        let a = BmcAddress::parse("redfish://10.0.0.5/redfish/v1/Systems/1").unwrap();
        assert!(a.tls());
        assert_eq!(a.http_root(), "https://10.0.0.5");
        assert_eq!(a.system_path(), Some("/redfish/v1/Systems/1"));
        let a = BmcAddress::parse("redfish+http://bmc.lab:8000").unwrap();
        assert!(!a.tls());
        assert_eq!(a.http_root(), "http://bmc.lab:8000");
        assert_eq!(a.system_path(), None);
        let a = BmcAddress::parse(
            "redfish+https://[fd00::5]:8443/redfish/v1/Systems/0d8bd1b2-6e0c-4c41-a4a4-4a5e0f1c0a11/",
        )
        .unwrap();
        assert_eq!(a.http_root(), "https://[fd00::5]:8443");
        assert_eq!(
            a.system_path(),
            Some("/redfish/v1/Systems/0d8bd1b2-6e0c-4c41-a4a4-4a5e0f1c0a11")
        );
    }

    #[test]
    fn bad_addresses_say_why_and_never_echo_a_password() {
        for (bad, why) in [
            ("10.0.0.5", "no scheme"),
            ("https://10.0.0.5", "unknown scheme"),
            ("ipmi://10.0.0.5", "Redfish only"),
            ("redfish://", "empty host"),
            ("redfish://h/redfish/v1/Chassis/1", "not a ComputerSystem"),
            ("redfish://h/redfish/v1/Systems/", "is not a ComputerSystem"),
            ("redfish://h/redfish/v1/Systems/1?x=1", "query"),
            ("redfish://h:99999/", "invalid port"),
        ] {
            let e = BmcAddress::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let e = BmcAddress::parse("redfish://admin:s3cret@10.0.0.5/")
            .unwrap_err()
            .to_string();
        assert!(e.contains("credentials never go in the address"), "{e}");
        assert!(!e.contains("s3cret") && !e.contains("admin"), "{e}");
    }

    #[test]
    fn credential_sources() {
        assert_eq!(
            BmcCredentialsSource::parse("env:BMC_R14").unwrap(),
            BmcCredentialsSource::Env("BMC_R14".into())
        );
        assert_eq!(
            BmcCredentialsSource::parse("file:/etc/harmony/bmc/r14")
                .unwrap()
                .to_string(),
            "file:/etc/harmony/bmc/r14"
        );
        for bad in ["admin:password", "env:", "env:1X", "env:A-B", "file:"] {
            assert!(BmcCredentialsSource::parse(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn any_input_parses_or_is_refused_without_panicking(s in ".{0,300}") {
            if let Ok(a) = BmcAddress::parse(&s) {
                prop_assert_eq!(BmcAddress::parse(a.as_str()).unwrap(), a.clone());
                prop_assert!(a.http_root().starts_with("http"));
            }
            let _ = BmcCredentialsSource::parse(&s);
        }

        #[test]
        fn a_password_in_the_address_is_never_echoed(
            user in "[a-z]{1,8}",
            password in "[A-Za-z0-9]{6,12}",
            path in "(/redfish/v1/Systems/[a-z0-9]{1,8})?",
        ) {
            let s = format!("redfish://{user}:{password}@bmc.example{path}");
            let e = BmcAddress::parse(&s).unwrap_err().to_string();
            prop_assert!(!e.contains(&password), "{}", e);
        }
    }
}
