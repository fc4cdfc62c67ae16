//! What the project namespaces of an agent's cluster use of their quota: the `status.hard` and
//! `status.used` of each Harmony-managed project namespace's ResourceQuota
//! ([`crate::tenancy::QUOTA_NAME`]), reported in the heartbeat's status (`status.quotas`), so
//! the control plane's status page can show each project's quota use.
//!
//! Bounded by construction: a report decodes (on either side) to at most
//! [`MAX_QUOTA_NAMESPACES`] namespaces of at most [`MAX_QUOTA_ENTRIES`] entries each, every name
//! a DNS-1123 label or resource name and every figure a short quantity; anything else is dropped
//! and counted as [`QuotaReport::truncated`]. An older control plane ignores the field.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::tenancy::ProjectQuota;

/// The most project namespaces one report carries (the first by name).
pub const MAX_QUOTA_NAMESPACES: usize = 50;
/// The most `hard` (and `used`) entries one namespace carries.
pub const MAX_QUOTA_ENTRIES: usize = 16;
/// The longest quantity kept (`"1500m"`, `"8Gi"`).
pub const MAX_QUANTITY_LEN: usize = 40;
/// The longest resource name kept (`requests.cpu`, `count/configmaps`).
pub const MAX_RESOURCE_LEN: usize = 100;
/// The longest error text kept.
pub const MAX_ERROR_LEN: usize = 300;

/// The quota use the agent read from its cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Unchecked")]
pub struct QuotaReport {
    /// When the namespaces below were read, ms since the Unix epoch.
    pub at: i64,
    /// The managed project namespaces' quotas, by namespace name.
    pub namespaces: Vec<NamespaceQuota>,
    /// Whether namespaces or entries were left out (past the bounds, or malformed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Why the last attempt to read them failed (the namespaces are then those of the last
    /// read that worked, as of `at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One project namespace's ResourceQuota, as its status says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceQuota {
    /// The namespace.
    pub namespace: String,
    /// Its tenant label ([`crate::tenancy::TENANT_LABEL`]).
    pub tenant: String,
    /// Its project label ([`crate::tenancy::PROJECT_LABEL`]).
    pub project: String,
    /// `status.hard`: what the API server enforces (`requests.cpu` -> `"4"`).
    #[serde(default)]
    pub hard: BTreeMap<String, String>,
    /// `status.used`: what the namespace holds now (`requests.cpu` -> `"1500m"`).
    #[serde(default)]
    pub used: BTreeMap<String, String>,
}

/// The ResourceQuota `spec.hard` of a project's quota: cpu -> `requests.cpu`, memory ->
/// `requests.memory`, storage -> `requests.storage`, objects -> `count/<resource>`.
pub fn hard(quota: &ProjectQuota) -> BTreeMap<String, String> {
    let mut hard = BTreeMap::new();
    let mut put = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            hard.insert(k.to_string(), v.clone());
        }
    };
    put("requests.cpu", &quota.cpu);
    put("requests.memory", &quota.memory);
    put("requests.storage", &quota.storage);
    for (resource, n) in &quota.objects {
        hard.insert(object_key(resource), n.to_string());
    }
    hard
}

/// The ResourceQuota key counting `resource` objects (`configmaps` -> `count/configmaps`).
pub fn object_key(resource: &str) -> String {
    if resource.starts_with("count/") {
        resource.to_string()
    } else {
        format!("count/{resource}")
    }
}

/// A report as it arrives, before [`QuotaReport`] bounds it.
#[derive(Deserialize)]
struct Unchecked {
    #[serde(default)]
    at: i64,
    #[serde(default)]
    namespaces: Vec<NamespaceQuota>,
    #[serde(default)]
    truncated: bool,
    #[serde(default)]
    error: Option<String>,
}

impl From<Unchecked> for QuotaReport {
    fn from(u: Unchecked) -> Self {
        QuotaReport {
            at: u.at,
            namespaces: u.namespaces,
            truncated: u.truncated,
            error: u.error,
        }
        .bounded()
    }
}

/// Whether `s` is a DNS-1123 label (what namespaces, tenants and projects are).
pub fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_resource(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_RESOURCE_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"./-_".contains(&b))
}

fn is_quantity(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_QUANTITY_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
}

