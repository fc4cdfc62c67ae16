//! The providers file: external registrations and created instances, written atomically.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use super::{Registry, RegistryError, Remembered, State};
use crate::providers::external::Registration;

/// The providers file.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Persisted {
    #[serde(default)]
    pub(super) providers: Vec<Registration>,
    #[serde(default)]
    pub(super) instances: Vec<Remembered>,
}

impl Registry {
    pub(super) fn persist(&self, state: &State) -> Result<(), RegistryError> {
        let Some(path) = &self.config.file else {
            return Ok(());
        };
        let doc = Persisted {
            providers: state
                .providers
                .values()
                .filter_map(|e| e.external.as_ref().map(|x| x.registration().clone()))
                .collect(),
            instances: state.instances.values().cloned().collect(),
        };
        save(path, &doc).map_err(|reason| RegistryError::Persist {
            path: path.display().to_string(),
            reason,
        })
    }

    pub(super) fn persist_logged(&self, state: &State) {
        if let Err(e) = self.persist(state) {
            log::error!("{e}");
        }
    }
}

pub(super) fn load(path: &Path) -> Result<Persisted, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not a providers file ({e}); fix or remove it (registrations are then lost)",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Persisted::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes the file atomically (temp file + rename), mode 0600.
pub(super) fn save(path: &Path, doc: &Persisted) -> Result<(), String> {
    let text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    crate::identity::write_private(&tmp, &text)
        .map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("renaming {} into place: {e}", tmp.display()))
}
