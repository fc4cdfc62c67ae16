//! `Tenant`: a tenant with its per-region caps and its projects with their per-region quotas,
//! as a cluster-scoped custom resource for the operator. Its name is the tenant's.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use harmony::domain::capability::ProjectQuota;

use crate::postgresql::ResourceStatus;

/// What a tenant should be on the control plane: the spec of the `Tenant` resource (named after
/// the tenant), and the input of [`super::TenantScore`].
#[derive(
    CustomResource, JsonSchema, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize,
)]
#[kube(
    group = "harmony.io",
    version = "v1alpha1",
    kind = "Tenant",
    status = "ResourceStatus",
    shortname = "tnt",
    doc = "A tenant of the control plane (named after the resource): its caps per region and its projects with their quotas per region",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TenantSpec {
    /// The tenant's cap per region (a DNS-1123 label): the most its projects' quotas there may
    /// add up to. Regions not named keep whatever cap they have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, QuotaSchema>")]
    pub caps: BTreeMap<String, ProjectQuota>,
    /// The tenant's projects. Projects not named are left as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<TenantProjectSpec>,
}

/// One project of a tenant.
#[derive(JsonSchema, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantProjectSpec {
    /// The project (a DNS-1123 label), unique within the tenant.
    #[schemars(length(max = 63))]
    pub name: String,
    /// Its namespace in every region (a DNS-1123 label); `<tenant>-<project>` when absent. It
    /// cannot change once the project exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub namespace: Option<String>,
    /// Its quota per region (a project deploys only where it has one). Regions not named keep
    /// whatever quota they have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, QuotaSchema>")]
    pub quotas: BTreeMap<String, ProjectQuota>,
}

/// The schema of a [`ProjectQuota`] (the control plane's type, shared with the agent).
#[derive(JsonSchema)]
#[allow(dead_code, reason = "only its JSON schema is used, never a value")]
struct QuotaSchema {
    /// Total CPU requests (a Kubernetes quantity: `"4"`, `"500m"`); unlimited when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu: Option<String>,
    /// Total memory requests (`"8Gi"`); unlimited when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory: Option<String>,
    /// Total storage requested by PersistentVolumeClaims (`"100Gi"`); unlimited when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    storage: Option<String>,
    /// Object counts by resource (`configmaps: 50`, `pods: 100`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    objects: BTreeMap<String, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn the_crd_is_cluster_scoped_and_its_spec_reads_the_documented_yaml() {
        let crd = Tenant::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.group, "harmony.io");
        assert_eq!(crd.spec.names.kind, "Tenant");
        let yaml = "caps:\n  eu-west: {cpu: \"8\", memory: 16Gi, objects: {pods: 100}}\n\
                    projects:\n  - name: web\n    quotas:\n      eu-west: {cpu: \"2\", memory: 4Gi}\n\
                    \x20 - name: batch\n    namespace: acme-jobs\n";
        let spec: TenantSpec = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(spec.caps["eu-west"].objects["pods"], 100);
        assert_eq!(spec.projects[0].quotas["eu-west"].cpu.as_deref(), Some("2"));
        assert_eq!(spec.projects[1].namespace.as_deref(), Some("acme-jobs"));
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
        let caps = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["caps"];
        assert!(
            caps["additionalProperties"]["properties"]["memory"].is_object(),
            "{caps}"
        );
    }
}
