use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::domain::capability::CapabilityError;
use crate::domain::{ChangeAction, ObjectChange};

/// Wraps an I/O error with the path it happened on.
pub fn io_error(path: &Path, source: std::io::Error) -> CapabilityError {
    CapabilityError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A set of files to bring into a folder: each is compared with what is there and written
/// (through a temporary file and a rename) only when its bytes differ.
#[derive(Debug, Default)]
pub struct FileSync {
    files: BTreeMap<PathBuf, (String, Vec<u8>)>,
}

impl FileSync {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file at `path` named `object` in reports.
    pub fn add(&mut self, object: impl Into<String>, path: PathBuf, bytes: impl Into<Vec<u8>>) {
        self.files.insert(path, (object.into(), bytes.into()));
    }

    /// What applying would do to each file, without writing.
    pub fn plan(&self) -> Result<Vec<ObjectChange>, CapabilityError> {
        self.files
            .iter()
            .map(|(path, (object, bytes))| {
                Ok(ObjectChange {
                    object: object.clone(),
                    action: action_for(path, bytes)?,
                    location: Some(path.display().to_string()),
                    diff: Vec::new(),
                    status: None,
                })
            })
            .collect()
    }

    /// Writes every file whose bytes differ; returns one change per file.
    pub fn apply(&self) -> Result<Vec<ObjectChange>, CapabilityError> {
        let changes = self.plan()?;
        // Each folder is made once, not once per file: a render writes thousands of scripts
        // into one folder.
        let mut made: BTreeSet<&Path> = BTreeSet::new();
        for ((path, (_, bytes)), change) in self.files.iter().zip(&changes) {
            if change.action != ChangeAction::Unchanged {
                let dir = path.parent().unwrap_or(Path::new("."));
                if made.insert(dir) {
                    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
                }
                write_atomically(path, bytes)?;
            }
        }
        Ok(changes)
    }
}

fn action_for(path: &Path, bytes: &[u8]) -> Result<ChangeAction, CapabilityError> {
    match std::fs::read(path) {
        Ok(old) if old == bytes => Ok(ChangeAction::Unchanged),
        Ok(_) => Ok(ChangeAction::Update),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ChangeAction::Create),
        Err(e) => Err(io_error(path, e)),
    }
}

/// Writes `path` (whose folder exists) through a temporary file and a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CapabilityError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".harmony-tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(|e| io_error(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_error(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_only_when_bytes_differ() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b.conf");
        let mut sync = FileSync::new();
        sync.add("b.conf", path.clone(), "one\n");
        assert_eq!(sync.plan().unwrap()[0].action, ChangeAction::Create);
        assert!(!path.exists(), "plan writes nothing");
        assert_eq!(sync.apply().unwrap()[0].action, ChangeAction::Create);
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert_eq!(sync.apply().unwrap()[0].action, ChangeAction::Unchanged);
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
        let mut sync = FileSync::new();
        sync.add("b.conf", path.clone(), "two\n");
        assert_eq!(sync.apply().unwrap()[0].action, ChangeAction::Update);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
    }
}
