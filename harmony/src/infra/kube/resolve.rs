use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use std::collections::HashMap;
use tokio::sync::Mutex;

use crate::domain::capability::{CapabilityError, ObjectRef};

fn unknown(r: &ObjectRef, server: &str) -> CapabilityError {
    CapabilityError::UnknownKind {
        kind: r.kind.clone(),
        api_version: r.api_version.clone(),
        server: server.to_string(),
    }
}

/// How to address one kind on the server.
#[derive(Clone)]
pub(super) struct ResolvedKind {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// Discovery results per apiVersion/kind, so 1,000 ConfigMaps cost one discovery call.
#[derive(Default)]
pub(super) struct KindCache {
    kinds: Mutex<HashMap<(String, String), ResolvedKind>>,
}

impl KindCache {
    pub(super) async fn resolve(
        &self,
        client: &kube::Client,
        server: &str,
        r: &ObjectRef,
    ) -> Result<ResolvedKind, CapabilityError> {
        let key = (r.api_version.clone(), r.kind.clone());
        if let Some(k) = self.kinds.lock().await.get(&key) {
            return Ok(k.clone());
        }
        let gvk = GroupVersionKind::gvk(r.group(), r.version(), &r.kind);
        let (resource, caps): (ApiResource, ApiCapabilities) =
            kube::discovery::pinned_kind(client, &gvk)
                .await
                .map_err(|e| match e {
                    kube::Error::Api(s) if s.code == 404 => unknown(r, server),
                    kube::Error::Discovery(_) => unknown(r, server),
                    other => super::error::map(r, server, other),
                })?;
        let resolved = ResolvedKind {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        };
        self.kinds.lock().await.insert(key, resolved.clone());
        Ok(resolved)
    }

    /// Forgets everything, after CRDs change what the server serves.
    pub(super) async fn clear(&self) {
        self.kinds.lock().await.clear();
    }
}
