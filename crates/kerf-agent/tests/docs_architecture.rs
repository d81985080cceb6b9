//! The rule ids the agent's source cites: each names a decision made in kerf-decide (the id
//! is cited there too) or an I/O rule, listed with its test in docs/architecture.md.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[allow(clippy::unwrap_used, clippy::expect_used)] // test helper: an unreadable tree fails the test
fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every rule id (`GR-07`, `AP-12`, ...) in `text`.
#[allow(clippy::unwrap_used, clippy::expect_used)] // test helper: an unreadable tree fails the test
fn rule_ids(text: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\b(?:GR|AP|RB|EV)-\d{2}\b").unwrap();
    re.find_iter(text).map(|m| m.as_str().to_owned()).collect()
}

#[allow(clippy::unwrap_used, clippy::expect_used)] // test helper: an unreadable tree fails the test
fn ids_in(dir: &str) -> BTreeSet<String> {
    let mut files = Vec::new();
    rs_files(&root().join(dir), &mut files);
    files
        .iter()
        .flat_map(|f| rule_ids(&std::fs::read_to_string(f).unwrap()))
        .collect()
}

/// The rows of the I/O rules table of docs/architecture.md.
#[allow(clippy::unwrap_used, clippy::expect_used)] // test helper: an unreadable tree fails the test
fn io_rules() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let start = doc
        .find("### I/O rules")
        .expect("docs/architecture.md has its I/O rules");
    let section = &doc[start..];
    let end = section[4..].find("\n#").map_or(section.len(), |i| i + 4);
    section[..end]
        .lines()
        .filter(|l| l.starts_with('|'))
        .flat_map(|l| rule_ids(l.split('|').nth(1).unwrap_or_default()))
        .collect()
}

#[test]
fn every_rule_the_agent_cites_is_decided_in_kerf_decide_or_listed_as_an_io_rule() {
    let decide = ids_in("crates/kerf-decide/src");
    let io = io_rules();
    let loose: Vec<String> = ids_in("crates/kerf-agent/src")
        .into_iter()
        .filter(|id| !decide.contains(id) && !io.contains(id))
        .collect();
    assert!(
        loose.is_empty(),
        "rule ids cited only in the agent and not listed as I/O rules in docs/architecture.md: {loose:?}"
    );
}

#[test]
fn the_io_rules_table_is_read() {
    let io = io_rules();
    assert!(io.contains("AP-59") && io.contains("RB-37"), "{io:?}");
    assert!(!rule_ids("AP-5 and XX-12 and AP-591").contains("AP-59"));
}
