//! Reading what a render wrote, for byte-for-byte comparisons.

use std::collections::BTreeMap;
use std::path::Path;

/// Every file under `root` by its path relative to `root` (`/`-separated); empty when `root`
/// does not exist.
pub fn read_tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let (Ok(rel), Ok(bytes)) = (path.strip_prefix(root), std::fs::read(&path)) {
                out.insert(rel.display().to_string(), bytes);
            }
        }
    }
    out
}
