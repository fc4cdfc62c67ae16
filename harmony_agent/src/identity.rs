//! Where the agent keeps the identity it received: a file (mode 0600) or, in-cluster, a Secret
//! in its namespace written through the same Kubernetes client the ops use. Beside it, when it
//! was issued and when it expires, so the renewal time survives a restart: in the file
//! `<file>.meta.json`, or in the Secret's `issued-at` and `expires-at` keys.

use base64::Engine;
use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject, ObjectRef};
use harmony::infra::kube::K8sTopology;
use harmony_agent_protocol::SecretString;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::AgentError;

/// The Secret key holding the identity.
pub const SECRET_KEY: &str = "identity";
/// The Secret key holding when the identity was received (ms since the epoch).
pub const ISSUED_KEY: &str = "issued-at";
/// The Secret key holding when the identity expires (ms since the epoch).
pub const EXPIRES_KEY: &str = "expires-at";

/// An identity with its lifetime, as far as the agent knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredIdentity {
    /// The identity (`hid_...`). Never log it.
    pub identity: SecretString,
    /// When the agent received it, ms since the epoch (unknown for identities stored by an
    /// older agent).
    pub issued_at: Option<i64>,
    /// When it expires, ms since the epoch (`None`: never, or unknown).
    pub expires_at: Option<i64>,
}

/// The times kept beside an identity file.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Times {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    issued_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

/// The file of times beside identity file `path`.
pub fn meta_path(path: &std::path::Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".meta.json");
    path.with_file_name(name)
}

/// Writes `text` to `path` atomically (temp file, then rename), readable by the owner only.
fn replace_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    write_private(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

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
    pub async fn load(&self) -> Result<Option<StoredIdentity>, AgentError> {
        let fail = |reason: String| AgentError::Identity {
            store: self.describe(),
            reason,
        };
        match self {
            IdentityStore::File(path) => {
                let identity = match std::fs::read_to_string(path) {
                    Ok(text) => {
                        let t = text.trim();
                        if t.is_empty() {
                            return Ok(None);
                        }
                        SecretString::new(t)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(fail(e.to_string())),
                };
                // Times that cannot be read only make the renewal earlier (2/3 of what is left).
                let times: Times = std::fs::read_to_string(meta_path(path))
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or_default();
                Ok(Some(StoredIdentity {
                    identity,
                    issued_at: times.issued_at,
                    expires_at: times.expires_at,
                }))
            }
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
                let read = |key: &str| -> Result<Option<String>, AgentError> {
                    let Some(encoded) = secret
                        .value()
                        .pointer(&format!("/data/{key}"))
                        .and_then(|v| v.as_str())
                    else {
                        return Ok(None);
                    };
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(encoded)
                        .map_err(|_| fail(format!("data.{key} is not base64")))?;
                    let text = String::from_utf8(bytes)
                        .map_err(|_| fail(format!("data.{key} is not UTF-8")))?;
                    Ok(Some(text.trim().to_string()))
                };
                let Some(identity) = read(SECRET_KEY)?.filter(|t| !t.is_empty()) else {
                    return Ok(None);
                };
                let time = |key: &str| -> Result<Option<i64>, AgentError> {
                    Ok(read(key)?.and_then(|t| t.parse().ok()))
                };
                Ok(Some(StoredIdentity {
                    identity: SecretString::new(identity),
                    issued_at: time(ISSUED_KEY)?,
                    expires_at: time(EXPIRES_KEY)?,
                }))
            }
        }
    }

    /// Stores `stored`, replacing any previous identity; each write replaces a whole file or
    /// the whole Secret, so a crash leaves the old identity or the new one, never a mix.
    pub async fn save(&self, stored: &StoredIdentity) -> Result<(), AgentError> {
        let fail = |reason: String| AgentError::Identity {
            store: self.describe(),
            reason,
        };
        match self {
            IdentityStore::File(path) => {
                replace_private(path, stored.identity.expose()).map_err(|e| fail(e.to_string()))?;
                let times = Times {
                    issued_at: stored.issued_at,
                    expires_at: stored.expires_at,
                };
                let text = serde_json::to_string(&times).map_err(|e| fail(e.to_string()))?;
                replace_private(&meta_path(path), &text)
                    .map_err(|e| fail(format!("{}: {e}", meta_path(path).display())))
            }
            IdentityStore::Secret {
                namespace,
                name,
                k8s,
            } => {
                let mut data = serde_json::Map::new();
                data.insert(SECRET_KEY.into(), stored.identity.expose().into());
                if let Some(t) = stored.issued_at {
                    data.insert(ISSUED_KEY.into(), t.to_string().into());
                }
                if let Some(t) = stored.expires_at {
                    data.insert(EXPIRES_KEY.into(), t.to_string().into());
                }
                let object = K8sObject::new(serde_json::json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "namespace": namespace,
                                 "labels": {"app.kubernetes.io/name": "harmony-agent"}},
                    "type": "Opaque",
                    "stringData": data,
                }))
                .map_err(|e| fail(e.to_string()))?;
                k8s.apply(
                    &[object],
                    &ApplyOptions {
                        force_conflicts: true,
                        ..ApplyOptions::default()
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
    async fn file_identity_round_trips_with_its_times_and_private_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/identity");
        let store = IdentityStore::File(path.clone());
        assert!(store.load().await.unwrap().is_none());
        let stored = StoredIdentity {
            identity: SecretString::new("hid_abc"),
            issued_at: Some(1_000),
            expires_at: Some(4_000),
        };
        store.save(&stored).await.unwrap();
        assert_eq!(store.load().await.unwrap().unwrap(), stored);
        // The file itself holds only the identity, as before.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hid_abc");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for p in [path.clone(), meta_path(&path)] {
                let mode = std::fs::metadata(&p).unwrap().permissions().mode();
                assert_eq!(mode & 0o777, 0o600, "{}", p.display());
            }
        }
        // An identity file without times (an older agent's) still loads.
        std::fs::remove_file(meta_path(&path)).unwrap();
        let loaded = store.load().await.unwrap().unwrap();
        assert_eq!(loaded.identity.expose(), "hid_abc");
        assert_eq!((loaded.issued_at, loaded.expires_at), (None, None));
        assert_eq!(
            meta_path(std::path::Path::new("/a/identity")),
            std::path::Path::new("/a/identity.meta.json")
        );
    }
}
