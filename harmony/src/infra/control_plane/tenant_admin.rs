//! The control plane's tenancy admin API as the [`TenantAdmin`] capability: a 409 on create
//! means "already there", a 422 `quota_exceeded` becomes `Rejected` carrying the control plane's
//! message (which names the cap, the resource and the figures), every other failure the
//! `CapabilityError` of the same kind.

use async_trait::async_trait;
use harmony_agent_protocol::code;
use harmony_api::{Project, Tenant};
use harmony_types::{Dns1123Label, RegionId};

use super::client::{ControlPlaneClient, ControlPlaneError};
use crate::domain::capability::{
    CapabilityError, ProjectQuota, ProjectState, TenantAdmin, TenantState,
};

impl From<Tenant> for TenantState {
    fn from(t: Tenant) -> Self {
        TenantState {
            tenant: t.tenant,
            caps: t.caps,
        }
    }
}

impl From<Project> for ProjectState {
    fn from(p: Project) -> Self {
        ProjectState {
            tenant: p.tenant,
            project: p.project,
            namespace: p.namespace,
            quotas: p.quotas,
        }
    }
}

impl ControlPlaneClient {
    /// The capability error of a failed tenancy call about `object`.
    fn tenancy_error(&self, object: &str, e: ControlPlaneError) -> CapabilityError {
        let server = format!("control plane {}", self.url());
        match e {
            ControlPlaneError::Status { status, error, .. }
                if status == 422 && error.code.as_deref() == Some(code::QUOTA_EXCEEDED) =>
            {
                CapabilityError::Rejected {
                    object: object.to_string(),
                    server,
                    message: error.error,
                }
            }
            e => e.into_capability(object, &server),
        }
    }
}

/// Whether the control plane answered 409 (the name is taken).
fn exists(e: &ControlPlaneError) -> bool {
    matches!(e, ControlPlaneError::Status { status: 409, .. })
}

#[async_trait]
impl TenantAdmin for ControlPlaneClient {
    fn tenancy_url(&self) -> &str {
        self.url()
    }

    async fn tenant(&self, tenant: &Dns1123Label) -> Result<Option<TenantState>, CapabilityError> {
        let tenants = self
            .tenants()
            .await
            .map_err(|e| self.tenancy_error(&format!("tenant {tenant}"), e))?;
        Ok(tenants
            .into_iter()
            .find(|t| t.tenant == tenant.as_str())
            .map(TenantState::from))
    }

    async fn ensure_tenant(&self, tenant: &Dns1123Label) -> Result<bool, CapabilityError> {
        match self.create_tenant(tenant.as_str()).await {
            Ok(_) => Ok(true),
            Err(e) if exists(&e) => Ok(false),
            Err(e) => Err(self.tenancy_error(&format!("tenant {tenant}"), e)),
        }
    }

    async fn set_tenant_cap(
        &self,
        tenant: &Dns1123Label,
        region: &RegionId,
        cap: &ProjectQuota,
    ) -> Result<(), CapabilityError> {
        ControlPlaneClient::set_tenant_cap(self, tenant.as_str(), region.as_str(), cap)
            .await
            .map(|_| ())
            .map_err(|e| {
                self.tenancy_error(&format!("tenant {tenant}'s cap in region {region}"), e)
            })
    }

    async fn ensure_project(
        &self,
        tenant: &Dns1123Label,
        project: &Dns1123Label,
        namespace: Option<&Dns1123Label>,
    ) -> Result<bool, CapabilityError> {
        let namespace = namespace.map(Dns1123Label::as_str);
        match self
            .create_project(tenant.as_str(), project.as_str(), namespace)
            .await
        {
            Ok(_) => Ok(true),
            // A 409 is either this project existing, or its namespace belonging to another
            // project (then the control plane's message says whose).
            Err(e) if exists(&e) => {
                let object = format!("project {tenant}/{project}");
                let existing = TenantAdmin::projects(self, tenant).await?;
                if existing.iter().any(|p| p.project == project.as_str()) {
                    Ok(false)
                } else {
                    Err(self.tenancy_error(&object, e))
                }
            }
            Err(e) => Err(self.tenancy_error(&format!("project {tenant}/{project}"), e)),
        }
    }

    async fn set_project_quota(
        &self,
        tenant: &Dns1123Label,
        project: &Dns1123Label,
        region: &RegionId,
        quota: &ProjectQuota,
    ) -> Result<(), CapabilityError> {
        ControlPlaneClient::set_project_quota(
            self,
            tenant.as_str(),
            project.as_str(),
            region.as_str(),
            quota,
        )
        .await
        .map(|_| ())
        .map_err(|e| {
            self.tenancy_error(
                &format!("project {tenant}/{project}'s quota in region {region}"),
                e,
            )
        })
    }

