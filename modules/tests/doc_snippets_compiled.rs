//! Every Rust snippet a reader sees in README.md, `docs/` and `adr/` is compiled in CI.
//!
//! rustdoc compiles the fenced code blocks of a Markdown file only when some crate includes the
//! file under `#[cfg(doctest)]` (`#[doc = include_str!("…/that.md")]`), and it treats an untagged
//! fence as Rust. So a document guide stays honest only if: every fence is tagged (`rust`,
//! `rust,no_run`, `compile_fail`, or a non-Rust language such as `text`, `sh`, `toml`); no fence
//! is `ignore`d (that skips the compiler); and every file with Rust fences is included by one of
//! the crates below. This test checks those three rules.

use std::fs;
use std::path::{Path, PathBuf};

/// The `lib.rs` files that include Markdown files as doctests. A new including crate goes here.
const INCLUDING_LIBS: &[&str] = &[
    "modules/src/lib.rs",
    "harmony_cli/src/lib.rs",
    "tests/e2e/src/lib.rs",
];

/// rustdoc's code-block attributes: a fence whose every word is one of these is Rust to rustdoc
/// (and so is an untagged fence).
fn is_rustdoc_attribute(word: &str) -> bool {
    matches!(
        word,
        "rust" | "no_run" | "compile_fail" | "should_panic" | "ignore" | "test_harness"
    ) || word.starts_with("edition")
        || word.starts_with("ignore-")
        || (word.len() > 1
            && word.starts_with('E')
            && word[1..].chars().all(|c| c.is_ascii_digit()))
}

/// One opening fence: its 1-based line and its info string (the words after the backticks).
#[derive(Debug, PartialEq)]
struct Fence {
    line: usize,
    info: String,
}

/// The opening fences of a Markdown document (backtick or tilde fences, indented or not).
fn opening_fences(markdown: &str) -> Vec<Fence> {
    let mut fences = Vec::new();
    // The open fence's character and length: a fence closes on the same character, at least as
    // long, with nothing after it.
    let mut open: Option<(char, usize)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let Some(c) = trimmed.chars().next().filter(|c| *c == '`' || *c == '~') else {
            continue;
        };
        let run = trimmed.chars().take_while(|x| *x == c).count();
        if run < 3 {
            continue;
        }
        let rest = trimmed[run..].trim();
        match open {
            Some((oc, olen)) => {
                if c == oc && run >= olen && rest.is_empty() {
                    open = None;
                }
            }
            None => {
                open = Some((c, run));
                fences.push(Fence {
                    line: i + 1,
                    info: rest.to_string(),
                });
            }
        }
    }
    fences
}

/// The words of an info string (`rust,no_run` and `rust no_run` both give two).
fn words(info: &str) -> Vec<&str> {
    info.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect()
}

/// What is wrong with a fence, if anything, and whether rustdoc reads it as Rust.
fn check_fence(fence: &Fence) -> (Option<String>, bool) {
    let words = words(&fence.info);
    if words.is_empty() {
        return (
            Some(format!(
                "line {}: untagged fence (rustdoc compiles it as Rust); tag it `rust` if it is Rust, otherwise `text`, `sh`, `toml`, ...",
                fence.line
            )),
            true,
        );
    }
    if words
        .iter()
        .any(|w| *w == "ignore" || w.starts_with("ignore-"))
    {
        return (
            Some(format!(
                "line {}: fence `{}` is ignored, so it is never compiled; make it compile (`rust`, `rust,no_run`) or, if it must not compile, `compile_fail`",
                fence.line, fence.info
            )),
            true,
        );
    }
    (None, words.iter().all(|w| is_rustdoc_attribute(w)))
}

/// The repository's root (this crate is `modules/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("modules/ has a parent folder")
        .to_path_buf()
}