/// Keeps the first [`MAX_QUOTA_ENTRIES`] well-formed entries; whether any were dropped.
fn bound_entries(map: &mut BTreeMap<String, String>) -> bool {
    let before = map.len();
    let kept: BTreeMap<String, String> = std::mem::take(map)
        .into_iter()
        .filter(|(k, v)| is_resource(k) && is_quantity(v))
        .take(MAX_QUOTA_ENTRIES)
        .collect();
    *map = kept;
    map.len() != before
}

impl QuotaReport {
    /// The report within the bounds (see the module doc): malformed namespaces and entries
    /// dropped, namespaces sorted by name and unique, at most [`MAX_QUOTA_NAMESPACES`], the
    /// error cut to [`MAX_ERROR_LEN`] with tokens scrubbed; `truncated` when anything went.
    pub fn bounded(mut self) -> Self {
        let before = self.namespaces.len();
        self.namespaces
            .retain(|n| is_label(&n.namespace) && is_label(&n.tenant) && is_label(&n.project));
        self.namespaces
            .sort_by(|a, b| a.namespace.cmp(&b.namespace));
        self.namespaces.dedup_by(|a, b| a.namespace == b.namespace);
        self.namespaces.truncate(MAX_QUOTA_NAMESPACES);
        let mut dropped = self.namespaces.len() != before;
        for n in &mut self.namespaces {
            dropped |= bound_entries(&mut n.hard);
            dropped |= bound_entries(&mut n.used);
        }
        self.truncated |= dropped;
        self.error = self.error.map(|e| {
            let e = crate::scrub(&e).into_owned();
            match e.char_indices().nth(MAX_ERROR_LEN) {
                Some((cut, _)) => format!("{}…", &e[..cut]),
                None => e,
            }
        });
        self
    }

    /// The quota of `namespace`, if the report has it.
    pub fn namespace(&self, namespace: &str) -> Option<&NamespaceQuota> {
        self.namespaces
            .binary_search_by(|n| n.namespace.as_str().cmp(namespace))
            .ok()
            .map(|i| &self.namespaces[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(name: &str) -> NamespaceQuota {
        NamespaceQuota {
            namespace: name.into(),
            tenant: "acme".into(),
            project: "web".into(),
            hard: [("requests.cpu".to_string(), "4".to_string())].into(),
            used: [("requests.cpu".to_string(), "1500m".to_string())].into(),
        }
    }

    #[test]
    fn a_report_decodes_within_its_bounds_whatever_was_sent() {
        let mut many: Vec<NamespaceQuota> = (0..MAX_QUOTA_NAMESPACES + 5)
            .map(|i| ns(&format!("ns-{i:03}")))
            .collect();
        many.push(NamespaceQuota {
            namespace: "Not A Label".into(),
            ..ns("x")
        });
        many[0].hard = (0..40)
            .map(|i| (format!("count/r{i:02}"), i.to_string()))
            .collect();
        many[1]
            .used
            .insert("requests.memory".into(), "9".repeat(500));
        let sent = serde_json::json!({
            "at": 7,
            "namespaces": many,
            "error": format!("listing namespaces with hid_secretsecret: {}", "x".repeat(2000)),
        });
        let r: QuotaReport = serde_json::from_value(sent).unwrap();
        assert_eq!(r.at, 7);
        assert!(r.truncated);
        assert_eq!(r.namespaces.len(), MAX_QUOTA_NAMESPACES);
        assert_eq!(r.namespaces[0].namespace, "ns-000");
        assert_eq!(r.namespaces[0].hard.len(), MAX_QUOTA_ENTRIES);
        assert!(!r.namespaces[1].used.contains_key("requests.memory"));
        assert_eq!(r.namespaces[1].used["requests.cpu"], "1500m");
        let e = r.error.unwrap();
        assert!(!e.contains("secretsecret") && e.chars().count() <= MAX_ERROR_LEN + 1);
        assert!(r.namespaces.iter().all(|n| is_label(&n.namespace)));
    }

    #[test]
    fn a_well_formed_report_round_trips_untouched() {
        let r = QuotaReport {
            at: 1,
            namespaces: vec![ns("acme-web"), ns("beta-api")],
            truncated: false,
            error: None,
        };
        let back: QuotaReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.namespace("beta-api").unwrap().namespace, "beta-api");
        assert!(back.namespace("gamma").is_none());
        // An older agent's status has no report; a report missing fields is empty, not an error.
        let empty: QuotaReport = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, QuotaReport::default());
    }
}
