//! Names the commit the agent is built from (`kerf-agent --version`) in the variable
//! `KERF_BUILD_COMMIT`: git's short hash, else `KERF_COMMIT`, else `unknown`, so that a
//! build from a source tarball without `.git` works.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build/commit.rs"]
mod commit;

fn main() {
    println!("cargo:rerun-if-changed=build/commit.rs");
    println!("cargo:rerun-if-env-changed=KERF_COMMIT");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let git = git_commit(&manifest);
    let env = std::env::var("KERF_COMMIT").ok();
    let name = commit::chosen(git.as_deref(), env.as_deref());
    println!("cargo:rustc-env=KERF_BUILD_COMMIT={name}");
}

/// The output of `git args` run in `dir`, trimmed; `None` when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// HEAD's short hash when the workspace is itself the top of a git checkout (not a
/// tarball unpacked inside another repository); asks cargo to run this script again when
/// HEAD or the branch it points to moves.
fn git_commit(manifest: &Path) -> Option<String> {
    let workspace = manifest.join("../..").canonicalize().ok()?;
    let top = PathBuf::from(git(manifest, &["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != workspace {
        return None;
    }
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    watched.extend(git(manifest, &["symbolic-ref", "-q", "HEAD"]));
    for name in &watched {
        // A path cargo cannot find would make it run this script on every build.
        let path = git(manifest, &["rev-parse", "--git-path", name]).map(|p| manifest.join(p));
        if let Some(path) = path.filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    git(manifest, &["rev-parse", "--short", "HEAD"])
}
