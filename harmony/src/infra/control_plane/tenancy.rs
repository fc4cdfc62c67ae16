//! The tenancy half of [`ControlPlaneClient`]: the admin's tenant, token, cap, project and quota
//! routes, the project list, and a client that acts for one project.

use harmony_api::{
    CreateProject, CreateTenant, CreateTenantToken, Project, ProjectList, ProjectQuota, Tenant,
    TenantCaps, TenantList, TenantToken,
};
use harmony_http::reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

use super::client::{ControlPlaneClient, ControlPlaneError};

impl ControlPlaneClient {
    /// This client, with every request and service create run for `project`. With a tenant
    /// token `tenant` is `None` (the token names it); the admin names the tenant.
    pub fn for_project(mut self, tenant: Option<&str>, project: &str) -> Self {
        self.project = Some((tenant.map(str::to_string), project.to_string()));
        self
    }

    /// `method path` with `body`, answered `expect` (parsed), else the server's error.
    async fn expect<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        expect: StatusCode,
        what: &str,
    ) -> Result<T, ControlPlaneError> {
        let (status, bytes) = self.call(method, path, body, what).await?;
        if status != expect {
            return Err(Self::status_error(what, status, &bytes));
        }
        Self::parse(what, &bytes)
    }

    /// Creates tenant `tenant` (admin token).
    pub async fn create_tenant(&self, tenant: &str) -> Result<Tenant, ControlPlaneError> {
        let body = CreateTenant {
            tenant: tenant.to_string(),
        };
        self.expect(
            Method::POST,
            "/v1/admin/tenants",
            Some(&body),
            StatusCode::CREATED,
            &format!("creating tenant {tenant}"),
        )
        .await
    }

    /// Every tenant (admin token).
    pub async fn tenants(&self) -> Result<Vec<Tenant>, ControlPlaneError> {
        let list: TenantList = self
            .expect::<(), _>(
                Method::GET,
                "/v1/admin/tenants",
                None,
                StatusCode::OK,
                "listing tenants",
            )
            .await?;
        Ok(list.tenants)
    }

    /// A new token for `tenant`, valid for `ttl` (forever when `None`); shown once: hand it to
    /// the tenant, never print it (admin token).
    pub async fn create_tenant_token(
        &self,
        tenant: &str,
        ttl: Option<Duration>,
    ) -> Result<TenantToken, ControlPlaneError> {
        let body = CreateTenantToken {
            ttl_s: ttl.map(|t| t.as_secs_f64()),
        };
        self.expect(
            Method::POST,
            &format!("/v1/admin/tenants/{tenant}/tokens"),
            Some(&body),
            StatusCode::CREATED,
            &format!("creating a token for tenant {tenant}"),
        )
        .await
    }

    /// Revokes token `id` of `tenant` (admin token).
    pub async fn revoke_tenant_token(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<(), ControlPlaneError> {
        self.expect::<(), serde_json::Value>(
            Method::DELETE,
            &format!("/v1/admin/tenants/{tenant}/tokens/{id}"),
            None,
            StatusCode::OK,
            &format!("revoking token {id} of tenant {tenant}"),
        )
        .await
        .map(|_| ())
    }

    /// Sets `tenant`'s cap in `region`: the most its projects' quotas there may add up to
    /// (admin token). Answers every cap of the tenant.
    pub async fn set_tenant_cap(
        &self,
        tenant: &str,
        region: &str,
        cap: &ProjectQuota,
    ) -> Result<TenantCaps, ControlPlaneError> {
        self.expect(
            Method::PUT,
            &format!("/v1/admin/tenants/{tenant}/caps/{region}"),
            Some(cap),
            StatusCode::OK,
            &format!("setting tenant {tenant}'s cap in region {region}"),
        )
        .await
    }

    /// Creates project `project` of `tenant` (namespace `<tenant>-<project>` when `None`)
    /// (admin token).
    pub async fn create_project(
        &self,
        tenant: &str,
        project: &str,
        namespace: Option<&str>,
    ) -> Result<Project, ControlPlaneError> {
        let body = CreateProject {
            project: project.to_string(),
            namespace: namespace.map(str::to_string),
        };
        self.expect(
            Method::POST,
            &format!("/v1/admin/tenants/{tenant}/projects"),
            Some(&body),
            StatusCode::CREATED,
            &format!("creating project {project} of tenant {tenant}"),
        )
        .await
    }

    /// Sets a project's quota in `region` (admin token); refused (422) when the tenant's
    /// projects would exceed its cap there.
    pub async fn set_project_quota(
        &self,
        tenant: &str,
        project: &str,
        region: &str,
        quota: &ProjectQuota,
    ) -> Result<Project, ControlPlaneError> {
        self.expect(
            Method::PUT,
            &format!("/v1/admin/tenants/{tenant}/projects/{project}/quotas/{region}"),
            Some(quota),
            StatusCode::OK,
            &format!("setting project {project}'s quota in region {region}"),
        )
        .await
    }

    /// The projects this token sees: its tenant's (every tenant's for the admin).
    pub async fn projects(&self) -> Result<Vec<Project>, ControlPlaneError> {
        let list: ProjectList = self
            .expect::<(), _>(
                Method::GET,
                "/v1/projects",
                None,
                StatusCode::OK,
                "listing projects",
            )
            .await?;
        Ok(list.projects)
    }
}
