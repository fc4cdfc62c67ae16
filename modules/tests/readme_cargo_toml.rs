//! README's "Using Harmony from your own crate" gives an outside crate its Cargo.toml lines:
//! they must name packages that exist at those paths, with the workspace's edition and minimum
//! Rust, so a user copying them gets a crate that resolves.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// README's "Using Harmony from your own crate" section, up to the next section.
fn readme_section() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("## Using Harmony from your own crate")
        .nth(1)
        .expect("README has a \"Using Harmony from your own crate\" section");
    section.split("\n## ").next().unwrap().to_string()
}

/// The ```toml block of README's "Using Harmony from your own crate" section.
fn readme_toml() -> toml::Table {
    let section = readme_section();
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

fn manifest(folder: &str) -> toml::Table {
    std::fs::read_to_string(root().join(folder).join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap()
}

/// The README's optional profile is the workspace's: a user who copies it gets the cold build
/// docs/benchmarks.md measures.
#[test]
fn readme_profile_is_the_workspace_profile() {
    let readme = readme_toml();
    let workspace = manifest(".");
    assert_eq!(
        readme.get("profile"),
        workspace.get("profile"),
        "README's [profile.dev] lines differ from the workspace Cargo.toml's"
    );
}

/// Every Cargo feature of `harmony` and `harmony_modules` is named in the section (so a user can
/// find the one a module needs), and every feature the section enables exists.
#[test]
fn readme_names_every_cargo_feature_and_only_real_ones() {
    let section = readme_section();
    for (folder, package) in [("harmony", "harmony"), ("modules", "harmony_modules")] {
        let features = manifest(folder)["features"].as_table().unwrap().clone();
        for name in features.keys().filter(|n| n.as_str() != "default") {
            assert!(
                section.contains(&format!("`{name}`")),
                "{package}'s feature `{name}` is not named in README's \"Using Harmony from your own crate\""
            );
        }
        // `package = { path = "...", features = ["a", "b"] }` anywhere in the section.
        for line in section.split(&format!("{package} = {{")).skip(1) {
            let Some(list) = line
                .split('}')
                .next()
                .and_then(|dep| dep.split("features = [").nth(1))
                .and_then(|rest| rest.split(']').next())
            else {
                continue;
            };
            for name in list.split(',').map(|f| f.trim().trim_matches('"')) {
                assert!(
                    features.contains_key(name),
                    "README enables {package} feature \"{name}\", which {folder}/Cargo.toml does not define"
                );
            }
        }
    }
}
