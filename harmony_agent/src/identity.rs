//! Where the agent keeps the identity it received: a file (mode 0600) or, in-cluster, a Secret
//! in its namespace written through the same Kubernetes client the ops use.

use base64::Engine;
use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject, ObjectRef};
use harmony::infra::kube::K8sTopology;
use harmony_agent_protocol::SecretString;
use std::path::PathBuf;
use std::sync::Arc;

use crate::AgentError;

/// The Secret key holding the identity.
pub const SECRET_KEY: &str = "identity";

/// An identity store.
#[derive(Clone)]
pub enum IdentityStore {
    /// A file.
    File(PathBuf),
    /// A Secret `name` in `namespace`.
    Secret {
        /// Namespace.
        namespace: String,
        /// Secret name.
        name: String,
        /// The cluster client.
        k8s: Arc<K8sTopology>,
    },
}

impl IdentityStore {
    fn describe(&self) -> String {
        match self {
            IdentityStore::File(p) => format!("identity file {}", p.display()),
            IdentityStore::Secret {
                namespace, name, ..
            } => format!("identity Secret {namespace}/{name}"),
        }
    }

    fn secret_ref(namespace: &str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The stored identity, if any.
    pub async fn load(&self) -> Result<Option<SecretString>, AgentError> {
        let fail = |reason: String| AgentError::Identity {
            store: self.describe(),
            reason,
        };
        match self {
            IdentityStore::File(path) => match std::fs::read_to_string(path) {
                Ok(text) => {
                    let t = text.trim();
                    Ok((!t.is_empty()).then(|| SecretString::new(t)))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(fail(e.to_string())),
            },
            IdentityStore::Secret {
                namespace,
                name,
                k8s,
            } => {
                let found = k8s
                    .get(&Self::secret_ref(namespace, name))
                    .await
                    .map_err(|e| fail(e.to_string()))?;
                let Some(secret) = found else { return Ok(None) };
                let Some(encoded) = secret
                    .value()
                    .pointer(&format!("/data/{SECRET_KEY}"))
                    .and_then(|v| v.as_str())
                else {
                    return Ok(None);
                };
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|_| fail(format!("data.{SECRET_KEY} is not base64")))?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| fail(format!("data.{SECRET_KEY} is not UTF-8")))?;
                Ok(Some(SecretString::new(text.trim())))
            }
        }
    }

    /// Stores `identity`, replacing any previous one.
    pub async fn save(&self, identity: &SecretString) -> Result<(), AgentError> {
        let fail = |reason: String| AgentError::Identity {
            store: self.describe(),
            reason,
        };
        match self {
            IdentityStore::File(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
                }
                let tmp = path.with_extension("tmp");
                write_private(&tmp, identity.expose()).map_err(|e| fail(e.to_string()))?;
                std::fs::rename(&tmp, path).map_err(|e| fail(e.to_string()))
            }
            IdentityStore::Secret {
                namespace,
                name,
                k8s,
            } => {
                let object = K8sObject::new(serde_json::json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "namespace": namespace,
                                 "labels": {"app.kubernetes.io/name": "harmony-agent"}},
                    "type": "Opaque",
                    "stringData": {SECRET_KEY: identity.expose()},
                }))
                .map_err(|e| fail(e.to_string()))?;
                k8s.apply(
                    &[object],
                    &ApplyOptions {
                        force_conflicts: true,
                        owner: None,
                    },
                )
                .await
                .map(|_| ())
                .map_err(|e| fail(e.error.to_string()))
            }
        }
    }
}

/// Writes `text` to `path` readable by the owner only.
#[cfg(unix)]
pub(crate) fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// Writes `text` to `path` (no permission bits to set here).
#[cfg(not(unix))]
pub(crate) fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn file_identity_round_trips_with_private_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let store = IdentityStore::File(dir.path().join("state/identity"));
        assert!(store.load().await.unwrap().is_none());
        store.save(&SecretString::new("hid_abc")).await.unwrap();
        assert_eq!(store.load().await.unwrap().unwrap().expose(), "hid_abc");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("state/identity"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
