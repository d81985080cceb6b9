//! The documentation's own links: every relative link of README.md, CHANGELOG.md and
//! docs/ names a file of the repository, and every `#anchor` a heading of its page.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pages checked: the README, the CHANGELOG and every page of docs/ and docs/contracts/.
#[allow(clippy::unwrap_used, clippy::panic)] // test helper: a failure fails the test
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md"), root().join("CHANGELOG.md")];
    for dir in ["docs", "docs/contracts"] {
        let entries = std::fs::read_dir(root().join(dir)).unwrap();
        pages.extend(
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "md")),
        );
    }
    pages.sort();
    pages
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor of a heading: lowercase, spaces as hyphens, other punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(page: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(page).unwrap_or_default();
    prose(&text)
        .into_iter()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| slug(h.trim_start_matches('#')))
        .collect()
}

/// The targets of the inline links `[text](target)` on `line`.
fn link_targets(line: &str) -> Vec<&str> {
    line.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect()
}

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug(" What the RBAC grants, and why"),
        "what-the-rbac-grants-and-why"
    );
    assert_eq!(slug(" `kerf-sim serve`"), "kerf-sim-serve");
    assert_eq!(
        slug(" Revert: back to the template's values"),
        "revert-back-to-the-templates-values"
    );
}

#[test]
fn every_relative_link_names_a_file_and_a_heading() {
    let mut bad = Vec::new();
    let pages = pages();
    assert!(pages.len() > 10, "too few pages: {pages:?}");
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for line in prose(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
                let dir = page.parent().unwrap();
                let linked = if file.is_empty() {
                    page.clone()
                } else {
                    dir.join(file)
                };
                let shown = page.strip_prefix(root()).unwrap_or(page).display();
                if !linked.exists() {
                    bad.push(format!("{shown}: {target}: no such file"));
                } else if !anchor.is_empty()
                    && linked.extension().is_some_and(|x| x == "md")
                    && !anchors(&linked).contains(anchor)
                {
                    bad.push(format!("{shown}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
