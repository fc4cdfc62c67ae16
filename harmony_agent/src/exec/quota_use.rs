//! The quota use the agent reports in its heartbeat ([`QuotaReport`]): for each Harmony-managed
//! project namespace (labelled managed-by Harmony, with a tenant and a project), its
//! ResourceQuota [`QUOTA_NAME`]'s `status.hard` and `status.used`, as kube-controller-manager's
//! resourcequota controller (and quota admission) keep them.
//!
//! Read every [`REPORT_EVERY`] with the rights project presence already has (namespaces `list`
//! by label, resourcequotas `get` by name): one list of at most [`MAX_QUOTA_NAMESPACES`]
//! namespaces, then one read per namespace. Other namespaces are never read, and a namespace
//! whose labels do not say it is a managed project is left out even when the list returns it.

use harmony_agent_protocol::quota_use::{MAX_QUOTA_NAMESPACES, NamespaceQuota, QuotaReport};
use harmony_agent_protocol::tenancy::{
    MANAGED_BY_LABEL, MANAGED_BY_VALUE, PROJECT_LABEL, QUOTA_NAME, TENANT_LABEL,
};
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::time::Duration;

use super::Executor;

/// How often the agent reads its project namespaces' quota use.
pub const REPORT_EVERY: Duration = Duration::from_secs(10);
/// The longest one read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The label selector of managed project namespaces.
pub fn managed_selector() -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{TENANT_LABEL},{PROJECT_LABEL}")
}

/// `(tenant, project)` of a namespace Harmony manages for a project; `None` for any other.
fn project_of(ns: &Namespace) -> Option<(String, String)> {
    let labels = ns.metadata.labels.as_ref()?;
    (labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY_VALUE)).then_some(())?;
    Some((
        labels.get(TENANT_LABEL)?.clone(),
        labels.get(PROJECT_LABEL)?.clone(),
    ))
}

