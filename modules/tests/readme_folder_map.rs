//! README's "Folder map" is how a newcomer finds their way: every folder it names must exist,
//! and every top-level folder and workspace member must be in it, so the map cannot drift from
//! the tree unnoticed.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// One row of the map: the folders of its first column and the backticked names of its second.
struct Row {
    folders: Vec<String>,
    named: Vec<String>,
}

/// The backticked spans of `text`, in order.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The table rows of README's "## Folder map" section (header and rule skipped).
fn folder_map() -> Vec<Row> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("\n## Folder map\n")
        .nth(1)
        .expect("README has a \"## Folder map\" section");
    let section = section.split("\n## ").next().unwrap();
    let rows: Vec<Row> = section
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            Row {
                folders: backticked(cells[1]),
                named: backticked(cells[2]),
            }
        })
        .collect();
    assert!(rows.len() > 10, "the folder map has its rows");
    rows
}

fn listed(rows: &[Row]) -> Vec<String> {
    rows.iter().flat_map(|r| r.folders.clone()).collect()
}

/// Every folder holding a file git tracks (`harmony/src/infra/`, ...), relative to the root
/// and ending in `/`. The map describes the repository, not what a previous command left in the
/// working tree (README's first command writes `harmony-out/`, the test setup `node_modules/`).
fn tracked_folders() -> BTreeSet<String> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output()
        .expect("git runs (the folder map is checked against what git tracks)");
    assert!(
        out.status.success(),
        "git ls-files: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut folders = BTreeSet::new();
    for path in String::from_utf8_lossy(&out.stdout).split('\0') {
        let mut parts: Vec<&str> = path.split('/').collect();
        parts.pop();
        for i in 1..=parts.len() {
            folders.insert(format!("{}/", parts[..i].join("/")));
        }
    }
    assert!(folders.len() > 10, "git lists the repository's folders");
    folders
}

/// Tracked subfolders of `folder` (`harmony/`) and of its `src/`, but not the ones every crate
/// has.
fn subfolders(folder: &str) -> BTreeSet<String> {
    let tracked = tracked_folders();
    let mut found = BTreeSet::new();
    for base in [folder.to_string(), format!("{folder}src/")] {
        for t in &tracked {
            if let Some(rest) = t.strip_prefix(&base)
                && let Some((name, "")) = rest.split_once('/')
                && !["src", "tests", "benches"].contains(&name)
            {
                found.insert(name.to_string());
            }
        }
    }
    found
}

#[test]
fn every_listed_folder_exists() {
    for folder in listed(&folder_map()) {
        assert!(folder.ends_with('/'), "{folder}: a folder ends with /");
        assert!(
            root().join(&folder).is_dir(),
            "README's folder map lists {folder}, which does not exist; fix the map"
        );
    }
}

#[test]
fn every_top_level_folder_and_workspace_member_is_listed() {
    let listed = listed(&folder_map());
    let covered = |path: &str| {
        let path = format!("{path}/");
        listed
            .iter()
            .any(|l| path.starts_with(l.as_str()) || l.starts_with(&path))
    };
    for folder in tracked_folders() {
        let name = folder.trim_end_matches('/');
        if !name.contains('/') && !name.starts_with('.') {
            assert!(covered(name), "{name}/ is missing from README's folder map");
        }
    }
    let workspace: toml::Table = std::fs::read_to_string(root().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let members = workspace["workspace"]["members"].as_array().unwrap();
    assert!(!members.is_empty());
    for member in members {
        let member = member.as_str().unwrap();
        assert!(
            covered(member),
            "workspace member {member} is missing from README's folder map"
        );
    }
}

/// A row naming subfolders (`http/`, `store/`) names all of them: a partial list reads as a
/// complete one.
#[test]
fn a_row_naming_subfolders_names_them_all() {
    let mut checked = 0;
    for row in folder_map() {
        let named: BTreeSet<String> = row
            .named
            .iter()
            .filter(|n| n.ends_with('/'))
            // A path from the repository's root (`harmony/templates/`) is checked by existing.
            .filter(|n| {
                let from_root = n.trim_end_matches('/').contains('/') && root().join(n).is_dir();
                !from_root
            })
            .map(|n| n.trim_end_matches('/').to_string())
            .collect();
        if named.is_empty() {
            continue;
        }
        for folder in &row.folders {
            let dir = root().join(folder);
            for n in &named {
                assert!(
                    dir.join(n).is_dir() || dir.join("src").join(n).is_dir(),
                    "README's folder map names {n}/ under {folder}, which has no such folder"
                );
            }
            let direct: BTreeSet<String> = named
                .iter()
                .filter_map(|n| n.split('/').next().map(str::to_string))
                .collect();
            for sub in subfolders(folder) {
                assert!(
                    direct.contains(&sub),
                    "{folder}{sub}/ is missing from its row in README's folder map"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 3, "rows naming subfolders were found");
}

/// The `harmony/src/infra/` row lists the adapters: every module of `infra/mod.rs`.
#[test]
fn the_infra_row_names_every_adapter() {
    let rows = folder_map();
    let row = rows
        .iter()
        .find(|r| r.folders.iter().any(|f| f == "harmony/src/infra/"))
        .expect("the map has a harmony/src/infra/ row");
    let modules = std::fs::read_to_string(root().join("harmony/src/infra/mod.rs")).unwrap();
    let modules: Vec<&str> = modules
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    assert!(modules.len() > 5);
    for m in modules {
        assert!(
            row.named.iter().any(|n| n == m),
            "harmony/src/infra/{m} is missing from the infra row of README's folder map"
        );
    }
}
