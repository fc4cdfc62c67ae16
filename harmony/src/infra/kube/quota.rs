//! Reading the API server's ResourceQuota refusals (HTTP 403 from the `ResourceQuota`
//! admission plugin), so a quota error names the quota and the resource with its figures:
//!
//! ```text
//! exceeded quota: harmony-project-quota, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2
//! status unknown for quota: harmony-project-quota, resources: count/configmaps
//! ```

const EXCEEDED: &str = "exceeded quota: ";
const UNKNOWN: &str = "status unknown for quota: ";

/// What a quota refusal says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct QuotaRefusal {
    /// The quota's name (its namespace is the object's).
    pub quota: String,
    /// The resource(s) with their figures, for people.
    pub resource: String,
}

/// Whether a 403's message is a ResourceQuota refusal.
pub(super) fn is_quota(message: &str) -> bool {
    message.contains(EXCEEDED) || message.contains(UNKNOWN)
}

/// `a=1,b=2` as pairs.
fn pairs(list: &str) -> Vec<(String, String)> {
    list.split(',')
        .filter_map(|p| p.trim().split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The quota and resource of a refusal; an unexpected shape keeps the server's words.
pub(super) fn parse(message: &str) -> QuotaRefusal {
    if let Some((_, rest)) = message.split_once(EXCEEDED) {
        let (quota, rest) = rest.split_once(", requested: ").unwrap_or((rest, ""));
        let (requested, rest) = rest.split_once(", used: ").unwrap_or((rest, ""));
        let (used, limited) = rest.split_once(", limited: ").unwrap_or((rest, ""));
        let (used, limited) = (pairs(used), pairs(limited));
        let figure = |list: &[(String, String)], k: &str| {
            list.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| "?".into())
        };
        let resources: Vec<String> = pairs(requested)
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k} requested {v}, used {}, limited {}",
                    figure(&used, k),
                    figure(&limited, k)
                )
            })
            .collect();
        return QuotaRefusal {
            quota: quota.trim().to_string(),
            resource: if resources.is_empty() {
                rest.trim().to_string()
            } else {
                resources.join("; ")
            },
        };
    }
    if let Some((_, rest)) = message.split_once(UNKNOWN) {
        let (quota, resources) = rest.split_once(", resources: ").unwrap_or((rest, "?"));
        return QuotaRefusal {
            quota: quota.trim().to_string(),
            resource: format!(
                "{} (usage not computed yet: is kube-controller-manager's resourcequota controller running?)",
                resources.trim()
            ),
        };
    }
    QuotaRefusal {
        quota: "(unnamed)".into(),
        resource: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_quota_and_each_resource_with_its_figures() {
        let m = "configmaps \"c3\" is forbidden: exceeded quota: harmony-project-quota, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2";
        assert!(is_quota(m));
        assert_eq!(
            parse(m),
            QuotaRefusal {
                quota: "harmony-project-quota".into(),
                resource: "count/configmaps requested 1, used 2, limited 2".into()
            }
        );
        let two = "pods \"p\" is forbidden: exceeded quota: q, requested: requests.cpu=2,requests.memory=1Gi, used: requests.cpu=3,requests.memory=7Gi, limited: requests.cpu=4,requests.memory=8Gi";
        assert_eq!(
            parse(two).resource,
            "requests.cpu requested 2, used 3, limited 4; requests.memory requested 1Gi, used 7Gi, limited 8Gi"
        );
        let unknown = "configmaps \"c\" is forbidden: status unknown for quota: q, resources: count/configmaps";
        assert!(is_quota(unknown));
        let p = parse(unknown);
        assert_eq!(p.quota, "q");
        assert!(
            p.resource
                .starts_with("count/configmaps (usage not computed yet"),
            "{}",
            p.resource
        );
        assert!(!is_quota(
            "configmaps is forbidden: User \"x\" cannot create resource"
        ));
    }
}
