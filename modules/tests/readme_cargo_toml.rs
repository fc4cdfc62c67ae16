//! README's "Using Harmony from your own crate" gives an outside crate its Cargo.toml lines:
//! they must name packages that exist at those paths, with the workspace's edition and minimum
//! Rust, so a user copying them gets a crate that resolves.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// The ```toml block of README's "Using Harmony from your own crate" section.
fn readme_toml() -> toml::Table {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("## Using Harmony from your own crate")
        .nth(1)
        .expect("README has a \"Using Harmony from your own crate\" section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the section has a ```toml block");
    block.parse().expect("the block is valid TOML")
}

#[test]
fn readme_cargo_lines_name_the_workspace_packages_edition_and_minimum_rust() {
    let readme = readme_toml();
    let workspace: toml::Table = std::fs::read_to_string(root().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let package = &workspace["workspace"]["package"];
    assert_eq!(readme["package"]["edition"], package["edition"]);
    assert_eq!(readme["package"]["rust-version"], package["rust-version"]);

    let deps = readme["dependencies"].as_table().unwrap();
    for name in ["harmony", "harmony_modules", "harmony_cli"] {
        let path = deps[name]["path"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} has a path"));
        // The README assumes the clone sits beside the user's crate, named `harmony`.
        let inside = path
            .strip_prefix("../harmony/")
            .unwrap_or_else(|| panic!("{name}: {path} is not under ../harmony/"));
        let manifest: toml::Table = std::fs::read_to_string(root().join(inside).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{name}: {inside}/Cargo.toml: {e}"))
            .parse()
            .unwrap();
        assert_eq!(manifest["package"]["name"].as_str(), Some(name), "{inside}");
    }
    // What the README's Score and main use beyond Harmony.
    for name in ["async-trait", "serde_json", "tokio"] {
        assert!(
            deps.contains_key(name),
            "{name} is missing from the README's lines"
        );
    }
    let features: Vec<&str> = deps["tokio"]["features"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    for needed in ["macros", "rt-multi-thread"] {
        assert!(features.contains(&needed), "tokio needs {needed}");
    }
}