fn figures(
    map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<String, String> {
    map.map(|m| m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        .unwrap_or_default()
}

/// The report of `found` (namespaces with their quota, `None` when it has none yet) read at
/// `at`: only managed project namespaces with a quota, at most [`MAX_QUOTA_NAMESPACES`];
/// `more` says the list had more than were read.
pub fn report(found: Vec<(Namespace, Option<ResourceQuota>)>, more: bool, at: i64) -> QuotaReport {
    let mut namespaces = Vec::new();
    for (ns, quota) in found {
        let (Some(name), Some((tenant, project)), Some(quota)) =
            (ns.metadata.name.clone(), project_of(&ns), quota)
        else {
            continue;
        };
        let status = quota.status.as_ref();
        namespaces.push(NamespaceQuota {
            namespace: name,
            tenant,
            project,
            hard: figures(status.and_then(|s| s.hard.as_ref())),
            used: figures(status.and_then(|s| s.used.as_ref())),
        });
    }
    QuotaReport {
        at,
        namespaces,
        truncated: more,
        error: None,
    }
    .bounded()
}

/// `previous` (or an empty report) saying why it could not be read again.
pub fn failed(previous: Option<QuotaReport>, error: String) -> QuotaReport {
    QuotaReport {
        error: Some(error),
        ..previous.unwrap_or_default()
    }
    .bounded()
}

impl Executor {
    /// Reads the quota use of the cluster's managed project namespaces now (see the module
    /// doc); when that fails, `previous` with the reason.
    pub async fn quota_report(&self, previous: Option<QuotaReport>, now_ms: i64) -> QuotaReport {
        match tokio::time::timeout(READ_TIMEOUT, self.read_quotas(now_ms)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => failed(previous, e),
            Err(_) => failed(
                previous,
                format!(
                    "reading the project namespaces' quotas took over {}s",
                    READ_TIMEOUT.as_secs()
                ),
            ),
        }
    }

    async fn read_quotas(&self, now_ms: i64) -> Result<QuotaReport, String> {
        let t = self
            .cluster
            .topology(false, false)
            .await
            .map_err(|e| e.to_string())?;
        let client = t.client().map_err(|e| e.to_string())?;
        let describe = |e: kube::Error| harmony::infra::kube::describe_error(&e);
        let params = ListParams::default()
            .labels(&managed_selector())
            .limit(MAX_QUOTA_NAMESPACES as u32);
        let list = Api::<Namespace>::all(client.clone())
            .list(&params)
            .await
            .map_err(|e| format!("listing the project namespaces: {}", describe(e)))?;
        let more = list
            .metadata
            .continue_
            .as_deref()
            .is_some_and(|c| !c.is_empty());
        let mut found = Vec::new();
        let mut error = None;
        for ns in list.items.into_iter().take(MAX_QUOTA_NAMESPACES) {
            let Some(name) = ns
                .metadata
                .name
                .clone()
                .filter(|_| project_of(&ns).is_some())
            else {
                continue;
            };
            match Api::<ResourceQuota>::namespaced(client.clone(), &name)
                .get_opt(QUOTA_NAME)
                .await
            {
                Ok(quota) => found.push((ns, quota)),
                Err(e) => {
                    error = Some(format!(
                        "reading ResourceQuota {name}/{QUOTA_NAME}: {}",
                        describe(e)
                    ))
                }
            }
        }
        let mut r = report(found, more, now_ms);
        if error.is_some() {
            r.error = error;
            r = r.bounded();
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceQuotaStatus;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn namespace(name: &str, labels: &[(&str, &str)]) -> Namespace {
        let mut n = Namespace::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n
    }

    fn managed(name: &str, tenant: &str) -> Namespace {
        namespace(
            name,
            &[
                (MANAGED_BY_LABEL, MANAGED_BY_VALUE),
                (TENANT_LABEL, tenant),
                (PROJECT_LABEL, "web"),
            ],
        )
    }

    fn quota(hard: &[(&str, &str)], used: &[(&str, &str)]) -> Option<ResourceQuota> {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
            )
        };
        Some(ResourceQuota {
            status: Some(ResourceQuotaStatus {
                hard: map(hard),
                used: map(used),
            }),
            ..ResourceQuota::default()
        })
    }

    #[test]
    fn only_managed_project_namespaces_with_a_quota_are_reported_with_hard_and_used() {
        let q = || quota(&[("requests.cpu", "4")], &[("requests.cpu", "1500m")]);
        let r = report(
            vec![
                (managed("acme-web", "acme"), q()),
                // Not managed by Harmony, or managed but no project's: never reported.
                (namespace("kube-system", &[]), q()),
                (
                    namespace("other", &[(MANAGED_BY_LABEL, "someone-else")]),
                    q(),
                ),
                (
                    namespace("half", &[(MANAGED_BY_LABEL, MANAGED_BY_VALUE)]),
                    q(),
                ),
                // A project namespace whose quota is not there yet.
                (managed("beta-web", "beta"), None),
                // Its quota's status not computed yet: reported with no figures.
                (managed("acme-new", "acme"), Some(ResourceQuota::default())),
            ],
            false,
            42,
        );
        let names: Vec<&str> = r.namespaces.iter().map(|n| n.namespace.as_str()).collect();
        assert_eq!(names, ["acme-new", "acme-web"]);
        let web = r.namespace("acme-web").unwrap();
        assert_eq!((web.tenant.as_str(), web.project.as_str()), ("acme", "web"));
        assert_eq!(web.hard["requests.cpu"], "4");
        assert_eq!(web.used["requests.cpu"], "1500m");
        assert!(r.namespace("acme-new").unwrap().used.is_empty());
        assert_eq!((r.at, r.truncated, r.error.clone()), (42, false, None));
    }

    #[test]
    fn the_report_is_bounded_and_says_so() {
        let found = (0..MAX_QUOTA_NAMESPACES + 10)
            .map(|i| {
                (
                    managed(&format!("t{i:03}-web"), "t"),
                    quota(&[("count/pods", "20")], &[("count/pods", "3")]),
                )
            })
            .collect();
        let r = report(found, false, 1);
        assert_eq!(r.namespaces.len(), MAX_QUOTA_NAMESPACES);
        assert!(r.truncated);
        // More in the cluster than the list returned: truncated too.
        let r = report(vec![(managed("a-web", "a"), quota(&[], &[]))], true, 1);
        assert!(r.truncated && r.namespaces.len() == 1);
    }

    #[test]
    fn a_failed_read_keeps_the_last_report_and_says_why() {
        let last = report(
            vec![(managed("acme-web", "acme"), quota(&[], &[]))],
            false,
            5,
        );
        let r = failed(
            Some(last),
            "listing the project namespaces: forbidden".into(),
        );
        assert_eq!(r.at, 5);
        assert_eq!(r.namespaces.len(), 1);
        assert!(r.error.unwrap().contains("forbidden"));
        let r = failed(None, "unreachable".into());
        assert!(r.namespaces.is_empty() && r.at == 0);
    }
}
