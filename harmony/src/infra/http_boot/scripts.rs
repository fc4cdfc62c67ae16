//! Per-host iPXE scripts kept in one table file, as Matchbox keeps its machine profiles, instead
//! of one file per host: a render of 10,000 hosts writes one file, not 10,000, and the boot
//! server answers `GET /ipxe/<name>.ipxe` from the table. See adr/0026.
//!
//! The table is `<dir>/ipxe-scripts.json` beside `www/` (so it is not itself downloadable): a
//! JSON object from script name (`52-54-00-12-34-56.ipxe`) to script text, sorted by name.
//! `jq -r '."52-54-00-12-34-56.ipxe"' ipxe-scripts.json` prints one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hyper::body::Bytes;

/// The table's file name, in the HTTP boot backend's folder.
pub const TABLE_FILE: &str = "ipxe-scripts.json";

/// The folder (under the server root) whose `<name>.ipxe` files are per-host scripts.
const SCRIPT_DIR: &str = "ipxe/";

/// The table entry a path under the server root stands for: `ipxe/<name>.ipxe`, one segment
/// of letters, digits, `.`, `-` and `_`. Other paths are ordinary files.
pub fn script_name(relative: &str) -> Option<&str> {
    let name = relative.strip_prefix(SCRIPT_DIR)?;
    let stem = name.strip_suffix(".ipxe")?;
    let ok = !stem.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    ok.then_some(name)
}

/// The scripts table of one HTTP boot folder.
#[derive(Debug, Clone)]
pub struct ScriptTable {
    path: PathBuf,
}

impl ScriptTable {
    /// The table of the HTTP boot backend whose folder is `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            path: dir.join(TABLE_FILE),
        }
    }

    /// The table's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every script, by name; empty when the file does not exist yet.
    pub fn read(&self) -> std::io::Result<BTreeMap<String, String>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "{} is not a scripts table (a JSON object of name to script): {e}",
                        self.path.display()
                    ),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(e),
        }
    }

    /// Replaces the table (through a temporary file and a rename, so the server reads the old
    /// table or the new one, never half of one).
    pub fn write(&self, scripts: &BTreeMap<String, String>) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let bytes = serde_json::to_vec_pretty(scripts).map_err(std::io::Error::other)?;
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(".harmony-tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &self.path)
    }
}

/// What identifies one version of the table file: a rename makes a new inode, a rewrite in
/// place a new length or modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

fn version(meta: &std::fs::Metadata) -> Version {
    use std::os::unix::fs::MetadataExt;
    Version {
        inode: meta.ino(),
        len: meta.len(),
        modified: meta.modified().ok(),
    }
}

/// Every script of one version of the table, by name.
type Loaded = Arc<BTreeMap<String, Bytes>>;

/// The server's view of the table: read once, read again only when the file changed.
#[derive(Debug)]
pub(super) struct ScriptCache {
    table: ScriptTable,
    loaded: Mutex<Option<(Version, Loaded)>>,
}

impl ScriptCache {
    pub(super) fn new(table: ScriptTable) -> Self {
        Self {
            table,
            loaded: Mutex::new(None),
        }
    }

    /// The script named `name`, as the table holds it now.
    pub(super) fn get(&self, name: &str) -> Option<Bytes> {
        let meta = std::fs::metadata(self.table.path()).ok()?;
        let now = version(&meta);
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let current = match loaded.as_ref() {
            Some((v, scripts)) if *v == now => scripts.clone(),
            _ => {
                let scripts = match self.table.read() {
                    Ok(s) => s,
                    Err(e) => {
                        log::warn!("http boot: {e}");
                        return None;
                    }
                };
                let scripts: Loaded = Arc::new(
                    scripts
                        .into_iter()
                        .map(|(k, v)| (k, Bytes::from(v)))
                        .collect(),
                );
                *loaded = Some((now, scripts.clone()));
                scripts
            }
        };
        current.get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_single_segment_ipxe_files_under_ipxe_are_scripts() {
        assert_eq!(
            script_name("ipxe/52-54-00-12-34-56.ipxe"),
            Some("52-54-00-12-34-56.ipxe")
        );
        for other in [
            "boot.ipxe",
            "ipxe/.ipxe",
            "ipxe/a/b.ipxe",
            "ipxe/a.txt",
            "ipxe/..ipxe",
            "ignition/worker.ign",
            "xipxe/a.ipxe",
        ] {
            assert_eq!(script_name(other), None, "{other}");
        }
    }

    #[test]
    fn the_cache_follows_each_rewrite_of_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let table = ScriptTable::in_dir(dir.path());
        let cache = ScriptCache::new(table.clone());
        assert_eq!(cache.get("a.ipxe"), None, "no table yet");
        let mut scripts = BTreeMap::from([("a.ipxe".to_string(), "#!ipxe\none\n".to_string())]);
        table.write(&scripts).unwrap();
        assert_eq!(cache.get("a.ipxe").unwrap(), "#!ipxe\none\n");
        scripts.insert("a.ipxe".into(), "#!ipxe\ntwo\n".into());
        table.write(&scripts).unwrap();
        assert_eq!(cache.get("a.ipxe").unwrap(), "#!ipxe\ntwo\n");
        std::fs::write(table.path(), b"not json").unwrap();
        assert_eq!(cache.get("a.ipxe"), None, "a broken table serves nothing");
    }

    proptest! {
        #[test]
        fn a_script_name_never_leaves_its_folder(path in "[a-z./_-]{0,24}") {
            if let Some(name) = script_name(&path) {
                prop_assert!(!name.contains('/'));
                prop_assert!(!name.starts_with('.'));
                prop_assert!(name.ends_with(".ipxe") && name.len() > ".ipxe".len());
            }
        }

        #[test]
        fn a_table_reads_back_what_was_written(
            scripts in proptest::collection::btree_map("[a-z0-9-]{1,17}\\.ipxe", "\\PC{0,80}", 0..20)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let table = ScriptTable::in_dir(dir.path());
            table.write(&scripts).unwrap();
            prop_assert_eq!(table.read().unwrap(), scripts);
        }
    }
}
