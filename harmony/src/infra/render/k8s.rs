use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::RenderTopology;
use super::layout::object_path;
use super::yaml::to_stable_yaml;
use crate::domain::capability::{
    ApplyFailure, ApplyOptions, CapabilityError, K8sClient, K8sObject, ObjectRef, WaitCondition,
    WaitOutcome,
};
use crate::domain::diff::field_changes;
use crate::domain::redact::redact_changes;
use crate::domain::{ChangeAction, ObjectChange};

fn io_error(path: &Path, source: std::io::Error) -> CapabilityError {
    CapabilityError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `bytes` through a temporary file and a rename, so a crash never leaves half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CapabilityError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, bytes).map_err(|e| io_error(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_error(path, e))
}

impl RenderTopology {
    fn file_for(&self, r: &ObjectRef) -> PathBuf {
        self.site_dir().join(object_path(r))
    }

    fn read_existing(&self, path: &Path) -> Result<Option<String>, CapabilityError> {
        match std::fs::read_to_string(path) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(path, e)),
        }
    }

    fn render_one(&self, object: &K8sObject) -> Result<ObjectChange, CapabilityError> {
        let r = object.reference();
        let path = self.file_for(r);
        let text = to_stable_yaml(object.value()).map_err(|e| CapabilityError::InvalidObject {
            object: r.to_string(),
            problem: format!("cannot be written as YAML: {e}"),
        })?;
        let existing = self.read_existing(&path)?;
        let (action, diff) = match &existing {
            None => (ChangeAction::Create, Vec::new()),
            Some(old) if *old == text => (ChangeAction::Unchanged, Vec::new()),
            Some(old) => {
                // A hand-edited or foreign file still diffs as a whole replacement.
                let old_value: Value = serde_yaml::from_str(old).unwrap_or(Value::Null);
                let diff = redact_changes(
                    object.is_secret(),
                    field_changes(&old_value, object.value()),
                );
                (ChangeAction::Update, diff)
            }
        };
        if !self.plan && action != ChangeAction::Unchanged {
            write_atomically(&path, text.as_bytes())?;
        }
        Ok(ObjectChange {
            object: r.to_string(),
            action,
            location: Some(path.display().to_string()),
            diff,
            status: None,
        })
    }
}

#[async_trait]
impl K8sClient for RenderTopology {
    async fn apply(
        &self,
        objects: &[K8sObject],
        _options: &ApplyOptions,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let mut seen = BTreeSet::new();
        if let Some(dup) = objects
            .iter()
            .map(K8sObject::reference)
            .find(|r| !seen.insert(*r))
        {
            return Err(ApplyFailure {
                applied: Vec::new(),
                error: CapabilityError::InvalidObject {
                    object: dup.to_string(),
                    problem: "declared twice in one apply; give each object a distinct name".into(),
                },
            });
        }
        let mut applied = Vec::with_capacity(objects.len());
        for object in objects {
            match tokio::task::block_in_place(|| self.render_one(object)) {
                Ok(change) => applied.push(change),
                Err(error) => return Err(ApplyFailure { applied, error }),
            }
        }
        Ok(applied)
    }

    async fn get(&self, object: &ObjectRef) -> Result<Option<K8sObject>, CapabilityError> {
        let path = self.file_for(object);
        let Some(text) = tokio::task::block_in_place(|| self.read_existing(&path))? else {
            return Ok(None);
        };
        let value: Value =
            serde_yaml::from_str(&text).map_err(|e| CapabilityError::InvalidObject {
                object: object.to_string(),
                problem: format!("rendered file {} does not parse: {e}", path.display()),
            })?;
        K8sObject::new(value).map(Some)
    }

    async fn delete(&self, object: &ObjectRef) -> Result<ObjectChange, CapabilityError> {
        let path = self.file_for(object);
        let action = if path.exists() {
            ChangeAction::Delete
        } else {
            ChangeAction::Unchanged
        };
        if action == ChangeAction::Delete && !self.plan {
            tokio::task::block_in_place(|| std::fs::remove_file(&path))
                .map_err(|e| io_error(&path, e))?;
        }
        Ok(ObjectChange {
            object: object.to_string(),
            action,
            location: Some(path.display().to_string()),
            diff: Vec::new(),
            status: None,
        })
    }

    async fn wait_for(
        &self,
        object: &ObjectRef,
        condition: &WaitCondition,
        _timeout: Duration,
    ) -> Result<WaitOutcome, CapabilityError> {
        Ok(WaitOutcome::Skipped {
            reason: format!(
                "render mode has no live state: {condition} on {object} was not checked"
            ),
        })
    }
    fn apply_progress(&self, what: &str) -> String {
        if self.plan {
            format!(
                "comparing {what} with the files in {} (nothing is written)",
                self.site_dir().display()
            )
        } else {
            format!("rendering {what} to {}", self.site_dir().display())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(value: &str) -> K8sObject {
        K8sObject::new(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": "shop"}, "stringData": {"password": value}}))
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn create_unchanged_update_with_redacted_diff() {
        let dir = tempfile::tempdir().unwrap();
        let topo = RenderTopology::new("site-a", dir.path());
        let opts = ApplyOptions::default();
        let first = topo.apply(&[secret("hunter2")], &opts).await.unwrap();
        assert_eq!(first[0].action, ChangeAction::Create);
        let path = dir
            .path()
            .join("site-a/kubernetes/namespaces/shop/secret_db.yaml");
        assert!(
            std::fs::read_to_string(&path).unwrap().contains("hunter2"),
            "files hold real values"
        );
        let again = topo.apply(&[secret("hunter2")], &opts).await.unwrap();
        assert_eq!(again[0].action, ChangeAction::Unchanged);
        let changed = topo.apply(&[secret("correct-horse")], &opts).await.unwrap();
        assert_eq!(changed[0].action, ChangeAction::Update);
        let shown = format!("{changed:?}");
        assert!(shown.contains("stringData.password"), "{shown}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("correct-horse"),
            "{shown}"
        );
        let got = topo.get(secret("x").reference()).await.unwrap().unwrap();
        assert_eq!(got.value()["stringData"]["password"], "correct-horse");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn plan_mode_writes_nothing_and_delete_converges() {
        let dir = tempfile::tempdir().unwrap();
        let plan = RenderTopology {
            plan: true,
            ..RenderTopology::new("s", dir.path())
        };
        let change = plan
            .apply(&[secret("a")], &ApplyOptions::default())
            .await
            .unwrap();
        assert_eq!(change[0].action, ChangeAction::Create);
        assert!(!dir.path().join("s").exists());
        let real = RenderTopology::new("s", dir.path());
        real.apply(&[secret("a")], &ApplyOptions::default())
            .await
            .unwrap();
        let r = secret("a").reference().clone();
        assert_eq!(real.delete(&r).await.unwrap().action, ChangeAction::Delete);
        assert_eq!(
            real.delete(&r).await.unwrap().action,
            ChangeAction::Unchanged
        );
        assert!(matches!(
            real.wait_for(&r, &WaitCondition::Exists, Duration::from_secs(1))
                .await
                .unwrap(),
            WaitOutcome::Skipped { .. }
        ));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn duplicates_are_rejected_before_writing() {
        let dir = tempfile::tempdir().unwrap();
        let topo = RenderTopology::new("s", dir.path());
        let err = topo
            .apply(&[secret("a"), secret("b")], &ApplyOptions::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("declared twice"), "{err}");
        assert!(err.applied.is_empty());
        assert!(!dir.path().join("s/kubernetes").exists());
    }
}
