//! `kerf-agent --version`: the workspace's version and the commit the binary was built
//! from, named by git, else by `KERF_COMMIT`, else `unknown` (build.rs).

use std::path::Path;
use std::process::Command;

#[path = "../build/commit.rs"]
mod commit;

#[test]
fn version_prints_the_workspace_version_and_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_kerf-agent"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    // Built from a checkout: the commit is git's; from a tarball, whatever was given.
    let commit = head.unwrap_or_else(|| commit::chosen(None, option_env!("KERF_COMMIT")));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(line, format!("kerf-agent {version} (commit {commit})"));
}

#[test]
fn the_commit_is_gits_else_the_variables_else_unknown() {
    assert_eq!(commit::chosen(Some("6b1b166"), Some("abc")), "6b1b166");
    assert_eq!(commit::chosen(None, Some(" 0a1b2c3\n")), "0a1b2c3");
    assert_eq!(
        commit::chosen(Some(""), Some("v0.1.0-3-g0a1b2c3")),
        "v0.1.0-3-g0a1b2c3"
    );
    assert_eq!(commit::chosen(None, Some("  ")), "unknown");
    assert_eq!(commit::chosen(None, None), "unknown");
    // Nothing that would break the version line or a label.
    assert_eq!(commit::chosen(None, Some("a b\")")), "unknown");
}
