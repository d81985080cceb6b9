//! kubectl against a test cluster, and the tables it prints.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// Where tests expect kubectl (v1.32).
pub const KUBECTL: &str = "/usr/bin/kubectl";

/// Runs `kubectl` with `args` against the cluster of `kubeconfig`, writing `stdin` to it;
/// answers whether it succeeded and its output (stdout, then stderr).
pub fn kubectl(
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> anyhow::Result<(bool, String)> {
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("kubectl (v1.32) is needed on PATH for this test: {e}"))?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text))
}

/// Runs [`KUBECTL`] with `args` against the cluster of `kubeconfig`; answers its stdout,
/// fails when it fails or is missing.
pub fn kubectl_stdout(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(KUBECTL)
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .output()
        .map_err(|e| {
            anyhow::anyhow!("{KUBECTL} cannot run ({e}): install kubectl 1.32 at {KUBECTL}")
        })?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(
        out.status.success(),
        "kubectl {args:?} failed: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(text)
}

/// The rows of a kubectl table by the header's column offsets in characters (headers may
/// hold one space: `LAST CHANGE`; columns are at least two apart): NAME → header → cell.
pub fn table(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut lines = text.lines();
    let header: Vec<char> = lines.next().unwrap_or_default().chars().collect();
    let starts: Vec<usize> = (0..header.len())
        .filter(|&i| {
            let after_gap = i >= 2 && header[i - 1] == ' ' && header[i - 2] == ' ';
            header[i] != ' ' && (i == 0 || after_gap)
        })
        .collect();
    let slice = |chars: &[char], k: usize| -> String {
        let start = starts[k].min(chars.len());
        let end = starts
            .get(k + 1)
            .map_or(chars.len(), |e| (*e).min(chars.len()));
        chars[start..end]
            .iter()
            .collect::<String>()
            .trim()
            .to_owned()
    };
    let names: Vec<String> = (0..starts.len()).map(|k| slice(&header, k)).collect();
    lines
        .map(|line| {
            let chars: Vec<char> = line.chars().collect();
            let row: BTreeMap<String, String> = names
                .iter()
                .enumerate()
                .map(|(k, n)| (n.clone(), slice(&chars, k)))
                .collect();
            (row.get("NAME").cloned().unwrap_or_default(), row)
        })
        .collect()
}
