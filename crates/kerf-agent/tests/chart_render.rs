//! The chart rendered by `helm template`, fed to the agent: the Deployment's env and the
//! ConfigMap's files go to `kerf-agent run --print-settings` as a pod would get them.
//! Needs helm: `KERF_HELM` (set by .ci/run after `make chart-lint`) or `helm` on PATH;
//! without one the checks are reported as not run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_yaml::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn helm() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KERF_HELM").map(PathBuf::from) {
        return p.exists().then_some(p);
    }
    let found = Command::new("helm").arg("version").output().ok()?;
    found.status.success().then(|| PathBuf::from("helm"))
}

/// Every document of `helm template` with `args`.
fn render(helm: &Path, args: &[&str]) -> Res<Vec<Value>> {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/kerf-agent");
    let out = Command::new(helm)
        .args(["template", "kerf-agent"])
        .arg(chart)
        .args(["-n", "kerf-system", "--set", "clusterName=prod"])
        .args(args)
        .output()?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    let text = String::from_utf8(out.stdout)?;
    let mut docs = Vec::new();
    for de in serde_yaml::Deserializer::from_str(&text) {
        let v = Value::deserialize(de)?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> Res<&'a Value> {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .ok_or_else(|| format!("no {kind} rendered").into())
}

/// The settings the agent reads from the rendered Deployment and ConfigMap.
fn settings(docs: &[Value]) -> Res<serde_json::Value> {
    let dir = tempfile::tempdir()?;
    let cm = kind(docs, "ConfigMap")?;
    if let Some(Value::Mapping(data)) = cm.get("data") {
        for (k, v) in data {
            let (Some(k), Some(v)) = (k.as_str(), v.as_str()) else {
                continue;
            };
            std::fs::write(dir.path().join(k), v)?;
        }
    }
    let container = &kind(docs, "Deployment")?["spec"]["template"]["spec"]["containers"][0];
    let mut env = BTreeMap::new();
    for e in container["env"].as_sequence().into_iter().flatten() {
        if let (Some(n), Some(v)) = (e["name"].as_str(), e["value"].as_str()) {
            let v = v.replace("/etc/kerf/config", &dir.path().display().to_string());
            env.insert(n.to_owned(), v);
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kerf-agent"))
        .env_clear()
        .envs(&env)
        .args(["run", "--print-settings"])
        .output()?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

// rule: GR-25, AP-55, AP-57
#[test]
fn rendered_defaults_reach_the_agent() {
    let Some(helm) = helm() else {
        eprintln!("helm not found (KERF_HELM or PATH): rendered chart not checked");
        return;
    };
    let docs = render(&helm, &[]).unwrap();
    let s = settings(&docs).unwrap();
    assert_eq!(s["tolerance"], "5%", "{s}");
    assert_eq!(s["onDelete"]["maxPodDeletesPerRun"], 1, "{s}");
    assert_eq!(s["onDelete"]["settle"], "30s", "{s}");
    assert_eq!(s["freeze"]["now"], false, "{s}");
    assert_eq!(s["freeze"]["windows"], serde_json::json!([]), "{s}");
    assert!(s["clusterDefaults"].is_null(), "{s}");
    assert_eq!(s["clusterName"], "prod");
    assert_eq!(s["namespace"], "kerf-system");
    let hook = kind(&docs, "MutatingWebhookConfiguration").unwrap();
    assert_eq!(hook["webhooks"][0]["failurePolicy"], Value::from("Ignore"));
    assert_eq!(hook["webhooks"][0]["timeoutSeconds"], Value::from(2));
}

// rule: AP-40, AP-41, GR-37
#[test]
fn rendered_freeze_and_cluster_defaults_reach_the_agent() {
    let Some(helm) = helm() else {
        eprintln!("helm not found (KERF_HELM or PATH): rendered chart not checked");
        return;
    };
    let docs = render(
        &helm,
        &[
            "--set",
            "freeze.now=true",
            "--set-json",
            r#"freeze.windows=[{"start":"2026-12-23T00:00:00Z","end":"2027-01-02T00:00:00Z"}]"#,
            "--set-json",
            r#"clusterDefaults={"mode":"audit","guardrails":{"minMemory":"64Mi"}}"#,
            "--set",
            "webhook.certManager.enabled=true",
        ],
    )
    .unwrap();
    let s = settings(&docs).unwrap();
    assert_eq!(s["freeze"]["now"], true, "{s}");
    assert_eq!(
        s["freeze"]["windows"][0]["start"], "2026-12-23T00:00:00Z",
        "{s}"
    );
    assert_eq!(s["clusterDefaults"]["mode"], "audit", "{s}");
    assert_eq!(
        s["clusterDefaults"]["guardrails"]["minMemory"], "64Mi",
        "{s}"
    );
    assert!(kind(&docs, "Certificate").is_ok());
}
