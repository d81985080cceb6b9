//! One version for the crate, the binary, the chart and the image (docs/versioning.md), and
//! `scripts/release.sh`, which checks and sets it. The script runs on copies of the
//! repository's files (`KERF_RELEASE_ROOT`), never on the repository itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[allow(clippy::unwrap_used, clippy::panic)] // test helper: a failure fails the test
fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The value after `key` on the first line of `text` that starts with it, unquoted.
#[allow(clippy::unwrap_used, clippy::panic)] // test helper: a failure fails the test
fn field(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .unwrap_or_else(|| panic!("no line starting {key:?}"))
}

/// The version of package `name` in a Cargo.lock.
#[allow(clippy::unwrap_used, clippy::panic)] // test helper: a failure fails the test
fn locked(lock: &str, name: &str) -> String {
    let at = lock
        .find(&format!("name = \"{name}\"\nversion = "))
        .unwrap_or_else(|| panic!("{name} is not in the lock file"));
    field(lock[at..].lines().nth(1).unwrap_or_default(), "version = ")
}

/// `scripts/release.sh args` with `dir` as the repository.
#[allow(clippy::unwrap_used, clippy::panic)] // test helper: a failure fails the test
fn release(dir: &Path, args: &[&str]) -> Output {
    Command::new("bash")
        .arg(root().join("scripts/release.sh"))
        .args(args)
        .env("KERF_RELEASE_ROOT", dir)
        .env("KERF_RELEASE_DATE", "2026-12-04")
        .output()
        .unwrap()
}

const VERSION_FILES: &[&str] = &[
    "Cargo.toml",
    "Cargo.lock",
    "Dockerfile",
    "CHANGELOG.md",
    "charts/kerf-agent/Chart.yaml",
    "charts/kerf-agent/values.yaml",
];

/// A temporary copy of `files` of the repository.
#[allow(clippy::unwrap_used, clippy::panic)] // test helper: a failure fails the test
fn copy_of(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in files {
        let to = dir.path().join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root().join(f), &to).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    dir
}

#[test]
fn every_version_is_the_crates() {
    let want = env!("CARGO_PKG_VERSION");
    let r = root();
    let chart = read(&r, "charts/kerf-agent/Chart.yaml");
    let values = read(&r, "charts/kerf-agent/values.yaml");
    let image = values.split("\nimage:\n").nth(1).unwrap_or_default();
    let lock = read(&r, "Cargo.lock");
    let found = [
        ("Chart.yaml version", field(&chart, "version:")),
        ("Chart.yaml appVersion", field(&chart, "appVersion:")),
        ("values.yaml image.tag", field(image, "  tag:")),
        (
            "Dockerfile VERSION",
            field(&read(&r, "Dockerfile"), "ARG VERSION="),
        ),
        ("Cargo.lock kerf-agent", locked(&lock, "kerf-agent")),
        ("Cargo.lock kerf-api", locked(&lock, "kerf-api")),
    ];
    for (place, version) in found {
        assert_eq!(version, want, "{place}");
    }
    let out = release(&r, &["check"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want);
}

#[test]
fn the_changelog_keeps_a_changelog() {
    let log = read(&root(), "CHANGELOG.md");
    assert!(log.starts_with("# Changelog\n"), "the title");
    assert!(
        log.contains("\n## [Unreleased]\n"),
        "the Unreleased section"
    );
    let version = env!("CARGO_PKG_VERSION");
    // Before its release the version's notes are the Unreleased section's.
    let released = log.contains(&format!("\n## [{version}] - "));
    let unreleased = log.split("\n## [Unreleased]\n").nth(1).unwrap_or_default();
    let notes = unreleased.split("\n## [").next().unwrap_or_default();
    assert!(
        released || notes.lines().any(|l| l.starts_with("- ")),
        "CHANGELOG.md has neither a {version} section nor notes under Unreleased"
    );
}

#[test]
fn release_refuses_a_version_that_is_not_semantic() {
    let copy = copy_of(VERSION_FILES);
    for bad in [
        "1.2",
        "v0.2.0",
        "0.2",
        "01.2.3",
        "0.2.0+build.1",
        "0.2.0-",
        "latest",
        "",
    ] {
        let out = release(copy.path(), &[bad]);
        assert!(!out.status.success(), "{bad:?} was taken");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("not a semantic version") || (bad.is_empty() && err.contains("usage")),
            "{bad:?}: {err}"
        );
    }
    for f in VERSION_FILES {
        assert_eq!(read(copy.path(), f), read(&root(), f), "{f} was changed");
    }
}

#[test]
fn release_check_names_each_file_that_disagrees() {
    let copy = copy_of(VERSION_FILES);
    let chart = copy.path().join("charts/kerf-agent/Chart.yaml");
    let text = read(copy.path(), "charts/kerf-agent/Chart.yaml");
    let app = format!("appVersion: \"{}\"", env!("CARGO_PKG_VERSION"));
    std::fs::write(&chart, text.replace(&app, "appVersion: \"9.9.9\"")).unwrap();
    for args in [&["check"][..], &["9.9.10"]] {
        let out = release(copy.path(), args);
        assert!(!out.status.success(), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("disagree") && err.contains("appVersion") && err.contains("9.9.9"));
    }
}

#[test]
fn release_refuses_an_older_version() {
    let copy = copy_of(VERSION_FILES);
    let out = release(copy.path(), &["0.0.1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("older than the current"));
}

/// The repository's files as git knows them (tracked and new), or `None` outside a checkout.
fn checkout_files() -> Option<Vec<String>> {
    let out = Command::new("git")
        .args(["ls-files", "-co", "--exclude-standard"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.lines()
            .filter(|f| root().join(f).is_file())
            .map(str::to_owned)
            .collect(),
    )
}

#[test]
fn release_sets_every_version_dates_the_changelog_and_names_the_tag() {
    let Some(files) = checkout_files() else {
        eprintln!("skipped: not a git checkout, the copy needs its file list");
        return;
    };
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let copy = copy_of(&files);
    let out = release(copy.path(), &["7.8.9-rc.1"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("git push origin v7.8.9-rc.1"));
    let check = release(copy.path(), &["check"]);
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "7.8.9-rc.1");
    let lock = read(copy.path(), "Cargo.lock");
    assert_eq!(locked(&lock, "kerf-e2e"), "7.8.9-rc.1");
    let log = read(copy.path(), "CHANGELOG.md");
    assert!(
        log.contains("## [Unreleased]\n\n## [7.8.9-rc.1] - 2026-12-04\n"),
        "{log}"
    );
    assert!(log.contains(
        "[Unreleased]: https://github.com/getkerf/kerf-agent/compare/v7.8.9-rc.1...HEAD"
    ));
    let notes = release(copy.path(), &["notes", "7.8.9-rc.1"]);
    let notes = String::from_utf8_lossy(&notes.stdout);
    let unreleased = read(&root(), "CHANGELOG.md");
    let first_note = unreleased
        .lines()
        .find(|l| l.starts_with("- "))
        .unwrap_or_default();
    assert!(
        notes.contains(first_note) && !notes.contains("## ["),
        "{notes}"
    );
    assert!(!release(copy.path(), &["notes", "7.8.8"]).status.success());
    // Released once: the same version again is refused.
    let again = release(copy.path(), &["7.8.9-rc.1"]);
    assert!(!again.status.success());
}