    async fn projects(&self, tenant: &Dns1123Label) -> Result<Vec<ProjectState>, CapabilityError> {
        let all = ControlPlaneClient::projects(self)
            .await
            .map_err(|e| self.tenancy_error(&format!("projects of tenant {tenant}"), e))?;
        Ok(all
            .into_iter()
            .filter(|p| p.tenant == tenant.as_str())
            .map(ProjectState::from)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use harmony_api::ApiError;
    use serde_json::json;

    use super::super::tests::{Reply, TestServer};
    use super::*;

    fn label(s: &str) -> Dns1123Label {
        Dns1123Label::parse(s).unwrap()
    }

    #[tokio::test]
    async fn existing_names_are_not_errors_and_reads_keep_only_the_tenant() {
        let server = TestServer::start(|seen| match (seen.method.as_str(), seen.uri.as_str()) {
            ("POST", "/v1/admin/tenants") => {
                Reply::json(409, ApiError::new("tenant: \"acme\" already exists"))
            }
            ("POST", "/v1/admin/tenants/acme/projects") => Reply::json(
                201,
                json!({"tenant": "acme", "project": "web", "namespace": "acme-web"}),
            ),
            ("GET", "/v1/admin/tenants") => Reply::json(
                200,
                json!({"tenants": [{"tenant": "acme", "caps": {"eu": {"cpu": "4"}}},
                                   {"tenant": "other"}]}),
            ),
            ("GET", "/v1/projects") => Reply::json(
                200,
                json!({"projects": [
                    {"tenant": "acme", "project": "web", "namespace": "acme-web",
                     "quotas": {"eu": {"cpu": "1"}}},
                    {"tenant": "other", "project": "web", "namespace": "other-web"}]}),
            ),
            _ => Reply::json(404, ApiError::new("no route")),
        })
        .await;
        let admin = server.client();
        assert!(!admin.ensure_tenant(&label("acme")).await.unwrap());
        assert!(
            admin
                .ensure_project(&label("acme"), &label("web"), None)
                .await
                .unwrap()
        );
        let tenant = TenantAdmin::tenant(&admin, &label("acme"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(tenant.caps["eu"].cpu.as_deref(), Some("4"));
        assert_eq!(
            TenantAdmin::tenant(&admin, &label("nobody")).await.unwrap(),
            None
        );
        let projects = TenantAdmin::projects(&admin, &label("acme")).await.unwrap();
        assert_eq!(projects.len(), 1, "{projects:?}");
        assert_eq!(
            (
                projects[0].namespace.as_str(),
                projects[0].quotas["eu"].cpu.as_deref()
            ),
            ("acme-web", Some("1"))
        );
    }

    #[tokio::test]
    async fn a_namespace_taken_by_another_project_is_an_error_not_an_existing_project() {
        let taken = "namespace: \"shared\" belongs to project other/web; give another in namespace";
        let server = TestServer::start(move |seen| match seen.method.as_str() {
            "POST" => Reply::json(409, ApiError::new(taken)),
            _ => Reply::json(200, json!({"projects": []})),
        })
        .await;
        let admin = server.client();
        let shared = label("shared");
        let e = admin
            .ensure_project(&label("acme"), &label("web"), Some(&shared))
            .await
            .unwrap_err();
        assert!(e.to_string().contains(taken), "{e}");
        assert!(e.to_string().contains("project acme/web"), "{e}");
    }

    #[tokio::test]
    async fn a_quota_over_the_cap_is_rejected_with_the_control_planes_words() {
        let over = "quota: cpu over tenant \"acme\"'s cap in region \"eu\": the cap is 4, its other projects' quotas take 3 and this one asks 2; lower this quota or raise the cap with PUT /v1/admin/tenants/acme/caps/eu";
        let server = TestServer::start(move |_| {
            Reply::json(422, ApiError::new(over).with_code(code::QUOTA_EXCEEDED))
        })
        .await;
        let admin = server.client();
        let quota = ProjectQuota {
            cpu: Some("2".into()),
            ..ProjectQuota::default()
        };
        let e = TenantAdmin::set_project_quota(
            &admin,
            &label("acme"),
            &label("web"),
            &RegionId::parse("eu").unwrap(),
            &quota,
        )
        .await
        .unwrap_err();
        let CapabilityError::Rejected {
            object, message, ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(object, "project acme/web's quota in region eu");
        assert_eq!(message, over);
        assert!(e.to_string().contains("the cap is 4"), "{e}");
    }
}
