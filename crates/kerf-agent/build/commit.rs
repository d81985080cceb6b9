//! The commit a build names in `kerf-agent --version`: shared by `build.rs` and its test.

/// The commit to name: git's short hash when the source is a git checkout, else the
/// `KERF_COMMIT` variable (a build from a source tarball or a container build without
/// `.git`), else `unknown`. Blank values count as absent.
pub fn chosen(git: Option<&str>, env: Option<&str>) -> String {
    [git, env]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|c| {
            !c.is_empty()
                && c.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '.' || ch == '-')
        })
        .unwrap_or("unknown")
        .to_owned()
}