/// README.md, every `.md` under `docs/` (recursively) and every `.md` in `adr/`.
fn documents(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) {
        let entries =
            fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if recursive {
                    walk(&path, recursive, out);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut docs = vec![root.join("README.md")];
    walk(&root.join("docs"), true, &mut docs);
    walk(&root.join("adr"), false, &mut docs);
    docs.sort();
    docs
}

/// The Markdown files `lib` includes with `#[doc = include_str!("…")]` in an attribute block that
/// also carries `#[cfg(doctest)]`, as canonical paths.
fn doctest_includes(lib: &Path) -> Vec<PathBuf> {
    let text = fs::read_to_string(lib).unwrap_or_else(|e| panic!("reading {}: {e}", lib.display()));
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(start) = line.find("include_str!(\"") else {
            continue;
        };
        if !line.starts_with("#[doc") {
            continue;
        }
        let rel = &line[start + "include_str!(\"".len()..];
        let rel = &rel[..rel.find('"').expect("include_str!'s closing quote")];
        // The attribute block around the include: consecutive `#[...]` and `///` lines.
        let is_attr = |l: &&&str| l.starts_with("#[") || l.starts_with("///");
        let before = lines[..i].iter().rev().take_while(is_attr);
        let after = lines[i + 1..].iter().take_while(is_attr);
        let under_doctest = before.chain(after).any(|l| *l == "#[cfg(doctest)]");
        if !under_doctest {
            continue;
        }
        let path = lib.parent().expect("lib.rs has a folder").join(rel);
        let canonical = path.canonicalize().unwrap_or_else(|e| {
            panic!(
                "{} includes {rel}, which does not resolve: {e}",
                lib.display()
            )
        });
        found.push(canonical);
    }
    found
}

#[test]
fn every_fence_is_tagged_never_ignored_and_rust_files_are_compiled() {
    let root = root();
    let included: Vec<PathBuf> = INCLUDING_LIBS
        .iter()
        .flat_map(|lib| doctest_includes(&root.join(lib)))
        .collect();
    let mut problems = Vec::new();
    for doc in documents(&root) {
        let text =
            fs::read_to_string(&doc).unwrap_or_else(|e| panic!("reading {}: {e}", doc.display()));
        let shown = doc
            .strip_prefix(&root)
            .unwrap_or(&doc)
            .display()
            .to_string();
        let mut has_rust = false;
        for fence in opening_fences(&text) {
            let (problem, rust) = check_fence(&fence);
            has_rust |= rust;
            if let Some(problem) = problem {
                problems.push(format!("{shown}: {problem}"));
            }
        }
        let canonical = doc
            .canonicalize()
            .expect("a document found on disk resolves");
        if has_rust && !included.contains(&canonical) {
            problems.push(format!(
                "{shown}: has Rust fences but no crate compiles them; add `#[cfg(doctest)] #[doc = include_str!(\"…/{shown}\")] pub struct …;` to a crate whose dependencies the snippets use (and list its lib.rs in INCLUDING_LIBS in this test)"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "documentation snippets that CI would not compile:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_guard_flags_untagged_and_ignored_fences_and_recognises_rust() {
    let doc = "text\n```\nlet x = 1;\n```\n\n  ```rust,ignore\nfoo\n  ```\n~~~text\n```\n~~~\n```sh\nls\n```\n```compile_fail,E0277\nx\n```\n````rust\n```\n````\n";
    let fences = opening_fences(doc);
    let infos: Vec<&str> = fences.iter().map(|f| f.info.as_str()).collect();
    // The ``` inside the ~~~ block and inside the ```` block open nothing.
    assert_eq!(
        infos,
        [
            "",
            "rust,ignore",
            "text",
            "sh",
            "compile_fail,E0277",
            "rust"
        ]
    );
    let checked: Vec<(bool, bool)> = fences
        .iter()
        .map(|f| {
            let (problem, rust) = check_fence(f);
            (problem.is_some(), rust)
        })
        .collect();
    assert_eq!(
        checked,
        [
            (true, true),   // untagged: a problem, and Rust to rustdoc
            (true, true),   // ignore: a problem
            (false, false), // text
            (false, false), // sh
            (false, true),  // compile_fail is compiled
            (false, true),  // rust
        ]
    );
    assert_eq!(fences[1].line, 6);
}

#[test]
fn the_guard_sees_this_crates_doctest_includes() {
    let root = root();
    let includes = doctest_includes(&root.join("modules/src/lib.rs"));
    let readme = root
        .join("README.md")
        .canonicalize()
        .expect("README.md exists");
    let found: Vec<String> = includes.iter().map(|p| p.display().to_string()).collect();
    assert!(
        includes.contains(&readme),
        "modules/src/lib.rs includes README.md under #[cfg(doctest)], but the scanner found only: {}",
        found.join(", ")
    );
}
